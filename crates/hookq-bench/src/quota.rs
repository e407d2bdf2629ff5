//! CPU quotas for the servers under test (`--node-cpu F`): each server in a cgroup of its
//! own capped at F cores, as though each node were a small machine of its own, while the
//! load generator, the sink and PostgreSQL run outside the quotas.
//!
//! cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us`), whichever this machine mounts; both
//! need root. The server enters its cgroup before it starts: it is launched through
//! `sh -c 'echo $$ > …/cgroup.procs && exec hookq …'`, so every thread it ever has is
//! inside, and its pid (the one the bench stops and reads the CPU time of) is the shell's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};

/// The scheduler period the quotas are a share of (the kernel's default, 100 ms).
const PERIOD_US: u64 = 100_000;

/// Where the cgroup file systems are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Quotas made by this process, numbering their cgroups.
static MADE: AtomicUsize = AtomicUsize::new(0);

/// Which cgroup hierarchy holds the CPU controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hierarchy {
    /// Unified (`cpu.max`).
    V2,
    /// The `cpu` controller's own hierarchy (`cpu.cfs_quota_us`).
    V1,
}

/// One cgroup capped at a number of cores; removed when dropped (once its process is gone).
#[derive(Debug)]
pub struct CpuQuota {
    dir: PathBuf,
}

impl CpuQuota {
    /// A fresh cgroup allowed `cores` cores (e.g. 0.15), or why it cannot be made here.
    pub fn new(cores: f64) -> anyhow::Result<Self> {
        if !(cores.is_finite() && cores >= 0.01) {
            bail!("--node-cpu takes a number of cores of at least 0.01 (e.g. 0.15), not {cores}");
        }
        let quota_us = (cores * PERIOD_US as f64).round() as u64;
        let name = format!(
            "hookq-bench-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let root = Path::new(CGROUP_ROOT);
        let dir = match hierarchy(root)? {
            Hierarchy::V2 => {
                // The root's children get the cpu controller only once it is delegated.
                write(&root.join("cgroup.subtree_control"), "+cpu")?;
                let dir = root.join(&name);
                make_dir(&dir)?;
                write(&dir.join("cpu.max"), &format!("{quota_us} {PERIOD_US}"))?;
                dir
            }
            Hierarchy::V1 => {
                let dir = root.join("cpu").join(&name);
                make_dir(&dir)?;
                write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(&dir.join("cpu.cfs_quota_us"), &quota_us.to_string())?;
                dir
            }
        };
        Ok(Self { dir })
    }

    /// A command that runs `program` inside this cgroup: arguments added to it go to the
    /// program.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(program);
        command
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Fails while a process is still inside; then the kernel keeps an empty cgroup.
        if let Err(err) = std::fs::remove_dir(&self.dir) {
            eprintln!(
                "warning: cannot remove the cgroup {}: {err}",
                self.dir.display()
            );
        }
    }
}

/// Which hierarchy offers the CPU controller under `root`, or why none does.
fn hierarchy(root: &Path) -> anyhow::Result<Hierarchy> {
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        return Ok(Hierarchy::V2);
    }
    if root.join("cpu").join("cpu.cfs_quota_us").is_file() {
        return Ok(Hierarchy::V1);
    }
    bail!(
        "--node-cpu needs a CPU cgroup controller (cgroup v2 with `cpu` in {0}/cgroup.controllers, \
         or v1 mounted at {0}/cpu) and none is here",
        root.display()
    )
}

fn make_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir(dir).with_context(|| {
        format!(
            "cannot create the cgroup {} (--node-cpu needs root)",
            dir.display()
        )
    })
}

fn write(file: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(file, value)
        .with_context(|| format!("cannot write {value:?} to {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_below_a_hundredth_of_a_core_is_refused_before_touching_cgroups() {
        for cores in [0.0, -1.0, f64::NAN, 0.001] {
            let err = CpuQuota::new(cores).unwrap_err().to_string();
            assert!(err.contains("at least 0.01"), "{err}");
        }
    }

    #[test]
    fn a_machine_without_a_cpu_controller_is_told_so() {
        let empty = tempfile::tempdir().unwrap();
        let err = hierarchy(empty.path()).unwrap_err().to_string();
        assert!(err.contains("needs a CPU cgroup controller"), "{err}");
    }

    /// On a machine where this process may make cgroups (root, a CPU controller): a
    /// program started through the quota runs inside it, under the quota written. Elsewhere
    /// a NOTICE, as `--node-cpu` itself refuses to run there.
    #[test]
    fn a_program_started_through_the_quota_runs_inside_it() {
        let quota = match CpuQuota::new(0.15) {
            Ok(quota) => quota,
            Err(err) => {
                eprintln!("NOTICE: no CPU quota on this machine, not checked: {err:#}");
                return;
            }
        };
        let quota_file = ["cpu.max", "cpu.cfs_quota_us"]
            .map(|f| quota.dir.join(f))
            .into_iter()
            .find(|f| f.is_file())
            .unwrap();
        let written = std::fs::read_to_string(quota_file).unwrap();
        assert!(written.starts_with("15000"), "{written}");
        // The program reports the cgroups it runs in itself.
        let out = quota
            .command(Path::new("/bin/cat"))
            .arg("/proc/self/cgroup")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let groups = String::from_utf8_lossy(&out.stdout);
        let name = quota
            .dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(groups.contains(&name), "not inside {name}: {groups}");
    }

    #[test]
    fn each_hierarchy_is_recognised_by_its_files() {
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.controllers"), "cpuset cpu io memory").unwrap();
        assert_eq!(hierarchy(v2.path()).unwrap(), Hierarchy::V2);
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir(v1.path().join("cpu")).unwrap();
        std::fs::write(v1.path().join("cpu").join("cpu.cfs_quota_us"), "-1").unwrap();
        assert_eq!(hierarchy(v1.path()).unwrap(), Hierarchy::V1);
    }
}
