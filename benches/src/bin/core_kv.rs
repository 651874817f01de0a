//! Issue 2 figures through the Rust API, with the limit measured in the same run:
//! - inserts of 1M rows in batches (rows/s),
//! - primary-key reads of the same rows in random order, batches of 1000 (rows/s),
//!   beside a plain `hashbrown::HashMap` lookup of the same keys (the limit),
//! - DataMemory bytes per row as REPORT MEMORYUSAGE counts them (data + index pages).
//!
//! Usage: `cargo run --release -p rndb-benches --bin core_kv [rows] [data_nodes] [replicas]`

use rndb::Value;
use rndb::api::Cluster;
use rndb::config::ClusterConfig;
use rndb_benches::{Rng, kv_table, median, value_b};
use std::hint::black_box;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let nodes: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let replicas: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut cfg = ClusterConfig::embedded(nodes, replicas)?;
    cfg.set_data_node_param("DataMemory", "1G")?;
    let cluster = Cluster::embedded(cfg)?;
    let ndb = cluster.ndb("test");
    let t = kv_table(&ndb, "t1", false)?;
    println!("rndb core_kv: {rows} rows, {nodes} data node(s), NoOfReplicas={replicas}");

    // Inserts, batches of 1000 rows per transaction.
    let cols = [0usize, 1, 2];
    let data: Vec<Vec<Value>> = (0..rows)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int((i % 1000) as i64),
                Value::Str(value_b(i)),
            ]
        })
        .collect();
    let t0 = Instant::now();
    let n = ndb.insert_batch(&t, &cols, data)?;
    let insert_s = t0.elapsed().as_secs_f64();
    assert_eq!(n, rows);
    println!(
        "insert           {:>12.0} rows/s  ({insert_s:.3} s)",
        rows as f64 / insert_s
    );

    // Memory per row.
    let (mut data_pages, mut index_pages) = (0u64, 0u64);
    for nd in &cluster.inner().data_nodes {
        data_pages += nd.pool.data_pages();
        index_pages += nd.pool.index_pages();
    }
    let bytes_per_row =
        (data_pages + index_pages) as f64 * 32768.0 / (rows as f64 * replicas as f64);
    println!(
        "memory           {bytes_per_row:>12.1} bytes/row (data {data_pages} + index {index_pages} 32K pages over {replicas} replica(s))"
    );

    // Random-order keys.
    let mut keys: Vec<u64> = (0..rows).collect();
    Rng::new(42).shuffle(&mut keys);

    // rndb read_batch, 1000 keys per batch.
    let mut runs = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let mut found = 0u64;
        let (mut batch, mut out, mut hit) = (Vec::with_capacity(1000), Vec::new(), Vec::new());
        for chunk in keys.chunks(1000) {
            batch.clear();
            batch.extend(chunk.iter().map(|&k| Value::UInt(k)));
            ndb.read_batch_into(&t, &batch, &cols, &mut out, &mut hit)?;
            found += hit.iter().filter(|&&f| f).count() as u64;
        }
        assert_eq!(found, rows);
        runs.push(rows as f64 / t0.elapsed().as_secs_f64());
    }
    let rndb_rate = median(&mut runs);
    println!("read_batch(1000) {rndb_rate:>12.0} rows/s  (median of 3)");
    if std::env::var("RNDB_BENCH_DETAIL").is_ok() {
        for (name, cs) in [
            ("no columns", &[][..]),
            ("id, a", &[0usize, 1][..]),
            ("all", &cols[..]),
        ] {
            let t0 = Instant::now();
            let (mut batch, mut out, mut hit) = (Vec::with_capacity(1000), Vec::new(), Vec::new());
            for chunk in keys.chunks(1000) {
                batch.clear();
                batch.extend(chunk.iter().map(|&k| Value::UInt(k)));
                ndb.read_batch_into(&t, &batch, cs, &mut out, &mut hit)?;
            }
            println!(
                "  read_batch {name:<12} {:>12.0} rows/s",
                rows as f64 / t0.elapsed().as_secs_f64()
            );
        }
    }

    // The limit: a plain HashMap of the same rows, looked up in the same order.
    let mut map: hashbrown::HashMap<u64, (i32, String), foldhash::fast::RandomState> =
        Default::default();
    map.reserve(rows as usize);
    for i in 0..rows {
        map.insert(i, ((i % 1000) as i32, value_b(i)));
    }
    let mut runs = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let mut sum = 0u64;
        for k in &keys {
            if let Some((a, b)) = map.get(k) {
                sum = sum.wrapping_add(*a as u64 + b.len() as u64);
            }
        }
        black_box(sum);
        runs.push(rows as f64 / t0.elapsed().as_secs_f64());
    }
    let map_rate = median(&mut runs);
    println!("HashMap get      {map_rate:>12.0} rows/s  (limit, median of 3)");
    println!("ratio rndb/limit {:>12.3}", rndb_rate / map_rate);
    println!(
        "\n{}",
        rndb::mgm::execute(cluster.inner(), "ALL REPORT MEMORYUSAGE")?
    );
    cluster.shutdown();
    Ok(())
}
