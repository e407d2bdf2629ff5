//! `X-HYPER-SIGNATURE` request signing and verification, byte-compatible with
//! hyper's queue and the `createHyperVerify` helper of npm `hyper-connect`.
//!
//! Format: `X-HYPER-SIGNATURE: t=<unix ms>,sig=<hex HMAC-SHA256(secret, t + "." + body)>`
//! with `t` first, `sig` second, a bare `,` between them and lowercase hex.
//!
//! `createHyperVerify` does not hash the raw body: it hashes
//! `JSON.stringify(parsedBody)`. Signing the body is therefore only
//! compatible when the body already is canonical JSON
//! (see [`crate::json::canonicalize`]), which is what hookq sends.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// HTTP header carrying the signature.
pub const HEADER: &str = "X-HYPER-SIGNATURE";

type HmacSha256 = Hmac<Sha256>;

/// Why a signature header was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("malformed {HEADER} header: {0}")]
    Malformed(&'static str),
    #[error("{HEADER} signature does not match the body")]
    Mismatch,
    #[error(
        "{HEADER} timestamp {timestamp_ms} is outside the {tolerance_ms} ms tolerance (now {now_ms})"
    )]
    Expired {
        timestamp_ms: u64,
        now_ms: u64,
        tolerance_ms: u64,
    },
}

fn mac(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> HmacSha256 {
    // HMAC is defined for keys of any length (long keys are hashed), so this
    // constructor cannot fail for Hmac<Sha256>.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(timestamp_ms.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// Lowercase hex HMAC-SHA256 of `"{timestamp_ms}.{body}"`.
pub fn sign(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    hex::encode(mac(secret, timestamp_ms, body).finalize().into_bytes())
}

/// Full header value: `t=<timestamp_ms>,sig=<hex>`.
pub fn header_value(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    format!("t={timestamp_ms},sig={}", sign(secret, timestamp_ms, body))
}

/// A parsed `X-HYPER-SIGNATURE` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    pub timestamp_ms: u64,
    /// Raw HMAC bytes (32 for SHA-256).
    pub signature: Vec<u8>,
}

impl SignatureHeader {
    /// Parses `t=<digits>,sig=<64 hex digits>`. Whitespace around either
    /// part is tolerated (hyper-connect tolerates `", sig="` too); hex may be
    /// upper or lower case. Anything else is rejected.
    pub fn parse(value: &str) -> Result<Self, SignatureError> {
        let (t_part, sig_part) = value
            .split_once(',')
            .ok_or(SignatureError::Malformed("expected `t=<ms>,sig=<hex>`"))?;
        let t = t_part
            .trim()
            .strip_prefix("t=")
            .ok_or(SignatureError::Malformed("first part must be `t=<ms>`"))?;
        let sig = sig_part
            .trim()
            .strip_prefix("sig=")
            .ok_or(SignatureError::Malformed("second part must be `sig=<hex>`"))?;
        // u64::from_str would also accept a leading '+'.
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SignatureError::Malformed(
                "timestamp must be decimal digits",
            ));
        }
        let timestamp_ms = t
            .parse()
            .map_err(|_| SignatureError::Malformed("timestamp out of range"))?;
        let signature = hex::decode(sig)
            .map_err(|_| SignatureError::Malformed("signature must be hexadecimal"))?;
        if signature.len() != 32 {
            return Err(SignatureError::Malformed(
                "signature must be 64 hex digits (HMAC-SHA256)",
            ));
        }
        Ok(SignatureHeader {
            timestamp_ms,
            signature,
        })
    }
}

impl std::fmt::Display for SignatureHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "t={},sig={}",
            self.timestamp_ms,
            hex::encode(&self.signature)
        )
    }
}

