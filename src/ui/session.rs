//! UI sessions: who logged in, until when, their CSRF token, one pending flash message and
//! the last bulk replay (whose jobs the dead letters page follows).
//! Kept in memory (a restart logs everyone out); the browser holds only a random token in an
//! `HttpOnly`, `SameSite=Strict` cookie, `Secure` unless the server listens on loopback.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::header::COOKIE;
use axum::http::{HeaderMap, HeaderValue};
use subtle::ConstantTimeEq;

/// The cookie that carries the session token.
pub const COOKIE_NAME: &str = "hookq_session";
/// A session unused this long ends.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// A session ends this long after its login, used or not.
pub const MAX_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Sessions held at once; the oldest goes first when a login would exceed it.
const MAX_SESSIONS: usize = 10_000;

/// The sessions of this server.
pub struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
    /// Whether cookies carry `Secure` (the server is reached over TLS, not on loopback).
    secure: bool,
}

struct Session {
    csrf: String,
    started: Instant,
    last_seen: Instant,
    flash: Option<Flash>,
    last_replay: Option<LastReplay>,
}

/// The most replayed ids a session keeps to follow (a replay's first ones).
pub const MAX_FOLLOWED_IDS: usize = 1000;

/// The session's last replay from the dead letters: when, how many jobs went back, and the
/// ids of the first [`MAX_FOLLOWED_IDS`] of them, whose fate the dead letters page shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastReplay {
    /// Unix milliseconds.
    pub at: i64,
    pub replayed: usize,
    pub ids: Vec<String>,
}

impl Session {
    fn alive_at(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_seen) < IDLE_TIMEOUT
            && now.saturating_duration_since(self.started) < MAX_LIFETIME
    }
}

/// The session a request runs in: its token and its CSRF token.
#[derive(Clone, Debug)]
pub struct Current {
    pub token: String,
    pub csrf: String,
}

impl Current {
    /// The session as the audit log names it: the first 8 hex digits of its token's
    /// SHA-256 (the same all session long; the token cannot be had back from it).
    pub fn public_id(&self) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(self.token.as_bytes()))[..8].to_owned()
    }
}

/// A one-time message shown on the next page the session sees: atop the page, or beside
/// the form it answers when it carries a [`FormOutcome`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flash {
    pub kind: FlashKind,
    pub text: String,
    pub form: Option<FormOutcome>,
}

/// A form's answer, drawn beside its button: which form, the values as typed (to show them
/// again rather than the stored ones), and every field found invalid with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormOutcome {
    pub form: &'static str,
    pub typed: Vec<(String, String)>,
    pub invalid: Vec<InvalidField>,
}

/// One field a form sent that cannot be taken, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidField {
    pub field: String,
    pub message: String,
}

impl FormOutcome {
    /// The answer of `form`, keeping nothing typed (after a success).
    pub fn of(form: &'static str) -> Self {
        Self {
            form,
            ..Self::default()
        }
    }

    /// What was typed into `field`, if this outcome kept it.
    pub fn typed(&self, field: &str) -> Option<&str> {
        self.typed
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, value)| value.as_str())
    }

    /// Why `field` was refused, if it was.
    pub fn invalid(&self, field: &str) -> Option<&str> {
        self.invalid
            .iter()
            .find(|invalid| invalid.field == field)
            .map(|invalid| invalid.message.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashKind {
    Notice,
    Error,
}

impl Flash {
    /// `flash` if it is the answer of form `form` (to draw beside that form), else `None`.
    pub fn answer_to<'a>(flash: Option<&'a Flash>, form: &str) -> Option<&'a Flash> {
        flash.filter(|f| f.form.as_ref().is_some_and(|o| o.form == form))
    }

    /// What was typed into `field` of the form this message answers, if it was kept.
    pub fn typed(&self, field: &str) -> Option<&str> {
        self.form.as_ref()?.typed(field)
    }

    pub fn notice(text: impl Into<String>) -> Self {
        Self {
            kind: FlashKind::Notice,
            text: text.into(),
            form: None,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            kind: FlashKind::Error,
            text: text.into(),
            form: None,
        }
    }

    /// This message, shown beside its form instead of atop the page.
    pub fn beside(self, outcome: FormOutcome) -> Self {
        Self {
            form: Some(outcome),
            ..self
        }
    }
}

impl Sessions {
    pub fn new(secure: bool) -> Self {
        Self {
            by_token: Mutex::new(HashMap::new()),
            secure,
        }
    }

