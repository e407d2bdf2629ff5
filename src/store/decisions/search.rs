//! A search's walk over the live jobs, the dead letters and the delivery log at once: each
//! table read newest first in bounded reads, the hits merged by id, a page ended where every
//! table has been read (so the next page misses nothing and repeats nothing).

use std::time::Instant;

use crate::model::JobId;
use crate::store::dialect::Tx;
use crate::store::error::StoreResult;
use crate::store::search::{SearchHit, SearchPage, SearchQuery, SearchTable, SearchWalk};

/// Up to `limit` hits of `query` with ids from `upper` down, newest first (a page may hold a
/// few more when one id is in two tables: a replayed dead letter and its live job). Reads
/// stop once the page is full, every table is read to the query's lower end, or the walk's
/// deadline has passed; then the page ends at the highest id some table has not read past,
/// and the next page starts there.
pub async fn search(
    tx: &impl Tx,
    query: &SearchQuery,
    upper: JobId,
    limit: usize,
    walk: SearchWalk,
) -> StoreResult<SearchPage> {
    let from = query.from.unwrap_or(JobId::MIN);
    // Each table and the highest id it has not read yet (`None`: read to `from`).
    let mut unread: Vec<(SearchTable, Option<JobId>)> = query
        .tables()
        .into_iter()
        .map(|table| (table, Some(upper).filter(|upper| *upper >= from)))
        .collect();
    let mut page = SearchPage {
        walked: query.tables().iter().any(|table| query.tests_rows(*table)),
        ..SearchPage::default()
    };
    let mut hits: Vec<SearchHit> = Vec::new();
    loop {
        // Only the tables read least far hold the page back: read those.
        let boundary = unread.iter().filter_map(|(_, top)| *top).max();
        let Some(boundary) = boundary else { break };
        let settled = hits.iter().filter(|hit| hit.id > boundary).count();
        if settled >= limit || (page.read > 0 && Instant::now() >= walk.deadline) {
            break;
        }
        for (table, top) in unread.iter_mut().filter(|(_, top)| *top == Some(boundary)) {
            // A table whose every row passes needs no more rows than the page holds.
            let rows = if query.tests_rows(*table) {
                walk.rows_per_read
            } else {
                limit + 1
            };
            let chunk = tx.search_rows(*table, query, boundary, from, rows).await?;
            page.read += chunk.read;
            hits.extend(chunk.hits);
            *top = match chunk.lowest {
                Some(lowest) if chunk.read >= rows => lowest.before().filter(|id| *id >= from),
                _ => None,
            };
        }
    }
    let boundary = unread.iter().filter_map(|(_, top)| *top).max();
    // Hits below the boundary were read by a table ahead of the others: the next page
    // reads them again, with the rest of their range.
    hits.retain(|hit| boundary.is_none_or(|boundary| hit.id > boundary));
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.id));
    page.next_upper = boundary;
    if hits.len() > limit {
        let last = hits[limit - 1].id;
        hits.retain(|hit| hit.id >= last);
        page.next_upper = last.before();
    }
    page.hits = hits;
    Ok(page)
}
