//! The two protocol eras on one endpoint, and which one a POST speaks. The
//! rules of each live in its half: the 2025 revisions in `legacy` (a
//! session opened by `initialize`, notifications, batches), 2026-07-28 in
//! `modern` (each request alone, checked against its headers). Both answer
//! through the same machinery (`reply`), which asks a request's era what
//! differs (`reply::Rules`) and branches on none; `post`, above, only
//! admits the POST.

mod legacy;
pub(super) mod modern;
mod posted;

pub(super) use posted::Posted;

use std::future::{Future, ready};

use futures_util::FutureExt;
use futures_util::future::Either;
use serde_json::value::RawValue;

use super::answer::Answer;
use super::checks;
use super::error::{ModernError, Reject};
use crate::jsonrpc::{self, Body as RpcBody, Message};
use crate::protocol::{self, Revision};

/// Serves a POST's message in its era: 2026-07-28 by its body's `_meta`,
/// or by its header even when the body lacks the `_meta` (then it is
/// refused as the modern request it is); else a 2025 revision, the
/// header's if it names one. Either era's future is boxed, the common
/// legacy call's too: it is 1.8 KiB, and the POST's own future, moved
/// whole into a box for every request (`front::Edge`), stays small.
pub(super) fn serve<'a>(
    posted: Posted<'a>,
    message: RpcBody,
) -> impl Future<Output = Result<Answer, Reject>> + 'a {
    let header = match checks::protocol_version(&posted.headers) {
        Ok(header) => header.map(Revision::of),
        Err(reject) => return Either::Left(ready(Err(reject))),
    };
    if let RpcBody::Single(Message::Request(r)) = &message
        && (matches!(header, Some(Revision::Modern)) || is_modern(r.params.as_deref()))
    {
        let RpcBody::Single(Message::Request(r)) = message else {
            unreachable!("matched above")
        };
        let modern = Box::pin(modern::serve(posted, r)).map(|r| r.map(Answer::from));
        return Either::Right(Either::Left(modern));
    }
    let version = match header {
        None => None,
        Some(Revision::Legacy(v)) => Some(v),
        Some(Revision::Modern) => return Either::Left(ready(Err(Reject::ModernNeedsRequest))),
        // A revision nobody speaks: the answer lists the ones we do.
        Some(Revision::Unknown(requested)) => {
            return Either::Left(ready(Err(Reject::Modern {
                id: request_id(&message),
                error: ModernError::UnsupportedVersion(requested),
            })));
        }
    };
    // Written into a box made first: `Box::pin` made it on the stack and
    // copied it over (callgrind: 208 instructions a call, against 124).
    let legacy = Box::write(Box::new_uninit(), legacy::serve(posted, message, version));
    Either::Right(Either::Right(Box::into_pin(legacy)))
}

/// The id a refusal of the whole POST answers: a single request's, else
/// null.
pub(super) fn request_id(message: &RpcBody) -> jsonrpc::RawId {
    match message {
        RpcBody::Single(Message::Request(r)) => r.id.clone(),
        _ => jsonrpc::raw_null(),
    }
}

/// Whether `params._meta["io.modelcontextprotocol/protocolVersion"]` names
/// a 2026-07-28-or-later revision: such a request is served statelessly.
fn is_modern(params: Option<&RawValue>) -> bool {
    // The cheap test here, where it is inlined: `modern_version` has
    // another caller, and a call for every request cost 28 instructions.
    params.is_some_and(|p| protocol::may_name_modern_version(p.get()))
        && modern_version(params).is_some()
}

pub(super) fn modern_version(params: Option<&RawValue>) -> Option<String> {
    let params = params?;
    // Cheap test first: almost every request lacks the key.
    if !protocol::may_name_modern_version(params.get()) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct P {
        #[serde(rename = "_meta")]
        meta: Option<std::collections::HashMap<String, serde_json::Value>>,
    }
    let p: P = serde_json::from_str(params.get()).ok()?;
    let v = p.meta?.remove(protocol::META_PROTOCOL_VERSION)?;
    let v = v.as_str()?;
    protocol::is_modern(v).then(|| v.to_owned())
}
