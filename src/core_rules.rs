//! The core policy's pure decisions BPF runs, compiled for the host from
//! src/bpf/rules.h (src/bpf/rules_host.c): the difference of two clock
//! readings taken on different CPUs, and wakeup preemption (EEVDF's rule).
//! The tests here call the very functions the scheduler runs.

use crate::bpf_intf::{self, preempt_view};

mod ffi {
    use crate::bpf_intf::preempt_view;

    // src/bpf/rules_host.c: rules.h with external linkage.
    extern "C" {
        pub fn clock_since(now: u64, then: u64) -> u64;
        pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_cpus: u32) -> bool;
        pub fn wakeup_preempts(
            w: *const preempt_view,
            c: *const preempt_view,
            now: u64,
            protect_min: u64,
            ahead_unprotected: bool,
        ) -> bool;
        pub fn util_toward(util: u32, target: u32, dt: u64) -> u32;
        pub fn wakeup_preempt_why(
            w: *const preempt_view,
            c: *const preempt_view,
            now: u64,
            protect_min: u64,
            ahead_unprotected: bool,
        ) -> u32;
    }
}

/// rules.h clock_since(): ns from `then` to `now`, 0 if `then` is later.
pub fn clock_since(now: u64, then: u64) -> u64 {
    // SAFETY: a pure C function of plain values.
    unsafe { ffi::clock_since(now, then) }
}

/// rules.h wake_wide(): do a waker and its wakee, with these partner
/// switches per second (halved each second), wake too many partners to be
/// pulled into the waker's LLC of `llc_cpus` CPUs?
pub fn wake_wide(waker_flips: u32, wakee_flips: u32, llc_cpus: u32) -> bool {
    // SAFETY: a pure C function of plain values.
    unsafe { ffi::wake_wide(waker_flips, wakee_flips, llc_cpus) }
}

/// A task's class as wakeup preemption sees it (enum task_class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Normal,
    Batch,
    Idle,
}

impl Class {
    fn bpf(self) -> u32 {
        match self {
            Class::Normal => bpf_intf::task_class_TASK_NORMAL,
            Class::Batch => bpf_intf::task_class_TASK_BATCH,
            Class::Idle => bpf_intf::task_class_TASK_IDLE,
        }
    }
}

/// A task as wakeup_preempts() sees it (struct preempt_view): its deadline,
/// its start (waking: when it may start; running: when it started), its
/// request (CPU time), that request at its weight, its class. Times in ns.
pub fn view(deadline: u64, start: u64, req: u64, span: u64, class: Class) -> preempt_view {
    preempt_view {
        deadline,
        start,
        req,
        span,
        class: class.bpf(),
        util: 0,
        weight: 1024,
        one_cpu: 0,
    }
}

/// rules.h wakeup_preempts(): does the woken `w` take the CPU from the
/// running `c` at `now`, the running task keeping at least `protect_min`
/// while it is not ahead of its share (the default rule)?
pub fn wakeup_preempts(w: &preempt_view, c: &preempt_view, now: u64, protect_min: u64) -> bool {
    wakeup_preempts_as(w, c, now, protect_min, true)
}

/// wakeup_preempts(), with the protection kept for a running task ahead
/// of its share when `ahead_unprotected` is false (--protect-ahead).
pub fn wakeup_preempts_as(
    w: &preempt_view,
    c: &preempt_view,
    now: u64,
    protect_min: u64,
    ahead_unprotected: bool,
) -> bool {
    // SAFETY: pure C over two plain structs that outlive the call.
    unsafe { ffi::wakeup_preempts(w, c, now, protect_min, ahead_unprotected) }
}

/// rules.h wakeup_preempt_why(): 0 no, 1 past the protected part (or a
/// SCHED_IDLE running task), 2 inside it, the running task ahead of its
/// share (the `preempt_ahead` counter).
pub fn wakeup_preempt_why(w: &preempt_view, c: &preempt_view, now: u64, protect_min: u64) -> u32 {
    // SAFETY: pure C over two plain structs that outlive the call.
    unsafe { ffi::wakeup_preempt_why(w, c, now, protect_min, true) }
}

/// rules.h util_toward(): a recent-CPU-use average (of UTIL_ONE) after
/// `dt` ns running (`target` UTIL_ONE) or not (0).
pub fn util_toward(util: u32, target: u32, dt: u64) -> u32 {
    // SAFETY: a pure C function of plain values.
    unsafe { ffi::util_toward(util, target, dt) }
}

/// intf.h UTIL_ONE: a task's recent CPU use when it used all of it.
pub const UTIL_ONE: u32 = bpf_intf::nimble_limits_UTIL_ONE;

