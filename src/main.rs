use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;
use sluice::cli::{Cli, Command};
use sluice::config::{self, ProcessEnv};

mod allocator;

#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

/// Exit codes (contract): 0 ok, 2 usage or config error, 1 runtime failure.
const CONFIG_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::DemoServer => run(sluice::demo_server::run(), "demo-server"),
        Command::Check { config } => match config::check(&config, &ProcessEnv) {
            Ok((loaded, warnings)) => {
                print!("{}", config::describe(&loaded));
                let (sandbox, unenforceable) =
                    sluice::upstream::sandbox_report(&loaded.config.backends);
                println!("sandbox (this host):");
                for line in &sandbox {
                    println!("  {line}");
                }
                if !unenforceable.is_empty() {
                    for e in &unenforceable {
                        eprintln!("sluice: config error: {e}");
                    }
                    return ExitCode::from(CONFIG_ERROR);
                }
                if !warnings.is_empty() {
                    println!("problems:");
                }
                for w in &warnings {
                    println!("  {w}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sluice: config error:\n{e}");
                eprintln!("sluice: {} error(s), listed above", e.errors());
                ExitCode::from(CONFIG_ERROR)
            }
        },
        Command::Probe {
            url,
            sessions,
            concurrency,
            pid,
            metrics,
            wait,
            headers,
            json,
        } => {
            if let Err(code) = http_engine() {
                return code;
            }
            let opts = sluice::probe::Options {
                url,
                sessions: usize::try_from(sessions).unwrap_or(sluice::probe::MAX_SESSIONS),
                concurrency: usize::try_from(concurrency).unwrap_or(1),
                pid,
                metrics,
                wait,
                headers,
                progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            };
            probe(opts, json)
        }
        Command::Tools {
            config,
            namespace,
            principal,
            json,
        } => {
            let (cfg, runtime) = match prepared(Some(&config)) {
                Ok(ready) => ready,
                Err(code) => return code,
            };
            let listed = runtime.block_on(sluice::catalogue::list(cfg, namespace, principal, json));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            match listed {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => exit_code(Err(e)),
            }
        }
        Command::Keygen => {
            println!("{}", sluice::sessions::sealed::KeyRing::generate());
            ExitCode::SUCCESS
        }
        Command::Stdio { config, namespace } => {
            let (cfg, runtime) = match prepared(config.as_ref()) {
                Ok(ready) => ready,
                Err(code) => return code,
            };
            let result = runtime.block_on(sluice::stdio::serve(cfg, config, namespace));
            // stdin's reader may still block in a read; it is not waited for.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            exit_code(result)
        }
        Command::Serve { config, listen } => {
            if let Err(code) = init_logging() {
                return code;
            }
            let mut cfg = match load(config.as_ref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            if let Some(addr) = listen
                && let Err(e) = cfg.set_listen(addr)
            {
                eprintln!("sluice: config error:\n{e}");
                return ExitCode::from(CONFIG_ERROR);
            }
            let mode = match sluice::workers::Mode::from_env() {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("sluice: config error:\n{e}");
                    return ExitCode::from(CONFIG_ERROR);
                }
            };
            if let Err(code) = http_engine() {
                return code;
            }
            let (runtime, workers) = match start_runtime(mode) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("sluice: cannot start runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let result = runtime.block_on(sluice::app::serve(cfg, config, |addr: &str| {
                // The readiness line tests and scripts wait for.
                println!("sluice listening on {addr}");
                let _ = std::io::stdout().flush();
            }));
            // Backends are stopped; don't wait on stray blocking tasks.
            if let Some(workers) = workers {
                workers.stop();
            }
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            exit_code(result)
        }
    }
}

