//! sluice's load generator: the same client for every server under test.
//!
//! ```text
//! loadgen forward   --url URL --concurrency 1,16,64 --duration 5s [--pid PID]
//! loadgen abandon   --url URL --count 1000 --checkpoint 100 --pid PID --drain 15s
//! loadgen init-rate --url URL --concurrency 16 --duration 3s [--pid PID]
//! loadgen idle-cost --url URL --levels 100,100000 --concurrency 1,16 [--pid PID]
//! loadgen stdio     --concurrency 1,16,64 --duration 5s -- COMMAND ARGS...
//! loadgen soak      --url URL --pid PID --duration 10m --tools a__echo,b__echo --kill-every 5s..20s
//! loadgen open      --url URL --count 20000 --ids-out FILE [--pid PID]
//! loadgen resume    --url URL --ids FILE --concurrency 16 [--pid PID] [--metrics-url URL]
//! loadgen flood     --url URL --sockets 1100 --from 127.0.0.2 --duration 20s
//! ```
//!
//! An `https://` URL is served over TLS 1.3 (ALPN http/1.1), the server's
//! certificate verified against the CA named by `LOADGEN_CA_FILE` (PEM);
//! each connection's handshake happens once, when it is opened.
//!
//! Every command prints one JSON document on stdout (or `--out FILE`) and a
//! short summary on stderr, and exits 3 when any request failed (a non-2xx
//! status, a body without a JSON-RPC success for our id, a tool error, a
//! timeout or a broken connection), so a harness can refuse a dirty run.
//! Only loopback URLs are accepted; every loop is bounded in time or count.
//! `LOADGEN_AUTHORIZATION`, when set, is sent as every MCP request's
//! `Authorization` header (a gateway with `[auth]`).

mod abandon;
mod churn;
mod client;
mod flood;
mod forward;
mod procs;
mod sessions;
mod soak;
mod stats;
mod stdio;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

#[derive(Parser)]
#[command(
    name = "loadgen",
    about = "Load generator for MCP servers over Streamable HTTP"
)]
struct Cli {
    /// Worker threads of the load generator (1: a single-threaded runtime,
    /// which leaves the other core to the server on a 2-core machine).
    #[arg(long, default_value_t = 1, global = true)]
    threads: usize,
    /// Write the JSON result here instead of stdout.
    #[arg(long, global = true)]
    out: Option<std::path::PathBuf>,
    /// Accepted for symmetry: output is always JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// tools/call at fixed concurrency: throughput and latency percentiles.
    Forward(ForwardArgs),
    /// The abandoned-sessions reproduction: batches, drain, stale id.
    Abandon(AbandonArgs),
    /// initialize requests per second.
    InitRate(InitRateArgs),
    /// tools/call cost with few vs many live idle sessions.
    IdleCost(IdleCostArgs),
    /// tools/call written straight to a stdio server (the physical limit).
    Stdio(StdioArgs),
    /// Mixed traffic while backends are killed at random; exits 3 on a
    /// failure that no kill explains.
    Soak(SoakArgs),
    /// Opens sessions (initialize + notifications/initialized), leaves
    /// them idle and writes their ids to a file.
    Open(OpenArgs),
    /// Presents every session id of a file once (after a restart or an
    /// eviction): sessions resumed per second, and the server's count.
    Resume(ResumeArgs),
    /// Silent sockets held and re-opened while healthy clients try: fresh
    /// connections and a keep-alive one served out of tried.
    Flood(FloodArgs),
}

#[derive(Args)]
struct FloodArgs {
    #[arg(long)]
    url: String,
    /// Flood connections held at once.
    #[arg(long, default_value_t = 1100)]
    sockets: usize,
    /// The flood's loopback address.
    #[arg(long, default_value = "127.0.0.2")]
    from: std::net::IpAddr,
    /// The healthy clients' loopback address.
    #[arg(long, default_value = "127.0.0.1")]
    client_from: std::net::IpAddr,
    #[arg(long, value_parser = duration, default_value = "20s")]
    duration: Duration,
    /// Between healthy tries (a fresh connection and one on the kept one).
    #[arg(long, value_parser = duration, default_value = "1s")]
    interval: Duration,
    /// A healthy request answered 200 within this is served.
    #[arg(long, value_parser = duration, default_value = "5s")]
    deadline: Duration,
}

