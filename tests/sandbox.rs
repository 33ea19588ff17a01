//! Children kept in their box (issue 53): a stdio backend that tries every
//! escape (examples/escape_backend.rs) is stopped by the kernel under a
//! sandbox and succeeds without one, through a real gateway. These tests
//! need what the CI machine has (root, Landlock, network namespaces, a
//! writable cgroup hierarchy); the paths a host without them takes are
//! forced with `SLUICE_SANDBOX_WITHOUT`.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn escape_backend(name: &str, sandbox: Option<&str>) -> String {
    let bin = Fixture::bin("escape_backend");
    let mut table = format!(
        "[backends.{name}]\ntransport = \"stdio\"\ncommand = \"{}\"\n",
        bin.display()
    );
    if let Some(s) = sandbox {
        table.push_str(&format!("sandbox = {s}\n"));
    }
    table
}

/// A tool's `structuredContent` (`ok`, `done`, `error`, ...).
async fn escape(http: &Http, session: &str, tool: &str, args: Value) -> Value {
    let reply = http.tool(session, 7, tool, args).await;
    reply["result"]["structuredContent"].clone()
}

/// The files a test's backends may and may not touch.
struct Files {
    _dir: tempdir::Dir,
    readable: PathBuf,
    writable: PathBuf,
    outside: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempdir::Dir::new();
        let readable = dir.path().join("readable");
        let writable = dir.path().join("writable");
        let outside = dir.path().join("outside");
        for d in [&readable, &writable, &outside] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(readable.join("shared.txt"), "shared").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        Files {
            _dir: dir,
            readable,
            writable,
            outside,
        }
    }

    fn sandbox(&self, extra: &str) -> String {
        format!(
            "{{ memory = \"256MiB\", processes = 24, open_files = 64, network = \"none\", read = [\"{}\"], write = [\"{}\"]{extra} }}",
            self.readable.display(),
            self.writable.display()
        )
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Every escape, tried by the same program with and without the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_escape_is_stopped_under_the_sandbox_and_succeeds_without_it() {
    let files = Files::new();
    let toml = format!(
        "{}{}",
        escape_backend("free", None),
        escape_backend("boxed", Some(&files.sandbox("")))
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let s = http.initialize().await;
    let port = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = port.local_addr().unwrap().port();
    let secret = path(&files.outside.join("secret.txt"));
    let shared = path(&files.readable.join("shared.txt"));
    let gateway_env = format!("/proc/{}/environ", gw.pid());
    let escapes = [
        ("fork", json!({"count": 40})),
        // The gateway's environment, through /proc, and a signal to it
        // (0: only whether it may).
        ("read", json!({"path": gateway_env})),
        ("signal", json!({"pid": gw.pid(), "signal": 0})),
        ("open_files", json!({"count": 200})),
        ("connect", json!({"host": "127.0.0.1", "port": port})),
        ("read", json!({"path": secret})),
        (
            "write",
            json!({"path": path(&files.outside.join("planted.txt")), "text": "x"}),
        ),
    ];
    let mut stopped = std::collections::HashMap::new();
    for (tool, args) in &escapes {
        let free = escape(&http, &s, &format!("free__{tool}"), args.clone()).await;
        assert_eq!(free["ok"], true, "{tool} without a sandbox: {free}");
        let boxed = escape(&http, &s, &format!("boxed__{tool}"), args.clone()).await;
        assert_eq!(
            boxed["ok"], false,
            "{tool} {args} under the sandbox: {boxed}"
        );
        assert!(boxed["error"].is_string(), "{tool}: {boxed}");
        stopped.entry(*tool).or_insert(boxed);
        // What the escape holds goes, so the next one starts clean.
        let undo = match *tool {
            "fork" => "reap",
            "open_files" => "close_files",
            _ => continue,
        };
        for side in ["free", "boxed"] {
            escape(&http, &s, &format!("{side}__{undo}"), json!({})).await;
        }
    }
    // How far each got: the bounds, not an accident.
    let forked = &stopped["fork"];
    assert!(
        forked["done"].as_u64().unwrap() < 24,
        "processes = 24 (threads count too): {forked}"
    );
    assert!(
        forked["error"]
            .as_str()
            .unwrap()
            .contains("Resource temporarily unavailable"),
        "{forked}"
    );
    let opened = &stopped["open_files"];
    let done = opened["done"].as_u64().unwrap();
    assert!(
        (50..64).contains(&done),
        "open_files = 64, less what it has open: {opened}"
    );
    assert!(
        opened["error"]
            .as_str()
            .unwrap()
            .contains("Too many open files"),
        "{opened}"
    );
    // No interface but a loopback that is down. (It may bind a port there:
    // nothing outside its namespace can reach it.)
    let e = stopped["connect"]["error"].as_str().unwrap();
    assert!(e.contains("unreachable"), "{e}");
    let read = escape(&http, &s, "boxed__read", json!({"path": secret})).await;
    assert!(
        read["error"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{read}"
    );
    // What it was given still works.
    let allowed = escape(&http, &s, "boxed__read", json!({"path": shared})).await;
    assert_eq!(allowed["ok"], true, "{allowed}");
    let kept = path(&files.writable.join("kept.txt"));
    let wrote = escape(
        &http,
        &s,
        "boxed__write",
        json!({"path": kept, "text": "y"}),
    )
    .await;
    assert_eq!(wrote["ok"], true, "{wrote}");
    let env = escape(&http, &s, "boxed__env", json!({})).await;
    let tmp = env["vars"]["TMPDIR"]
        .as_str()
        .expect("TMPDIR given")
        .to_owned();
    assert!(
        tmp.contains(&format!("sluice-{}-boxed-", gw.pid())),
        "{tmp}"
    );
    let in_tmp = format!("{tmp}/scratch");
    let wrote = escape(
        &http,
        &s,
        "boxed__write",
        json!({"path": in_tmp, "text": "z"}),
    )
    .await;
    assert_eq!(wrote["ok"], true, "its private TMPDIR: {wrote}");
    assert!(Path::new(&in_tmp).exists());
    // The free child has no private TMPDIR: the box gave it.
    let free_env = escape(&http, &s, "free__env", json!({})).await;
    assert!(free_env["vars"]["TMPDIR"].is_null(), "{free_env}");
    for tool in ["free__reap", "boxed__reap"] {
        escape(&http, &s, tool, json!({})).await;
    }
    assert!(files.outside.join("planted.txt").exists(), "free wrote it");
    // A child that ends after its cgroup refused it a process is counted
    // under `pids` (this one is ended from outside, as a crash would).
    let pid = escape(&http, &s, "boxed__pid", json!({})).await["pid"]
        .as_i64()
        .unwrap();
    // SAFETY: the gateway's child, started by this test's gateway.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let pids = r#"sluice_backend_restarts_total{backend="boxed",reason="pids"}"#;
    wait_until(Duration::from_secs(15), || {
        gw.metrics().get_or_untouched(pids) == 1.0
    });
    gw.stop();
    // The child's temporary directory and cgroup go with it.
    assert!(!Path::new(&tmp).exists(), "{tmp} left behind");
}

/// `read` restricted and `write` left out: reads are held to what the
/// child needs, writes are open (but for its cgroup hierarchy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_held_while_writes_are_left_open() {
    let files = Files::new();
    // With a cgroup (writes open but for its hierarchy) and without.
    let toml = format!(
        "{}{}",
        escape_backend("grouped", Some("{ memory = \"256MiB\", read = [] }")),
        escape_backend("plain", Some("{ read = [] }"))
    );
    let gw = Gateway::start(&toml);
    let http = Http::new(gw.url("/mcp"));
    let s = http.initialize().await;
    let secret = path(&files.outside.join("secret.txt"));
    for name in ["grouped", "plain"] {
        let read = escape(&http, &s, &format!("{name}__read"), json!({"path": secret})).await;
        assert_eq!(read["ok"], false, "{name}: {read}");
        let planted = path(&files.outside.join(format!("{name}.txt")));
        let args = json!({"path": planted, "text": "x"});
        let wrote = escape(&http, &s, &format!("{name}__write"), args).await;
        assert_eq!(wrote["ok"], true, "{name}: {wrote}");
        // Its own TMPDIR is read back, not only written.
        let env = escape(&http, &s, &format!("{name}__env"), json!({})).await;
        let scratch = format!("{}/scratch", env["vars"]["TMPDIR"].as_str().unwrap());
        let args = json!({"path": scratch, "text": "y"});
        let wrote = escape(&http, &s, &format!("{name}__write"), args).await;
        assert_eq!(wrote["ok"], true, "{name}: {wrote}");
        let back = escape(
            &http,
            &s,
            &format!("{name}__read"),
            json!({"path": scratch}),
        )
        .await;
        assert_eq!(back["ok"], true, "{name}: {back}");
    }
    gw.stop();
}

fn cgroups_of(gateway: u32) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let prefix = format!("sluice-{gateway}-");
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
            {
                found.push(p);
            } else if p.components().count() < 12 {
                stack.push(p);
            }
        }
    }
    found
}

