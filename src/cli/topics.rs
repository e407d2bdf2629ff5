//! `hookq topic …`: topics and their subscriptions on a running server, over its HTTP API
//! (tables for people, the server's JSON with `--json`).

use serde_json::{Value, json};

use super::client::Client;
use super::remote::{job_argument, print_or};
use super::table::Table;
use super::{CliError, CliResult, TopicCommand};
use crate::humanize::time;

/// Run one `hookq topic` subcommand.
pub async fn run(command: TopicCommand) -> CliResult<()> {
    match command {
        TopicCommand::Create {
            name,
            retain,
            remote,
        } => {
            let body = retain.map_or_else(|| json!({}), |retain| json!({ "retain": retain }));
            let reply = Client::new(&remote)?.create_topic(&name, &body).await?;
            print_or(&remote, &reply.json, || format!("created topic {name}\n"));
        }
        TopicCommand::List { remote } => {
            let client = Client::new(&remote)?;
            let mut after: Option<String> = None;
            let mut topics = Vec::new();
            let mut raw = Vec::new();
            loop {
                let reply = client.list_topics(after.as_deref()).await?;
                if let Some(page) = reply.json.get("topics").and_then(Value::as_array) {
                    raw.extend(page.iter().cloned());
                }
                topics.extend(reply.data.topics);
                after = reply.data.next;
                if after.is_none() {
                    break;
                }
            }
            print_or(&remote, &json!({ "ok": true, "topics": raw }), || {
                if topics.is_empty() {
                    return "no topics\n".into();
                }
                let mut table = Table::new(&["NAME", "RETAIN", "PUBLISHED", "CREATED"]);
                for topic in &topics {
                    table.row(vec![
                        topic.name.clone(),
                        topic.retain.clone(),
                        topic.published.to_string(),
                        time(topic.created_at),
                    ]);
                }
                table.render()
            });
        }
        TopicCommand::Show { name, remote } => {
            let reply = Client::new(&remote)?.get_topic(&name).await?;
            let topic = &reply.data;
            print_or(&remote, &reply.json, || {
                let mut text = format!(
                    "topic {}: retain {}, {} published, {} retained\n",
                    topic.name, topic.retain, topic.published, topic.retained
                );
                if topic.subscriptions.is_empty() {
                    text.push_str("no subscriptions\n");
                    return text;
                }
                let mut table = Table::new(&["QUEUE", "FILTER", "SINCE"]);
                for subscription in &topic.subscriptions {
                    table.row(vec![
                        subscription.queue.clone(),
                        subscription
                            .filter
                            .as_ref()
                            .map_or_else(|| "(every message)".to_owned(), Value::to_string),
                        time(subscription.created_at),
                    ]);
                }
                text.push_str(&table.render());
                text
            });
        }
        TopicCommand::Delete { name, remote } => {
            let reply = Client::new(&remote)?.delete_topic(&name).await?;
            print_or(&remote, &reply.json, || format!("deleted topic {name}\n"));
        }
        TopicCommand::Subscribe {
            topic,
            queue,
            filter,
            remote,
        } => {
            let body = match &filter {
                None => json!({}),
                Some(text) => {
                    let filter: Value = serde_json::from_str(text)
                        .map_err(|e| CliError::Usage(format!("--filter is not JSON: {e}")))?;
                    json!({ "filter": filter })
                }
            };
            let reply = Client::new(&remote)?
                .subscribe(&topic, &queue, &body)
                .await?;
            print_or(&remote, &reply.json, || {
                let what = if filter.is_some() {
                    "the messages its filter matches"
                } else {
                    "every message"
                };
                format!("queue {queue} subscribes to {topic}: {what}\n")
            });
        }
        TopicCommand::Unsubscribe {
            topic,
            queue,
            remote,
        } => {
            let reply = Client::new(&remote)?.unsubscribe(&topic, &queue).await?;
            print_or(&remote, &reply.json, || {
                format!("queue {queue} no longer subscribes to {topic}\n")
            });
        }
        TopicCommand::Publish {
            topic,
            message,
            idempotency_key,
            ordering_key,
            remote,
        } => {
            let message = job_argument(message.as_deref())?;
            let reply = Client::new(&remote)?
                .publish(
                    &topic,
                    message,
                    idempotency_key.as_deref(),
                    ordering_key.as_deref(),
                )
                .await?;
            let published = &reply.data;
            print_or(&remote, &reply.json, || {
                if published.duplicate {
                    return format!("{} (a duplicate: nothing stored)\n", published.id);
                }
                let mut text = format!("{} → {} queue(s)\n", published.id, published.queues);
                if !published.skipped.is_empty() {
                    text.push_str(&format!(
                        "skipped (full): {}\n",
                        published.skipped.join(", ")
                    ));
                }
                text
            });
        }
        TopicCommand::Replay {
            topic,
            queue,
            since,
            until,
            remote,
        } => {
            let mut body = json!({ "since": since });
            if let Some(until) = until {
                body["until"] = Value::from(until);
            }
            let reply = Client::new(&remote)?
                .replay_topic(&topic, &queue, &body)
                .await?;
            print_or(&remote, &reply.json, || {
                format!(
                    "replayed {} message(s) of {topic} into {queue}\n",
                    reply.data.requested
                )
            });
        }
    }
    Ok(())
}
