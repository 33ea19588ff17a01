//! The server under test as the kernel sees it: a process and all its
//! descendants (a gateway's stdio children, supergateway's per-session
//! children), read from /proc. RSS is the sum of `VmRSS`; CPU is the sum of
//! user+system time, including what reaped children used (`cutime`/`cstime`).
//! The root's own user+system time is kept apart too (the gateway alone,
//! without the backends it runs).

use std::collections::HashMap;
use std::fs;

use serde::Serialize;

/// A process and its live descendants (the process first).
pub fn tree(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(stat) = stat_fields(pid) {
                children.entry(stat.ppid).or_default().push(pid);
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        if let Some(kids) = children.get(&found[i]) {
            found.extend(kids);
        }
        i += 1;
    }
    found
}

struct Stat {
    ppid: i32,
    /// utime + stime + cutime + cstime, in clock ticks.
    ticks: u64,
    /// utime + stime: the process's own threads only.
    own_ticks: u64,
    /// stime alone: the kernel's share of `own_ticks`.
    own_sys_ticks: u64,
}

fn stat_fields(pid: i32) -> Option<Stat> {
    let raw = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm is in parentheses and may hold spaces: split after the last ')'.
    let rest = &raw[raw.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        ppid: num(4)? as i32,
        ticks: num(14)? + num(15)? + num(16)? + num(17)?,
        own_ticks: num(14)? + num(15)?,
        own_sys_ticks: num(15)?,
    })
}

fn vm_rss_kib(pid: i32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub rss_kib: u64,
    pub processes: usize,
    pub cpu_s: f64,
    /// The root process's own user+system time (its threads, not its
    /// children, live or reaped).
    pub root_cpu_s: f64,
    /// The part of `root_cpu_s` spent in the kernel (system time): a
    /// hop's system calls and wake-ups apart from its own work, read
    /// from the kernel's accounting on every run, without a profiler.
    pub root_sys_cpu_s: f64,
    /// Voluntary + involuntary context switches of every thread so far.
    pub ctx_switches: u64,
}

fn ctx_switches(pid: i32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut n = 0;
    for t in tasks.flatten() {
        let Ok(status) = fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        n += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

/// RSS and CPU of a process tree now. A root that is gone reads as zero.
/// How much `what` grew between two samples, per request (None without
/// both samples or without requests). Never below 0: a thread that exits
/// takes its context switches out of the sum.
pub fn per_request(
    before: Option<Sample>,
    after: Option<Sample>,
    requests: u64,
    what: fn(&Sample) -> f64,
) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if requests > 0 => {
            Some((what(&a) - what(&b)).max(0.0) / requests as f64)
        }
        _ => None,
    }
}

/// Microseconds of CPU per request: the whole tree, or the root alone.
pub fn cpu_us(s: &Sample) -> f64 {
    s.cpu_s * 1e6
}
pub fn own_cpu_us(s: &Sample) -> f64 {
    s.root_cpu_s * 1e6
}
pub fn own_sys_cpu_us(s: &Sample) -> f64 {
    s.root_sys_cpu_s * 1e6
}
pub fn switches(s: &Sample) -> f64 {
    s.ctx_switches as f64
}

pub fn sample(root: i32) -> Sample {
    let pids = tree(root);
    let tps = ticks_per_second();
    let mut s = Sample {
        rss_kib: 0,
        processes: 0,
        cpu_s: 0.0,
        root_cpu_s: 0.0,
        root_sys_cpu_s: 0.0,
        ctx_switches: 0,
    };
    if let Some(stat) = stat_fields(root) {
        s.root_cpu_s = stat.own_ticks as f64 / tps;
        s.root_sys_cpu_s = stat.own_sys_ticks as f64 / tps;
    }
    for pid in pids {
        if let Some(rss) = vm_rss_kib(pid) {
            s.rss_kib += rss;
            s.processes += 1;
            s.ctx_switches += ctx_switches(pid);
        }
        if let Some(stat) = stat_fields(pid) {
            s.cpu_s += stat.ticks as f64 / tps;
        }
    }
    s
}