#[cfg(test)]
mod tests {
    use super::Class::*;
    use super::*;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;
    /// A clock value well away from 0, so "earlier" stays in range.
    const T: u64 = 1_000_000 * MS;

    #[test]
    fn clock_since_is_zero_when_the_other_clock_is_ahead() {
        assert_eq!(clock_since(T + 5, T), 5);
        assert_eq!(clock_since(T, T), 0);
        // A stamp from a CPU whose clock runs 3 us ahead of this one's.
        assert_eq!(clock_since(T, T + 3 * US), 0);
        // Across the wrap of the u64 clock, still the forward distance.
        assert_eq!(clock_since(4, u64::MAX - 5), 10);
        // What unsigned subtraction would have given: ~584 years.
        assert!(T.wrapping_sub(T + 3 * US) > 500 * 365 * 24 * 3600 * 1_000_000_000);
    }

    #[test]
    fn wake_wide_unless_both_keep_their_partner() {
        // A 1:1 pair (perf pipe, a client and its server), with a few stray
        // wakeups in the last second: narrow.
        assert!(!wake_wide(0, 0, 4));
        assert!(!wake_wide(11, 1, 2));
        // A sender waking 20 receivers in turn, each receiver waking none
        // (hackbench): wide, whichever side is the waker.
        assert!(wake_wide(20, 0, 4));
        assert!(wake_wide(0, 20, 4));
        // The bar: 16 switches a second, or the LLC's size if larger.
        assert!(wake_wide(16, 0, 2));
        assert!(!wake_wide(15, 15, 2));
        assert!(!wake_wide(31, 0, 32));
        assert!(wake_wide(32, 0, 32));
    }

    /// A nice-0 task: its request is its span.
    fn nice0(deadline: u64, start: u64, req: u64, class: Class) -> preempt_view {
        view(deadline, start, req, req, class)
    }

    /// The running task: started `ran` ago, a request of `req`, deadline
    /// `dl` past its start.
    fn running(ran: u64, req: u64, dl: u64, class: Class) -> preempt_view {
        nice0(T - ran + dl, T - ran, req, class)
    }

    #[test]
    fn a_short_sleeper_takes_the_cpu_after_the_protected_minimum() {
        let w = nice0(T + 100 * US, T, 100 * US, Normal);
        // A CPU hog with a 5 ms request, its deadline far ahead (it used its share).
        let hog = |ran| running(ran, 5 * MS, 900 * MS, Normal);
        assert!(!wakeup_preempts(&w, &hog(500 * US), T, MS));
        assert!(wakeup_preempts(&w, &hog(MS), T, MS));
        // No minimum: the running task keeps the wakee's own request.
        assert!(!wakeup_preempts(&w, &hog(10 * US), T, 0));
        assert!(wakeup_preempts(&w, &hog(100 * US), T, 0));
    }

    #[test]
    fn alike_requests_take_turns_no_faster_than_the_request() {
        // hackbench-like: both ask for 3 ms; the running one is protected
        // for the wakee's request, not just the minimum.
        let w = nice0(T + 3 * MS, T, 3 * MS, Normal);
        let c = |ran| running(ran, 5 * MS, 900 * MS, Normal);
        assert!(!wakeup_preempts(&w, &c(2 * MS), T, MS));
        assert!(wakeup_preempts(&w, &c(3 * MS), T, MS));
        // Never more than the running task's own request.
        let short = |ran| running(ran, 2 * MS, 900 * MS, Normal);
        assert!(wakeup_preempts(&w, &short(2 * MS), T, MS));
    }

    #[test]
    fn the_earlier_deadline_wins_and_a_tie_keeps_the_running_task() {
        let c = running(2 * MS, 5 * MS, 4 * MS, Normal); // deadline T + 2 ms
        assert!(!wakeup_preempts(
            &nice0(T + 2 * MS, T, 100 * US, Normal),
            &c,
            T,
            MS
        ));
        assert!(!wakeup_preempts(
            &nice0(T + 3 * MS, T, 100 * US, Normal),
            &c,
            T,
            MS
        ));
        assert!(wakeup_preempts(
            &nice0(T + 2 * MS - 1, T, 100 * US, Normal),
            &c,
            T,
            MS
        ));
    }

