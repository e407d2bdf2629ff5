//! What keeps a web page in an operator's browser from driving the server: the `Host` check
//! (DNS rebinding) and the `Origin` check (cross-site requests), in front of the API and the
//! UI alike.
//!
//! - An **open** server (no API key, loopback only) answers only requests whose `Host` is a
//!   loopback name or address (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`), the host
//!   of `HOOKQ_PUBLIC_URL`, or one listed in `HOOKQ_ALLOWED_HOSTS`. A page that rebinds its
//!   own name to 127.0.0.1 sends its own name as `Host`, and is refused. A keyed server
//!   answers any `Host`: a rebound page has no key.
//! - **Every** server refuses a request that carries an `Origin` other than its own (the
//!   request's own `Host`, the public URL's, or an allowed host's): a foreign page's form or
//!   `fetch`. `curl`, workers and server-side clients send no `Origin` and are not affected.
//!
//! Both refusals are `403` in the API's error shape, before any handler runs: nothing is
//! read, nothing stored. The check wraps the whole router as a plain service ([`Guarded`])
//! rather than an axum middleware: every request pays a few header lookups, not another
//! boxed future and route dispatch.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, Request};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready, ready};

use crate::api::error::ApiError;
use crate::config::Config;

/// The hosts a server answers to, and whether it is open.
#[derive(Debug, Clone)]
pub struct OriginGuard {
    /// No API key: only loopback and allowed hosts may be named in `Host`.
    open: bool,
    /// Lower-case host names (no port) allowed besides loopback: `HOOKQ_ALLOWED_HOSTS` and
    /// the public URL's host.
    allowed: Vec<String>,
}

impl OriginGuard {
    pub fn new(config: &Config) -> Self {
        let public = config
            .public_url
            .as_ref()
            .and_then(|url| url.host_str())
            .map(str::to_owned);
        let allowed = config
            .allowed_hosts
            .iter()
            .cloned()
            .chain(public)
            .map(|host| host.to_ascii_lowercase())
            .collect();
        Self {
            open: config.api_key.is_none(),
            allowed,
        }
    }

    /// Why a request is refused, if it is.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        let host = headers.get(HOST).and_then(|v| v.to_str().ok());
        if self.open
            && let Some(host) = host
            && !self.is_known_host(host)
        {
            return Err(format!(
                "Host {host:?} is not this server's name: a server without an API key answers \
                 only to loopback names (localhost, 127.0.0.1, [::1]) and HOOKQ_ALLOWED_HOSTS"
            ));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("(not text)");
            if !self.is_own_origin(origin, host) {
                return Err(format!(
                    "cross-origin request refused: Origin {origin:?} is not this server \
                     (list its host in HOOKQ_ALLOWED_HOSTS, or set HOOKQ_PUBLIC_URL)"
                ));
            }
        }
        Ok(())
    }

    /// `host` (a `Host` header: name or address, maybe a port) names this server.
    fn is_known_host(&self, host: &str) -> bool {
        let name = host_name(host);
        is_loopback_name(&name) || self.allowed.contains(&name)
    }

    /// `origin` (`scheme://host[:port]`) is this server's: the same authority as the
    /// request's `Host`, or an allowed host (a public URL behind a proxy that rewrites
    /// `Host`). Another port on localhost is another origin: another program's page.
    fn is_own_origin(&self, origin: &str, host: Option<&str>) -> bool {
        let Some((_, authority)) = origin.split_once("://") else {
            return false; // "null", or not an origin at all
        };
        let same_authority = host.is_some_and(|host| host.eq_ignore_ascii_case(authority));
        same_authority || self.allowed.contains(&host_name(authority))
    }
}

/// The host part of a `Host` header or an origin's authority: without the port, brackets
/// kept off IPv6 addresses, lower case.
fn host_name(authority: &str) -> String {
    let authority = authority.trim();
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) {
                    host
                } else {
                    authority
                }
            })
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The app behind the guard: a foreign request is answered 403 here and never reaches it.
#[derive(Clone)]
pub struct Guarded<S> {
    guard: Arc<OriginGuard>,
    app: S,
}

impl<S> Guarded<S> {
    pub fn new(app: S, config: &Config) -> Self {
        Self {
            guard: Arc::new(OriginGuard::new(config)),
            app,
        }
    }
}

impl<S, B> tower::Service<Request<B>> for Guarded<S>
where
    S: tower::Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.app.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.guard.check(request.headers()) {
            Ok(()) => Either::Right(self.app.call(request)),
            Err(msg) => Either::Left(ready(Ok(ApiError::Forbidden(msg).into_response()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn guard(open: bool, allowed: &[&str]) -> OriginGuard {
        OriginGuard {
            open,
            allowed: allowed.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    #[test]
    fn an_open_server_answers_loopback_hosts_and_allowed_ones_only() {
        let open = guard(true, &["hookq.lan"]);
        for host in [
            "localhost",
            "localhost:6363",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1:6363",
            "127.9.9.9",
            "[::1]:6363",
            "hookq.lan:8080",
        ] {
            assert!(open.check(&headers(Some(host), None)).is_ok(), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:6363",
            "10.0.0.1",
            "[fe80::1]",
            "localhost.evil",
        ] {
            let err = open.check(&headers(Some(host), None)).unwrap_err();
            assert!(err.contains("not this server's name"), "{host}: {err}");
        }
        assert!(
            open.check(&headers(None, None)).is_ok(),
            "HTTP/1.0, no Host"
        );
        assert!(
            guard(false, &[])
                .check(&headers(Some("evil.example"), None))
                .is_ok()
        );
    }

    #[test]
    fn a_foreign_origin_is_refused_and_the_servers_own_is_not() {
        for server in [guard(true, &[]), guard(false, &[])] {
            let own = headers(Some("127.0.0.1:6363"), Some("http://127.0.0.1:6363"));
            assert!(server.check(&own).is_ok());
            for origin in [
                "https://evil.example",
                "null",
                "http://127.0.0.1.evil.example:6363",
                "http://localhost:3000",
            ] {
                let foreign = headers(Some("127.0.0.1:6363"), Some(origin));
                let err = server.check(&foreign).unwrap_err();
                assert!(err.contains("cross-origin"), "{origin}: {err}");
            }
        }
        let keyed = guard(false, &["hookq.example.com"]);
        // Behind a proxy that rewrites Host: the public origin is allowed by name.
        let proxied = headers(Some("127.0.0.1:6363"), Some("https://hookq.example.com"));
        assert!(keyed.check(&proxied).is_ok());
        // Another loopback origin (any local page) is not a keyed server's own.
        let local_page = headers(Some("hookq.example.com"), Some("http://localhost:3000"));
        assert!(keyed.check(&local_page).is_err());
    }
}