/// The live (not zombie) descendants of `root` whose environment holds
/// `var=VALUE`, with VALUE: how a soak finds a gateway's backend processes.
pub fn labelled(root: i32, var: &str) -> Vec<(i32, String)> {
    let prefix = format!("{var}=");
    let mut found = Vec::new();
    for pid in tree(root).into_iter().skip(1) {
        if is_zombie(pid) {
            continue;
        }
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let value = env
            .split(|b| *b == 0)
            .find_map(|kv| kv.strip_prefix(prefix.as_bytes()));
        if let Some(v) = value {
            found.push((pid, String::from_utf8_lossy(v).into_owned()));
        }
    }
    found
}

/// A process that has exited but is not reaped yet (or is gone).
pub fn is_zombie(pid: i32) -> bool {
    state_is_dead(&format!("/proc/{pid}/stat"))
}

/// Every thread of the process has exited (or it is gone). The leader shows
/// as a zombie while its other threads are still being torn down, and only
/// when the last one is gone are its files (its pipes) closed: until then
/// a write to its stdin still succeeds.
pub fn is_dead(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|t| {
        state_is_dead(&format!(
            "/proc/{pid}/task/{}/stat",
            t.file_name().to_string_lossy()
        ))
    })
}

fn state_is_dead(stat: &str) -> bool {
    let Ok(raw) = fs::read_to_string(stat) else {
        return true;
    };
    raw.rfind(')')
        .and_then(|i| raw[i + 1..].split_whitespace().next())
        .is_none_or(|state| state == "Z" || state == "X")
}

/// Where one process's resident memory is, from /proc/PID/smaps: the brk
/// heap, other anonymous mappings (malloc arenas, thread stacks, large
/// allocations) and file-backed pages (the binary, libraries).
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Memory {
    pub rss_kib: u64,
    pub heap_kib: u64,
    pub anon_kib: u64,
    pub file_kib: u64,
}

pub fn memory(pid: i32) -> Option<Memory> {
    let smaps = fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut m = Memory::default();
    // 0 heap, 1 anonymous, 2 file.
    let mut kind = 1;
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let Some(first) = f.next() else { continue };
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            // A mapping's header: range perms offset dev inode [path].
            let path = f.nth(4).unwrap_or("");
            kind = match path {
                "[heap]" => 0,
                "" => 1,
                p if p.starts_with('[') => 1,
                _ => 2,
            };
        } else if first == "Rss:" {
            let kib: u64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            m.rss_kib += kib;
            match kind {
                0 => m.heap_kib += kib,
                1 => m.anon_kib += kib,
                _ => m.file_kib += kib,
            }
        }
    }
    Some(m)
}

/// CPU seconds this process (the load generator) has used.
pub fn self_cpu_s() -> f64 {
    let pid = std::process::id() as i32;
    stat_fields(pid).map_or(0.0, |s| s.ticks as f64 / ticks_per_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that see this process's children run one at a time.
    static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn reads_own_process() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id() as i32;
        let s = sample(me);
        assert!(s.rss_kib > 0);
        assert_eq!(s.processes, 1);
        assert!(s.root_cpu_s <= s.cpu_s);
        assert!(s.root_sys_cpu_s <= s.root_cpu_s);
        assert_eq!(tree(me)[0], me);
        let m = memory(me).expect("own smaps");
        assert!(m.rss_kib > 0 && m.file_kib > 0);
        assert_eq!(m.rss_kib, m.heap_kib + m.anon_kib + m.file_kib);
    }

    #[test]
    fn finds_labelled_children() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let me = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("LOADGEN_TEST_LABEL", "x1")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        let found = labelled(me, "LOADGEN_TEST_LABEL");
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(pid, "x1".to_owned())), "{found:?}");
        assert!(labelled(me, "LOADGEN_TEST_NO_SUCH_LABEL").is_empty());
    }
}
