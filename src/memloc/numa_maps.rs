//! What `/proc/PID/numa_maps` says about a process's memory, and the node
//! the scheduler should prefer for it. Pure functions, tested here.

/// Pages per node of one process, summed over its mappings (`N<node>=<pages>`
/// fields). Huge pages count by their `kernelpagesize_kB` in 4 KiB units, so
/// a 2 MiB page weighs 512. File mappings are left out: shared libraries
/// and the page cache sit wherever they were first read, for every process
/// at once (the kernel's NUMA balancing skips read-only file mappings too).
pub fn pages_per_node(text: &str, nr_nodes: usize) -> Vec<u64> {
    let mut pages = vec![0u64; nr_nodes];
    for line in text.lines() {
        if line.contains(" file=") {
            continue;
        }
        let mut scale = 1u64;
        let mut counts: Vec<(usize, u64)> = Vec::new();
        for field in line.split_ascii_whitespace() {
            if let Some(kb) = field.strip_prefix("kernelpagesize_kB=") {
                scale = kb.parse::<u64>().map_or(1, |kb| (kb / 4).max(1));
            } else if let Some(rest) = field.strip_prefix('N') {
                if let Some((node, n)) = rest.split_once('=') {
                    if let (Ok(node), Ok(n)) = (node.parse::<usize>(), n.parse::<u64>()) {
                        counts.push((node, n));
                    }
                }
            }
        }
        for (node, n) in counts {
            if let Some(p) = pages.get_mut(node) {
                *p += n * scale;
            }
        }
    }
    pages
}

/// Share of a process's pages a node must hold to be preferred, in percent.
/// Below it the memory is spread (interleaved, or touched from everywhere)
/// and no node is worth a move: the kernel's task_numa_placement() too
/// leaves a task with spread faults on no preferred node of its own.
pub const PREFER_PCT: u64 = 60;
/// Share (percent) at which a preferred node is kept: a node preferred once
/// stays so until its share drops below this, so memory near the threshold
/// does not flip the task between nodes every scan.
pub const KEEP_PCT: u64 = 50;

/// The fewest pages (4 KiB: 1 MiB) worth a preference: below, a process
/// runs wherever its cache is.
pub const MIN_PAGES: u64 = crate::bpf_intf::nimble_limits_MEM_MIN_PAGES as u64;

/// The node to prefer given the pages per node, and the node preferred
/// before (if any); None if no node holds enough or there are too few pages.
pub fn preferred(pages: &[u64], before: Option<usize>) -> Option<usize> {
    let total: u64 = pages.iter().sum();
    if total < MIN_PAGES {
        return None;
    }
    if let Some(b) = before {
        if pages.get(b).is_some_and(|&p| p * 100 >= total * KEEP_PCT) {
            return Some(b);
        }
    }
    let (best, &most) = pages
        .iter()
        .enumerate()
        .max_by_key(|&(n, &p)| (p, usize::MAX - n))?;
    (most * 100 >= total * PREFER_PCT).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c0a00000 default file=/usr/bin/memhog mapped=2 N0=2 kernelpagesize_kB=4
55d0c2400000 default heap anon=3 dirty=3 N0=1 N1=2 kernelpagesize_kB=4
7f0000000000 default anon=16384 dirty=16384 N1=16000 N0=384 kernelpagesize_kB=4
7f2000000000 default anon=2 dirty=2 N1=2 kernelpagesize_kB=2048
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
7ffd11111000 default
";

    #[test]
    fn sums_pages_per_node_with_huge_pages_weighted() {
        // The file mapping (the binary) is left out.
        assert_eq!(
            pages_per_node(SAMPLE, 2),
            vec![1 + 384 + 3, 2 + 16000 + 1024]
        );
    }

    #[test]
    fn ignores_nodes_past_the_topology_and_odd_fields() {
        let text = "1000 default N0=5 N7=9 Nx=3 N1=abc anon=2\n2000 default file=/x N1=7\n";
        assert_eq!(pages_per_node(text, 2), vec![5, 0]);
    }

    #[test]
    fn prefers_a_node_with_most_of_the_memory() {
        assert_eq!(preferred(&[390, 17026], None), Some(1));
        assert_eq!(preferred(&[700, 300], None), Some(0));
        // Spread: no node holds 60 %.
        assert_eq!(preferred(&[450, 550], None), None);
        assert_eq!(preferred(&[400, 300, 300], None), None);
        // Too little memory to be worth a move.
        assert_eq!(preferred(&[0, 255], None), None);
        assert_eq!(preferred(&[0, 256], None), Some(1));
        // A tie goes to the lower node, only if it reaches the share.
        assert_eq!(preferred(&[600, 0, 0, 400], None), Some(0));
    }

    #[test]
    fn keeps_a_preferred_node_down_to_half() {
        assert_eq!(preferred(&[450, 550], Some(1)), Some(1));
        assert_eq!(preferred(&[500, 500], Some(0)), Some(0));
        // Below half it goes, to a node that now holds 60 % or none.
        assert_eq!(preferred(&[350, 650], Some(0)), Some(1));
        assert_eq!(preferred(&[450, 400, 150], Some(1)), None);
    }
}
