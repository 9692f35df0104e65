//! Memory follows tasks that settled away from it.
//!
//! Placement brings a task to its memory when that node has room within the
//! NUMA rule (src/bpf/mem_locality.bpf.h). When it has none, the task runs
//! elsewhere and every access stays remote. The kernel's NUMA balancing then
//! moves the pages instead: a hinting fault from another node migrates the
//! page once the same node faulted on it twice (should_numa_migrate_memory()),
//! a scan window (numa_balancing_scan_size_mb, 256 MiB) at a time. Here the
//! evidence is where the process's threads ran (BPF adds their run time per
//! node into mem_nodes): when one node other than the memory's took at least
//! SETTLE_PCT of it for SETTLE_ROUNDS rounds in a row (or SPLIT_PCT while
//! the memory's node is full, one process at a time), its anonymous pages
//! move there with move_pages(2), a budget of pages a round
//! (`--mem-migrate-mbps`) shared by all processes.
//!
//! Never against what the process asked for: only mappings whose policy
//! numa_maps shows as "default" (mbind(2) and set_mempolicy(2) policies show
//! there, and are left alone), only to a node its cpuset allows
//! (Mems_allowed), only pages it maps alone (MPOL_MF_MOVE, as the kernel's
//! NUMA balancing skips shared pages), no hugetlb pages.

use std::collections::HashMap;
use std::io;

/// Share (percent) of a process's run time in a round one node must take
/// for its threads to count as settled there. Below, they run on several
/// nodes and no single node is worth the memory's move.
pub const SETTLE_PCT: u64 = 80;
/// Rounds in a row the threads must settle on the same node: a task that
/// placement is about to bring home, or a brief crowd, moves no memory.
pub const SETTLE_ROUNDS: u32 = 2;
/// Run time (percent of one CPU over the round) below which a process's
/// placement says nothing: an idle process's memory stays where it is.
pub const MIN_RUN_PCT: u64 = 10;
/// When a process's memory node is busy (as many runnable tasks as CPUs)
/// and its threads ran at least this share (percent) of their time on one
/// other node for SETTLE_ROUNDS rounds, its memory may move there even
/// though they did not settle: two processes whose memory sits on one
/// node that cannot run them both (autonuma's numa01, where the kernel
/// gives one numa group another preferred node) each run half here, half
/// there, and would never settle. One such move per memory node per
/// SPLIT_COOL_ROUNDS rounds, the process with the largest share first:
/// after it, the placement's preference for home sorts their threads.
pub const SPLIT_PCT: u64 = 40;
pub const SPLIT_COOL_ROUNDS: u64 = 5;
/// Pages looked up per move_pages(2) call.
const CHUNK: usize = 512;
/// Pages looked at per round, as a multiple of the budget: bounds the walk
/// through a big process whose pages are mostly where they belong already.
const LOOK_FACTOR: u64 = 8;

/// The other node (not `mem`) with the largest share of `ran`, and that
/// share in percent, if the process ran enough to tell.
pub fn most_elsewhere(ran: &[u64], period_ns: u64, mem: usize) -> Option<(usize, u64)> {
    let total: u64 = ran.iter().sum();
    if total == 0 || total * 100 < period_ns * MIN_RUN_PCT {
        return None;
    }
    let (node, &most) = ran
        .iter()
        .enumerate()
        .filter(|&(n, _)| n != mem)
        .max_by_key(|&(n, &r)| (r, usize::MAX - n))?;
    Some((node, most * 100 / total))
}

/// Where a process's memory should go this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub to: usize,
    /// Its threads did not settle there: its memory node is full
    /// (SPLIT_PCT), and the move waits its turn (Tracker::pick()).
    pub split: bool,
    /// Share (percent) of its run time on `to` this round.
    pub share: u64,
}

#[derive(Debug, Default, Clone)]
struct Seen {
    ran: Vec<u64>,
    node: Option<usize>,
    rounds: u32,
}

/// Per process: run time per node at the last round, and where it settled;
/// per memory node, the round of its last split move.
#[derive(Debug, Default)]
pub struct Tracker {
    seen: HashMap<u32, Seen>,
    round: u64,
    last_split: HashMap<usize, u64>,
}