/// Verifies `header_value` for `body` (the exact bytes received).
///
/// The MAC is checked first, in constant time, so `Expired` is only ever
/// reported for authentic requests; then the timestamp must lie within
/// `tolerance` of `now_ms` in either direction (boundary inclusive), which
/// limits replays while allowing some clock skew.
pub fn verify(
    secret: &[u8],
    header_value: &str,
    body: &[u8],
    now_ms: u64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let header = SignatureHeader::parse(header_value)?;
    mac(secret, header.timestamp_ms, body)
        .verify_slice(&header.signature)
        .map_err(|_| SignatureError::Mismatch)?;
    let tolerance_ms = u64::try_from(tolerance.as_millis()).unwrap_or(u64::MAX);
    if header.timestamp_ms.abs_diff(now_ms) > tolerance_ms {
        return Err(SignatureError::Expired {
            timestamp_ms: header.timestamp_ms,
            now_ms,
            tolerance_ms,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"s3cret";
    const T: u64 = 1_700_000_000_000;
    const BODY: &[u8] = br#"{"hello":"world"}"#;
    /// printf '%s' '1700000000000.{"hello":"world"}' | openssl dgst -sha256 -hmac s3cret
    /// (same result from Python's hmac module)
    const EXPECTED: &str = "1a5ef72bb2b144704cfa5ff596d84b63047a5357fda08f7c4312ab4d6b03f608";
    const FIVE_MIN: Duration = Duration::from_secs(300);

    #[test]
    fn known_vector() {
        assert_eq!(sign(SECRET, T, BODY), EXPECTED);
        assert_eq!(
            header_value(SECRET, T, BODY),
            format!("t={T},sig={EXPECTED}")
        );
        // printf '%s' '0.' | openssl dgst -sha256 -hmac ''
        assert_eq!(
            sign(b"", 0, b""),
            "b849d5a581847b281957065739df36df2463d1977ea8d6e1e4e6cf33fadc68c3"
        );
    }

    #[test]
    fn round_trip() {
        let header = header_value(SECRET, T, BODY);
        assert_eq!(verify(SECRET, &header, BODY, T, FIVE_MIN), Ok(()));
        let parsed = SignatureHeader::parse(&header).unwrap();
        assert_eq!(parsed.timestamp_ms, T);
        assert_eq!(parsed.to_string(), header);
        // Uppercase hex and a space after the comma are accepted.
        let loose = format!("t={T}, sig={}", EXPECTED.to_uppercase());
        assert_eq!(verify(SECRET, &loose, BODY, T, FIVE_MIN), Ok(()));
    }

    #[test]
    fn tampering_is_rejected() {
        let header = header_value(SECRET, T, BODY);
        let mismatch = Err(SignatureError::Mismatch);
        assert_eq!(
            verify(SECRET, &header, br#"{"hello":"World"}"#, T, FIVE_MIN),
            mismatch
        );
        assert_eq!(verify(b"s3cret ", &header, BODY, T, FIVE_MIN), mismatch);
        let other_t = format!("t={},sig={EXPECTED}", T + 1);
        assert_eq!(verify(SECRET, &other_t, BODY, T, FIVE_MIN), mismatch);
        let mut flipped = EXPECTED.to_owned();
        flipped.replace_range(63.., "9");
        let flipped = format!("t={T},sig={flipped}");
        assert_eq!(verify(SECRET, &flipped, BODY, T, FIVE_MIN), mismatch);
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let sig = EXPECTED;
        for bad in [
            String::new(),
            "garbage".to_owned(),
            format!("sig={sig},t={T}"),
            format!("t={T};sig={sig}"),
            format!("t={T}"),
            format!("t=,sig={sig}"),
            format!("t=+{T},sig={sig}"),
            format!("t=-1,sig={sig}"),
            format!("t=1.5,sig={sig}"),
            format!("t=99999999999999999999999,sig={sig}"),
            format!("t={T},sig="),
            format!("t={T},sig={}", &sig[..62]),
            format!("t={T},sig={sig}00"),
            format!("t={T},sig={}g", &sig[..63]),
            format!("t={T},sig={sig},v=1"),
            format!("T={T},SIG={sig}"),
        ] {
            assert!(
                matches!(
                    verify(SECRET, &bad, BODY, T, FIVE_MIN),
                    Err(SignatureError::Malformed(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn tolerance_boundaries() {
        let header = header_value(SECRET, T, BODY);
        let tol = Duration::from_millis(1000);
        let check = |now| verify(SECRET, &header, BODY, now, tol);
        assert_eq!(check(T + 1000), Ok(()));
        assert_eq!(check(T - 1000), Ok(()), "small clock skew is fine");
        let expired = |now_ms| {
            Err(SignatureError::Expired {
                timestamp_ms: T,
                now_ms,
                tolerance_ms: 1000,
            })
        };
        assert_eq!(check(T + 1001), expired(T + 1001));
        assert_eq!(check(T - 1001), expired(T - 1001));
        assert_eq!(check(0), expired(0));
        // Huge tolerance saturates instead of overflowing.
        assert_eq!(
            verify(SECRET, &header, BODY, u64::MAX, Duration::MAX),
            Ok(())
        );
        // A forged header reports Mismatch even when also stale.
        let forged = format!("t=1,sig={EXPECTED}");
        assert_eq!(
            verify(SECRET, &forged, BODY, T, tol),
            Err(SignatureError::Mismatch)
        );
    }

    /// Signs in Rust, verifies with hyper-connect's `createHyperVerify` in
    /// Node (and the reverse: a Node-made header verified in Rust). Needs
    /// node + npm and registry access for `npm install hyper-connect@0.12.0`
    /// (cached in $TMPDIR, or point HYPER_CONNECT_DIR at a directory that
    /// has it in node_modules). Skipped when unavailable unless `CI` is set.
    #[test]
    fn differential_against_hyper_connect() {
        use std::process::Command;

        fn unavailable(why: String) {
            assert!(std::env::var_os("CI").is_none(), "CI requires: {why}");
            eprintln!("skipping hyper-connect differential test: {why}");
        }

        let dir = std::env::var_os("HYPER_CONNECT_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("hookq-hyper-connect-0.12.0"));
        if !dir.join("node_modules/hyper-connect").exists() {
            let _ = std::fs::create_dir_all(&dir);
            let install = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .arg("hyper-connect@0.12.0")
                .output();
            match install {
                Ok(out) if out.status.success() => {}
                Ok(out) => {
                    return unavailable(format!(
                        "npm install failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                Err(e) => return unavailable(format!("cannot run npm: {e}")),
            }
        }

        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let bodies = [
            r#"{"hello":"world"}"#,
            r#"{"1":true,"b":[1,2.5,1e+21,null],"a":"é 😀 \"\n"}"#,
            "[]",
            r#""just a string""#,
        ];
        let mut cases = Vec::new();
        for body in bodies {
            let body = crate::json::canonicalize(body.as_bytes()).unwrap();
            let good = header_value(SECRET, now, body.as_bytes());
            let bad = header_value(b"wrong", now, body.as_bytes());
            cases
                .push(serde_json::json!({ "header": good, "body": body.as_str(), "expect": true }));
            cases
                .push(serde_json::json!({ "header": bad, "body": body.as_str(), "expect": false }));
        }
        let script = r#"
            const { createHmac } = require("crypto");
            const { createHyperVerify } = require("hyper-connect");
            const [secret, cases] = JSON.parse(require("fs").readFileSync(0, "utf8"));
            const verify = createHyperVerify(secret, "5m");
            const results = cases.map(({ header, body }) => {
                const payload = JSON.parse(body);
                // The way hyper's queue signs: t = ms, HMAC over JSON.stringify(job).
                const t = Date.now();
                const sig = createHmac("sha256", secret).update(`${t}.${JSON.stringify(payload)}`).digest("hex");
                return { ok: verify(header, payload).ok === true, nodeHeader: `t=${t},sig=${sig}` };
            });
            process.stdout.write(JSON.stringify(results));
        "#;
        let input = serde_json::json!([std::str::from_utf8(SECRET).unwrap(), cases]).to_string();
        let mut child = match Command::new("node")
            .arg("-e")
            .arg(script)
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return unavailable(format!("cannot run node: {e}")),
        };
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "node failed");
        let results: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(results.len(), cases.len());
        for (case, result) in cases.iter().zip(&results) {
            assert_eq!(result["ok"], case["expect"], "hyper-connect on {case}");
            let node_header = result["nodeHeader"].as_str().unwrap();
            let body = case["body"].as_str().unwrap().as_bytes();
            let later = now + 60_000;
            assert_eq!(verify(SECRET, node_header, body, later, FIVE_MIN), Ok(()));
        }
    }
}
