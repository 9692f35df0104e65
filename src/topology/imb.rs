//! `imb_numa_nr`: how many running tasks a NUMA domain tolerates being
//! imbalanced before the balancer spreads them, computed per domain level
//! the way `build_sched_domains()` does, with the three historical formulas.
//!
//! Works on one CPU's full domain list, bottom-up and before degenerate levels
//! are removed (the kernel computes it before `cpu_attach_domain()` prunes).

// The kernel's SD_* flags that matter here (names as debugfs prints them).
pub const SD_SHARE_CPUCAPACITY: u32 = 1 << 0;
pub const SD_SHARE_LLC: u32 = 1 << 1;
pub const SD_PREFER_SIBLING: u32 = 1 << 2;
pub const SD_NUMA: u32 = 1 << 3;

/// Which kernel's formula to compute the LLC parent's allowance with (also
/// the values of `--imb-formula`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImbFormula {
    /// v6.0 onwards: one task per LLC, or 1/8 of a single-LLC node, at least 1.
    Mainline,
    /// v5.18, the first merged version: 1/4 of a single-LLC node, no floor.
    #[value(name = "v5.18")]
    V5_18,
    /// The seed's v4/v4.1 (LKML, Dec 2021): max(2, llc^2 / span / 4), and the
    /// reference span from the highest prefer-sibling ancestor's parent.
    V4,
}

/// One level of a CPU's domain hierarchy: its span weight and SD flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub span: usize,
    pub flags: u32,
}

/// `imb_numa_nr` of every level of `levels` (bottom-up), in order.
pub fn imb_numa_nr(levels: &[Level], formula: ImbFormula) -> Vec<usize> {
    let mut out = vec![0; levels.len()];
    let (mut imb, mut imb_span) = (0usize, 1usize);
    for (i, sd) in levels.iter().enumerate() {
        let llc_parent =
            i > 0 && sd.flags & SD_SHARE_LLC == 0 && levels[i - 1].flags & SD_SHARE_LLC != 0;
        if llc_parent {
            imb = llc_parent_imb(sd.span, levels[i - 1].span, formula);
            out[i] = imb;
            imb_span = reference_span(levels, i, formula);
        } else {
            out[i] = imb * (sd.span / imb_span).max(1);
        }
    }
    out
}

/// The allowance at the first level above the LLC, from its span and the LLC's.
fn llc_parent_imb(span: usize, llc_span: usize, formula: ImbFormula) -> usize {
    let nr_llcs = span / llc_span;
    match formula {
        ImbFormula::Mainline if nr_llcs == 1 => (span >> 3).max(1),
        ImbFormula::Mainline => nr_llcs.max(1),
        ImbFormula::V5_18 if nr_llcs == 1 => span >> 2,
        ImbFormula::V5_18 => nr_llcs,
        ImbFormula::V4 => ((llc_span * llc_span / span) >> 2).max(2),
    }
}

