//! The bus between replicas: one Redis pub/sub channel. Each replica
//! publishes what another may need to act on, and acts on what others
//! publish (its own messages come back and are skipped). Delivery is best
//! effort, as the things it carries are: a lost list change is caught by
//! the next one, a lost answer by the asking backend's own timeout.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Cluster, PREFIX};
use crate::upstream::Notice;
use crate::vocab::ClientKey;
use crate::vocab::SessionId;

/// Messages waiting to be acted on; past this, new ones are dropped.
const INBOX: usize = 4096;

// Externally tagged, and not flattened into `Envelope`: serde buffers the
// other representations, and raw JSON values cannot be read back from the
// buffer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusMessage {
    /// A session was ended on purpose (DELETE, principal cap): every
    /// replica drops it from memory (its id is revoked in Redis).
    Ended { session: SessionId },
    /// What a backend announced (a list change for everyone, or a notice
    /// for one client, whose GET stream may be on any replica).
    Notice { backend: String, notice: Notice },
    /// A principal's grant at a backend changed (connected, refreshed,
    /// dropped): every replica forgets its copy and reads it again.
    Grant {
        backend: String,
        principal: crate::vocab::Principal,
    },
    /// A client's answer to a server-to-client request this replica does
    /// not hold: the one whose backend asked will.
    Answer {
        id: String,
        client: ClientKey,
        /// `{"result": ...}` or `{"error": ...}`.
        outcome: Box<RawValue>,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    from: u32,
    message: BusMessage,
}

/// Messages from the other replicas.
pub struct Inbox(pub mpsc::Receiver<BusMessage>);

fn channel() -> String {
    format!("{PREFIX}bus")
}

/// Subscribes (and resubscribes after Redis comes back) until `stop`.
pub(super) fn open(cluster: Arc<Cluster>, stop: CancellationToken) -> Inbox {
    let (tx, rx) = mpsc::channel(INBOX);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let pubsub = tokio::select! {
                _ = stop.cancelled() => return,
                p = cluster.client.get_async_pubsub() => p,
            };
            let subscribed = match pubsub {
                Ok(mut pubsub) => match pubsub.subscribe(channel()).await {
                    Ok(()) => Some(pubsub),
                    Err(_) => None,
                },
                Err(_) => None,
            };
            if let Some(mut pubsub) = subscribed {
                backoff = Duration::from_millis(100);
                let mut messages = pubsub.on_message();
                loop {
                    let msg = tokio::select! {
                        _ = stop.cancelled() => return,
                        m = messages.next() => m,
                    };
                    let Some(msg) = msg else { break };
                    let Ok(payload) = msg.get_payload::<String>() else {
                        continue;
                    };
                    match serde_json::from_str::<Envelope>(&payload) {
                        Ok(env) if env.from != cluster.replica => {
                            // A full inbox drops: the bus is best effort.
                            let _ = tx.try_send(env.message);
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "unreadable bus message"),
                    }
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    });
    Inbox(rx)
}

impl Cluster {
    /// Tells every other replica; false if Redis could not take it.
    pub async fn publish(&self, message: BusMessage) -> bool {
        let envelope = Envelope {
            from: self.replica,
            message,
        };
        let Ok(payload) = serde_json::to_string(&envelope) else {
            return false;
        };
        self.run(async |c| c.publish::<_, _, ()>(channel(), &payload).await)
            .await
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Principal, PrincipalName};

    /// Every message comes back from its wire form as it was sent, raw
    /// JSON values byte for byte.
    #[test]
    fn messages_cross_the_wire_intact() {
        let client = ClientKey::Session(SessionId::from_header("s1.abc"));
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let messages = [
            BusMessage::Ended {
                session: SessionId::from_header("s1.abc"),
            },
            BusMessage::Grant {
                backend: "web".into(),
                principal: crate::vocab::Principal::subject("https://i", "s"),
            },
            BusMessage::Answer {
                id: "sluice:web:00ff".into(),
                client: client.clone(),
                outcome: raw(r#"{"result": {"x": 1.50}}"#),
            },
            BusMessage::Notice {
                backend: "web".into(),
                notice: Notice::Ask {
                    id: "sluice:web:01".into(),
                    method: "roots/list".into(),
                    params: Some(raw(r#"{"_meta": {}}"#)),
                    client: Some(client.clone()),
                },
            },
            BusMessage::Notice {
                backend: "web".into(),
                notice: Notice::ElicitationComplete {
                    line: r#"{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e1"}}"#.into(),
                    client: Some(client),
                },
            },
            BusMessage::Notice {
                backend: "web".into(),
                notice: Notice::Connected {
                    id: "00ff".into(),
                    principal: Principal::Named(PrincipalName::new("alice").unwrap()),
                },
            },
        ];
        for message in messages {
            let sent = format!("{message:?}");
            let wire = serde_json::to_string(&Envelope { from: 7, message }).unwrap();
            let back: Envelope = serde_json::from_str(&wire).unwrap();
            assert_eq!(back.from, 7);
            assert_eq!(format!("{:?}", back.message), sent, "{wire}");
        }
    }
}
