//! The topology model scx_nimble schedules by: which LLC and NUMA node each
//! CPU belongs to, node distances, and the order in which a CPU consumes the
//! LLC dispatch queues. Pure data and maths, derived from one sysfs read
//! (`sysfs::SysTopo`, live or a snapshot).

pub mod domains;
pub mod imb;
pub mod report;
pub mod rules;
mod steal;
pub mod swq;
pub mod sysfs;
pub mod thresholds;

pub use steal::{node_levels, node_order, steal_order};

use anyhow::{bail, Result};

/// Limits shared with BPF (src/bpf/intf.h).
pub const MAX_CPUS: usize = crate::bpf_intf::nimble_limits_MAX_CPUS as usize;
pub const MAX_LLCS: usize = crate::bpf_intf::nimble_limits_MAX_LLCS as usize;
pub const MAX_NODES: usize = crate::bpf_intf::nimble_limits_MAX_NODES as usize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// One past the highest possible CPU id.
    pub nr_cpu_ids: usize,
    /// LLC of each online CPU (None: offline or absent).
    pub cpu_llc: Vec<Option<usize>>,
    /// Node of each LLC; LLC ids are dense 0..llc_node.len().
    pub llc_node: Vec<usize>,
    /// SLIT distances, `node_distance[a][b]`, indexed by kernel node id
    /// (ids without a node are padded: 10 to itself, 20 to the others).
    pub node_distance: Vec<Vec<usize>>,
    /// Whether any core has more than one hardware thread.
    pub smt: bool,
}

impl Layout {
    pub fn nr_llcs(&self) -> usize {
        self.llc_node.len()
    }

    pub fn nr_nodes(&self) -> usize {
        self.node_distance.len()
    }

    /// Online CPUs of each LLC.
    pub fn llc_cpus(&self, llc: usize) -> Vec<usize> {
        (0..self.nr_cpu_ids)
            .filter(|&c| self.cpu_llc[c] == Some(llc))
            .collect()
    }

    /// Checks what BPF relies on: dense ids within the table sizes, every
    /// LLC populated, a square distance table.
    pub fn validate(&self) -> Result<()> {
        if self.nr_cpu_ids == 0 || self.nr_cpu_ids > MAX_CPUS {
            bail!(
                "{} CPU ids: scx_nimble supports 1..={MAX_CPUS}",
                self.nr_cpu_ids
            );
        }
        if self.cpu_llc.len() != self.nr_cpu_ids {
            bail!(
                "CPU table has {} entries, expected {}",
                self.cpu_llc.len(),
                self.nr_cpu_ids
            );
        }
        if self.nr_llcs() == 0 || self.nr_llcs() > MAX_LLCS {
            bail!(
                "{} LLCs: scx_nimble supports 1..={MAX_LLCS}",
                self.nr_llcs()
            );
        }
        if self.nr_nodes() == 0 || self.nr_nodes() > MAX_NODES {
            bail!(
                "{} NUMA nodes: scx_nimble supports 1..={MAX_NODES}",
                self.nr_nodes()
            );
        }
        for (llc, &node) in self.llc_node.iter().enumerate() {
            if node >= self.nr_nodes() {
                bail!(
                    "LLC {llc} is on node {node}, but there are {} nodes",
                    self.nr_nodes()
                );
            }
            if self.llc_cpus(llc).is_empty() {
                bail!("LLC {llc} has no online CPU");
            }
        }
        if let Some(c) = self
            .cpu_llc
            .iter()
            .flatten()
            .find(|&&l| l >= self.nr_llcs())
        {
            bail!("a CPU names LLC {c}, but there are {} LLCs", self.nr_llcs());
        }
        for (n, row) in self.node_distance.iter().enumerate() {
            if row.len() != self.nr_nodes() {
                bail!(
                    "node {n} has {} distances, expected {}",
                    row.len(),
                    self.nr_nodes()
                );
            }
        }
        Ok(())
    }

