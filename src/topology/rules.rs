//! The NUMA imbalance rules: when a node may keep more load than another.
//!
//! The decisions are the C functions of src/bpf/rules.h, which BPF runs
//! (numa_gate.bpf.h); build.rs compiles the same file for the host and this
//! module calls it, so the tests below check the code that runs. The
//! thresholds (imb_numa_nr per level) come from `thresholds.rs`.
//!
//! The kernel's terms: at a NUMA level, the *local* group is the child span
//! holding the CPU that decides, the other group is the *idlest* (fork) or
//! *busiest* (runtime) one. `imbalance` is their difference in idle CPUs.

use crate::bpf_intf::{self, node_group, NODE_LOAD_SHIFT};

pub use bpf_intf::node_group as NodeGroup;

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
}

mod ffi {
    use crate::bpf_intf::node_group;

    // src/bpf/rules_host.c: rules.h with external linkage.
    extern "C" {
        pub fn numa_tolerates(
            rule: u32,
            imb: i32,
            span: i32,
            weight: i32,
            imbalance: i32,
            dst_running: i32,
            src_running: i32,
            at_fork: bool,
        ) -> bool;
        pub fn numa_fork_moves(
            rule: u32,
            imb: i32,
            span: i32,
            local: *const node_group,
            idlest_idle: i32,
        ) -> bool;
        pub fn numa_fork_stays_preferred(local: *const node_group) -> bool;
        pub fn numa_pull_verdict(
            rule: u32,
            imb: i32,
            span: i32,
            d: *const node_group,
            g: *const node_group,
            overload_ok: bool,
            overloaded_long: bool,
        ) -> u32;
        pub fn numa_mem_moves(
            rule: u32,
            imb: i32,
            d: *const node_group,
            g: *const node_group,
            counted: bool,
        ) -> bool;
        pub fn wait_hist_bucket(ns: u64) -> u32;
        pub fn numa_swap_fits(a: i64, na: i64, b: i64, nb: i64, wt: i64, wu: i64) -> bool;
    }
}

/// What the runtime rule lets another node take (enum numa_verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing: the rule keeps the load where it is.
    Keep,
    /// Tasks that have waited `--numa-patience-us`.
    GoCold,
    /// Any task (overloaded that long, or the rule is off).
    GoAny,
}

impl NodeGroup {
    /// A group in steady state: its load average equals its runnable count.
    pub fn steady(idle: i32, run: i32, cpus: i32) -> Self {
        node_group {
            idle,
            run,
            cpus,
            allowed: cpus,
            load: (run as i64) << NODE_LOAD_SHIFT,
        }
    }
}

/// rules.h numa_tolerates(): whether the rule tolerates the imbalance.
#[allow(clippy::too_many_arguments)]
pub fn tolerates(
    rule: NumaRule,
    imb_numa_nr: i32,
    span_weight: i32,
    group_weight: i32,
    imbalance: i32,
    dst_running: i32,
    src_running: i32,
    at_fork: bool,
) -> bool {
    // SAFETY: a pure C function of plain values.
    unsafe {
        ffi::numa_tolerates(
            rule.bpf(),
            imb_numa_nr,
            span_weight,
            group_weight,
            imbalance,
            dst_running,
            src_running,
            at_fork,
        )
    }
}

/// rules.h numa_fork_moves(): does a forked child leave `local` for the
/// idlest other group, which has `idlest_idle` idle CPUs?
pub fn fork_moves(
    rule: NumaRule,
    imb_numa_nr: i32,
    span_weight: i32,
    local: &NodeGroup,
    idlest_idle: i32,
) -> bool {
    // SAFETY: `local` is a valid node_group for the call's duration.
    unsafe { ffi::numa_fork_moves(rule.bpf(), imb_numa_nr, span_weight, local, idlest_idle) }
}

/// rules.h numa_fork_stays_preferred(): does a forked child whose
/// preferred node is `local` stay there (it has room)?
pub fn fork_stays_preferred(local: &NodeGroup) -> bool {
    // SAFETY: `local` is a valid node_group for the call's duration.
    unsafe { ffi::numa_fork_stays_preferred(local) }
}

