//! Queue secrets at rest: sealed with ChaCha20-Poly1305 under `HOOKQ_MASTER_KEY`, bound to
//! their queue's name, and readable with the previous key during a rotation.
//!
//! The stored form is text, versioned: `v1:<key id>:<base64(nonce ‖ ciphertext ‖ tag)>`.
//! - `key id`: the first 8 hex digits of SHA-256(key), so the right key is picked (and a
//!   value sealed with a key the server does not have is named, not mistaken for garbage);
//! - `nonce`: 96 random bits from the OS, new for every seal;
//! - the associated data is the queue name: a sealed secret copied onto another queue's row
//!   does not open;
//! - the plaintext is framed as `u16 length ‖ bytes ‖ zeros` padded to a multiple of 64
//!   bytes, which hides the secret's length and makes every sealed value longer than
//!   [`Secret::MAX_LEN`] characters.
//!
//! That last point keeps the two forms apart: a queue secret is at most
//! [`Secret::MAX_LEN`] characters, so a stored value is sealed exactly when it starts with
//! `v1:` *and* is longer than that; anything else is a plain secret (databases written
//! without a master key keep working, and no secret a client chooses can pass for a
//! sealed value).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, Generate, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce};
use sha2::{Digest, Sha256};

use crate::model::Secret;

/// The prefix of the current sealed format.
const PREFIX: &str = "v1:";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Framed plaintexts are padded to a multiple of this many bytes.
const BLOCK: usize = 64;

/// A 256-bit master key. Does not print.
#[derive(Clone)]
pub struct MasterKey {
    key: [u8; 32],
    id: String,
}

impl MasterKey {
    pub fn from_bytes(key: [u8; 32]) -> Self {
        let digest = Sha256::digest(key);
        let id = hex::encode(&digest[..4]);
        Self { key, id }
    }

    /// 32 bytes written as 64 hex characters (`openssl rand -hex 32`). The error never
    /// repeats the value.
    pub fn parse_hex(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.len() != 64 {
            return Err(format!(
                "must be 32 bytes written as 64 hex characters (generate one with \
                 `openssl rand -hex 32`); got {} characters",
                raw.chars().count()
            ));
        }
        let mut key = [0u8; 32];
        hex::decode_to_slice(raw, &mut key).map_err(|_| {
            "must be 32 bytes written as 64 hex characters (0-9, a-f); it contains other \
             characters"
                .to_owned()
        })?;
        Ok(Self::from_bytes(key))
    }

    /// The first 8 hex digits of SHA-256(key): names the key in sealed values and logs.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(&Key::from(self.key))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MasterKey(id {}, <redacted>)", self.id)
    }
}

/// The master keys a store runs with: none (secrets stored in clear), or a current key
/// (every secret sealed with it) and optionally the previous one (still opens, during a
/// rotation).
#[derive(Debug, Clone, Default)]
pub struct Sealing {
    current: Option<MasterKey>,
    previous: Option<MasterKey>,
}

impl Sealing {
    /// No master key: secrets are stored in clear, and sealed values cannot be opened.
    pub fn none() -> Self {
        Self::default()
    }

    /// Seal with `current`; values sealed with `previous` still open.
    pub fn new(current: MasterKey, previous: Option<MasterKey>) -> Self {
        Self {
            current: Some(current),
            previous,
        }
    }

    pub fn current(&self) -> Option<&MasterKey> {
        self.current.as_ref()
    }

    /// The keys that open sealed values, current first.
    pub fn keys(&self) -> Vec<&MasterKey> {
        self.current.iter().chain(self.previous.iter()).collect()
    }

    /// The form to store `secret` of queue `queue` in: sealed with the current key, or as
    /// is without one.
    pub fn to_stored(&self, secret: &str, queue: &str) -> String {
        match &self.current {
            Some(key) => seal(key, secret, queue),
            None => secret.to_owned(),
        }
    }

    /// Whether a stored value should be rewritten (re-sealed with the current key): it is
    /// plain or sealed with another key while a current key is set.
    pub fn needs_reseal(&self, stored: &str) -> bool {
        match &self.current {
            Some(key) => sealed_key_id(stored) != Some(key.id()),
            None => false,
        }
    }
}

/// Why a stored secret cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(
        "it is encrypted (key id {key_id}) but no master key is configured: \
         set HOOKQ_MASTER_KEY to the key it was sealed with"
    )]
    NoKey { key_id: String },
    #[error(
        "it is encrypted with a master key that is not configured (key id {key_id}; \
         configured: {configured}): set HOOKQ_MASTER_KEY (or, during a rotation, \
         HOOKQ_MASTER_KEY_PREVIOUS) to that key"
    )]
    UnknownKey { key_id: String, configured: String },
    #[error("it is not a well-formed encrypted value ({0})")]
    Malformed(&'static str),
    #[error(
        "it does not decrypt with key {key_id}: the value was altered, or it belongs to \
         another queue"
    )]
    Tampered { key_id: String },
}

