//! Issue 7: how long writes to a partition pause when its primary's process dies.
//!
//! Each round starts a fresh cluster of real processes on loopback (`rndb_mgmd`, data
//! nodes 2 and 3, NoOfReplicas=2, one node group [2, 3], HeartbeatIntervalDbDb=100), so
//! every round starts from the same state (a killed node could now rejoin by copy, but
//! the rounds would then differ), and creates
//! `kv (id BIGINT PRIMARY KEY, v VARBINARY(100))`. A writer thread runs single-row
//! Write transactions in a tight loop (no pause between attempts, failed or not) on
//! 64 keys of one partition whose primary is node 2 (`RemoteCluster::partition_of`,
//! `layout::replica_nodes`); so `RemoteCluster` sends each to node 2's TC while node 2
//! lives. After 1 s of writes node 2's process gets SIGKILL. Measured: the time from
//! the kill to the first successful write submitted after it (the *pause*), every
//! failed attempt with its error code, the attempt in flight at the kill, and when the
//! cluster log showed node 3 alone in its view.
//!
//! Each value carries a counter; after the pause the writer goes on for
//! `--after-ms` (default 500), then every key is read back from node 3 and checked: its
//! value is the last acknowledged one, or one of an attempt whose outcome was unknown
//! (4012) — an acknowledged write must not be lost.
//!
//! Usage (after `cargo build --release -p rndb-shell`):
//! `cargo run --release -p rndb-benches --bin failover_pause -- [--rounds R]
//! [--after-ms MS]` (default 3 rounds).

use rndb::cluster::layout::replica_nodes;
use rndb::cluster::remote::RemoteCluster;
use rndb::schema::Value;
use rndb::transport::data::{KeyOp, OpType};
use rndb_benches::procs::{DATA_NODES, ProcCluster};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DB: &str = "test";
const VALUE_SIZE: usize = 100;
const KEYS: usize = 64;
const HEARTBEAT_MS: u64 = 100;
const DATA_MEMORY_MB: u64 = 64;
const VICTIM: u32 = DATA_NODES[0];
const SURVIVOR: u32 = DATA_NODES[1];
/// A round fails when no write succeeds this long after the kill.
const GIVE_UP: Duration = Duration::from_secs(30);

// ---- the writer ----

fn value_for(key: i64, counter: u64) -> Vec<u8> {
    let mut v = vec![b'v'; VALUE_SIZE];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v[8..16].copy_from_slice(&counter.to_le_bytes());
    v
}

fn write_op(key: i64, counter: u64) -> KeyOp {
    KeyOp {
        op: OpType::Write,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(key)],
        values: vec![(1, Value::Bytes(value_for(key, counter)))],
        columns: Vec::new(),
    }
}

struct Attempt {
    key: i64,
    counter: u64,
    submitted: Instant,
    done: Instant,
    /// None: committed; Some(code).
    error: Option<u32>,
}

/// What the writer and the main thread share.
#[derive(Default)]
struct Progress {
    stop: AtomicBool,
    /// When node 2 was killed (set by the main thread).
    killed: Mutex<Option<Instant>>,
    /// A write submitted after the kill committed.
    ok_after_kill: AtomicBool,
}

fn writer(api: Arc<RemoteCluster>, keys: Vec<i64>, progress: Arc<Progress>) -> Vec<Attempt> {
    let mut out = Vec::with_capacity(1 << 16);
    let mut counter = 0u64;
    while !progress.stop.load(Ordering::Acquire) {
        counter += 1;
        let key = keys[counter as usize % keys.len()];
        let submitted = Instant::now();
        let r = api.execute(vec![write_op(key, counter)]);
        let after_kill = progress
            .killed
            .lock()
            .is_ok_and(|g| g.is_some_and(|k| submitted >= k));
        if r.is_ok() && after_kill {
            progress.ok_after_kill.store(true, Ordering::Release);
        }
        out.push(Attempt {
            key,
            counter,
            submitted,
            done: Instant::now(),
            error: r.err().map(|e| e.code),
        });
    }
    out
}

