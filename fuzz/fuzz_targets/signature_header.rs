//! `hookq::signature`: the `X-HYPER-SIGNATURE` header parser and the sign/verify round trip.
//!
//! The whole input, read as text, is handed to `SignatureHeader::parse` (never panics; what
//! it accepts is `t=<digits>,sig=<64 hex>` and prints back to a header that parses to the
//! same value; `verify` on it never panics). The same bytes also seed a secret, another
//! secret, a timestamp and a body: the header `header_value` makes for them always parses,
//! `verify` accepts it with the right secret, body and time, and refuses it with another
//! secret (Mismatch), another body (Mismatch) or a time outside the tolerance (Expired).
#![no_main]

use std::time::Duration;

use hookq::signature::{self, SignatureError, SignatureHeader};
use libfuzzer_sys::arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

/// HMAC pads keys shorter than the block (64 bytes) with zeros, so `k` and `k\0` are the
/// same key: not a second secret.
fn same_hmac_key(a: &[u8], b: &[u8]) -> bool {
    fn trimmed(k: &[u8]) -> &[u8] {
        let end = k.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        &k[..end]
    }
    a.len() <= 64 && b.len() <= 64 && trimmed(a) == trimmed(b)
}

fuzz_target!(|data: &[u8]| {
    // 1. The parser on arbitrary text.
    let text = String::from_utf8_lossy(data);
    if let Ok(header) = SignatureHeader::parse(&text) {
        assert_eq!(header.signature.len(), 32);
        let (t_part, _) = text
            .split_once(',')
            .expect("an accepted header has a comma");
        let t = t_part
            .trim()
            .strip_prefix("t=")
            .expect("an accepted header starts t=");
        assert!(
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()),
            "timestamp {t:?}"
        );
        let printed = header.to_string();
        assert_eq!(
            SignatureHeader::parse(&printed).as_ref(),
            Ok(&header),
            "{printed}"
        );
        let _ = signature::verify(b"k", &text, data, header.timestamp_ms, Duration::ZERO);
    }

    // 2. The round trip on values derived from the same bytes.
    let mut u = Unstructured::new(data);
    let (Ok(secret), Ok(other), Ok(t), Ok(tolerance_ms)) = (
        <&[u8]>::arbitrary(&mut u),
        <&[u8]>::arbitrary(&mut u),
        u64::arbitrary(&mut u),
        u32::arbitrary(&mut u),
    ) else {
        return;
    };
    let body = u.take_rest();
    let tolerance = Duration::from_millis(u64::from(tolerance_ms));

    let value = signature::header_value(secret, t, body);
    let header = SignatureHeader::parse(&value)
        .unwrap_or_else(|e| panic!("header_value made {value:?}, which does not parse: {e}"));
    assert_eq!(header.timestamp_ms, t);
    assert_eq!(header.to_string(), value);
    assert_eq!(
        hex_lower(&header.signature),
        signature::sign(secret, t, body)
    );

    assert_eq!(
        signature::verify(secret, &value, body, t, tolerance),
        Ok(())
    );
    // Inside the tolerance on either side, boundary included.
    let edge = u64::from(tolerance_ms);
    if let Some(now) = t.checked_add(edge) {
        assert_eq!(
            signature::verify(secret, &value, body, now, tolerance),
            Ok(())
        );
    }
    if let Some(now) = t.checked_sub(edge) {
        assert_eq!(
            signature::verify(secret, &value, body, now, tolerance),
            Ok(())
        );
    }
    // Just outside.
    if let Some(now) = t.checked_add(edge).and_then(|n| n.checked_add(1)) {
        assert!(matches!(
            signature::verify(secret, &value, body, now, tolerance),
            Err(SignatureError::Expired { .. })
        ));
    }
    // Another secret, another body.
    if !same_hmac_key(secret, other) {
        assert_eq!(
            signature::verify(other, &value, body, t, tolerance),
            Err(SignatureError::Mismatch),
            "secret {secret:?} and {other:?} give the same MAC"
        );
    }
    let mut tampered = body.to_vec();
    match tampered.first_mut() {
        Some(b) => *b ^= 1,
        None => tampered.push(b'x'),
    }
    assert_eq!(
        signature::verify(secret, &value, &tampered, t, tolerance),
        Err(SignatureError::Mismatch)
    );
    // Another timestamp in the header (the signature covers it).
    let shifted = format!(
        "t={},sig={}",
        t.wrapping_add(1),
        signature::sign(secret, t, body)
    );
    assert_eq!(
        signature::verify(secret, &shifted, body, t, Duration::MAX),
        Err(SignatureError::Mismatch)
    );
});

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
