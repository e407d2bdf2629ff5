//! Driving the faults: the [`Controller`] handle the library and the control socket share,
//! the one-line command language, and the Unix-socket server and client the `forgetfs`
//! binary uses.
//!
//! Protocol: a client connects, writes one command per line, and reads one answer line per
//! command: `ok` (with details after a space) or `error <why>`. Commands: `cut`,
//! `cut-torn <seed>`, `fail-fsync [n]`, `enospc-after <bytes>`, `heal`, `status`, `unmount`.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::str::FromStr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::disk::{CutReport, Disk, Faults, Status};
use crate::error::Error;
use crate::pages::Tear;

/// One control command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Lose power, dropping every unsynced write and directory change.
    Cut,
    /// Lose power, keeping a seeded random prefix of each file's unsynced pages.
    CutTorn(u64),
    /// Fail the next this many fsyncs with `EIO` (their pages are lost, as after
    /// fsyncgate): `fail-fsync` for one, `fail-fsync <n>` for more.
    FailFsync(u32),
    /// Fail writes with `ENOSPC` once this many more bytes have been written.
    EnospcAfter(u64),
    /// Clear the injected faults.
    Heal,
    /// Report how much is volatile.
    Status,
    /// Unmount and end the `forgetfs mount` process.
    Unmount,
}

impl FromStr for Command {
    type Err = Error;

    fn from_str(line: &str) -> Result<Self, Error> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |word: &str| {
            word.parse::<u64>()
                .map_err(|_| Error::Control(format!("not a number: {word:?}")))
        };
        match words.as_slice() {
            ["cut"] => Ok(Self::Cut),
            ["cut-torn", seed] => Ok(Self::CutTorn(number(seed)?)),
            ["fail-fsync"] => Ok(Self::FailFsync(1)),
            ["fail-fsync", count] => Ok(Self::FailFsync(
                u32::try_from(number(count)?)
                    .map_err(|_| Error::Control(format!("too many: {count:?}")))?,
            )),
            ["enospc-after", bytes] => Ok(Self::EnospcAfter(number(bytes)?)),
            ["heal"] => Ok(Self::Heal),
            ["status"] => Ok(Self::Status),
            ["unmount"] => Ok(Self::Unmount),
            _ => Err(Error::Control(format!("unknown command: {line:?}"))),
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cut => write!(f, "cut"),
            Self::CutTorn(seed) => write!(f, "cut-torn {seed}"),
            Self::FailFsync(1) => write!(f, "fail-fsync"),
            Self::FailFsync(count) => write!(f, "fail-fsync {count}"),
            Self::EnospcAfter(bytes) => write!(f, "enospc-after {bytes}"),
            Self::Heal => write!(f, "heal"),
            Self::Status => write!(f, "status"),
            Self::Unmount => write!(f, "unmount"),
        }
    }
}

/// A cheap clone of the handle on a mounted filesystem's faults.
#[derive(Debug, Clone)]
pub struct Controller {
    disk: Arc<Mutex<Disk>>,
}

impl Controller {
    pub fn new(disk: Arc<Mutex<Disk>>) -> Self {
        Self { disk }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        self.disk
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Loses power. Kill every process using the mount first: their handles are stale
    /// afterwards, and a write they make between the kill and the cut would be volatile
    /// data the cut drops anyway.
    pub fn power_cut(&self, tear: Tear) -> Result<CutReport, Error> {
        self.disk().power_cut(tear)
    }

    pub fn fail_next_fsync(&self) {
        self.disk().fail_next_fsync();
    }

    pub fn fail_fsyncs(&self, count: u32) {
        self.disk().fail_fsyncs(count);
    }

    pub fn fail_writes_after(&self, bytes: u64) {
        self.disk().fail_writes_after(bytes);
    }

    pub fn heal(&self) {
        self.disk().heal();
    }

    /// The injected faults still armed (an fsync failure not yet met, a write budget).
    pub fn faults(&self) -> Faults {
        self.disk().faults()
    }

    pub fn status(&self) -> Status {
        self.disk().status()
    }

    /// Carries out a command other than `unmount`, answering its detail line.
    pub fn apply(&self, command: Command) -> Result<String, Error> {
        match command {
            Command::Cut => Ok(self.power_cut(Tear::None)?.to_string()),
            Command::CutTorn(seed) => Ok(self.power_cut(Tear::Random { seed })?.to_string()),
            Command::FailFsync(count) => {
                self.fail_fsyncs(count);
                Ok(String::new())
            }
            Command::EnospcAfter(bytes) => {
                self.fail_writes_after(bytes);
                Ok(String::new())
            }
            Command::Heal => {
                self.heal();
                Ok(String::new())
            }
            Command::Status => Ok(self.status().to_string()),
            Command::Unmount => Err(Error::Control("unmount is the server's".into())),
        }
    }
}

/// Serves the control socket until the listener fails; `unmount` is passed to `stop`
/// (answered `ok` once sent).
pub fn serve(listener: &UnixListener, controller: &Controller, stop: &Sender<()>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            continue;
        };
        if let Err(e) = serve_one(stream, controller, stop) {
            eprintln!("forgetfs: control connection: {e}");
        }
    }
}

fn serve_one(
    stream: UnixStream,
    controller: &Controller,
    stop: &Sender<()>,
) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match line.parse::<Command>() {
            Ok(Command::Unmount) => match stop.send(()) {
                Ok(()) => Ok(String::new()),
                Err(_) => Err(Error::Control("already unmounting".into())),
            },
            Ok(command) => controller.apply(command),
            Err(e) => Err(e),
        };
        match answer {
            Ok(detail) if detail.is_empty() => writeln!(writer, "ok")?,
            Ok(detail) => writeln!(writer, "ok {detail}")?,
            Err(e) => writeln!(writer, "error {e}")?,
        }
    }
    Ok(())
}

/// Sends one command to a `forgetfs mount` process's control socket; answers the detail
/// of its `ok`, or its `error` as an [`Error::Control`].
pub fn send(socket: &Path, command: Command) -> Result<String, Error> {
    let io = |e: std::io::Error| Error::Control(format!("{}: {e}", socket.display()));
    let mut stream = UnixStream::connect(socket).map_err(io)?;
    writeln!(stream, "{command}").map_err(io)?;
    stream.shutdown(std::net::Shutdown::Write).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).map_err(io)?;
    let answer = answer.trim_end();
    match answer.split_once(' ').unwrap_or((answer, "")) {
        ("ok", detail) => Ok(detail.to_owned()),
        ("error", why) => Err(Error::Control(why.to_owned())),
        _ => Err(Error::Control(format!("no answer to {command}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    #[test]
    fn every_command_reads_back_as_it_prints() {
        for command in [
            Command::Cut,
            Command::CutTorn(42),
            Command::FailFsync(1),
            Command::FailFsync(3),
            Command::EnospcAfter(4096),
            Command::Heal,
            Command::Status,
            Command::Unmount,
        ] {
            assert_eq!(command.to_string().parse::<Command>().ok(), Some(command));
        }
        assert!("cut-torn x".parse::<Command>().is_err());
        assert!("explode".parse::<Command>().is_err());
    }
}