#[derive(Args)]
struct OpenArgs {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 1000)]
    count: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The server's PID: its CPU and RSS before and after.
    #[arg(long)]
    pid: Option<i32>,
    /// Where the ids go, one `id<TAB>protocol version` a line.
    #[arg(long)]
    ids_out: std::path::PathBuf,
}

#[derive(Args)]
struct ResumeArgs {
    #[arg(long)]
    url: String,
    /// A file written by `open`.
    #[arg(long)]
    ids: std::path::PathBuf,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The request each id is presented with: `tools/call` (of --tool with
    /// --args) or any method without params, e.g. `ping`.
    #[arg(long, default_value = "tools/call")]
    method: String,
    #[arg(long)]
    pid: Option<i32>,
    /// The server's Prometheus page, read before and after:
    /// `sluice_client_sessions_resumed_total` by cause.
    #[arg(long)]
    metrics_url: Option<String>,
    #[command(flatten)]
    call: CallArgs,
}

#[derive(Args)]
struct SoakArgs {
    #[arg(long)]
    url: String,
    /// The gateway's PID: its descendants labelled SOAK_BACKEND=<name> are
    /// the kill candidates; its process tree's RSS is sampled.
    #[arg(long)]
    pid: i32,
    #[arg(long, value_parser = duration, default_value = "10m")]
    duration: Duration,
    /// Virtual clients, each on its own keep-alive connection.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Echo tools, `{backend}__echo`; `{backend}__sleep_ms` is called too.
    #[arg(long, value_delimiter = ',', required = true)]
    tools: Vec<String>,
    /// A kill at a random interval in MIN..MAX.
    #[arg(long, value_parser = duration_range, default_value = "5s..20s")]
    kill_every: DurationRange,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_parser = duration, default_value = "5s")]
    sample_every: Duration,
}

#[derive(Clone, Copy, Debug)]
struct DurationRange(Duration, Duration);

/// "5s..20s" (or one duration: a fixed interval).
fn duration_range(s: &str) -> Result<DurationRange, String> {
    let (lo, hi) = s.split_once("..").unwrap_or((s, s));
    let (lo, hi) = (duration(lo)?, duration(hi)?);
    if lo > hi || hi.is_zero() {
        return Err(format!("bad range {s:?} (MIN..MAX, MIN <= MAX, MAX > 0)"));
    }
    Ok(DurationRange(lo, hi))
}

