//! Which proxy, if any, a request goes through: the environment's
//! (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, read as reqwest
//! reads them) or one URL for everything (a backend's `proxy` key), or
//! none. Decided once per target (`Proxy::route`), when it is prepared:
//! a request pays nothing for it.
//!
//! The variables are read by whoever builds a `Proxy` (config, through its
//! `Env`; `sluice probe`, from the process), never here at a request: this
//! layer knows nothing of config, and a value comes in whole.
//!
//! Only `http://` proxies: an `https://` one (TLS to the proxy itself) is
//! refused when the value is read, rather than spoken to in clear.

use std::net::IpAddr;
use std::sync::Arc;

use http::Uri;
use http::header::HeaderValue;

/// The proxy policy of one client.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Proxy {
    /// For `http://` targets.
    http: Option<Arc<ProxyUrl>>,
    /// For `https://` targets, through a CONNECT tunnel.
    https: Option<Arc<ProxyUrl>>,
    /// Targets that go direct whatever the above say.
    no: NoProxy,
}

/// One proxy: where to connect, and the credentials its URL carried.
#[derive(PartialEq, Eq)]
pub(crate) struct ProxyUrl {
    /// `http://host:port/`: what the connector dials.
    pub(crate) uri: Uri,
    /// `Proxy-Authorization`, from the URL's user and password (marked
    /// sensitive).
    pub(crate) auth: Option<HeaderValue>,
    /// The URL without its credentials: what messages name.
    pub(crate) shown: Box<str>,
}

/// A proxy variable that could not be used: its name, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadVar {
    pub var: &'static str,
    pub why: String,
}

impl Proxy {
    /// Every target direct (a backend's `proxy = "none"`).
    pub fn none() -> Proxy {
        Proxy::default()
    }

    /// Every target, `http` and `https`, through `url` (a backend's
    /// `proxy`): no exceptions, `NO_PROXY` included.
    pub fn all(url: &str) -> Result<Proxy, String> {
        let url = Arc::new(ProxyUrl::parse(url)?);
        Ok(Proxy {
            http: Some(url.clone()),
            https: Some(url),
            no: NoProxy::default(),
        })
    }

    /// The environment's, as reqwest reads it: `HTTP_PROXY` else
    /// `http_proxy` for `http` targets, `HTTPS_PROXY` else `https_proxy`
    /// for `https` ones, `ALL_PROXY` else `all_proxy` for either when its
    /// own is unset, and `NO_PROXY` else `no_proxy` for the exceptions. An
    /// empty variable counts as unset. (curl reads only the lower-case
    /// `http_proxy`; here the upper-case one wins when both are set.)
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Proxy, BadVar> {
        let first = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| var(n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))
        };
        let parse = |found: Option<(&'static str, String)>| match found {
            None => Ok(None),
            Some((var, value)) => ProxyUrl::parse(&value)
                .map(|u| Some(Arc::new(u)))
                .map_err(|why| BadVar { var, why }),
        };
        let all = parse(first(["ALL_PROXY", "all_proxy"]))?;
        let http = parse(first(["HTTP_PROXY", "http_proxy"]))?.or_else(|| all.clone());
        let https = parse(first(["HTTPS_PROXY", "https_proxy"]))?.or(all);
        let no = first(["NO_PROXY", "no_proxy"])
            .map_or_else(NoProxy::default, |(_, v)| NoProxy::parse(&v));
        Ok(Proxy { http, https, no })
    }

    /// The process's own environment's, for `sluice probe` (which reads
    /// no config).
    pub(crate) fn from_process() -> Result<Proxy, String> {
        Proxy::from_vars(|name| std::env::var(name).ok())
            .map_err(|bad| format!("environment variable {}: {}", bad.var, bad.why))
    }

    /// The proxy a request to `uri` goes through; None: direct.
    pub(crate) fn route(&self, uri: &Uri) -> Option<&Arc<ProxyUrl>> {
        let proxy = match uri.scheme_str()? {
            "http" => self.http.as_ref()?,
            "https" => self.https.as_ref()?,
            _ => return None,
        };
        (!self.no.contains(uri.host()?)).then_some(proxy)
    }

    /// The proxy `url` would go through, credentials left out, for
    /// `sluice check`.
    pub fn shown_for(&self, url: &str) -> Option<String> {
        let uri: Uri = url.parse().ok()?;
        self.route(&uri).map(|p| p.shown.to_string())
    }
}

/// Never the credentials.
impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |p: &Option<Arc<ProxyUrl>>| p.as_ref().map(|p| p.shown.clone());
        f.debug_struct("Proxy")
            .field("http", &shown(&self.http))
            .field("https", &shown(&self.https))
            .field("no_proxy", &self.no.written)
            .finish()
    }
}

