//! The signature headers of an outgoing webhook (a job's delivery, an operational event):
//! which headers a signature scheme sends and which secrets sign them, decided once for
//! both senders.
//!
//! - hyper: `X-HYPER-SIGNATURE: t=<unix ms>,sig=<hex>`, keyed with the secret's text, and
//!   only with the current secret (hyper's format has room for one signature).
//! - Standard Webhooks: `webhook-id` (the job's or event's id, the same on every attempt),
//!   `webhook-timestamp` (unix seconds of this attempt) and, with a secret,
//!   `webhook-signature: v1,<base64>`, keyed with the decoded `whsec_` bytes; during a
//!   rotation the previous secret signs too (`v1,<new> v1,<old>`).

use crate::model::{JobId, Secret, SignatureScheme, UnixMillis};
use crate::signature;
use crate::signature::standard;

/// The secrets signing one message: the current one and, during a rotation, the one it
/// replaced.
#[derive(Clone, Copy)]
pub struct SigningKeys<'a> {
    pub current: &'a Secret,
    pub previous: Option<&'a Secret>,
}

/// Whether the signatures are computed (a message to send) or only stood for (the headers
/// shown to a person, who must never see one that could be replayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signatures {
    Computed,
    Masked,
}

/// What a masked signature reads.
pub const MASKED: &str = "(signature, masked)";

/// The headers to add to message `id` (a job's, or an event's) with `body`, sent at `now`.
/// The plain path (hyper, no secret) allocates nothing.
pub fn headers(
    scheme: SignatureScheme,
    keys: Option<SigningKeys<'_>>,
    id: JobId,
    now: UnixMillis,
    body: &[u8],
    signatures: Signatures,
) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    let now_ms = u64::try_from(now).unwrap_or_default();
    if let (true, Some(keys)) = (scheme.hyper(), keys) {
        headers.push((
            signature::HEADER,
            match signatures {
                Signatures::Computed => {
                    signature::header_value(keys.current.expose().as_bytes(), now_ms, body)
                }
                Signatures::Masked => MASKED.to_owned(),
            },
        ));
    }
    if scheme.standard() {
        let seconds = now_ms / 1000;
        let id = id.to_string();
        let signature = keys.and_then(|keys| {
            // The API lets only `whsec_` secrets onto a standard queue; one that is not
            // (say, a previous secret kept from before the scheme changed) signs nothing.
            let secrets: Vec<standard::Secret> = std::iter::once(keys.current)
                .chain(keys.previous)
                .filter_map(|secret| secret.standard_key().ok())
                .collect();
            if secrets.is_empty() {
                tracing::warn!(
                    "a Standard Webhooks message has no whsec_ secret to sign with; sent unsigned"
                );
                return None;
            }
            Some(match signatures {
                Signatures::Computed => standard::signature_header(&secrets, &id, seconds, body),
                Signatures::Masked => MASKED.to_owned(),
            })
        });
        headers.push((standard::ID_HEADER, id));
        headers.push((standard::TIMESTAMP_HEADER, seconds.to_string()));
        if let Some(signature) = signature {
            headers.push((standard::SIGNATURE_HEADER, signature));
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const OLD: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX";

    fn id() -> JobId {
        JobId::parse("01a203c8-23a6-76ef-a3ff-b0ebe6d64142").unwrap()
    }

    fn names(headers: &[(&'static str, String)]) -> Vec<&'static str> {
        headers.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn each_scheme_sends_its_headers() {
        let secret = Secret::parse(NEW).unwrap();
        let keys = Some(SigningKeys {
            current: &secret,
            previous: None,
        });
        let body = b"{}";
        let at = 1_700_000_000_123;
        assert_eq!(
            names(&headers(
                SignatureScheme::Hyper,
                keys,
                id(),
                at,
                body,
                Signatures::Computed
            )),
            ["X-HYPER-SIGNATURE"]
        );
        let standard = headers(
            SignatureScheme::Standard,
            keys,
            id(),
            at,
            body,
            Signatures::Computed,
        );
        assert_eq!(
            names(&standard),
            ["webhook-id", "webhook-timestamp", "webhook-signature"]
        );
        assert_eq!(standard[1].1, "1700000000");
        assert_eq!(
            names(&headers(
                SignatureScheme::Both,
                keys,
                id(),
                at,
                body,
                Signatures::Computed
            ))
            .len(),
            4
        );
        // Unsigned: hyper sends nothing, standard its id and time.
        assert!(
            headers(
                SignatureScheme::Hyper,
                None,
                id(),
                at,
                body,
                Signatures::Computed
            )
            .is_empty()
        );
        assert_eq!(
            names(&headers(
                SignatureScheme::Standard,
                None,
                id(),
                at,
                body,
                Signatures::Computed
            )),
            ["webhook-id", "webhook-timestamp"]
        );
    }

    #[test]
    fn a_rotation_signs_standard_messages_twice_and_hyper_once() {
        let (new, old) = (Secret::parse(NEW).unwrap(), Secret::parse(OLD).unwrap());
        let keys = Some(SigningKeys {
            current: &new,
            previous: Some(&old),
        });
        let sent = headers(
            SignatureScheme::Both,
            keys,
            id(),
            1_700_000_000_000,
            b"{}",
            Signatures::Computed,
        );
        let hyper = &sent[0].1;
        assert!(!hyper.contains(' '));
        let signatures = &sent[3].1;
        let expected = standard::signature_header(
            &[new.standard_key().unwrap(), old.standard_key().unwrap()],
            &id().to_string(),
            1_700_000_000,
            b"{}",
        );
        assert_eq!(signatures, &expected);
        assert_eq!(signatures.split(' ').count(), 2);
        // A previous secret that is not a whsec_ one is left out.
        let plain = Secret::parse("s3cret").unwrap();
        let keys = Some(SigningKeys {
            current: &new,
            previous: Some(&plain),
        });
        let sent = headers(
            SignatureScheme::Standard,
            keys,
            id(),
            1_700_000_000_000,
            b"{}",
            Signatures::Computed,
        );
        assert_eq!(sent[2].1.split(' ').count(), 1);
    }

    #[test]
    fn masked_headers_are_the_same_headers_without_a_signature_in_them() {
        let secret = Secret::parse(NEW).unwrap();
        let keys = Some(SigningKeys {
            current: &secret,
            previous: None,
        });
        let at = 1_700_000_000_123;
        let sent = headers(
            SignatureScheme::Both,
            keys,
            id(),
            at,
            b"{}",
            Signatures::Computed,
        );
        let shown = headers(
            SignatureScheme::Both,
            keys,
            id(),
            at,
            b"{}",
            Signatures::Masked,
        );
        assert_eq!(names(&sent), names(&shown));
        assert_eq!(shown[0].1, MASKED);
        assert_eq!(shown[3].1, MASKED);
        assert_eq!(
            (&shown[1], &shown[2]),
            (&sent[1], &sent[2]),
            "id and time are no secret"
        );
    }
}
