//! Sign and verify the `X-HYPER-SIGNATURE` header of hookq webhooks, byte-compatible with
//! hyper's queue and the `createHyperVerify` helper of npm `hyper-connect`; and, in
//! [`standard`], the [Standard Webhooks](https://www.standardwebhooks.com/) headers
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature`) a queue may send instead or
//! besides.
//!
//! Every delivery hookq makes carries
//!
//! ```text
//! X-HYPER-SIGNATURE: t=<unix ms>,sig=<hex HMAC-SHA256(secret, t + "." + body)>
//! ```
//!
//! with `t` first, `sig` second, a bare `,` between them and lowercase hex. A worker
//! recomputes the HMAC over the body bytes exactly as received, compares it in constant
//! time, and refuses timestamps too far from its own clock, which limits replays.
//!
//! `createHyperVerify` does not hash the raw body: it hashes `JSON.stringify(parsedBody)`.
//! Signing the body is therefore only compatible when the body already is canonical JSON
//! (the form `JSON.stringify` produces), and that is what hookq sends: it canonicalizes
//! every job before it stores it.
//!
//! The crate depends on `base64`, `hex`, `hmac` and `sha2` only: no runtime, no server, no
//! JSON.
//!
//! # Example
//!
//! A worker checking one delivery with a 5-minute tolerance. Pass the raw body bytes,
//! never JSON you parsed and serialized again: that may change the bytes and so the HMAC.
//!
//! ```
//! use std::time::{Duration, SystemTime, UNIX_EPOCH};
//!
//! use hookq_signature::{SignatureError, verify};
//!
//! /// How far the signing time may be from the worker's clock, either way.
//! const TOLERANCE: Duration = Duration::from_secs(5 * 60);
//!
//! fn now_ms() -> u64 {
//!     let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
//!     u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
//! }
//!
//! /// `header` is the value of the `X-HYPER-SIGNATURE` header ([`hookq_signature::HEADER`]),
//! /// `body` the request body exactly as received.
//! fn authenticate(secret: &[u8], header: &str, body: &[u8]) -> Result<(), SignatureError> {
//!     verify(secret, header, body, now_ms(), TOLERANCE)
//! }
//!
//! // What hookq sends for a job `{"hello":"world"}` signed with the queue's secret,
//! // a minute ago and ten minutes ago:
//! let secret = b"the queue's secret";
//! let body = br#"{"hello":"world"}"#;
//! let fresh = hookq_signature::header_value(secret, now_ms() - 60_000, body);
//! let stale = hookq_signature::header_value(secret, now_ms() - 600_000, body);
//!
//! assert_eq!(authenticate(secret, &fresh, body), Ok(()));
//! // Answer anything else with 401 and do not run the job.
//! assert_eq!(
//!     authenticate(secret, &fresh, br#"{"hello":"World"}"#),
//!     Err(SignatureError::Mismatch)
//! );
//! assert_eq!(authenticate(b"another secret", &fresh, body), Err(SignatureError::Mismatch));
//! assert!(matches!(
//!     authenticate(secret, &stale, body),
//!     Err(SignatureError::Expired { .. })
//! ));
//! assert!(matches!(
//!     authenticate(secret, "t=1,sig=nothex", body),
//!     Err(SignatureError::Malformed(_))
//! ));
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Name of the HTTP header carrying the signature. Header names are case-insensitive
/// (HTTP/2 sends them in lowercase, `x-hyper-signature`).
pub const HEADER: &str = "X-HYPER-SIGNATURE";

type HmacSha256 = Hmac<Sha256>;

pub mod standard;

/// Why a signature header was not accepted by [`verify`] (or [`SignatureHeader::parse`]).
///
/// A worker should answer every one of them the same way (typically `401`) and not run
/// the job; the variants exist for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureError {
    /// The header is not `t=<digits>,sig=<64 hex digits>`; the text says which part is off.
    Malformed(&'static str),
    /// The header is well formed but its signature was not made with this secret over
    /// this body and timestamp.
    Mismatch,
    /// The signature is authentic but its timestamp is further from now than allowed
    /// (a replayed or badly delayed request).
    Expired {
        /// The header's `t`, unix milliseconds.
        timestamp_ms: u64,
        /// The verifier's clock, unix milliseconds.
        now_ms: u64,
        /// The tolerance it was checked against.
        tolerance_ms: u64,
    },
}

impl std::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "malformed {HEADER} header: {why}"),
            Self::Mismatch => write!(f, "{HEADER} signature does not match the body"),
            Self::Expired {
                timestamp_ms,
                now_ms,
                tolerance_ms,
            } => write!(
                f,
                "{HEADER} timestamp {timestamp_ms} is outside the {tolerance_ms} ms tolerance (now {now_ms})"
            ),
        }
    }
}

impl std::error::Error for SignatureError {}

fn mac(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> HmacSha256 {
    // HMAC is defined for keys of any length (long keys are hashed), so this
    // constructor cannot fail for Hmac<Sha256>.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(timestamp_ms.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// Lowercase hex HMAC-SHA256, keyed with `secret`, of `"{timestamp_ms}.{body}"`:
/// the `sig` part of the header.
///
/// `timestamp_ms` is written in decimal without leading zeros; `body` is hashed byte for
/// byte. Keys of any length are accepted (HMAC hashes keys longer than a block).
pub fn sign(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    hex::encode(mac(secret, timestamp_ms, body).finalize().into_bytes())
}

/// The whole header value, `t=<timestamp_ms>,sig=<hex>`, exactly as hookq sends it.
///
/// `timestamp_ms` is the signing time in unix milliseconds; see [`sign`] for the `sig`.
pub fn header_value(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    format!("t={timestamp_ms},sig={}", sign(secret, timestamp_ms, body))
}

/// A parsed `X-HYPER-SIGNATURE` value, not yet checked against any secret.
///
/// Its [`Display`](std::fmt::Display) form is the canonical header value:
/// `t=<timestamp_ms>,sig=<lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    /// The signing time, unix milliseconds.
    pub timestamp_ms: u64,
    /// Raw HMAC bytes (32 for SHA-256).
    pub signature: Vec<u8>,
}

impl SignatureHeader {
    /// Parses `t=<digits>,sig=<64 hex digits>`. Whitespace around either
    /// part is tolerated (hyper-connect tolerates `", sig="` too); hex may be
    /// upper or lower case. Anything else is rejected.
    ///
    /// # Errors
    ///
    /// [`SignatureError::Malformed`], saying which part is off, when `value` is not of
    /// that form: parts missing, in the other order or separated by something else than
    /// `,`; a timestamp that is not plain decimal digits or does not fit a `u64`; a
    /// signature that is not exactly 64 hex digits.
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
///
/// `now_ms` is the verifier's clock in unix milliseconds; a tolerance of 5 minutes suits
/// most deployments (a tolerance too large to express in milliseconds means "any time").
///
/// # Errors
///
/// - [`SignatureError::Malformed`] when `header_value` cannot be parsed (see
///   [`SignatureHeader::parse`]);
/// - [`SignatureError::Mismatch`] when the signature was not made with `secret` over
///   this body and timestamp;
/// - [`SignatureError::Expired`] when it was, but the timestamp is more than
///   `tolerance` away from `now_ms`.
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
}
