//! Issue 7's restart figures with real processes: `rndb_mgmd` and two `rndbd`
//! (NoOfReplicas=2, one node group) on loopback, each keeping its redo and checkpoints
//! in the cluster's DataDir.
//!
//! 1. Load N rows of `kv (id BIGINT PRIMARY KEY, v VARBINARY(100))` (Write, 1000 per
//!    transaction, 4 in flight).
//! 2. Durable commit over TCP: 200 times a one-row write then `wait_durable(gci)`
//!    (the master runs a global checkpoint across both processes at once), against
//!    one 4 KiB pwrite + fdatasync in the same directory, in the same run.
//! 3. System restart after `ALL STOP` (each node's last global checkpoint): both
//!    `rndbd` started again; time until both are started, then a sample of rows read.
//! 4. System restart after SIGKILL of both data nodes: the same.
//! 5. Node restart: SIGKILL of node 3; while it is down 1% of the rows are written
//!    anew; a new `rndbd` for it (its file system kept): time until it is started
//!    again (it restores its own checkpoint and copies what changed since from node
//!    2), with no traffic.
//! 6. Initial node restart: the same with `--initial` (node 3 starts empty and gets
//!    every row).
//!
//! Usage (after `cargo build --release -p rndb-shell`):
//! `cargo run --release -p rndb-benches --bin tcp_restart -- [rows]` (default 1000000).

use rndb::cluster::remote::{Pending, RemoteCluster};
use rndb::schema::Value;
use rndb::transport::data::{KeyOp, OpType};
use rndb_benches::procs::ProcCluster;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DB: &str = "test";

fn write_op(k: u64, round: u64) -> KeyOp {
    let mut v = (k as i64).to_le_bytes().to_vec();
    v.resize(100, (round & 0xff) as u8);
    KeyOp {
        op: OpType::Write,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(k as i64)],
        values: vec![(1, Value::Bytes(v))],
        columns: Vec::new(),
    }
}

fn connect(c: &ProcCluster) -> AnyResult<std::sync::Arc<RemoteCluster>> {
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &c.connectstring(),
        Duration::from_secs(20),
    )?);
    let t = Instant::now();
    while api.connected_nodes().len() < 2 {
        if t.elapsed() > Duration::from_secs(20) {
            return Err("the client did not reach both data nodes".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(api)
}

fn load(api: &std::sync::Arc<RemoteCluster>, rows: u64) -> AnyResult<f64> {
    let t = Instant::now();
    let mut ring: VecDeque<Pending> = VecDeque::new();
    let mut next = 0u64;
    while next < rows || !ring.is_empty() {
        while next < rows && ring.len() < 4 {
            let end = (next + 1000).min(rows);
            ring.push_back(api.execute_submit((next..end).map(|k| write_op(k, 0)).collect())?);
            next = end;
        }
        if let Some(p) = ring.pop_front() {
            RemoteCluster::execute_wait(p)?;
        }
    }
    Ok(rows as f64 / t.elapsed().as_secs_f64())
}

/// Reads 1000 keys spread over the table: every one must be there with its key.
fn check_sample(api: &RemoteCluster, rows: u64) -> AnyResult<()> {
    let step = (rows / 1000).max(1);
    let keys: Vec<Vec<Value>> = (0..rows)
        .step_by(step as usize)
        .map(|k| vec![Value::Int(k as i64)])
        .collect();
    let t = Instant::now();
    let got = loop {
        match api.read_batch(DB, "kv", &keys, &[1]) {
            Ok(g) => break g,
            Err(e) if e.is_temporary() && t.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e.into()),
        }
    };
    for (k, r) in keys.iter().zip(got) {
        let Some(r) = r else {
            return Err(format!("row {:?} missing after the restart", k[0]).into());
        };
        let Value::Bytes(v) = &r[0] else {
            return Err("value is not bytes".into());
        };
        let Value::Int(key) = k[0] else {
            return Err("key is not an integer".into());
        };
        if v.len() < 8 || v[..8] != key.to_le_bytes() {
            return Err(format!("row {:?} has another key's value", k[0]).into());
        }
    }
    Ok(())
}

fn median_us(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

fn fdatasync_us(dir: &std::path::Path) -> AnyResult<(f64, f64)> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.join("fdatasync.probe"))?;
    let buf = vec![7u8; 4096];
    let mut v = Vec::with_capacity(200);
    for i in 0..200u64 {
        let t = Instant::now();
        f.write_at(&buf, (i % 16) * 4096)?;
        f.sync_data()?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median_us(v))
}

fn restart_both(c: &mut ProcCluster, rows: u64) -> AnyResult<f64> {
    let t = Instant::now();
    c.spawn_data_node(2, &[])?;
    c.spawn_data_node(3, &[])?;
    c.wait_started(600)?;
    let secs = t.elapsed().as_secs_f64();
    let api = connect(c)?;
    check_sample(&api, rows)?;
    api.close();
    Ok(secs)
}