/// The span that higher levels scale the allowance by.
fn reference_span(levels: &[Level], llc_parent: usize, formula: ImbFormula) -> usize {
    let own = levels[llc_parent].span;
    match formula {
        // The first SD_NUMA level above.
        ImbFormula::Mainline | ImbFormula::V5_18 => levels[llc_parent + 1..]
            .iter()
            .find(|l| l.flags & SD_NUMA != 0)
            .map_or(own, |l| l.span),
        // Climb while the parent prefers siblings; take that parent's parent.
        ImbFormula::V4 => {
            let mut top = llc_parent;
            while top + 1 < levels.len() && levels[top + 1].flags & SD_PREFER_SIBLING != 0 {
                top += 1;
            }
            levels.get(top + 1).map_or(own, |l| l.span)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ImbFormula::*;

    const SMT: u32 = SD_SHARE_CPUCAPACITY | SD_SHARE_LLC | SD_PREFER_SIBLING;
    const MC: u32 = SD_SHARE_LLC | SD_PREFER_SIBLING;
    const PKG: u32 = SD_PREFER_SIBLING;
    const NODE: u32 = SD_PREFER_SIBLING;

    fn lv(spec: &[(usize, u32)]) -> Vec<Level> {
        spec.iter()
            .map(|&(span, flags)| Level { span, flags })
            .collect()
    }

    /// 2-socket Zen3, 64C/128T per socket, LLC = 16 threads (seed 000), full
    /// lists as build_sched_domains() sees them.
    fn zen3(nps: usize) -> Vec<Level> {
        match nps {
            1 => lv(&[(2, SMT), (16, MC), (128, PKG), (128, NODE), (256, SD_NUMA)]),
            // With several nodes per package, PKG is dropped.
            2 => lv(&[
                (2, SMT),
                (16, MC),
                (64, NODE),
                (128, SD_NUMA),
                (256, SD_NUMA),
            ]),
            4 => lv(&[
                (2, SMT),
                (16, MC),
                (32, NODE),
                (128, SD_NUMA),
                (256, SD_NUMA),
            ]),
            _ => unreachable!(),
        }
    }

    /// The values of the SD_NUMA levels.
    fn numa_values(levels: &[Level], f: ImbFormula) -> Vec<usize> {
        let v = imb_numa_nr(levels, f);
        levels
            .iter()
            .zip(v)
            .filter(|(l, _)| l.flags & SD_NUMA != 0)
            .map(|(_, x)| x)
            .collect()
    }

    #[test]
    fn seed_v4_zen3_values() {
        assert_eq!(numa_values(&zen3(1), V4), vec![2]);
        assert_eq!(numa_values(&zen3(2), V4), vec![2, 4]);
        assert_eq!(numa_values(&zen3(4), V4), vec![2, 4]);
    }

    #[test]
    fn mainline_zen3_values() {
        assert_eq!(numa_values(&zen3(1), Mainline), vec![8]);
        assert_eq!(numa_values(&zen3(2), Mainline), vec![4, 8]);
        assert_eq!(numa_values(&zen3(4), Mainline), vec![2, 4]);
    }

    #[test]
    fn levels_at_or_below_the_llc_get_zero() {
        for f in [Mainline, V5_18, V4] {
            let v = imb_numa_nr(&zen3(2), f);
            assert_eq!(&v[..2], &[0, 0], "{f:?}");
        }
    }

    #[test]
    fn single_llc_node_uses_a_fraction_of_the_node() {
        // 2 nodes of 32 CPUs, one LLC each (LLC = node).
        let l = lv(&[(2, SMT), (32, MC), (32, PKG), (32, NODE), (64, SD_NUMA)]);
        assert_eq!(imb_numa_nr(&l, Mainline), vec![0, 0, 4, 4, 4]); // 32 >> 3
        assert_eq!(imb_numa_nr(&l, V5_18), vec![0, 0, 8, 8, 8]); // 32 >> 2
        assert_eq!(imb_numa_nr(&l, V4), vec![0, 0, 8, 8, 8]); // 32^2/32 >> 2
    }

    #[test]
    fn tiny_node_floors_differ_by_formula() {
        // 4 CPUs per node, one LLC: 4 >> 3 = 0 -> 1 on mainline, 1 on v5.18.
        let l = lv(&[(4, MC), (4, PKG), (4, NODE), (8, SD_NUMA)]);
        assert_eq!(imb_numa_nr(&l, Mainline)[3], 1);
        assert_eq!(imb_numa_nr(&l, V5_18)[3], 1);
        assert_eq!(imb_numa_nr(&l, V4)[3], 2);
        // 2 CPUs per node: v5.18 has no floor and allows nothing.
        let l = lv(&[(2, MC), (2, PKG), (2, NODE), (4, SD_NUMA)]);
        assert_eq!(imb_numa_nr(&l, Mainline)[3], 1);
        assert_eq!(imb_numa_nr(&l, V5_18)[3], 0);
    }

    #[test]
    fn four_nodes_scale_by_span() {
        // Srikar's 4 nodes x 24 CPUs, distances 10/20/40, one LLC per node.
        let l = lv(&[
            (2, SMT),
            (24, MC),
            (24, PKG),
            (24, NODE),
            (48, SD_NUMA),
            (96, SD_NUMA),
        ]);
        // mainline: 24 >> 3 = 3 at the LLC parent; reference span 48.
        assert_eq!(imb_numa_nr(&l, Mainline), vec![0, 0, 3, 3, 3, 6]);
    }

    #[test]
    fn no_numa_level_uses_own_span() {
        let l = lv(&[(2, SMT), (8, MC), (32, PKG)]);
        assert_eq!(imb_numa_nr(&l, Mainline), vec![0, 0, 4]);
        assert_eq!(imb_numa_nr(&l, V4), vec![0, 0, 2]);
    }

    #[test]
    fn no_level_above_the_llc() {
        let l = lv(&[(2, SMT), (8, MC)]);
        assert_eq!(imb_numa_nr(&l, Mainline), vec![0, 0]);
    }
}
