//! Searching every queue at once: the live jobs, the dead letters and the delivery log, by
//! text in a payload or last error, ordering key, queue, status and creation time. The
//! query and its hits, and the one statement both dialects run over each table (their
//! placeholders and case-blind `LIKE` aside); the walk over those tables is a decision
//! (`decisions::search`).
//!
//! Ids are UUIDv7, so id order is creation order and a time range is an id range: every
//! search reads each table's rows newest first from an id down, through the primary key, or
//! `jobs_by_queue` for one queue, or an ordering key's index for one key. What no index
//! serves (text, status, a queue in the dead letters or the delivery log) is tested on the
//! rows read, and a read is bounded ([`SearchWalk`]), so a search that has to walk answers
//! in bounded time and says how far it got.

use std::time::Instant;

use super::records::{DlqState, JobPlace, MESSAGE_PAYLOAD};
use super::status::JobStatus;
use crate::model::{JobId, QueueName, UnixMillis};

/// The characters of a hit's payload shown in a listing.
pub const PREVIEW_CHARS: usize = 200;
/// The characters of a hit's last error shown in a listing.
pub const ERROR_CHARS: usize = 300;

/// Which jobs a search asks for (any by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchStatus {
    /// Live and waiting: due, scheduled or behind its ordering key's head.
    Ready,
    /// Live and leased to a delivery.
    InFlight,
    /// A dead-letter record, in any state.
    Error,
    /// Delivered and kept in the delivery log.
    Delivered,
}

/// A search's filters; every one given must hold.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// The payload or last error contains this text, letters compared without case.
    pub text: Option<String>,
    /// Exactly this ordering key.
    pub key: Option<String>,
    pub queue: Option<QueueName>,
    pub status: Option<SearchStatus>,
    /// Ids from this one (a prefix's first, or a creation time's first id).
    pub from: Option<JobId>,
    /// Ids up to this one, included.
    pub to: Option<JobId>,
}

impl SearchQuery {
    /// The tables this query's status allows.
    pub fn tables(&self) -> Vec<SearchTable> {
        SearchTable::ALL
            .into_iter()
            .filter(|table| match self.status {
                None => true,
                Some(SearchStatus::Ready | SearchStatus::InFlight) => *table == SearchTable::Jobs,
                Some(SearchStatus::Error) => *table == SearchTable::DeadLetters,
                Some(SearchStatus::Delivered) => *table == SearchTable::Delivered,
            })
            .collect()
    }

    /// Whether a row read must also pass a test no index serves.
    pub fn tests_rows(&self, table: SearchTable) -> bool {
        self.text.is_some()
            || matches!(
                self.status,
                Some(SearchStatus::Ready | SearchStatus::InFlight)
            )
            || (self.queue.is_some() && table != SearchTable::Jobs)
    }
}

/// The tables a search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchTable {
    Jobs,
    DeadLetters,
    Delivered,
}

impl SearchTable {
    pub const ALL: [Self; 3] = [Self::Jobs, Self::DeadLetters, Self::Delivered];

    fn name(self) -> &'static str {
        match self {
            Self::Jobs => "jobs",
            Self::DeadLetters => "dead_letters",
            Self::Delivered => "delivered",
        }
    }

    pub fn place(self) -> JobPlace {
        match self {
            Self::Jobs => JobPlace::Live,
            Self::DeadLetters => JobPlace::DeadLetter,
            Self::Delivered => JobPlace::Delivered,
        }
    }
}

/// Where a hit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitState {
    /// Live and due.
    Ready,
    /// Live, waiting for a delay or a retry's backoff.
    Scheduled,
    /// Live, behind an earlier job of its ordering key.
    Blocked,
    /// Live and leased to a delivery.
    InFlight,
    DeadLetter(DlqState),
    Delivered,
}

/// One job a search found, with what a listing shows of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub id: JobId,
    pub queue: QueueName,
    pub state: HitState,
    pub created_at: UnixMillis,
    pub attempts: u32,
    pub ordering_key: Option<String>,
    /// The worker's last HTTP status (a delivered job's: the 2xx that acknowledged it).
    pub last_status: Option<u16>,
    /// Its first [`ERROR_CHARS`] characters.
    pub last_error: Option<String>,
    /// The payload's first [`PREVIEW_CHARS`] characters.
    pub preview: String,
}

/// What one read of a table gave: the hits among the rows read, how many were read, and the
/// lowest id read (the next read starts below it); fewer rows than asked means the table
/// has no more in range.
#[derive(Debug, Clone, Default)]
pub struct SearchChunk {
    pub hits: Vec<SearchHit>,
    pub read: usize,
    pub lowest: Option<JobId>,
}

/// How much one answer may read: rows a statement, and a time after which no further
/// statement starts.
#[derive(Debug, Clone, Copy)]
pub struct SearchWalk {
    pub rows_per_read: usize,
    pub deadline: Instant,
}

