//! CPU → NUMA node and CPU → last-level cache, read from sysfs, for the
//! locality metrics of shell8 and numa01/02.

use std::fs;

/// The CPU the calling thread runs on, if the kernel says.
pub(crate) fn cur_cpu() -> Option<u32> {
    // SAFETY: no arguments, no memory.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// Parses a sysfs cpulist such as "0-3,8,10-11".
pub fn parse_cpulist(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a..=b);
        }
    }
    out
}

pub struct Topo {
    node: Vec<Option<u32>>,
    llc: Vec<Option<u32>>,
}

impl Topo {
    pub fn read() -> Topo {
        let mut node: Vec<Option<u32>> = Vec::new();
        let set = |v: &mut Vec<Option<u32>>, cpu: u32, id: u32| {
            let i = cpu as usize;
            if v.len() <= i {
                v.resize(i + 1, None);
            }
            v[i] = Some(id);
        };
        for e in fs::read_dir("/sys/devices/system/node")
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let list = fs::read_to_string(e.path().join("cpulist")).unwrap_or_default();
            for cpu in parse_cpulist(&list) {
                set(&mut node, cpu, id);
            }
        }
        // No NUMA in sysfs (CONFIG_NUMA=n): every possible CPU is on node 0.
        let possible = fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        for cpu in parse_cpulist(&possible) {
            if node.get(cpu as usize).copied().flatten().is_none() {
                set(&mut node, cpu, 0);
            }
        }
        let mut llc = Vec::new();
        for cpu in 0..node.len() as u32 {
            // An LLC is named by its lowest CPU; without cache info (some VMs)
            // it falls back to the node, in a separate id range.
            let id = llc_first_cpu(cpu).or_else(|| node[cpu as usize].map(|n| 1_000_000 + n));
            if let Some(id) = id {
                set(&mut llc, cpu, id);
            }
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

/// Lowest CPU sharing `cpu`'s highest-level cache.
fn llc_first_cpu(cpu: u32) -> Option<u32> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut best: Option<(u32, u32)> = None;
    for e in fs::read_dir(dir).ok()?.flatten() {
        if !e.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let rd = |f: &str| fs::read_to_string(e.path().join(f)).ok();
        let Some(level) = rd("level").and_then(|l| l.trim().parse::<u32>().ok()) else {
            continue;
        };
        let Some(first) = rd("shared_cpu_list").and_then(|l| parse_cpulist(&l).first().copied())
        else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, first));
        }
    }
    best.map(|(_, first)| first)
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
    let mut pages: Vec<*mut libc::c_void> = (0..n)
        .map(|i| (base + i * (len / n)) as *mut libc::c_void)
        .collect();
    let mut status = vec![-1i32; n];
    // SAFETY: pages/status hold n entries; nodes == NULL only queries.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            n as libc::c_ulong,
            pages.as_mut_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if r != 0 {
        return None;
    }
    let mut counts = std::collections::HashMap::new();
    for s in status.into_iter().filter(|&s| s >= 0) {
        *counts.entry(s as u32).or_insert(0u32) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(node, c)| (c, std::cmp::Reverse(node)))
        .map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_and_topo() {
        assert_eq!(parse_cpulist("0-2,5,7-8\n"), [0, 1, 2, 5, 7, 8]);
        assert_eq!(parse_cpulist(""), Vec::<u32>::new());
        let t = Topo::read();
        let cpu = cur_cpu().expect("sched_getcpu");
        assert!(t.node(cpu).is_some() && t.llc(cpu).is_some());
        let buf = vec![1u8; 1 << 20];
        if let Some(n) = mem_node(&buf) {
            assert!(n < 1024);
        }
    }
}
