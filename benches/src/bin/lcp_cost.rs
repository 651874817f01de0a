//! Issue 6, "checkpoint cost follows change, not size": the table
//! (`kv_table`) loaded with N rows, then
//! - a first local checkpoint, which writes every row (a full LCP);
//! - rounds of "update 1% of the rows (random keys), then one LCP", whose partial LCPs
//!   write the changed rows plus the rows of the few parts they write in full (the ALL
//!   range rotates over the 2048 parts, so several consecutive rounds are reported).
//!
//! Each LCP's time (`LcpStats::elapsed_us`, which includes the global checkpoint it
//! forces) and bytes written are reported beside the full LCP's of the same database:
//! the target is a 1%-changed LCP at most 5% of a full one. Pacing is disabled
//! (Min/MaxDiskWriteSpeed very high) and TimeBetweenLocalCheckpoints=31, so only the
//! LCPs this program asks for run; the redo log is sized so that it never passes half
//! full (which would start an LCP of its own).
//!
//! Usage: `cargo run --release -p rndb-benches --bin lcp_cost -- [rows] [nodes] [replicas] [rounds] [durable_first]`
//! (default 1,000,000 rows, 2 data nodes, NoOfReplicas=2, 4 rounds; `durable_first` 1:
//! a global checkpoint makes each round's updates durable before its LCP). The data directory
//! is a fresh directory under /tmp, removed at the end.

use rndb::api::Cluster;
use rndb::config::ClusterConfig;
use rndb::{AbortOption, ExecType, OpKind, Value};
use rndb_benches::{Rng, kv_table, value_b};
use std::time::Instant;

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const LOAD_CHUNK: u64 = 200_000;

