//! The NUMA imbalance thresholds the scheduler runs with: per node, the
//! imb_numa_nr of each SD_NUMA level, from the domain model, with overrides.

use super::domains::{self, SD_NUMA};
use super::imb::ImbFormula;
use super::sysfs::SysTopo;
use anyhow::{bail, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumaLevel {
    pub distance: usize,
    pub span_weight: usize,
    pub imb_numa_nr: usize,
}

/// `(node, levels)` for every node, nearest remote tier first.
pub type Thresholds = Vec<(usize, Vec<NumaLevel>)>;

/// The thresholds of every node, as the kernel computes them.
pub fn numa_thresholds(t: &SysTopo, formula: ImbFormula) -> Thresholds {
    let mut dists: Vec<usize> = t.distance.iter().flatten().copied().collect();
    dists.sort();
    dists.dedup();
    t.nodes
        .iter()
        .filter_map(|&node| {
            let cpu = *t.node_cpus(node).first()?;
            let full = domains::full_domains(t, cpu, formula, domains::RECLAIM_DISTANCE);
            // The full list has one level per distinct distance; the SD_NUMA
            // ones are all but the first (local) of them, in order.
            let levels = full
                .iter()
                .filter(|d| d.flags & SD_NUMA != 0)
                .zip(dists.iter().skip(1))
                .map(|(d, &distance)| NumaLevel {
                    distance,
                    span_weight: d.span.len(),
                    imb_numa_nr: d.imb_numa_nr,
                })
                .collect();
            Some((node, levels))
        })
        .collect()
}

/// The NUMA level between two nodes, as the gate in BPF looks it up in one
/// step: `table[a][b]` is `Some((level, within))` with `level` the index of
/// the first of a's levels whose distance reaches b, and `within` the
/// distance its groups (the child spans) reach; None for a itself or when
/// no level spans b. `distance` is indexed by node id, as `th`'s nodes are.
pub fn gate_levels(th: &Thresholds, distance: &[Vec<usize>]) -> Vec<Vec<Option<(usize, usize)>>> {
    let n = distance.len();
    let mut table = vec![vec![None; n]; n];
    for (a, levels) in th {
        for b in (0..n).filter(|&b| b != *a) {
            let d = distance[*a][b];
            let mut within = distance[*a][*a];
            for (i, l) in levels.iter().enumerate() {
                if l.distance >= d {
                    table[*a][b] = Some((i, within));
                    break;
                }
                within = l.distance;
            }
        }
    }
    table
}

/// A `--imb-numa-nr LEVEL=VALUE` override: LEVEL counts SD_NUMA levels from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    pub level: usize,
    pub value: usize,
}

pub fn parse_override(s: &str) -> std::result::Result<Override, String> {
    let (l, v) = s.split_once('=').ok_or("expected LEVEL=VALUE, e.g. 1=4")?;
    let level: usize = l.trim().parse().map_err(|_| format!("bad LEVEL '{l}'"))?;
    let value: usize = v.trim().parse().map_err(|_| format!("bad VALUE '{v}'"))?;
    if level == 0 {
        return Err("LEVEL counts NUMA levels from 1".into());
    }
    if value > 1 << 20 {
        return Err(format!("VALUE {value} is out of range"));
    }
    Ok(Override { level, value })
}

/// Applies overrides to every node; a level no node has is an error.
pub fn apply_overrides(th: &mut [(usize, Vec<NumaLevel>)], ovr: &[Override]) -> Result<()> {
    let max = th.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for o in ovr {
        if o.level > max {
            bail!(
                "--imb-numa-nr {}={}: this machine has {max} NUMA level(s)",
                o.level,
                o.value
            );
        }
        for (_, levels) in th.iter_mut() {
            if let Some(l) = levels.get_mut(o.level - 1) {
                l.imb_numa_nr = o.value;
            }
        }
    }
    Ok(())
}

/// One line for the startup log.
pub fn summary(th: &[(usize, Vec<NumaLevel>)]) -> String {
    if th.iter().all(|(_, l)| l.is_empty()) {
        return "no NUMA levels (single node)".into();
    }
    th.iter()
        .map(|(node, levels)| {
            let l: Vec<String> = levels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    format!(
                        "NUMA{}(d{},{} CPUs)={}",
                        i + 1,
                        l.distance,
                        l.span_weight,
                        l.imb_numa_nr
                    )
                })
                .collect();
            format!("node{node}: {}", l.join(" "))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::domains::tests::vm_n4;

    #[test]
    fn gate_finds_the_first_level_that_spans_the_other_node() {
        let sys = vm_n4();
        let th = numa_thresholds(&sys, ImbFormula::Mainline);
        let t = gate_levels(&th, &sys.distance);
        // Srikar's SLIT: 0-1 at 20 (level 0, groups are single nodes), 0-2
        // at 40 (level 1, groups are the pairs within 20).
        assert_eq!(t[0][1], Some((0, 10)));
        assert_eq!(t[0][2], Some((1, 20)));
        assert_eq!(t[3][0], Some((1, 20)));
        assert_eq!(t[2][3], Some((0, 10)));
        assert_eq!(t[1][1], None);
    }

    #[test]
    fn per_node_levels_with_distances() {
        let th = numa_thresholds(&vm_n4(), ImbFormula::Mainline);
        assert_eq!(th.len(), 4);
        // 2-CPU nodes, one LLC: 2 >> 3 = 0 -> 1; span 4 then 8 over ref span 4.
        assert_eq!(
            th[0].1,
            vec![
                NumaLevel {
                    distance: 20,
                    span_weight: 4,
                    imb_numa_nr: 1
                },
                NumaLevel {
                    distance: 40,
                    span_weight: 8,
                    imb_numa_nr: 2
                }
            ]
        );
        assert!(summary(&th).starts_with("node0: NUMA1(d20,4 CPUs)=1 NUMA2(d40,8 CPUs)=2 | node1:"));
    }

    #[test]
    fn overrides() {
        let mut th = numa_thresholds(&vm_n4(), ImbFormula::V4);
        apply_overrides(&mut th, &[parse_override("2=7").unwrap()]).unwrap();
        assert!(th.iter().all(|(_, l)| l[1].imb_numa_nr == 7));
        assert!(apply_overrides(&mut th, &[parse_override("3=1").unwrap()]).is_err());
        assert!(parse_override("0=1").is_err());
        assert!(parse_override("x").is_err());
        assert!(parse_override("1=-2").is_err());
    }
}