impl Tracker {
    /// One round's cumulative run time per node of process `pid`, whose
    /// memory is mostly on `mem_node` (`mem_busy`: that node has as many
    /// runnable tasks as CPUs): where to move its memory, if its threads
    /// settled on another node, or ran SPLIT_PCT there while theirs is full.
    pub fn observe(
        &mut self,
        pid: u32,
        ran: &[u64],
        mem_node: usize,
        mem_busy: bool,
        period_ns: u64,
    ) -> Option<Move> {
        let s = self.seen.entry(pid).or_default();
        // The first look, or the counts were reset (the entry was written
        // again): nothing to compare with yet.
        let fresh = s.ran.len() != ran.len() || ran.iter().zip(&s.ran).any(|(a, b)| a < b);
        let delta: Vec<u64> = ran
            .iter()
            .zip(&s.ran)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        s.ran = ran.to_vec();
        let away = if fresh {
            None
        } else {
            most_elsewhere(&delta, period_ns, mem_node)
        };
        let on = match away {
            Some((n, pct)) if pct >= SETTLE_PCT => Some((n, pct, false)),
            Some((n, pct)) if mem_busy && pct >= SPLIT_PCT => Some((n, pct, true)),
            _ => None,
        };
        let node = on.map(|o| o.0);
        if node.is_some() && node == s.node {
            s.rounds += 1;
        } else {
            s.rounds = u32::from(node.is_some());
            s.node = node;
        }
        let (to, share, split) = on?;
        (s.rounds >= SETTLE_ROUNDS).then_some(Move { to, split, share })
    }

    /// The round's moves, (pid, memory node, move), whittled to those to
    /// make: every settled one; of the split ones, per memory node the one
    /// with the largest share, if that node had none for
    /// SPLIT_COOL_ROUNDS rounds.
    pub fn pick(&mut self, moves: Vec<(u32, usize, Move)>) -> Vec<(u32, usize)> {
        self.round += 1;
        let mut out: Vec<(u32, usize)> = Vec::new();
        let mut best: HashMap<usize, (u64, u32, usize)> = HashMap::new();
        for (pid, mem, m) in moves {
            if !m.split {
                out.push((pid, m.to));
            } else if best
                .get(&mem)
                .is_none_or(|b| (m.share, u32::MAX - pid) > (b.0, u32::MAX - b.1))
            {
                best.insert(mem, (m.share, pid, m.to));
            }
        }
        let mut split: Vec<_> = best.into_iter().collect();
        split.sort_unstable();
        for (mem, (_, pid, to)) in split {
            let cool = self
                .last_split
                .get(&mem)
                .is_some_and(|&r| self.round - r < SPLIT_COOL_ROUNDS);
            if !cool {
                self.last_split.insert(mem, self.round);
                out.push((pid, to));
            }
        }
        out
    }

    /// Forget processes not in `live`.
    pub fn retain(&mut self, live: impl Fn(u32) -> bool) {
        self.seen.retain(|&pid, _| live(pid));
    }
}

/// The address ranges whose pages may move to `target`: anonymous
/// mappings with the default policy, not hugetlb, holding pages on another
/// node, from numa_maps (policy, pages per node) and maps (the ends).
pub fn movable_ranges(numa_maps: &str, maps: &str, target: usize) -> Vec<(u64, u64)> {
    let ends: HashMap<u64, u64> = maps
        .lines()
        .filter_map(|l| {
            let (s, e) = l.split_ascii_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect();
    let mut out = Vec::new();
    for line in numa_maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(addr), Some(policy)) = (f.next(), f.next()) else {
            continue;
        };
        if policy != "default" || line.contains(" file=") || line.contains(" huge") {
            continue;
        }
        let elsewhere = f.any(|x| {
            x.strip_prefix('N')
                .and_then(|r| r.split_once('='))
                .and_then(|(n, c)| Some((n.parse::<usize>().ok()?, c.parse::<u64>().ok()?)))
                .is_some_and(|(n, c)| n != target && c > 0)
        });
        if !elsewhere || !line.contains(" anon=") {
            continue;
        }
        let Ok(start) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        if let Some(&end) = ends.get(&start) {
            out.push((start, end));
        }
    }
    out
}

/// Whether /proc/PID/status lets the process's memory be on `node`
/// (Mems_allowed_list, its cpuset's mems); true if the line is missing.
pub fn mems_allow(status: &str, node: usize) -> bool {
    let Some(list) = status
        .lines()
        .find_map(|l| l.strip_prefix("Mems_allowed_list:"))
    else {
        return true;
    };
    list.trim().split(',').any(|r| match r.split_once('-') {
        Some((a, b)) => matches!((a.parse::<usize>(), b.parse::<usize>()), (Ok(a), Ok(b)) if (a..=b).contains(&node)),
        None => r.parse::<usize>() == Ok(node),
    })
}