/// Seal `plaintext` with `key`, bound to `aad` (the queue name).
pub fn seal(key: &MasterKey, plaintext: &str, aad: &str) -> String {
    let nonce = Nonce::generate();
    let framed = frame(plaintext.as_bytes());
    let ciphertext = key
        .cipher()
        .encrypt(
            &nonce,
            Payload {
                msg: &framed,
                aad: aad.as_bytes(),
            },
        )
        // Encryption fails only for messages over 256 GiB.
        .expect("ChaCha20-Poly1305 encrypts a short message");
    let mut blob = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    blob.extend_from_slice(&nonce);
    blob.extend_from_slice(&ciphertext);
    format!("{PREFIX}{}:{}", key.id(), STANDARD.encode(blob))
}

/// Whether `stored` is a sealed value (else it is a plain secret). See the module docs.
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX) && stored.chars().count() > Secret::MAX_LEN
}

/// The id of the key a sealed value was sealed with; `None` for a plain value.
pub fn sealed_key_id(stored: &str) -> Option<&str> {
    if !is_sealed(stored) {
        return None;
    }
    stored[PREFIX.len()..].split(':').next()
}

/// Read a stored secret of queue `aad`: open it with whichever of `keys` sealed it, or
/// return it as is when it is plain.
pub fn open(keys: &[&MasterKey], stored: &str, aad: &str) -> Result<String, OpenError> {
    if !is_sealed(stored) {
        return Ok(stored.to_owned());
    }
    let (key_id, encoded) = stored[PREFIX.len()..]
        .split_once(':')
        .ok_or(OpenError::Malformed("no key id"))?;
    if key_id.len() != 8
        || !key_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(OpenError::Malformed("the key id is not 8 hex digits"));
    }
    let Some(key) = keys.iter().find(|k| k.id() == key_id) else {
        return Err(if keys.is_empty() {
            OpenError::NoKey {
                key_id: key_id.to_owned(),
            }
        } else {
            OpenError::UnknownKey {
                key_id: key_id.to_owned(),
                configured: keys.iter().map(|k| k.id()).collect::<Vec<_>>().join(", "),
            }
        });
    };
    let blob = STANDARD
        .decode(encoded)
        .map_err(|_| OpenError::Malformed("not base64"))?;
    if blob.len() < NONCE_LEN + TAG_LEN + BLOCK {
        return Err(OpenError::Malformed("too short"));
    }
    let (nonce, ciphertext) = blob.split_at(NONCE_LEN);
    let nonce = Nonce::try_from(nonce).map_err(|_| OpenError::Malformed("bad nonce"))?;
    let tampered = || OpenError::Tampered {
        key_id: key_id.to_owned(),
    };
    let framed = key
        .cipher()
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| tampered())?;
    let plaintext = unframe(&framed).ok_or_else(tampered)?;
    String::from_utf8(plaintext.to_vec()).map_err(|_| tampered())
}

/// `u16 length ‖ bytes ‖ zeros`, a multiple of [`BLOCK`] bytes.
fn frame(bytes: &[u8]) -> Vec<u8> {
    let len = u16::try_from(bytes.len()).expect("a queue secret is at most 400 bytes");
    let padded = (2 + bytes.len()).div_ceil(BLOCK).max(1) * BLOCK;
    let mut framed = Vec::with_capacity(padded);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(bytes);
    framed.resize(padded, 0);
    framed
}