#[derive(Args)]
struct StdioArgs {
    #[arg(long, value_delimiter = ',', default_value = "1")]
    concurrency: Vec<usize>,
    /// Rounds per level; the best is reported (see forward).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    #[arg(long, value_parser = duration, default_value = "5s")]
    duration: Duration,
    #[arg(long, value_parser = duration, default_value = "1s")]
    warmup: Duration,
    #[command(flatten)]
    call: CallArgs,
    /// The server command and its arguments (after `--`).
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

#[derive(Args, Clone)]
struct CallArgs {
    /// The tool to call.
    #[arg(long, default_value = "echo")]
    tool: String,
    /// The tool's arguments (a JSON object).
    #[arg(long, default_value = r#"{"text":"hello"}"#)]
    args: String,
}

impl CallArgs {
    fn params(&self) -> Result<String, String> {
        let args: serde_json::Value =
            serde_json::from_str(&self.args).map_err(|e| format!("--args: {e}"))?;
        Ok(serde_json::json!({ "name": self.tool, "arguments": args }).to_string())
    }
}

#[derive(Args)]
struct ForwardArgs {
    /// Repeat to compare servers: each round runs every URL in turn at a
    /// level, so that a disturbance of the machine hits them alike.
    #[arg(long, required = true)]
    url: Vec<String>,
    /// Rounds per level and URL; the round with the highest throughput is
    /// reported (all rounds are listed, all their errors counted).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Comma-separated concurrency levels, run one after another.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    concurrency: Vec<usize>,
    #[arg(long, value_parser = duration, default_value = "5s")]
    duration: Duration,
    #[arg(long, value_parser = duration, default_value = "1s")]
    warmup: Duration,
    /// The server's PID (one per --url, in order): its process tree's CPU
    /// and RSS are recorded.
    #[arg(long)]
    pid: Vec<i32>,
    /// The backend behind every --url (a gateway's, or the direct row's
    /// server itself): its own CPU per request in each window is recorded
    /// too, so a gateway's cost can be set against what the backend spent
    /// serving it under the same contention.
    #[arg(long)]
    backend_pid: Option<i32>,
    #[command(flatten)]
    call: CallArgs,
}

#[derive(Args)]
struct AbandonArgs {
    #[arg(long)]
    url: String,
    /// Sessions per batch.
    #[arg(long, default_value_t = 500)]
    count: usize,
    /// RSS is read after every this many sessions.
    #[arg(long, default_value_t = 50)]
    checkpoint: usize,
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    #[arg(long)]
    pid: i32,
    /// Idle time after batch 1: longer than the server's idle TTL.
    #[arg(long, value_parser = duration, default_value = "15s")]
    drain: Duration,
    #[arg(long, value_parser = duration, default_value = "1s")]
    sample_every: Duration,
    #[arg(long, default_value_t = 2)]
    batches: usize,
    /// Sessions opened, used and DELETEd before batch 1's start is read
    /// (one-time start-up costs are then not counted as per-session growth).
    #[arg(long, default_value_t = 0)]
    warmup_sessions: usize,
    /// The server's Prometheus page (e.g. http://127.0.0.1:PORT/metrics),
    /// read after the drain: the server's own count of live sessions.
    #[arg(long)]
    metrics_url: Option<String>,
}

#[derive(Args)]
struct InitRateArgs {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, value_parser = duration, default_value = "3s")]
    duration: Duration,
    #[arg(long)]
    pid: Option<i32>,
}

#[derive(Args)]
struct IdleCostArgs {
    #[arg(long)]
    url: String,
    /// Live idle sessions to open before each measurement (ascending).
    #[arg(long, value_delimiter = ',', default_value = "100,100000")]
    levels: Vec<usize>,
    #[arg(long, default_value_t = 16)]
    open_concurrency: usize,
    /// Concurrency of the measured tools/call (all on one session).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    #[arg(long, value_parser = duration, default_value = "3s")]
    duration: Duration,
    #[arg(long, value_parser = duration, default_value = "1s")]
    warmup: Duration,
    #[arg(long)]
    pid: Option<i32>,
    #[command(flatten)]
    call: CallArgs,
}