/// Over `memory` the kernel kills the child; the gateway restarts it,
/// counts the restart under `memory`, says so in its log and on /status,
/// and its other backend never notices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_its_memory_a_child_is_killed_counted_and_restarted_alone() {
    let toml = format!(
        "{}{}",
        escape_backend("free", None),
        escape_backend("boxed", Some("{ memory = \"64MiB\" }"))
    );
    let gw = Gateway::start_logged(&toml, &[]);
    let http = Http::new(gw.url("/mcp"));
    let s = http.initialize().await;
    let before = escape(&http, &s, "boxed__pid", json!({})).await["pid"].clone();
    let groups = cgroups_of(gw.pid());
    assert!(!groups.is_empty(), "the child has a cgroup of its own");
    // Out of its cgroup, into the gateway's: refused (it could, as root,
    // were its cgroup hierarchy writable); the free child may write there.
    let parent = groups[0].parent().unwrap().join("cgroup.procs");
    let leave = json!({"path": path(&parent), "text": "0"});
    let left = escape(&http, &s, "boxed__write", leave.clone()).await;
    assert_eq!(left["ok"], false, "{left}");
    let free = escape(&http, &s, "free__write", leave).await;
    assert_eq!(free["ok"], true, "{free}");
    let held = escape(&http, &s, "free__allocate", json!({"mib": 128})).await;
    assert_eq!(held["ok"], true, "{held}");
    let reply = http
        .tool(&s, 8, "boxed__allocate", json!({"mib": 128}))
        .await;
    assert!(
        reply.get("error").is_some() || reply["result"]["isError"] == true,
        "{reply}"
    );
    let key = r#"sluice_backend_restarts_total{backend="boxed",reason="memory"}"#;
    wait_until(Duration::from_secs(15), || {
        gw.metrics().get_or_untouched(key) == 1.0
    });
    gw.wait_ready();
    let after = escape(&http, &s, "boxed__pid", json!({})).await["pid"].clone();
    assert_ne!(before, after, "a new child");
    let still = escape(&http, &s, "free__pid", json!({})).await;
    assert_eq!(still["ok"], true, "{still}");
    let m = gw.metrics();
    for other in ["exited", "signal", "closed", "unhealthy", "pids"] {
        let k = key.replace("\"memory\"", &format!("\"{other}\""));
        assert_eq!(m.get_or_untouched(&k), 0.0, "{k}");
    }
    assert_eq!(
        m.get_or_untouched(r#"sluice_backend_restarts_total{backend="free",reason="memory"}"#),
        0.0
    );
    let log = gw.log();
    assert!(
        log.contains("went over its sandbox's memory and was killed by the kernel (killed by signal 9 (SIGKILL))"),
        "{log}"
    );
    let (_, page) = http_get(&gw.base, "/status").unwrap();
    assert!(
        page.contains("went over its sandbox&#39;s memory")
            || page.contains("went over its sandbox's memory"),
        "{page}"
    );
    // The killed child's cgroup was removed; only the new child's is left.
    wait_until(Duration::from_secs(5), || {
        cgroups_of(gw.pid()).iter().all(|g| !groups.contains(g))
    });
    let pid = gw.pid();
    gw.stop();
    wait_until(Duration::from_secs(5), || cgroups_of(pid).is_empty());
}

