//! The power-loss mode (`--power-loss N`, `--fsync-fail N`): the database lives on a
//! forgetfs mount (crates/forgetfs), which keeps every write since its file's last fsync
//! in a volatile layer. Each round ends in a cut: the server is killed (`kill -9`), the
//! mount loses power (unsynced writes dropped or torn), `hookq check` must pass on what
//! is left, and what is left is read to account for the duplicates the cut may cause.
//! An fsync-fail round first makes one fsync fail, the way Linux does (its pages never
//! reach the disk), so the cut after it shows whether any `201` rested on them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forgetfs::{ScratchMount, Tear};

/// The disk of a power-loss run.
pub struct PowerDisk {
    mount: ScratchMount,
}

/// What one cut left on the disk.
pub struct AfterCut {
    /// Every job id still in the database (waiting, in flight, or dead-lettered).
    pub pending: HashSet<String>,
    /// The mount's own account (files, pages and entries undone).
    pub report: String,
}

impl PowerDisk {
    pub fn mount() -> anyhow::Result<Self> {
        let mount = ScratchMount::new().context(
            "cannot mount forgetfs (power-loss runs need /dev/fuse and root, or fusermount3)",
        )?;
        Ok(Self { mount })
    }

    pub fn database(&self) -> PathBuf {
        self.mount.at("chaos.db")
    }

    /// Make the next fsync fail; wait (up to `within`) until some write meets it. Answers
    /// whether one did.
    pub async fn fail_next_fsync(&self, within: Duration) -> bool {
        self.mount.fail_next_fsync();
        let deadline = Instant::now() + within;
        // The harness's own poll of the fault it armed, not a synchronisation of the server.
        while self.mount.faults().failing_fsyncs > 0 {
            if Instant::now() > deadline {
                self.mount.heal();
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Lose power (the server must be dead already), tearing unsynced pages by `seed`;
    /// then `hookq check` the database and read which jobs it still holds.
    pub async fn cut(&self, bin: &Path, seed: u64) -> anyhow::Result<AfterCut> {
        let report = self
            .mount
            .power_cut(Tear::Random { seed })
            .context("power cut")?
            .to_string();
        let db = self.database();
        let checked = std::process::Command::new(bin)
            .args(["check", "--db"])
            .arg(&db)
            .output()
            .context("cannot run hookq check")?;
        if !checked.status.success() {
            bail!(
                "hookq check failed after the cut ({}): {}{}",
                checked.status,
                String::from_utf8_lossy(&checked.stdout),
                String::from_utf8_lossy(&checked.stderr)
            );
        }
        let pending = hookq::store::testing::Inspector::open_read_only(&db)?
            .job_ids()
            .await?
            .iter()
            .map(ToString::to_string)
            .collect();
        Ok(AfterCut { pending, report })
    }
}
