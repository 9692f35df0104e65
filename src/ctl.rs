//! Runtime controls: the one-entry `nimble_ctl` BPF map (struct nimble_ctl
//! in intf.h). The scheduler writes it at start; `scx_nimble tune` finds the
//! running scheduler's map (the one its struct_ops programs use) and changes
//! it in place, so a policy switch needs no reload.

use crate::bpf_intf::nimble_ctl;
use crate::preflight;
use crate::topology::rules::NumaRule;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use libbpf_rs::query::{MapInfoIter, ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::{MapCore, MapFlags, MapHandle, ProgramType};
use std::collections::BTreeSet;

/// Which tasks go through the per-LLC shared wakequeue (src/bpf/swq.bpf.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SwqMode {
    /// No shared wakequeue.
    Off,
    /// David Vernet's v1: wakeups that stay on their previous CPU.
    Wakeups,
    /// ego-1: only wakeups that found no idle CPU.
    SisFail,
    /// v2/v3: every queued task.
    All,
}

impl SwqMode {
    pub const ALL: [SwqMode; 4] = [Self::Off, Self::Wakeups, Self::SisFail, Self::All];

    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Wakeups => "wakeups",
            Self::SisFail => "sis-fail",
            Self::All => "all",
        }
    }

    /// The value BPF knows it by (enum swq_mode in intf.h).
    pub fn bpf(self) -> u32 {
        use crate::bpf_intf::*;
        match self {
            Self::Off => swq_mode_SWQ_OFF,
            Self::Wakeups => swq_mode_SWQ_WAKEUPS,
            Self::SisFail => swq_mode_SWQ_SIS_FAIL,
            Self::All => swq_mode_SWQ_ALL,
        }
    }

    pub fn from_bpf(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.bpf() == v)
    }
}

/// A switch `tune` can turn either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// The map's name as the kernel lists it (BPF object names are 15 bytes).
const MAP_NAME: &str = "nimble_ctl";

/// The controls as Rust sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctl {
    pub numa_rule: NumaRule,
    pub swq_mode: SwqMode,
    pub swq_affinity: bool,
    pub cgroup_weight: bool,
    pub mem_locality: bool,
}

/// What `scx_nimble tune` may change; None leaves a control as it is.
#[derive(Debug, Default, Clone, Copy)]
pub struct Changes {
    pub numa_rule: Option<NumaRule>,
    pub swq_mode: Option<SwqMode>,
    pub swq_affinity: Option<OnOff>,
    pub cgroup_weight: Option<OnOff>,
    pub mem_locality: Option<OnOff>,
}

impl Ctl {
    fn to_raw(self) -> nimble_ctl {
        nimble_ctl {
            numa_rule: self.numa_rule.bpf(),
            swq_mode: self.swq_mode.bpf(),
            swq_affinity: self.swq_affinity as u32,
            cgroup_weight: self.cgroup_weight as u32,
            mem_locality: self.mem_locality as u32,
        }
    }

    fn from_raw(raw: &nimble_ctl) -> Result<Self> {
        let numa_rule = NumaRule::from_bpf(raw.numa_rule)
            .with_context(|| format!("unknown NUMA rule {} in the map", raw.numa_rule))?;
        let swq_mode = SwqMode::from_bpf(raw.swq_mode)
            .with_context(|| format!("unknown swq mode {} in the map", raw.swq_mode))?;
        let switch = |what: &str, v: u32| match v {
            0 | 1 => Ok(v == 1),
            _ => bail!("{what} {v} in the map (0 or 1)"),
        };
        Ok(Ctl {
            numa_rule,
            swq_mode,
            swq_affinity: switch("swq_affinity", raw.swq_affinity)?,
            cgroup_weight: switch("cgroup_weight", raw.cgroup_weight)?,
            mem_locality: switch("mem_locality", raw.mem_locality)?,
        })
    }

    pub fn apply(mut self, c: Changes) -> Self {
        if let Some(r) = c.numa_rule {
            self.numa_rule = r;
        }
        if let Some(m) = c.swq_mode {
            self.swq_mode = m;
        }
        if let Some(a) = c.swq_affinity {
            self.swq_affinity = a == OnOff::On;
        }
        if let Some(w) = c.cgroup_weight {
            self.cgroup_weight = w == OnOff::On;
        }
        if let Some(m) = c.mem_locality {
            self.mem_locality = m == OnOff::On;
        }
        self
    }

