//! Reads the CPU/cache/NUMA layout from a sysfs tree: the live `/sys`, or a
//! snapshot directory laid out like it. One code path for both, so a
//! snapshot from any machine can be explained offline.

use super::{MAX_CPUS, MAX_NODES};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

pub type CpuSet = BTreeSet<usize>;

/// What the kernel's topology code starts from, per online CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysTopo {
    /// One past the highest possible CPU id (`cpu/possible`; without it,
    /// one past the highest online CPU).
    pub nr_cpu_ids: usize,
    pub online: CpuSet,
    /// Indexed by CPU id (None for offline CPUs).
    pub cpus: Vec<Option<CpuInfo>>,
    /// Online node ids, and the SLIT row of each (same order as `nodes`).
    pub nodes: Vec<usize>,
    pub distance: Vec<Vec<usize>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    pub node: usize,
    pub package: usize,
    pub smt: CpuSet,
    /// CPUs sharing the L2 (x86 "cluster"), when the kernel reports it.
    pub cluster: Option<CpuSet>,
    /// CPUs sharing the last-level cache.
    pub llc: CpuSet,
}

impl SysTopo {
    pub fn cpu(&self, cpu: usize) -> &CpuInfo {
        self.cpus[cpu].as_ref().expect("online CPU")
    }

    pub fn node_index(&self, node: usize) -> usize {
        self.nodes
            .iter()
            .position(|&n| n == node)
            .expect("online node")
    }

    /// Every online CPU of `node`.
    pub fn node_cpus(&self, node: usize) -> CpuSet {
        self.online
            .iter()
            .copied()
            .filter(|&c| self.cpu(c).node == node)
            .collect()
    }

    /// Reads `ROOT/devices/system/{cpu,node}`. Errors name the file.
    pub fn read(root: &Path) -> Result<Self> {
        let cpu_dir = root.join("devices/system/cpu");
        let node_dir = root.join("devices/system/node");
        let online = parse_cpulist_file(&cpu_dir.join("online"))?;
        let max = *online
            .iter()
            .max()
            .ok_or_else(|| anyhow!("no online CPU"))?;

        // Nodes: every nodeN directory, its CPUs and its distance row.
        let mut nodes = vec![];
        let mut node_of = vec![None; max + 1];
        for (id, path) in numbered_entries(&node_dir, "node")? {
            if id >= MAX_NODES {
                bail!(
                    "{}: node {id} is beyond the {MAX_NODES} node ids scx_nimble supports",
                    path.display()
                );
            }
            let cpus = parse_cpulist_file(&path.join("cpulist"))?;
            for c in cpus.intersection(&online) {
                node_of[*c] = Some(id);
            }
            nodes.push((id, path));
        }
        if nodes.is_empty() {
            // A kernel without NUMA has no node directory: one node 0.
            nodes.push((0, PathBuf::new()));
            node_of.iter_mut().for_each(|n| *n = Some(0));
        }
        let mut distance = vec![];
        for (_, path) in &nodes {
            if path.as_os_str().is_empty() {
                distance.push(vec![10]);
                continue;
            }
            let file = path.join("distance");
            // SLIT distances are one byte: larger values are not a SLIT.
            let row: Vec<usize> = read(&file)?
                .split_whitespace()
                .map(|d| match d.parse::<u8>() {
                    Ok(v) => Ok(v as usize),
                    Err(_) => Err(bad(&file, "not a list of distances (0..=255)")),
                })
                .collect::<Result<_>>()?;
            if row.len() != nodes.len() {
                return Err(bad(
                    &file,
                    &format!("{} distances for {} nodes", row.len(), nodes.len()),
                ));
            }
            distance.push(row);
        }

        let mut cpus = vec![None; max + 1];
        let mut warned_no_cache = false;
        for &c in &online {
            let dir = cpu_dir.join(format!("cpu{c}"));
            let topo = dir.join("topology");
            let node = node_of[c].ok_or_else(|| {
                anyhow!("{}: CPU {c} is in no node's cpulist", node_dir.display())
            })?;
            let package = read(&topo.join("physical_package_id"))?
                .trim()
                .parse()
                .map_err(|_| bad(&topo.join("physical_package_id"), "not a number"))?;
            let smt = online_part(
                parse_cpulist_file(&topo.join("thread_siblings_list"))?,
                &online,
                c,
                &topo,
            )?;
            let cluster_file = topo.join("cluster_cpus_list");
            let cluster = match cluster_file.exists() {
                true => Some(online_part(
                    parse_cpulist_file(&cluster_file)?,
                    &online,
                    c,
                    &topo,
                )?),
                false => None,
            };
            let cache = dir.join("cache");
            let llc = match cache.exists() {
                true => online_part(read_llc(&cache)?, &online, c, &dir)?,
                // No cache information (some VMs and embedded kernels): the
                // node is taken as one LLC, as the lab's metrics do.
                false => {
                    if !warned_no_cache {
                        log::warn!(
                            "{}: no cache information: each NUMA node is taken as one LLC",
                            cache.display()
                        );
                        warned_no_cache = true;
                    }
                    online
                        .iter()
                        .copied()
                        .filter(|&o| node_of[o] == Some(node))
                        .collect()
                }
            };
            cpus[c] = Some(CpuInfo {
                node,
                package,
                smt,
                cluster,
                llc,
            });
        }
        // Possible CPUs bound the BPF tables a hotplugged CPU may later use.
        let possible = cpu_dir.join("possible");
        let nr_cpu_ids = match possible.exists() {
            true => parse_cpulist_file(&possible)?
                .last()
                .map_or(max + 1, |&c| (c + 1).max(max + 1)),
            false => max + 1,
        };
        Ok(SysTopo {
            nr_cpu_ids,
            online,
            cpus,
            nodes: nodes.into_iter().map(|(id, _)| id).collect(),
            distance,
        })
    }
}