/// One page of a search: its hits newest first, and where the next page starts (`None`:
/// everything in range was searched).
#[derive(Debug, Clone, Default)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    /// The next page reads ids from this one down.
    pub next_upper: Option<JobId>,
    /// Rows read for this page.
    pub read: usize,
    /// Whether rows had to be tested one by one (a filter no index serves), so a page may
    /// stop before it is full; see [`SearchQuery::tests_rows`].
    pub walked: bool,
}

/// The SQL dialect a search's statement is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchDialect {
    Sqlite,
    Postgres,
}

impl SearchDialect {
    /// The n-th placeholder (1-based).
    fn placeholder(self, n: usize) -> String {
        match self {
            Self::Sqlite => format!("?{n}"),
            Self::Postgres => format!("${n}"),
        }
    }

    /// The case-blind `LIKE` (SQLite's folds ASCII letters, PostgreSQL's `ILIKE` every one).
    fn like(self) -> &'static str {
        match self {
            Self::Sqlite => "LIKE",
            Self::Postgres => "ILIKE",
        }
    }

    /// That a row's `queue` is one of the queues, as each planner reads it as one range of
    /// `jobs_by_key` per queue (PostgreSQL turns an `IN (SELECT …)` into a join that reads
    /// the whole index once sequential scans are a last resort; an array it probes).
    fn every_queue(self) -> &'static str {
        match self {
            Self::Sqlite => "queue IN (SELECT name FROM queues)",
            Self::Postgres => "queue = ANY(ARRAY(SELECT name FROM queues))",
        }
    }

    /// What the rows are read from, and the condition that narrows them (`narrow`). A key's
    /// rows among the live jobs come from `jobs_by_key`, one range per queue, then sorted:
    /// neither planner would choose that alone, as each takes the id order of a whole index
    /// (a backward walk of the primary key, or `jobs_by_queue`) to avoid the sort and
    /// expects the key's rows to come soon, which reads every job when the key has few.
    /// SQLite, without statistics, is told the index; PostgreSQL gets the key's rows in a
    /// subquery it cannot flatten (`OFFSET 0`).
    fn source(self, table: SearchTable, query: &SearchQuery, narrow: &str) -> (String, String) {
        let name = table.name();
        match (self, table) {
            (Self::Sqlite, SearchTable::Jobs) if query.key.is_some() => {
                (format!("{name} INDEXED BY jobs_by_key"), narrow.to_owned())
            }
            (Self::Postgres, SearchTable::Jobs) if query.key.is_some() => (
                format!("(SELECT * FROM {name} WHERE {narrow} OFFSET 0) AS {name}"),
                "TRUE".to_owned(),
            ),
            _ => (name.to_owned(), narrow.to_owned()),
        }
    }
}

/// Which value each placeholder of [`search_sql`] takes, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchParam {
    /// The highest id, included.
    Upper,
    /// The inclusive lower id.
    From,
    Queue,
    Key,
    /// The `LIKE` pattern of the text ([`super::records::contains_pattern`]).
    Pattern,
    /// How many rows to read.
    Rows,
}

