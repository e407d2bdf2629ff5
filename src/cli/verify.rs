//! `hookq verify`: check an `X-HYPER-SIGNATURE` header against a body and a secret with
//! [`crate::signature::verify`], the check a worker makes. No server involved.

use std::io::{IsTerminal, Read};

use anyhow::Context;

use super::{CliError, CliResult, Outcome, VerifyArgs};
use crate::model::now_millis;
use crate::signature::{self, SignatureError};

pub fn run(args: &VerifyArgs) -> CliResult<Outcome> {
    let body = match &args.body_file {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read the body from {}", path.display()))?,
        None => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(CliError::Usage(
                    "give the body with --body-file, or pipe it on stdin".into(),
                ));
            }
            let mut body = Vec::new();
            stdin
                .read_to_end(&mut body)
                .context("cannot read the body from stdin")?;
            body
        }
    };
    let header = strip_header_name(&args.header);
    let now = u64::try_from(now_millis()).unwrap_or(0);
    let secret = args.secret.as_bytes();
    match signature::verify(secret, header, &body, now, args.tolerance) {
        Ok(()) => {
            let signed_at = signature::SignatureHeader::parse(header)
                .map(|h| h.timestamp_ms)
                .unwrap_or(now);
            let signed_at = i64::try_from(signed_at).unwrap_or(i64::MAX);
            println!(
                "valid: signed at {} ({})",
                crate::humanize::time(signed_at),
                crate::humanize::relative(signed_at)
            );
            Ok(Outcome::Ok)
        }
        Err(err) => {
            eprintln!("invalid: {err}");
            if err == SignatureError::Mismatch
                && let Some(trimmed) = body.strip_suffix(b"\n")
                && signature::verify(secret, header, trimmed, now, args.tolerance).is_ok()
            {
                eprintln!(
                    "hint: without its final newline the body matches; was it written with \
                     `echo` instead of `printf '%s'`?"
                );
            }
            Ok(Outcome::Failed)
        }
    }
}

/// Accept a whole header line as copied from a log: `X-HYPER-SIGNATURE: t=…,sig=…`.
fn strip_header_name(raw: &str) -> &str {
    let raw = raw.trim();
    match raw.split_once(':') {
        Some((name, value)) if name.trim().eq_ignore_ascii_case(signature::HEADER) => value.trim(),
        _ => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_line_is_accepted_as_well_as_its_value() {
        assert_eq!(strip_header_name("t=1,sig=ab"), "t=1,sig=ab");
        assert_eq!(
            strip_header_name("x-hyper-signature: t=1,sig=ab "),
            "t=1,sig=ab"
        );
    }
}
