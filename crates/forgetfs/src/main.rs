//! The `forgetfs` binary: `mount` serves a forgetfs until it is unmounted, with an
//! optional control socket; `ctl` sends one command to that socket.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use clap::{Parser, Subcommand};
use forgetfs::{Command, Error, Mount, control};

#[derive(Parser)]
#[command(
    version,
    about = "A FUSE filesystem that forgets unsynced writes on a power cut"
)]
struct Cli {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Mount BACKING at MOUNTPOINT and serve until unmounted (`forgetfs ctl SOCKET unmount`
    /// or `fusermount3 -u MOUNTPOINT`).
    Mount {
        backing: PathBuf,
        mountpoint: PathBuf,
        /// A Unix socket to take commands on; it appears once the mount is up.
        #[arg(long)]
        control: Option<PathBuf>,
    },
    /// Send one command to a mount's control socket: cut, cut-torn SEED, fail-fsync [N],
    /// enospc-after BYTES, heal, status, unmount.
    Ctl {
        socket: PathBuf,
        #[arg(required = true, num_args = 1..)]
        command: Vec<String>,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().action {
        Action::Mount {
            backing,
            mountpoint,
            control,
        } => serve(&backing, &mountpoint, control),
        Action::Ctl { socket, command } => command
            .join(" ")
            .parse::<Command>()
            .and_then(|command| control::send(&socket, command))
            .map(|detail| {
                if !detail.is_empty() {
                    println!("{detail}");
                }
            }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forgetfs: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(
    backing: &std::path::Path,
    mountpoint: &std::path::Path,
    socket: Option<PathBuf>,
) -> Result<(), Error> {
    let mount = Mount::new(backing, mountpoint)?;
    let (stop, stopped) = mpsc::channel();
    if let Some(socket) = socket {
        // A socket file left by an earlier run would make the bind fail.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .map_err(|e| Error::Control(format!("{}: {e}", socket.display())))?;
        let controller = mount.controller();
        thread::spawn(move || control::serve(&listener, &controller, &stop));
    }
    eprintln!(
        "forgetfs: {} mounted at {}",
        backing.display(),
        mountpoint.display()
    );
    while mount.is_mounted() {
        match stopped.recv_timeout(Duration::from_millis(200)) {
            Ok(()) => break,
            Err(mpsc::RecvTimeoutError::Timeout | mpsc::RecvTimeoutError::Disconnected) => {}
        }
    }
    mount.unmount()
}
