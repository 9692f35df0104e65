//! Memory locality: which node holds each running process's memory.
//!
//! The kernel learns a task's node from NUMA hinting faults that the fair
//! class's tick drives, so under sched_ext it never does. This reads
//! `/proc/PID/numa_maps` instead, for the processes that ran in the last
//! period and have at least `MIN_RSS_PAGES` resident, at most `MAX_READS` a
//! round, busiest first: reading numa_maps walks the process's page tables,
//! so the cost grows with its memory, and the budget bounds it. Threads
//! share their memory, so the unit is the process (the kernel's numa
//! groups). The scheduler writes the answers into the BPF map mem_nodes
//! (src/bpf/mem_locality.bpf.h); nothing while `kernel.numa_balancing` is 0.

pub mod migrate;
pub mod numa_maps;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

/// Processes with less resident memory than this (4 KiB pages: 1 MiB,
/// libraries included) are not looked at: reading their numa_maps would
/// cost more than their locality earns (numa_maps::MIN_PAGES then asks as
/// much of their own memory).
pub const MIN_RSS_PAGES: u64 = numa_maps::MIN_PAGES;
/// numa_maps reads per round at most.
pub const MAX_READS: usize = 64;
/// Every how many rounds the stat of every process in /proc is read; the
/// rounds between read only those new since the last round and the big
/// ones that ran at their last look or have a node. Reading every stat
/// costs about 13 us a process on a 2-CPU VM (1.3 % of a CPU a second with
/// 1 000 processes, if done every round); listing /proc, each round, is
/// cheap. So a new process is seen at once (a job that starts big is
/// placed near its memory seconds sooner: the lab's numa01 runs 7 s), one
/// that grows or starts running within this many rounds. It is also how
/// often one process's numa_maps is read at most (0.8 ms for 64 MiB
/// there): memory moves slowly.
pub const WALK_EVERY: u64 = 4;
/// Processes tracked at most (the BPF map's size).
pub const MAX_PROCS: usize = crate::bpf_intf::nimble_limits_MAX_MEM_PROCS as usize;

/// A change to make in the BPF map: the process's node, or no node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Set(u32, u32),
    Clear(u32),
}

#[derive(Debug, Clone, Copy)]
struct Proc {
    ticks: u64,
    node: Option<usize>,
    /// The round it was last seen in.
    round: u64,
    /// Resident memory of MIN_RSS_PAGES or more when last seen.
    big: bool,
    /// It ran between its last two looks.
    ran: bool,
    /// The round its numa_maps was last read, 0: never.
    read: u64,
}

/// One round's work, for the stats.
#[derive(Debug, Default, Clone, Copy)]
pub struct Round {
    /// Whether it walked all of /proc.
    pub walked: bool,
    pub candidates: usize,
    pub reads: usize,
    pub with_node: usize,
}

pub struct Scanner {
    proc_root: PathBuf,
    nr_nodes: usize,
    procs: HashMap<u32, Proc>,
    round: u64,
}

/// CPU ticks (utime + stime) and resident pages from /proc/PID/stat.
fn stat_ticks_rss(text: &str) -> Option<(u64, u64)> {
    let f: Vec<&str> = text.rsplit_once(") ")?.1.split_ascii_whitespace().collect();
    // Fields 14, 15 and 24 of proc(5), counted from field 3 (state).
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((ticks, f.get(21)?.parse().ok()?))
}

/// Whether `kernel.numa_balancing` asks for memory locality (bit 0: normal
/// NUMA balancing; 2 alone is memory tiering).
pub fn balancing_on(sysctl: &str) -> bool {
    sysctl.trim().parse::<u32>().is_ok_and(|v| v & 1 == 1)
}

impl Scanner {
    pub fn new(proc_root: impl Into<PathBuf>, nr_nodes: usize) -> Self {
        Self {
            proc_root: proc_root.into(),
            nr_nodes,
            procs: HashMap::new(),
            round: 0,
        }
    }

    /// Processes with a node now.
    pub fn with_node(&self) -> usize {
        self.procs.values().filter(|p| p.node.is_some()).count()
    }

    /// The processes with a node, and that node.
    pub fn nodes(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.procs
            .iter()
            .filter_map(|(&pid, p)| Some((pid, p.node?)))
    }

