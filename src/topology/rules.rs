//! The NUMA imbalance rules: when a node may keep more load than another.
//!
//! This is the policy; src/bpf/numa.bpf.h applies it with live counts and
//! follows these functions line for line (BPF cannot call Rust). The
//! thresholds (imb_numa_nr per level) come from `thresholds.rs`.
//!
//! The kernel's terms: at a NUMA level, the *local* group is the child span
//! holding the CPU that decides, the other group is the *idlest* (fork) or
//! *busiest* (runtime) one. `imbalance` is their difference in idle CPUs.

/// Below this difference in idle CPUs an imbalance may be tolerated at all
/// (kernel: NUMA_IMBALANCE_MIN, "a simple pair of communicating tasks").
pub const NUMA_IMBALANCE_MIN: i64 = 2;

/// How much busier per CPU an overloaded group must be than a busy
/// destination before it gives up a task (seed 003: imbalance_pct).
pub const IMBALANCE_PCT: i64 = 112;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NumaRule {
    /// The kernel's adjust_numa_imbalance() (v5.19 on): tolerate a
    /// difference of at most 2 idle CPUs while the destination would run at
    /// most imb_numa_nr tasks.
    Mainline,
    /// Seed 000's v3: tolerate while the busiest group runs fewer than
    /// imb_numa_nr tasks (at fork, regardless of the idle difference).
    V3,
    /// Seed 000's v4/v4.1: tolerate while the busiest group runs at most a
    /// quarter of the level's CPUs and the idle difference is at most
    /// imb_numa_nr.
    V4,
    /// No allowance: nodes are crossed as freely as LLCs (greedy spreading).
    Off,
    /// Seed 000's baseline "tip-core" (v5.16, before imb_numa_nr existed):
    /// tolerate a difference of at most 2 idle CPUs while the busiest group
    /// (at fork: the local group with the child) runs fewer tasks than a
    /// quarter of its CPUs; at fork, regardless of the idle difference.
    Tip,
}

impl NumaRule {
    pub const ALL: [NumaRule; 5] = [Self::Mainline, Self::V3, Self::V4, Self::Off, Self::Tip];

    pub fn name(self) -> &'static str {
        match self {
            Self::Mainline => "mainline",
            Self::V3 => "v3",
            Self::V4 => "v4",
            Self::Off => "off",
            Self::Tip => "tip",
        }
    }

    /// The value BPF knows it by (enum numa_rule in intf.h).
    pub fn bpf(self) -> u32 {
        use crate::bpf_intf::*;
        match self {
            Self::Mainline => numa_rule_NUMA_RULE_MAINLINE,
            Self::V3 => numa_rule_NUMA_RULE_V3,
            Self::V4 => numa_rule_NUMA_RULE_V4,
            Self::Off => numa_rule_NUMA_RULE_OFF,
            Self::Tip => numa_rule_NUMA_RULE_TIP,
        }
    }

    pub fn from_bpf(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.bpf() == v)
    }

    /// Whether the rule tolerates this imbalance, i.e. no task should move
    /// because of it.
    pub fn tolerates(self, v: &View, at_fork: bool) -> bool {
        match self {
            Self::Mainline => v.dst_running <= v.imb_numa_nr && v.imbalance <= NUMA_IMBALANCE_MIN,
            Self::V3 => {
                v.src_running < v.imb_numa_nr && (at_fork || v.imbalance <= NUMA_IMBALANCE_MIN)
            }
            Self::V4 => v.src_running <= v.span_weight / 4 && v.imbalance <= v.imb_numa_nr,
            Self::Off => false,
            Self::Tip => {
                v.src_running < v.group_weight / 4 && (at_fork || v.imbalance <= NUMA_IMBALANCE_MIN)
            }
        }
    }
}

