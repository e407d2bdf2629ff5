//! PLACEHOLDER until the signature module lands (helper is writing it).
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
pub const HEADER: &str = "X-HYPER-SIGNATURE";
pub fn sign(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("any key length");
    mac.update(timestamp_ms.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}
pub fn header_value(secret: &[u8], timestamp_ms: u64, body: &[u8]) -> String {
    format!("t={timestamp_ms},sig={}", sign(secret, timestamp_ms, body))
}
