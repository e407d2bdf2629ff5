//! What the store keeps in memory for topics: each topic's subscriptions compiled into one
//! matcher ([`RouteCache`], rebuilt when a publish reads a newer subscription version than
//! it was built from, so a subscription made on any node is used at once), and the
//! messages published since the maintenance sweep last added them to `topics.published`
//! ([`PublishCounts`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::model::{QueueName, TopicName};
use crate::pattern::PatternSet;
use crate::store::records::Subscription;

/// One topic's subscriptions as of one version: which queues a payload reaches.
pub struct Routes {
    pub version: i64,
    matcher: PatternSet<QueueName>,
}

impl Routes {
    pub fn new(version: i64, subscriptions: &[Subscription]) -> Self {
        Self {
            version,
            matcher: PatternSet::new(
                subscriptions
                    .iter()
                    .map(|s| (s.queue.clone(), s.filter.clone())),
            ),
        }
    }

    /// The queues whose subscription matches `payload`, in queue-name order.
    pub fn queues_for(&self, payload: &str) -> Vec<QueueName> {
        self.matcher.matches(payload)
    }
}

/// Every topic's [`Routes`] this node compiled, by topic.
#[derive(Default)]
pub struct RouteCache {
    routes: Mutex<HashMap<TopicName, Arc<Routes>>>,
}

impl RouteCache {
    /// The routes of `topic` compiled at `version`, if this node has them.
    pub fn get(&self, topic: &TopicName, version: i64) -> Option<Arc<Routes>> {
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes
            .get(topic)
            .filter(|routes| routes.version == version)
            .cloned()
    }

    /// Keep `routes` for `topic` (replacing an older version).
    pub fn put(&self, topic: &TopicName, routes: Routes) -> Arc<Routes> {
        let routes = Arc::new(routes);
        let mut all = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        match all.get(topic) {
            Some(kept) if kept.version > routes.version => {}
            _ => {
                all.insert(topic.clone(), routes.clone());
            }
        }
        routes
    }

    /// Forget `topic` (deleted).
    pub fn forget(&self, topic: &TopicName) {
        let mut all = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        all.remove(topic);
    }
}

/// Messages published on this node and not yet added to their topic's stored count. The
/// count is a figure, not a record: one bump of a hot row per publish would serialize every
/// publish to a topic across the nodes, so the sweep adds the counts up every few seconds,
/// and a crash loses at most that much of the figure.
#[derive(Default)]
pub struct PublishCounts {
    counts: Mutex<HashMap<TopicName, u64>>,
}

impl PublishCounts {
    pub fn add(&self, topic: &TopicName, messages: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(topic.clone()).or_default() += messages;
    }

    /// Not yet added to `topic`'s stored count.
    pub fn pending(&self, topic: &TopicName) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(topic).copied().unwrap_or(0)
    }

    /// Take every pending count, to add them to the stored ones.
    pub fn take(&self) -> Vec<(TopicName, u64)> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken: Vec<_> = counts.drain().collect();
        taken.sort();
        taken
    }

    /// Give counts back that could not be stored.
    pub fn restore(&self, taken: Vec<(TopicName, u64)>) {
        for (topic, n) in taken {
            self.add(&topic, n);
        }
    }
}
