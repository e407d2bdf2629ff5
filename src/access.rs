//! Scoped API keys as values: a [`Role`], the queues a key may touch ([`Scope`]), and the
//! one rule deciding whether a key may do what a route [`Need`]s. The API's route table
//! (`api::permissions`) and the store's `api_keys` table both speak these types.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

/// What a scoped key may do. `admin` may do everything; the others only their part, on their
/// queues. Ordered by nothing: a producer is not "less" than a reader, they do other things.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Enqueue (`POST /queue/{name}`, `_batch`) and read the status of its queues' jobs.
    Producer,
    /// Pull consumers (lease, ack, nack, extend on its queues); today: read its queues' jobs.
    Consumer,
    /// Read everything about its queues (jobs with payloads, stats, settings, schedules),
    /// change nothing.
    Reader,
    /// Everything, on every queue, including `/admin`.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Producer, Role::Consumer, Role::Reader, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Producer => "producer",
            Role::Consumer => "consumer",
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }

    pub fn parse(raw: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == raw)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most queue patterns one key may carry, and the longest pattern.
pub const MAX_PATTERNS: usize = 100;
const MAX_PATTERN_LEN: usize = crate::model::QueueName::MAX_LEN;

/// The queues a key may touch: exact names and `prefix*` patterns (`*` alone: every queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope(Vec<String>);

impl Scope {
    /// Every queue (`["*"]`): what an admin key has.
    pub fn everything() -> Self {
        Self(vec!["*".into()])
    }

    /// Parse a key's queue list: 1 to [`MAX_PATTERNS`] entries, each a queue name or a
    /// name prefix followed by one `*` at the end, lower-cased as queue names are. Says what
    /// is wrong otherwise.
    pub fn parse(patterns: &[String]) -> Result<Self, String> {
        if patterns.is_empty() {
            return Err("queues must list at least one queue name or pattern".into());
        }
        if patterns.len() > MAX_PATTERNS {
            return Err(format!("queues may list at most {MAX_PATTERNS} entries"));
        }
        let mut parsed = Vec::with_capacity(patterns.len());
        for pattern in patterns {
            let pattern = pattern.to_ascii_lowercase();
            let name = pattern.strip_suffix('*').unwrap_or(&pattern);
            let valid_chars = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~'));
            if pattern.is_empty() || pattern.len() > MAX_PATTERN_LEN || !valid_chars {
                return Err(format!(
                    "queue pattern {pattern:?} is not a queue name or a name prefix ending in \
                     '*' (letters, digits, '-', '_', '~', at most {MAX_PATTERN_LEN} characters)"
                ));
            }
            parsed.push(pattern);
        }
        Ok(Self(parsed))
    }

    /// A stored list, trusted (it was parsed before it was stored).
    pub fn from_stored(patterns: Vec<String>) -> Self {
        Self(patterns)
    }

    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether `queue` is in the scope (compared as queue names are: lower-cased).
    pub fn covers(&self, queue: &str) -> bool {
        let queue = queue.to_ascii_lowercase();
        self.0.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => queue.starts_with(prefix),
            None => *p == queue,
        })
    }

    /// Whether every queue, present and future, is in the scope (a `*` pattern).
    pub fn covers_all(&self) -> bool {
        self.0.iter().any(|p| p == "*")
    }
}

