//! Nothing is forwarded by a name the gateway would not list to the
//! caller: a tool, prompt or resource is called only when its backend lists
//! it (exactly, as the backend spells it) after the namespace's filters,
//! renames and scopes have let the exposed name through.

use super::kind::Kind;
use super::names;
use super::namespace::{Namespace, error};
use crate::jsonrpc::{INTERNAL_ERROR, Outcome};
use crate::metrics::Series;
use crate::upstream::{Caller, Listing};

impl Namespace {
    /// Whether member `i` lists `original` (of `kind`) for `caller` in the
    /// catalog as read, decided without waiting: the common call's check.
    /// A resource is listed by its URI, or by a template it matches (or
    /// is); `lists` reads the catalogs again for a miss only when neither
    /// holds it.
    pub(super) fn lists_now(&self, caller: &Caller, i: usize, kind: Kind, original: &str) -> bool {
        let method = match kind {
            Kind::Tool | Kind::Prompt | Kind::Template => kind.list_method(),
            Kind::Resource => "resources/list",
        };
        self.members[i]
            .backend
            .listed_now(caller, method, |l| l.has(original).then_some(()))
            .is_some()
    }

    /// `lists_now` for a tool, with the series its calls through member
    /// `i` are observed in when the catalog keeps it for that member
    /// (`make` makes it at the first call).
    pub(super) fn lists_tool_now(
        &self,
        caller: &Caller,
        i: usize,
        original: &str,
        make: impl FnOnce() -> Series,
    ) -> Option<Option<Series>> {
        let m = &self.members[i];
        m.backend
            .listed_now(caller, "tools/list", |l| l.series_of(original, m.id, make))
    }

    /// Whether member `i` lists `original`, reading its catalog as needed.
    /// The common call is decided by `lists_now`, without a future.
    pub(super) async fn lists(
        &self,
        caller: &Caller,
        i: usize,
        kind: Kind,
        original: &str,
    ) -> Result<bool, Outcome> {
        if self.lists_now(caller, i, kind, original) {
            return Ok(true);
        }
        // Boxed: rare, and its future would make every call's large.
        Box::pin(self.lists_slowly(caller, i, kind, original)).await
    }

    /// `lists` when the catalog must be read, or does not hold the name.
    async fn lists_slowly(
        &self,
        caller: &Caller,
        i: usize,
        kind: Kind,
        original: &str,
    ) -> Result<bool, Outcome> {
        let backend = &self.members[i].backend;
        let named = |l: &Listing| l.has(original);
        let templated = |l: &Listing| {
            l.has(original) || l.names().any(|t| names::template_matches(t, original))
        };
        let read = async |again: bool| match kind {
            Kind::Tool | Kind::Prompt | Kind::Template => {
                backend
                    .listed(caller, kind.list_method(), again, named)
                    .await
            }
            Kind::Resource => {
                let listed = backend
                    .listed(caller, "resources/list", again, named)
                    .await?;
                Ok(listed
                    || backend
                        .listed(caller, "resources/templates/list", again, templated)
                        .await?)
            }
        };
        let listed = match read(false).await {
            Ok(false) => read(true).await,
            other => other,
        };
        listed.map_err(|e| error(INTERNAL_ERROR, &e.to_string()))
    }
}
