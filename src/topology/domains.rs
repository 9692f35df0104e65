//! The scheduling-domain hierarchy Linux builds for a CPU on x86, modelled
//! from a `SysTopo`: the full list (what `imb_numa_nr` is computed on) and
//! the pruned list debugfs and /proc/schedstat show.

use super::imb::{self, ImbFormula};
use super::sysfs::{CpuSet, SysTopo};

/// SD_* flags, in the kernel's bit order (include/linux/sched/sd_flags.h).
pub const SD_NAMES: [&str; 14] = [
    "SD_BALANCE_NEWIDLE",
    "SD_BALANCE_EXEC",
    "SD_BALANCE_FORK",
    "SD_BALANCE_WAKE",
    "SD_WAKE_AFFINE",
    "SD_ASYM_CPUCAPACITY",
    "SD_ASYM_CPUCAPACITY_FULL",
    "SD_SHARE_CPUCAPACITY",
    "SD_CLUSTER",
    "SD_SHARE_LLC",
    "SD_SERIALIZE",
    "SD_ASYM_PACKING",
    "SD_PREFER_SIBLING",
    "SD_NUMA",
];
pub const SD_BALANCE_NEWIDLE: u32 = 1 << 0;
pub const SD_BALANCE_EXEC: u32 = 1 << 1;
pub const SD_BALANCE_FORK: u32 = 1 << 2;
pub const SD_WAKE_AFFINE: u32 = 1 << 4;
pub const SD_SHARE_CPUCAPACITY: u32 = 1 << 7;
pub const SD_CLUSTER: u32 = 1 << 8;
pub const SD_SHARE_LLC: u32 = 1 << 9;
pub const SD_SERIALIZE: u32 = 1 << 10;
pub const SD_PREFER_SIBLING: u32 = 1 << 12;
pub const SD_NUMA: u32 = 1 << 13;
/// Every flag but SD_WAKE_AFFINE needs more than one group to mean anything.
const NEEDS_GROUPS: u32 = !SD_WAKE_AFFINE & ((1 << SD_NAMES.len()) - 1);

/// Beyond this SLIT distance, fork/exec/wake-affine stop at the NUMA level
/// (node_reclaim_distance; AMD Zen raises it to 32).
pub const RECLAIM_DISTANCE: usize = 30;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: &'static str,
    pub span: CpuSet,
    pub flags: u32,
    pub imb_numa_nr: usize,
}

