//! `sluice tools`: what each namespace offers one principal. The backends
//! start as `serve` starts them (no listener, no client session, no
//! cluster), each namespace's view is read through the lists' own path
//! (`router::View`: scopes, filters, renames, prefixes, search mode's
//! pins), printed, and everything is stopped again.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::app::ServeError;
use crate::auth::{Authenticator, Refusal};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::reload;
use crate::router::{Item, Router, View};
use crate::upstream::{Backend, Caller};
use crate::vocab::Principal;

/// How long stopped backends get to end (children and their groups).
const STOP_WAIT: Duration = Duration::from_secs(10);

/// One namespace for the principal: what it is shown, or why the
/// namespace's endpoint refuses it.
enum Seen {
    Shown(View),
    Refused { namespace: String, missing: String },
}

/// The listing of `config`'s namespaces (or `namespace` alone) as
/// `principal` sees them (None: a caller no scope restricts), as text or
/// JSON.
pub async fn list(
    config: Config,
    namespace: Option<String>,
    principal: Option<String>,
    json: bool,
) -> Result<String, ServeError> {
    let config = match &namespace {
        Some(ns) => config
            .narrowed_to(ns)
            .ok_or_else(|| ServeError::UnknownNamespace(ns.clone()))?,
        None => config,
    };
    let auth = match (&principal, &config.auth) {
        (None, _) => None,
        (Some(_), Some(settings)) => Some(
            Authenticator::new(settings, &config.namespaces).map_err(|why| {
                ServeError::Backend {
                    backend: "(auth)".into(),
                    why,
                }
            })?,
        ),
        (Some(name), None) => return Err(ServeError::UnknownPrincipal(name.clone())),
    };
    if let (Some(name), Some(auth)) = (&principal, &auth)
        && auth.named(name, crate::config::DEFAULT_NAMESPACE).is_none()
    {
        return Err(ServeError::UnknownPrincipal(name.clone()));
    }
    let metrics = Arc::new(Metrics::new());
    let stop = CancellationToken::new();
    let mut started = Vec::new();
    for b in &config.backends {
        match reload::start(b, &metrics, config.server.settle_timeout, &stop) {
            Ok(s) => started.push(s),
            Err(why) => {
                stop.cancel();
                return Err(ServeError::Backend {
                    backend: b.name.to_string(),
                    why,
                });
            }
        }
    }
    let backends: Vec<Arc<Backend>> = started.iter().map(|s| s.backend.clone()).collect();
    let router = Router::new(&config, &backends);
    let mut seen = Vec::new();
    for ns in router.namespaces() {
        let name = ns.name.as_str();
        let identity = match (&principal, &auth) {
            (Some(p), Some(auth)) => auth.named(p, name),
            _ => None,
        };
        let caller = match identity {
            None => Caller::principal(Principal::Anonymous),
            Some(Ok(identity)) => {
                Caller::principal(identity.principal).with_scopes(identity.scopes)
            }
            Some(Err(refusal)) => {
                let missing = match refusal {
                    Refusal::InsufficientScope { missing, .. } => missing,
                    _ => String::new(),
                };
                seen.push(Seen::Refused {
                    namespace: name.to_owned(),
                    missing,
                });
                continue;
            }
        };
        ns.settle().await;
        seen.push(Seen::Shown(ns.view(&caller).await));
    }
    drop(router);
    stop.cancel();
    let ended = futures_util::future::join_all(started.into_iter().map(reload::Started::task));
    if tokio::time::timeout(STOP_WAIT, ended).await.is_err() {
        tracing::warn!("some backends did not stop in time");
    }
    let scopes = match (&principal, &auth) {
        (Some(p), Some(auth)) => auth
            .named(p, crate::config::DEFAULT_NAMESPACE)
            .and_then(Result::ok)
            .and_then(|i| i.scopes),
        _ => None,
    };
    Ok(match json {
        true => as_json(principal.as_deref(), scopes.as_deref(), &seen),
        false => as_text(principal.as_deref(), scopes.as_deref(), &seen),
    })
}

fn as_json(principal: Option<&str>, scopes: Option<&[String]>, seen: &[Seen]) -> String {
    let namespaces: Vec<serde_json::Value> = seen
        .iter()
        .map(|s| match s {
            Seen::Shown(view) => json!(view),
            Seen::Refused { namespace, missing } => json!({
                "namespace": namespace,
                "refused": { "missing_scopes": missing.split_whitespace().collect::<Vec<_>>() },
            }),
        })
        .collect();
    let out = json!({ "principal": principal, "scopes": scopes, "namespaces": namespaces });
    format!("{out:#}\n")
}

fn as_text(principal: Option<&str>, scopes: Option<&[String]>, seen: &[Seen]) -> String {
    let mut out = String::new();
    let _ = match (principal, scopes) {
        (None, _) => writeln!(out, "as a caller no scope restricts"),
        (Some(p), None) => writeln!(out, "as principal {p} (unscoped)"),
        (Some(p), Some(s)) => writeln!(out, "as principal {p} (scopes: {})", s.join(", ")),
    };
    for s in seen {
        let view = match s {
            Seen::Refused { namespace, missing } => {
                let _ = writeln!(
                    out,
                    "\nnamespace {namespace}: refused (the endpoint needs scopes: {missing})"
                );
                continue;
            }
            Seen::Shown(view) => view,
        };
        let _ = writeln!(
            out,
            "\nnamespace {} ({} mode)",
            view.namespace, view.discovery
        );
        for b in &view.hidden {
            let _ = writeln!(
                out,
                "  backend {b}: hidden (it has per-principal credentials, none for this principal)"
            );
        }
        for b in &view.unread {
            let _ = writeln!(
                out,
                "  backend {b}: its lists could not be read (see the log)"
            );
        }
        for (kind, items) in view.kinds() {
            let _ = writeln!(out, "  {kind} ({})", items.len());
            table(
                &mut out,
                items,
                view.discovery == "search" && kind == "tools",
            );
        }
    }
    out
}

/// Items as aligned columns: the name clients see, the backend, the
/// backend's own name (and, in search mode, how a client gets the tool).
fn table(out: &mut String, items: &[Item], searched: bool) {
    let width = |f: &dyn Fn(&Item) -> usize| items.iter().map(f).max().unwrap_or(0);
    let name_w = width(&|i| i.name.len());
    let backend_w = width(&|i| i.backend.as_deref().map_or(9, str::len));
    let original_w = width(&|i| i.original.as_deref().map_or(1, str::len));
    for item in items {
        let backend = item.backend.as_deref().unwrap_or("(gateway)");
        let original = item.original.as_deref().unwrap_or("-");
        let _ = write!(
            out,
            "    {:name_w$}  {backend:backend_w$}  {original:original_w$}",
            item.name
        );
        if searched {
            out.push_str(match item.listed {
                true => "  listed",
                false => "  by search",
            });
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
}