/// "250ms", "5s", "2m", or plain seconds.
fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        _ => return Err(format!("bad duration unit in {s:?} (ms, s, m)")),
    };
    if !(0.0..=3600.0).contains(&secs) {
        return Err(format!("duration {s:?} out of range (0..1h)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Serialize)]
struct Output<T: Serialize> {
    kind: &'static str,
    url: String,
    errors: u64,
    result: T,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = if cli.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(cli.threads);
        b
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    match rt.block_on(run(&cli)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(errors) => {
            eprintln!("loadgen: {errors} failed requests");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::from(2)
        }
    }
}

fn emit<T: Serialize>(cli: &Cli, out: &Output<T>) -> Result<u64, String> {
    let text = serde_json::to_string_pretty(out).map_err(|e| e.to_string())? + "\n";
    match &cli.out {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(out.errors)
}

async fn run(cli: &Cli) -> Result<u64, String> {
    match &cli.cmd {
        Cmd::Flood(a) => {
            let target = client::Target::parse(&a.url)?;
            if !a.from.is_loopback() || !a.client_from.is_loopback() {
                return Err("flood: --from and --client-from must be loopback".into());
            }
            let r = flood::run(&flood::Plan {
                target,
                sockets: a.sockets,
                from: a.from,
                client_from: a.client_from,
                duration: a.duration,
                interval: a.interval,
                deadline: a.deadline,
            })
            .await?;
            eprintln!(
                "loadgen: flood from {}: fresh {}/{} served, keep-alive {}/{}; flood connects {}",
                r.from,
                r.fresh.served,
                r.fresh.tried,
                r.keep_alive.served,
                r.keep_alive.tried,
                r.flood_connects
            );
            // Not a request failure: the figures are the result.
            emit(
                cli,
                &Output {
                    kind: "flood",
                    url: a.url.clone(),
                    errors: 0,
                    result: r,
                },
            )
        }
        Cmd::Forward(a) => {
            let targets = a
                .url
                .iter()
                .map(|u| client::Target::parse(u))
                .collect::<Result<Vec<_>, _>>()?;
            let params = a.call.params()?;
            let mut series: Vec<Vec<forward::Run>> =
                (0..targets.len()).map(|_| Vec::new()).collect();
            for &c in &a.concurrency {
                let mut tries: Vec<Vec<forward::Run>> =
                    (0..targets.len()).map(|_| Vec::new()).collect();
                for _ in 0..a.rounds.max(1) {
                    for (i, target) in targets.iter().enumerate() {
                        let r = forward::run(&forward::Plan {
                            target: target.clone(),
                            concurrency: c,
                            duration: a.duration,
                            warmup: a.warmup,
                            method: "tools/call".into(),
                            params: params.clone(),
                            pid: a.pid.get(i).copied(),
                            backend_pid: a.backend_pid,
                            shared_session: false,
                        })
                        .await;
                        eprintln!(
                            "loadgen: forward {} c={c:<3} {:>9.0} req/s  p50 {:>8.1}us  p99 {:>8.1}us  p99.9 {:>8.1}us  errors {}",
                            a.url[i],
                            r.throughput_rps,
                            r.latency.p50_us,
                            r.latency.p99_us,
                            r.latency.p999_us,
                            r.errors
                        );
                        tries[i].push(r);
                    }
                }
                for (i, t) in tries.into_iter().enumerate() {
                    series[i].extend(forward::best_of(t));
                }
            }
            let errors = series.iter().flatten().map(|r| r.errors).sum();
            if series.len() == 1 {
                let runs = series.pop().expect("one series");
                return emit(
                    cli,
                    &Output {
                        kind: "forward",
                        url: a.url[0].clone(),
                        errors,
                        result: runs,
                    },
                );
            }
            #[derive(Serialize)]
            struct Series {
                url: String,
                errors: u64,
                result: Vec<forward::Run>,
            }
            let result: Vec<Series> = a
                .url
                .iter()
                .zip(series)
                .map(|(url, runs)| Series {
                    url: url.clone(),
                    errors: runs.iter().map(|r| r.errors).sum(),
                    result: runs,
                })
                .collect();
            emit(
                cli,
                &Output {
                    kind: "forward-multi",
                    url: a.url.join(" "),
                    errors,
                    result,
                },
            )
        }
        Cmd::Abandon(a) => {
            let target = client::Target::parse(&a.url)?;
            let metrics = a
                .metrics_url
                .as_deref()
                .map(client::Target::parse)
                .transpose()?;
            let r = abandon::run(&abandon::Plan {
                target,
                count: a.count,
                checkpoint: a.checkpoint,
                concurrency: a.concurrency,
                pid: a.pid,
                drain: a.drain,
                sample_every: a.sample_every,
                batches: a.batches,
                warmup_sessions: a.warmup_sessions,
                polite: false,
                metrics,
            })
            .await;
            eprintln!(
                "loadgen: abandon {:.2} KiB/session, after drain x{:.3}, batch-2 peak x{:.3}, stale id -> {:?}, errors {}",
                r.kib_per_session,
                r.after_drain_ratio.unwrap_or(f64::NAN),
                r.batch2_peak_ratio.unwrap_or(f64::NAN),
                r.stale_id.as_ref().and_then(|p| p.status),
                r.errors
            );
            emit(
                cli,
                &Output {
                    kind: "abandon",
                    url: a.url.clone(),
                    errors: r.errors,
                    result: r,
                },
            )
        }
        Cmd::InitRate(a) => {
            let target = client::Target::parse(&a.url)?;
            let r = churn::init_rate(&target, a.concurrency, a.duration, a.pid).await;
            eprintln!(
                "loadgen: init-rate {:.0}/s  p50 {:.1}us  p99 {:.1}us  errors {}",
                r.initialize_per_s, r.latency.p50_us, r.latency.p99_us, r.errors
            );
            emit(
                cli,
                &Output {
                    kind: "init-rate",
                    url: a.url.clone(),
                    errors: r.errors,
                    result: r,
                },
            )
        }
        Cmd::IdleCost(a) => {
            let target = client::Target::parse(&a.url)?;
            let r = churn::idle_cost(&churn::IdlePlan {
                target,
                levels: a.levels.clone(),
                open_concurrency: a.open_concurrency,
                concurrency: a.concurrency.clone(),
                duration: a.duration,
                warmup: a.warmup,
                method: "tools/call".into(),
                params: a.call.params()?,
                pid: a.pid,
            })
            .await;
            for l in &r.levels {
                for run in &l.runs {
                    eprintln!(
                        "loadgen: idle-cost live={:<7} c={:<3} {:>9.0} req/s  p50 {:>8.1}us  p99 {:>8.1}us",
                        l.live,
                        run.concurrency,
                        run.throughput_rps,
                        run.latency.p50_us,
                        run.latency.p99_us
                    );
                }
            }
            emit(
                cli,
                &Output {
                    kind: "idle-cost",
                    url: a.url.clone(),
                    errors: r.errors,
                    result: r,
                },
            )
        }
        Cmd::Soak(a) => {
            let target = client::Target::parse(&a.url)?;
            let r = soak::run(&soak::Plan {
                target,
                pid: a.pid,
                duration: a.duration,
                concurrency: a.concurrency,
                tools: a.tools.clone(),
                kill_every: (a.kill_every.0, a.kill_every.1),
                seed: a.seed,
                sample_every: a.sample_every,
            })
            .await?;
            eprintln!(
                "loadgen: soak {:.0}s requests {} ok {} failed {} (explained {}, unexplained {})",
                r.duration_s,
                r.requests.requests,
                r.requests.ok,
                r.requests.failed,
                r.explained_failures,
                r.unexplained_failures
            );
            eprintln!(
                "loadgen: soak sessions opened {} deleted {} abandoned {}; kills {:?}; rss {:.1}..{:.1} MiB",
                r.sessions.opened,
                r.sessions.deleted,
                r.sessions.abandoned,
                r.kills_per_backend,
                r.rss_min_kib as f64 / 1024.0,
                r.rss_max_kib as f64 / 1024.0
            );
            for s in &r.unexplained_samples {
                eprintln!(
                    "loadgen: soak unexplained {} {} {:.3}s..{:.3}s: {}",
                    s.kind,
                    s.backend.as_deref().unwrap_or("-"),
                    s.start_s,
                    s.end_s,
                    s.error
                );
            }
            emit(
                cli,
                &Output {
                    kind: "soak",
                    url: a.url.clone(),
                    errors: r.unexplained_failures,
                    result: r,
                },
            )
        }
        Cmd::Open(a) => {
            let target = client::Target::parse(&a.url)?;
            let r = sessions::open(&sessions::OpenPlan {
                target,
                count: a.count,
                concurrency: a.concurrency,
                pid: a.pid,
                ids_out: a.ids_out.clone(),
            })
            .await?;
            eprintln!(
                "loadgen: open {} sessions in {:.1}s ({:.0}/s), {:.2} KiB/session, errors {}",
                r.opened,
                r.duration_s,
                r.sessions_per_s,
                r.kib_per_session.unwrap_or(f64::NAN),
                r.errors
            );
            emit(
                cli,
                &Output {
                    kind: "open",
                    url: a.url.clone(),
                    errors: r.errors,
                    result: r,
                },
            )
        }
        Cmd::Resume(a) => {
            let target = client::Target::parse(&a.url)?;
            let metrics = a
                .metrics_url
                .as_deref()
                .map(client::Target::parse)
                .transpose()?;
            let text =
                std::fs::read_to_string(&a.ids).map_err(|e| format!("{}: {e}", a.ids.display()))?;
            let held = sessions::parse_ids(&text)?;
            let params = if a.method == "tools/call" {
                a.call.params()?
            } else {
                "{}".to_owned()
            };
            let r = sessions::resume(&sessions::ResumePlan {
                target,
                held,
                concurrency: a.concurrency,
                method: a.method.clone(),
                params,
                pid: a.pid,
                metrics,
            })
            .await;
            eprintln!(
                "loadgen: resume {} of {} ids in {:.1}s ({:.0}/s)  p50 {:.1}us  p99 {:.1}us  resumed {:?}  errors {}",
                r.ok,
                r.presented,
                r.duration_s,
                r.sessions_per_s,
                r.latency.p50_us,
                r.latency.p99_us,
                r.resumed_delta,
                r.errors
            );
            if let Some(e) = &r.metrics_error {
                eprintln!("loadgen: resume: metrics not read ({e})");
            }
            emit(
                cli,
                &Output {
                    kind: "resume",
                    url: a.url.clone(),
                    errors: r.errors,
                    result: r,
                },
            )
        }
        Cmd::Stdio(a) => {
            let params = a.call.params()?;
            let mut runs = Vec::new();
            for &c in &a.concurrency {
                let mut tries = Vec::new();
                for _ in 0..a.rounds.max(1) {
                    let r = stdio::run(&stdio::Plan {
                        command: a.command[0].clone(),
                        args: a.command[1..].to_vec(),
                        concurrency: c,
                        duration: a.duration,
                        warmup: a.warmup,
                        params: params.clone(),
                    })
                    .await?;
                    eprintln!(
                        "loadgen: stdio c={c:<3} {:>9.0} req/s  p50 {:>8.1}us  p99 {:>8.1}us  p99.9 {:>8.1}us  errors {}",
                        r.throughput_rps,
                        r.latency.p50_us,
                        r.latency.p99_us,
                        r.latency.p999_us,
                        r.errors
                    );
                    tries.push(r);
                }
                runs.extend(forward::best_of(tries));
            }
            let errors = runs.iter().map(|r| r.errors).sum();
            let url = format!("stdio:{}", a.command.join(" "));
            emit(
                cli,
                &Output {
                    kind: "forward",
                    url,
                    errors,
                    result: runs,
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("3").unwrap(), Duration::from_secs(3));
        assert!(duration("5h").is_err());
        assert!(duration("x").is_err());
    }

    #[test]
    fn duration_ranges() {
        let r = super::duration_range("5s..20s").unwrap();
        assert_eq!(
            (r.0, r.1),
            (Duration::from_secs(5), Duration::from_secs(20))
        );
        let r = super::duration_range("3s").unwrap();
        assert_eq!((r.0, r.1), (Duration::from_secs(3), Duration::from_secs(3)));
        assert!(super::duration_range("20s..5s").is_err());
        assert!(super::duration_range("0s..0s").is_err());
    }
}
