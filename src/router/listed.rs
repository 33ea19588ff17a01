//! Nothing is forwarded by a name the gateway would not list to the
//! caller: a tool, prompt or resource is called only when its backend lists
//! it (exactly, as the backend spells it) after the namespace's filters,
//! renames and scopes have let the exposed name through.

use super::kind::Kind;
use super::names;
use super::namespace::{Namespace, error};
use crate::jsonrpc::{INTERNAL_ERROR, Outcome};
use crate::upstream::{Caller, Listing};

impl Namespace {
    /// Whether member `i` lists `original` (of `kind`) for `caller`. A
    /// resource is listed by its URI, or by a template it matches (or is);
    /// the catalogs are read again for a miss only when neither holds it.
    pub(super) async fn lists(
        &self,
        caller: &Caller,
        i: usize,
        kind: Kind,
        original: &str,
    ) -> Result<bool, Outcome> {
        let method = match kind {
            Kind::Tool | Kind::Prompt | Kind::Template => kind.list_method(),
            Kind::Resource => "resources/list",
        };
        // The common call: listed in the catalog as read, no future to run.
        if self.members[i]
            .backend
            .listed_now(caller, method, |l| l.has(original))
        {
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
