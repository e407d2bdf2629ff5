//! The grouping both of this node's grouped writes share ([`super::group_commit`],
//! [`super::completer`]): callers hand entries over a channel, and one group at a time is
//! handled, in one transaction, while the next gathers. Nothing waits for a group to fill:
//! an entry that finds no group committing is handled at once; under load every entry that
//! arrives while a group commits joins the next one. A node's groups therefore grow with its
//! load rather than with how often its entries happen to meet, which is what keeps a job's
//! share of a transaction small when several nodes split one load between them.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::store::error::{StoreError, StoreResult};

/// The most entries one group holds.
pub const MAX_GROUP: usize = 256;

/// Tasks taking turns: one gathers while the other's group commits.
const COMMITTERS: usize = 2;

/// Groups committing at once. One: a second concurrent group would only split the entries
/// the first would have taken next into two transactions (two commits, two `NOTIFY`s, twice
/// the row locks on the queue rows its foreign key checks).
const COMMITTING: usize = 1;

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
    /// Start the committers, running `handle` on one group at a time. They stop once every
    /// handle is dropped and the entries handed to them are handled.
    pub fn start<H, F>(handle: H) -> Self
    where
        H: Fn(Vec<E>) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let (entries, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        let turn = Arc::new(Semaphore::new(COMMITTING));
        let handle = Arc::new(handle);
        for _ in 0..COMMITTERS {
            let (waiting, turn, handle) = (waiting.clone(), turn.clone(), handle.clone());
            tokio::spawn(async move {
                while let Some((group, turn)) = gather(&waiting, &turn).await {
                    handle(group).await;
                    drop(turn);
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

/// Wait for an entry, then keep taking entries (up to [`MAX_GROUP`]) until it is this
/// group's turn to commit; the turn comes with the group. `None` once every handle is gone.
async fn gather<E>(
    waiting: &Mutex<mpsc::UnboundedReceiver<E>>,
    turn: &Arc<Semaphore>,
) -> Option<(Vec<E>, OwnedSemaphorePermit)> {
    let mut waiting = waiting.lock().await;
    let first = waiting.recv().await?;
    let mut group = vec![first];
    let mut my_turn = pin!(turn.clone().acquire_owned());
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            permit = &mut my_turn => return permit.ok().map(|permit| (group, permit)),
            entry = waiting.recv(), if open && group.len() < MAX_GROUP => match entry {
                Some(entry) => group.push(entry),
                None => open = false, // every handle is gone: commit what was gathered
            },
        }
    }
}

/// A grouped write whose committers are gone (the store is shutting down).
pub fn stopped() -> StoreError {
    StoreError::from(anyhow::anyhow!("the store's committers have stopped"))
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::sync::{mpsc, oneshot};

    /// A group as the committers formed it, and what releases its commit.
    type Formed = (Vec<u32>, oneshot::Sender<()>);

    /// Groups as the committers formed them, each group's commit held until released.
    fn recording_groups() -> (Groups<u32>, mpsc::UnboundedReceiver<Formed>) {
        let (seen, groups_seen) = mpsc::unbounded_channel();
        let groups = Groups::start(move |group: Vec<u32>| {
            let seen = seen.clone();
            async move {
                let (release, released) = oneshot::channel();
                let _ = seen.send((group, release));
                let _ = released.await;
            }
        });
        (groups, groups_seen)
    }

    #[tokio::test]
    async fn an_entry_alone_is_handled_at_once() {
        let (groups, mut seen) = recording_groups();
        groups.hand(1).unwrap();
        let (group, _release) = seen.recv().await.unwrap();
        assert_eq!(group, vec![1]);
    }

    #[tokio::test]
    async fn entries_arriving_while_a_group_commits_form_one_next_group() {
        let (groups, mut seen) = recording_groups();
        groups.hand(1).unwrap();
        let (first, release_first) = seen.recv().await.unwrap();
        assert_eq!(first, vec![1]);
        // While the first commits, entries arrive one by one: with a second group free to
        // commit at once they would split into several small groups.
        for entry in 2..=5 {
            groups.hand(entry).unwrap();
            tokio::task::yield_now().await;
        }
        assert!(
            seen.try_recv().is_err(),
            "no group commits beside the first"
        );
        release_first.send(()).unwrap();
        let (second, _release) = seen.recv().await.unwrap();
        assert_eq!(second, vec![2, 3, 4, 5]);
    }
}