    #[test]
    fn a_running_task_past_its_request_asks_for_what_it_ran() {
        // Started 6 ms ago with a 2 ms request and deadline start + 2 ms
        // (4 ms ago): it now asks for the 6 ms it has run, from now.
        let c = running(6 * MS, 2 * MS, 2 * MS, Normal);
        assert!(wakeup_preempts(&nice0(T + MS, T, MS, Normal), &c, T, MS));
        assert!(wakeup_preempts(
            &nice0(T + 5 * MS, T, 5 * MS, Normal),
            &c,
            T,
            MS
        ));
        assert!(!wakeup_preempts(
            &nice0(T + 7 * MS, T, 5 * MS, Normal),
            &c,
            T,
            MS
        ));
        // Seen in the VM: a 0.1 ms sleeper that ran 10 ms against a 4.4 ms wakee.
        let s = running(10 * MS, 100 * US, 100 * US, Normal);
        assert!(wakeup_preempts(
            &nice0(T + 4400 * US, T, 4400 * US, Normal),
            &s,
            T,
            MS
        ));
        // Weighted: a nice -20 task's span is 1/87 of what it ran.
        let heavy = view(T - 4 * MS, T - 10 * MS, 100 * US, 100 * US / 87, Normal);
        assert!(!wakeup_preempts(
            &nice0(T + 4400 * US, T, 4400 * US, Normal),
            &heavy,
            T,
            MS
        ));
    }

    #[test]
    fn an_ineligible_wakee_waits() {
        let c = running(5 * MS, 5 * MS, 900 * MS, Normal);
        // Its start (its finish time) lies ahead: it ran beyond its share.
        assert!(!wakeup_preempts(
            &nice0(T + 10 * MS, T + MS, MS, Normal),
            &c,
            T,
            MS
        ));
        assert!(wakeup_preempts(
            &nice0(T + 10 * MS, T, MS, Normal),
            &c,
            T,
            MS
        ));
    }

    #[test]
    fn sched_idle_loses_at_once_and_batch_and_idle_wakees_never_preempt() {
        let idle = running(10 * US, 5 * MS, 10 * MS, Idle);
        // Any other class takes a SCHED_IDLE task's CPU, deadline or not.
        assert!(wakeup_preempts(
            &nice0(T + 50 * MS, T, MS, Normal),
            &idle,
            T,
            MS
        ));
        assert!(wakeup_preempts(
            &nice0(T + 50 * MS, T, MS, Batch),
            &idle,
            T,
            MS
        ));
        assert!(!wakeup_preempts(&nice0(T, T, MS, Idle), &idle, T, MS));
        // SCHED_BATCH and SCHED_IDLE wakees never preempt a normal task.
        let hog = running(4 * MS, 5 * MS, 900 * MS, Normal);
        assert!(!wakeup_preempts(
            &nice0(T + 100 * US, T, 100 * US, Batch),
            &hog,
            T,
            MS
        ));
        assert!(!wakeup_preempts(
            &nice0(T + 100 * US, T, 100 * US, Idle),
            &hog,
            T,
            MS
        ));
        assert!(wakeup_preempts(
            &nice0(T + 100 * US, T, 100 * US, Normal),
            &hog,
            T,
            MS
        ));
    }

    #[test]
    fn a_running_task_keeps_the_minimum_even_if_it_asked_for_less() {
        // hackbench-like: both run in 0.1 ms bursts; the wakee's deadline
        // is earlier, but the running one keeps its 1 ms.
        let w = nice0(T + 100 * US, T, 100 * US, Normal);
        let c = |ran| running(ran, 100 * US, 2 * MS, Normal);
        assert!(!wakeup_preempts(&w, &c(500 * US), T, MS));
        assert!(wakeup_preempts(&w, &c(MS), T, MS));
    }

    #[test]
    fn protection_counts_cpu_time_whatever_the_weight() {
        // Both at nice -20: spans 1/87 of the requests. The running task
        // still keeps 1 ms of CPU, not 1/87 of it.
        let w = view(T + 2 * US, T, 100 * US, 100 * US / 87, Normal);
        let c = |ran| view(T - ran + 10 * MS, T - ran, 5 * MS, 5 * MS / 87, Normal);
        assert!(!wakeup_preempts(&w, &c(500 * US), T, MS));
        assert!(wakeup_preempts(&w, &c(MS), T, MS));
    }

