//! Issue 7, data node restart times in the form of seed 004's table: a data node of a
//! two-node node group (NoOfReplicas=2) holding 0.5, 1 and 2 GB — each GB a million
//! rows in each of five tables, as the seed's — is stopped and started again, with no
//! traffic and with 10,000 updates/s running (the seed's "single thread using the NDB
//! API": 100 updates per transaction every 10 ms, random table and key) from before the
//! stop until the node has started.
//!
//! The embedded cluster without a data directory: a restarted node has no files of its
//! own, so every restart is NDB's *initial* node restart (every row copied from the live
//! replica while transactions go on; `docs/node-restart.md`). The restart time is from
//! `<id> START` to the node reported started. The copy runs on one thread per node;
//! rows copied per second is rows on the node / restart time.
//!
//! The updater retries transactions that end with a temporary error (4010 "Node failure
//! caused abort of transaction" when it meets the replica change) and reports how many
//! it retried, and the longest a transaction of 100 updates took (with its retries)
//! while the node stopped and restarted; any other error ends the run.
//!
//! With `durable` as the second argument the cluster runs on a data directory (under
//! `target/`, removed after) and a local checkpoint is completed after the load (the
//! steady state of a running cluster): the restarted node restores its own checkpoints
//! and redo, the copy sends only the rows changed since (and deletes what was deleted
//! since), and the restart completes once the local checkpoint asked for after the copy
//! is saved (the node serves from the end of the copy; `docs/node-restart.md`). Both
//! times are printed, with the restart's own account from the cluster log.
//!
//! With `early` after `durable`, the node is stopped right after that checkpoint,
//! before global checkpoints have saved its keep position: the restart replays the
//! load's redo over a checkpoint that already holds it.
//!
//! Usage: `cargo run --release -p rndb-benches --bin node_restart -- [sizes_gb] [durable
//! [early]]` (default `0.5,1,2`).

use rndb::api::{Cluster, Ndb, TableRuntime};
use rndb::config::ClusterConfig;
use rndb::{AbortOption, ExecType, OpKind, Value};
use rndb_benches::{Rng, restart_table, restart_value};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const TABLES: usize = 5;
const ROWS_PER_GB_PER_TABLE: f64 = 1_000_000.0;
const CHUNK: u64 = 50_000;
const RESTARTED_NODE: u32 = 3;

fn load(ndb: &Ndb, tables: &[Arc<TableRuntime>], rows: u64) -> AnyResult<()> {
    for t in tables {
        let mut n = 0;
        while n < rows {
            let batch: Vec<Vec<Value>> = (n..(n + CHUNK).min(rows))
                .map(|k| {
                    vec![
                        Value::UInt(k),
                        Value::Int((k % 1000) as i64),
                        Value::Str(restart_value(k)),
                    ]
                })
                .collect();
            ndb.insert_batch(t, &[0, 1, 2], batch)?;
            n += CHUNK;
        }
    }
    Ok(())
}

struct Traffic {
    updates: AtomicU64,
    retried: AtomicU64,
    /// The longest transaction (with its retries), in microseconds, once `measure`.
    max_tx_us: AtomicU64,
    measure: AtomicBool,
    stop: AtomicBool,
}