/// The statement that reads up to `Rows` rows of `table` whose id lies from `From` to
/// `Upper` (both included),
/// newest first, narrowed by the queue and key when given (both served by an index), and
/// for each says whether it passes the remaining tests (`matched`, the last column) and,
/// for those that do, what a listing shows, in `dialect`'s SQL. Columns: id, queue, state text,
/// created_at, attempts, ordering_key, last_status, last_error, preview, matched.
pub fn search_sql(
    table: SearchTable,
    query: &SearchQuery,
    dialect: SearchDialect,
) -> (String, Vec<SearchParam>) {
    let like = dialect.like();
    let mut params = Vec::new();
    let mut bind = |param: SearchParam| {
        params.push(param);
        dialect.placeholder(params.len())
    };
    let mut narrow = vec![
        format!("id <= {}", bind(SearchParam::Upper)),
        format!("id >= {}", bind(SearchParam::From)),
    ];
    let mut tests = Vec::new();
    if query.queue.is_some() {
        let queue = format!("queue = {}", bind(SearchParam::Queue));
        // Only `jobs` has an index in id order under a queue (`jobs_by_queue`); elsewhere
        // the queue's index would be read whole and sorted, so the id order is walked and
        // the queue tested on each row.
        match table {
            SearchTable::Jobs => narrow.push(queue),
            SearchTable::DeadLetters | SearchTable::Delivered => tests.push(queue),
        }
    }
    if query.key.is_some() {
        narrow.push(format!("ordering_key = {}", bind(SearchParam::Key)));
        if table == SearchTable::Jobs && query.queue.is_none() {
            // `jobs_by_key` leads with the queue: one range of it per queue.
            narrow.push(dialect.every_queue().to_owned());
        }
    }
    if let Some(status) = query.status {
        match (table, status) {
            (SearchTable::Jobs, SearchStatus::InFlight) => {
                tests.push(format!("status = {}", JobStatus::InFlight.code()))
            }
            (SearchTable::Jobs, SearchStatus::Ready) => {
                tests.push(format!("status <> {}", JobStatus::InFlight.code()))
            }
            _ => {}
        }
    }
    if query.text.is_some() {
        let pattern = bind(SearchParam::Pattern);
        let error = match table {
            SearchTable::Delivered => String::new(),
            SearchTable::Jobs | SearchTable::DeadLetters => {
                format!(" OR last_error {like} {pattern} ESCAPE '\\'")
            }
        };
        tests.push(format!(
            "({MESSAGE_PAYLOAD} {like} {pattern} ESCAPE '\\'{error})"
        ));
    }
    let matched = if tests.is_empty() {
        "1 = 1".to_owned()
    } else {
        tests.join(" AND ")
    };
    let (state, last_status, last_error) = match table {
        SearchTable::Jobs => (
            "CAST(status AS TEXT)".to_owned(),
            "last_status",
            "last_error",
        ),
        SearchTable::DeadLetters => ("state".to_owned(), "last_status", "last_error"),
        SearchTable::Delivered => (
            "'delivered'".to_owned(),
            "response_status",
            "CAST(NULL AS TEXT)",
        ),
    };
    let rows = bind(SearchParam::Rows);
    let (source, narrow) = dialect.source(table, query, &narrow.join(" AND "));
    let sql = format!(
        "SELECT id, queue, state, created_at, attempts, ordering_key, last_status, \
                CASE WHEN matched THEN substr(last_error, 1, {ERROR_CHARS}) END, \
                CASE WHEN matched THEN substr({MESSAGE_PAYLOAD}, 1, {PREVIEW_CHARS}) END, \
                matched \
         FROM (SELECT id, queue, {state} AS state, created_at, attempts, ordering_key, \
                      {last_status} AS last_status, {last_error} AS last_error, payload, \
                      message_id, ({matched}) IS TRUE AS matched \
               FROM {source} WHERE {narrow} ORDER BY id DESC LIMIT {rows}) AS w",
    );
    (sql, params)
}

/// A row's state column as [`search_sql`] writes it.
pub fn hit_state(table: SearchTable, text: &str) -> Option<HitState> {
    match table {
        SearchTable::Jobs => {
            text.parse::<i64>()
                .ok()
                .and_then(JobStatus::from_code)
                .map(|status| match status {
                    JobStatus::Ready | JobStatus::Dead => HitState::Ready,
                    JobStatus::Scheduled => HitState::Scheduled,
                    JobStatus::Blocked => HitState::Blocked,
                    JobStatus::InFlight => HitState::InFlight,
                })
        }
        SearchTable::DeadLetters => DlqState::parse(text).map(HitState::DeadLetter),
        SearchTable::Delivered => Some(HitState::Delivered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_picks_its_table() {
        let query = |status| SearchQuery {
            status: Some(status),
            ..SearchQuery::default()
        };
        assert_eq!(query(SearchStatus::Ready).tables(), [SearchTable::Jobs]);
        assert_eq!(query(SearchStatus::InFlight).tables(), [SearchTable::Jobs]);
        assert_eq!(
            query(SearchStatus::Error).tables(),
            [SearchTable::DeadLetters]
        );
        assert_eq!(
            query(SearchStatus::Delivered).tables(),
            [SearchTable::Delivered]
        );
        assert_eq!(SearchQuery::default().tables(), SearchTable::ALL);
    }

    #[test]
    fn only_what_no_index_serves_is_tested_row_by_row() {
        let mut query = SearchQuery {
            key: Some("customer-7".into()),
            ..SearchQuery::default()
        };
        assert!(!query.tests_rows(SearchTable::Jobs));
        query.queue = Some(QueueName::from_stored("orders".into()));
        assert!(!query.tests_rows(SearchTable::Jobs));
        assert!(query.tests_rows(SearchTable::DeadLetters));
        query.queue = None;
        query.text = Some("declined".into());
        assert!(query.tests_rows(SearchTable::Jobs));
    }

    #[test]
    fn placeholders_follow_the_params_in_order() {
        let query = SearchQuery {
            text: Some("x".into()),
            key: Some("k".into()),
            queue: Some(QueueName::from_stored("q".into())),
            ..SearchQuery::default()
        };
        let (sql, params) = search_sql(SearchTable::Jobs, &query, SearchDialect::Sqlite);
        assert_eq!(
            params,
            [
                SearchParam::Upper,
                SearchParam::From,
                SearchParam::Queue,
                SearchParam::Key,
                SearchParam::Pattern,
                SearchParam::Rows
            ]
        );
        assert!(sql.contains("id <= ?1 AND id >= ?2 AND queue = ?3 AND ordering_key = ?4"));
        assert!(sql.contains("LIMIT ?6"));
        let (delivered, _) = search_sql(SearchTable::Delivered, &query, SearchDialect::Sqlite);
        assert!(!delivered.contains("last_error LIKE"), "{delivered}");
    }
}
