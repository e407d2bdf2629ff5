//! `hookq::json::canonicalize` on arbitrary bytes.
//!
//! Checks: never panics; success is idempotent (the output canonicalizes to itself);
//! serde_json agrees on what is JSON (anything canonicalize refuses, serde_json refuses
//! too; anything serde_json accepts, canonicalize accepts) and on what it means (input and
//! output parse to the same value in JavaScript's data model: every number a double,
//! objects unordered with the last duplicate winning). The only inputs canonicalize accepts
//! and serde_json refuses are numbers out of the double range (JS turns them into
//! Infinity, written `null`); serde_json's own depth limit is lifted for the comparison.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn parse_unbounded(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Only called on input canonicalize accepted: at most 1000 levels deep.
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// JSON.parse's data model: numbers are doubles, keys unordered, no duplicates.
fn equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        // float_roundtrip is on: serde_json parses decimal text to the nearest double,
        // exactly as JavaScript does, so the comparison is exact (0 == -0 as in JS).
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(p), Some(q)) => p == q,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equivalent(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| equivalent(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let canonical = match hookq::json::canonicalize(data) {
        Ok(c) => c,
        Err(e) => {
            // serde_json's default depth limit (128) is below MAX_DEPTH, so this also
            // holds for TooDeep; and parsing with the limit on cannot overflow the stack.
            if let Ok(v) = serde_json::from_slice::<Value>(data) {
                panic!("canonicalize refused ({e}) what serde_json accepts: {v}");
            }
            return;
        }
    };
    let text = canonical.as_str();

    // Idempotent.
    let again = hookq::json::canonicalize(text.as_bytes())
        .unwrap_or_else(|e| panic!("output {text:?} does not canonicalize: {e}"));
    assert_eq!(again.as_str(), text, "not idempotent");

    // The output is plain JSON that serde_json reads.
    let out = parse_unbounded(text.as_bytes())
        .unwrap_or_else(|e| panic!("output {text:?} is not JSON to serde_json: {e}"));
    assert_eq!(
        canonical.is_object(),
        out.is_object(),
        "is_object() disagrees"
    );

    // Same value as the input.
    match parse_unbounded(data) {
        Ok(input) => assert!(
            equivalent(&input, &out),
            "value changed: input {:?} -> output {text:?}",
            String::from_utf8_lossy(data)
        ),
        Err(e) => assert!(
            e.to_string().starts_with("number out of range"),
            "canonicalize accepted {:?} (-> {text:?}) but serde_json refuses it: {e}",
            String::from_utf8_lossy(data)
        ),
    }
});