const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// move_pages(2) on `pid`: to `node` for each page, or a query with None.
fn move_pages(pid: u32, pages: &[u64], node: Option<i32>, status: &mut [i32]) -> io::Result<()> {
    let nodes = node.map(|n| vec![n; pages.len()]);
    // SAFETY: the arrays are pages.len() long and outlive the call; the
    // kernel reads pages and nodes and writes status only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The node of each page of `pid` (0: this process) at `pages` in
/// `status`, negative where it has none (move_pages(2) with no target only
/// looks; the lab asks it too).
pub fn page_nodes(pid: u32, pages: &[u64], status: &mut [i32]) -> io::Result<()> {
    move_pages(pid, pages, None, status)
}

/// What one process's move did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Pages looked up.
    pub looked: u64,
    /// Pages now on the target that were elsewhere.
    pub moved: u64,
    /// The errno that stopped it early, if one did (what moved before
    /// still counts).
    pub errno: Option<i32>,
}

/// Moves up to `budget` pages of `pid` in `ranges` that are on other nodes
/// to `target`, from `cursor` on (where the last call stopped; updated).
pub fn move_memory(
    pid: u32,
    ranges: &[(u64, u64)],
    target: usize,
    budget: u64,
    cursor: &mut u64,
) -> Moved {
    let page = page_size();
    let mut done = Moved::default();
    if ranges.is_empty() {
        return done;
    }
    // Start at the range holding the cursor (or after it), wrapping.
    let at = ranges
        .iter()
        .position(|&(_, e)| e > *cursor)
        .unwrap_or_else(|| {
            *cursor = 0;
            0
        });
    let mut addr = *cursor;
    let mut pages = Vec::with_capacity(CHUNK);
    let mut status = vec![0i32; CHUNK];
    let order = ranges[at..].iter().chain(&ranges[..at]);
    for &(start, end) in order {
        let mut a = addr.max(start);
        addr = 0;
        while a < end {
            if done.moved >= budget || done.looked >= budget * LOOK_FACTOR {
                *cursor = a;
                return done;
            }
            pages.clear();
            while a < end && pages.len() < CHUNK {
                pages.push(a);
                a += page;
            }
            done.looked += pages.len() as u64;
            if let Err(e) = move_pages(pid, &pages, None, &mut status[..pages.len()]) {
                done.errno = e.raw_os_error();
                return done;
            }
            // Present pages on another node (not untouched ones, whose
            // status is -ENOENT), as many as the budget allows.
            let want: Vec<u64> = pages
                .iter()
                .zip(&status)
                .filter(|&(_, &s)| s >= 0 && s as usize != target)
                .map(|(&p, _)| p)
                .take((budget - done.moved) as usize)
                .collect();
            if want.is_empty() {
                continue;
            }
            let res = move_pages(pid, &want, Some(target as i32), &mut status[..want.len()]);
            done.moved += status[..want.len()]
                .iter()
                .filter(|&&s| s == target as i32)
                .count() as u64;
            if let Err(e) = res {
                done.errno = e.raw_os_error();
                return done;
            }
        }
    }
    *cursor = 0;
    done
}

/// One process's memory to move: its pid, the node, the pages at most.
pub type Job = (u32, usize, u64);

/// Moves what of `pid`'s memory may move to `target`: the ranges from its
/// numa_maps and maps, if its cpuset allows the node (EACCES if not).
fn move_process(pid: u32, target: usize, budget: u64, cursor: &mut u64) -> Moved {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}"));
    let (status, numa_maps, maps) = match (read("status"), read("numa_maps"), read("maps")) {
        (Ok(s), Ok(n), Ok(m)) => (s, n, m),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return Moved {
                errno: e.raw_os_error(),
                ..Moved::default()
            };
        }
    };
    if !mems_allow(&status, target) {
        return Moved {
            errno: Some(libc::EACCES),
            ..Moved::default()
        };
    }
    move_memory(
        pid,
        &movable_ranges(&numa_maps, &maps, target),
        target,
        budget,
        cursor,
    )
}

/// Moves memory on a thread of its own: copying pages takes time (64 MiB
/// is ~20 ms on hardware, seconds under TCG), which must not hold up the
/// scheduler's loop (stats, controls, the scan). A round's jobs wait while
/// the last ones run, and are dropped if those are still running when the
/// next round comes: the rate then falls below `--mem-migrate-mbps`,
/// never above it.
pub struct Mover {
    jobs: crossbeam::channel::Sender<Vec<Job>>,
    done: crossbeam::channel::Receiver<(u32, Moved)>,
}

