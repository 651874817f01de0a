//! `REPORT DiskPageBuffer`: per data node, the DiskPageBufferMemory page cache's state and
//! the advisor's predicted hit ratio at other sizes, from the same sources as
//! `ndbinfo.diskpagebuffer` and `ndbinfo.diskpagebuffer_advice`
//! ([`crate::disk::pgman::PageCache::stats`] and [`crate::disk::pgman::PageCache::advice`]).
//!
//! Output, one block per node (ndb_mgm's `Node N: ...` lines):
//! ```text
//! Node 2: Disk page buffer 64M (2048 pages), 1830 used, 12 dirty, hit ratio 93.1% (page_requests 123456, pages_read 8512)
//! Node 2: predicted hit ratio at 16M: 71.0%
//! Node 2: predicted hit ratio at 64M: 93.0% (current size)
//! Node 2: predicted hit ratio at 128M: 97.2%
//! ```
//! The sizes are [`crate::ndbinfo::ADVICE_SIZES_MB`] plus the current size when it is not
//! one of them, in increasing order. Hit ratios are NDB's:
//! `100 × direct_return / (direct_return + wait_io)`, one decimal. Before the first page
//! request there is nothing to measure or predict, and the report says so.

use crate::api::ClusterInner;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::ndbinfo::ADVICE_SIZES_MB;

/// `64M`, `1G`, `4096K`: the largest unit that divides `bytes` exactly (config.ini's).
pub fn size_text(bytes: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    if bytes >= G && bytes.is_multiple_of(G) {
        format!("{}G", bytes / G)
    } else if bytes >= M && bytes.is_multiple_of(M) {
        format!("{}M", bytes / M)
    } else if bytes >= K && bytes.is_multiple_of(K) {
        format!("{}K", bytes / K)
    } else {
        bytes.to_string()
    }
}

/// The advice sizes in bytes with `current_bytes` added, sorted, without duplicates.
pub fn advice_sizes_bytes(current_bytes: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = ADVICE_SIZES_MB.iter().map(|mb| mb << 20).collect();
    if current_bytes > 0 && !sizes.contains(&current_bytes) {
        sizes.push(current_bytes);
    }
    sizes.sort_unstable();
    sizes
}

/// The report's lines for the data nodes in `nodes` (in the cluster's node order).
pub fn disk_page_buffer_lines(cluster: &ClusterInner, nodes: &[u32]) -> Vec<String> {
    let mut lines = Vec::new();
    for n in cluster
        .data_nodes
        .iter()
        .filter(|n| nodes.contains(&n.node_id))
    {
        let id = n.node_id;
        let st = n.disk.pgman.stats();
        let current_bytes = st.capacity_pages as u64 * DISK_PAGE_SIZE as u64;
        let head = format!(
            "Node {id}: Disk page buffer {} ({} pages), {} used, {} dirty",
            size_text(current_bytes),
            st.capacity_pages,
            st.resident_pages,
            st.dirty_pages
        );
        let measured = st.page_requests_direct_return + st.page_requests_wait_io;
        if measured == 0 {
            lines.push(format!(
                "{head}, no page requests yet (page_requests {}, pages_read {})",
                st.page_requests(),
                st.pages_read
            ));
            lines.push(format!(
                "Node {id}: no hit ratio predictions until pages have been requested"
            ));
            continue;
        }
        lines.push(format!(
            "{head}, hit ratio {:.1}% (page_requests {}, pages_read {})",
            st.hit_ratio_pct(),
            st.page_requests(),
            st.pages_read
        ));
        for (bytes, pct) in n.disk.pgman.advice(&advice_sizes_bytes(current_bytes)) {
            let mark = if bytes == current_bytes {
                " (current size)"
            } else {
                ""
            };
            lines.push(format!(
                "Node {id}: predicted hit ratio at {}: {pct:.1}%{mark}",
                size_text(bytes)
            ));
        }
    }
    lines
}