/// rules.h numa_pull_verdict(): may a CPU of group `dst` take a task from
/// group `src`?
pub fn pull_verdict(
    rule: NumaRule,
    imb_numa_nr: i32,
    span_weight: i32,
    dst: &NodeGroup,
    src: &NodeGroup,
    overload_ok: bool,
    overloaded_long: bool,
) -> Verdict {
    // SAFETY: both groups are valid for the call's duration.
    let v = unsafe {
        ffi::numa_pull_verdict(
            rule.bpf(),
            imb_numa_nr,
            span_weight,
            dst,
            src,
            overload_ok,
            overloaded_long,
        )
    };
    match v {
        bpf_intf::numa_verdict_NUMA_KEEP => Verdict::Keep,
        bpf_intf::numa_verdict_NUMA_GO_COLD => Verdict::GoCold,
        _ => Verdict::GoAny,
    }
}

/// rules.h numa_mem_moves(): may a task go to group `dst`, which holds most
/// of its memory and has an idle CPU, from group `src` (`counted`: it is
/// runnable there already)?
pub fn mem_moves(
    rule: NumaRule,
    imb_numa_nr: i32,
    dst: &NodeGroup,
    src: &NodeGroup,
    counted: bool,
) -> bool {
    // SAFETY: both groups are valid for the call's duration.
    unsafe { ffi::numa_mem_moves(rule.bpf(), imb_numa_nr, dst, src, counted) }
}

/// rules.h numa_swap_fits(): may a task of load `wt` on a node carrying
/// `a` over `na` CPUs trade CPUs with one of load `wu` on a node carrying
/// `b` over `nb`? Only if the loads per CPU end no further apart.
pub fn swap_fits(a: i64, na: i64, b: i64, nb: i64, wt: i64, wu: i64) -> bool {
    // SAFETY: a pure C function of plain values.
    unsafe { ffi::numa_swap_fits(a, na, b, nb, wt, wu) }
}

/// rules.h wait_hist_bucket(): the histogram bucket of a wait of `ns`.
pub fn wait_hist_bucket(ns: u64) -> usize {
    // SAFETY: a pure C function of a plain value.
    unsafe { ffi::wait_hist_bucket(ns) as usize }
}

#[cfg(test)]
mod tests {
    use super::NumaRule::*;
    use super::*;

    /// Fork on the n2l4 VM (two nodes of 4 CPUs, span 8): the local group
    /// has `local_idle` idle CPUs and `local_running` tasks, the other 4.
    #[allow(clippy::too_many_arguments)]
    fn fork(
        rule: NumaRule,
        imb: i32,
        span: i32,
        cpus: i32,
        allowed: i32,
        local_idle: i32,
        local_running: i32,
        idlest_idle: i32,
    ) -> bool {
        let local = NodeGroup {
            allowed,
            ..NodeGroup::steady(local_idle, local_running, cpus)
        };
        fork_moves(rule, imb, span, &local, idlest_idle)
    }

    fn fork_n2l4(rule: NumaRule, local_running: i32) -> bool {
        fork(rule, 2, 8, 4, 4, 4 - local_running, local_running, 4)
    }

    /// Runtime pull in steady state (loads equal counts): may the group
    /// (idle, running, cpus) `dst` take a waiting task from `src`?
    fn pull(
        rule: NumaRule,
        imb: i32,
        span: i32,
        dst: (i32, i32, i32),
        src: (i32, i32, i32),
    ) -> bool {
        let d = NodeGroup::steady(dst.0, dst.1, dst.2);
        let g = NodeGroup::steady(src.0, src.1, src.2);
        pull_verdict(rule, imb, span, &d, &g, true, false) != Verdict::Keep
    }

    /// Memory locality on n2l4 (imb_numa_nr 2, nodes of 4 CPUs): may a task
    /// runnable on `src` (running count) go to `dst` holding its memory?
    fn mem(rule: NumaRule, dst_run: i32, src_run: i32, counted: bool) -> bool {
        let d = NodeGroup::steady(4 - dst_run.min(4), dst_run, 4);
        let g = NodeGroup::steady(4 - src_run.min(4), src_run, 4);
        mem_moves(rule, 2, &d, &g, counted)
    }

    #[test]
    fn memory_node_takes_a_pair_then_only_what_evens_the_load() {
        // Two threads on node 0, memory on node 1: the first goes (1 vs 1),
        // the second too (2 vs 0: within the allowance of a pair).
        assert!(mem(Mainline, 0, 2, true));
        assert!(mem(Mainline, 1, 1, true));
        // A third would make 3 there: past imb_numa_nr, and 3 vs 0.
        assert!(!mem(Mainline, 2, 1, true));
        // The destination busier than the source after the move: only up to
        // two more, and only while it runs at most imb_numa_nr.
        assert!(!mem(Mainline, 3, 2, true));
        assert!(mem(Mainline, 3, 5, true), "evens the load: always");
        // A waking task is not counted on its old node yet.
        assert!(mem(Mainline, 1, 0, false));
        assert!(!mem(Mainline, 2, 0, false));
        // Off: no allowance, only moves that leave the destination no busier.
        assert!(!mem(Off, 1, 1, true));
        assert!(mem(Off, 0, 2, true));
    }