    /// "numa_rule=mainline swq=off swq_affinity=off cgroup_weight=on
    /// mem_locality=on": the form logs and stats lines use.
    pub fn describe(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "numa_rule={} swq={} swq_affinity={} cgroup_weight={} mem_locality={}",
            self.numa_rule.name(),
            self.swq_mode.name(),
            on(self.swq_affinity),
            on(self.cgroup_weight),
            on(self.mem_locality)
        )
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
    match preflight::loaded_scheduler(&preflight::sched_ext_sysfs()) {
        Some(ops) if ops.starts_with("nimble") => {}
        Some(ops) => bail!("the loaded sched_ext scheduler is {ops}, not scx_nimble"),
        None => bail!("scx_nimble is not running (no sched_ext scheduler loaded)"),
    }
    // By identity, not by name alone: the maps scx_nimble's struct_ops
    // programs (nimble_*) use, so another program's map of the same name is
    // never picked. Programs of an instance that just stopped (a restart, a
    // hotplug reload) linger until an RCU grace period ends: wait a second
    // for them before calling it ambiguous.
    let mut ids = vec![];
    for _ in 0..10 {
        ids = ctl_maps_in_use();
        if ids.len() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    match ids[..] {
        [] => bail!("scx_nimble is loaded but no nimble_ctl map is used by its programs"),
        [id] => MapHandle::from_map_id(id).context("opening nimble_ctl"),
        _ => bail!(
            "{} scx_nimble instances hold a nimble_ctl map (ids {ids:?}): cannot tell which one runs",
            ids.len()
        ),
    }
}

/// Ids of the nimble_ctl maps that loaded nimble_* struct_ops programs use.
fn ctl_maps_in_use() -> Vec<u32> {
    let opts = ProgInfoQueryOptions::default().include_map_ids(true);
    let used: BTreeSet<u32> = ProgInfoIter::with_query_opts(opts)
        .filter(|p| {
            p.ty == ProgramType::StructOps && p.name.to_string_lossy().starts_with("nimble_")
        })
        .flat_map(|p| p.map_ids)
        .collect();
    MapInfoIter::default()
        .filter(|m| {
            used.contains(&m.id)
                && m.name.to_str() == Some(MAP_NAME)
                && m.value_size as usize == std::mem::size_of::<nimble_ctl>()
        })
        .map(|m| m.id)
        .collect()
}

/// `scx_nimble tune`: print the controls, changing those given.
pub fn tune(changes: Changes) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("must run as root: changing a loaded BPF scheduler needs CAP_BPF");
    }
    let map = running_map()?;
    let old = read(&map)?;
    let new = old.apply(changes);
    if new != old {
        write(&map, new)?;
        println!("{} (was {})", new.describe(), old.describe());
    } else {
        println!("{}", new.describe());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swq_modes_round_trip_through_bpf_values() {
        for m in SwqMode::ALL {
            assert_eq!(SwqMode::from_bpf(m.bpf()), Some(m));
        }
        assert_eq!(SwqMode::from_bpf(99), None);
    }

    #[test]
    fn changes_touch_only_what_is_given() {
        let ctl = Ctl {
            numa_rule: NumaRule::Mainline,
            swq_mode: SwqMode::Off,
            swq_affinity: false,
            cgroup_weight: true,
            mem_locality: true,
        };
        let c = ctl.apply(Changes {
            swq_mode: Some(SwqMode::SisFail),
            ..Default::default()
        });
        assert_eq!(c.numa_rule, NumaRule::Mainline);
        assert_eq!(
            c.describe(),
            "numa_rule=mainline swq=sis-fail swq_affinity=off cgroup_weight=on mem_locality=on"
        );
        let raw = c.to_raw();
        assert_eq!(Ctl::from_raw(&raw).unwrap(), c);
        let c = c.apply(Changes {
            swq_affinity: Some(OnOff::On),
            ..Default::default()
        });
        assert!(c.swq_affinity);
        let c = c.apply(Changes {
            cgroup_weight: Some(OnOff::Off),
            ..Default::default()
        });
        assert!(!c.cgroup_weight && c.swq_affinity);
        let c = c.apply(Changes {
            mem_locality: Some(OnOff::Off),
            ..Default::default()
        });
        assert!(!c.mem_locality && !c.cgroup_weight);
        assert_eq!(Ctl::from_raw(&c.to_raw()).unwrap(), c);
    }

    #[test]
    fn a_switch_that_is_neither_0_nor_1_is_refused() {
        let mut raw = Ctl {
            numa_rule: NumaRule::Mainline,
            swq_mode: SwqMode::Off,
            swq_affinity: false,
            cgroup_weight: true,
            mem_locality: true,
        }
        .to_raw();
        raw.cgroup_weight = 7;
        let e = Ctl::from_raw(&raw).unwrap_err();
        assert_eq!(e.to_string(), "cgroup_weight 7 in the map (0 or 1)");
    }
}
