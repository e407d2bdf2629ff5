//! The child processes under test — the hookq server on a temp database, and the relay
//! (`relay.rs`) — killed on drop, plus the `/proc` readings (CPU time, peak RSS) and file
//! sizes the report needs.

use crate::quota::CpuQuota;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a child gets to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful stop (SIGTERM) may take before the child is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Lines of a child's log kept for error messages.
const LOG_TAIL: usize = 40;

/// A directory under the system temp dir, removed (with its content) on drop.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub fn new() -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!("hookq-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create scratch dir {}", path.display()))?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A fresh database path inside the scratch dir (nothing is created).
    pub fn db(&self, name: &str) -> PathBuf {
        self.path.join(format!("{name}.db"))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Remove a database and its companion files.
pub fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

/// Bytes of the database file plus its write-ahead log.
pub fn db_bytes(db: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(PathBuf::from(name)).map_or(0, |m| m.len())
        })
        .sum()
}

/// How to start one server.
#[derive(Debug)]
pub struct ServerSpec {
    pub binary: PathBuf,
    pub db: PathBuf,
    pub dispatch: bool,
    /// `HOOKQ_MAX_QUEUES`, for a run that needs more queues than the default cap (10 000)
    /// allows; `None`: the server's default.
    pub max_queues: Option<usize>,
    /// A CPU quota of its own to run in (`--node-cpu`); `None`: unconstrained.
    pub quota: Option<CpuQuota>,
}

/// A running child process (the hookq server, or the bench's relay). Dropping it kills the
/// process.
pub struct ServerProcess {
    child: Option<Child>,
    pub addr: SocketAddr,
    pid: u32,
    /// "the server" or "the relay", for messages.
    what: String,
    log_tail: Arc<Mutex<Vec<String>>>,
    /// The cgroup the process runs in, removed after it (fields drop after `Drop::drop`).
    quota: Option<CpuQuota>,
}

