//! Per-cgroup stats: the cgroups with runnable tasks, the share of the
//! machine their cpu.weight entitles them to, and the CPU they got.
//!
//! BPF keeps one slot per cgroup (`cgs[]` in cgroup.bpf.h): its weight, the
//! weight it lends its parent while it has runnable tasks (`lent`) and the
//! sum its own tasks and active children weigh (`total`). The shares are
//! computed here from those, the way the hot path divides weight; the CPU
//! received comes from the kernel's own accounting (cpu.stat usage_usec),
//! not from the scheduler, so the two can be compared.

use super::{Cgroup, Metrics};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};

/// One BPF slot as userspace reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slot {
    pub used: bool,
    pub cgid: u64,
    /// Parent's slot, -1 for a child of the root.
    pub parent: i32,
    /// cpu.weight (1..10000), as set (also while idle).
    pub weight: u64,
    /// cpu.idle.
    pub idle: bool,
    /// Weight counted in the parent's total while active (shifted units).
    pub lent: u64,
    /// The slot's own tasks plus active children (shifted units); <= 0: idle.
    pub total: i64,
}

impl Slot {
    fn active(&self) -> bool {
        self.used && self.total > 0
    }
}

/// Each active slot's share of the machine (0..1), None for an idle or
/// unused slot: a child of the root gets its lent weight over what all
/// active children of the root lend (the root's own tasks are not tracked),
/// a deeper one that fraction of its parent's total times the parent's share.
pub fn shares(slots: &[Slot]) -> Vec<Option<f64>> {
    let top: f64 = slots
        .iter()
        .filter(|s| s.active() && s.parent < 0)
        .map(|s| s.lent as f64)
        .sum();
    let share_of = |mut i: usize| -> Option<f64> {
        let mut f = 1.0;
        // Slots are reused: a parent index may be stale, so bound the climb.
        for _ in 0..slots.len().min(64) {
            let s = slots.get(i).filter(|s| s.active())?;
            if s.parent < 0 {
                return (top > 0.0).then(|| f * s.lent as f64 / top);
            }
            let p = slots.get(s.parent as usize).filter(|p| p.active())?;
            f *= s.lent as f64 / p.total as f64;
            i = s.parent as usize;
        }
        None
    };
    (0..slots.len()).map(share_of).collect()
}

/// Names cgroups by id: a cgroup's id is its directory's inode in cgroupfs.
/// The walk is redone only for an id neither it nor the last walk saw (a
/// new cgroup): one that no walk finds (removed, or outside the mount) does
/// not make every interval walk the tree again.
pub struct Names {
    root: PathBuf,
    by_id: HashMap<u64, String>,
    unseen: HashSet<u64>,
}