fn unframe(framed: &[u8]) -> Option<&[u8]> {
    let (len, rest) = framed.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    let (bytes, padding) = rest.split_at_checked(len)?;
    padding.iter().all(|&b| b == 0).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> MasterKey {
        MasterKey::from_bytes([byte; 32])
    }

    #[test]
    fn a_sealed_secret_opens_with_its_key_and_queue() {
        let k = key(1);
        let sealed = seal(&k, "hunter2", "orders");
        assert!(sealed.starts_with(&format!("v1:{}:", k.id())), "{sealed}");
        assert!(!sealed.contains("hunter2"));
        assert!(is_sealed(&sealed));
        assert_eq!(sealed_key_id(&sealed), Some(k.id()));
        assert_eq!(open(&[&k], &sealed, "orders").unwrap(), "hunter2");
        // A fresh nonce every time.
        assert_ne!(seal(&k, "hunter2", "orders"), sealed);
    }

    #[test]
    fn every_secret_length_round_trips_and_hides_its_length() {
        let k = key(2);
        let short = seal(&k, "x", "q");
        assert_eq!(seal(&k, &"y".repeat(40), "q").len(), short.len());
        assert!(short.len() > Secret::MAX_LEN, "{}", short.len());
        for secret in ["x", "é", &"z".repeat(62), &"z".repeat(63), &"é".repeat(100)] {
            let secret = secret.to_owned();
            let sealed = seal(&k, &secret, "q");
            assert_eq!(open(&[&k], &sealed, "q").unwrap(), secret);
        }
        // Secrets that look like the prefix are still plain (too short to be sealed).
        let tricky = format!("v1:{}:{}", k.id(), "A".repeat(80));
        assert!(!is_sealed(&tricky));
        assert_eq!(open(&[&k], &tricky, "q").unwrap(), tricky);
    }

    #[test]
    fn the_previous_key_still_opens() {
        let (old, new) = (key(1), key(2));
        let sealed = seal(&old, "s3cret", "q");
        assert_eq!(open(&[&new, &old], &sealed, "q").unwrap(), "s3cret");
        let sealing = Sealing::new(new.clone(), Some(old.clone()));
        assert!(sealing.needs_reseal(&sealed));
        assert!(!sealing.needs_reseal(&seal(&new, "s3cret", "q")));
        assert!(sealing.needs_reseal("plain"));
        assert!(!Sealing::none().needs_reseal("plain"));
        assert!(!Sealing::none().needs_reseal(&sealed));
    }

    #[test]
    fn a_wrong_key_is_named_not_guessed() {
        let sealed = seal(&key(1), "s3cret", "q");
        let err = open(&[&key(2)], &sealed, "q").unwrap_err();
        assert!(
            matches!(&err, OpenError::UnknownKey { key_id, .. } if key_id == key(1).id()),
            "{err:?}"
        );
        assert!(err.to_string().contains(key(2).id()), "{err}");
        let err = open(&[], &sealed, "q").unwrap_err();
        assert!(matches!(err, OpenError::NoKey { .. }), "{err:?}");
        assert!(err.to_string().contains("set HOOKQ_MASTER_KEY"), "{err}");
    }

    #[test]
    fn a_secret_moved_to_another_queue_does_not_open() {
        let k = key(3);
        let sealed = seal(&k, "s3cret", "orders");
        let err = open(&[&k], &sealed, "payments").unwrap_err();
        assert!(matches!(err, OpenError::Tampered { .. }), "{err:?}");
    }

    #[test]
    fn a_tampered_value_does_not_open() {
        let k = key(4);
        let sealed = seal(&k, "s3cret", "q");
        let (head, encoded) = sealed.rsplit_once(':').unwrap();
        let mut blob = STANDARD.decode(encoded).unwrap();
        for i in [0, NONCE_LEN, blob.len() - 1] {
            blob[i] ^= 1;
            let altered = format!("{head}:{}", STANDARD.encode(&blob));
            let err = open(&[&k], &altered, "q").unwrap_err();
            assert!(
                matches!(err, OpenError::Tampered { .. }),
                "byte {i}: {err:?}"
            );
            blob[i] ^= 1;
        }
        // Truncated, or not base64 at all.
        let truncated = format!("{head}:{}", STANDARD.encode(&blob[..blob.len() - 20]));
        assert!(open(&[&k], &truncated, "q").is_err());
        let garbage = format!("{head}:{}", "!".repeat(120));
        assert_eq!(
            open(&[&k], &garbage, "q").unwrap_err(),
            OpenError::Malformed("not base64")
        );
    }

    #[test]
    fn plain_values_pass_through() {
        assert_eq!(open(&[], "hunter2", "q").unwrap(), "hunter2");
        assert_eq!(open(&[&key(1)], "hunter2", "q").unwrap(), "hunter2");
        assert_eq!(sealed_key_id("hunter2"), None);
        assert_eq!(Sealing::none().to_stored("hunter2", "q"), "hunter2");
        let sealing = Sealing::new(key(1), None);
        let stored = sealing.to_stored("hunter2", "q");
        assert_eq!(open(&sealing.keys(), &stored, "q").unwrap(), "hunter2");
    }

    #[test]
    fn master_keys_are_64_hex_characters_and_do_not_print() {
        let hex = "00".repeat(32);
        let k = MasterKey::parse_hex(&hex).unwrap();
        assert_eq!(k.id(), &hex::encode(Sha256::digest([0u8; 32]))[..8]);
        assert!(!format!("{k:?}").contains(&hex));
        let err = MasterKey::parse_hex("abcd").unwrap_err();
        assert!(
            err.contains("64 hex characters") && err.contains("got 4"),
            "{err}"
        );
        let err = MasterKey::parse_hex(&"zz".repeat(32)).unwrap_err();
        assert!(!err.contains("zz"), "{err}");
    }
}
