//! Issue 7, seed 004's table with real processes: `rndb_mgmd` and two `rndbd`
//! (NoOfReplicas=2, one node group) on loopback, each keeping its redo and checkpoints
//! in the cluster's DataDir. Data node 3 holds 0.5, 1 and 2 GB — each GB a million rows
//! in each of five tables of ~200-byte rows (BIGINT UNSIGNED key, INT, VARCHAR(200) of
//! 160 random hex characters), as the seed's — and is restarted four ways:
//!
//! - *node restart* (first, with and without traffic): SIGKILL of node 3, then a new
//!   `rndbd` for it on its file system: it
//!   restores its own checkpoint and redo, then copies from node 2 only the rows changed
//!   since (NDB's node restart);
//! - *initial node restart*: the same with `--initial`: node 3 starts empty and gets every
//!   row from node 2;
//!
//! each with no traffic and with 10,000 updates/s (the seed's single NDB API thread: 100
//! updates per transaction every 10 ms, random table and key, from one second before the
//! kill until half a second after the node is started again). The restart time runs from
//! the new process's start to `ALL STATUS` showing node 3 started. The updater retries
//! transactions that end with a temporary error, or with 4012 when the killed node
//! coordinated them (an update set again is harmless), and reports how many it retried
//! and the longest transaction; any other error ends the run. After each restart 1,000 keys of
//! every table are read and checked.
//!
//! Usage (after `cargo build --release -p rndb-shell`):
//! `cargo run --release -p rndb-benches --bin tcp_node_restart -- [sizes_gb]` (default
//! `0.5,1,2`); `REDO_FILES=n` sets NoOfFragmentLogFiles (default NDB's 16 per part).

use rndb::cluster::remote::{Pending, RemoteCluster};
use rndb::schema::Value;
use rndb::transport::data::{KeyOp, OpType};
use rndb_benches::procs::ProcCluster;
use rndb_benches::{Rng, restart_value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DB: &str = "test";
const TABLES: usize = 5;
const ROWS_PER_GB_PER_TABLE: f64 = 1_000_000.0;

fn table(t: usize) -> String {
    format!("t{t}")
}

fn row_op(op: OpType, t: usize, k: u64, a: i64, b: Option<String>) -> KeyOp {
    let mut values = vec![(1, Value::Int(a))];
    if let Some(b) = b {
        values.push((2, Value::Str(b)));
    }
    KeyOp {
        op,
        database: DB.into(),
        table: table(t),
        key: vec![Value::UInt(k)],
        values,
        columns: Vec::new(),
    }
}

fn connect(c: &ProcCluster, nodes: usize) -> AnyResult<std::sync::Arc<RemoteCluster>> {
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &c.connectstring(),
        Duration::from_secs(20),
    )?);
    let t = Instant::now();
    while api.connected_nodes().len() < nodes {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("the client did not reach the data nodes".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(api)
}

/// Loads `rows` rows into every table (Write, 1000 per transaction, 4 in flight); a
/// batch refused with a temporary error (410: the redo log is full until a local
/// checkpoint frees it) is written again.
fn load(api: &std::sync::Arc<RemoteCluster>, rows: u64) -> AnyResult<()> {
    let batch = |t: usize, from: u64, to: u64| -> Vec<KeyOp> {
        (from..to)
            .map(|k| {
                row_op(
                    OpType::Write,
                    t,
                    k,
                    (k % 1000) as i64,
                    Some(restart_value(k)),
                )
            })
            .collect()
    };
    for t in 0..TABLES {
        let mut ring: VecDeque<(Pending, u64, u64)> = VecDeque::new();
        let mut next = 0u64;
        while next < rows || !ring.is_empty() {
            while next < rows && ring.len() < 4 {
                let end = (next + 1000).min(rows);
                ring.push_back((api.execute_submit(batch(t, next, end))?, next, end));
                next = end;
            }
            if let Some((p, from, to)) = ring.pop_front() {
                let began = Instant::now();
                let mut r = RemoteCluster::execute_wait(p).map(|_| ());
                while let Err(e) = &r {
                    if !e.is_temporary() || began.elapsed() > Duration::from_secs(300) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    r = api.execute(batch(t, from, to)).map(|_| ());
                }
                r?;
            }
        }
    }
    Ok(())
}

/// Reads 1,000 keys spread over every table: each row must be there, with its value.
fn check_sample(api: &RemoteCluster, rows: u64) -> AnyResult<()> {
    let step = (rows / 1000).max(1);
    for t in 0..TABLES {
        let keys: Vec<Vec<Value>> = (0..rows)
            .step_by(step as usize)
            .map(|k| vec![Value::UInt(k)])
            .collect();
        let began = Instant::now();
        let got = loop {
            match api.read_batch(DB, &table(t), &keys, &[2]) {
                Ok(g) => break g,
                Err(e) if e.is_temporary() && began.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e.into()),
            }
        };
        for (k, r) in keys.iter().zip(got) {
            let Value::UInt(key) = k[0] else {
                return Err("key is not unsigned".into());
            };
            match r.as_deref() {
                Some([Value::Str(b)]) if *b == restart_value(key) => {}
                other => {
                    return Err(format!("t{t} row {key} after the restart: {other:?}").into());
                }
            }
        }
    }
    Ok(())
}