/// The disk's floor for a partial LCP of `files` fragments: each (in parallel, as the
/// LCP does) `bytes` written into an empty file made beforehand (as the LCP writes
/// into the spare the previous round made) and fdatasynced, then a 4 KiB control file
/// overwritten in place and fdatasynced.
/// Returns the wall time in microseconds; the files are removed.
fn io_floor(dir: &std::path::Path, files: u64, bytes: u64) -> AnyResult<u64> {
    use std::io::Write;
    let one = |i: u64| -> std::io::Result<()> {
        let sub = dir.join(format!("floor{i}"));
        let ctl_path = sub.join("ctl");
        let data_path = sub.join("data");
        let mut f = std::fs::OpenOptions::new().write(true).open(&data_path)?;
        f.write_all(&vec![7u8; bytes as usize])?;
        f.sync_data()?;
        let mut c = std::fs::OpenOptions::new().write(true).open(&ctl_path)?;
        c.write_all(&[1u8; 4096])?;
        c.sync_data()
    };
    // The control files exist before the timed part, as they do in an LCP, and so do
    // the empty data files (the spares an LCP round makes for the next one), each
    // created and synced with its directory.
    for i in 0..files {
        let sub = dir.join(format!("floor{i}"));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(sub.join("ctl"), vec![0u8; 4096])?;
        std::fs::File::create_new(sub.join("data"))?.sync_all()?;
        std::fs::File::open(&sub)?.sync_all()?;
    }
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..files).map(|i| s.spawn(move || one(i))).collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("panic")))
            })
            .collect::<std::io::Result<Vec<()>>>()
    })?;
    let us = t0.elapsed().as_micros() as u64;
    for i in 0..files {
        std::fs::remove_dir_all(dir.join(format!("floor{i}")))?;
    }
    Ok(us)
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| -> u64 { args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d) };
    let n = arg(1, 1_000_000);
    let nodes = arg(2, 2) as u32;
    let replicas = arg(3, 2) as u32;
    let rounds = arg(4, 4);
    // 1: each round's updates are made durable by a global checkpoint of their own
    // before the LCP (as in NDB, where GCPs run every 2 s during a long LCP), so that
    // the LCP's time holds no redo sync of the updates.
    let durable_first = arg(5, 0) == 1;
    let dir = std::env::temp_dir().join(format!("rndb-lcp-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let rows_per_node = n * replicas as u64 / nodes as u64;
    // ~64 B/row measured (issue 2); room for the updates' copies and the index.
    let data_mb = ((rows_per_node * 96) >> 20) + 256;
    // Redo of the load: ~80 B per row on each node, and a table's fragments on a node
    // may all log to one part: each part's ring holds 2.5x the node's load, so the
    // load never fills a part past half (sparse files: only what is written costs).
    let file_mb = 1024u64;
    let files = (((rows_per_node * 80 * 5 / 2) >> 20) / file_mb + 1).max(3);
    let mut cfg = ClusterConfig::embedded(nodes, replicas)?;
    for (k, v) in [
        ("DataMemory", format!("{data_mb}M")),
        ("TimeBetweenLocalCheckpoints", "31".into()),
        ("MinDiskWriteSpeed", "1000G".into()),
        ("MaxDiskWriteSpeed", "1000G".into()),
        ("FragmentLogFileSize", format!("{file_mb}M")),
        ("NoOfFragmentLogFiles", files.to_string()),
    ] {
        cfg.set_data_node_param(k, &v)?;
    }
    let cluster = Cluster::embedded_in(cfg, dir.clone())?;
    let inner = cluster.inner().clone();
    let ndb = cluster.ndb("test");
    println!(
        "rndb lcp_cost: {n} rows, {nodes} data node(s), NoOfReplicas={replicas}, \
         DataMemory={data_mb}M, redo 4 x {files} x {file_mb}M per node, in {}",
        dir.display()
    );
    let t = kv_table(&ndb, "t1", false)?;
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + LOAD_CHUNK).min(n);
        let rows = (i..end)
            .map(|k| {
                vec![
                    Value::UInt(k),
                    Value::Int((k % 1000) as i64),
                    Value::Str(value_b(k)),
                ]
            })
            .collect();
        ndb.insert_batch(&t, &[0, 1, 2], rows)?;
        i = end;
    }
    inner.force_gcp()?;
    println!(
        "load: {:.1} s ({:.0} rows/s, logged)",
        t0.elapsed().as_secs_f64(),
        n as f64 / t0.elapsed().as_secs_f64()
    );
    let used_bytes: u64 = cluster
        .data_node_ids()
        .iter()
        .map(|&id| inner.pool_of(id).used_pages() * 32768)
        .sum();
    println!(
        "DataMemory in use: {:.2} GB over all nodes",
        used_bytes as f64 / 1e9
    );
    println!(
        "{:<22} {:>10} {:>12} {:>9} {:>10} {:>9} {:>9} {:>7}",
        "LCP", "rows", "bytes", "ms", "skipped", "idle frg", "bytes/F", "time/F"
    );
    let full = inner.run_lcp()?;
    if full.lcp_id != 1 {
        println!(
            "WARNING: {} local checkpoint(s) ran during the load",
            full.lcp_id - 1
        );
    }
    let line = |what: &str, s: &rndb::api::lcp::LcpStats| {
        println!(
            "{what:<22} {:>10} {:>12} {:>9.2} {:>10} {:>9} {:>9.4} {:>7.4}",
            s.rows,
            s.bytes,
            s.elapsed_us as f64 / 1000.0,
            s.pages_skipped,
            s.fragments_idle,
            s.bytes as f64 / full.bytes as f64,
            s.elapsed_us as f64 / full.elapsed_us.max(1) as f64
        );
        println!(
            "{:<22} step 2 {} us (scans {} us, creates {} us, summed; {} of {} files were spares), \
             step 3 {} us ({}), step 4 {} us; after it, spares for the next LCP {} us",
            "",
            s.scan_us,
            s.scan_turn_us,
            s.create_us,
            s.spares_used,
            s.fragments,
            s.sync_us,
            if s.gcp_forced {
                format!("GCP {} us", s.gcp_us)
            } else {
                "no GCP: every change seen was durable".to_string()
            },
            s.control_us,
            s.spare_us
        );
    };
    line(&format!("{} full (first)", full.lcp_id), &full);
    let mut rng = Rng::new(42);
    let per = (n / 100).max(1);
    for round in 0..rounds {
        let tu = Instant::now();
        let mut done = 0;
        while done < per {
            let mut tx = ndb.start_transaction()?;
            for _ in 0..1000.min(per - done) {
                let k = rng.next_u64() % n;
                tx.define(
                    &t,
                    OpKind::Update,
                    &[("id", Value::UInt(k))],
                    &[("a", Value::Int(round as i64 * 7 + k as i64))],
                    None,
                )?;
                done += 1;
            }
            tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        }
        let upd_s = tu.elapsed().as_secs_f64();
        if durable_first {
            let tg = Instant::now();
            inner.force_gcp()?;
            println!("GCP of the updates' redo: {} us", tg.elapsed().as_micros());
        }
        let s = inner.run_lcp()?;
        line(&format!("{} after 1% ({upd_s:.1}s)", s.lcp_id), &s);
        let tg = Instant::now();
        inner.force_gcp()?;
        let empty_gcp_us = tg.elapsed().as_micros();
        println!(
            "{:<22} deletes written {}, an empty GCP after it: {empty_gcp_us} us",
            "", s.deletes
        );
        let floor_us = io_floor(&dir, s.fragments, s.bytes / s.fragments.max(1))?;
        println!(
            "{:<22} I/O floor {floor_us} us ({} files of {} B: write into an empty file, fdatasync, \
             then a control overwrite + fdatasync, in parallel): LCP / floor {:.2}, floor / full {:.4}",
            "",
            s.fragments,
            s.bytes / s.fragments.max(1),
            s.elapsed_us as f64 / floor_us.max(1) as f64,
            floor_us as f64 / full.elapsed_us.max(1) as f64
        );
        if s.lcp_id != full.lcp_id + 1 + round as u32 {
            println!("WARNING: a local checkpoint this program did not ask for ran");
        }
    }
    let s = inner.run_lcp()?;
    line(&format!("{} no change", s.lcp_id), &s);
    cluster.shutdown();
    drop(ndb);
    drop(t);
    drop(inner);
    drop(cluster);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
