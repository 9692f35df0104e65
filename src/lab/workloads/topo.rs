//! CPU → NUMA node and CPU → last-level cache (the library's sysfs reader), for the
//! locality metrics of shell8 and numa01/02.

use scx_nimble::memloc::migrate::page_nodes;
use scx_nimble::topology::sysfs::SysTopo;
use std::path::Path;

/// The CPU the calling thread runs on, if the kernel says.
pub(crate) fn cur_cpu() -> Option<u32> {
    // SAFETY: no arguments, no memory.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

pub struct Topo {
    node: Vec<Option<u32>>,
    llc: Vec<Option<u32>>,
}

impl Topo {
    /// The running machine, read by the library's sysfs reader (the one the
    /// scheduler uses); a machine it cannot read gives no locality metrics.
    pub fn read() -> Topo {
        let sys = match SysTopo::read(Path::new("/sys")) {
            Ok(sys) => sys,
            Err(e) => {
                eprintln!("nimble-lab: no locality metrics: {e:#}");
                return Topo {
                    node: vec![],
                    llc: vec![],
                };
            }
        };
        let mut node = vec![None; sys.nr_cpu_ids];
        let mut llc = vec![None; sys.nr_cpu_ids];
        for &cpu in &sys.online {
            let info = sys.cpu(cpu);
            node[cpu] = Some(info.node as u32);
            // An LLC is named by its lowest CPU.
            llc[cpu] = info.llc.first().map(|&c| c as u32);
        }
        Topo { node, llc }
    }

    pub fn node(&self, cpu: u32) -> Option<u32> {
        self.node.get(cpu as usize).copied().flatten()
    }

    pub fn llc(&self, cpu: u32) -> Option<u32> {
        self.llc.get(cpu as usize).copied().flatten()
    }
}

/// The node most of `buf`'s pages are on (up to 64 pages probed with
/// move_pages), or None where the kernel cannot say (no NUMA support).
pub fn mem_node<T>(buf: &[T]) -> Option<u32> {
    const PAGE: usize = 4096;
    let (base, len) = (buf.as_ptr() as usize, std::mem::size_of_val(buf));
    if len == 0 {
        return None;
    }
    let n = len.div_ceil(PAGE).min(64);
    let pages: Vec<u64> = (0..n).map(|i| (base + i * (len / n)) as u64).collect();
    let mut status = vec![-1i32; n];
    page_nodes(0, &pages, &mut status).ok()?;
    let mut counts = std::collections::HashMap::new();
    for s in status.into_iter().filter(|&s| s >= 0) {
        *counts.entry(s as u32).or_insert(0u32) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(node, c)| (c, std::cmp::Reverse(node)))
        .map(|(n, _)| n)
}

/// The node the page holding `addr` is on now, or None if the kernel
/// cannot say.
pub fn page_node(addr: usize) -> Option<u32> {
    let mut status = [-1i32];
    page_nodes(0, &[(addr & !4095) as u64], &mut status).ok()?;
    (status[0] >= 0).then_some(status[0] as u32)
}

/// Pages the kernel migrated since boot (`/proc/vmstat` pgmigrate_success:
/// NUMA balancing's and move_pages' alike), 0 if it cannot be read.
pub fn pages_migrated() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("pgmigrate_success ")?.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topo_of_this_machine() {
        let t = Topo::read();
        let cpu = cur_cpu().expect("sched_getcpu");
        assert!(t.node(cpu).is_some() && t.llc(cpu).is_some());
        let buf = vec![1u8; 1 << 20];
        if let Some(n) = mem_node(&buf) {
            assert!(n < 1024);
        }
    }
}
