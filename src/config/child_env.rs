//! What a stdio child's environment holds, and which variables are the
//! gateway's own secrets.
//!
//! A child starts with an empty environment, as the official SDKs' stdio
//! clients start theirs: only what a program needs to run (`HOME`,
//! `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`), the locale and time zone
//! (`LANG`, `LC_*`, `TZ`: without them a child decodes text and prints
//! times otherwise than the operator's shell does, and they hold nothing
//! secret), the names its backend's `inherit_env` adds, then its `env`.
//! A variable of the gateway's own never passes, whoever asks for it.

use std::sync::Arc;

/// Passed to every child when the gateway has them.
pub(crate) const BASE: [&str; 8] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TZ",
];
/// Locale categories (`LC_ALL`, `LC_CTYPE`, ...) pass by prefix.
const LOCALE_PREFIX: &str = "LC_";
/// Everything under this prefix configures the gateway (its session key
/// among them): never a child's business.
const GATEWAY_PREFIX: &str = "SLUICE_";

/// The variables the config names as a secret's source (`bearer_tokens_env`,
/// `token_env`, `client_secret_env`, ...) with the key that names each, and
/// those a principal's credentials are read from (`${VAR}` in
/// `[backends.NAME.principals.PRINCIPAL]`), with the principal they are for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretVars {
    gateway: Arc<[(String, String)]>,
    /// (variable, key, the principal's key as written).
    principals: Arc<[(String, String, String)]>,
}

impl SecretVars {
    pub(super) fn new(sources: Vec<(String, String)>) -> Self {
        Self {
            gateway: sources.into(),
            principals: Arc::default(),
        }
    }

    /// The same, with the variables principals' credentials come from.
    pub(super) fn with_principals(mut self, sources: Vec<(String, String, String)>) -> Self {
        self.principals = sources.into();
        self
    }

    /// Why `var` must stay in the gateway, or None when it may leave.
    pub(crate) fn why(&self, var: &str) -> Option<String> {
        self.why_for(var, None)
    }

    /// Why `var` may not go into principal `owner`'s credentials (None:
    /// any other value): a principal's own variables go to it alone.
    pub(crate) fn why_for(&self, var: &str, owner: Option<&str>) -> Option<String> {
        if var.starts_with(GATEWAY_PREFIX) {
            return Some(format!(
                "`{var}` is the gateway's own (every `{GATEWAY_PREFIX}*` variable is)"
            ));
        }
        // `NAME_FILE` names the file a secret is read from (`config::env`).
        let names = |source: &str| var == source || var.strip_suffix("_FILE") == Some(source);
        let gateway = self.gateway.iter().find_map(|(source, key)| {
            names(source).then(|| format!("`{var}` holds the gateway's secret `{key}`"))
        });
        gateway.or_else(|| {
            self.principals
                .iter()
                .find(|(source, _, p)| names(source) && owner != Some(p.as_str()))
                .map(|(_, key, p)| format!("`{var}` holds principal `{p}`'s credentials (`{key}`)"))
        })
    }
}

/// Which of the gateway's variables a child inherits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inherit {
    /// A backend's `inherit_env`, checked against `secrets` when built.
    names: Vec<String>,
    secrets: SecretVars,
}

impl Inherit {
    pub(super) fn new(names: Vec<String>, secrets: SecretVars) -> Self {
        Self { names, secrets }
    }

    /// Whether the child gets the gateway's variable `name`.
    pub fn passes(&self, name: &str) -> bool {
        let wanted = BASE.contains(&name)
            || name.starts_with(LOCALE_PREFIX)
            || self.names.iter().any(|n| n == name);
        wanted && self.secrets.why(name).is_none()
    }

    /// The names `inherit_env` added, for `sluice check`.
    pub(crate) fn added(&self) -> &[String] {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> SecretVars {
        SecretVars::new(vec![
            ("TOKENS".to_owned(), "auth.bearer_tokens_env".to_owned()),
            ("USER".to_owned(), "metrics.token_env".to_owned()),
        ])
    }

    #[test]
    fn base_locale_and_added_names_pass() {
        let inherit = Inherit::new(vec!["EXTRA".to_owned()], secrets());
        for name in ["HOME", "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "EXTRA"] {
            assert!(inherit.passes(name), "{name}");
        }
        for name in ["OTHER", "HOME_FILE", "LC", "PATHX", "extra"] {
            assert!(!inherit.passes(name), "{name}");
        }
    }

    #[test]
    fn secrets_never_pass() {
        // Even a base name, when the config makes it a secret's source.
        let inherit = Inherit::new(vec!["TOKENS".to_owned(), "SLUICE_X".to_owned()], secrets());
        for name in [
            "TOKENS",
            "TOKENS_FILE",
            "USER",
            "USER_FILE",
            "SLUICE_X",
            "SLUICE_SESSION_KEY",
        ] {
            assert!(!inherit.passes(name), "{name}");
        }
        assert_eq!(
            secrets().why("TOKENS_FILE").unwrap(),
            "`TOKENS_FILE` holds the gateway's secret `auth.bearer_tokens_env`"
        );
        assert!(secrets().why("SLUICE_LOG").unwrap().contains("`SLUICE_*`"));
        assert_eq!(secrets().why("TOKENS_FILE_FILE"), None);
    }

    #[test]
    fn a_principals_variables_are_its_own() {
        let secrets = secrets().with_principals(vec![(
            "ALICE_GH".to_owned(),
            "backends.gh.principals.alice.headers.Authorization".to_owned(),
            "alice".to_owned(),
        )]);
        assert_eq!(secrets.why_for("ALICE_GH", Some("alice")), None);
        assert_eq!(secrets.why_for("ALICE_GH_FILE", Some("alice")), None);
        for owner in [None, Some("bob")] {
            let why = secrets.why_for("ALICE_GH", owner).unwrap();
            assert!(why.contains("principal `alice`'s credentials"), "{why}");
        }
        // Never a child's, by inherit_env.
        let inherit = Inherit::new(vec!["ALICE_GH".to_owned()], secrets.clone());
        assert!(!inherit.passes("ALICE_GH") && !inherit.passes("ALICE_GH_FILE"));
        // The gateway's own stay refused, whoever asks.
        assert!(secrets.why_for("TOKENS", Some("alice")).is_some());
    }
}