/// Logging, the config, the HTTP engine and a work-stealing runtime, for
/// the commands that start backends without serving a listener.
fn prepared(
    config: Option<&std::path::PathBuf>,
) -> Result<(config::Config, tokio::runtime::Runtime), ExitCode> {
    init_logging()?;
    let cfg = load(config)?;
    http_engine()?;
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => Ok((cfg, runtime)),
        Err(e) => {
            eprintln!("sluice: cannot start runtime: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// The config `--config` names, or the built-in demo without one.
fn load(path: Option<&std::path::PathBuf>) -> Result<config::Config, ExitCode> {
    let loaded = match path {
        Some(path) => config::load(path, &ProcessEnv).map(|l| l.config),
        None => match std::env::current_exe() {
            Ok(exe) => config::demo(exe, &ProcessEnv).map(|l| l.config),
            Err(e) => {
                eprintln!("sluice: cannot find own executable: {e}");
                return Err(ExitCode::FAILURE);
            }
        },
    };
    loaded.map_err(|e| {
        eprintln!("sluice: config error:\n{e}");
        ExitCode::from(CONFIG_ERROR)
    })
}

fn exit_code(result: Result<(), sluice::app::ServeError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            if e.is_config() {
                ExitCode::from(CONFIG_ERROR)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Reads `SLUICE_HTTP` once, before anything speaks HTTP, and fixes it
/// for the process; an unknown value is a config error.
fn http_engine() -> Result<(), ExitCode> {
    match sluice::http1::Engine::from_env() {
        Ok(engine) => {
            engine.install();
            Ok(())
        }
        Err(e) => {
            eprintln!("sluice: config error:\n{e}");
            Err(ExitCode::from(CONFIG_ERROR))
        }
    }
}

/// The runtime `serve` runs in, and the per-core workers connections go
/// to when `mode` asks for them (as many as `TOKIO_WORKER_THREADS`, else
/// one per core).
fn start_runtime(
    mode: sluice::workers::Mode,
) -> std::io::Result<(
    tokio::runtime::Runtime,
    Option<&'static sluice::workers::Workers>,
)> {
    match mode {
        sluice::workers::Mode::WorkStealing => Ok((tokio::runtime::Runtime::new()?, None)),
        sluice::workers::Mode::PerCore => {
            let n = std::env::var("TOKIO_WORKER_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let workers = sluice::workers::Workers::install(&runtime, n)?;
            Ok((runtime, Some(workers)))
        }
    }
}

/// Prints the probe's report; Ctrl-C stops it early with what it has.
fn probe(opts: sluice::probe::Options, json: bool) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match rt.block_on(sluice::probe::run(opts, stop)) {
        Ok(report) => {
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.is_usage() => {
            eprintln!("sluice probe: {e}");
            ExitCode::from(CONFIG_ERROR)
        }
        Err(e) => {
            eprintln!("sluice probe: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(fut: impl std::future::Future<Output = std::io::Result<()>>, what: &str) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => match rt.block_on(fut) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice {what}: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("sluice {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries the readiness line, and for
/// demo-server the protocol). `SLUICE_LOG` takes an env-filter directive;
/// `SLUICE_LOG_FORMAT=json` writes one JSON object a line, for collectors
/// (`text`, or unset, the plain lines); any other format is an error.
fn init_logging() -> Result<(), ExitCode> {
    let json = match std::env::var("SLUICE_LOG_FORMAT").as_deref() {
        Ok("json") => true,
        Ok("text") | Err(std::env::VarError::NotPresent) => false,
        Ok(other) => {
            eprintln!(
                "sluice: config error:\nSLUICE_LOG_FORMAT: `{other}` is neither `text` nor `json`"
            );
            return Err(ExitCode::from(CONFIG_ERROR));
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            eprintln!("sluice: config error:\nSLUICE_LOG_FORMAT: not UTF-8");
            return Err(ExitCode::from(CONFIG_ERROR));
        }
    };
    // The audit trail (a line per call) only when asked for by name, not
    // with everything at a level (`SLUICE_LOG=info,sluice::audit=info`).
    let directives = std::env::var("SLUICE_LOG").unwrap_or_else(|_| "info".to_owned());
    let directives = match directives.contains("sluice::audit") {
        true => directives,
        false => format!("{directives},sluice::audit=off"),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sluice::audit=off"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match json {
        true => logs.json().flatten_event(true).init(),
        // Colour codes only for a person at a terminal, never in log files.
        false => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
    Ok(())
}
