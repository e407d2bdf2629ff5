//! Which role each protected route requires of a scoped key: one table, [`need`], written
//! once and copied into docs/security.md. A route missing from the table needs the admin
//! role (fail closed); a unit test checks every route of the OpenAPI document has a row.
//! A new route declares its row here, and nothing else about authorisation changes.

use axum::http::Method;

use crate::access::{Grant, Need, Role};

/// Enqueue on the path's queue.
pub const PRODUCER: &[Role] = &[Role::Producer];
/// Pull consumers' routes on the path's queue (lease, ack, nack, extend).
pub const CONSUMER: &[Role] = &[Role::Consumer];
/// Read-only routes on the path's queue.
pub const READER: &[Role] = &[Role::Reader];
/// One job's status: whoever works with the queue's jobs.
pub const JOB_STATUS: &[Role] = &[Role::Producer, Role::Consumer, Role::Reader];

/// What `method route` (the route's template, as `MatchedPath` gives it) requires: its row
/// in [`rule`], or the admin role for a route without one.
pub fn need(method: &Method, route: &str) -> Need {
    rule(method, route).unwrap_or(Need::Admin)
}

/// The table: every protected route's row. `None`: the route has no row.
pub fn rule(method: &Method, route: &str) -> Option<Need> {
    use Need::*;
    Some(match (method.as_str(), route) {
        // system (`/healthz`, `/readyz`, `/openapi.json` are public, outside the layers)
        ("GET", "/") => AnyKey,
        ("GET", "/metrics") => AllQueues(READER),
        // queues: the list is narrowed to the key's queues
        ("GET", "/queue") => AnyKey,
        ("PUT" | "DELETE" | "PATCH", "/queue/{name}") => Admin,
        ("POST", "/queue/{name}") => Queue(PRODUCER),
        ("GET", "/queue/{name}") => Queue(READER),
        // settings, stats
        ("GET", "/queue/{name}/_settings") => Queue(READER),
        (
            "POST",
            "/queue/{name}/_pause" | "/queue/{name}/_resume" | "/queue/{name}/_close-breaker",
        ) => Admin,
        ("GET", "/queue/{name}/_stats") => Queue(READER),
        ("GET", "/admin/queues/stats" | "/admin/queues/health") => AllQueues(READER),
        // the time series: every queue's, or the one of `?queue=`
        ("GET", "/admin/queues/series") => QueueOrAll(READER),
        // batch
        ("POST", "/queue/{name}/_batch") => Queue(PRODUCER),
        // schedules
        ("GET", "/queue/{name}/_schedules" | "/queue/{name}/_schedules/{schedule}") => {
            Queue(READER)
        }
        ("PUT" | "DELETE", "/queue/{name}/_schedules/{schedule}") => Admin,
        (
            "POST",
            "/queue/{name}/_schedules/{schedule}/_pause"
            | "/queue/{name}/_schedules/{schedule}/_resume"
            | "/queue/{name}/_schedules/{schedule}/_run",
        ) => Admin,
        // jobs
        ("GET", "/queue/{name}/{id}") => Queue(JOB_STATUS),
        (
            "POST",
            "/queue/{name}/{id}/_cancel"
            | "/queue/{name}/{id}/_retry"
            | "/queue/{name}/{id}/_resend",
        ) => Admin,
        // many waiting jobs at once (run now, cancel, priority): admin, as one job's cancel
        ("POST", "/queue/{name}/_jobs/bulk") => Admin,
        // pull consumers
        ("POST", "/queue/{name}/_lease") => Queue(CONSUMER),
        (
            "POST",
            "/queue/{name}/{id}/_ack" | "/queue/{name}/{id}/_nack" | "/queue/{name}/{id}/_extend",
        ) => Queue(CONSUMER),
        // Forq's API (`api::forq`): producers produce, consumers consume and answer
        ("POST", "/api/v1/queues/{name}/messages") => Queue(PRODUCER),
        ("GET", "/api/v1/queues/{name}/messages") => Queue(CONSUMER),
        (
            "POST",
            "/api/v1/queues/{name}/messages/{id}/ack" | "/api/v1/queues/{name}/messages/{id}/nack",
        ) => Queue(CONSUMER),
        // dead letters: reads span queues, so they need every queue in scope, but the
        // figures and the groups of one queue (`?queue=`) need only that queue
        ("GET", "/admin/dlq") => AllQueues(READER),
        ("GET", "/admin/dlq/stats" | "/admin/dlq/groups") => QueueOrAll(READER),
        ("GET", "/admin/jobs") => AllQueues(READER),
        ("GET", "/admin/search") => QueueOrAll(READER),
        // the pull workers in view: leases held and requests waiting, across queues or of
        // one (`?queue=`)
        ("GET", "/admin/leases") => QueueOrAll(READER),
        // what became of replayed jobs: a read across queues, its ids in a body
        ("POST", "/admin/dlq/replayed") => AllQueues(READER),
        ("POST", "/admin/dlq/replay" | "/admin/dlq/acknowledge") => Admin,
        ("DELETE", "/admin/dlq" | "/admin/dlq/{id}") => Admin,
        // keys
        ("GET" | "POST", "/admin/keys") | ("DELETE", "/admin/keys/{id}") => Admin,
        // the audit log: who did what, admin only
        ("GET", "/admin/audit") => Admin,
        // topics: a key's names cover topics as they cover queues, so a producer may
        // publish to a topic without being allowed into any subscriber queue; managing
        // topics, subscriptions and replays is admin
        ("GET", "/topics") => AllQueues(READER),
        ("GET", "/topic/{name}") => Queue(READER),
        // what became of one message in every subscriber: a reader of the topic, as the
        // topic's page names its subscribers
        ("GET", "/topic/{name}/messages/{id}") => Queue(READER),
        ("GET", "/queue/{name}/_subscriptions") => Queue(READER),
        ("POST", "/topic/{name}" | "/topic/{name}/_batch") => Queue(PRODUCER),
        ("PUT" | "PATCH" | "DELETE", "/topic/{name}") => Admin,
        ("PUT" | "DELETE", "/topic/{name}/_subscriptions/{queue}") => Admin,
        ("POST", "/topic/{name}/_subscriptions/{queue}/_replay") => Admin,
        _ => return None,
    })
}