/// `sluice check` says what the host supports and what each sandboxed
/// backend gets; a bound the host cannot enforce fails it (and the start)
/// unless `require = false`.
#[test]
fn check_reports_the_host_and_refuses_what_it_cannot_enforce() {
    let sandbox = "{ memory = \"128MiB\", processes = 32, network = \"none\", read = [] }";
    let toml = escape_backend("boxed", Some(sandbox));
    let (code, out, err) = check_config("sluice.toml", &toml, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Landlock: ABI "), "{out}");
    assert!(
        out.contains("backend boxed: memory 128MiB by cgroup; processes 32 by cgroup pids.max"),
        "{out}"
    );
    assert!(out.contains("network none by a network namespace"), "{out}");
    // Without cgroups and namespaces, as on a host that has neither.
    let without = [("SLUICE_SANDBOX_WITHOUT", "cgroup,namespaces")];
    let (code, out, err) = check_config("sluice.toml", &toml, &without);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("hidden by SLUICE_SANDBOX_WITHOUT: cgroup, namespaces"),
        "{out}"
    );
    assert!(
        err.contains(
            "backend `boxed`: sandbox cannot be enforced on this host: processes: no pids cgroup"
        ),
        "{err}"
    );
    let relaxed = escape_backend("boxed", Some(&sandbox.replace(" }", ", require = false }")));
    let (code, out, _) = check_config("sluice.toml", &relaxed, &without);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("memory 128MiB by RLIMIT_DATA"), "{out}");
    assert!(out.contains("network none by Landlock TCP rules"), "{out}");
    assert!(out.contains("NOT ENFORCED: processes"), "{out}");
    // Without Landlock either: nothing left to hold the network.
    let (code, _, err) = check_config(
        "sluice.toml",
        &toml,
        &[("SLUICE_SANDBOX_WITHOUT", "namespaces,landlock")],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("network = \\\"none\\\"")
            || err.contains("network = \"none\": no network namespaces"),
        "{err}"
    );
    assert!(
        err.contains("read/write: Landlock is not available"),
        "{err}"
    );
}

