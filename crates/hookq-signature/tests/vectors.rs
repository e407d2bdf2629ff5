//! The crate against `vectors.json`: headers whose verdicts come from `createHyperVerify`
//! of npm `hyper-connect`, recorded by `make_vectors.js` (see its header to regenerate).
//! Needs neither Node nor npm.

use std::time::Duration;

use hookq_signature::{SignatureError, SignatureHeader, header_value, sign, verify};
use serde_json::Value;

const VECTORS: &str = include_str!("vectors.json");

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vectors.json is valid JSON")
}

fn list<'a>(vectors: &'a Value, name: &str) -> &'a [Value] {
    let list = vectors[name]
        .as_array()
        .unwrap_or_else(|| panic!("vectors.json has no `{name}` list"));
    assert!(!list.is_empty(), "vectors.json: `{name}` is empty");
    list
}

fn str_field<'a>(vector: &'a Value, field: &str) -> &'a str {
    vector[field]
        .as_str()
        .unwrap_or_else(|| panic!("vector {vector} has no string `{field}`"))
}

fn u64_field(vector: &Value, field: &str) -> u64 {
    vector[field]
        .as_u64()
        .unwrap_or_else(|| panic!("vector {vector} has no integer `{field}`"))
}

fn bool_field(vector: &Value, field: &str) -> bool {
    vector[field]
        .as_bool()
        .unwrap_or_else(|| panic!("vector {vector} has no boolean `{field}`"))
}

/// The tolerance the vectors were made for (createHyperVerify's "5m").
fn tolerance(vectors: &Value) -> Duration {
    assert_eq!(vectors["create_hyper_verify_ttl"], "5m");
    Duration::from_millis(u64_field(vectors, "rust_tolerance_ms"))
}

/// The outcome as spelled in the `rust` field.
fn kind(result: &Result<(), SignatureError>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(SignatureError::Malformed(_)) => "malformed",
        Err(SignatureError::Mismatch) => "mismatch",
        Err(SignatureError::Expired { .. }) => "expired",
    }
}

#[test]
fn every_vector_accepted_by_create_hyper_verify_is_accepted_and_reproduced() {
    let vectors = vectors();
    let tolerance = tolerance(&vectors);
    for v in list(&vectors, "accepted") {
        let name = str_field(v, "name");
        let secret = str_field(v, "secret").as_bytes();
        let body = str_field(v, "body").as_bytes();
        let t = u64_field(v, "timestamp_ms");
        let header = str_field(v, "header");
        assert!(bool_field(v, "accepted_by_create_hyper_verify"), "{name}");

        assert_eq!(sign(secret, t, body), str_field(v, "sig"), "{name}: sign");
        assert_eq!(
            header_value(secret, t, body),
            header,
            "{name}: header_value"
        );
        assert_eq!(
            verify(secret, header, body, t, tolerance),
            Ok(()),
            "{name}: verify at now = its timestamp"
        );
        let parsed = SignatureHeader::parse(header).expect("a valid header parses");
        assert_eq!(parsed.timestamp_ms, t, "{name}");
        assert_eq!(parsed.to_string(), header, "{name}: Display round trip");

        // Still accepted at the edges of the 5 minutes, either way; not one ms further.
        let tol_ms = 300_000;
        assert_eq!(verify(secret, header, body, t + tol_ms, tolerance), Ok(()));
        if let Some(before) = t.checked_sub(tol_ms) {
            assert_eq!(verify(secret, header, body, before, tolerance), Ok(()));
        }
        assert!(matches!(
            verify(secret, header, body, t + tol_ms + 1, tolerance),
            Err(SignatureError::Expired { .. })
        ));
        // And bound to its secret and body.
        assert_eq!(
            verify(b"not the secret", header, body, t, tolerance),
            Err(SignatureError::Mismatch),
            "{name}"
        );
        let mut longer = body.to_vec();
        longer.push(b' ');
        assert_eq!(
            verify(secret, header, &longer, t, tolerance),
            Err(SignatureError::Mismatch),
            "{name}"
        );
    }
}

#[test]
fn every_vector_rejected_by_create_hyper_verify_is_rejected() {
    let vectors = vectors();
    let tolerance = tolerance(&vectors);
    for v in list(&vectors, "rejected") {
        let name = str_field(v, "name");
        assert!(!bool_field(v, "accepted_by_create_hyper_verify"), "{name}");
        let expected = str_field(v, "rust");
        assert_ne!(expected, "ok", "{name}: a rejected vector must be rejected");
        let result = verify(
            str_field(v, "secret").as_bytes(),
            str_field(v, "header"),
            str_field(v, "body").as_bytes(),
            u64_field(v, "now_ms"),
            tolerance,
        );
        assert_eq!(kind(&result), expected, "{name}: {result:?}");
    }
}

#[test]
fn divergent_vectors_get_the_documented_rust_verdict() {
    let vectors = vectors();
    let tolerance = tolerance(&vectors);
    for v in list(&vectors, "divergent") {
        let name = str_field(v, "name");
        let expected = str_field(v, "rust");
        assert_ne!(
            expected == "ok",
            bool_field(v, "accepted_by_create_hyper_verify"),
            "{name}: not a divergence"
        );
        let result = verify(
            str_field(v, "secret").as_bytes(),
            str_field(v, "header"),
            str_field(v, "body").as_bytes(),
            u64_field(v, "now_ms"),
            tolerance,
        );
        assert_eq!(
            kind(&result),
            expected,
            "{name} ({}): {result:?}",
            str_field(v, "note")
        );
    }
}

#[test]
fn node_agrees_with_the_openssl_known_vector() {
    // printf '%s' '1700000000000.{"hello":"world"}' | openssl dgst -sha256 -hmac s3cret
    let vectors = vectors();
    let ascii = list(&vectors, "accepted")
        .iter()
        .find(|v| v["name"] == "ascii object")
        .expect("the `ascii object` vector");
    assert_eq!(ascii["secret"], "s3cret");
    assert_eq!(ascii["body"], r#"{"hello":"world"}"#);
    assert_eq!(ascii["timestamp_ms"], 1_700_000_000_000_u64);
    assert_eq!(
        ascii["sig"],
        "1a5ef72bb2b144704cfa5ff596d84b63047a5357fda08f7c4312ab4d6b03f608"
    );
}