impl Domain {
    pub fn flag_names(&self) -> Vec<&'static str> {
        SD_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.flags & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Flags `sd_init()` gives a level with the topology level's own flags.
fn sd_init_flags(tl_flags: u32, numa_distance: Option<usize>, reclaim: usize) -> u32 {
    let mut f = SD_BALANCE_NEWIDLE
        | SD_BALANCE_EXEC
        | SD_BALANCE_FORK
        | SD_WAKE_AFFINE
        | SD_PREFER_SIBLING
        | tl_flags;
    if f & (SD_SHARE_CPUCAPACITY | SD_SHARE_LLC) == 0 && f & SD_NUMA != 0 {
        f &= !SD_PREFER_SIBLING;
        f |= SD_SERIALIZE;
        if numa_distance.is_some_and(|d| d > reclaim) {
            f &= !(SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE);
        }
    }
    f
}

/// Whether a wakeup may be pulled to its waker's CPU across two nodes this
/// far apart: the NUMA level spanning both keeps SD_WAKE_AFFINE, as
/// `sd_init()` leaves it within the reclaim distance.
pub fn wakes_affine_across(distance: usize, reclaim: usize) -> bool {
    sd_init_flags(SD_NUMA, Some(distance), reclaim) & SD_WAKE_AFFINE != 0
}

/// Whether a package holds CPUs of several nodes (AMD NPSx, Intel SNC): then
/// the kernel drops the PKG level everywhere.
pub fn numa_in_package(t: &SysTopo) -> bool {
    t.online.iter().any(|&a| {
        t.online
            .iter()
            .any(|&b| t.cpu(a).package == t.cpu(b).package && t.cpu(a).node != t.cpu(b).node)
    })
}

/// The full, unpruned domain list of `cpu`, bottom-up, with imb_numa_nr.
pub fn full_domains(t: &SysTopo, cpu: usize, formula: ImbFormula, reclaim: usize) -> Vec<Domain> {
    let c = t.cpu(cpu);
    let node_mask = t.node_cpus(c.node);
    let mut levels: Vec<(&'static str, CpuSet, u32)> = vec![(
        "SMT",
        c.smt.clone(),
        sd_init_flags(SD_SHARE_CPUCAPACITY | SD_SHARE_LLC, None, reclaim),
    )];
    if let Some(cls) = &c.cluster {
        levels.push((
            "CLS",
            cls.clone(),
            sd_init_flags(SD_CLUSTER | SD_SHARE_LLC, None, reclaim),
        ));
    }
    // The LLC is clipped to the node (Intel SNC reports a package-wide L3).
    let llc: CpuSet = c.llc.intersection(&node_mask).copied().collect();
    levels.push(("MC", llc, sd_init_flags(SD_SHARE_LLC, None, reclaim)));
    if !numa_in_package(t) {
        levels.push(("PKG", node_mask.clone(), sd_init_flags(0, None, reclaim)));
    }
    // One level per distinct SLIT distance: the local one is NODE, the rest NUMA.
    let row = &t.distance[t.node_index(c.node)];
    let mut dists: Vec<usize> = t.distance.iter().flatten().copied().collect();
    dists.sort();
    dists.dedup();
    for (k, &d) in dists.iter().enumerate() {
        let span: CpuSet = t
            .nodes
            .iter()
            .zip(row)
            .filter(|(_, &nd)| nd <= d)
            .flat_map(|(&n, _)| t.node_cpus(n))
            .collect();
        let (name, tl) = if k == 0 {
            ("NODE", 0)
        } else {
            ("NUMA", SD_NUMA)
        };
        levels.push((name, span, sd_init_flags(tl, Some(d), reclaim)));
    }
    // A level always contains its child (the kernel widens broken spans).
    for i in 1..levels.len() {
        let child = levels[i - 1].1.clone();
        levels[i].1.extend(child);
    }
    let imbs = imb::imb_numa_nr(
        &levels
            .iter()
            .map(|(_, s, f)| imb::Level {
                span: s.len(),
                flags: imb_flags(*f),
            })
            .collect::<Vec<_>>(),
        formula,
    );
    levels
        .into_iter()
        .zip(imbs)
        .map(|((name, span, flags), imb_numa_nr)| Domain {
            name,
            span,
            flags,
            imb_numa_nr,
        })
        .collect()
}

/// The subset of flags `imb` looks at, in its own encoding.
fn imb_flags(f: u32) -> u32 {
    let mut out = 0;
    for (ours, theirs) in [
        (SD_SHARE_CPUCAPACITY, imb::SD_SHARE_CPUCAPACITY),
        (SD_SHARE_LLC, imb::SD_SHARE_LLC),
        (SD_PREFER_SIBLING, imb::SD_PREFER_SIBLING),
        (SD_NUMA, imb::SD_NUMA),
    ] {
        if f & ours != 0 {
            out |= theirs;
        }
    }
    out
}

/// More than one sched group: the child (or, at the bottom, single CPUs)
/// does not cover the whole span.
fn many_groups(d: &Domain, child: Option<&Domain>) -> bool {
    match child {
        Some(c) => c.span != d.span,
        None => d.span.len() > 1,
    }
}

fn degenerate(d: &Domain, child: Option<&Domain>) -> bool {
    if d.span.len() == 1 {
        return true;
    }
    if d.flags & NEEDS_GROUPS != 0 && many_groups(d, child) {
        return false;
    }
    d.flags & SD_WAKE_AFFINE == 0
}

fn parent_degenerate(d: &Domain, parent: &Domain) -> bool {
    if degenerate(parent, Some(d)) {
        return true;
    }
    if d.span != parent.span {
        return false;
    }
    // Same span: the parent has one group, so group flags do not count.
    let pflags = parent.flags & !NEEDS_GROUPS;
    !d.flags & pflags == 0
}

