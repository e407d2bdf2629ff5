//! Harness additions for the fault tests: a raw TCP "worker" that misbehaves below HTTP
//! (resets, silence, dribbling, endless bodies, garbage instead of TLS), a guard that mounts
//! a small tmpfs for the disk-full test, and running the binary on a file it must refuse.
//!
//! Each fault is the worker's whole behaviour on every connection; the test then waits on
//! the API (the job turning ERROR or READY) or on [`RawStats`], never on a fixed sleep.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::helpers::DEADLINE;

/// What the raw worker does with each connection.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Read the request, then reset the connection (RST) without answering.
    ResetAfterRequest,
    /// Read the request, write `head` (status line and headers) and `partial` (the start of
    /// a longer body), then reset the connection.
    ResetMidBody {
        head: &'static str,
        partial: &'static str,
    },
    /// Accept and never read or write.
    Silent,
    /// Read the request, write `head`, then one body byte every `every`.
    Dribble { head: &'static str, every: Duration },
    /// Read the request, write `head`, then `total` bytes of body as fast as the client reads.
    Endless { head: String, total: u64 },
    /// Read whatever arrives first (a TLS ClientHello), answer `bytes`, close.
    Garbage(&'static [u8]),
}

/// What the raw worker saw, for tests to wait on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawStats {
    pub accepted: usize,
    /// Requests read in full (the fault's action comes after).
    pub requests: usize,
    /// Connections the fault is done with (closed, reset, or the client went away).
    pub finished: usize,
    /// Body bytes written (successfully handed to the kernel) across all connections.
    pub body_bytes: u64,
}

/// A TCP listener on 127.0.0.1:0 applying one [`Fault`] to every connection.
pub struct RawReceiver {
    pub port: u16,
    stats: watch::Sender<RawStats>,
    stop: CancellationToken,
}

impl RawReceiver {
    pub async fn start(fault: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the raw receiver");
        let port = listener.local_addr().unwrap().port();
        let (stats, _) = watch::channel(RawStats::default());
        let stop = CancellationToken::new();
        let (tx, token) = (stats.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let socket = tokio::select! {
                    () = token.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((socket, _)) => socket,
                        Err(_) => continue,
                    },
                };
                tx.send_modify(|s| s.accepted += 1);
                let (tx, token, fault) = (tx.clone(), token.clone(), fault.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => {}
                        () = serve(socket, &fault, &tx) => {}
                    }
                    tx.send_modify(|s| s.finished += 1);
                });
            }
        });
        Self { port, stats, stop }
    }

    /// `http://127.0.0.1:<port>/hook`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn stats(&self) -> RawStats {
        self.stats.borrow().clone()
    }

    /// Wait until `done` holds for the stats (deadline: fails).
    pub async fn wait_until(&self, what: &str, done: impl Fn(&RawStats) -> bool) -> RawStats {
        let mut changes = self.stats.subscribe();
        let waiting = async {
            loop {
                let now = changes.borrow_and_update().clone();
                if done(&now) {
                    return now;
                }
                changes.changed().await.expect("the raw receiver is alive");
            }
        };
        tokio::time::timeout(DEADLINE, waiting)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}; stats: {:?}", self.stats()))
    }
}

impl Drop for RawReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(mut socket: TcpStream, fault: &Fault, stats: &watch::Sender<RawStats>) {
    if matches!(fault, Fault::Silent) {
        std::future::pending::<()>().await;
    }
    if let Fault::Garbage(bytes) = fault {
        let mut hello = [0u8; 1024];
        if matches!(socket.read(&mut hello).await, Ok(n) if n > 0) {
            stats.send_modify(|s| s.requests += 1);
            let _ = socket.write_all(bytes).await;
            let _ = socket.shutdown().await;
        }
        return;
    }
    if read_request(&mut socket).await.is_err() {
        return;
    }
    stats.send_modify(|s| s.requests += 1);
    match fault {
        Fault::ResetAfterRequest => reset(socket),
        Fault::ResetMidBody { head, partial } => {
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(partial.as_bytes()).await;
            let _ = socket.flush().await;
            reset(socket);
        }
        Fault::Dribble { head, every } => {
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut ticks = tokio::time::interval(*every);
            loop {
                ticks.tick().await;
                if socket.write_all(b"x").await.is_err() {
                    return;
                }
                stats.send_modify(|s| s.body_bytes += 1);
            }
        }
        Fault::Endless { head, total } => {
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 * 1024];
            let mut sent = 0u64;
            while sent < *total {
                let n = chunk.len().min((*total - sent) as usize);
                if socket.write_all(&chunk[..n]).await.is_err() {
                    return; // the client stopped reading and closed: what we hope for
                }
                sent += n as u64;
                stats.send_modify(|s| s.body_bytes += n as u64);
            }
        }
        Fault::Silent | Fault::Garbage(_) => unreachable!("handled above"),
    }
}

/// SO_LINGER 0, then close: the kernel sends RST instead of FIN. (Deprecated in tokio because
/// a non-zero linger blocks the thread on drop; a zero linger does not block.)
#[allow(deprecated)]
fn reset(socket: TcpStream) {
    socket
        .set_linger(Some(Duration::ZERO))
        .expect("set SO_LINGER");
    drop(socket);
}

/// Read one HTTP/1.1 request: headers, then `Content-Length` bytes of body.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(buf)
}

// ---------------------------------------------------------------------------------------
// A small file system that can fill up
// ---------------------------------------------------------------------------------------

/// A tmpfs of a few MiB mounted on a temporary directory; unmounted on drop. Needs root
/// (or CAP_SYS_ADMIN): [`SmallDisk::mount`] returns `None` where it cannot mount.
pub struct SmallDisk {
    pub dir: tempfile::TempDir,
}

impl SmallDisk {
    pub fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write a file of zeroes until the disk is full; returns its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).expect("create the filler file");
        let block = vec![0u8; 4096];
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(err) if err.raw_os_error() == Some(28) => break, // ENOSPC
                Err(err) => panic!("filling the disk failed: {err}"),
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

// ---------------------------------------------------------------------------------------
// The binary on a file it must refuse
// ---------------------------------------------------------------------------------------

/// Run `hookq --db <db> --listen 127.0.0.1:0` and expect it to exit on its own (deadline:
/// fails, killing it). Returns whether it succeeded and its stderr.
pub async fn run_binary_expecting_exit(db: &Path) -> (bool, String) {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookq"))
        .arg("--db")
        .arg(db)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("HOOKQ_API_KEY")
        .env("HOOKQ_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the hookq binary");
    let output = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("hookq exits by itself on a file it must refuse")
        .expect("wait for hookq");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `len` pseudo-random bytes (xorshift; no need for a real generator).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}
