//! The tables the gateway is operated by: `[metrics]`, `[limits]`,
//! `[cluster]` and `[tracing]`.

use super::super::duration::FileDuration;
use super::super::file::{self, FileMetrics};
use super::super::tls::{self, TlsFiles};
use super::super::{
    ClusterSettings, LimitsSettings, MetricsSettings, Rate, Secret, ServerSettings, SessionIdMode,
    TracingSettings,
};
use super::Builder;

const CA: &str = "cluster.redis_ca_file";
const CERT: &str = "cluster.redis_client_cert_file";
const KEY: &str = "cluster.redis_client_key_file";

impl Builder<'_> {
    pub(super) fn metrics(&mut self, m: FileMetrics) -> MetricsSettings {
        let d = MetricsSettings::default();
        let path = m.path.unwrap_or(d.path);
        if !path.starts_with('/') {
            self.setting("metrics.path", format!("`{path}` must start with `/`"));
        } else if ["/mcp", "/healthz", "/readyz", "/status"].contains(&path.as_str())
            || path.starts_with("/ns/")
        {
            self.setting(
                "metrics.path",
                format!("`{path}` is one of the gateway's own routes"),
            );
        }
        let token = match m.token_env.filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(var) => match self.env.var(&var).map(|t| t.trim().to_owned()) {
                Some(t) if !t.is_empty() => Some(Secret::new(t)),
                Some(_) => {
                    self.setting(
                        "metrics.token_env",
                        format!("environment variable `{var}` is empty"),
                    );
                    None
                }
                None => {
                    self.setting(
                        "metrics.token_env",
                        format!("environment variable `{var}` is not set"),
                    );
                    None
                }
            },
        };
        MetricsSettings {
            path,
            token,
            summary_interval: m
                .summary_interval
                .map_or(d.summary_interval, |FileDuration(d)| d),
        }
    }

    pub(super) fn limits(&mut self, l: file::FileLimits) -> LimitsSettings {
        use std::num::{NonZeroU32, NonZeroUsize};
        let per_second = l.requests_per_second.and_then(NonZeroU32::new);
        let burst = match (per_second, l.burst) {
            (_, Some(0)) | (_, None) => per_second,
            (Some(_), Some(b)) => NonZeroU32::new(b),
            (None, Some(_)) => {
                self.setting("limits.burst", "a burst needs limits.requests_per_second");
                None
            }
        };
        LimitsSettings {
            rate: per_second
                .zip(burst)
                .map(|(per_second, burst)| Rate { per_second, burst }),
            max_concurrent_requests: l.max_concurrent_requests.and_then(NonZeroUsize::new),
            max_streams_per_principal: l.max_streams_per_principal,
        }
    }

    pub(super) fn cluster(
        &mut self,
        c: file::FileCluster,
        server: &ServerSettings,
    ) -> Option<ClusterSettings> {
        let url = c.redis_url.filter(|u| !u.trim().is_empty());
        let Some(url) = url else {
            self.setting("cluster.redis_url", "[cluster] needs a redis_url");
            return None;
        };
        if !(url.starts_with("redis://")
            || url.starts_with("rediss://")
            || url.starts_with("unix://"))
        {
            // Not echoed: it may hold a password.
            self.setting(
                "cluster.redis_url",
                "must start with redis://, rediss:// or unix://",
            );
            return None;
        }
        if server.session_ids != SessionIdMode::Sealed {
            self.setting(
                "cluster.redis_url",
                "cluster mode needs server.session_ids = \"sealed\" (a table id lives in one process)",
            );
            return None;
        }
        let tls = url.starts_with("rediss://");
        let (ca_file, cert, key) = (
            c.redis_ca_file,
            c.redis_client_cert_file,
            c.redis_client_key_file,
        );
        for (k, path) in [(CA, &ca_file), (CERT, &cert), (KEY, &key)] {
            if path.is_some() && !tls {
                self.setting(k, "only for a rediss:// (TLS) redis_url");
            }
        }
        // Read as the Redis client's rustls reads them at each connection:
        // what it would refuse is refused here, at start and by `check`,
        // not met at every reconnection.
        if let Some(ca) = ca_file.as_deref().filter(|_| tls)
            && let Err(why) = tls::check_roots(ca)
        {
            self.setting(CA, why);
        }
        let client_cert = match (cert, key) {
            (Some(cert_file), Some(key_file)) => {
                let files = TlsFiles {
                    cert_file,
                    key_file,
                };
                if tls && let Err(e) = files.load_as(&tls::provider(), CERT, KEY) {
                    self.setting(e.key, e.why);
                }
                Some((files.cert_file, files.key_file))
            }
            (None, None) => None,
            _ => {
                self.setting(
                    CERT,
                    "a client certificate needs its key (redis_client_key_file), and a key its certificate",
                );
                None
            }
        };
        let password = match c.redis_password_env.filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(var) => match self.env.var(&var) {
                Some(p) if !p.is_empty() => Some(Secret::new(p)),
                _ => {
                    self.setting(
                        "cluster.redis_password_env",
                        format!("environment variable `{var}` (or `{var}_FILE`) is not set"),
                    );
                    None
                }
            },
        };
        Some(ClusterSettings {
            redis_url: Secret::new(url),
            password,
            ca_file,
            client_cert,
        })
    }

    pub(super) fn tracing(&mut self, t: file::FileTracing) -> Option<TracingSettings> {
        let ratio = t.sampling_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&ratio) {
            self.setting(
                "tracing.sampling_ratio",
                format!("{ratio} is not between 0 and 1"),
            );
        }
        let service_name = t.service_name.unwrap_or_else(|| "sluice".to_owned());
        if service_name.is_empty() {
            self.setting("tracing.service_name", "must not be empty");
        }
        let Some(url) = t.otlp_endpoint else {
            self.setting(
                "tracing.otlp_endpoint",
                "[tracing] needs an otlp_endpoint (the collector's OTLP/HTTP URL)",
            );
            return None;
        };
        let otlp_endpoint = match otlp_traces_url(&url) {
            Ok(uri) => uri,
            Err(why) => {
                self.setting("tracing.otlp_endpoint", why);
                return None;
            }
        };
        Some(TracingSettings {
            otlp_endpoint,
            sampling_ratio: ratio,
            service_name,
            proxy: self.env_proxy(),
        })
    }
}

/// An OTLP/HTTP traces URL: `http(s)://host[:port][/path]`; a bare origin
/// gets the standard `/v1/traces` (as `OTEL_EXPORTER_OTLP_ENDPOINT` does).
fn otlp_traces_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!("`{url}` must be an http:// or https:// URL"));
    }
    if uri.path() != "/" {
        return Ok(uri);
    }
    format!("{}/v1/traces", url.trim_end_matches('/'))
        .parse()
        .map_err(|_| format!("`{url}` is not a URL"))
}