    /// The layout from one sysfs read (the same read the thresholds come
    /// from): LLCs (clipped to their node) numbered densely in order of
    /// their lowest CPU, nodes by
    /// their kernel ids, distances from the SLIT (10/20 for a node without
    /// a row, as the kernel assumes).
    pub fn from_sys(sys: &sysfs::SysTopo) -> Result<Self> {
        let mut cpu_llc = vec![None; sys.nr_cpu_ids];
        let mut llcs: Vec<(sysfs::CpuSet, usize)> = vec![];
        for &cpu in &sys.online {
            let info = sys.cpu(cpu);
            // Clipped to the node, as the kernel's MC level is: Intel SNC and
            // QEMU report a package-wide L3 over several nodes.
            let llc: sysfs::CpuSet = info
                .llc
                .iter()
                .copied()
                .filter(|&c| sys.cpu(c).node == info.node)
                .collect();
            let id = match llcs.iter().position(|(set, _)| *set == llc) {
                Some(id) => id,
                None => {
                    llcs.push((llc, info.node));
                    llcs.len() - 1
                }
            };
            cpu_llc[cpu] = Some(id);
        }
        let nr_nodes = sys.nodes.iter().max().map_or(1, |&n| n + 1);
        let mut node_distance = vec![vec![20; nr_nodes]; nr_nodes];
        for (i, &a) in sys.nodes.iter().enumerate() {
            for (j, &b) in sys.nodes.iter().enumerate() {
                node_distance[a][b] = sys.distance[i][j];
            }
        }
        for (n, row) in node_distance.iter_mut().enumerate() {
            row[n] = row[n].min(10);
        }
        let layout = Layout {
            nr_cpu_ids: sys.nr_cpu_ids,
            cpu_llc,
            llc_node: llcs.iter().map(|&(_, node)| node).collect(),
            node_distance,
            smt: sys.online.iter().any(|&c| sys.cpu(c).smt.len() > 1),
        };
        layout.validate()?;
        Ok(layout)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// SLIT of Srikar's 4-node machine (seed 003) and of the `n4` VM: pairs
    /// 0-1 and 2-3 at 20, everything else at 40.
    pub fn srikar4() -> Vec<Vec<usize>> {
        vec![
            vec![10, 20, 40, 40],
            vec![20, 10, 40, 40],
            vec![40, 40, 10, 20],
            vec![40, 40, 20, 10],
        ]
    }

    /// Two nodes at distance `near`.
    pub fn two_nodes(near: usize) -> Vec<Vec<usize>> {
        vec![vec![10, near], vec![near, 10]]
    }

    /// `nodes` nodes of `llcs` LLCs of `cpus` CPUs, numbered in order.
    pub fn grid(nodes: usize, llcs: usize, cpus: usize, distance: Vec<Vec<usize>>) -> Layout {
        let n = nodes * llcs * cpus;
        Layout {
            nr_cpu_ids: n,
            cpu_llc: (0..n).map(|c| Some(c / cpus)).collect(),
            llc_node: (0..nodes * llcs).map(|l| l / llcs).collect(),
            node_distance: distance,
            smt: false,
        }
    }

    #[test]
    fn layout_from_one_sysfs_read() {
        let l = Layout::from_sys(&domains::tests::vm_n2l4()).unwrap();
        assert_eq!(l, grid(2, 2, 2, two_nodes(20)));
        let mut sys = domains::tests::vm_n4();
        sys.nr_cpu_ids = 16;
        let l = Layout::from_sys(&sys).unwrap();
        assert_eq!((l.nr_cpu_ids, l.nr_llcs(), l.nr_nodes()), (16, 4, 4));
        assert_eq!(l.llc_cpus(3), vec![6, 7]);
        assert_eq!(l.node_distance, srikar4());
        // A package-wide L3 over two SNC nodes: one LLC per node.
        let mut snc = domains::tests::vm_n2l4();
        for c in snc.cpus.iter_mut().flatten() {
            c.llc = (0..8).collect();
        }
        let l = Layout::from_sys(&snc).unwrap();
        assert_eq!(l.llc_node, vec![0, 1]);
        assert_eq!(
            (l.llc_cpus(0), l.llc_cpus(1)),
            ((0..4).collect(), (4..8).collect())
        );
    }

    #[test]
    fn grid_is_valid() {
        let l = grid(2, 2, 2, vec![vec![10, 20], vec![20, 10]]);
        l.validate().unwrap();
        assert_eq!(l.llc_cpus(3), vec![6, 7]);
    }

    #[test]
    fn empty_llc_is_rejected() {
        let mut l = grid(1, 2, 2, vec![vec![10]]);
        l.cpu_llc[2] = None;
        l.cpu_llc[3] = None;
        assert!(l
            .validate()
            .unwrap_err()
            .to_string()
            .contains("LLC 1 has no online CPU"));
    }

    #[test]
    fn bad_node_is_rejected() {
        let mut l = grid(1, 2, 2, vec![vec![10]]);
        l.llc_node[1] = 3;
        assert!(l.validate().is_err());
    }

    #[test]
    fn ragged_distance_is_rejected() {
        let l = grid(2, 1, 2, vec![vec![10, 20], vec![20]]);
        assert!(l.validate().is_err());
    }
}
