//! Where a row lives: the partition of a key hash and the data nodes holding each
//! partition's replicas, primary first. One definition for the embedded cluster's
//! fragments (`api::dict`), the data nodes' TC and the API client's routing, so that
//! every party places a key the same way.
//!
//! Invariants: partition `p` belongs to node group `p % groups`; its replicas are the
//! group's nodes rotated by `p / groups` (NDB spreads primaries over a group's nodes).

use crate::transport::NodeId;

/// NDB's default hash map size: a key's hash picks one of these buckets, the bucket
/// picks the partition, so partitions can later be added by moving buckets.
pub const HASH_MAP_BUCKETS: u64 = 3840;

/// The partition of a key hash in a table of `partitions` partitions.
#[inline]
pub fn partition_of_hash(h: u64, partitions: usize) -> usize {
    debug_assert!(partitions > 0);
    ((h % HASH_MAP_BUCKETS) % partitions.max(1) as u64) as usize
}

/// The position in its node group of replica `replica` of `partition` (0: primary),
/// for `groups` node groups of `group_size` nodes.
#[inline]
pub fn replica_slot(partition: usize, replica: usize, groups: usize, group_size: usize) -> usize {
    (partition / groups + replica) % group_size
}

/// The node group holding `partition` of a table, among `groups` node groups.
pub fn node_group_of(partition: usize, groups: usize) -> usize {
    partition % groups
}

/// The nodes holding `partition`'s replicas, primary first.
pub fn replica_nodes(partition: usize, node_groups: &[Vec<NodeId>]) -> Vec<NodeId> {
    if node_groups.is_empty() {
        return Vec::new();
    }
    let group = &node_groups[node_group_of(partition, node_groups.len())];
    (0..group.len())
        .map(|r| group[replica_slot(partition, r, node_groups.len(), group.len())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_rotate_within_each_group() {
        let groups = vec![vec![2, 3], vec![4, 5]];
        assert_eq!(replica_nodes(0, &groups), vec![2, 3]);
        assert_eq!(replica_nodes(1, &groups), vec![4, 5]);
        assert_eq!(replica_nodes(2, &groups), vec![3, 2]);
        assert_eq!(replica_nodes(3, &groups), vec![5, 4]);
        assert_eq!(replica_nodes(4, &groups), vec![2, 3]);
        assert_eq!(partition_of_hash(3841, 4), 1);
        assert_eq!(partition_of_hash(7, 4), 3);
    }
}