/// The queue a route of [`Need::QueueOrAll`] is narrowed to: its query's `queue`, if any.
pub fn queried_queue(need: Need, query: Option<&str>) -> Option<String> {
    if !matches!(need, Need::QueueOrAll(_)) {
        return None;
    }
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "queue")
        .map(|(_, value)| value.into_owned())
}

/// The queue a Forq route's `{queue}-dlq` may stand for: `queue`, whose dead letters it
/// serves unless a queue of that very name exists — which only the handler can tell. The
/// auth layer lets a key covering either name pass; the handler judges the key again on
/// the queue it serves (`api::forq`).
pub fn forq_dead_letters_base<'a>(route: &str, queue: &'a str) -> Option<&'a str> {
    if route.starts_with("/api/v1/queues/") {
        queue.strip_suffix("-dlq")
    } else {
        None
    }
}

/// The 403's message: what the key lacks.
pub fn refusal(grant: &Grant, need: Need, queue: Option<&str>) -> String {
    let role = grant.role;
    match need {
        Need::Queue(roles) if roles.contains(&role) => format!(
            "key {:?} ({role}) may not use queue {:?}",
            grant.name,
            queue.unwrap_or_default()
        ),
        Need::AllQueues(roles) | Need::QueueOrAll(roles)
            if roles.contains(&role) && queue.is_none() =>
        {
            format!(
                "key {:?} ({role}) may not read across queues: its queues must be [\"*\"] \
                 (or name one of its queues)",
                grant.name
            )
        }
        Need::QueueOrAll(roles) if roles.contains(&role) => format!(
            "key {:?} ({role}) may not use queue {:?}",
            grant.name,
            queue.unwrap_or_default()
        ),
        Need::Admin => format!("key {:?} ({role}) may not do this: admin only", grant.name),
        Need::Queue(roles) | Need::AllQueues(roles) | Need::QueueOrAll(roles) => {
            let roles: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
            format!(
                "key {:?} ({role}) may not do this: it needs the role {} or admin",
                grant.name,
                roles.join(" or ")
            )
        }
        Need::AnyKey => format!("key {:?} may not do this", grant.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::OpenApi;

    /// Every protected route of the document has a row of its own: none falls through to
    /// the default by being forgotten.
    #[test]
    fn every_route_has_a_rule() {
        let (_, document) =
            utoipa_axum::router::OpenApiRouter::<super::super::AppState>::with_openapi(
                super::super::openapi::ApiDoc::openapi(),
            )
            .merge(super::super::system::router())
            .merge(super::super::queues::router())
            .merge(super::super::settings::router())
            .merge(super::super::queue_stats::router())
            .merge(super::super::queue_stats::admin_router())
            .merge(super::super::health::admin_router())
            .merge(super::super::series::admin_router())
            .merge(super::super::batch::router())
            .merge(super::super::schedules::router())
            .merge(super::super::jobs::router())
            .merge(super::super::bulk_jobs::router())
            .merge(super::super::dlq::router())
            .merge(super::super::keys::router())
            .merge(super::super::audit::admin_router())
            .merge(super::super::leases::admin_router())
            .merge(super::super::topics::router())
            .merge(super::super::topic_messages::router())
            .split_for_parts();
        let mut seen = 0;
        for (method, path, _) in super::super::openapi::operations(&document) {
            seen += 1;
            let public = ["/healthz", "/readyz", "/openapi.json"].contains(&path);
            assert!(
                public || rule(&method, path).is_some(),
                "no rule for {method} {path}"
            );
        }
        assert!(seen > 30, "{seen} routes");
    }

    /// The time series is read by a reader of every queue, or of the one it names.
    #[test]
    fn the_time_series_is_read_by_a_reader_of_its_queue_or_of_every_queue() {
        let need = need(&Method::GET, "/admin/queues/series");
        assert!(matches!(need, Need::QueueOrAll(roles) if roles == READER));
        assert_eq!(
            queried_queue(need, Some("range=7d&queue=orders")).as_deref(),
            Some("orders")
        );
        assert_eq!(queried_queue(need, Some("range=7d")), None);
    }
}
