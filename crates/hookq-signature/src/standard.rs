//! [Standard Webhooks](https://www.standardwebhooks.com/) signatures: the `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` headers, as Svix, OpenAI and the official
//! `standardwebhooks` libraries (npm, PyPI, crates.io, …) send and check them.
//!
//! ```text
//! webhook-id: <message id>
//! webhook-timestamp: <unix seconds>
//! webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//! ```
//!
//! The key is the secret's bytes: a secret is written `whsec_` + base64 of 24–64 random
//! bytes, and those decoded bytes key the HMAC (not the text). During a rotation the
//! signature header carries several signatures, space-separated (`v1,<a> v1,<b>`); a
//! verifier accepts the message when any of them matches.
//!
//! ```
//! use std::time::Duration;
//!
//! use hookq_signature::standard::{self, Secret};
//!
//! let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
//! let body = br#"{"hello":"world"}"#;
//! let header = standard::signature_header([&secret], "msg_1", 1_700_000_000, body);
//! assert!(header.starts_with("v1,"));
//! let five_min = Duration::from_secs(300);
//! assert_eq!(
//!     standard::verify(&secret, "msg_1", "1700000000", &header, body, 1_700_000_060, five_min),
//!     Ok(())
//! );
//! assert_eq!(
//!     standard::verify(&secret, "msg_2", "1700000000", &header, body, 1_700_000_060, five_min),
//!     Err(standard::VerifyError::Mismatch)
//! );
//! ```

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{KeyInit, Mac};

use crate::HmacSha256;

/// The message id header: the same on every retry of one message.
pub const ID_HEADER: &str = "webhook-id";
/// The signing time, unix seconds.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// One or more `v1,<base64>` signatures, space-separated.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// The fewest key bytes a secret may hold (the spec's minimum).
pub const MIN_KEY_BYTES: usize = 24;
/// The most key bytes a secret may hold (the spec's maximum).
pub const MAX_KEY_BYTES: usize = 64;

