//! What the front does differently in cluster mode: before a sealed id that
//! is not in memory is resumed, Redis says whether it was revoked and which
//! replica issued it; a DELETE and the per-principal cap reach every
//! replica; an answer to a server-to-client request this replica does not
//! hold goes to the one that does. Without a cluster each of these is a
//! no-op, and the sessions module decides alone.

use crate::cluster::BusMessage;
use crate::jsonrpc::Outcome;
use crate::metrics::ResumeCause;
use crate::upstream::Caller;
use crate::vocab::{Principal, SessionId};

use super::Front;

impl Front {
    /// Rebuilds a sealed session another replica (or an earlier process)
    /// issued, if Redis does not know it as revoked. Fail-open: with Redis
    /// unreachable the id's own validity decides (see docs/cluster.md).
    pub(super) async fn resume_elsewhere(
        &self,
        id: &SessionId,
        principal: &Principal,
        bound: &[u8],
        namespace: u16,
    ) -> bool {
        let Some(cluster) = &self.cluster else {
            return false;
        };
        let Some(contents) = self.sessions.peek(id, bound) else {
            return false;
        };
        if cluster.is_revoked(&contents.serial).await == Some(true) {
            return false;
        }
        let cause = if Some(contents.boot) == self.sessions.boot() {
            ResumeCause::evicted
        } else if cluster.is_live_replica(contents.boot).await == Some(true) {
            ResumeCause::replica
        } else {
            ResumeCause::restart
        };
        self.sessions
            .resume(id, principal, bound, &contents, cause, namespace);
        true
    }

    /// A DELETE: revoked in Redis until the id's expiry, and dropped from
    /// every replica's memory.
    pub(super) async fn ended_everywhere(&self, id: &SessionId, revoked: Option<(u64, [u8; 16])>) {
        let (Some(cluster), Some((expires, serial))) = (&self.cluster, revoked) else {
            return;
        };
        cluster.end(serial, expires, id.clone()).await;
        self.end_shared_backend_sessions(id).await;
    }

    /// The client's per-session HTTP backend sessions, ended now, whichever
    /// replica opened them.
    async fn end_shared_backend_sessions(&self, id: &SessionId) {
        let client = crate::vocab::ClientKey::Session(id.clone());
        let backends = self.layout.load_full().backends.clone();
        futures_util::future::join_all(backends.iter().map(|b| b.end_shared(&client))).await;
    }

    /// The per-principal cap across replicas: a new session past it ends
    /// the principal's oldest, wherever that one lives.
    pub(super) async fn count_for_principal(
        &self,
        principal: &Principal,
        id: &SessionId,
        sealed: Option<(u64, [u8; 16])>,
    ) {
        let (Some(cluster), Some((expires, serial))) = (&self.cluster, sealed) else {
            return;
        };
        let Some(digest) = self.layout.load().policy.principal_digest(principal) else {
            return;
        };
        let member = format!("{}:{expires}:{}", crate::vocab::hex(&serial), id.as_str());
        let now = crate::vocab::unix_now();
        let cap = self.principal_cap;
        let Some(victim) = cluster
            .principal_session(&digest, &member, expires, cap, now)
            .await
        else {
            return;
        };
        let mut parts = victim.splitn(3, ':');
        let (Some(serial), Some(expires), Some(victim_id)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Some(serial), Ok(expires)) = (crate::vocab::unhex(serial), expires.parse::<u64>())
        else {
            return;
        };
        let victim_id = SessionId::from_header(victim_id);
        self.sessions.revoke(&victim_id, serial, expires);
        cluster.end(serial, expires, victim_id.clone()).await;
        self.end_shared_backend_sessions(&victim_id).await;
    }

    /// A client's answer this replica has no taker for: to the others.
    pub(super) async fn answer_elsewhere(&self, caller: &Caller, id: &str, outcome: &Outcome) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let outcome = match outcome {
            Outcome::Result(r) => serde_json::json!({ "result": r }),
            Outcome::Error(e) => serde_json::json!({ "error": e }),
        };
        cluster
            .publish(BusMessage::Answer {
                id: id.to_owned(),
                client: caller.key().clone(),
                outcome: crate::jsonrpc::raw(&outcome),
            })
            .await;
    }
}

impl Front {
    /// Acts on what the other replicas publish, until the bus closes.
    pub fn serve_inbox(self: std::sync::Arc<Self>, mut inbox: crate::cluster::Inbox) {
        tokio::spawn(async move {
            while let Some(message) = inbox.0.recv().await {
                match message {
                    BusMessage::Ended { session } => self.sessions.forget(&session),
                    BusMessage::Notice { backend, notice } => {
                        let layout = self.layout.load();
                        if let Some(b) = layout.backends.iter().find(|b| b.name.as_str() == backend)
                        {
                            b.announce_here(notice);
                        }
                    }
                    BusMessage::Grant { backend, principal } => {
                        let layout = self.layout.load();
                        if let Some(flow) = layout
                            .backends
                            .iter()
                            .find(|b| b.name.as_str() == backend)
                            .and_then(|b| b.code_flow())
                        {
                            flow.changed_elsewhere(&principal);
                        }
                    }
                    BusMessage::Answer {
                        id,
                        client,
                        outcome,
                    } => {
                        let caller = Caller::relayed(client);
                        let id = crate::jsonrpc::raw(&id);
                        // Unknown here is normal (the asker is another
                        // replica); from the wrong client it is not.
                        if let Some(outcome) = relayed_outcome(&outcome)
                            && self.layout.load().router.answer_any(&caller, &id, &outcome)
                                == crate::upstream::Answered::NotYours
                        {
                            self.metrics.answer_dropped("not_yours");
                        }
                    }
                }
            }
        });
    }
}

/// `{"result": ...}` or `{"error": ...}`, back into an outcome.
fn relayed_outcome(raw: &serde_json::value::RawValue) -> Option<Outcome> {
    #[derive(serde::Deserialize)]
    struct Wire {
        result: Option<Box<serde_json::value::RawValue>>,
        error: Option<Box<serde_json::value::RawValue>>,
    }
    match serde_json::from_str::<Wire>(raw.get()).ok()? {
        Wire {
            result: Some(r), ..
        } => Some(Outcome::Result(r.into())),
        Wire { error: Some(e), .. } => Some(Outcome::Error(e)),
        _ => None,
    }
}