/// The domains as the kernel keeps them (`cpu_attach_domain()`): degenerate
/// parents folded into their child, then a degenerate bottom level dropped.
pub fn attached(full: &[Domain]) -> Vec<Domain> {
    let mut ds: Vec<Domain> = full.to_vec();
    let mut i = 0;
    while i + 1 < ds.len() {
        if parent_degenerate(&ds[i], &ds[i + 1]) {
            let parent = ds.remove(i + 1);
            if parent.flags & SD_PREFER_SIBLING != 0 {
                ds[i].flags |= SD_PREFER_SIBLING;
            }
        } else {
            i += 1;
        }
    }
    if !ds.is_empty() && degenerate(&ds[0], None) {
        ds.remove(0);
    }
    ds
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::topology::sysfs::CpuInfo;
    use crate::topology::tests::{srikar4, two_nodes};

    /// A machine of `nodes` nodes, each `pkgs_per_node` packages (or, when
    /// `nodes_per_pkg` > 1, several nodes per package), `llcs` LLCs per node of
    /// `cores` cores with `smt` threads each.
    pub struct Spec {
        pub nodes: usize,
        pub nodes_per_pkg: usize,
        pub llcs_per_node: usize,
        pub cores_per_llc: usize,
        pub smt: usize,
        pub distance: Vec<Vec<usize>>,
    }

    pub fn machine(s: &Spec) -> SysTopo {
        let per_llc = s.cores_per_llc * s.smt;
        let per_node = per_llc * s.llcs_per_node;
        let n = per_node * s.nodes;
        let mut cpus = vec![];
        for c in 0..n {
            let node = c / per_node;
            let llc0 = c / per_llc * per_llc;
            let core0 = c / s.smt * s.smt;
            cpus.push(Some(CpuInfo {
                node,
                package: node / s.nodes_per_pkg,
                smt: (core0..core0 + s.smt).collect(),
                cluster: Some((core0..core0 + s.smt).collect()),
                llc: (llc0..llc0 + per_llc).collect(),
            }));
        }
        SysTopo {
            nr_cpu_ids: n,
            online: (0..n).collect(),
            cpus,
            nodes: (0..s.nodes).collect(),
            distance: s.distance.clone(),
        }
    }

    /// The VM harness topologies (vm/nimble-vm topos).
    pub fn vm_n2l4() -> SysTopo {
        machine(&Spec {
            nodes: 2,
            nodes_per_pkg: 1,
            llcs_per_node: 2,
            cores_per_llc: 2,
            smt: 1,
            distance: two_nodes(20),
        })
    }

    pub fn vm_n4() -> SysTopo {
        machine(&Spec {
            nodes: 4,
            nodes_per_pkg: 1,
            llcs_per_node: 1,
            cores_per_llc: 2,
            smt: 1,
            distance: srikar4(),
        })
    }

    fn names(ds: &[Domain]) -> Vec<(&str, usize)> {
        ds.iter().map(|d| (d.name, d.span.len())).collect()
    }

    #[test]
    fn vm_n2l4_matches_the_guest() {
        // 2 nodes x 2 LLCs of 2 CPUs, no SMT: the guest shows MC, PKG, NUMA.
        let t = vm_n2l4();
        let full = full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE);
        assert_eq!(
            names(&full),
            vec![
                ("SMT", 1),
                ("CLS", 1),
                ("MC", 2),
                ("PKG", 4),
                ("NODE", 4),
                ("NUMA", 8)
            ]
        );
        let a = attached(&full);
        assert_eq!(names(&a), vec![("MC", 2), ("PKG", 4), ("NUMA", 8)]);
        assert_eq!(
            a[2].flag_names(),
            vec![
                "SD_BALANCE_NEWIDLE",
                "SD_BALANCE_EXEC",
                "SD_BALANCE_FORK",
                "SD_WAKE_AFFINE",
                "SD_SERIALIZE",
                "SD_NUMA"
            ]
        );
        assert_eq!(
            a.iter().map(|d| d.imb_numa_nr).collect::<Vec<_>>(),
            vec![0, 2, 2]
        );
    }

    #[test]
    fn vm_n4_far_level_loses_fork_balancing() {
        let t = vm_n4();
        let a = attached(&full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE));
        assert_eq!(names(&a), vec![("MC", 2), ("NUMA", 4), ("NUMA", 8)]);
        assert_eq!(
            a[2].flag_names(),
            vec!["SD_BALANCE_NEWIDLE", "SD_SERIALIZE", "SD_NUMA"]
        );
    }

    #[test]
    fn vm_smt_keeps_smt_and_mc() {
        let t = machine(&Spec {
            nodes: 2,
            nodes_per_pkg: 1,
            llcs_per_node: 1,
            cores_per_llc: 2,
            smt: 2,
            distance: two_nodes(20),
        });
        let a = attached(&full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE));
        assert_eq!(names(&a), vec![("SMT", 2), ("MC", 4), ("NUMA", 8)]);
        assert!(a[0].flag_names().contains(&"SD_SHARE_CPUCAPACITY"));
    }

    #[test]
    fn vm_flat_is_one_mc_level() {
        let t = machine(&Spec {
            nodes: 1,
            nodes_per_pkg: 1,
            llcs_per_node: 1,
            cores_per_llc: 4,
            smt: 1,
            distance: vec![vec![10]],
        });
        let a = attached(&full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE));
        assert_eq!(names(&a), vec![("MC", 4)]);
    }

    #[test]
    fn zen3_nps_settings_match_the_seed() {
        // 2 sockets x 64C/128T, LLC = 8 cores (16 threads), NPS1/2/4.
        let cases = [
            (1, vec![8], vec![2]),
            (2, vec![4, 8], vec![2, 4]),
            (4, vec![2, 4], vec![2, 4]),
        ];
        for (nps, mainline, v4) in cases {
            let nodes = 2 * nps;
            let d: Vec<Vec<usize>> = (0..nodes)
                .map(|a| {
                    (0..nodes)
                        .map(|b| {
                            if a == b {
                                10
                            } else if a / nps == b / nps {
                                12
                            } else {
                                32
                            }
                        })
                        .collect()
                })
                .collect();
            let t = machine(&Spec {
                nodes,
                nodes_per_pkg: nps,
                llcs_per_node: 8 / nps,
                cores_per_llc: 8,
                smt: 2,
                distance: d,
            });
            let numa = |f| -> Vec<usize> {
                full_domains(&t, 0, f, 32)
                    .iter()
                    .filter(|d| d.flags & SD_NUMA != 0)
                    .map(|d| d.imb_numa_nr)
                    .collect()
            };
            assert_eq!(numa(ImbFormula::Mainline), mainline, "NPS{nps} mainline");
            assert_eq!(numa(ImbFormula::V4), v4, "NPS{nps} v4");
            let pkg = full_domains(&t, 0, ImbFormula::Mainline, 32)
                .iter()
                .any(|d| d.name == "PKG");
            assert_eq!(
                pkg,
                nps == 1,
                "PKG is dropped when a package holds several nodes"
            );
        }
    }

    fn attached_names(t: &SysTopo, cpu: usize) -> Vec<(&'static str, usize)> {
        attached(&full_domains(
            t,
            cpu,
            ImbFormula::Mainline,
            RECLAIM_DISTANCE,
        ))
        .iter()
        .map(|d| (d.name, d.span.len()))
        .collect()
    }

    #[test]
    fn intel_snc2_clips_the_llc_to_the_node_and_drops_pkg() {
        // 2 sockets x 2 SNC nodes x 16 cores x 2 threads; L3 reported package-wide.
        let d: Vec<Vec<usize>> = (0..4)
            .map(|a| {
                (0..4)
                    .map(|b| {
                        if a == b {
                            10
                        } else if a / 2 == b / 2 {
                            11
                        } else {
                            21
                        }
                    })
                    .collect()
            })
            .collect();
        let mut t = machine(&Spec {
            nodes: 4,
            nodes_per_pkg: 2,
            llcs_per_node: 1,
            cores_per_llc: 16,
            smt: 2,
            distance: d,
        });
        for c in t.cpus.iter_mut().flatten() {
            let pkg0 = c.package * 64;
            c.llc = (pkg0..pkg0 + 64).collect();
        }
        assert!(numa_in_package(&t));
        let full = full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE);
        assert!(full.iter().all(|d| d.name != "PKG"));
        assert_eq!(
            attached_names(&t, 0),
            vec![("SMT", 2), ("MC", 32), ("NUMA", 64), ("NUMA", 128)]
        );
        // One LLC per node: 32 >> 3 = 4 at NODE, then x1 and x2 over the 64-CPU NUMA span.
        let numa: Vec<usize> = full
            .iter()
            .filter(|d| d.flags & SD_NUMA != 0)
            .map(|d| d.imb_numa_nr)
            .collect();
        assert_eq!(numa, vec![4, 8]);
    }

    #[test]
    fn eight_nodes_in_a_ring_of_distances() {
        // 8 nodes of 4 CPUs: distance grows with ring distance (10/16/22/28/40).
        let d: Vec<Vec<usize>> = (0..8usize)
            .map(|a| {
                (0..8usize)
                    .map(|b| {
                        let r = a.abs_diff(b).min(8 - a.abs_diff(b));
                        10 + 6 * r + if r == 4 { 6 } else { 0 }
                    })
                    .collect()
            })
            .collect();
        let t = machine(&Spec {
            nodes: 8,
            nodes_per_pkg: 1,
            llcs_per_node: 1,
            cores_per_llc: 4,
            smt: 1,
            distance: d,
        });
        let a = attached(&full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE));
        assert_eq!(
            names(&a),
            vec![
                ("MC", 4),
                ("NUMA", 12),
                ("NUMA", 20),
                ("NUMA", 28),
                ("NUMA", 32)
            ]
        );
        // Beyond the reclaim distance (30: the 40 level) fork balancing stops.
        let fork: Vec<bool> = a.iter().map(|d| d.flags & SD_BALANCE_FORK != 0).collect();
        assert_eq!(fork, vec![true, true, true, true, false]);
        let imb: Vec<usize> = a.iter().map(|d| d.imb_numa_nr).collect();
        assert_eq!(imb, vec![0, 1, 1, 2, 2]); // 4 >> 3 -> 1; spans 12, 20, 28, 32 over 12
    }

    #[test]
    fn offline_cpus_leave_the_spans() {
        let mut t = vm_n2l4();
        // CPU 1 offline: LLC 0 keeps only CPU 0, so MC degenerates for CPU 0.
        t.online.remove(&1);
        t.cpus[1] = None;
        for c in t.cpus.iter_mut().flatten() {
            c.llc.remove(&1);
            c.smt.remove(&1);
            c.cluster.as_mut().map(|s| s.remove(&1));
        }
        assert_eq!(attached_names(&t, 0), vec![("PKG", 3), ("NUMA", 7)]);
        assert_eq!(
            attached_names(&t, 2),
            vec![("MC", 2), ("PKG", 3), ("NUMA", 7)]
        );
    }

    #[test]
    fn asymmetric_nodes_get_their_own_thresholds() {
        // Node 0: 2 LLCs of 4; node 1: 1 LLC of 4 (node 1's second LLC offline).
        let mut t = machine(&Spec {
            nodes: 2,
            nodes_per_pkg: 1,
            llcs_per_node: 2,
            cores_per_llc: 4,
            smt: 1,
            distance: two_nodes(20),
        });
        for c in 12..16 {
            t.online.remove(&c);
            t.cpus[c] = None;
        }
        let numa = |cpu| -> usize {
            full_domains(&t, cpu, ImbFormula::Mainline, RECLAIM_DISTANCE)
                .iter()
                .find(|d| d.name == "NUMA")
                .unwrap()
                .imb_numa_nr
        };
        assert_eq!(numa(0), 2); // two LLCs in the node
        assert_eq!(numa(8), 1); // one 4-CPU LLC: 4 >> 3 -> floor 1
    }

    #[test]
    fn llc_equals_node_single_socket() {
        let t = machine(&Spec {
            nodes: 1,
            nodes_per_pkg: 1,
            llcs_per_node: 1,
            cores_per_llc: 8,
            smt: 2,
            distance: vec![vec![10]],
        });
        assert_eq!(attached_names(&t, 0), vec![("SMT", 2), ("MC", 16)]);
        assert!(full_domains(&t, 0, ImbFormula::Mainline, RECLAIM_DISTANCE)
            .iter()
            .all(|d| d.imb_numa_nr <= 2));
    }

    #[test]
    fn wake_affine_stops_beyond_the_reclaim_distance() {
        assert!(wakes_affine_across(20, RECLAIM_DISTANCE));
        assert!(wakes_affine_across(30, RECLAIM_DISTANCE));
        assert!(!wakes_affine_across(40, RECLAIM_DISTANCE));
        // AMD Zen's raised reclaim distance keeps 32 affine.
        assert!(wakes_affine_across(32, 32));
    }
}