/// A Standard Webhooks secret: the key bytes of `whsec_<base64>`. Does not print.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// Parses `whsec_` followed by the standard base64, padded, of 24 to 64 bytes (the
    /// form every official library decodes; npm's refuses base64 without its padding).
    ///
    /// # Errors
    ///
    /// A message saying what is wrong (never repeating the secret): no `whsec_` prefix,
    /// not base64, or a key of the wrong length.
    pub fn parse(secret: &str) -> Result<Self, &'static str> {
        let encoded = secret
            .strip_prefix(SECRET_PREFIX)
            .ok_or("a Standard Webhooks secret starts with `whsec_`")?;
        let key = BASE64.decode(encoded).map_err(|_| {
            "the part after `whsec_` must be standard base64 (A-Z, a-z, 0-9, +, /, padded \
                 with =)"
        })?;
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
            return Err("the part after `whsec_` must decode to 24 to 64 bytes");
        }
        Ok(Self { key })
    }

    /// A secret of these key bytes (any length: the length rules are for parsing).
    pub fn from_key(key: impl Into<Vec<u8>>) -> Self {
        Self { key: key.into() }
    }

    /// The key bytes the HMAC is keyed with.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The secret written as `whsec_<base64>`.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", BASE64.encode(&self.key))
    }

    fn mac(&self, id: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
        let mut mac =
            HmacSha256::new_from_slice(&self.key).expect("HMAC accepts keys of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

/// One signature, `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`.
pub fn sign(secret: &Secret, id: &str, timestamp_s: u64, body: &[u8]) -> String {
    let mac = secret.mac(id, &timestamp_s.to_string(), body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` value: one signature per secret, in the order given,
/// space-separated (the newest secret first during a rotation).
pub fn signature_header<'a>(
    secrets: impl IntoIterator<Item = &'a Secret>,
    id: &str,
    timestamp_s: u64,
    body: &[u8],
) -> String {
    secrets
        .into_iter()
        .map(|secret| sign(secret, id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why [`verify`] refused a message. Answer every one the same way (`401`); the variants
/// are for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// A header is missing or not of its form; the text says which.
    Malformed(&'static str),
    /// No `v1` signature in the header was made with this secret over this id, timestamp
    /// and body.
    Mismatch,
    /// A signature matches, but the timestamp is further from now than allowed.
    Expired {
        /// `webhook-timestamp`, unix seconds.
        timestamp_s: u64,
        /// The verifier's clock, unix seconds.
        now_s: u64,
        /// The tolerance, seconds.
        tolerance_s: u64,
    },
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "malformed Standard Webhooks headers: {why}"),
            Self::Mismatch => write!(f, "no {SIGNATURE_HEADER} signature matches the message"),
            Self::Expired {
                timestamp_s,
                now_s,
                tolerance_s,
            } => write!(
                f,
                "{TIMESTAMP_HEADER} {timestamp_s} is outside the {tolerance_s} s tolerance (now {now_s})"
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Verifies one message: `id`, `timestamp` and `signatures` are the values of the
/// `webhook-id`, `webhook-timestamp` and `webhook-signature` headers, `body` the request
/// body exactly as received.
///
/// Every `v1,<base64>` entry of `signatures` is compared in constant time (entries of
/// other versions are skipped, as the spec asks); one match is enough. Then the timestamp
/// must lie within `tolerance` of `now_s` either way (5 minutes is the spec's default).
///
/// # Errors
///
/// [`VerifyError::Malformed`] for an empty id, a timestamp that is not decimal seconds or a
/// header without any `v1` entry; [`VerifyError::Mismatch`] when no entry matches;
/// [`VerifyError::Expired`] for an authentic but stale (or future) message.
pub fn verify(
    secret: &Secret,
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now_s: u64,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    if id.is_empty() {
        return Err(VerifyError::Malformed("webhook-id is empty"));
    }
    if timestamp.is_empty() || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::Malformed(
            "webhook-timestamp must be unix seconds in decimal digits",
        ));
    }
    let timestamp_s: u64 = timestamp
        .parse()
        .map_err(|_| VerifyError::Malformed("webhook-timestamp out of range"))?;
    let candidates: Vec<&str> = signatures
        .split(' ')
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .map(|(_, signature)| signature)
        .collect();
    if candidates.is_empty() {
        return Err(VerifyError::Malformed(
            "webhook-signature holds no `v1,<base64>` signature",
        ));
    }
    let mac = secret.mac(id, timestamp, body);
    let matched = candidates.iter().any(|candidate| {
        BASE64
            .decode(candidate)
            .is_ok_and(|bytes| mac.clone().verify_slice(&bytes).is_ok())
    });
    if !matched {
        return Err(VerifyError::Mismatch);
    }
    let tolerance_s = tolerance.as_secs();
    if timestamp_s.abs_diff(now_s) > tolerance_s {
        return Err(VerifyError::Expired {
            timestamp_s,
            now_s,
            tolerance_s,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks spec's example secret and message
    /// (spec/standard-webhooks.md, "Signature scheme").
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: u64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    const FIVE_MIN: Duration = Duration::from_secs(300);

    fn secret() -> Secret {
        Secret::parse(SECRET).unwrap()
    }

    #[test]
    fn the_specs_example_signs_as_the_spec_says() {
        assert_eq!(sign(&secret(), ID, TS, BODY), EXPECTED);
        assert_eq!(secret().to_whsec(), SECRET);
        assert_eq!(
            verify(&secret(), ID, &TS.to_string(), EXPECTED, BODY, TS, FIVE_MIN),
            Ok(())
        );
    }

    #[test]
    fn the_official_rust_librarys_vector_signs_alike() {
        // libraries/rust of the standard-webhooks repository, `test_sign`.
        let secret = Secret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            sign(
                &secret,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn any_matching_v1_entry_is_enough() {
        let other = Secret::from_key(vec![7u8; 32]);
        let both = signature_header([&other, &secret()], ID, TS, BODY);
        assert_eq!(both.split(' ').count(), 2);
        let ts = TS.to_string();
        assert_eq!(
            verify(&secret(), ID, &ts, &both, BODY, TS, FIVE_MIN),
            Ok(())
        );
        assert_eq!(verify(&other, ID, &ts, &both, BODY, TS, FIVE_MIN), Ok(()));
        let stranger = Secret::from_key(vec![9u8; 32]);
        assert_eq!(
            verify(&stranger, ID, &ts, &both, BODY, TS, FIVE_MIN),
            Err(VerifyError::Mismatch)
        );
        // Other versions are skipped, not matched.
        let v2 = EXPECTED.replacen("v1,", "v2,", 1);
        assert!(matches!(
            verify(&secret(), ID, &ts, &v2, BODY, TS, FIVE_MIN),
            Err(VerifyError::Malformed(_))
        ));
        let mixed = format!("v1a,xyz {EXPECTED}");
        assert_eq!(
            verify(&secret(), ID, &ts, &mixed, BODY, TS, FIVE_MIN),
            Ok(())
        );
    }

    #[test]
    fn tampering_and_staleness_are_refused() {
        let ts = TS.to_string();
        let check = |id: &str, ts: &str, body: &[u8], now| {
            verify(&secret(), id, ts, EXPECTED, body, now, FIVE_MIN)
        };
        assert_eq!(
            check("msg_other", &ts, BODY, TS),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            check(ID, &(TS + 1).to_string(), BODY, TS),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(check(ID, &ts, b"{}", TS), Err(VerifyError::Mismatch));
        assert_eq!(check(ID, &ts, BODY, TS + 300), Ok(()));
        assert_eq!(check(ID, &ts, BODY, TS - 300), Ok(()));
        assert_eq!(
            check(ID, &ts, BODY, TS + 301),
            Err(VerifyError::Expired {
                timestamp_s: TS,
                now_s: TS + 301,
                tolerance_s: 300
            })
        );
        for bad_ts in ["", "+1", "1.5", "-3", "99999999999999999999999"] {
            assert!(matches!(
                check(ID, bad_ts, BODY, TS),
                Err(VerifyError::Malformed(_))
            ));
        }
        assert!(matches!(
            check("", &ts, BODY, TS),
            Err(VerifyError::Malformed(_))
        ));
    }

    #[test]
    fn secrets_are_whsec_base64_of_24_to_64_bytes() {
        let of = |n: usize| format!("whsec_{}", BASE64.encode(vec![1u8; n]));
        assert!(Secret::parse(&of(24)).is_ok());
        assert!(Secret::parse(&of(64)).is_ok());
        assert!(Secret::parse(&of(23)).is_err());
        assert!(Secret::parse(&of(65)).is_err());
        assert!(Secret::parse("s3cret").is_err());
        assert!(Secret::parse("whsec_not base64!").is_err());
        // Padded, as npm's standardwebhooks needs it.
        let padded = of(25);
        assert!(padded.ends_with('='));
        assert!(Secret::parse(&padded).is_ok());
        assert!(Secret::parse(padded.trim_end_matches('=')).is_err());
        assert_eq!(format!("{:?}", secret()), "Secret(<redacted>)");
    }
}