/// Never the credentials.
impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl ProxyUrl {
    /// `http://[user[:password]@]host[:port][/]`, or `host:port` with the
    /// scheme left out (taken as `http`, as curl and reqwest take it). The
    /// port defaults to 80, as reqwest's does (curl's is 1080). A path is
    /// ignored. Messages never repeat the value: it may hold a password.
    fn parse(text: &str) -> Result<ProxyUrl, String> {
        let text = text.trim();
        let with_scheme;
        let text = if text.contains("://") {
            text
        } else {
            with_scheme = format!("http://{text}");
            &with_scheme
        };
        let url = url::Url::parse(text).map_err(|e| format!("not a proxy URL ({e})"))?;
        match url.scheme() {
            "http" => {}
            "https" => {
                return Err(
                    "an https:// proxy (TLS to the proxy) is not supported; use http://".to_owned(),
                );
            }
            other => return Err(format!("proxy scheme {other}: only http:// is supported")),
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("the proxy URL has no host")?;
        let port = url.port_or_known_default().unwrap_or(80);
        let uri: Uri = format!("http://{host}:{port}/")
            .parse()
            .map_err(|_| "the proxy URL's host is not valid".to_owned())?;
        Ok(ProxyUrl {
            uri,
            auth: basic_auth(&url),
            shown: format!("http://{host}:{port}").into(),
        })
    }
}

/// `Basic` credentials from a URL's user and password (percent-decoded),
/// if it has them, marked sensitive: a proxy's, and a backend URL's
/// (`upstream::start`).
pub(crate) fn basic_auth(url: &url::Url) -> Option<HeaderValue> {
    use base64::Engine as _;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let pair = format!(
        "{}:{}",
        decode(url.username()),
        decode(url.password().unwrap_or(""))
    );
    let token = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::try_from(format!("Basic {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// `NO_PROXY`: comma-separated entries, each `*` (every target), an IP
/// address, a CIDR block (`10.0.0.0/8`, `fd00::/8`), or a domain, which
/// matches itself and every name under it (`example.com` and
/// `.example.com` alike, as reqwest and curl match them). A `:port` after
/// an entry is ignored: an entry names hosts, whatever their port. Hosts
/// are matched as the URL writes them, never resolved: `localhost` and
/// `127.0.0.1` are not special, and go direct only when listed.
#[derive(Clone, Default, PartialEq, Eq)]
struct NoProxy {
    everything: bool,
    nets: Box<[(IpAddr, u8)]>,
    /// Lower case, no leading dot.
    domains: Box<[Box<str>]>,
    /// As written, for `Debug`.
    written: Box<str>,
}

impl NoProxy {
    fn parse(text: &str) -> NoProxy {
        let mut no = NoProxy {
            written: text.into(),
            ..NoProxy::default()
        };
        let (mut nets, mut domains) = (Vec::new(), Vec::new());
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                no.everything = true;
            } else if let Some(net) = net(entry) {
                nets.push(net);
            } else {
                let name = without_port(entry)
                    .trim_start_matches("*.")
                    .trim_start_matches('.');
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if !name.is_empty() {
                    domains.push(name.into());
                }
            }
        }
        no.nets = nets.into();
        no.domains = domains.into();
        no
    }

    fn contains(&self, host: &str) -> bool {
        if self.everything {
            return true;
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.nets.iter().any(|&(net, bits)| within(ip, net, bits));
        }
        let host = host.trim_end_matches('.');
        self.domains.iter().any(|d| {
            host.len() >= d.len()
                && host[host.len() - d.len()..].eq_ignore_ascii_case(d)
                && (host.len() == d.len() || host.as_bytes()[host.len() - d.len() - 1] == b'.')
        })
    }
}

/// An address or a CIDR block (`[v6]` and a `:port` allowed and the port
/// dropped); None for a name.
fn net(entry: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = match entry.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits.parse::<u8>().ok()?)),
        None => (entry, None),
    };
    let ip = addr.parse::<IpAddr>().ok().or_else(|| {
        let addr = without_port(addr);
        addr.trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()
    })?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match bits {
        Some(b) if b > max => None,
        b => Some((ip, b.unwrap_or(max))),
    }
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`; anything else as it is.
fn without_port(entry: &str) -> &str {
    match entry.rsplit_once(':') {
        Some((host, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']')) =>
        {
            host
        }
        _ => entry,
    }
}

fn within(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        // An IPv4-mapped IPv6 host against an IPv4 block, and the reverse.
        (IpAddr::V6(ip), IpAddr::V4(_)) => ip
            .to_ipv4_mapped()
            .is_some_and(|ip| within(IpAddr::V4(ip), net, bits)),
        (IpAddr::V4(_), IpAddr::V6(_)) => false,
    }
}

#[cfg(test)]
mod tests;
