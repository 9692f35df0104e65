//! Runtime controls: the one-entry `nimble_ctl` BPF map (struct nimble_ctl
//! in intf.h). The scheduler writes it at start; `scx_nimble tune` finds the
//! running scheduler's map by name and changes it in place, so a policy
//! switch needs no reload.

use crate::bpf_intf::nimble_ctl;
use crate::preflight;
use crate::topology::rules::NumaRule;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::Path;

/// The map's name as the kernel lists it (BPF object names are 15 bytes).
const MAP_NAME: &str = "nimble_ctl";

/// The controls as Rust sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctl {
    pub numa_rule: NumaRule,
}

impl Ctl {
    fn to_raw(self) -> nimble_ctl {
        nimble_ctl {
            numa_rule: self.numa_rule.bpf(),
            pad: [0; 3],
        }
    }

    fn from_raw(raw: &nimble_ctl) -> Result<Self> {
        let numa_rule = NumaRule::from_bpf(raw.numa_rule)
            .with_context(|| format!("unknown NUMA rule {} in the map", raw.numa_rule))?;
        Ok(Ctl { numa_rule })
    }

    /// "numa_rule=mainline": the form logs and stats lines use.
    pub fn describe(&self) -> String {
        format!("numa_rule={}", self.numa_rule.name())
    }
}

pub fn read(map: &impl MapCore) -> Result<Ctl> {
    let bytes = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .context("reading nimble_ctl")?
        .context("nimble_ctl has no entry 0")?;
    if bytes.len() != std::mem::size_of::<nimble_ctl>() {
        bail!(
            "nimble_ctl value is {} bytes, expected {}",
            bytes.len(),
            std::mem::size_of::<nimble_ctl>()
        );
    }
    // SAFETY: the length matches and nimble_ctl is plain u32s.
    let raw = unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const nimble_ctl) };
    Ctl::from_raw(&raw)
}

pub fn write(map: &impl MapCore, ctl: Ctl) -> Result<()> {
    let raw = ctl.to_raw();
    // SAFETY: nimble_ctl is a plain C struct generated from intf.h.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            &raw as *const nimble_ctl as *const u8,
            std::mem::size_of::<nimble_ctl>(),
        )
    };
    map.update(&0u32.to_ne_bytes(), bytes, MapFlags::ANY)
        .context("writing nimble_ctl")
}

/// The control map of the scheduler that is running now.
fn running_map() -> Result<MapHandle> {
    let sysfs = Path::new(preflight::SCHED_EXT_SYSFS);
    match preflight::loaded_scheduler(sysfs) {
        Some(ops) if ops.starts_with("nimble") => {}
        Some(ops) => bail!("the loaded sched_ext scheduler is {ops}, not scx_nimble"),
        None => bail!("scx_nimble is not running (no sched_ext scheduler loaded)"),
    }
    // The newest map of that name: maps die with the scheduler that made them.
    let id = libbpf_rs::query::MapInfoIter::default()
        .filter(|m| {
            m.name.to_str() == Some(MAP_NAME)
                && m.value_size as usize == std::mem::size_of::<nimble_ctl>()
        })
        .map(|m| m.id)
        .max()
        .context("scx_nimble is loaded but its nimble_ctl map was not found")?;
    MapHandle::from_map_id(id).context("opening nimble_ctl")
}

/// `scx_nimble tune`: print the controls, changing those given.
pub fn tune(numa_rule: Option<NumaRule>) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("must run as root: changing a loaded BPF scheduler needs CAP_BPF");
    }
    let map = running_map()?;
    let old = read(&map)?;
    let mut new = old;
    if let Some(r) = numa_rule {
        new.numa_rule = r;
    }
    if new != old {
        write(&map, new)?;
        println!("{} (was {})", new.describe(), old.describe());
    } else {
        println!("{}", new.describe());
    }
    Ok(())
}