/// 10,000 updates/s: 100 per transaction every 10 ms, until `traffic.stop`.
fn updater(ndb: &Ndb, tables: &[Arc<TableRuntime>], rows: u64, traffic: &Traffic) -> AnyResult<()> {
    let mut rng = Rng::new(7);
    let t0 = Instant::now();
    let mut tick = 0u64;
    while !traffic.stop.load(Ordering::Acquire) {
        tick += 1;
        let keys: Vec<(usize, u64, i64)> = (0..100)
            .map(|_| {
                (
                    (rng.next_u64() % TABLES as u64) as usize,
                    rng.next_u64() % rows,
                    (rng.next_u64() % 1_000_000) as i64,
                )
            })
            .collect();
        let began = Instant::now();
        loop {
            let mut tx = ndb.start_transaction()?;
            for &(t, k, a) in &keys {
                tx.define(
                    &tables[t],
                    OpKind::Update,
                    &[("id", Value::UInt(k))],
                    &[("a", Value::Int(a))],
                    None,
                )?;
            }
            match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                Ok(_) => break,
                Err(e) if e.is_temporary() => {
                    traffic.retried.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
        }
        traffic.updates.fetch_add(100, Ordering::Relaxed);
        if traffic.measure.load(Ordering::Acquire) {
            let us = began.elapsed().as_micros() as u64;
            traffic.max_tx_us.fetch_max(us, Ordering::Relaxed);
        }
        let due = t0 + Duration::from_millis(10 * tick);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

/// Stops and starts `RESTARTED_NODE`; returns (stop ms, restart s, s until the restart
/// is complete: its files restore it again, the same as the restart without a data
/// directory).
fn restart_node(cluster: &Cluster) -> AnyResult<(f64, f64, f64)> {
    let inner = cluster.inner();
    let t0 = Instant::now();
    inner.stop_node(RESTARTED_NODE)?;
    let stop_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let t1 = Instant::now();
    inner.start_node(RESTARTED_NODE)?;
    let node = inner
        .node(RESTARTED_NODE)
        .ok_or("the restarted node is not a data node")?;
    while node.run_state() != rndb::api::node_restart::NodeRunState::Started {
        if t1.elapsed() > Duration::from_secs(3600) {
            return Err("the node did not start within an hour".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let started = t1.elapsed().as_secs_f64();
    while !node.restart_complete() {
        if t1.elapsed() > Duration::from_secs(3600) {
            return Err("the node's restart did not complete within an hour".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((stop_ms, started, t1.elapsed().as_secs_f64()))
}

fn run_size(gb: f64, data_dir: Option<&std::path::Path>, early: bool) -> AnyResult<()> {
    let rows = (gb * ROWS_PER_GB_PER_TABLE) as u64;
    let mut cfg = ClusterConfig::embedded(2, 2)?;
    let data_memory = ((gb * 1.7 + 0.25) * (1u64 << 30) as f64) as u64;
    cfg.set_data_node_param("DataMemory", &data_memory.to_string())?;
    let cluster = match data_dir {
        Some(dir) => {
            // The load inserts at memory speed, faster than local checkpoints write at
            // their default pace: a redo log of 4 × 16 × 64 MB per node holds it (NDB's
            // default, 16 MB files, returns 410 during the 1 GB load).
            cfg.set_data_node_param("FragmentLogFileSize", "64M")?;
            Cluster::embedded_initial(cfg, dir.to_path_buf())?
        }
        None => Cluster::embedded(cfg)?,
    };
    let ndb = cluster.ndb("test");
    let tables: Vec<Arc<TableRuntime>> = (0..TABLES)
        .map(|i| restart_table(&ndb, &format!("t{i}")))
        .collect::<rndb::Result<_>>()?;
    let t0 = Instant::now();
    load(&ndb, &tables, rows)?;
    if data_dir.is_some() {
        // A running cluster's steady state: the rows are in a local checkpoint.
        let t = Instant::now();
        cluster.inner().run_lcp()?;
        if !early {
            // Two global checkpoints save its keep position (the first applies it up
            // to the end of the checkpoint before it): 4 s in a running cluster.
            cluster.inner().force_gcp()?;
            cluster.inner().force_gcp()?;
        }
        println!(
            "  local checkpoint after the load: {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let used_gb =
        cluster.inner().pool_of(RESTARTED_NODE).used_pages() as f64 * 32768.0 / (1u64 << 30) as f64;
    let node_rows = rows * TABLES as u64;
    println!(
        "{gb} GB: {node_rows} rows in {TABLES} tables loaded in {:.1} s; DataMemory in use on node {RESTARTED_NODE}: {used_gb:.2} GB",
        t0.elapsed().as_secs_f64()
    );

    let (stop_ms, secs, complete) = restart_node(&cluster)?;
    println!(
        "  no traffic:   stop {stop_ms:.0} ms, restart {secs:.2} s, {:.2}M rows/s{}",
        node_rows as f64 / secs / 1e6,
        completion(data_dir, complete)
    );
    print_restart_log(&cluster);

    let traffic = Traffic {
        updates: AtomicU64::new(0),
        retried: AtomicU64::new(0),
        max_tx_us: AtomicU64::new(0),
        measure: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    };
    let upd_ndb = cluster.ndb("test");
    let (stop_ms, secs, complete, updates, retried, max_tx_ms) =
        std::thread::scope(|scope| -> AnyResult<_> {
            let h = scope.spawn(|| updater(&upd_ndb, &tables, rows, &traffic));
            std::thread::sleep(Duration::from_secs(1));
            let before = traffic.updates.load(Ordering::Relaxed);
            traffic.measure.store(true, Ordering::Release);
            let r = restart_node(&cluster);
            traffic.measure.store(false, Ordering::Release);
            let during = traffic.updates.load(Ordering::Relaxed) - before;
            std::thread::sleep(Duration::from_millis(500));
            traffic.stop.store(true, Ordering::Release);
            h.join().map_err(|_| "the updater panicked")??;
            let (stop_ms, secs, complete) = r?;
            Ok((
                stop_ms,
                secs,
                complete,
                during,
                traffic.retried.load(Ordering::Relaxed),
                traffic.max_tx_us.load(Ordering::Relaxed) as f64 / 1000.0,
            ))
        })?;
    println!(
        "  10k upd/s:    stop {stop_ms:.0} ms, restart {secs:.2} s, {:.2}M rows/s{}; {updates} updates during the restart ({:.0}/s), {retried} transactions retried, longest transaction {max_tx_ms:.1} ms",
        node_rows as f64 / secs / 1e6,
        completion(data_dir, complete),
        updates as f64 / complete
    );
    print_restart_log(&cluster);
    cluster.shutdown();
    Ok(())
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<f64> = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("0.5,1,2")
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<_, _>>()?;
    let durable = args.get(2).is_some_and(|a| a == "durable");
    let early = args.get(3).is_some_and(|a| a == "early");
    println!(
        "rndb node_restart: 2 data nodes, NoOfReplicas=2, {}; node {RESTARTED_NODE} stopped and started",
        if durable {
            "a data directory (restart from the node's own files, then the changes copied)"
        } else {
            "no data directory (every row copied)"
        }
    );
    let dir = durable.then(|| std::path::PathBuf::from("target/node_restart_bench"));
    for gb in sizes {
        run_size(gb, dir.as_deref(), early)?;
    }
    if let Some(d) = dir {
        std::fs::remove_dir_all(d)?;
    }
    Ok(())
}

/// ", complete in S s" with a data directory (the local checkpoint after the copy).
fn completion(data_dir: Option<&std::path::Path>, complete_s: f64) -> String {
    match data_dir {
        Some(_) => format!(", complete (local checkpoint saved) {complete_s:.2} s"),
        None => String::new(),
    }
}

/// The restarted node's account of its last restart (the cluster log's lines on its
/// restore and copy), printed and then left behind.
fn print_restart_log(cluster: &Cluster) {
    let lines = cluster.inner().mgm.log.lines(Some(RESTARTED_NODE));
    let last_start = lines
        .iter()
        .rposition(|l| l.contains("Node shutdown completed"))
        .unwrap_or(0);
    for l in &lines[last_start..] {
        if (l.contains("own files") || l.contains("restart copy") || l.contains("rows copied in"))
            && let Some((_, text)) = l.split_once(" -- ")
        {
            println!("    {text}");
        }
    }
}