impl ServerProcess {
    /// Start the hookq server and wait for its `hookq listening addr=…` line.
    pub fn start(spec: ServerSpec) -> anyhow::Result<Self> {
        let mut command = match &spec.quota {
            Some(quota) => quota.command(&spec.binary),
            None => Command::new(&spec.binary),
        };
        command
            .arg("--db")
            .arg(&spec.db)
            .arg("--listen")
            .arg("127.0.0.1:0")
            // Every load comes from 127.0.0.1, one address standing for many producers (as
            // behind a reverse proxy): the per-address cap is the whole cap.
            .arg("--max-connections")
            .arg("1024")
            .arg("--max-connections-per-peer")
            .arg("1024")
            .env("HOOKQ_DISPATCH", if spec.dispatch { "on" } else { "off" })
            .env("HOOKQ_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("HOOKQ_LOG_FORMAT")
            .env_remove("HOOKQ_API_KEY")
            .env_remove("HOOKQ_SYNCHRONOUS")
            .env_remove("HOOKQ_MAX_IN_FLIGHT")
            .env_remove("HOOKQ_LISTEN")
            .env_remove("HOOKQ_DB");
        match spec.max_queues {
            Some(cap) => command.env("HOOKQ_MAX_QUEUES", cap.to_string()),
            None => command.env_remove("HOOKQ_MAX_QUEUES"),
        };
        let mut server = Self::spawn(command, "the server")?;
        server.quota = spec.quota;
        Ok(server)
    }

    /// Start this bench binary as the relay (see `relay.rs`), forwarding to `sink_url`.
    pub fn start_relay(sink_url: &str) -> anyhow::Result<Self> {
        // `/proc/self/exe` rather than `current_exe()`'s path: it is this very binary even
        // when a `cargo build` has replaced the file since the bench started.
        let mut command = Command::new("/proc/self/exe");
        command.arg("--relay-to").arg(sink_url);
        Self::spawn(command, "the relay")
    }

    /// Spawn `command` with its stderr read line by line, and wait for its listening line
    /// (`listening_addr`). `what` names the process in messages.
    pub fn spawn(mut command: Command, what: &str) -> anyhow::Result<Self> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start {what} ({})",
                    command.get_program().to_string_lossy()
                )
            })?;
        let pid = child.id();
        let stderr = child
            .stderr
            .take()
            .with_context(|| format!("the stderr of {what} was not piped"))?;
        let log_tail = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let tail = log_tail.clone();
        // Keeps draining the pipe for the child's whole life so it never blocks on a full pipe.
        std::thread::Builder::new()
            .name("hookq-bench-child-log".into())
            .spawn(move || {
                let mut addr_tx = Some(addr_tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let line = strip_ansi(&line);
                    if let Some(tx) = &addr_tx
                        && let Some(addr) = listening_addr(&line)
                    {
                        let _ = tx.send(addr);
                        addr_tx = None;
                    }
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if tail.len() == LOG_TAIL {
                        tail.remove(0);
                    }
                    tail.push(line);
                }
            })
            .with_context(|| format!("cannot start the log reader of {what}"))?;
        let mut process = Self {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            pid,
            what: what.to_owned(),
            log_tail,
            quota: None,
        };
        match addr_rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => process.addr = addr,
            Err(_) => bail!(
                "{what} did not report its address within {START_TIMEOUT:?}; its log:\n{}",
                process.log()
            ),
        }
        Ok(process)
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The last lines the process logged.
    pub fn log(&self) -> String {
        self.log_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }

    /// User + system CPU seconds the process has used so far.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        process_cpu_seconds(&format!("/proc/{}/stat", self.pid))
    }

    /// Peak resident set size so far (`VmHWM`), in bytes.
    pub fn peak_rss_bytes(&self) -> anyhow::Result<u64> {
        self.status_kib("VmHWM:").map(|kib| kib * 1024)
    }

    /// Current resident set size (`VmRSS`), in bytes.
    pub fn rss_bytes(&self) -> anyhow::Result<u64> {
        self.status_kib("VmRSS:").map(|kib| kib * 1024)
    }

    fn status_kib(&self, field: &str) -> anyhow::Result<u64> {
        let path = format!("/proc/{}/status", self.pid);
        let status =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .with_context(|| format!("no {field} in {path}"))?;
        line.split_whitespace()
            .nth(1)
            .with_context(|| format!("malformed {field} line"))?
            .parse()
            .with_context(|| format!("malformed {field} value"))
    }

    /// Ask the process to shut down gracefully (SIGTERM), waiting for it; kill it if it hangs.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child
                .try_wait()
                .with_context(|| format!("cannot wait for {}", self.what))?
            {
                if !status.success() {
                    eprintln!("warning: {} exited with {status}", self.what);
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{} did not stop within {STOP_TIMEOUT:?}; killed it",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU seconds (utime + stime) from a `/proc/<pid>/stat` file.
pub fn process_cpu_seconds(stat_path: &str) -> anyhow::Result<f64> {
    // After the command's paren, field 3 (state) is index 0: utime (14) and stime (15)
    // are 11 and 12.
    stat_cpu_seconds(stat_path, 11..13)
}

/// CPU seconds of the children a process has waited for (cutime + cstime, fields 16 and 17)
/// from its `/proc/<pid>/stat` file.
pub fn children_cpu_seconds(stat_path: &str) -> anyhow::Result<f64> {
    stat_cpu_seconds(stat_path, 13..15)
}

/// The sum of the tick fields at `fields` (indexes after the command's closing paren) of a
/// `/proc/<pid>/stat` file, in seconds.
fn stat_cpu_seconds(stat_path: &str, fields: std::ops::Range<usize>) -> anyhow::Result<f64> {
    let stat =
        std::fs::read_to_string(stat_path).with_context(|| format!("cannot read {stat_path}"))?;
    // The command name (field 2) may contain spaces; fields after its closing paren are plain.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed /proc stat")?;
    let all: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = all
        .get(fields)
        .context("short /proc stat")?
        .iter()
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .sum();
    Ok(ticks as f64 / clock_ticks_per_second())
}

/// `sysconf(_SC_CLK_TCK)`, asked of `getconf` once; 100 on every Linux we know.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip `ESC [ … final-byte`.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The address in `… hookq listening addr=127.0.0.1:PORT` (the server) or
/// `hookq-bench relay listening addr=127.0.0.1:PORT` (the relay).
fn listening_addr(line: &str) -> Option<SocketAddr> {
    if !line.contains("hookq listening") && !line.contains(crate::relay::LISTENING) {
        return None;
    }
    let after = line.split("addr=").nth(1)?;
    after.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line_gives_the_address() {
        let line = strip_ansi(
            "\u{1b}[2m2025-01-01T00:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m hookq: hookq listening \u{1b}[3maddr\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:4321",
        );
        assert_eq!(
            listening_addr(&line),
            Some(SocketAddr::from(([127, 0, 0, 1], 4321)))
        );
    }

    #[test]
    fn the_relay_listening_line_gives_the_address() {
        assert_eq!(
            listening_addr("hookq-bench relay listening addr=127.0.0.1:5678"),
            Some(SocketAddr::from(([127, 0, 0, 1], 5678)))
        );
    }

    #[test]
    fn other_lines_give_no_address() {
        assert_eq!(listening_addr("hookq: starting, addr=127.0.0.1:1"), None);
    }
}