    #[test]
    fn a_swap_may_not_make_the_nodes_less_even() {
        // numa01 on n2l4: four loops of 1024 on each node of 4 CPUs.
        assert!(
            swap_fits(4096, 4, 4096, 4, 1024, 1024),
            "alike tasks always trade"
        );
        // A nice-0 loop for a nice-5 one (335): 4096 vs 4096 becomes
        // 3407 vs 4785, a gap where there was none.
        assert!(!swap_fits(4096, 4, 4096, 4, 1024, 335));
        // The same trade from the heavier node evens it: 4785 vs 3407
        // becomes 4096 vs 4096.
        assert!(swap_fits(4785, 4, 3407, 4, 1024, 335));
        // Overshooting to the same gap the other way is no worse (the
        // kernel compares the slope's size, not its direction).
        assert!(swap_fits(4096 + 689, 4, 4096 - 689, 4, 1024, 335));
        // Past it: 4696 vs 3496 (a gap of 1200) would become 3296 vs 4896.
        assert!(!swap_fits(4696, 4, 3496, 4, 1500, 100));
        assert!(
            swap_fits(4696, 4, 3496, 4, 1024, 200),
            "3872 vs 4320: narrower"
        );
        // Per CPU: nodes of 2 and 4 CPUs at the same load per CPU.
        assert!(swap_fits(2048, 2, 4096, 4, 1024, 1024));
        assert!(!swap_fits(2048, 2, 4096, 4, 1024, 512));
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
    fn a_preferred_node_keeps_its_threads_while_it_has_room() {
        // numa01 on n2l4 (nodes of 4 CPUs, imb_numa_nr 2): the parent and
        // its first thread run, the other node runs one task. The rule alone
        // sends the second thread over (3 > 2 running, 3 idle there vs 2)...
        assert!(fork_n2l4(Mainline, 2));
        // ...but the parent's node is the thread's preferred one: it stays.
        assert!(fork_stays_preferred(&NodeGroup::steady(2, 2, 4)));
        assert!(fork_stays_preferred(&NodeGroup::steady(1, 3, 4)));
        // No CPU idle at this instant (a kernel thread passing through):
        // still room by the count.
        assert!(fork_stays_preferred(&NodeGroup::steady(0, 3, 4)));
        // The parent, counted in the 4 running, is about to wait for its
        // threads: the fourth thread stays too (numa01 on n2l4: 4 + 4).
        assert!(fork_stays_preferred(&NodeGroup::steady(0, 4, 4)));
        // No room: more runnable than CPUs (it may use) besides the parent.
        assert!(!fork_stays_preferred(&NodeGroup::steady(0, 5, 4)));
        assert!(!fork_stays_preferred(&NodeGroup::steady(1, 5, 4)));
        let two_allowed = NodeGroup {
            allowed: 2,
            ..NodeGroup::steady(1, 3, 4)
        };
        assert!(!fork_stays_preferred(&two_allowed));
    }

    #[test]
    fn v3_spreads_the_pair_and_off_spreads_at_once() {
        assert!(fork_n2l4(V3, 1), "v3: 2 running is not < 2");
        assert!(!fork(V3, 3, 8, 4, 4, 3, 1, 4), "v3 with imb 3 keeps it");
        assert!(fork_n2l4(Off, 1), "off: the idler node wins at once");
    }

    #[test]
    fn off_only_moves_to_a_strictly_idler_group() {
        // Equal idle counts: stay (kernel: local idle >= idlest idle).
        assert!(!fork(Off, 2, 8, 4, 4, 4, 0, 4));
        assert!(fork(Off, 2, 8, 4, 4, 3, 1, 4));
    }

    #[test]
    fn v4_uses_a_quarter_of_the_span_and_the_idle_difference() {
        // span 8: tolerate while <= 2 run locally and diff <= imb.
        assert!(!fork(V4, 2, 8, 4, 4, 3, 1, 4));
        assert!(fork(V4, 2, 8, 4, 4, 2, 2, 4));
        assert!(!fork(V4, 8, 32, 16, 16, 12, 4, 16));
    }

    #[test]
    fn the_clamp_to_allowed_cpus_applies() {
        // With one usable local CPU the threshold is 1: the child moves.
        assert!(fork(Mainline, 2, 8, 4, 1, 3, 1, 4));
    }

    #[test]
    fn runtime_pull_tolerates_small_imbalances_only() {
        // Node 0 runs 2 hogs, node 1 idle: diff 2, dst would run 1 <= 2.
        assert!(!pull(Mainline, 2, 8, (4, 0, 4), (2, 2, 4)));
        // 3 hogs: diff 3 > 2: one moves.
        assert!(pull(Mainline, 2, 8, (4, 0, 4), (1, 3, 4)));
        // After 3/1 nothing more moves (diff 1).
        assert!(!pull(Mainline, 2, 8, (3, 1, 4), (1, 3, 4)));
        // Overloaded source, destination with spare capacity: always.
        assert!(pull(Mainline, 64, 8, (1, 3, 4), (0, 5, 4)));
        // Both full: only by the margin and if still busier after the move.
        assert!(pull(Mainline, 2, 8, (0, 4, 4), (0, 6, 4)));
        assert!(!pull(Mainline, 2, 8, (0, 4, 4), (0, 5, 4)));
        // off: always.
        assert!(pull(Off, 2, 8, (1, 3, 4), (1, 2, 4)));
        // v3: the busiest group's count decides.
        assert!(pull(V3, 2, 8, (4, 0, 4), (2, 2, 4)));
        assert!(!pull(V3, 3, 8, (4, 0, 4), (2, 2, 4)));
    }

    #[test]
    fn overload_judged_on_the_average_and_patience() {
        use Verdict::*;
        let v = |imb, d: &NodeGroup, g: &NodeGroup, overload_ok, long| {
            pull_verdict(Mainline, imb, 8, d, g, overload_ok, long)
        };
        let d = NodeGroup::steady(4, 0, 4);
        // 5 runnable now but 3 on average: not overloaded, the rule applies
        // (diff 4 > 2: waiting tasks may go, once cache-cold).
        let busy_now = NodeGroup {
            load: 3 << NODE_LOAD_SHIFT,
            ..NodeGroup::steady(0, 5, 4)
        };
        assert_eq!(v(2, &d, &busy_now, true, false), GoCold);
        // Overloaded on average: cold tasks go, any task once it has lasted.
        let g = NodeGroup::steady(0, 6, 4);
        assert_eq!(v(64, &d, &g, true, false), GoCold);
        assert_eq!(v(64, &d, &g, true, true), GoAny);
        // A push (no overload exemption) follows the rule only: a
        // destination 2 idle CPUs ahead running 2 (3 <= 64) keeps the task
        // home; a waiting task of the overloaded node may go.
        let half = NodeGroup::steady(2, 2, 4);
        assert_eq!(v(64, &half, &g, false, true), Keep);
        assert_eq!(v(64, &half, &g, true, true), GoAny);
        // off: any task, always.
        assert_eq!(pull_verdict(Off, 2, 8, &d, &d, false, false), GoAny);
    }

    #[test]
    fn tip_allows_a_quarter_of_the_group() {
        // 4-CPU nodes: fewer than 1 task: only an idle node keeps its first child.
        assert!(!fork(Tip, 2, 8, 4, 4, 4, 0, 4));
        assert!(fork(Tip, 2, 8, 4, 4, 3, 1, 4));
        // 16-CPU nodes: up to 3 tasks stay, whatever imb_numa_nr says.
        assert!(!fork(Tip, 0, 32, 16, 16, 13, 2, 16));
        assert!(fork(Tip, 99, 32, 16, 16, 12, 3, 16));
        // Runtime: busiest 3 of 16 CPUs, diff 3: the diff is too large.
        assert!(pull(Tip, 0, 32, (16, 0, 16), (13, 3, 16)));
        assert!(!pull(Tip, 0, 32, (15, 1, 16), (13, 3, 16)));
    }

    #[test]
    fn tolerates_is_the_kernels_adjust_numa_imbalance_for_mainline() {
        // dst_running <= imb_numa_nr and imbalance <= NUMA_IMBALANCE_MIN (2).
        assert!(tolerates(Mainline, 2, 8, 4, 2, 2, 2, false));
        assert!(!tolerates(Mainline, 2, 8, 4, 3, 2, 2, false));
        assert!(!tolerates(Mainline, 2, 8, 4, 2, 3, 2, false));
        assert!(!tolerates(Off, 99, 8, 4, 0, 0, 0, true));
    }

    #[test]
    fn names_round_trip() {
        for r in NumaRule::ALL {
            assert_eq!(NumaRule::from_bpf(r.bpf()), Some(r));
        }
        assert_eq!(NumaRule::from_bpf(99), None);
    }
}
