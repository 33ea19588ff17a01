//! A client's notices from its namespace, across config reloads. When a
//! reload rebuilds the namespace (a backend added, removed or changed) the
//! client is told that its lists changed and listens to the new members;
//! when a reload removes the namespace, the stream ends.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::stream::{self, Stream, StreamExt};

use super::Front;
use crate::router::{ClientNotice, Namespace};
use crate::upstream::Caller;

type Notices = Pin<Box<dyn Stream<Item = ClientNotice> + Send>>;

struct Follow {
    front: Arc<Front>,
    ns: Arc<Namespace>,
    caller: Caller,
    notices: Notices,
    reloads: tokio::sync::watch::Receiver<()>,
    pending: VecDeque<ClientNotice>,
}

pub(super) fn notices(
    front: &Arc<Front>,
    ns: &Arc<Namespace>,
    caller: Caller,
) -> impl Stream<Item = ClientNotice> + Send + 'static {
    let mut reloads = front.reloads.subscribe();
    reloads.mark_unchanged();
    let state = Follow {
        front: front.clone(),
        ns: ns.clone(),
        notices: of(ns, &caller),
        caller,
        reloads,
        pending: VecDeque::new(),
    };
    stream::unfold(state, |mut s| async move {
        loop {
            if let Some(n) = s.pending.pop_front() {
                return Some((n, s));
            }
            tokio::select! {
                n = s.notices.next() => match n {
                    Some(n) => return Some((n, s)),
                    // No member left to hear from; a reload may add one.
                    None => s.notices = Box::pin(stream::pending()),
                },
                changed = s.reloads.changed() => {
                    changed.ok()?;
                    let now = s.front.layout.load().router.namespace(s.ns.name.as_str())?.clone();
                    if !Arc::ptr_eq(&now, &s.ns) {
                        s.notices = of(&now, &s.caller);
                        s.ns = now;
                        s.pending.extend(ClientNotice::all_lists_changed());
                    }
                }
            }
        }
    })
}

fn of(ns: &Arc<Namespace>, caller: &Caller) -> Notices {
    Box::pin(ns.notices(caller.clone()))
}
