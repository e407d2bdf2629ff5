//! The grouping both of this node's grouped writes share ([`super::group_commit`],
//! [`super::completer`]): callers hand entries over a channel; a few committers each take
//! every entry waiting (up to [`MAX_GROUP`]) and handle them as one group, in one
//! transaction. Nothing waits for a group to fill: an entry alone is handled at once, and
//! under load the entries that arrive while one group commits form the next.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Mutex, mpsc};

use crate::store::error::{StoreError, StoreResult};

/// The most entries one group holds.
pub const MAX_GROUP: usize = 256;

/// Groups handled at once: one gathers while another commits, so a commit's round trip
/// never leaves the node idle.
const COMMITTERS: usize = 2;

/// The way in to one kind of grouped write.
pub struct Groups<E> {
    entries: mpsc::UnboundedSender<E>,
}

impl<E> Clone for Groups<E> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
        }
    }
}

impl<E: Send + 'static> Groups<E> {
    /// Start the committers, each running `handle` on one group at a time. They stop once
    /// every handle is dropped and the entries handed to them are handled.
    pub fn start<H, F>(handle: H) -> Self
    where
        H: Fn(Vec<E>) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let (entries, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        let handle = Arc::new(handle);
        for _ in 0..COMMITTERS {
            let (waiting, handle) = (waiting.clone(), handle.clone());
            tokio::spawn(async move {
                while let Some(group) = gather(&waiting).await {
                    handle(group).await;
                }
            });
        }
        Self { entries }
    }

    /// Hand `entry` to the next group.
    pub fn hand(&self, entry: E) -> StoreResult<()> {
        self.entries.send(entry).map_err(|_| stopped())
    }
}

/// Wait for an entry, then take every other one waiting, up to [`MAX_GROUP`]. `None` once
/// every handle is gone.
async fn gather<E>(waiting: &Mutex<mpsc::UnboundedReceiver<E>>) -> Option<Vec<E>> {
    let mut waiting = waiting.lock().await;
    let first = waiting.recv().await?;
    let mut group = vec![first];
    while group.len() < MAX_GROUP {
        match waiting.try_recv() {
            Ok(entry) => group.push(entry),
            Err(_) => break,
        }
    }
    Some(group)
}

/// A grouped write whose committers are gone (the store is shutting down).
pub fn stopped() -> StoreError {
    StoreError::from(anyhow::anyhow!("the store's committers have stopped"))
}
