//! Domain types parsed once at the edge (queue names, targets, secrets, job ids, statuses);
//! the rest of the code trusts them and never re-checks.

use std::fmt;
use std::sync::Arc;

use uuid::Uuid;

/// Why a value given by a client was refused; the message is safe to show to that client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

fn invalid(msg: impl Into<String>) -> InvalidInput {
    InvalidInput(msg.into())
}

/// A queue name: lower-cased, 1–100 characters of `[a-z0-9~_-]`.
///
/// Shared, not copied: every job on the hot path passes its queue's name to the writer, the
/// wake-ups, the dispatcher and the metrics, and a clone is a reference-count increment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(Arc<str>);

impl QueueName {
    pub const MAX_LEN: usize = 100;

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        parse_name("queue", raw).map(|name| Self(name.into()))
    }

    /// A name read back from our own database, already validated when it was stored.
    pub(crate) fn from_stored(name: String) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The rule queue and schedule names share: lower-cased, 1–100 characters of
/// `[a-z0-9~_-]`. `kind` names the value in the error.
fn parse_name(kind: &str, raw: &str) -> Result<String, InvalidInput> {
    let name = raw.to_ascii_lowercase();
    if name.is_empty() || name.len() > QueueName::MAX_LEN {
        return Err(invalid(format!(
            "{kind} name must be 1 to {} characters long",
            QueueName::MAX_LEN
        )));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "~_-".contains(c);
    if !name.chars().all(allowed) {
        return Err(invalid(format!(
            "{kind} name may only contain a-z, 0-9, '~', '_' and '-'"
        )));
    }
    Ok(name)
}

/// A schedule's name within its queue: the queue-name rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScheduleName(Arc<str>);

impl ScheduleName {
    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        parse_name("schedule", raw).map(|name| Self(name.into()))
    }

    /// A name read back from our own database, already validated when it was stored.
    pub(crate) fn from_stored(name: String) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A topic's name: the queue-name rules (a topic and a queue may share a name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(Arc<str>);

impl TopicName {
    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        parse_name("topic", raw).map(|name| Self(name.into()))
    }

    /// A name read back from our own database, already validated when it was stored.
    pub(crate) fn from_stored(name: String) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A published message's id: a UUIDv7 like a job's, the same for every subscriber's job.
pub type MessageId = JobId;

/// A queue's target: an absolute `http` or `https` URL with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target(reqwest::Url);

impl Target {
    pub const MAX_LEN: usize = 2048;

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        let too_long = || {
            invalid(format!(
                "target must be at most {} characters long (once percent-encoded)",
                Self::MAX_LEN
            ))
        };
        if raw.len() > Self::MAX_LEN {
            return Err(too_long());
        }
        let url = reqwest::Url::parse(raw)
            .map_err(|e| invalid(format!("target must be an absolute http(s) URL: {e}")))?;
        // The limit applies to the stored, normalised form (`é` becomes `%C3%A9`): a target
        // accepted here must read back at start-up (found by fuzzing).
        if url.as_str().len() > Self::MAX_LEN {
            return Err(too_long());
        }
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("target must use the http or https scheme"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(invalid("target must name a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "target must not carry credentials; use the queue secret to authenticate deliveries",
            ));
        }
        Ok(Self(url))
    }

    pub(crate) fn from_stored(raw: &str) -> Result<Self, InvalidInput> {
        Self::parse(raw)
    }

    /// The target's host when it is a literal IP address.
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        match self.0.host()? {
            url::Host::Ipv4(ip) => Some(ip.into()),
            url::Host::Ipv6(ip) => Some(ip.into()),
            url::Host::Domain(_) => None,
        }
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// A queue's signing secret. It never prints, so it cannot leak through `Debug` or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub const MAX_LEN: usize = 100;

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        if raw.is_empty() {
            return Err(invalid(
                "secret must not be empty; omit it to send unsigned jobs",
            ));
        }
        if raw.chars().count() > Self::MAX_LEN {
            return Err(invalid(format!(
                "secret must be at most {} characters long",
                Self::MAX_LEN
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// The secret as a Standard Webhooks key (`whsec_` + base64 of 24–64 bytes), or why it
    /// is not one (safe to show: it never repeats the secret).
    pub fn standard_key(&self) -> Result<crate::signature::standard::Secret, &'static str> {
        crate::signature::standard::Secret::parse(&self.0)
    }
}

/// How a queue signs its deliveries (`signatureScheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignatureScheme {
    /// `X-HYPER-SIGNATURE` only, keyed with the secret's text (hyper's scheme).
    #[default]
    Hyper,
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`, keyed with
    /// the decoded bytes of a `whsec_` secret.
    Standard,
    /// Both sets of headers.
    Both,
}

impl SignatureScheme {
    pub const ALL: [Self; 3] = [Self::Hyper, Self::Standard, Self::Both];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hyper => "hyper",
            Self::Standard => "standard",
            Self::Both => "both",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        Self::ALL
            .into_iter()
            .find(|scheme| scheme.as_str() == raw)
            .ok_or_else(|| {
                invalid(format!(
                    "signatureScheme must be \"hyper\", \"standard\" or \"both\", not {raw:?}"
                ))
            })
    }

    /// Whether deliveries carry `X-HYPER-SIGNATURE`.
    pub fn hyper(self) -> bool {
        matches!(self, Self::Hyper | Self::Both)
    }

    /// Whether deliveries carry the Standard Webhooks headers.
    pub fn standard(self) -> bool {
        matches!(self, Self::Standard | Self::Both)
    }

    /// Refuse a secret this scheme cannot sign with: a Standard Webhooks scheme needs a
    /// `whsec_` secret.
    pub fn check_secret(self, secret: &Secret) -> Result<(), InvalidInput> {
        if !self.standard() {
            return Ok(());
        }
        secret.standard_key().map(|_| ()).map_err(|why| {
            invalid(format!(
                "signatureScheme \"{}\" needs a secret of the form whsec_<base64 of 24 to 64 \
                 random bytes> (e.g. `echo whsec_$(openssl rand -base64 32)`): {why}",
                self.as_str()
            ))
        })
    }
}

/// A job id: a UUIDv7, so ids sort by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(Uuid);

/// An operational event's id: a UUIDv7 too, made and shown the same way.
pub type EventId = JobId;

impl JobId {
    /// The smallest and the largest id: the ends of an open range.
    pub const MIN: Self = Self(Uuid::nil());
    pub const MAX: Self = Self(Uuid::max());

    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// The id just below this one (none below [`JobId::MIN`]): where a walk down the ids
    /// goes on past this one.
    pub fn before(self) -> Option<Self> {
        self.0
            .as_u128()
            .checked_sub(1)
            .map(|n| Self(Uuid::from_u128(n)))
    }

    /// The largest id any job created at `millis` or earlier can have.
    pub fn last_of_millis(millis: UnixMillis) -> Self {
        Self::first_of_millis(millis.saturating_add(1))
            .before()
            .unwrap_or(Self::MIN)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        Uuid::parse_str(raw)
            .map(Self)
            .map_err(|_| invalid("job id must be a UUID"))
    }

    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(Uuid::from_bytes(bytes))
    }

    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        Uuid::from_slice(bytes).ok().map(Self)
    }

    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }

    /// When the job was created: the time its id carries (UUIDv7's first 48 bits).
    pub fn created_at(&self) -> UnixMillis {
        let mut millis = [0u8; 8];
        millis[2..].copy_from_slice(&self.0.as_bytes()[..6]);
        UnixMillis::try_from(u64::from_be_bytes(millis)).unwrap_or(UnixMillis::MAX)
    }

    /// The smallest id any job created at `millis` or later can have: a bound for range
    /// queries by creation time (UUIDv7 puts the creation time in the first 48 bits).
    pub fn first_of_millis(millis: UnixMillis) -> Self {
        let mut bytes = [0u8; 16];
        let millis = u64::try_from(millis).unwrap_or(0);
        bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
        Self(Uuid::from_bytes(bytes))
    }
}

/// A job id as people paste it, or its start: hex digits (dashes anywhere, case and
/// surrounding spaces ignored), at least [`JobIdPrefix::MIN_DIGITS`] of them; a whole id is
/// its own prefix. It stands for the ids from [`first`](Self::first) to
/// [`last`](Self::last), both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobIdPrefix {
    first: JobId,
    last: JobId,
}

impl JobIdPrefix {
    /// The fewest hex digits a prefix has: 8 narrow a UUIDv7 to the jobs of one ~65 s span.
    pub const MIN_DIGITS: usize = 8;

    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        let digits: Vec<u8> = raw
            .trim()
            .chars()
            .filter(|c| *c != '-')
            .map(|c| {
                c.to_digit(16)
                    .and_then(|d| u8::try_from(d).ok())
                    .ok_or_else(|| invalid(format!("{c:?} is not a hex digit of a job id")))
            })
            .collect::<Result<_, _>>()?;
        if digits.len() < Self::MIN_DIGITS || digits.len() > 32 {
            return Err(invalid(format!(
                "a job id, or at least its first {} hex digits, is needed (got {})",
                Self::MIN_DIGITS,
                digits.len()
            )));
        }
        let bound = |fill: u8| {
            let mut bytes = [0u8; 16];
            for (i, byte) in bytes.iter_mut().enumerate() {
                let digit = |at: usize| digits.get(at).copied().unwrap_or(fill);
                *byte = (digit(2 * i) << 4) | digit(2 * i + 1);
            }
            JobId::from_bytes(bytes)
        };
        Ok(Self {
            first: bound(0),
            last: bound(0xf),
        })
    }

    /// The smallest id with this prefix.
    pub fn first(&self) -> JobId {
        self.first
    }

    /// The largest id with this prefix.
    pub fn last(&self) -> JobId {
        self.last
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// The two states the hyper API shows: `READY` (waiting, scheduled for retry or in flight)
/// and `ERROR` (dead-lettered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Ready,
    Error,
    /// Delivered and kept in the delivery log (`keepDelivered`).
    Delivered,
}

impl JobStatus {
    pub fn parse(raw: &str) -> Result<Self, InvalidInput> {
        match raw.to_ascii_uppercase().as_str() {
            "READY" => Ok(Self::Ready),
            "ERROR" => Ok(Self::Error),
            "DELIVERED" => Ok(Self::Delivered),
            _ => Err(invalid("status must be READY, ERROR or DELIVERED")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::Error => "ERROR",
            Self::Delivered => "DELIVERED",
        }
    }
}

/// Serialize a value by its `Display` form (ids and names in JSON responses).
pub fn serialize_display<T: fmt::Display, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// Milliseconds since the Unix epoch, the time unit of the API and the database.
pub type UnixMillis = i64;

pub fn now_millis() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44, defect 6: ids as people paste them, and their unique starts.
    #[test]
    fn a_job_id_prefix_is_read_as_pasted() {
        let id = "0190a0b0-1234-7abc-8def-0123456789ab";
        let whole = JobIdPrefix::parse(&format!("  {}\n", id.to_uppercase())).unwrap();
        assert_eq!(whole.first().to_string(), id, "a whole id is its own range");
        assert_eq!(whole.last().to_string(), id);
        let start = JobIdPrefix::parse("0190A0B0-1").unwrap();
        assert_eq!(
            start.first().to_string(),
            "0190a0b0-1000-0000-0000-000000000000"
        );
        assert_eq!(
            start.last().to_string(),
            "0190a0b0-1fff-ffff-ffff-ffffffffffff"
        );
        assert!(
            JobIdPrefix::parse("0190a0b").is_err(),
            "7 digits are too few"
        );
        assert!(JobIdPrefix::parse("0190a0bx").is_err());
        assert!(JobIdPrefix::parse(&format!("{id}0")).is_err(), "33 digits");
    }

    #[test]
    fn queue_names_are_lower_cased_and_checked() {
        assert_eq!(QueueName::parse("Emails-1").unwrap().as_str(), "emails-1");
        assert!(QueueName::parse("a~b_c-d").is_ok());
        assert!(QueueName::parse("").is_err());
        assert!(QueueName::parse("has space").is_err());
        assert!(QueueName::parse("slash/").is_err());
        assert!(QueueName::parse("é").is_err());
        assert!(QueueName::parse(&"a".repeat(100)).is_ok());
        assert!(QueueName::parse(&"a".repeat(101)).is_err());
    }

    #[test]
    fn targets_must_be_absolute_http_urls() {
        assert!(Target::parse("http://127.0.0.1:8080/hook").is_ok());
        assert!(Target::parse("https://example.com").is_ok());
        assert!(Target::parse("/relative").is_err());
        assert!(Target::parse("ftp://example.com").is_err());
        assert!(Target::parse("mailto:a@example.com").is_err());
        assert!(Target::parse("http://user:pw@example.com").is_err());
    }

    #[test]
    fn an_accepted_target_always_parses_back_from_its_stored_form() {
        let long = format!("http://example.com/{}", "é".repeat(400));
        assert!(long.len() <= Target::MAX_LEN);
        assert!(
            Target::parse(&long).is_err(),
            "its encoded form is over the limit"
        );
        let fits = format!("http://example.com/{}", "é".repeat(300));
        let target = Target::parse(&fits).unwrap();
        assert_eq!(Target::from_stored(target.as_str()).unwrap(), target);
    }

    #[test]
    fn secrets_are_bounded_and_never_printed() {
        assert!(Secret::parse(&"x".repeat(100)).is_ok());
        assert!(Secret::parse(&"x".repeat(101)).is_err());
        assert!(Secret::parse("").is_err());
        let shown = format!("{:?}", Secret::parse("hunter2").unwrap());
        assert!(!shown.contains("hunter2"));
    }

    #[test]
    fn job_ids_round_trip_and_sort_by_time() {
        let a = JobId::new();
        let b = JobId::new();
        assert!(a < b);
        assert_eq!(JobId::parse(&a.to_string()).unwrap(), a);
        assert_eq!(JobId::from_slice(a.as_bytes()), Some(a));
        assert!(JobId::parse("nope").is_err());
    }

    #[test]
    fn the_creation_time_bound_splits_ids_by_time() {
        let id = JobId::new();
        let created = now_millis();
        assert!(JobId::first_of_millis(created - 5) < id);
        assert!(JobId::first_of_millis(created + 5) > id);
    }

    #[test]
    fn statuses_parse_case_insensitively() {
        assert_eq!(JobStatus::parse("ready").unwrap(), JobStatus::Ready);
        assert_eq!(JobStatus::parse("ERROR").unwrap(), JobStatus::Error);
        assert!(JobStatus::parse("DONE").is_err());
    }
}