/// What the rule is asked about, at one NUMA level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub imb_numa_nr: i64,
    /// CPUs in the level's span.
    pub span_weight: i64,
    /// Idle CPUs of the destination group minus those of the source group.
    pub imbalance: i64,
    /// Tasks the destination group would run, counting the one that moves.
    pub dst_running: i64,
    /// Tasks the source (busiest) group runs.
    pub src_running: i64,
    /// CPUs of the source group (at fork: of the local group).
    pub group_weight: i64,
}

// fork_moves and pull_allowed are the reference numa_gate.bpf.h mirrors;
// only the unit tests call them from Rust.

/// Fork/exec (kernel: find_idlest_group at an SD_NUMA level): does the child
/// leave the local group for the idlest one? The threshold is clamped to the
/// CPUs of the local group the task may use.
#[cfg_attr(not(test), allow(dead_code))]
#[allow(clippy::too_many_arguments)]
pub fn fork_moves(
    rule: NumaRule,
    imb_numa_nr: i64,
    span_weight: i64,
    local_cpus: i64,
    allowed_local: i64,
    local_idle: i64,
    local_running: i64,
    idlest_idle: i64,
) -> bool {
    if local_idle == 0 {
        // No spare capacity here: any spare capacity elsewhere wins.
        return idlest_idle > 0;
    }
    let v = View {
        imb_numa_nr: imb_numa_nr.min(allowed_local),
        span_weight,
        imbalance: (idlest_idle - local_idle).abs(),
        dst_running: local_running + 1,
        src_running: local_running + 1,
        group_weight: local_cpus,
    };
    !rule.tolerates(&v, true) && idlest_idle > local_idle
}

/// Runtime (kernel: calculate_imbalance with spare capacity): may an idle
/// CPU of the destination group take a task from the source group?
/// An overloaded source (more runnable tasks than CPUs) gets no allowance,
/// as long as it stays at least as busy per CPU as the destination after
/// the move: a destination with spare capacity is filled (a waiting task is
/// not held back while a CPU elsewhere is idle); a full one only takes from
/// a source busier per CPU by IMBALANCE_PCT. (BPF applies the margin to the
/// tick-averaged loads.)
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(test), allow(dead_code))]
pub fn pull_allowed(
    rule: NumaRule,
    imb_numa_nr: i64,
    span_weight: i64,
    dst_idle: i64,
    dst_running: i64,
    dst_cpus: i64,
    src_idle: i64,
    src_running: i64,
    src_cpus: i64,
) -> bool {
    if rule == NumaRule::Off {
        return true;
    }
    if src_running > src_cpus {
        let still_busier = (src_running - 1) * dst_cpus >= (dst_running + 1) * src_cpus;
        let by_margin = src_running * dst_cpus * 100 > dst_running * src_cpus * IMBALANCE_PCT;
        return still_busier && (dst_running < dst_cpus || by_margin);
    }
    let v = View {
        imb_numa_nr,
        span_weight,
        imbalance: dst_idle - src_idle,
        dst_running: dst_running + 1,
        src_running,
        group_weight: src_cpus,
    };
    // The kernel halves the imbalance into tasks to move: one task moves
    // only for a difference of at least two idle CPUs.
    !rule.tolerates(&v, false) && v.imbalance >= 2
}

#[cfg(test)]
mod tests {
    use super::NumaRule::*;
    use super::*;

    // Two nodes of 4 CPUs (the n2l4 VM), mainline imb_numa_nr = 2, span 8.
    fn fork_n2l4(rule: NumaRule, local_running: i64) -> bool {
        let local_idle = 4 - local_running;
        fork_moves(rule, 2, 8, 4, 4, local_idle, local_running, 4)
    }

    #[test]
    fn mainline_keeps_a_pair_local_then_spreads() {
        // Parent alone: its child stays (2 <= 2 running, idle diff 1).
        assert!(!fork_n2l4(Mainline, 1));
        // Parent + child: the third task would make 3 > 2: spread.
        assert!(fork_n2l4(Mainline, 2));
        // Local node full: go where there is room.
        assert!(fork_n2l4(Mainline, 4));
    }