    #[test]
    fn a_running_task_stamped_on_a_cpu_ahead_counts_as_just_started() {
        // Its start reads 1 ms after this CPU's now: it ran 0, not 584 years.
        let c = nice0(T + 900 * MS, T + MS, 5 * MS, Normal);
        assert!(!wakeup_preempts(
            &nice0(T + 100 * US, T, 100 * US, Normal),
            &c,
            T,
            MS
        ));
    }
    #[test]
    fn util_moves_toward_running_or_not_over_the_window() {
        assert_eq!(util_toward(0, UTIL_ONE, 32 * MS), UTIL_ONE);
        assert_eq!(util_toward(UTIL_ONE, 0, 40 * MS), 0);
        assert_eq!(util_toward(0, UTIL_ONE, 16 * MS), UTIL_ONE / 2);
        assert_eq!(util_toward(UTIL_ONE, 0, 8 * MS), UTIL_ONE / 4 * 3);
        // A few us still count (no rounding to nothing).
        assert!(util_toward(UTIL_ONE / 2, UTIL_ONE, 5 * US) > UTIL_ONE / 2);
        assert!(util_toward(UTIL_ONE / 2, 0, 5 * US) < UTIL_ONE / 2);
        // A loop preempted for 10 us every ms settles near all of its CPU.
        let mut u = 0;
        for _ in 0..200 {
            u = util_toward(u, UTIL_ONE, 990 * US);
            u = util_toward(u, 0, 10 * US);
        }
        assert!(u > UTIL_ONE / 100 * 98, "{u}");
    }

    /// `v`, bound to one CPU.
    fn pinned(mut v: preempt_view) -> preempt_view {
        v.one_cpu = 1;
        v
    }

    /// A loop that used `util` of its CPU lately, `ran` into its run, its
    /// deadline far ahead, weight `weight`.
    fn loop_at(util: u32, weight: u32, ran: u64) -> preempt_view {
        let mut c = running(ran, 5 * MS, 900 * MS, Normal);
        c.util = util;
        c.weight = weight;
        c
    }

    #[test]
    fn a_running_task_ahead_of_its_share_keeps_no_protection() {
        // The 1 ms periodic task beside a loop on one CPU
        // (tests/guest/periodic.sh): the loop resumed 50 us ago
        // after the last wakeup preempted it, having used 99 % lately.
        let w = pinned(nice0(T + MS, T, MS, Normal));
        let hog = loop_at(UTIL_ONE / 100 * 99, 1024, 50 * US);
        assert!(wakeup_preempts(&w, &hog, T, MS));
        // --protect-ahead: the rule before, protected for 1 ms.
        assert!(!wakeup_preempts_as(&w, &hog, T, MS, false));
        // The deadline still decides: a wakee due later does not preempt.
        let late = pinned(nice0(T + 950 * MS, T, MS, Normal));
        assert!(!wakeup_preempts(&late, &hog, T, MS));
        // Nor does an ineligible wakee.
        let early = pinned(nice0(T + 2 * MS, T + MS, MS, Normal));
        assert!(!wakeup_preempts(&early, &hog, T, MS));
        // Counted as taken inside the protection (preempt_ahead); past
        // it, as an ordinary preemption.
        assert_eq!(wakeup_preempt_why(&w, &hog, T, MS), 2);
        let past = loop_at(UTIL_ONE / 100 * 99, 1024, 2 * MS);
        assert_eq!(wakeup_preempt_why(&w, &past, T, MS), 1);
        assert_eq!(wakeup_preempt_why(&late, &hog, T, MS), 0);
        // A wakee that may run on other CPUs competes for its LLC: the
        // loop keeps its protection (hackbench's senders, ahead of their
        // half, would be preempted at each message).
        let free = nice0(T + MS, T, MS, Normal);
        assert!(!wakeup_preempts(&free, &hog, T, MS));
    }

    #[test]
    fn a_running_task_within_its_share_keeps_its_protection() {
        // hackbench under overload: a task that used 5 % of its CPU lately.
        let w = pinned(nice0(T + MS, T, MS, Normal));
        assert!(!wakeup_preempts(
            &w,
            &loop_at(UTIL_ONE / 20, 1024, 50 * US),
            T,
            MS
        ));
        // Its share beside an alike wakee is a half: 45 % is within it...
        assert!(!wakeup_preempts(
            &w,
            &loop_at(UTIL_ONE / 100 * 45, 1024, 50 * US),
            T,
            MS
        ));
        // ...and the run itself counts: 45 % plus 5 ms running is past it.
        assert!(wakeup_preempts(
            &w,
            &loop_at(UTIL_ONE / 100 * 45, 1024, 5 * MS),
            T,
            MS
        ));
    }

    #[test]
    fn the_share_follows_the_weights() {
        let w = pinned(nice0(T + MS, T, MS, Normal));
        // 70 %: ahead beside an alike wakee, within its share (3/4) beside
        // a wakee of a third of its weight.
        let c = |weight| loop_at(UTIL_ONE / 10 * 7, weight, 50 * US);
        assert!(wakeup_preempts(&w, &c(1024), T, MS));
        assert!(!wakeup_preempts(&w, &c(3072), T, MS));
        // No weights known (a record from before it ran): protected.
        let mut none = w;
        none.weight = 0;
        assert!(!wakeup_preempts(&none, &c(0), T, MS));
    }
}
