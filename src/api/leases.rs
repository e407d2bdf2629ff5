//! `GET /admin/leases`: the pull workers in view. The pull leases held now (which job, of
//! which queue, which attempt, held since when, until when, by which key, extended or not),
//! soonest expiry first, a page at a time; and the lease requests waiting per node and
//! queue (this node's from memory; on a shared database every other live node's as it last
//! published them, `cluster::follow`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::cursor::Cursor;
use super::error::{ApiError, ApiErrorBody, ApiResult};
use super::extract::{ApiQuery, page_size};
use crate::model::{JobId, QueueName, UnixMillis, now_millis};
use crate::store::{HeldLease, Position};

/// Leases per page: by default, and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 500;

pub fn admin_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(held_leases))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LeasesParams {
    /// One queue's leases and waiting requests only.
    queue: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
    /// Page size: default 100, larger values are capped at 500.
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<String>,
}

/// One pull lease held now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldLeaseView {
    #[schema(format = "uuid")]
    pub id: String,
    pub queue: String,
    /// The attempt this lease is (1 for the first).
    pub attempt: u32,
    /// Unix ms: when the worker leased it (`null` for a lease taken before hookq recorded
    /// it).
    pub leased_at: Option<UnixMillis>,
    /// Unix ms: its expiry. Past it without an answer the attempt failed and the job
    /// returns (within a second).
    pub leased_until: UnixMillis,
    /// Who leased it, as the audit log names actors: `key:<id>` (a scoped key), `master`
    /// (a configured key) or `open` (no key).
    pub holder: String,
    /// The holder for people: the key's name, "admin key", "API key" or "open server (no
    /// key)".
    pub holder_name: String,
    /// Whether the worker extended the lease (`_extend`).
    pub extended: bool,
    /// Present (and `true`) for a dead letter of `queue` leased through Forq's
    /// `{queue}-dlq`, not a live job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub dead_letter: bool,
}

impl From<HeldLease> for HeldLeaseView {
    fn from(lease: HeldLease) -> Self {
        Self {
            id: lease.id.to_string(),
            queue: lease.queue.to_string(),
            attempt: lease.attempt,
            leased_at: lease.leased_at,
            leased_until: lease.leased_until,
            dead_letter: lease.dead_letter,
            holder: lease.holder.id,
            holder_name: lease.holder.name,
            extended: lease.extended,
        }
    }
}

/// Lease requests waiting for a job of one queue on one node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingView {
    /// The node: its id on a shared database (PostgreSQL), `this node` alone (SQLite).
    pub node: String,
    /// Whether it is the node that answered.
    pub this_node: bool,
    pub queue: String,
    /// Requests waiting now (this node) or as the node last published them (at most 5 s
    /// ago).
    pub requests: u64,
}

/// The pull leases held now and the lease requests waiting.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LeasesPage {
    pub ok: bool,
    /// Soonest expiry first.
    pub leases: Vec<HeldLeaseView>,
    /// The cursor of the next page; `null` on the last page.
    pub next_cursor: Option<String>,
    /// Waiting lease requests per node and queue (those with any): this node's first,
    /// then the other nodes' by node and queue. Not paged.
    pub waiting: Vec<WaitingView>,
}

/// The pull leases held now, soonest expiry first, and the lease requests waiting per node
/// and queue. Readers: admin, a reader key of every queue, or with `queue`, of that queue.
#[utoipa::path(
    get,
    path = "/admin/leases",
    tag = "pull",
    params(LeasesParams),
    responses(
        (status = 200, description = "A page of the leases held, and the waiting requests", body = LeasesPage),
        (status = 400, description = "A `cursor` that is not one of this listing's, or an undecodable query string", body = ApiErrorBody),
        (status = 401, description = "Missing or wrong credentials", body = ApiErrorBody),
        (status = 403, description = "A key without the reader role on every queue (or on `queue`)", body = ApiErrorBody),
        (status = 404, description = "No such queue", body = ApiErrorBody),
        (status = 422, description = "A bad `limit`", body = ApiErrorBody),
        (status = 500, description = "Internal error", body = ApiErrorBody),
        (status = 503, description = "Shutting down, or the database is unreachable", body = ApiErrorBody),
    ),
)]
async fn held_leases(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<LeasesParams>,
) -> ApiResult<Json<LeasesPage>> {
    let page = leases_page(
        &state,
        params.queue.as_deref(),
        params.cursor.as_deref(),
        params.limit.as_deref(),
    )
    .await?;
    Ok(Json(page))
}

/// The page `GET /admin/leases` answers.
async fn leases_page(
    state: &AppState,
    queue: Option<&str>,
    cursor: Option<&str>,
    limit: Option<&str>,
) -> ApiResult<LeasesPage> {
    let limit = page_size(limit, DEFAULT_PAGE, MAX_PAGE)?;
    let queue = match queue.filter(|q| !q.is_empty()) {
        Some(raw) => {
            let name = QueueName::parse(raw).map_err(|_| ApiError::queue_not_found())?;
            state.store.queue(&name).await?;
            Some(name)
        }
        None => None,
    };
    let after = match cursor {
        Some(raw) => Cursor::decode(raw)?.into_leases()?,
        None => Position {
            at: UnixMillis::MIN,
            id: JobId::MIN,
        },
    };
    let mut leases = state
        .store
        .held_leases(queue.clone(), after, limit + 1, now_millis())
        .await?;
    let next_cursor = (leases.len() > limit)
        .then(|| {
            leases.truncate(limit);
            leases.last().map(|last| {
                Cursor::Leases(Position {
                    at: last.leased_until,
                    id: last.id,
                })
                .encode()
            })
        })
        .flatten();
    let cluster = state.store.cluster();
    let this_node = cluster.node_name();
    let mut waiting: Vec<WaitingView> = state
        .leases
        .waiting()
        .into_iter()
        .map(|(q, n)| (this_node.clone(), true, q, n))
        .chain(
            cluster
                .lease_waiters_of_other_nodes(now_millis())
                .await?
                .into_iter()
                .map(|(node, q, n)| (node, false, q, n)),
        )
        .filter(|(_, _, q, _)| queue.as_ref().is_none_or(|wanted| wanted == q))
        .map(|(node, this_node, q, n)| WaitingView {
            node,
            this_node,
            queue: q.to_string(),
            requests: u64::try_from(n).unwrap_or(u64::MAX),
        })
        .collect();
    waiting
        .sort_by(|a, b| (!a.this_node, &a.node, &a.queue).cmp(&(!b.this_node, &b.node, &b.queue)));
    Ok(LeasesPage {
        ok: true,
        leases: leases.into_iter().map(HeldLeaseView::from).collect(),
        next_cursor,
        waiting,
    })
}
