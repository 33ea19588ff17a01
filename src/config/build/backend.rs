//! Backends and namespaces: transports, their keys, `${VAR}` interpolation
//! and tool filters; namespace membership.

use std::time::Duration;

use indexmap::IndexMap;

use super::super::duration::FileDuration;
use super::super::env::{interpolate, interpolate_for};
use super::super::error::dotted;
use super::super::file::{self, FileBackend, FileNamespace, FileTransport};
use super::super::{
    AuthSettings, BackendConfig, BackendName, ClientCredentials, Discovery, Inherit, Isolation,
    NamespaceConfig, NamespaceName, Prefix, Proxy, Secret, TokenExchange, ToolFilter, ToolScopes,
    Transport,
};
use super::Builder;

impl Builder<'_> {
    pub(super) fn backend(
        &mut self,
        name: &str,
        b: &FileBackend,
        default_timeout: Duration,
        auth: Option<&AuthSettings>,
    ) -> Option<BackendConfig> {
        let section = self.syntax.backends();
        let name_ok = BackendName::new(name)
            .map_err(|e| self.at_key(&[section, name], e))
            .ok();
        let kind = match (b.transport, &b.command, &b.url) {
            (Some(kind), _, _) => kind,
            (None, Some(_), None) => FileTransport::Stdio,
            (None, None, Some(_)) => FileTransport::Http,
            (None, command, _) => {
                let t = self.syntax.transport();
                let message = if command.is_some() {
                    format!("both `command` and `url` are set; `{t}` must say which to use")
                } else {
                    format!("missing `{t}` (stdio, http or sse), or `command` or `url`")
                };
                self.at_key(&[section, name], message);
                return None;
            }
        };
        let transport = self.transport(name, kind, b);
        let principals = self.principals(name, kind, b, auth);
        let max_sessions = match b.max_sessions {
            Some(0) => {
                self.at_key(
                    &[section, name, "max_sessions"],
                    "must be greater than zero",
                );
                0
            }
            n => n.unwrap_or(file::DEFAULT_BACKEND_MAX_SESSIONS),
        };
        let mut duration = |key: &str, value: Option<FileDuration>, default: Duration| match value {
            Some(FileDuration(d)) if d.is_zero() => {
                self.at_key(&[section, name, key], "must not be zero");
                d
            }
            Some(FileDuration(d)) => d,
            None => default,
        };
        let idle_ttl = duration("idle_ttl", b.idle_ttl, file::DEFAULT_BACKEND_IDLE_TTL);
        let request_timeout = duration("request_timeout", b.request_timeout, default_timeout);
        let health_interval = b
            .health_interval
            .map_or(file::DEFAULT_HEALTH_INTERVAL, |FileDuration(d)| d);
        let tools = match &b.tools {
            None => Some(ToolFilter::all()),
            Some(t) => ToolFilter::new(
                t.include.clone().unwrap_or_else(|| vec!["*".to_owned()]),
                t.exclude.clone(),
                t.rename
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
            .map_err(|e| {
                for problem in e.0 {
                    self.at_key(&[section, name, "tools"], problem);
                }
            })
            .ok(),
        };
        let mut roots = Vec::new();
        for (i, uri) in b.roots.iter().flatten().enumerate() {
            match uri.split_once("://") {
                Some((scheme, rest)) if !scheme.is_empty() && !rest.is_empty() => {
                    roots.push(uri.clone())
                }
                _ => self.at_item(
                    &[section, name, "roots"],
                    i,
                    uri,
                    "is not a URI (expected e.g. file:///srv/data)",
                ),
            }
        }
        Some(BackendConfig {
            name: name_ok?,
            transport: transport?,
            roots,
            isolation: match b.isolation {
                Some(file::FileIsolation::PerSession) => Isolation::PerSession,
                Some(file::FileIsolation::Shared) | None => Isolation::Shared,
            },
            max_sessions,
            idle_ttl,
            request_timeout,
            health_interval,
            tools: tools?,
            credentials: match &b.oauth {
                None => None,
                Some(o) if o.flow == Some(file::FileOAuthFlow::AuthorizationCode) => None,
                Some(o) => Some(self.credentials(name, kind, b, o)?),
            },
            code_flow: self.code_flow(name, kind, b)?,
            proxy: match kind {
                FileTransport::Stdio => Proxy::none(),
                FileTransport::Http | FileTransport::Sse => self.proxy(name, b.proxy.as_deref())?,
            },
            principals: principals?,
        })
    }

    fn credentials(
        &mut self,
        name: &str,
        kind: FileTransport,
        b: &FileBackend,
        o: &file::FileBackendOAuth,
    ) -> Option<ClientCredentials> {
        let section = self.syntax.backends();
        let at = [section, name, "oauth"];
        if kind == FileTransport::Stdio {
            self.at_key(&at, "only http and sse backends take a token");
            return None;
        }
        let has_auth = b
            .headers
            .iter()
            .flatten()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        let url_auth = b.url.as_deref().is_some_and(|u| {
            u.split_once("://")
                .is_some_and(|(_, rest)| rest.split('/').next().is_some_and(|a| a.contains('@')))
        });
        if has_auth || url_auth {
            self.at_key(
                &at,
                "the backend already has an Authorization (in `headers` or the URL)",
            );
            return None;
        }
        let token_url = match o.token_url.as_deref().map(super::absolute_url) {
            Some(Ok(uri)) => Some(uri),
            Some(Err(why)) => {
                self.at_key(&at, format!("token_url: {why}"));
                None
            }
            None => {
                self.at_key(
                    &at,
                    "needs a token_url (the authorization server's token endpoint)",
                );
                None
            }
        };
        let client_id = o.client_id.clone().filter(|c| !c.is_empty());
        if client_id.is_none() {
            self.at_key(&at, "needs a client_id");
        }
        let secret = match o.client_secret_env.as_deref().filter(|v| !v.is_empty()) {
            None => {
                self.at_key(
                    &at,
                    "needs client_secret_env (the variable holding the client secret)",
                );
                None
            }
            Some(var) => match self.env.var(var) {
                Some(secret) if !secret.is_empty() => Some(Secret::new(secret)),
                _ => {
                    self.at_key(&at, format!("environment variable `{var}` is not set"));
                    None
                }
            },
        };
        Some(ClientCredentials {
            token_url: token_url?,
            client_id: client_id?,
            client_secret: secret?,
            scopes: o.scopes.clone().unwrap_or_default(),
            resource: o.resource.clone(),
            exchange: o.exchange.as_ref().map(|x| TokenExchange {
                audience: x.audience.clone(),
                resource: x.resource.clone().or_else(|| o.resource.clone()),
                scopes: x
                    .scopes
                    .clone()
                    .or_else(|| o.scopes.clone())
                    .unwrap_or_default(),
            }),
        })
    }

    fn transport(&mut self, name: &str, kind: FileTransport, b: &FileBackend) -> Option<Transport> {
        let section = self.syntax.backends();
        let foreign: &[(&str, bool)] = match kind {
            FileTransport::Stdio => &[
                ("url", b.url.is_some()),
                ("headers", b.headers.is_some()),
                ("proxy", b.proxy.is_some()),
            ],
            FileTransport::Http | FileTransport::Sse => &[
                ("command", b.command.is_some()),
                ("args", b.args.is_some()),
                ("env", b.env.is_some()),
                ("inherit_env", b.inherit_env.is_some()),
                ("cwd", b.cwd.is_some()),
                ("sandbox", b.sandbox.is_some()),
            ],
        };
        let which = format!("{} = \"{}\"", self.syntax.transport(), kind.as_str());
        for (key, present) in foreign {
            if *present {
                self.at_key(&[section, name, key], format!("not allowed with {which}"));
            }
        }
        match kind {
            FileTransport::Stdio => self.stdio(name, b, &which),
            FileTransport::Http => {
                let (url, headers) = self.http(name, b, &which)?;
                Some(Transport::Http { url, headers })
            }
            FileTransport::Sse => {
                let (url, headers) = self.http(name, b, &which)?;
                Some(Transport::Sse { url, headers })
            }
        }
    }

    /// `proxy`: a URL (`${VAR}` allowed, for its password), or "none";
    /// unset, the environment's.
    fn proxy(&mut self, name: &str, written: Option<&str>) -> Option<Proxy> {
        let path = [self.syntax.backends(), name, "proxy"];
        match written.map(str::trim) {
            None => Some(self.env_proxy()),
            Some("none") => Some(Proxy::none()),
            Some(url) => {
                let url = self.expand(&path, url)?;
                Proxy::all(&url).map_err(|why| self.at_key(&path, why)).ok()
            }
        }
    }

    fn stdio(&mut self, name: &str, b: &FileBackend, which: &str) -> Option<Transport> {
        let section = self.syntax.backends();
        let command = b.command.clone().filter(|c| !c.trim().is_empty());
        if command.is_none() {
            self.at_key(
                &[section, name, "command"],
                format!("required with {which}"),
            );
        }
        let args: Vec<Option<String>> = b
            .args
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, arg)| self.expand_item(&[section, name, "args"], i, arg))
            .collect();
        let mut env = Vec::new();
        for (key, value) in b.env.iter().flatten() {
            let path = [section, name, "env", key.as_str()];
            if key.is_empty() || key.contains(['=', '\0']) {
                self.at_key(&path, "not a valid environment variable name");
            }
            env.push(self.expand(&path, value).map(|v| (key.clone(), v)));
        }
        let inherit = self.inherit_env(&[section, name, "inherit_env"], b);
        let sandbox = self.sandbox(name, b.sandbox.as_ref());
        Some(Transport::Stdio {
            command: command?,
            args: args.into_iter().collect::<Option<_>>()?,
            env: env.into_iter().collect::<Option<_>>()?,
            inherit: inherit?,
            cwd: b.cwd.clone(),
            sandbox: sandbox?.map(Box::new),
        })
    }

    /// `inherit_env`: more of the gateway's variables for the child, by
    /// name; never one of the gateway's secrets.
    fn inherit_env(&mut self, path: &[&str], b: &FileBackend) -> Option<Inherit> {
        let mut names: Vec<String> = Vec::new();
        let mut ok = true;
        for (i, var) in b.inherit_env.iter().flatten().enumerate() {
            let shown = format_args!("{}[{i}]", dotted(path));
            let problem = if var.is_empty() || var.contains(['=', '\0']) {
                Some("not a valid environment variable name".to_owned())
            } else if let Some(why) = self.secrets.why(var) {
                Some(format!("{why}, and is never passed to a child"))
            } else if names.contains(var) {
                Some(format!("`{var}` is listed twice"))
            } else {
                None
            };
            match problem {
                Some(message) => {
                    self.at_item(path, i, shown, message);
                    ok = false;
                }
                None => names.push(var.clone()),
            }
        }
        ok.then(|| Inherit::new(names, self.secrets.clone()))
    }

    fn http(
        &mut self,
        name: &str,
        b: &FileBackend,
        which: &str,
    ) -> Option<(String, Vec<(String, Secret)>)> {
        let section = self.syntax.backends();
        let url = match &b.url {
            None => {
                self.at_key(&[section, name, "url"], format!("required with {which}"));
                None
            }
            Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                let shown = super::super::describe::redact_url(u);
                let message = format!("`{shown}` must start with http:// or https://");
                self.at_key(&[section, name, "url"], message);
                None
            }
            Some(u) => Some(u.clone()),
        };
        let headers = self.headers(&[section, name, "headers"], b.headers.as_ref(), None);
        Some((url?, headers?))
    }

    /// The headers of the table at `at` (a backend's own, or principal
    /// `owner`'s), values expanded.
    pub(super) fn headers(
        &mut self,
        at: &[&str],
        headers: Option<&IndexMap<String, String>>,
        owner: Option<&str>,
    ) -> Option<Vec<(String, Secret)>> {
        let mut out = Vec::new();
        let mut ok = true;
        for (key, value) in headers.into_iter().flatten() {
            let mut path = at.to_vec();
            path.push(key.as_str());
            if !is_header_name(key) {
                self.at_key(&path, "not a valid HTTP header name");
                ok = false;
            } else if out
                .iter()
                .any(|(k, _): &(String, Secret)| k.eq_ignore_ascii_case(key))
            {
                // Header names are case-insensitive: two spellings are one header.
                self.at_key(&path, "duplicate header (names are case-insensitive)");
                ok = false;
            }
            match self.expand_for(&path, value, owner) {
                Some(v) if v.contains(['\r', '\n', '\0']) => {
                    // The value may be a secret: say what is wrong, not what it is.
                    self.at_key(&path, "value contains a line break or NUL");
                    ok = false;
                }
                Some(v) => out.push((key.clone(), Secret::new(v))),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn expand(&mut self, path: &[&str], value: &str) -> Option<String> {
        self.expand_for(path, value, None)
    }

    /// `expand` for principal `owner`'s credentials (see `interpolate_for`).
    pub(super) fn expand_for(
        &mut self,
        path: &[&str],
        value: &str,
        owner: Option<&str>,
    ) -> Option<String> {
        interpolate_for(value, self.env, &self.secrets, owner)
            .map_err(|e| self.at_key(path, e))
            .ok()
    }

    fn expand_item(&mut self, path: &[&str], index: usize, value: &str) -> Option<String> {
        interpolate(value, self.env, &self.secrets)
            .map_err(|e| self.at_item(path, index, format_args!("{}[{index}]", dotted(path)), e))
            .ok()
    }

    pub(super) fn namespaces(
        &mut self,
        written: &IndexMap<String, FileNamespace>,
        declared: &IndexMap<String, FileBackend>,
        backends: &[BackendConfig],
    ) -> Vec<NamespaceConfig> {
        if written.is_empty() {
            return vec![NamespaceConfig {
                name: NamespaceName::trusted(file::DEFAULT_NAMESPACE),
                backends: backends.iter().map(|b| b.name.clone()).collect(),
                prefix: Prefix::Always,
                require_scopes: Vec::new(),
                tool_scopes: ToolScopes::default(),
                discovery: Discovery::List,
            }];
        }
        let mut out = Vec::new();
        for (ns, n) in written {
            let name = NamespaceName::new(ns)
                .map_err(|e| self.at_key(&["namespaces", ns], e))
                .ok();
            if n.backends.is_empty() {
                self.at_key(
                    &["namespaces", ns, "backends"],
                    format!("namespace `{ns}` has no backends"),
                );
            }
            let mut members: Vec<BackendName> = Vec::new();
            for (i, member) in n.backends.iter().enumerate() {
                let path = ["namespaces", ns.as_str(), "backends"];
                let shown = dotted(&path);
                if !declared.contains_key(member) {
                    let known: Vec<&str> = declared.keys().map(String::as_str).collect();
                    let message = format!(
                        "namespace `{ns}` names unknown backend `{member}` (known: {})",
                        known.join(", ")
                    );
                    self.at_item(&path, i, shown, message);
                } else if members.iter().any(|m| m.as_str() == member) {
                    let message = format!("namespace `{ns}` lists backend `{member}` twice");
                    self.at_item(&path, i, shown, message);
                } else if let Some(b) = backends.iter().find(|b| b.name.as_str() == member) {
                    members.push(b.name.clone());
                }
            }
            let prefix = match n.prefix {
                Some(file::FilePrefix::Never) => Prefix::Never,
                Some(file::FilePrefix::Always) | None => Prefix::Always,
            };
            let members_of = |m: &BackendName| backends.iter().find(|b| &b.name == m);
            let served: Vec<&BackendConfig> = members.iter().filter_map(members_of).collect();
            let discovery = self.discovery(ns, n, prefix, &served);
            if let Some(name) = name {
                out.push(NamespaceConfig {
                    name,
                    backends: members,
                    prefix,
                    discovery,
                    require_scopes: self.scopes(
                        &format!("namespaces.{ns}.require_scopes"),
                        n.require_scopes.clone().unwrap_or_default(),
                    ),
                    tool_scopes: ToolScopes::new(
                        n.tool_scopes
                            .iter()
                            .flatten()
                            .map(|(pattern, scopes)| {
                                let key = format!("namespaces.{ns}.tool_scopes.{pattern}");
                                (pattern.clone(), self.scopes(&key, scopes.clone()))
                            })
                            .collect(),
                    ),
                });
            }
        }
        out
    }
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