/// SIGKILL of node 3, 1% of the rows written anew (value round `round`) while it is
/// down, node 3 started again with `args`: seconds until it is started, after which
/// every row is checked from node 3 alone (node 2 is not asked).
fn node_restart(c: &mut ProcCluster, rows: u64, args: &[&str], round: u64) -> AnyResult<f64> {
    c.procs.kill("n3")?;
    let api = connect_one(c)?;
    let changed = rows / 100;
    let step = (rows / changed.max(1)).max(1);
    let keys: Vec<u64> = (0..rows).step_by(step as usize).collect();
    for chunk in keys.chunks(1000) {
        let ops: Vec<KeyOp> = chunk.iter().map(|&k| write_op(k, round)).collect();
        retry(|| api.execute(ops.clone()).map(|_| ()))?;
    }
    api.close();
    let t = Instant::now();
    c.spawn_data_node(3, args)?;
    c.wait_started(600)?;
    let secs = t.elapsed().as_secs_f64();
    let api = connect(c)?;
    check_sample(&api, rows)?;
    api.close();
    Ok(secs)
}

/// A client that needs one data node only (the other is down).
fn connect_one(c: &ProcCluster) -> AnyResult<std::sync::Arc<RemoteCluster>> {
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &c.connectstring(),
        Duration::from_secs(20),
    )?);
    let t = Instant::now();
    while api.connected_nodes().len() != 1 {
        if t.elapsed() > Duration::from_secs(20) {
            return Err("the client did not see exactly one data node".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(api)
}

/// Runs `f` again on temporary errors (a node failure being handled), 30 s at most.
fn retry(mut f: impl FnMut() -> rndb::Result<()>) -> AnyResult<()> {
    let t = Instant::now();
    loop {
        match f() {
            Ok(()) => return Ok(()),
            Err(e) if e.is_temporary() && t.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn main() -> AnyResult<()> {
    let rows: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let data_memory_mb = (rows * 400 / (1 << 20)).max(64);
    let mut c = ProcCluster::start("tcp-restart", data_memory_mb, None)?;
    let api = connect(&c)?;
    api.sql(
        DB,
        "CREATE TABLE kv (id BIGINT PRIMARY KEY, v VARBINARY(100)) ENGINE=NDB",
    )?;
    let rate = load(&api, rows)?;
    println!(
        "tcp_restart: {rows} rows of BIGINT + VARBINARY(100), two rndbd (NoOfReplicas=2), DataMemory={data_memory_mb}M"
    );
    println!("loaded at {rate:.0} rows/s");
    let mut lat = Vec::with_capacity(200);
    for i in 0..200u64 {
        let t = Instant::now();
        let gci = api.execute(vec![write_op(i, 1)])?.gci;
        api.wait_durable(gci, Duration::from_secs(10))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (dur_p50, dur_p99) = median_us(lat);
    let (fs_p50, fs_p99) = fdatasync_us(&c.procs.dir)?;
    println!(
        "durable commit over TCP (write + wait_durable): median {dur_p50:.0} µs (p99 {dur_p99:.0}); \
         4 KiB pwrite + fdatasync: median {fs_p50:.0} µs (p99 {fs_p99:.0}); ratio {:.1}",
        dur_p50 / fs_p50
    );
    api.close();
    c.mgm("ALL STOP")?;
    for id in [2, 3] {
        let code = c.procs.wait_exit(&format!("n{id}"), 60)?;
        if code != 0 {
            return Err(format!("node {id} exited with {code} after ALL STOP").into());
        }
    }
    let graceful = restart_both(&mut c, rows)?;
    println!("system restart after ALL STOP: both data nodes started in {graceful:.2} s");
    c.procs.kill("n2")?;
    c.procs.kill("n3")?;
    let crash = restart_both(&mut c, rows)?;
    println!("system restart after SIGKILL of both: started in {crash:.2} s");
    let node = node_restart(&mut c, rows, &[], 2)?;
    println!(
        "node restart of node 3 (SIGKILL, {} rows written while it was down; it restores its own \
         checkpoint, then copies what changed): started in {node:.2} s",
        rows / 100
    );
    let initial = node_restart(&mut c, rows, &["--initial"], 3)?;
    println!(
        "initial node restart of node 3 (SIGKILL, --initial: copy of every row from node 2): \
         started in {initial:.2} s; node restart / initial {:.2}",
        node / initial
    );
    println!(
        "| rows | system restart (ALL STOP) s | system restart (SIGKILL) s | node restart s | initial node restart s | durable commit / fdatasync |"
    );
    println!(
        "| {rows} | {graceful:.2} | {crash:.2} | {node:.2} | {initial:.2} | {:.1} |",
        dur_p50 / fs_p50
    );
    c.procs.keep = std::env::var_os("KEEP").is_some();
    Ok(())
}
