//! What every link of a backend shares: its name, metrics and timeout,
//! where what it announces goes, the client a per-session link serves and
//! what that client can be asked, the bounds on its warnings, and the
//! last of its sessions that ended on its own.

use std::sync::Arc;
use std::time::Duration;

use super::exit::{Exit, LastExit};
use super::{Notice, conn, notice, throttle};
use crate::metrics::Metrics;
use crate::protocol::ClientCaps;
use crate::vocab::{BackendName, ClientKey};

/// What every link of a backend shares.
#[derive(Clone)]
pub(super) struct LinkCtx {
    pub(super) name: BackendName,
    pub(super) metrics: Arc<Metrics>,
    pub(super) timeout: Duration,
    /// Called with what any link announces for clients.
    pub(super) on_notice: Arc<dyn Fn(Notice) + Send + Sync>,
    /// The client of a per-session link (None: shared by all).
    pub(super) client: Option<ClientKey>,
    /// The principal whose own link this is (per-principal credentials,
    /// shared by its client sessions): what it announces goes to that
    /// principal's clients alone.
    pub(super) principal: Option<ClientKey>,
    /// What the backend session is told its client can answer: for a
    /// shared one what the gateway can route (sampling, elicitation, and
    /// roots when configured); per-session, the client's own declaration.
    pub(super) offer: ClientCaps,
    /// A shared backend's configured roots, answered by the gateway.
    pub(super) roots: Option<Arc<[String]>>,
    /// Bounds the backend's repeated warnings (garbage on the wire).
    pub(super) warnings: Arc<throttle::Throttle>,
    /// Bounds the backend's own stderr lines in the gateway's log.
    pub(super) stderr: Arc<throttle::Throttle>,
    /// The lists a 2026-07-28 backend announces changes of, now.
    pub(super) watched: Arc<notice::Watched>,
    /// The last of its sessions that ended on its own, for the status page.
    pub(super) last_exit: Arc<LastExit>,
}

impl LinkCtx {
    /// One of the backend's sessions ended without the gateway asking (or
    /// failed its checks): logged in words, counted, and kept.
    pub(super) fn ended_on_its_own(&self, exit: Exit) {
        tracing::warn!(
            backend = %self.name,
            reason = ?exit.reason(),
            "backend session ended: {exit}"
        );
        self.metrics.backend_restarted(&self.name, exit.reason());
        self.last_exit.record(exit);
    }

    /// Passes on what the link announced, marked with its client if it has one.
    pub(super) fn notice(&self, mut notice: Notice) {
        if let Notice::ResourceUpdated { client, .. }
        | Notice::Log { client, .. }
        | Notice::Ask { client, .. } = &mut notice
        {
            client.clone_from(match &self.client {
                Some(_) => &self.client,
                None => &self.principal,
            });
        }
        // Its client is known from the elicitation; else the link's own.
        if let Notice::ElicitationComplete { client, .. } = &mut notice
            && client.is_none()
        {
            client.clone_from(match &self.client {
                Some(_) => &self.client,
                None => &self.principal,
            });
        }
        (self.on_notice)(notice);
    }

    /// The context of a link serving one client (None: every client).
    pub(super) fn for_client(&self, client: Option<(ClientKey, ClientCaps)>) -> LinkCtx {
        match client {
            Some((key, caps)) => LinkCtx {
                client: Some(key),
                offer: caps,
                roots: None,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// The context of a principal's own link, shared by its client sessions.
    pub(super) fn for_principal(&self, key: ClientKey) -> LinkCtx {
        LinkCtx {
            principal: Some(key),
            ..self.clone()
        }
    }

    /// The multiplexer of one of this backend's sessions.
    pub(super) fn conn(
        &self,
        writer: tokio::sync::mpsc::Sender<conn::Frame>,
        writes: conn::Writes,
    ) -> Arc<conn::Conn> {
        let owner = self.client.clone().map(|key| (key, self.offer));
        conn::Conn::for_owner(
            self.name.clone(),
            self.warnings.clone(),
            writer,
            writes,
            owner,
            self.roots.clone(),
        )
    }
}
