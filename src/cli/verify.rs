//! `hookq verify`: check an `X-HYPER-SIGNATURE` header ([`crate::signature::verify`]) or the
//! Standard Webhooks headers ([`crate::signature::standard::verify`]) against a body and a
//! secret, the check a worker makes. No server involved.

use std::io::{IsTerminal, Read};

use anyhow::Context;

use super::{CliError, CliResult, Outcome, VerifyArgs};
use crate::model::now_millis;
use crate::signature::{self, SignatureError, standard};

pub fn run(args: &VerifyArgs) -> CliResult<Outcome> {
    let body = read_body(args)?;
    match (&args.header, &args.webhook_signature) {
        (Some(header), _) => Ok(verify_hyper(args, header, &body)),
        (None, Some(signatures)) => verify_standard(args, signatures, &body),
        (None, None) => Err(CliError::Usage(
            "give --header (X-HYPER-SIGNATURE) or --webhook-signature, --webhook-id and \
             --webhook-timestamp (Standard Webhooks)"
                .into(),
        )),
    }
}

fn read_body(args: &VerifyArgs) -> CliResult<Vec<u8>> {
    Ok(match &args.body_file {
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
    })
}

fn print_valid(signed_at_ms: i64) {
    println!(
        "valid: signed at {} ({})",
        crate::humanize::time(signed_at_ms),
        crate::humanize::relative(signed_at_ms)
    );
}

fn print_newline_hint() {
    eprintln!(
        "hint: without its final newline the body matches; was it written with \
         `echo` instead of `printf '%s'`?"
    );
}

fn verify_hyper(args: &VerifyArgs, header: &str, body: &[u8]) -> Outcome {
    let header = strip_header_name(header, signature::HEADER);
    let now = u64::try_from(now_millis()).unwrap_or(0);
    let secret = args.secret.as_bytes();
    match signature::verify(secret, header, body, now, args.tolerance) {
        Ok(()) => {
            let signed_at = signature::SignatureHeader::parse(header)
                .map(|h| h.timestamp_ms)
                .unwrap_or(now);
            print_valid(i64::try_from(signed_at).unwrap_or(i64::MAX));
            Outcome::Ok
        }
        Err(err) => {
            eprintln!("invalid: {err}");
            if err == SignatureError::Mismatch
                && let Some(trimmed) = body.strip_suffix(b"\n")
                && signature::verify(secret, header, trimmed, now, args.tolerance).is_ok()
            {
                print_newline_hint();
            }
            Outcome::Failed
        }
    }
}

fn verify_standard(args: &VerifyArgs, signatures: &str, body: &[u8]) -> CliResult<Outcome> {
    let secret = standard::Secret::parse(&args.secret).map_err(|why| {
        CliError::Usage(format!(
            "--secret is not a Standard Webhooks secret (whsec_<base64>): {why}"
        ))
    })?;
    let field = |value: &Option<String>, name: &str| {
        strip_header_name(value.as_deref().unwrap_or_default(), name).to_owned()
    };
    let id = field(&args.webhook_id, standard::ID_HEADER);
    let timestamp = field(&args.webhook_timestamp, standard::TIMESTAMP_HEADER);
    let signatures = strip_header_name(signatures, standard::SIGNATURE_HEADER);
    let now_s = u64::try_from(now_millis() / 1000).unwrap_or(0);
    let check = |body: &[u8]| {
        standard::verify(
            &secret,
            &id,
            &timestamp,
            signatures,
            body,
            now_s,
            args.tolerance,
        )
    };
    Ok(match check(body) {
        Ok(()) => {
            let signed_at = timestamp.parse::<i64>().unwrap_or(0).saturating_mul(1000);
            print_valid(signed_at);
            Outcome::Ok
        }
        Err(err) => {
            eprintln!("invalid: {err}");
            if err == standard::VerifyError::Mismatch
                && let Some(trimmed) = body.strip_suffix(b"\n")
                && check(trimmed).is_ok()
            {
                print_newline_hint();
            }
            Outcome::Failed
        }
    })
}

/// Accept a whole header line as copied from a log: `X-HYPER-SIGNATURE: t=…,sig=…`.
fn strip_header_name<'a>(raw: &'a str, header: &str) -> &'a str {
    let raw = raw.trim();
    match raw.split_once(':') {
        Some((name, value)) if name.trim().eq_ignore_ascii_case(header) => value.trim(),
        _ => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_line_is_accepted_as_well_as_its_value() {
        let hyper = signature::HEADER;
        assert_eq!(strip_header_name("t=1,sig=ab", hyper), "t=1,sig=ab");
        assert_eq!(
            strip_header_name("x-hyper-signature: t=1,sig=ab ", hyper),
            "t=1,sig=ab"
        );
        assert_eq!(
            strip_header_name("webhook-signature: v1,abc=", standard::SIGNATURE_HEADER),
            "v1,abc="
        );
    }
}
