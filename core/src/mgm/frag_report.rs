//! `REPORT Fragmentation`: the built-in chkfrag. Per data node and table (hidden blob and
//! unique-index tables under their own names), the DataMemory pages the table's
//! fragment replicas on the node hold, how much of their bytes is free, and what
//! OPTIMIZE TABLE would give back now — the same figures as the `reclaimable_*` columns
//! of `ndbinfo.memory_per_fragment`, from the plans OPTIMIZE itself would follow
//! ([`crate::txn::fragment::Fragment::reclaimable`]).
//!
//! Output, one line per table holding pages on the node, then a total per node:
//! ```text
//! Node 2: test/def/t5: 1941 pages (fixed 613, var 1227, ordered index 101), 47% free; OPTIMIZE TABLE would give back 947 pages (29.6 MB): recommended
//! Node 2: test/def/t6d: 394 pages (fixed 124, var 246, ordered index 24), 33% free, 16 extents (16.0 MB); OPTIMIZE TABLE would give back 128 pages (4.0 MB) and 6 extents (6.0 MB): recommended
//! Node 2: OPTIMIZE TABLE of every table would give back 1075 pages (33.6 MB) and 6 extents (6.0 MB)
//! ```
//! OPTIMIZE TABLE is recommended for a table when it would give back at least
//! [`RECOMMEND_SHARE_PCT`] percent of the table's pages (or extents) and at least
//! [`RECOMMEND_MIN_PAGES`] pages (or one extent). A node without tables says so.

use crate::api::ClusterInner;
use crate::storage::PAGE_SIZE;

/// Share of a table's pages (or extents) OPTIMIZE must give back to be recommended.
pub const RECOMMEND_SHARE_PCT: u64 = 10;
/// Fewest pages OPTIMIZE must give back to be recommended.
pub const RECOMMEND_MIN_PAGES: u64 = 4;

/// `29.6 MB`.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / f64::from(1u32 << 20))
}

/// One table's figures on one node, summed over its fragment replicas there.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TableFragmentation {
    pub fixed_pages: u64,
    pub var_pages: u64,
    pub ordered_pages: u64,
    /// Free bytes in the fixed and var pages (free slots and var free space).
    pub free_bytes: u64,
    pub reclaimable_pages: u64,
    pub extents: u64,
    pub reclaimable_extents: u64,
    pub extent_bytes: u64,
}

impl TableFragmentation {
    pub fn pages(&self) -> u64 {
        self.fixed_pages + self.var_pages + self.ordered_pages
    }

    /// Whether OPTIMIZE TABLE is worth running (module docs).
    pub fn recommended(&self) -> bool {
        let pages = self.reclaimable_pages >= RECOMMEND_MIN_PAGES
            && self.reclaimable_pages * 100 >= self.pages() * RECOMMEND_SHARE_PCT;
        let extents = self.reclaimable_extents >= 1
            && self.reclaimable_extents * 100 >= self.extents * RECOMMEND_SHARE_PCT;
        pages || extents
    }
}

/// (fq_name, figures) of every table with pages or extents on data node `node`, in
/// dictionary order.
pub fn fragmentation(cluster: &ClusterInner, node: u32) -> Vec<(String, TableFragmentation)> {
    let mut out = Vec::new();
    for t in cluster.dict.read().all() {
        let mut tf = TableFragmentation::default();
        for cell in t.all_cells().filter(|c| c.node_id == node) {
            let f = cell.state.lock();
            let m = f.memory();
            let rec = f.reclaimable();
            tf.fixed_pages += u64::from(m.fixed_pages);
            tf.var_pages += u64::from(m.var_pages);
            tf.ordered_pages += m.ordered.iter().map(|o| u64::from(o.1)).sum::<u64>();
            tf.free_bytes += m.fixed_free_slots * u64::from(m.fixed_slot_size) + m.var_free_bytes;
            tf.reclaimable_pages += u64::from(rec.pages());
            tf.extents += u64::from(f.disk_extents());
            tf.reclaimable_extents += u64::from(rec.extents);
            tf.extent_bytes = tf.extent_bytes.max(f.extent_bytes());
        }
        if tf.pages() > 0 || tf.extents > 0 {
            out.push((format!("{}/def/{}", t.database, t.def.name), tf));
        }
    }
    out
}

/// The report's lines for the data nodes in `nodes`.
pub fn fragmentation_lines(cluster: &ClusterInner, nodes: &[u32]) -> Vec<String> {
    let page = PAGE_SIZE as u64;
    let mut lines = Vec::new();
    for &id in nodes {
        let tables = fragmentation(cluster, id);
        if tables.is_empty() {
            lines.push(format!("Node {id}: no table holds pages on this node"));
            continue;
        }
        let (mut pages_total, mut extents_total, mut extent_bytes_total) = (0u64, 0u64, 0u64);
        for (name, tf) in &tables {
            let row_bytes = (tf.fixed_pages + tf.var_pages) * page;
            let mut line = format!(
                "Node {id}: {name}: {} pages (fixed {}, var {}, ordered index {}), {}% free",
                tf.pages(),
                tf.fixed_pages,
                tf.var_pages,
                tf.ordered_pages,
                (tf.free_bytes * 100).checked_div(row_bytes).unwrap_or(0)
            );
            if tf.extents > 0 {
                line.push_str(&format!(
                    ", {} extents ({})",
                    tf.extents,
                    mb(tf.extents * tf.extent_bytes)
                ));
            }
            let mut gain = format!(
                "{} pages ({})",
                tf.reclaimable_pages,
                mb(tf.reclaimable_pages * page)
            );
            if tf.extents > 0 {
                gain.push_str(&format!(
                    " and {} extents ({})",
                    tf.reclaimable_extents,
                    mb(tf.reclaimable_extents * tf.extent_bytes)
                ));
            }
            line.push_str(&format!("; OPTIMIZE TABLE would give back {gain}"));
            if tf.recommended() {
                line.push_str(": recommended");
            }
            lines.push(line);
            pages_total += tf.reclaimable_pages;
            extents_total += tf.reclaimable_extents;
            extent_bytes_total += tf.reclaimable_extents * tf.extent_bytes;
        }
        lines.push(format!(
            "Node {id}: OPTIMIZE TABLE of every table would give back {pages_total} pages ({}) and {extents_total} extents ({})",
            mb(pages_total * page),
            mb(extent_bytes_total)
        ));
    }
    lines
}
