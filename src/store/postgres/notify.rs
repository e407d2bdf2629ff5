//! Wake-ups across nodes: a job stored on one node is announced to all of them with
//! PostgreSQL's `NOTIFY` (channel [`CHANNEL`], the queue's name as payload), so whichever
//! node has free slots claims it at once; the dispatcher's slow sweep still covers a
//! notification lost to a reconnect.
//!
//! Sending ([`Notifier`]) happens after the enqueue's commit, off the enqueue's own
//! transaction: `NOTIFY` inside a transaction takes a cluster-wide lock at commit, which
//! would serialize every enqueue of every node. The notifier task sends all the queues
//! that became due since its previous round in one statement, a round at most every
//! [`MIN_INTERVAL`]: under load one `pg_notify` per interval, not one per job or group,
//! and on an idle cluster the first job is announced at once.
//!
//! Receiving ([`listen`]) takes one dedicated connection per node (`LISTEN` needs a
//! session of its own, outside the pool), reconnecting with backoff when it drops.

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_util::sync::CancellationToken;

use super::PgPool;
use crate::model::QueueName;

/// The notification channel: its payload is the name of a queue with a job due.
pub const CHANNEL: &str = "hookq_due";

/// Under load, announcements go at most this often, each carrying every queue that fell
/// due since the previous one. Every node claims on each announcement (the sender's own
/// node claims its jobs without one): one per committed group made three nodes claim three
/// times as often, each claim a third as large. After a quiet spell the first goes at once.
pub const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// Queues waiting to be announced at most; past it a wake-up is dropped (the sweep covers
/// it) rather than holding memory while the database is unreachable.
const PENDING: usize = 10_000;

/// The sending side: [`Notifier::due`] never waits.
#[derive(Clone)]
pub struct Notifier {
    queues: mpsc::Sender<QueueName>,
}

impl Notifier {
    /// Start the task that sends the announcements through `pool`; it ends once every
    /// clone of the notifier is gone.
    pub fn start(pool: PgPool) -> Self {
        let (queues, pending) = mpsc::channel::<QueueName>(PENDING);
        tokio::spawn(send_rounds(pending, move |names| {
            let pool = pool.clone();
            async move {
                if let Err(error) = announce(&pool, &names).await {
                    tracing::debug!(%error, queues = names.len(), "wake-up not announced");
                }
            }
        }));
        Self { queues }
    }

    /// Announce that `queue` has a job due (after the job's commit).
    pub fn due(&self, queue: &QueueName) {
        let _ = self.queues.try_send(queue.clone());
    }
}

/// The notifier's rounds: each takes every queue waiting (once each, by name) and sends
/// them in one call of `send`, at most one round per [`MIN_INTERVAL`]; a round's call is
/// awaited before the next gathers. Ends when every sender is gone.
async fn send_rounds<F, Sent>(mut pending: mpsc::Receiver<QueueName>, mut send: F)
where
    F: FnMut(Vec<String>) -> Sent,
    Sent: std::future::Future<Output = ()>,
{
    let mut last_round: Option<tokio::time::Instant> = None;
    while let Some(first) = pending.recv().await {
        if let Some(at) = last_round {
            tokio::time::sleep_until(at + MIN_INTERVAL).await;
        }
        last_round = Some(tokio::time::Instant::now());
        let mut batch = BTreeSet::from([first.as_str().to_owned()]);
        while let Ok(queue) = pending.try_recv() {
            batch.insert(queue.as_str().to_owned());
        }
        send(batch.into_iter().collect()).await;
    }
}

async fn announce(pool: &PgPool, queues: &[String]) -> anyhow::Result<()> {
    let client = pool.get().await?;
    client
        .execute(
            "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q",
            &[&CHANNEL, &queues],
        )
        .await?;
    Ok(())
}

/// Listen on `config`'s database until `stop`, calling `on_due` with each queue announced
/// (by any node, this one included). Reconnects after 100 ms, doubling to 5 s, when the
/// connection fails.
pub async fn listen(
    config: tokio_postgres::Config,
    on_due: impl Fn(QueueName) + Send + Sync + 'static,
    stop: CancellationToken,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let session = listen_once(&config, &on_due, &stop);
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = session => ended,
        };
        match ended {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(error) => tracing::warn!(%error, "lost the wake-up listener; reconnecting"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One listening session: connect, `LISTEN`, forward notifications until the connection
/// ends.
async fn listen_once(
    config: &tokio_postgres::Config,
    on_due: &(impl Fn(QueueName) + Send + Sync),
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let tls = MakeRustlsConnect::new(super::connect::tls_config()?);
    let (client, mut connection) = config.connect(tls).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let listen_sql = format!("LISTEN {CHANNEL}");
    let listening = client.batch_execute(&listen_sql);
    // The connection must be polled for the LISTEN to complete; notifications arriving
    // meanwhile are kept for after.
    tokio::pin!(listening);
    let mut early = Vec::new();
    loop {
        tokio::select! {
            done = &mut listening => { done?; break; }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => early.push(n),
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => anyhow::bail!("the connection closed before LISTEN"),
            },
        }
    }
    let deliver = |payload: &str| {
        if let Ok(queue) = QueueName::parse(payload) {
            on_due(queue);
        }
    };
    for notification in early {
        deliver(notification.payload());
    }
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                    deliver(n.payload());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => anyhow::bail!("the listener's connection closed"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::{Duration, Instant, advance};

    use super::*;

    fn queue(name: &str) -> QueueName {
        QueueName::parse(name).expect("a valid name")
    }

    /// The first announcement after a quiet spell goes at once; under a stream of them, one
    /// round per `MIN_INTERVAL` carries every queue that fell due meanwhile, once each.
    #[tokio::test(start_paused = true)]
    async fn announcements_go_at_once_then_at_most_one_round_per_interval() {
        let (due, pending) = mpsc::channel(PENDING);
        // Each round: when it was sent (since the start) and what it carried.
        type Rounds = Vec<(Duration, Vec<String>)>;
        let sent: Arc<Mutex<Rounds>> = Arc::default();
        let start = Instant::now();
        let rounds = tokio::spawn(send_rounds(pending, {
            let sent = Arc::clone(&sent);
            move |names| {
                sent.lock().unwrap().push((start.elapsed(), names));
                std::future::ready(())
            }
        }));
        let sent_so_far = || sent.lock().unwrap().clone();
        // Let the rounds' task run whatever is ready (the clock stays where it is).
        let settle = || async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        };

        due.send(queue("a")).await.unwrap();
        settle().await;
        assert_eq!(sent_so_far(), [(Duration::ZERO, vec!["a".to_owned()])]);

        // Within the interval: held, then sent together, each queue once.
        advance(Duration::from_millis(1)).await;
        for name in ["b", "a", "b", "c"] {
            due.send(queue(name)).await.unwrap();
        }
        advance(Duration::from_millis(5)).await;
        settle().await;
        assert_eq!(sent_so_far().len(), 1, "held within the interval");
        advance(MIN_INTERVAL - Duration::from_millis(6)).await;
        settle().await;
        let after = sent_so_far();
        assert_eq!(after.len(), 2, "{after:?}");
        let all = ["a", "b", "c"].map(str::to_owned).to_vec();
        assert_eq!(after[1], (MIN_INTERVAL, all));

        // After a quiet spell, at once again.
        advance(Duration::from_millis(100)).await;
        due.send(queue("d")).await.unwrap();
        settle().await;
        let last = sent_so_far().pop().unwrap();
        assert_eq!(last, (start.elapsed(), vec!["d".to_owned()]));

        drop(due);
        rounds.await.unwrap();
    }
}