/// The fallbacks, forced: memory by `RLIMIT_DATA` (an allocation refused,
/// the child alive), the network by Landlock's TCP rules; processes not
/// bounded (`require = false`), and the gateway starts at all only so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cgroups_or_namespaces_the_fallbacks_hold() {
    let files = Files::new();
    let toml = escape_backend("boxed", Some(&files.sandbox(", require = false")));
    let without = [("SLUICE_SANDBOX_WITHOUT", "cgroup,namespaces")];
    let gw = Gateway::start_with_env(&toml, &without);
    let http = Http::new(gw.url("/mcp"));
    let s = http.initialize().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = escape(
        &http,
        &s,
        "boxed__connect",
        json!({"host": "127.0.0.1", "port": port}),
    )
    .await;
    assert_eq!(connect["ok"], false, "{connect}");
    assert!(
        connect["error"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{connect}"
    );
    // Landlock's rules hold binding too (there is no namespace to hide in).
    let bind = escape(
        &http,
        &s,
        "boxed__bind",
        json!({"host": "127.0.0.1", "port": 0}),
    )
    .await;
    assert_eq!(bind["ok"], false, "{bind}");
    let big = escape(&http, &s, "boxed__allocate", json!({"mib": 400})).await;
    assert_eq!(big["ok"], false, "{big}");
    assert!(
        big["error"]
            .as_str()
            .unwrap()
            .contains("Cannot allocate memory"),
        "{big}"
    );
    let done = big["done"].as_u64().unwrap();
    assert!((100..256).contains(&done), "stopped near 256MiB: {big}");
    let alive = escape(&http, &s, "boxed__pid", json!({})).await;
    assert_eq!(
        alive["ok"], true,
        "an rlimit refuses, it does not kill: {alive}"
    );
    // Processes are not bounded here: what require = false accepts.
    let forked = escape(&http, &s, "boxed__fork", json!({"count": 40})).await;
    assert_eq!(forked["ok"], true, "{forked}");
    escape(&http, &s, "boxed__reap", json!({})).await;
    drop(listener);
    gw.stop();
    // With require = true the same host refuses to start it at all.
    let strict = escape_backend("boxed", Some(&files.sandbox("")));
    let (code, _, err) = check_config("sluice.toml", &strict, &without);
    assert_eq!(code, 2, "{err}");
}