    /// Start a session at `now`.
    pub fn start(&self, now: Instant) -> Current {
        let current = Current {
            token: random_token(),
            csrf: random_token(),
        };
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.alive_at(now));
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(token, _)| token.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            current.token.clone(),
            Session {
                csrf: current.csrf.clone(),
                started: now,
                last_seen: now,
                flash: None,
                last_replay: None,
            },
        );
        current
    }

    /// The live session of `token` at `now`, marked as used; an expired one is removed.
    pub fn resume(&self, token: &str, now: Instant) -> Option<Current> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(token)?;
        if !session.alive_at(now) {
            sessions.remove(token);
            return None;
        }
        session.last_seen = now;
        Some(Current {
            token: token.to_owned(),
            csrf: session.csrf.clone(),
        })
    }

    /// Log out.
    pub fn end(&self, token: &str) {
        self.lock().remove(token);
    }

    pub fn set_flash(&self, token: &str, flash: Flash) {
        if let Some(session) = self.lock().get_mut(token) {
            session.flash = Some(flash);
        }
    }

    /// Remember `replay` as the session's last (its ids cut to [`MAX_FOLLOWED_IDS`]).
    pub fn set_last_replay(&self, token: &str, mut replay: LastReplay) {
        replay.ids.truncate(MAX_FOLLOWED_IDS);
        if let Some(session) = self.lock().get_mut(token) {
            session.last_replay = Some(replay);
        }
    }

    /// The session's last replay, if it made one.
    pub fn last_replay(&self, token: &str) -> Option<LastReplay> {
        self.lock().get(token).and_then(|s| s.last_replay.clone())
    }

    /// The pending message, once.
    pub fn take_flash(&self, token: &str) -> Option<Flash> {
        self.lock().get_mut(token).and_then(|s| s.flash.take())
    }

    /// The `Set-Cookie` value that hands `token` to the browser.
    pub fn cookie(&self, token: &str) -> HeaderValue {
        self.cookie_value(token, MAX_LIFETIME.as_secs())
    }

    /// The `Set-Cookie` value that makes the browser forget its session.
    pub fn clearing_cookie(&self) -> HeaderValue {
        self.cookie_value("", 0)
    }

    fn cookie_value(&self, token: &str, max_age: u64) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        let value = format!(
            "{COOKIE_NAME}={token}; Path=/ui; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
        );
        // Tokens are hex: the value is always a valid header.
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the lock leaves the map consistent (each change is one
        // call), so a poisoned lock is still usable.
        self.by_token
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The session token a request's `Cookie` headers carry, if any.
pub fn token_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, token)| token)
        .filter(|token| !token.is_empty())
}

/// Whether a submitted CSRF token is the session's (in constant time).
pub fn csrf_matches(current: &Current, given: &str) -> bool {
    current.csrf.as_bytes().ct_eq(given.as_bytes()).into()
}

/// Two version-4 UUIDs as 64 hex digits: 244 random bits from `uuid`'s generator (`rand`'s
/// thread-local ChaCha CSPRNG, seeded by the operating system).
fn random_token() -> String {
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    format!("{}{}", a.simple(), b.simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lives_until_idle_or_too_old() {
        let sessions = Sessions::new(false);
        let t0 = Instant::now();
        let me = sessions.start(t0);
        assert_eq!(me.token.len(), 64);
        assert_ne!(me.token, me.csrf);
        let resumed = sessions
            .resume(&me.token, t0 + Duration::from_secs(60))
            .unwrap();
        assert_eq!(resumed.csrf, me.csrf);
        // Used every 50 minutes, it still ends 12 hours after login.
        let mut at = t0;
        while at + Duration::from_secs(50 * 60) < t0 + MAX_LIFETIME {
            at += Duration::from_secs(50 * 60);
            assert!(sessions.resume(&me.token, at).is_some());
        }
        assert!(sessions.resume(&me.token, t0 + MAX_LIFETIME).is_none());
        // Idle for an hour, it ends.
        let other = sessions.start(t0);
        assert!(sessions.resume(&other.token, t0 + IDLE_TIMEOUT).is_none());
        assert!(sessions.resume("not-a-token", t0).is_none());
    }

    #[test]
    fn logout_ends_the_session_and_flashes_show_once() {
        let sessions = Sessions::new(true);
        let t0 = Instant::now();
        let me = sessions.start(t0);
        sessions.set_flash(&me.token, Flash::notice("done"));
        assert_eq!(sessions.take_flash(&me.token), Some(Flash::notice("done")));
        assert_eq!(sessions.take_flash(&me.token), None);
        sessions.end(&me.token);
        assert!(sessions.resume(&me.token, t0).is_none());
    }

    #[test]
    fn cookies_are_http_only_strict_and_secure_off_loopback() {
        let secure = Sessions::new(true).cookie("abc");
        let secure = secure.to_str().unwrap();
        assert!(secure.contains("HttpOnly") && secure.contains("SameSite=Strict"));
        assert!(secure.contains("; Secure"));
        let local = Sessions::new(false).cookie("abc");
        assert!(!local.to_str().unwrap().contains("Secure"));
        assert!(
            Sessions::new(false)
                .clearing_cookie()
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }

    #[test]
    fn the_token_is_read_from_any_cookie_header() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, HeaderValue::from_static("a=1; b=2"));
        headers.append(COOKIE, HeaderValue::from_static("hookq_session=tok; c=3"));
        assert_eq!(token_of(&headers), Some("tok"));
        assert_eq!(token_of(&HeaderMap::new()), None);
        let me = Current {
            token: "t".into(),
            csrf: "secret".into(),
        };
        assert!(csrf_matches(&me, "secret"));
        assert!(!csrf_matches(&me, "secreT") && !csrf_matches(&me, ""));
    }
}