impl Names {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Names {
            root: root.into(),
            by_id: HashMap::new(),
            unseen: HashSet::new(),
        }
    }

    fn rescan(&mut self) {
        fn walk(dir: &Path, rel: &str, out: &mut HashMap<u64, String>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            // d_type and d_ino from the directory read itself: a stat per
            // entry was ~40 per cgroup (its files), 80 000 statx calls and
            // 9.5 s of a busy TCG guest for 2 000 cgroups.
            for e in rd.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                let path = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                out.insert(e.ino(), path.clone());
                walk(&e.path(), &path, out);
            }
        }
        self.by_id.clear();
        walk(&self.root.clone(), "", &mut self.by_id);
    }

    /// The path of each id below the root ("system.slice/x.service");
    /// ids not found (removed since) are left out.
    pub fn resolve(&mut self, ids: &[u64]) -> HashMap<u64, String> {
        let new = |n: &Self, id: &u64| !n.by_id.contains_key(id) && !n.unseen.contains(id);
        if ids.iter().any(|id| new(self, id)) {
            self.rescan();
            self.unseen = ids
                .iter()
                .filter(|id| !self.by_id.contains_key(id))
                .copied()
                .collect();
        }
        ids.iter()
            .filter_map(|id| Some((*id, self.by_id.get(id)?.clone())))
            .collect()
    }

    /// usage_usec of the cgroup at `path` (0 if unreadable).
    pub fn usage_us(&self, path: &str) -> u64 {
        std::fs::read_to_string(self.root.join(path).join("cpu.stat"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

/// The metrics of every active slot, by path.
pub fn collect(slots: &[Slot], names: &mut Names) -> BTreeMap<String, Cgroup> {
    let shares = shares(slots);
    let active: Vec<usize> = (0..slots.len()).filter(|&i| shares[i].is_some()).collect();
    let ids: Vec<u64> = active.iter().map(|&i| slots[i].cgid).collect();
    let paths = names.resolve(&ids);
    active
        .into_iter()
        .filter_map(|i| {
            let path = paths.get(&slots[i].cgid)?;
            let cg = Cgroup {
                weight: slots[i].weight,
                idle: slots[i].idle as u64,
                share_pct: shares[i].unwrap_or(0.0) * 100.0,
                usage_us: names.usage_us(path),
            };
            Some((path.clone(), cg))
        })
        .collect()
}

/// [`top_by_cpu`] between two snapshots, over the time between them by the
/// scheduler's clock; when that went back (a restart), over `fallback`
/// seconds, or nothing without one.
pub fn top_between<'a>(
    prev: &Metrics,
    cur: &'a Metrics,
    fallback: Option<f64>,
    n: usize,
) -> Vec<(&'a str, &'a Cgroup, f64)> {
    let dt = cur.uptime_s - prev.uptime_s;
    let secs = match (dt > 0.0, fallback) {
        (true, _) => dt,
        (false, Some(s)) => s,
        (false, None) => return vec![],
    };
    top_by_cpu(&prev.cgroups, &cur.cgroups, secs, cur.cpus.len(), n)
}

/// The CPU each cgroup got between two samples `secs` apart on `nr_cpus`
/// CPUs, in % of the machine, highest first, at most `n`.
pub fn top_by_cpu<'a>(
    prev: &BTreeMap<String, Cgroup>,
    cur: &'a BTreeMap<String, Cgroup>,
    secs: f64,
    nr_cpus: usize,
    n: usize,
) -> Vec<(&'a str, &'a Cgroup, f64)> {
    let cap = secs * 1e6 * nr_cpus.max(1) as f64;
    let mut v: Vec<_> = cur
        .iter()
        .map(|(path, c)| {
            let before = prev.get(path).map_or(c.usage_us, |p| p.usage_us);
            let used = c.usage_us.saturating_sub(before) as f64;
            let pct = if cap > 0.0 { used / cap * 100.0 } else { 0.0 };
            (path.as_str(), c, pct)
        })
        .collect();
    v.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(b.0)));
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1 << crate::bpf_intf::nimble_limits_WEIGHT_SHIFT;

    fn slot(parent: i32, weight: u64, total: i64) -> Slot {
        Slot {
            used: true,
            cgid: 100 + weight,
            parent,
            weight,
            idle: false,
            lent: if total > 0 { weight * S } else { 0 },
            total,
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn siblings_split_by_weight() {
        // 100 and 400, 8 nice-0 tasks each.
        let s = [slot(-1, 100, 800 * S as i64), slot(-1, 400, 800 * S as i64)];
        let sh = shares(&s);
        assert!(close(sh[0], 0.2) && close(sh[1], 0.8), "{sh:?}");
    }

    #[test]
    fn depth_three_is_the_product_of_fractions() {
        // s1 (100) / {a (100), b (300)}, s2 (300) / c (200) / {x, y (100)}:
        // the tree of tests/guest/cgroup_weights.sh, each leaf with tasks.
        let t = 400 * S as i64;
        let s = [
            slot(-1, 100, 400 * S as i64), // 0 s1: a + b lend 100 + 300
            slot(0, 100, t),               // 1 a
            slot(0, 300, t),               // 2 b
            slot(-1, 300, 200 * S as i64), // 3 s2: c lends 200
            slot(3, 200, 200 * S as i64),  // 4 c: x + y lend 100 + 100
            slot(4, 100, t),               // 5 x
            slot(4, 100, t),               // 6 y
        ];
        let sh = shares(&s);
        let want = [0.25, 0.0625, 0.1875, 0.75, 0.75, 0.375, 0.375];
        for (i, w) in want.iter().enumerate() {
            assert!(close(sh[i], *w), "slot {i}: {:?} want {w}", sh[i]);
        }
    }

    #[test]
    fn idle_unused_and_stale_slots_have_no_share() {
        let mut s = vec![slot(-1, 100, 100 * S as i64), slot(-1, 400, 0)];
        s.push(Slot {
            used: false,
            ..slot(-1, 50, 10)
        });
        // A child whose parent slot is idle (freed and reused): no share,
        // and a cycle through stale parents ends.
        s.push(slot(1, 100, 10));
        s.push(slot(5, 100, 10));
        s.push(slot(4, 100, 10));
        let sh = shares(&s);
        assert!(close(sh[0], 1.0), "{sh:?}");
        assert_eq!(&sh[1..], &[None, None, None, None, None]);
    }

    #[test]
    fn top_by_cpu_is_the_interval_not_the_total() {
        let cg = |usage_us| Cgroup {
            weight: 100,
            idle: 0,
            share_pct: 50.0,
            usage_us,
        };
        let prev = BTreeMap::from([("a".to_string(), cg(9_000_000)), ("b".to_string(), cg(0))]);
        let cur = BTreeMap::from([
            ("a".to_string(), cg(9_500_000)),
            ("b".to_string(), cg(1_500_000)),
            ("new".to_string(), cg(7_000_000)),
        ]);
        // 2 s on 1 CPU: b used 75 %, a 25 %; a cgroup new since the last
        // sample has no interval yet.
        let top = top_by_cpu(&prev, &cur, 2.0, 1, 2);
        let got: Vec<_> = top
            .iter()
            .map(|(p, _, pct)| (*p, pct.round() as u64))
            .collect();
        assert_eq!(got, [("b", 75), ("a", 25)]);
    }

    #[test]
    fn names_come_from_cgroupfs_inodes() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("nimble-cg-{}", std::process::id()));
        let leaf = dir.join("system.slice/x.service");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(leaf.join("cpu.stat"), "usage_usec 1234\nuser_usec 1\n").unwrap();
        let ino = std::fs::metadata(&leaf).unwrap().ino();
        let mut names = Names::new(&dir);
        let got = names.resolve(&[ino, 1]);
        assert_eq!(
            got.get(&ino).map(String::as_str),
            Some("system.slice/x.service")
        );
        assert_eq!(got.len(), 1, "an unknown id is left out");
        assert_eq!(names.usage_us("system.slice/x.service"), 1234);
        // An id no walk found does not walk again (one walk of 2 000
        // cgroups is seconds of a busy small machine); a new id does.
        let late = dir.join("late");
        std::fs::create_dir(&late).unwrap();
        let late_ino = std::fs::metadata(&late).unwrap().ino();
        assert!(names.resolve(&[1]).is_empty());
        assert!(
            !names.by_id.contains_key(&late_ino),
            "walked again for an unseen id"
        );
        let got = names.resolve(&[late_ino, 1]);
        assert_eq!(got.get(&late_ino).map(String::as_str), Some("late"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