/// The shared_cpu_list of the highest-level data or unified cache.
fn read_llc(cache: &Path) -> Result<CpuSet> {
    let mut best: Option<(usize, CpuSet)> = None;
    for (_, idx) in numbered_entries(cache, "index")? {
        if read(&idx.join("type"))?.trim() == "Instruction" {
            continue;
        }
        let level: usize = read(&idx.join("level"))?
            .trim()
            .parse()
            .map_err(|_| bad(&idx.join("level"), "not a number"))?;
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, parse_cpulist_file(&idx.join("shared_cpu_list"))?));
        }
    }
    best.map(|(_, set)| set)
        .ok_or_else(|| anyhow!("{}: no data or unified cache", cache.display()))
}

/// `set` restricted to online CPUs; it must contain `cpu` itself.
fn online_part(set: CpuSet, online: &CpuSet, cpu: usize, dir: &Path) -> Result<CpuSet> {
    if !set.contains(&cpu) {
        bail!(
            "{}: CPU {cpu}'s own mask does not contain it",
            dir.display()
        );
    }
    Ok(set.intersection(online).copied().collect())
}

/// `DIR/PREFIXN` entries, sorted by N.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(usize, PathBuf)>> {
    let mut out = vec![];
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && prefix == "node" => return Ok(out),
        Err(e) => return Err(anyhow!("{}: {e}", dir.display())),
    };
    for e in entries {
        let e = e.with_context(|| dir.display().to_string())?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix(prefix).and_then(|n| n.parse().ok()) {
            out.push((n, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn bad(path: &Path, why: &str) -> anyhow::Error {
    anyhow!("{}: {why}", path.display())
}

fn parse_cpulist_file(path: &Path) -> Result<CpuSet> {
    parse_cpulist(&read(path)?).map_err(|why| bad(path, &why))
}

/// Parses the kernel's cpulist format: "0-3,8,10-11" (empty: no CPU).
/// CPU ids are bounded by the BPF tables (MAX_CPUS): a larger one is an
/// error, checked before a range is expanded.
pub fn parse_cpulist(s: &str) -> std::result::Result<CpuSet, String> {
    let mut set = CpuSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let num = |x: &str| {
            let id = x
                .parse::<usize>()
                .map_err(|_| format!("bad cpulist '{}'", s.trim()))?;
            match id < MAX_CPUS {
                true => Ok(id),
                false => Err(format!(
                    "CPU {id} is beyond the {MAX_CPUS} CPU ids scx_nimble supports"
                )),
            }
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("bad range '{part}'"));
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(num(part)?);
            }
        }
    }
    Ok(set)
}

/// Formats a set the way the kernel prints cpulists.
pub fn format_cpulist(set: &CpuSet) -> String {
    let mut out: Vec<String> = vec![];
    let mut it = set.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().unwrap();
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_round_trip() {
        let s = parse_cpulist("0-3,8,10-11\n").unwrap();
        assert_eq!(
            s.iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(format_cpulist(&s), "0-3,8,10-11");
        assert!(parse_cpulist("").unwrap().is_empty());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("x").is_err());
    }

    /// Writes a sysfs snapshot of `t` under a fresh directory.
    fn write_snapshot(t: &SysTopo) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "nimble-sysfs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let w = |p: &str, v: String| {
            let p = root.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, v + "\n").unwrap();
        };
        w("devices/system/cpu/online", format_cpulist(&t.online));
        for &c in &t.online {
            let i = t.cpu(c);
            let d = format!("devices/system/cpu/cpu{c}");
            w(
                &format!("{d}/topology/physical_package_id"),
                i.package.to_string(),
            );
            w(
                &format!("{d}/topology/thread_siblings_list"),
                format_cpulist(&i.smt),
            );
            w(&format!("{d}/cache/index0/level"), "1".into());
            w(&format!("{d}/cache/index0/type"), "Instruction".into());
            w(
                &format!("{d}/cache/index0/shared_cpu_list"),
                "0-1000".into(),
            );
            w(&format!("{d}/cache/index3/level"), "3".into());
            w(&format!("{d}/cache/index3/type"), "Unified".into());
            w(
                &format!("{d}/cache/index3/shared_cpu_list"),
                format_cpulist(&i.llc),
            );
        }
        for (k, &n) in t.nodes.iter().enumerate() {
            let d = format!("devices/system/node/node{n}");
            w(&format!("{d}/cpulist"), format_cpulist(&t.node_cpus(n)));
            w(
                &format!("{d}/distance"),
                t.distance[k]
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        root
    }

    #[test]
    fn snapshot_round_trip_and_broken_files() {
        use crate::topology::domains::tests::{machine, Spec};
        let mut t = machine(&Spec {
            nodes: 2,
            nodes_per_pkg: 1,
            llcs_per_node: 2,
            cores_per_llc: 2,
            smt: 2,
            distance: vec![vec![10, 21], vec![21, 10]],
        });
        t.cpus.iter_mut().flatten().for_each(|c| c.cluster = None);
        let root = write_snapshot(&t);
        assert_eq!(SysTopo::read(&root).unwrap(), t);

        fs::write(
            root.join("devices/system/node/node1/distance"),
            "21 10 30\n",
        )
        .unwrap();
        let e = SysTopo::read(&root).unwrap_err().to_string();
        assert!(e.contains("node1/distance: 3 distances for 2 nodes"), "{e}");
        fs::write(root.join("devices/system/node/node1/distance"), "21 10\n").unwrap();
        fs::remove_file(root.join("devices/system/cpu/cpu3/topology/thread_siblings_list"))
            .unwrap();
        let e = SysTopo::read(&root).unwrap_err().to_string();
        assert!(
            e.contains("cpu3/topology/thread_siblings_list: No such file"),
            "{e}"
        );
        fs::write(root.join("devices/system/cpu/online"), "0-x\n").unwrap();
        let e = SysTopo::read(&root).unwrap_err().to_string();
        assert!(e.contains("cpu/online: bad cpulist"), "{e}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn hostile_snapshots_are_refused_before_anything_grows() {
        use crate::topology::domains::tests::vm_n2l4;
        let t = vm_n2l4();
        let root = write_snapshot(&t);
        let online = root.join("devices/system/cpu/online");
        for bad in ["0,4000000000\n", "0-3000000000\n", "0-512\n"] {
            fs::write(&online, bad).unwrap();
            let e = SysTopo::read(&root).unwrap_err().to_string();
            assert!(e.contains("beyond the 512 CPU ids"), "{bad}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        fs::write(&online, "0-7\n").unwrap();
        let far = root.join("devices/system/node/node4000000000");
        fs::create_dir_all(&far).unwrap();
        let e = SysTopo::read(&root).unwrap_err().to_string();
        assert!(
            e.contains("node 4000000000 is beyond the 32 node ids"),
            "{e}"
        );
        fs::remove_dir_all(&far).unwrap();
        // No cache information: each node is one LLC, not a panic.
        for c in 0..8 {
            fs::remove_dir_all(root.join(format!("devices/system/cpu/cpu{c}/cache"))).unwrap();
        }
        let r = SysTopo::read(&root).unwrap();
        assert_eq!(r.cpu(5).llc, (4..8).collect::<CpuSet>());
        fs::remove_dir_all(&root).unwrap();
    }
}
