//! The order in which a CPU consumes LLC dispatch queues: its own LLC, then
//! the other LLCs of its node, then other nodes from nearest to farthest.
//! Within one tier the order is rotated by the consumer's own position, so the
//! LLCs of a tier do not all raid the same victim first.

use super::Layout;

/// For each LLC, every LLC id in the order its CPUs consume them.
pub fn steal_order(layout: &Layout) -> Vec<Vec<usize>> {
    (0..layout.nr_llcs())
        .map(|llc| order_for(layout, llc))
        .collect()
}

/// For each node, every node id from itself outwards by distance (ties by
/// id, for determinism): the order in which work crosses nodes.
pub fn node_order(layout: &Layout) -> Vec<Vec<usize>> {
    (0..layout.nr_nodes())
        .map(|own| {
            let dist = &layout.node_distance[own];
            let mut nodes: Vec<usize> = (0..layout.nr_nodes()).collect();
            nodes.sort_by_key(|&n| (n != own, dist[n], n));
            nodes
        })
        .collect()
}

/// `levels[a][b]`: the NUMA tier of node b seen from node a: 0 for a itself,
/// 1 for the nearest remote distance of a's row, 2 for the next, ... (how
/// far a steal travelled, for the statistics).
pub fn node_levels(layout: &Layout) -> Vec<Vec<usize>> {
    layout
        .node_distance
        .iter()
        .enumerate()
        .map(|(own, row)| {
            let mut remote: Vec<usize> = row
                .iter()
                .enumerate()
                .filter(|&(n, _)| n != own)
                .map(|(_, &d)| d)
                .collect();
            remote.sort();
            remote.dedup();
            (0..row.len())
                .map(|n| {
                    if n == own {
                        0
                    } else {
                        1 + remote.iter().position(|&d| d == row[n]).unwrap()
                    }
                })
                .collect()
        })
        .collect()
}

fn order_for(layout: &Layout, own: usize) -> Vec<usize> {
    let nodes = node_order(layout).swap_remove(layout.llc_node[own]);
    let mut order = vec![own];
    for node in nodes {
        let tier: Vec<usize> = (0..layout.nr_llcs())
            .filter(|&l| l != own && layout.llc_node[l] == node)
            .collect();
        order.extend(rotate_after(&tier, own));
    }
    order
}

/// `tier` (sorted ids) starting from the first id above `own`, wrapping.
fn rotate_after(tier: &[usize], own: usize) -> Vec<usize> {
    let start = tier.iter().position(|&l| l > own).unwrap_or(0);
    tier[start..]
        .iter()
        .chain(&tier[..start])
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{grid, srikar4};

    fn is_permutation(order: &[usize], n: usize) -> bool {
        let mut v = order.to_vec();
        v.sort();
        v == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn nodes_nearest_first() {
        let l = grid(4, 1, 2, srikar4());
        assert_eq!(node_order(&l)[0], vec![0, 1, 2, 3]);
        assert_eq!(node_order(&l)[2], vec![2, 3, 0, 1]);
    }

    #[test]
    fn node_levels_rank_distances_per_row() {
        let l = grid(4, 1, 2, srikar4());
        let lv = node_levels(&l);
        assert_eq!(lv[0], vec![0, 1, 2, 2]);
        assert_eq!(lv[3], vec![2, 2, 1, 0]);
        let l = grid(2, 2, 2, vec![vec![10, 21], vec![21, 10]]);
        assert_eq!(node_levels(&l), vec![vec![0, 1], vec![1, 0]]);
    }

    #[test]
    fn flat_single_llc() {
        let l = grid(1, 1, 4, vec![vec![10]]);
        assert_eq!(steal_order(&l), vec![vec![0]]);
    }

    #[test]
    fn two_nodes_two_llcs_each() {
        let l = grid(2, 2, 2, vec![vec![10, 20], vec![20, 10]]);
        let o = steal_order(&l);
        assert_eq!(o[0], vec![0, 1, 2, 3]);
        assert_eq!(o[1], vec![1, 0, 2, 3]);
        assert_eq!(o[2], vec![2, 3, 0, 1]);
        assert_eq!(o[3], vec![3, 2, 0, 1]);
    }

    #[test]
    fn four_nodes_by_distance() {
        // Srikar's machine: 0-1 and 2-3 at 20, the rest at 40.
        let d = srikar4();
        let l = grid(4, 1, 2, d);
        let o = steal_order(&l);
        assert_eq!(o[0], vec![0, 1, 2, 3]);
        assert_eq!(o[1], vec![1, 0, 2, 3]);
        assert_eq!(o[2], vec![2, 3, 0, 1]);
        assert_eq!(o[3], vec![3, 2, 0, 1]);
    }

    #[test]
    fn same_node_tier_rotates() {
        let l = grid(1, 4, 2, vec![vec![10]]);
        let o = steal_order(&l);
        assert_eq!(o[0], vec![0, 1, 2, 3]);
        assert_eq!(o[1], vec![1, 2, 3, 0]);
        assert_eq!(o[2], vec![2, 3, 0, 1]);
        assert_eq!(o[3], vec![3, 0, 1, 2]);
    }

    #[test]
    fn every_order_is_a_permutation_own_first_nearer_before_farther() {
        let d = vec![
            vec![10, 30, 20, 40],
            vec![30, 10, 40, 20],
            vec![20, 40, 10, 30],
            vec![40, 20, 30, 10],
        ];
        let l = grid(4, 3, 2, d.clone());
        for (own, order) in steal_order(&l).iter().enumerate() {
            assert!(is_permutation(order, l.nr_llcs()));
            assert_eq!(order[0], own);
            let me = l.llc_node[own];
            let dists: Vec<usize> = order.iter().map(|&x| d[me][l.llc_node[x]]).collect();
            assert!(dists.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
        }
    }
}