    /// Read `pid`'s numa_maps again at its next look (its memory moved).
    pub fn recheck(&mut self, pid: u32) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.read = 0;
        }
    }

    /// Forget every node (numa_balancing turned off): the changes that
    /// clear them.
    pub fn clear(&mut self) -> Vec<Change> {
        let out = self
            .procs
            .iter()
            .filter(|(_, p)| p.node.is_some())
            .map(|(&pid, _)| Change::Clear(pid))
            .collect();
        self.procs.clear();
        out
    }

    /// The processes to look at this round: all of /proc every WALK_EVERY
    /// rounds (the first included), else those new since the last round
    /// and those found big that ran or have a node.
    fn pids(&self, skip: u32) -> Vec<u32> {
        let Ok(dir) = fs::read_dir(&self.proc_root) else {
            return Vec::new();
        };
        let all = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
            .filter(|&pid| pid != skip);
        if self.round % WALK_EVERY == 1 {
            return all.collect();
        }
        all.filter(|pid| {
            self.procs
                .get(pid)
                .is_none_or(|p| p.big && (p.ran || p.node.is_some()))
        })
        .collect()
    }

    /// One round: the changes to make in the map (`skip`: our own pid).
    pub fn scan(&mut self, skip: u32) -> (Vec<Change>, Round) {
        self.round += 1;
        let walk = self.round % WALK_EVERY == 1;
        let mut out = Vec::new();
        let mut cand: Vec<(u64, u32)> = Vec::new();
        let mut path = self.proc_root.clone();
        for pid in self.pids(skip) {
            path.push(pid.to_string());
            path.push("stat");
            let stat = fs::read_to_string(&path).ok();
            path.pop();
            path.pop();
            let Some((ticks, rss)) = stat.and_then(|t| stat_ticks_rss(&t)) else {
                continue;
            };
            let new = !self.procs.contains_key(&pid);
            let p = self.procs.entry(pid).or_insert(Proc {
                ticks,
                node: None,
                round: 0,
                big: false,
                ran: false,
                read: 0,
            });
            let ran = ticks.saturating_sub(p.ticks);
            p.ticks = ticks;
            p.round = self.round;
            p.big = rss >= MIN_RSS_PAGES;
            // New to us: looked at again next round, to see whether it runs.
            p.ran = ran > 0 || new;
            // Read again once WALK_EVERY rounds have passed.
            if ran > 0 && p.big && (p.read == 0 || self.round - p.read >= WALK_EVERY) {
                cand.push((ran, pid));
            }
        }
        // Gone since they were last looked at (a walk looks at all; the
        // rounds between, at the big ones that ran or have a node).
        let round = self.round;
        self.procs.retain(|&pid, p| {
            let looked = walk || (p.big && (p.ran || p.node.is_some()));
            let live = p.round == round || !looked;
            if !live && p.node.is_some() {
                out.push(Change::Clear(pid));
            }
            live
        });
        cand.sort_unstable_by(|a, b| b.cmp(a));
        let mut round = Round {
            candidates: cand.len(),
            walked: walk,
            ..Round::default()
        };
        for &(_, pid) in cand.iter().take(MAX_READS) {
            let path = self.proc_root.join(pid.to_string()).join("numa_maps");
            let Ok(text) = fs::read_to_string(path) else {
                continue;
            };
            round.reads += 1;
            let pages = numa_maps::pages_per_node(&text, self.nr_nodes);
            let Some(p) = self.procs.get_mut(&pid) else {
                continue;
            };
            p.read = self.round;
            let node = numa_maps::preferred(&pages, p.node);
            if node != p.node {
                match node {
                    Some(n) => out.push(Change::Set(pid, n as u32)),
                    None => out.push(Change::Clear(pid)),
                }
                p.node = node;
            }
        }
        // The map's size: past it, new nodes are not recorded.
        let mut have = self.with_node();
        if have > MAX_PROCS {
            out.retain(|c| match c {
                Change::Set(pid, _) if have > MAX_PROCS => {
                    have -= 1;
                    if let Some(p) = self.procs.get_mut(pid) {
                        p.node = None;
                    }
                    false
                }
                _ => true,
            });
        }
        round.with_node = self.with_node();
        (out, round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write_proc(root: &Path, pid: u32, ticks: u64, rss: u64, maps: &str) {
        let d = root.join(pid.to_string());
        fs::create_dir_all(&d).unwrap();
        // 52 fields; utime is 14, stime 15, rss 24.
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[0] = "R".into();
        f[11] = ticks.to_string();
        f[21] = rss.to_string();
        fs::write(d.join("stat"), format!("{pid} (a b) {}\n", f.join(" "))).unwrap();
        fs::write(d.join("numa_maps"), maps).unwrap();
    }

    #[test]
    fn reads_stat_fields_past_a_name_with_spaces_and_parens() {
        let t = "42 (x) y) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22";
        assert_eq!(stat_ticks_rss(t), Some((11 + 12, 21)));
        assert_eq!(stat_ticks_rss("42 (x) R 1"), None);
    }

    #[test]
    fn numa_balancing_bit() {
        assert!(balancing_on("1\n"));
        assert!(balancing_on("3"));
        assert!(!balancing_on("0\n"));
        assert!(!balancing_on("2"));
        assert!(!balancing_on(""));
    }

    #[test]
    fn sets_the_node_of_processes_that_ran_and_clears_the_gone() {
        let dir = std::env::temp_dir().join(format!("memloc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let on1 = "1 default anon=900 N0=100 N1=800\n";
        write_proc(&dir, 10, 100, 5000, on1); // big, runs
        write_proc(&dir, 11, 100, 10, on1); // too small
        write_proc(&dir, 12, 100, 5000, on1); // big, idle
        write_proc(&dir, 13, 100, 5000, "1 default anon=900 N0=450 N1=450\n"); // spread
        let mut s = Scanner::new(&dir, 2);
        // First round: nothing has run since we looked.
        assert_eq!(s.scan(0).0, vec![]);
        write_proc(&dir, 10, 150, 5000, on1);
        write_proc(&dir, 11, 150, 10, on1);
        write_proc(&dir, 13, 150, 5000, "1 default anon=900 N0=450 N1=450\n");
        let (ch, r) = s.scan(0);
        assert_eq!(ch, vec![Change::Set(10, 1)]);
        assert_eq!((r.candidates, r.reads, r.with_node), (2, 2, 1));
        // Its memory moves to node 0: seen when its numa_maps is read
        // again, WALK_EVERY rounds after the last read (round 6).
        for round in 3..=6 {
            write_proc(
                &dir,
                10,
                100 * round,
                5000,
                "1 default anon=900 N0=800 N1=100\n",
            );
            let want = if round == 6 {
                vec![Change::Set(10, 0)]
            } else {
                vec![]
            };
            assert_eq!(s.scan(0).0, want, "round {round}");
        }
        // It exits.
        fs::remove_dir_all(dir.join("10")).unwrap();
        assert_eq!(s.scan(0).0, vec![Change::Clear(10)]);
        assert_eq!(s.with_node(), 0);
        // Our own pid is never looked at, not even by a walk (round 9).
        write_proc(&dir, 12, 300, 5000, on1);
        assert!(!s.scan(12).1.walked);
        write_proc(&dir, 12, 400, 5000, on1);
        let (ch, r) = s.scan(12);
        assert!(r.walked);
        assert_eq!((ch, r.candidates), (vec![], 0));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn finds_new_processes_the_next_round() {
        let dir = std::env::temp_dir().join(format!("memloc-walk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let on1 = "1 default anon=900 N1=900\n";
        write_proc(&dir, 20, 100, 5000, on1);
        write_proc(&dir, 22, 100, 10, on1); // small
        let mut s = Scanner::new(&dir, 2);
        assert!(s.scan(0).1.walked);
        // Appears after the walk: looked at the next round (2), which
        // sees it new, and read the round after, once it ran (3).
        write_proc(&dir, 21, 100, 5000, on1);
        let (ch, r) = s.scan(0);
        assert!(!r.walked);
        assert_eq!(ch, vec![]);
        write_proc(&dir, 21, 150, 5000, on1);
        assert_eq!(s.scan(0).0, vec![Change::Set(21, 1)]);
        // A small one that grows is seen at the next walk (round 5) and
        // read then: it ran since it was last seen.
        write_proc(&dir, 22, 200, 5000, on1);
        assert_eq!(s.scan(0).0, vec![], "round 4: not looked at");
        let (ch, r) = s.scan(0);
        assert!(r.walked);
        assert_eq!(ch, vec![Change::Set(22, 1)], "round 5: ran since round 1");
        fs::remove_dir_all(&dir).unwrap();
    }
}