/// What a route requires of a scoped key. Routes declare one each (`api::permissions`); a
/// future pull route declares `Need::Queue(&[Role::Consumer])` and nothing else changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any valid key; what it answers may be narrowed to the key's queues (`GET /queue`).
    AnyKey,
    /// One of these roles, on the queue the path's `{name}` names.
    Queue(&'static [Role]),
    /// One of these roles, with every queue in scope (`*`): reads across all queues.
    AllQueues(&'static [Role]),
    /// One of these roles, on the queue the query's `queue` names when it names one (a read
    /// narrowed to that queue), else with every queue in scope, as [`Need::AllQueues`].
    QueueOrAll(&'static [Role]),
    /// The admin role.
    Admin,
}

/// A valid scoped key as a request carries it: who (for logs) and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub scope: Scope,
}

impl Grant {
    /// Whether this key may do what `need` requires, on `queue` (the path's queue, if any).
    pub fn allows(&self, need: Need, queue: Option<&str>) -> bool {
        if self.role == Role::Admin {
            return true;
        }
        match need {
            Need::AnyKey => true,
            Need::Queue(roles) => {
                roles.contains(&self.role) && queue.is_some_and(|q| self.scope.covers(q))
            }
            Need::AllQueues(roles) => roles.contains(&self.role) && self.scope.covers_all(),
            Need::QueueOrAll(roles) => match queue {
                Some(queue) => self.allows(Need::Queue(roles), Some(queue)),
                None => self.allows(Need::AllQueues(roles), None),
            },
            Need::Admin => false,
        }
    }

    /// Whether this key may see `queue` at all (the `GET /queue` list).
    pub fn sees(&self, queue: &str) -> bool {
        self.role == Role::Admin || self.scope.covers(queue)
    }
}

/// The prefix of every scoped key: it tells a scoped key from the configured ones at a
/// glance (and in secret scanners).
pub const KEY_PREFIX: &str = "hq_";

/// A new scoped key: `hq_` and 32 bytes from the OS's random source, in hex (256 bits).
pub fn new_key() -> String {
    use chacha20poly1305::aead::Generate;
    let bytes = chacha20poly1305::Key::generate();
    format!("{KEY_PREFIX}{}", hex::encode(bytes.as_slice()))
}

/// What the store keeps of a key: SHA-256 of it. A key has 256 random bits, so its hash
/// cannot be reversed by guessing and needs no salt nor slow hash (those protect
/// low-entropy passwords); a lookup by hash reveals nothing about a key not yet known.
pub fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(role: Role, queues: &[&str]) -> Grant {
        let queues: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
        Grant {
            id: "id".into(),
            name: "k".into(),
            role,
            scope: Scope::parse(&queues).unwrap(),
        }
    }

    #[test]
    fn scopes_match_names_and_prefixes() {
        let scope = Scope::parse(&["billing-*".into(), "emails".into()]).unwrap();
        assert!(scope.covers("billing-eu"));
        assert!(scope.covers("billing-"));
        assert!(scope.covers("emails"));
        assert!(!scope.covers("emails2"));
        assert!(!scope.covers("billing"));
        assert!(!scope.covers_all());
        assert!(Scope::parse(&["*".into()]).unwrap().covers("anything"));
        for bad in [
            vec![],
            vec!["".into()],
            vec!["a*b".into()],
            vec!["**".into()],
        ] {
            assert!(Scope::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn roles_allow_their_part_only() {
        let producer = grant(Role::Producer, &["billing-*"]);
        assert!(producer.allows(Need::Queue(&[Role::Producer]), Some("billing-eu")));
        assert!(!producer.allows(Need::Queue(&[Role::Producer]), Some("emails")));
        assert!(!producer.allows(Need::Queue(&[Role::Reader]), Some("billing-eu")));
        assert!(!producer.allows(Need::Queue(&[Role::Producer]), None));
        assert!(!producer.allows(Need::Admin, None));
        let reader = grant(Role::Reader, &["*"]);
        assert!(reader.allows(Need::AllQueues(&[Role::Reader]), None));
        assert!(!grant(Role::Reader, &["a"]).allows(Need::AllQueues(&[Role::Reader]), None));
        let narrowed = Need::QueueOrAll(&[Role::Reader]);
        let one = grant(Role::Reader, &["a"]);
        assert!(one.allows(narrowed, Some("a")));
        assert!(!one.allows(narrowed, Some("b")));
        assert!(!one.allows(narrowed, None));
        assert!(reader.allows(narrowed, None));
        assert!(!producer.allows(narrowed, Some("billing-eu")));
        let admin = grant(Role::Admin, &["*"]);
        assert!(admin.allows(Need::Admin, None));
        assert!(admin.allows(Need::Queue(&[Role::Consumer]), Some("x")));
    }

    #[test]
    fn keys_are_long_random_and_hashed() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert!(a.starts_with(KEY_PREFIX));
        assert_eq!(a.len(), KEY_PREFIX.len() + 64);
        assert_ne!(key_hash(&a), key_hash(&b));
    }
}
