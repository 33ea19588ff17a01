//! URL mode elicitations (SEP-1036) a backend handed to a client, by their
//! `elicitationId`. The backend's `notifications/elicitation/complete` for
//! one may come long after the call that asked, outside any request (a
//! legacy backend's GET stream, a stdio pipe), where nothing else ties it
//! to a client: this says which client it was. Learned from a relayed
//! `elicitation/create` in URL mode and from the `data.elicitations` of a
//! -32042 error answered to a call; each is forgotten when its completion
//! is delivered, after `TTL`, or, oldest first, past `MAX`.

use indexmap::IndexMap;
use serde::Deserialize;
use tokio::time::Instant;

use crate::upstream::ClientKey;

/// Elicitations remembered per backend session.
const MAX: usize = 1024;
/// How long one waits for its completion (an authorization flow's state
/// lives 10 minutes; the user may take about that long).
const TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// JSON-RPC error code: URL elicitation required (2025-11-25).
pub(crate) const URL_ELICITATION_REQUIRED: i64 = -32042;

/// In the order they were learned, so the oldest go first.
#[derive(Default)]
pub(super) struct Elicitations(IndexMap<String, (ClientKey, Instant)>);

impl Elicitations {
    /// `id` was handed to `client` (again: the latest client has it).
    pub(super) fn learn(&mut self, id: String, client: ClientKey) {
        let now = Instant::now();
        while let Some((_, (_, at))) = self.0.first()
            && now.duration_since(*at) >= TTL
        {
            self.0.shift_remove_index(0);
        }
        self.0.shift_remove(&id);
        if self.0.len() >= MAX {
            self.0.shift_remove_index(0);
        }
        self.0.insert(id, (client, now));
    }

    /// The client `id` was handed to, forgotten now (a completion is said once).
    pub(super) fn take(&mut self, id: &str) -> Option<ClientKey> {
        let (client, at) = self.0.shift_remove(id)?;
        (at.elapsed() < TTL).then_some(client)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Elicitation {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    elicitation_id: Option<String>,
}

impl Elicitation {
    fn url_id(self) -> Option<String> {
        (self.mode.as_deref() == Some("url"))
            .then_some(self.elicitation_id)
            .flatten()
            .filter(|id| !id.is_empty())
    }
}

/// The id of an `elicitation/create` in URL mode (its params).
pub(super) fn of_request(params: &str) -> Option<String> {
    if !params.contains("elicitationId") {
        return None;
    }
    serde_json::from_str::<Elicitation>(params).ok()?.url_id()
}

/// The ids a -32042 error object lists in `data.elicitations` (none for
/// any other error).
pub(super) fn of_error(error: &str) -> Vec<String> {
    #[derive(Deserialize)]
    struct Error {
        code: i64,
        #[serde(default)]
        data: Option<Data>,
    }
    #[derive(Deserialize)]
    struct Data {
        #[serde(default)]
        elicitations: Vec<Elicitation>,
    }
    if !error.contains("-32042") {
        return Vec::new();
    }
    match serde_json::from_str::<Error>(error) {
        Ok(Error {
            code: URL_ELICITATION_REQUIRED,
            data: Some(data),
        }) => data
            .elicitations
            .into_iter()
            .filter_map(Elicitation::url_id)
            .collect(),
        _ => Vec::new(),
    }
}

/// The id a `notifications/elicitation/complete` names (its params).
pub(super) fn of_completion(params: &str) -> Option<String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Complete {
        elicitation_id: String,
    }
    Some(
        serde_json::from_str::<Complete>(params)
            .ok()?
            .elicitation_id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Principal;

    fn client(n: usize) -> ClientKey {
        ClientKey::Principal(Principal::named(n))
    }

    #[test]
    fn ids_are_read_from_url_mode_requests_errors_and_completions() {
        let url = r#"{"mode":"url","message":"m","url":"https://x","elicitationId":"e1"}"#;
        assert_eq!(of_request(url).as_deref(), Some("e1"));
        let form = r#"{"mode":"form","message":"m","requestedSchema":{},"elicitationId":"e1"}"#;
        assert_eq!(of_request(form), None, "only URL mode");
        assert_eq!(of_request(r#"{"mode":"url","url":"u"}"#), None);
        let error = r#"{"code":-32042,"message":"go","data":{"elicitations":[
            {"mode":"url","elicitationId":"a","url":"u","message":"m"},
            {"mode":"url","elicitationId":"b","url":"u","message":"m"}]}}"#;
        assert_eq!(of_error(error), ["a", "b"]);
        let other = r#"{"code":-32602,"message":"-32042","data":{"elicitations":[{"mode":"url","elicitationId":"a"}]}}"#;
        assert!(of_error(other).is_empty(), "only -32042");
        assert!(of_error(r#"{"code":-32042,"message":"no data"}"#).is_empty());
        assert_eq!(
            of_completion(r#"{"elicitationId":"e9","_meta":{}}"#).as_deref(),
            Some("e9")
        );
        assert_eq!(of_completion("{}"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn each_is_said_once_and_forgotten_when_old_or_past_the_bound() {
        let mut e = Elicitations::default();
        e.learn("a".into(), client(1));
        e.learn("a".into(), client(2));
        assert_eq!(e.take("a"), Some(client(2)), "the latest client has it");
        assert_eq!(e.take("a"), None, "said once");

        e.learn("old".into(), client(1));
        tokio::time::advance(TTL).await;
        assert_eq!(e.take("old"), None, "expired");
        e.learn("x".into(), client(1));
        tokio::time::advance(TTL).await;
        e.learn("y".into(), client(1));
        assert_eq!(e.len(), 1, "the expired one went when another came");

        for n in 0..MAX + 5 {
            e.learn(format!("n{n}"), client(3));
        }
        assert_eq!(e.len(), MAX);
        assert_eq!(e.take("n0"), None, "the oldest went first");
        assert_eq!(e.take(&format!("n{}", MAX + 4)), Some(client(3)));
    }
}