    #[test]
    fn v3_spreads_the_pair_and_off_spreads_at_once() {
        assert!(fork_n2l4(V3, 1), "v3: 2 running is not < 2");
        assert!(
            !fork_moves(V3, 3, 8, 4, 4, 3, 1, 4),
            "v3 with imb 3 keeps it"
        );
        assert!(fork_n2l4(Off, 1), "off: the idler node wins at once");
    }

    #[test]
    fn off_only_moves_to_a_strictly_idler_group() {
        // Equal idle counts: stay (kernel: local idle >= idlest idle).
        assert!(!fork_moves(Off, 2, 8, 4, 4, 4, 0, 4));
        assert!(fork_moves(Off, 2, 8, 4, 4, 3, 1, 4));
    }

    #[test]
    fn v4_uses_a_quarter_of_the_span_and_the_idle_difference() {
        // span 8: tolerate while <= 2 run locally and diff <= imb.
        assert!(!fork_moves(V4, 2, 8, 4, 4, 3, 1, 4));
        assert!(fork_moves(V4, 2, 8, 4, 4, 2, 2, 4));
        assert!(!fork_moves(V4, 8, 32, 16, 16, 12, 4, 16));
    }

    #[test]
    fn the_clamp_to_allowed_cpus_applies() {
        // With one usable local CPU the threshold is 1: the child moves.
        assert!(fork_moves(Mainline, 2, 8, 4, 1, 3, 1, 4));
    }

    #[test]
    fn runtime_pull_tolerates_small_imbalances_only() {
        // Node 0 runs 2 hogs, node 1 idle: diff 2, dst would run 1 <= 2.
        assert!(!pull_allowed(Mainline, 2, 8, 4, 0, 4, 2, 2, 4));
        // 3 hogs: diff 3 > 2: one moves.
        assert!(pull_allowed(Mainline, 2, 8, 4, 0, 4, 1, 3, 4));
        // After 3/1 nothing more moves (diff 1).
        assert!(!pull_allowed(Mainline, 2, 8, 3, 1, 4, 1, 3, 4));
        // Overloaded source, destination with spare capacity: always.
        assert!(pull_allowed(Mainline, 64, 8, 1, 3, 4, 0, 5, 4));
        // Both full: only by the margin and if still busier after the move.
        assert!(pull_allowed(Mainline, 2, 8, 0, 4, 4, 0, 6, 4));
        assert!(!pull_allowed(Mainline, 2, 8, 0, 4, 4, 0, 5, 4));
        // off: always.
        assert!(pull_allowed(Off, 2, 8, 1, 3, 4, 1, 2, 4));
        // v3: the busiest group's count decides.
        assert!(pull_allowed(V3, 2, 8, 4, 0, 4, 2, 2, 4));
        assert!(!pull_allowed(V3, 3, 8, 4, 0, 4, 2, 2, 4));
    }

    #[test]
    fn tip_allows_a_quarter_of_the_group() {
        // 4-CPU nodes: fewer than 1 task: only an idle node keeps its first child.
        assert!(!fork_moves(Tip, 2, 8, 4, 4, 4, 0, 4));
        assert!(fork_moves(Tip, 2, 8, 4, 4, 3, 1, 4));
        // 16-CPU nodes: up to 3 tasks stay, whatever imb_numa_nr says.
        assert!(!fork_moves(Tip, 0, 32, 16, 16, 13, 2, 16));
        assert!(fork_moves(Tip, 99, 32, 16, 16, 12, 3, 16));
        // Runtime: busiest 3 of 16 CPUs, diff 3: the diff is too large.
        assert!(pull_allowed(Tip, 0, 32, 16, 0, 16, 13, 3, 16));
        assert!(!pull_allowed(Tip, 0, 32, 15, 1, 16, 13, 3, 16));
    }

    #[test]
    fn names_round_trip() {
        for r in NumaRule::ALL {
            assert_eq!(NumaRule::from_bpf(r.bpf()), Some(r));
        }
        assert_eq!(NumaRule::from_bpf(99), None);
    }
}