/// A gateway killed outright leaves its children's cgroups and temporary
/// directories behind (the children die with it, by PR_SET_PDEATHSIG);
/// the next gateway on the host removes them before it makes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroups_a_killed_gateway_left_are_removed_by_the_next() {
    let toml = escape_backend("boxed", Some("{ memory = \"128MiB\", processes = 32 }"));
    let first = Gateway::start(&toml);
    let pid = first.pid();
    let left = cgroups_of(pid);
    assert!(!left.is_empty(), "the child has its cgroups");
    let http = Http::new(first.url("/mcp"));
    let s = http.initialize().await;
    let env = escape(&http, &s, "boxed__env", json!({})).await;
    let left_tmp = PathBuf::from(env["vars"]["TMPDIR"].as_str().unwrap());
    // SAFETY: killing the gateway this test started, by its pid.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    drop(first); // reaps it
    assert!(!exists(pid));
    assert_eq!(cgroups_of(pid), left, "nothing removed them yet");
    assert!(left_tmp.exists());
    let next = Gateway::start(&toml);
    assert!(cgroups_of(pid).is_empty(), "{:?}", cgroups_of(pid));
    assert!(!left_tmp.exists(), "{} left behind", left_tmp.display());
    assert!(!cgroups_of(next.pid()).is_empty());
    next.stop();
}

/// A gateway that is not root has no cgroup to make here: processes are
/// held by `RLIMIT_NPROC` counted in a user namespace of the child's own
/// (the user's other processes do not count), the network by a network
/// namespace inside it, memory by `RLIMIT_DATA`. Run as `nobody` through
/// `setpriv`, from copies of the binaries it may read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_an_unprivileged_user_a_user_namespace_holds_processes_and_network() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempdir::Dir::new();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sluice = dir.path().join("sluice");
    let escape_bin = dir.path().join("escape_backend");
    std::fs::copy(env!("CARGO_BIN_EXE_sluice"), &sluice).unwrap();
    std::fs::copy(Fixture::bin("escape_backend"), &escape_bin).unwrap();
    let toml = format!(
        "[backends.boxed]\ncommand = \"{}\"\nsandbox = {{ memory = \"128MiB\", processes = 16, network = \"none\", read = [], write = [] }}\n",
        escape_bin.display()
    );
    let config = tempdir::write(&dir, "sluice.toml", &toml);
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&sluice)
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0"])
        .env("SLUICE_LOG", "warn");
    if let Some(http) = std::env::var_os("SLUICE_HTTP") {
        cmd.env("SLUICE_HTTP", http);
    }
    let gw = Gateway::start_command(cmd, dir);
    let http = Http::new(gw.url("/mcp"));
    let s = http.initialize().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let forked = escape(&http, &s, "boxed__fork", json!({"count": 40})).await;
    assert_eq!(forked["ok"], false, "{forked}");
    assert!(forked["done"].as_u64().unwrap() < 16, "{forked}");
    escape(&http, &s, "boxed__reap", json!({})).await;
    let connect = escape(
        &http,
        &s,
        "boxed__connect",
        json!({"host": "127.0.0.1", "port": port}),
    )
    .await;
    assert!(
        connect["error"]
            .as_str()
            .is_some_and(|e| e.contains("unreachable")),
        "{connect}"
    );
    let big = escape(&http, &s, "boxed__allocate", json!({"mib": 300})).await;
    assert!(
        big["error"]
            .as_str()
            .is_some_and(|e| e.contains("Cannot allocate memory")),
        "{big}"
    );
    drop(listener);
    gw.stop();
}