impl Mover {
    pub fn new() -> Self {
        let (jobs, rx) = crossbeam::channel::bounded::<Vec<Job>>(1);
        let (tx, done) = crossbeam::channel::unbounded();
        std::thread::Builder::new()
            .name("nimble-memmove".into())
            .spawn(move || {
                let mut cursors: HashMap<u32, u64> = HashMap::new();
                for round in rx {
                    cursors.retain(|pid, _| round.iter().any(|j| j.0 == *pid));
                    for (pid, target, budget) in round {
                        let c = cursors.entry(pid).or_default();
                        let t0 = std::time::Instant::now();
                        let c0 = thread_cpu_ms();
                        let m = move_process(pid, target, budget, c);
                        log::debug!(
                            "memory locality: process {pid}: {} of {} pages looked at moved to node {target} in {} ms ({} ms CPU)",
                            m.moved,
                            m.looked,
                            t0.elapsed().as_millis(),
                            thread_cpu_ms() - c0
                        );
                        if tx.send((pid, m)).is_err() {
                            return;
                        }
                    }
                }
            })
            .expect("spawning the memory mover");
        Self { jobs, done }
    }

    /// Hands a round's jobs over; false if the last ones still run.
    pub fn submit(&self, round: Vec<Job>) -> bool {
        round.is_empty() || self.jobs.try_send(round).is_ok()
    }

    /// What finished since the last call.
    pub fn finished(&self) -> Vec<(u32, Moved)> {
        self.done.try_iter().collect()
    }
}

impl Default for Mover {
    fn default() -> Self {
        Self::new()
    }
}

