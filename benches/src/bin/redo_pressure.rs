//! Issue 6, back-pressure instead of errors: the seed's 5-thread insert load (five rows
//! per transaction) into a cluster whose redo log is at NDB's minimum size (4 parts × 3
//! files × 4 MB per node), far smaller than the redo the load writes. Local checkpoints
//! must free the log as it fills, and a commit that finds it full waits instead of
//! failing: the run counts every error that reaches the application (target: none) and
//! reports rows/s, the LCPs that ran and the redo written.
//!
//! Usage: `cargo run --release -p rndb-benches --bin redo_pressure -- [rows] [threads]`
//! (default 2,000,000 rows, 5 threads). The data directory is under /tmp, removed at
//! the end.

use rndb::api::{Cluster, TableSpec};
use rndb::config::ClusterConfig;
use rndb::schema::{Charset, Column, ColumnType};
use rndb::{AbortOption, ExecType, OpKind, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let threads: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("rndb-redo-pressure-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut cfg = ClusterConfig::embedded(2, 2)?;
    for (k, v) in [
        ("DataMemory", "2G"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "4M"),
        ("MaxDiskWriteSpeed", "1G"),
        ("MinDiskWriteSpeed", "100M"),
    ] {
        cfg.set_data_node_param(k, v)?;
    }
    let cluster = Cluster::embedded_in(cfg, dir.clone())?;
    let ndb = cluster.ndb("test");
    let t = ndb.create_table(TableSpec::new(
        "t1",
        vec![
            Column::new(
                "id",
                ColumnType::Int {
                    bytes: 8,
                    unsigned: true,
                },
            )
            .primary_key(),
            Column::new(
                "data1",
                ColumnType::Varchar {
                    len: 100,
                    charset: Charset::Latin1,
                },
            ),
        ],
    ))?;
    let errors = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (ndb, t, errors, next) =
                (cluster.ndb("test"), t.clone(), errors.clone(), next.clone());
            std::thread::spawn(move || {
                loop {
                    let first = next.fetch_add(5, Ordering::Relaxed);
                    if first >= rows {
                        return;
                    }
                    let r = (|| -> rndb::Result<()> {
                        let mut tx = ndb.start_transaction()?;
                        for id in first..(first + 5).min(rows) {
                            tx.define(
                                &t,
                                OpKind::Insert,
                                &[("id", Value::UInt(id))],
                                &[("data1", Value::Str(format!("{id:0>90}")))],
                                None,
                            )?;
                        }
                        tx.execute(ExecType::Commit, AbortOption::AbortOnError)
                    })();
                    if let Err(e) = r
                        && errors.fetch_add(1, Ordering::Relaxed) < 5
                    {
                        eprintln!("error reached the application: {e}");
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "worker panicked")?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let lcp = cluster.inner().last_lcp.lock().clone();
    let mut redo_written = 0u64;
    for n in &cluster.inner().data_nodes {
        if let Some(l) = &n.log {
            redo_written += l.redo.head().iter().sum::<u64>();
        }
    }
    println!(
        "rndb redo_pressure: {rows} rows, {threads} threads, 5 rows per transaction, redo 48 MB per node"
    );
    println!("rows/s                 {:>12.0}", rows as f64 / secs);
    println!(
        "redo written           {:>12.1} MB (both nodes; {:.1}x the log's size)",
        redo_written as f64 / 1e6,
        redo_written as f64 / (2.0 * 48e6)
    );
    println!(
        "last LCP               {:>12}",
        lcp.map_or("none".to_string(), |l| format!(
            "#{} {} rows {} ms",
            l.lcp_id, l.rows, l.elapsed_ms
        ))
    );
    println!(
        "errors to application  {:>12}",
        errors.load(Ordering::Relaxed)
    );
    cluster.shutdown();
    drop(cluster);
    std::fs::remove_dir_all(&dir)?;
    if errors.load(Ordering::Relaxed) > 0 {
        return Err("errors reached the application".into());
    }
    Ok(())
}
