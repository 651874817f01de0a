//! The main job on the embedded default: start the embedded cluster (two data nodes,
//! NoOfReplicas=2, as a fresh config.ini gives), create a table, load 1M rows, read
//! them back by primary key and by ordered-index range, print throughput and
//! `ALL REPORT MEMORYUSAGE`.
//!
//! `cargo run --release -p rndb --example demo [rows]`

use rndb::api::{Cluster, ScanSpec, TableSpec};
use rndb::config::ClusterConfig;
use rndb::schema::{Charset, Column, ColumnType, IndexKind};
use rndb::{Value, mgm};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut config = ClusterConfig::embedded_default();
    config.set_data_node_param("DataMemory", "512M")?;
    let t0 = Instant::now();
    let cluster = Cluster::embedded(config)?;
    println!(
        "Started the embedded cluster in {:.2} s:",
        t0.elapsed().as_secs_f64()
    );
    println!("{}\n", mgm::execute(cluster.inner(), "SHOW")?);

    let ndb = cluster.ndb("test");
    let t = ndb.create_table(
        TableSpec::new(
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
                    "a",
                    ColumnType::Int {
                        bytes: 4,
                        unsigned: false,
                    },
                ),
                Column::new(
                    "b",
                    ColumnType::Varchar {
                        len: 32,
                        charset: Charset::Utf8mb4,
                    },
                ),
            ],
        )
        .index("ix_a", IndexKind::OrderedIndex, &["a"]),
    )?;
    println!(
        "CREATE TABLE t1 (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, a INT, b VARCHAR(32), INDEX ix_a (a)) ENGINE=ndbcluster"
    );

    // Load.
    let data: Vec<Vec<Value>> = (0..rows)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int((i % 100_000) as i64),
                Value::Str(format!("{:016x}", i * 2654435761)),
            ]
        })
        .collect();
    let t0 = Instant::now();
    let n = ndb.insert_batch(&t, &[0, 1, 2], data)?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "loaded {n} rows in {s:.2} s: {:.0} rows/s (transactions of 1000 rows, 2 replicas)",
        n as f64 / s
    );

    // Primary-key reads in a scrambled order, batches of 1000.
    let t0 = Instant::now();
    let mut found = 0u64;
    let (mut keys, mut out, mut hit) = (Vec::with_capacity(1000), Vec::new(), Vec::new());
    for start in (0..rows).step_by(1000) {
        keys.clear();
        keys.extend(
            (start..(start + 1000).min(rows)).map(|i| Value::UInt(i.wrapping_mul(7_919) % rows)),
        );
        ndb.read_batch_into(&t, &keys, &[0, 1, 2], &mut out, &mut hit)?;
        found += hit.iter().filter(|&&h| h).count() as u64;
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "read {found} rows by primary key in {s:.2} s: {:.0} rows/s",
        found as f64 / s
    );

    // Ordered-index range scans: 1000 ranges of 10 values of `a` (10 rows each per 1M).
    let t0 = Instant::now();
    let mut scanned = 0u64;
    let mut tx = ndb.start_transaction()?;
    let ix = t.def.index("ix_a").map(|(i, _)| i);
    for r in 0..1000i64 {
        let mut spec = ScanSpec::table(t.clone());
        spec.index = ix;
        spec.low = Some((vec![Value::Int(r * 100)], true));
        spec.high = Some((vec![Value::Int(r * 100 + 10)], false));
        spec.sorted = true;
        let mut scan = tx.scan(spec)?;
        while tx.scan_next(&mut scan)?.is_some() {
            scanned += 1;
        }
    }
    tx.close();
    let s = t0.elapsed().as_secs_f64();
    println!(
        "1000 index range scans returned {scanned} rows in {s:.2} s: {:.0} rows/s",
        scanned as f64 / s
    );

    println!("\nrndb_mgm> ALL REPORT MEMORYUSAGE");
    println!(
        "{}",
        mgm::execute(cluster.inner(), "ALL REPORT MEMORYUSAGE")?
    );
    cluster.shutdown();
    Ok(())
}
