//! Checks made before anything is loaded, so the common mistakes end in one
//! clear line instead of a libbpf error dump.

use anyhow::{bail, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// Where sched_ext publishes its state (a parameter for tests).
pub const SCHED_EXT_SYSFS: &str = "/sys/kernel/sched_ext";

/// Test hook: the host tests point this at a fake (or missing) directory,
/// so each case runs whatever the host kernel has, instead of skipping.
pub const SYSFS_ENV: &str = "SCX_NIMBLE_TEST_SCHED_EXT_SYSFS";

/// The sched_ext sysfs directory the checks read (SCHED_EXT_SYSFS unless the
/// test hook names another).
pub fn sched_ext_sysfs() -> PathBuf {
    std::env::var_os(SYSFS_ENV).map_or_else(|| PathBuf::from(SCHED_EXT_SYSFS), PathBuf::from)
}

pub fn check(sysfs: &Path, euid: u32) -> Result<()> {
    if !sysfs.exists() {
        bail!(
            "this kernel has no sched_ext ({} is missing; needs CONFIG_SCHED_CLASS_EXT=y, \
             tested on Linux 7.2 and 7.3); to try scx_nimble here, run it in the VM: vm/nimble-vm demo",
            sysfs.display()
        );
    }
    if euid != 0 {
        bail!("must run as root: loading a sched_ext scheduler needs CAP_SYS_ADMIN and CAP_BPF");
    }
    if let Some(ops) = loaded_scheduler(sysfs) {
        bail!("another sched_ext scheduler is already loaded ({ops}); stop it first");
    }
    Ok(())
}

/// The name of the sched_ext scheduler currently loaded, if any.
pub fn loaded_scheduler(sysfs: &Path) -> Option<String> {
    let state = fs::read_to_string(sysfs.join("state")).unwrap_or_default();
    let ops = fs::read_to_string(sysfs.join("root/ops")).ok();
    match (state.trim(), ops) {
        ("disabled", _) | ("", None) => None,
        (_, Some(ops)) => Some(ops.trim().to_string()),
        (state, None) => Some(format!("state {state}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(state: Option<&str>, ops: Option<&str>) -> tempdir::Dir {
        let d = tempdir::Dir::new();
        if let Some(s) = state {
            fs::write(d.path().join("state"), format!("{s}\n")).unwrap();
        }
        if let Some(o) = ops {
            fs::create_dir_all(d.path().join("root")).unwrap();
            fs::write(d.path().join("root/ops"), format!("{o}\n")).unwrap();
        }
        d
    }

    #[test]
    fn no_sched_ext() {
        let e = check(Path::new("/nonexistent/sched_ext"), 0).unwrap_err();
        assert!(e.to_string().contains("no sched_ext"), "{e}");
    }

    #[test]
    fn not_root() {
        let d = fake_sysfs(Some("disabled"), None);
        let e = check(d.path(), 1000).unwrap_err();
        assert!(e.to_string().starts_with("must run as root"), "{e}");
    }

    #[test]
    fn another_scheduler() {
        let d = fake_sysfs(Some("enabled"), Some("simple_1.0"));
        let e = check(d.path(), 0).unwrap_err();
        assert!(e.to_string().contains("already loaded (simple_1.0)"), "{e}");
    }

    #[test]
    fn free_to_load() {
        let d = fake_sysfs(Some("disabled"), None);
        check(d.path(), 0).unwrap();
    }

    /// A throwaway directory (std has none; not worth a dependency).
    mod tempdir {
        use std::path::{Path, PathBuf};
        pub struct Dir(PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let p = std::env::temp_dir().join(format!(
                    "nimble-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