struct Round {
    /// The cluster log's line declaring the victim dead (how it was detected).
    dead_line: Option<String>,
    pause_ms: f64,
    view_ms: Option<f64>,
    failed: BTreeMap<u32, u64>,
    /// The first few failures, with their times relative to the kill.
    failures: Vec<String>,
    in_flight: String,
    before_median_us: f64,
    after_ok: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn round(r: usize, after: Duration) -> AnyResult<Round> {
    let mut cluster =
        ProcCluster::start(&format!("failover-{r}"), DATA_MEMORY_MB, Some(HEARTBEAT_MS))?;
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &cluster.connectstring(),
        Duration::from_secs(10),
    )?);
    api.sql(
        DB,
        &format!("CREATE TABLE kv (id BIGINT PRIMARY KEY, v VARBINARY({VALUE_SIZE})) ENGINE=NDB"),
    )?;
    let def = api.table(DB, "kv")?;
    let groups = api.config.node_groups();
    let primary = |k: i64| -> AnyResult<(usize, u32)> {
        let p = RemoteCluster::partition_of(&def, &[Value::Int(k)])?;
        Ok((p, replica_nodes(p, &groups)[0]))
    };
    // The partition of the first key whose primary is the victim, and KEYS of its keys.
    let mut part = None;
    let mut keys = Vec::new();
    for k in 0i64.. {
        let (p, n) = primary(k)?;
        if n != VICTIM {
            continue;
        }
        if *part.get_or_insert(p) == p {
            keys.push(k);
            if keys.len() == KEYS {
                break;
            }
        }
    }
    let part = part.ok_or("no partition with node 2 as primary")?;
    if r == 0 {
        println!(
            "node groups {groups:?}, {} partitions; writing {KEYS} keys of partition {part} (replicas {:?})",
            def.partitions,
            replica_nodes(part, &groups)
        );
    }

    let progress = Arc::new(Progress::default());
    let w = {
        let (api, keys, progress) = (api.clone(), keys.clone(), progress.clone());
        std::thread::Builder::new()
            .name("writer".into())
            .spawn(move || writer(api, keys, progress))?
    };
    std::thread::sleep(Duration::from_secs(1));
    let view_line = format!("Node {SURVIVOR}: Cluster membership: nodes {SURVIVOR} ");
    let killed = cluster.procs.kill(&format!("n{VICTIM}"))?;
    *progress.killed.lock().map_err(|_| "poisoned")? = Some(killed);
    // Watch the cluster log for the survivor alone in its view; the writer's first
    // success after the kill is found in its record afterwards.
    let mut view_ms = None;
    while killed.elapsed() < Duration::from_secs(5) && view_ms.is_none() {
        if cluster.cluster_log().contains(&view_line) {
            view_ms = Some(ms(killed.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let t = Instant::now();
    while !progress.ok_after_kill.load(Ordering::Acquire) && t.elapsed() < GIVE_UP {
        std::thread::sleep(Duration::from_millis(2));
    }
    if progress.ok_after_kill.load(Ordering::Acquire) {
        std::thread::sleep(after);
    }
    progress.stop.store(true, Ordering::Release);
    let attempts = w.join().map_err(|_| "writer panicked")?;

    let before: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| a.done < killed && a.error.is_none())
        .collect();
    let mut lat: Vec<f64> = before
        .iter()
        .map(|a| (a.done - a.submitted).as_secs_f64() * 1e6)
        .collect();
    lat.sort_by(f64::total_cmp);
    let before_median_us = lat.get(lat.len() / 2).copied().unwrap_or(f64::NAN);
    let in_flight = attempts
        .iter()
        .find(|a| a.submitted < killed && a.done >= killed)
        .map_or("none".to_string(), |a| match a.error {
            None => format!("committed after {:.1} ms", ms(a.done - killed)),
            Some(c) => format!("{c} after {:.1} ms", ms(a.done - killed)),
        });
    let mut failed: BTreeMap<u32, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    for a in attempts.iter().filter(|a| a.done >= killed) {
        if let Some(c) = a.error {
            *failed.entry(c).or_default() += 1;
            if failures.len() < 8 {
                failures.push(format!(
                    "{c} (sent {:+.1} ms, answered {:+.1} ms)",
                    a.submitted.saturating_duration_since(killed).as_secs_f64() * 1e3
                        - killed.saturating_duration_since(a.submitted).as_secs_f64() * 1e3,
                    ms(a.done - killed)
                ));
            }
        }
    }
    let first_ok = attempts
        .iter()
        .find(|a| a.submitted >= killed && a.error.is_none());
    let after_ok = attempts
        .iter()
        .filter(|a| a.submitted >= killed && a.error.is_none())
        .count() as u64;
    let Some(first_ok) = first_ok else {
        return Err(format!(
            "round {r}: no write succeeded after the kill (failed: {failed:?})\n{}",
            cluster.cluster_log()
        )
        .into());
    };
    let pause_ms = ms(first_ok.done - killed);

    // No acknowledged write lost: each key holds its last acknowledged counter or the
    // counter of a later attempt whose outcome was unknown (4012).
    let mut acked: BTreeMap<i64, u64> = BTreeMap::new();
    let mut maybe: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for a in &attempts {
        match a.error {
            None => {
                acked.insert(a.key, a.counter);
            }
            Some(4012) => maybe.entry(a.key).or_default().push(a.counter),
            Some(_) => {}
        }
    }
    let ks: Vec<Vec<Value>> = keys.iter().map(|&k| vec![Value::Int(k)]).collect();
    let rows = api.read_batch(DB, "kv", &ks, &[1])?;
    for (k, row) in keys.iter().zip(rows) {
        let got = match row.as_ref().map(|r| &r[..]) {
            Some([Value::Bytes(v)]) if v.len() == VALUE_SIZE && v[..8] == k.to_le_bytes() => {
                u64::from_le_bytes(v[8..16].try_into()?)
            }
            None => 0,
            other => return Err(format!("key {k}: read {other:?}").into()),
        };
        let a = acked.get(k).copied().unwrap_or(0);
        let ok = got == a
            || maybe
                .get(k)
                .is_some_and(|m| m.iter().any(|&c| c == got && c > a));
        if !ok {
            return Err(format!(
                "round {r}: key {k} holds counter {got}, last acknowledged {a}, unknown outcomes {:?}",
                maybe.get(k)
            )
            .into());
        }
    }
    let log = cluster.cluster_log();
    let dead_line = log
        .lines()
        .find(|l| l.contains(&format!("Node {VICTIM} declared dead")))
        .map(|l| l.trim().to_string());
    api.close();
    cluster.procs.keep = false;
    Ok(Round {
        dead_line,
        pause_ms,
        view_ms,
        failed,
        failures,
        in_flight,
        before_median_us,
        after_ok,
    })
}

fn main() -> AnyResult<()> {
    let mut rounds = 3usize;
    let mut after = Duration::from_millis(500);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().ok_or("--rounds N")?.parse()?,
            "--after-ms" => {
                after = Duration::from_millis(it.next().ok_or("--after-ms MS")?.parse()?)
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    println!(
        "failover_pause: {rounds} rounds; HeartbeatIntervalDbDb={HEARTBEAT_MS}; single-row Write \
         transactions in a tight loop; node {VICTIM} (primary of the partition) gets SIGKILL; \
         2 cores shared by the client, both data nodes and the management server; load average {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut pauses = Vec::new();
    let mut failed_total: BTreeMap<u32, u64> = BTreeMap::new();
    for r in 0..rounds {
        let x = round(r, after)?;
        println!(
            "round {}: pause {:.1} ms; survivor alone in the cluster log after {}; attempt in flight at the kill: {}; \
             failed attempts answered after the kill {:?}: {}; {} writes after the kill in {} ms; before the kill a write took {:.0} µs (median)",
            r + 1,
            x.pause_ms,
            x.view_ms.map_or("—".into(), |v| format!("{v:.0} ms")),
            x.in_flight,
            x.failed,
            x.failures.join(", "),
            x.after_ok,
            after.as_millis(),
            x.before_median_us
        );
        if r == 0 {
            println!(
                "  cluster log: {}",
                x.dead_line
                    .as_deref()
                    .unwrap_or("(no line declaring node 2 dead)")
            );
        }
        for (c, n) in &x.failed {
            *failed_total.entry(*c).or_default() += n;
        }
        pauses.push(x.pause_ms);
    }
    pauses.sort_by(f64::total_cmp);
    println!(
        "pause from SIGKILL to the first committed write on the partition: min {:.1} ms, median {:.1} ms, max {:.1} ms over {} rounds; failed attempts {:?}",
        pauses[0],
        pauses[pauses.len() / 2],
        pauses[pauses.len() - 1],
        pauses.len(),
        failed_total
    );
    Ok(())
}