/// CPU time of the calling thread, ms (the mover's debug line: a move
/// under TCG is mostly CPU in the kernel, not waiting).
fn thread_cpu_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_node_elsewhere_with_most_of_enough_run_time() {
        assert_eq!(most_elsewhere(&[SEC, 0], SEC, 1), Some((0, 100)));
        assert_eq!(
            most_elsewhere(&[SEC / 10, SEC * 9 / 10], SEC, 0),
            Some((1, 90))
        );
        assert_eq!(
            most_elsewhere(&[SEC * 3 / 10, SEC * 7 / 10], SEC, 1),
            Some((0, 30))
        );
        assert_eq!(most_elsewhere(&[0, SEC, SEC], SEC, 0), Some((1, 50)));
        // Too little run time says nothing.
        assert_eq!(most_elsewhere(&[SEC / 20, 0], SEC, 1), None);
        assert_eq!(most_elsewhere(&[0, 0], SEC, 1), None);
    }

    #[test]
    fn moves_after_two_settled_rounds_off_the_memory_node() {
        let mut t = Tracker::default();
        let to = |n| {
            Some(Move {
                to: n,
                split: false,
                share: 100,
            })
        };
        let mut ran = vec![0u64, 0];
        // First look: a baseline.
        assert_eq!(t.observe(1, &ran, 1, false, SEC), None);
        ran[0] += SEC;
        assert_eq!(
            t.observe(1, &ran, 1, false, SEC),
            None,
            "one round is not settled"
        );
        ran[0] += SEC;
        assert_eq!(t.observe(1, &ran, 1, false, SEC), to(0));
        ran[0] += SEC;
        assert_eq!(t.observe(1, &ran, 1, false, SEC), to(0));
        // Brought home: nothing to move.
        ran[1] += 2 * SEC;
        assert_eq!(t.observe(1, &ran, 1, false, SEC), None);
        // Back on node 0 for one round, then the counts are reset (the entry
        // was written again): start over.
        ran[0] += SEC;
        assert_eq!(t.observe(1, &ran, 1, false, SEC), None);
        assert_eq!(t.observe(1, &[SEC, 0], 1, false, SEC), None);
        assert_eq!(t.observe(1, &[2 * SEC, 0], 1, false, SEC), None);
        assert_eq!(t.observe(1, &[3 * SEC, 0], 1, false, SEC), to(0));
        // Already where it runs: nothing.
        assert_eq!(t.observe(1, &[4 * SEC, 0], 0, false, SEC), None);
        t.retain(|_| false);
        assert!(t.seen.is_empty());
    }

    #[test]
    fn half_away_moves_only_when_the_memory_node_is_full_one_at_a_time() {
        let mut t = Tracker::default();
        // Two processes, memory on node 0, each running half on node 1.
        let mut ran = [vec![0u64, 0], vec![0u64, 0]];
        let mut moves = Vec::new();
        for round in 0..3 {
            moves.clear();
            for (i, r) in ran.iter_mut().enumerate() {
                r[0] += SEC / 2;
                r[1] += SEC / 2 + i as u64 * SEC / 10;
                let busy = round > 0;
                if let Some(m) = t.observe(10 + i as u32, r, 0, busy, SEC) {
                    moves.push((10 + i as u32, 0, m));
                }
            }
        }
        // Node 0 full for two rounds: both would go; the one with the larger
        // share on node 1 (pid 11) does, the other waits for the cool-down.
        assert_eq!(moves.len(), 2);
        assert!(moves.iter().all(|m| m.2.split && m.2.to == 1));
        assert_eq!(t.pick(moves.clone()), vec![(11, 1)]);
        for _ in 1..SPLIT_COOL_ROUNDS {
            assert_eq!(t.pick(vec![moves[0]]), vec![]);
        }
        assert_eq!(t.pick(vec![moves[0]]), vec![(10, 1)]);
        // Not full: half away is no reason.
        let mut u = Tracker::default();
        for k in 0..4u64 {
            assert_eq!(
                u.observe(1, &[k * SEC / 2, k * SEC / 2], 0, false, SEC),
                None
            );
        }
        // Settled moves are never held back.
        let settled = Move {
            to: 1,
            split: false,
            share: 90,
        };
        assert_eq!(
            t.pick(vec![(5, 0, settled), (6, 0, settled)]),
            vec![(5, 1), (6, 1)]
        );
    }

    #[test]
    fn only_default_policy_anonymous_ranges_with_pages_elsewhere() {
        let numa_maps = "\
55d0c0a00000 default file=/usr/bin/x mapped=2 N0=2 kernelpagesize_kB=4
55d0c2400000 default heap anon=3 dirty=3 N0=1 N1=2 kernelpagesize_kB=4
7f0000000000 default anon=16384 dirty=16384 N1=16384 kernelpagesize_kB=4
7f1000000000 bind:1 anon=100 dirty=100 N1=100 kernelpagesize_kB=4
7f2000000000 default file=/anon_hugepage\\040(deleted) huge anon=2 N1=2 kernelpagesize_kB=2048
7f3000000000 interleave:0-1 anon=10 N0=5 N1=5 kernelpagesize_kB=4
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";
        let maps = "\
55d0c0a00000-55d0c0a02000 r-xp 00000000 08:01 1 /usr/bin/x
55d0c2400000-55d0c2403000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
7f1000000000-7f1000064000 rw-p 00000000 00:00 0
7f2000000000-7f2000400000 rw-p 00000000 00:0f 9 /anon_hugepage (deleted)
7f3000000000-7f300000a000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00003000 rw-p 00000000 00:00 0 [stack]
";
        assert_eq!(
            movable_ranges(numa_maps, maps, 0),
            vec![
                (0x55d0c2400000, 0x55d0c2403000),
                (0x7f0000000000, 0x7f0004000000)
            ]
        );
        assert_eq!(
            movable_ranges(numa_maps, maps, 1),
            vec![
                (0x55d0c2400000, 0x55d0c2403000),
                (0x7ffd00000000, 0x7ffd00003000)
            ]
        );
    }

    #[test]
    fn cpuset_mems() {
        let s = "Name:\tx\nMems_allowed:\t00000003\nMems_allowed_list:\t0-1\n";
        assert!(mems_allow(s, 0) && mems_allow(s, 1) && !mems_allow(s, 2));
        let s = "Mems_allowed_list:\t0,2-3\n";
        assert!(mems_allow(s, 0) && !mems_allow(s, 1) && mems_allow(s, 3));
        assert!(mems_allow("Name:\tx\n", 5));
    }

    #[test]
    fn moves_own_pages_within_the_budget() {
        // Our own memory, on node 0 (the only node on most hosts): a move
        // to node 0 finds nothing to do, and looks at no more than allowed.
        let len = 64 * page_size() as usize;
        let mut v = vec![1u8; len];
        let start = v.as_mut_ptr() as u64 & !(page_size() - 1);
        let pid = std::process::id();
        let mut cursor = 0;
        let m = move_memory(
            pid,
            &[(start, start + len as u64 - page_size())],
            0,
            4,
            &mut cursor,
        );
        assert_eq!(m.moved, 0);
        assert!(m.looked <= 4 * LOOK_FACTOR + CHUNK as u64);
        // No NUMA in this kernel (ENOSYS) or not permitted here.
        assert!(
            matches!(m.errno, None | Some(libc::ENOSYS | libc::EPERM)),
            "{m:?}"
        );
        // Through the thread, as the scheduler does.
        let mover = Mover::new();
        assert!(mover.submit(vec![(pid, 0, 4)]));
        let mut got = Vec::new();
        for _ in 0..100 {
            got = mover.finished();
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1.moved), (pid, 0));
        drop(v);
    }
}