#[derive(Default)]
struct Traffic {
    updates: AtomicU64,
    retried: AtomicU64,
    max_tx_us: AtomicU64,
    stop: AtomicBool,
}

/// 10,000 updates/s of column `a`: 100 per transaction every 10 ms, until `stop`.
fn updater(api: &RemoteCluster, rows: u64, traffic: &Traffic) -> AnyResult<()> {
    let mut rng = Rng::new(7);
    let t0 = Instant::now();
    let mut tick = 0u64;
    while !traffic.stop.load(Ordering::Acquire) {
        tick += 1;
        let ops: Vec<KeyOp> = (0..100)
            .map(|_| {
                let t = (rng.next_u64() % TABLES as u64) as usize;
                let k = rng.next_u64() % rows;
                row_op(
                    OpType::Update,
                    t,
                    k,
                    (rng.next_u64() % 1_000_000) as i64,
                    None,
                )
            })
            .collect();
        let began = Instant::now();
        loop {
            match api.execute(ops.clone()) {
                Ok(_) => break,
                // Temporary, or the coordinator was killed with it (4012, unknown
                // result): setting a column to a value again is harmless.
                Err(e)
                    if (e.is_temporary() || e.code == 4012)
                        && began.elapsed() < Duration::from_secs(60) =>
                {
                    traffic.retried.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.into()),
            }
        }
        traffic.updates.fetch_add(100, Ordering::Relaxed);
        traffic
            .max_tx_us
            .fetch_max(began.elapsed().as_micros() as u64, Ordering::Relaxed);
        let due = t0 + Duration::from_millis(10 * tick);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

/// SIGKILL of node 3, then a new process for it with `args`: seconds until started.
/// Node 3 runs for 3 s first (and its files count again before: [`wait_files`]).
fn restart_node3(c: &mut ProcCluster, args: &[&str]) -> AnyResult<f64> {
    std::thread::sleep(Duration::from_secs(3));
    c.procs.kill("n3")?;
    // Node 2 has declared it dead before it comes back (a kill closes its connections).
    let t = Instant::now();
    while !c.mgm("3 STATUS")?.contains("not connected") {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("node 3 still shown connected 30 s after SIGKILL".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    c.spawn_data_node(3, args)?;
    c.wait_started(3600)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Waits until node 3's files restore it again after its `restarts`-th restart: the
/// copy is not in its redo log, so they count from the local checkpoint that follows
/// it (`Node 3: the local checkpoint after the copy completed ...` in the cluster log).
fn wait_files(c: &ProcCluster, restarts: usize) -> AnyResult<()> {
    let t = Instant::now();
    loop {
        let log =
            std::fs::read_to_string(c.procs.dir.join("ndb_1_cluster.log")).unwrap_or_default();
        let n = log
            .lines()
            .filter(|l| l.contains("Node 3: the local checkpoint after the copy completed"))
            .count();
        if n >= restarts {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(600) {
            return Err("node 3's local checkpoint after its copy did not complete".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The cluster log's last line about the copy to node 3 (what it sent, how long).
fn copy_line(c: &ProcCluster) -> String {
    let log = std::fs::read_to_string(c.procs.dir.join("ndb_1_cluster.log")).unwrap_or_default();
    log.lines()
        .rev()
        .find(|l| l.contains("rows to node 3 for its restart"))
        .and_then(|l| l.split_once("-- Node 2: "))
        .map_or_else(|| "(no copy line)".to_string(), |(_, t)| t.to_string())
}

struct Row {
    gb: f64,
    used_gb: f64,
    rows: u64,
    secs: [f64; 4],
    retried: u64,
    max_tx_ms: f64,
}

fn run_size(gb: f64) -> AnyResult<Row> {
    let rows = (gb * ROWS_PER_GB_PER_TABLE) as u64;
    let data_memory_mb = ((gb * 1.7 + 0.25) * 1024.0) as u64;
    // NDB's default redo log (4 parts of 16 files of 16 MB: 1 GB) unless REDO_FILES
    // names the files per part: the copy of an initial node restart is not logged at
    // the joiner, so the log need not hold the rows.
    let redo = match std::env::var("REDO_FILES") {
        Ok(files) => format!("NoOfFragmentLogFiles={}\n", files.parse::<u32>()?),
        Err(_) => String::new(),
    };
    let mut c = ProcCluster::start_with("tcp-node-restart", data_memory_mb, None, &redo)?;
    let api = connect(&c, 2)?;
    for t in 0..TABLES {
        api.sql(
            DB,
            &format!(
                "CREATE TABLE {} (id BIGINT UNSIGNED PRIMARY KEY, a INT, b VARCHAR(200)) ENGINE=NDB",
                table(t)
            ),
        )?;
    }
    let t0 = Instant::now();
    load(&api, rows)?;
    let node_rows = rows * TABLES as u64;
    let report = c.mgm("3 REPORT MemoryUsage")?;
    let used_pages: f64 = report
        .lines()
        .next()
        .and_then(|l| l.split_once('(')?.1.split(' ').next()?.parse().ok())
        .ok_or_else(|| format!("memory report: {report}"))?;
    let used_gb = used_pages * 32768.0 / (1u64 << 30) as f64;
    println!(
        "{gb} GB: {node_rows} rows in {TABLES} tables loaded in {:.1} s; DataMemory in use on node 3: {used_gb:.2} GB",
        t0.elapsed().as_secs_f64()
    );
    api.close();
    let mut secs = [0.0; 4];
    let (mut retried, mut max_tx_ms) = (0, 0.0f64);
    // The node restarts first: after an initial node restart the node's files restore
    // nothing until it has saved a global checkpoint after its copy.
    for (i, (traffic_on, args)) in [
        (false, &[][..]),
        (true, &[][..]),
        (false, &["--initial"][..]),
        (true, &["--initial"][..]),
    ]
    .into_iter()
    .enumerate()
    {
        let what = format!(
            "{}{}",
            if args.is_empty() {
                "node restart"
            } else {
                "initial node restart"
            },
            if traffic_on {
                ", 10k upd/s"
            } else {
                ", no traffic"
            }
        );
        if !traffic_on {
            secs[i] = restart_node3(&mut c, args)?;
            println!("  {what}: {:.2} s ({})", secs[i], copy_line(&c));
        } else {
            let api = connect(&c, 2)?;
            let traffic = Traffic::default();
            let (s, updates, r, mx) = std::thread::scope(|scope| -> AnyResult<_> {
                let h = scope.spawn(|| updater(&api, rows, &traffic));
                std::thread::sleep(Duration::from_secs(1));
                let before = traffic.updates.load(Ordering::Relaxed);
                let restart = restart_node3(&mut c, args);
                let during = traffic.updates.load(Ordering::Relaxed) - before;
                std::thread::sleep(Duration::from_millis(500));
                traffic.stop.store(true, Ordering::Release);
                h.join().map_err(|_| "the updater panicked")??;
                Ok((
                    restart?,
                    during,
                    traffic.retried.load(Ordering::Relaxed),
                    traffic.max_tx_us.load(Ordering::Relaxed) as f64 / 1000.0,
                ))
            })?;
            api.close();
            secs[i] = s;
            retried += r;
            max_tx_ms = max_tx_ms.max(mx);
            println!(
                "  {what}: {s:.2} s ({}); {updates} updates meanwhile, {r} transactions retried, longest {mx:.0} ms",
                copy_line(&c)
            );
        }
        let api = connect(&c, 2)?;
        check_sample(&api, rows)?;
        api.close();
        // The next restart from the node's own files needs them restorable again.
        let t = Instant::now();
        wait_files(&c, i + 1)?;
        println!(
            "    node 3's files restore it again {:.2} s later (its local checkpoint after the copy)",
            t.elapsed().as_secs_f64()
        );
    }
    c.procs.keep = std::env::var_os("KEEP").is_some();
    Ok(Row {
        gb,
        used_gb,
        rows: node_rows,
        secs,
        retried,
        max_tx_ms,
    })
}

fn main() -> AnyResult<()> {
    let sizes: Vec<f64> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "0.5,1,2".into())
        .split(',')
        .map(|s| s.trim().parse::<f64>())
        .collect::<Result<_, _>>()?;
    let mut table = Vec::new();
    for gb in sizes {
        table.push(run_size(gb)?);
    }
    println!(
        "| GB (seed) | DataMemory in use on node 3 | rows | node restart, no traffic | initial, no traffic | node restart, 10k upd/s | initial, 10k upd/s | node / initial (no traffic, 10k) | transactions retried | longest transaction |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|---:|---:|");
    for r in table {
        println!(
            "| {} | {:.2} GB | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {:.2}, {:.2} | {} | {:.0} ms |",
            r.gb,
            r.used_gb,
            r.rows,
            r.secs[0],
            r.secs[2],
            r.secs[1],
            r.secs[3],
            r.secs[0] / r.secs[2],
            r.secs[1] / r.secs[3],
            r.retried,
            r.max_tx_ms
        );
    }
    Ok(())
}
