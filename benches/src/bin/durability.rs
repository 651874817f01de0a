//! Issue 6 figures measured with their peers in the same run:
//! - **cost of logging**: inserts (insert_batch, and transactions of 100 rows) and
//!   updates (transactions of 100 rows) into a logged table and into a NoLogging table
//!   of the same cluster, which writes redo and runs global checkpoints; the ratio is
//!   the cost of the redo log (target: logged at most 20% slower);
//! - **durable-commit latency**: a one-row commit followed by `wait_durable` (which asks
//!   for the global checkpoint at once), beside one 4 KiB `pwrite` + `fdatasync` on a
//!   preallocated file in the same directory.
//!
//! Usage: `cargo run --release -p rndb-benches --bin durability -- [rows] [commits]`
//! (default 1,000,000 rows, 300 durable commits). The data directory is a fresh
//! directory under /tmp, removed at the end.

use rndb::api::{Cluster, TableRuntime};
use rndb::config::ClusterConfig;
use rndb::{AbortOption, ExecType, Ndb, OpKind, Value};
use rndb_benches::{kv_table_spec, median, value_b};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn table(ndb: &Ndb, name: &str, logging: bool) -> rndb::Result<Arc<TableRuntime>> {
    let mut spec = kv_table_spec(name);
    spec.logging = logging;
    ndb.create_table(spec)
}

fn rows(n: u64, salt: i64) -> Vec<Vec<Value>> {
    (0..n)
        .map(|i| {
            vec![
                Value::UInt(i),
                Value::Int((i as i64 + salt) % 1000),
                Value::Str(value_b(i)),
            ]
        })
        .collect()
}

/// Rows/s of `n` inserts in transactions of `per_txn` rows.
fn insert_txns(ndb: &Ndb, t: &Arc<TableRuntime>, n: u64, per_txn: u64) -> AnyResult<f64> {
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        let mut tx = ndb.start_transaction()?;
        for k in i..(i + per_txn).min(n) {
            tx.define(
                t,
                OpKind::Insert,
                &[("id", Value::UInt(k))],
                &[
                    ("a", Value::Int((k % 1000) as i64)),
                    ("b", Value::Str(value_b(k))),
                ],
                None,
            )?;
        }
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        i += per_txn;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

/// Rows/s of `n` updates in transactions of `per_txn` rows.
fn update_txns(
    ndb: &Ndb,
    t: &Arc<TableRuntime>,
    n: u64,
    per_txn: u64,
    round: i64,
) -> AnyResult<f64> {
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        let mut tx = ndb.start_transaction()?;
        for k in i..(i + per_txn).min(n) {
            tx.define(
                t,
                OpKind::Update,
                &[("id", Value::UInt(k))],
                &[("a", Value::Int(round + k as i64))],
                None,
            )?;
        }
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        i += per_txn;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let commits: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(300);
    let dir = std::env::temp_dir().join(format!("rndb-durability-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut cfg = ClusterConfig::embedded(2, 2)?;
    cfg.set_data_node_param("DataMemory", "2G")?;
    let cluster = Cluster::embedded_in(cfg, dir.clone())?;
    let ndb = cluster.ndb("test");
    println!(
        "rndb durability: {n} rows, 2 data nodes, NoOfReplicas=2, redo in {}",
        dir.display()
    );
    println!(
        "{:<34} {:>14} {:>14} {:>8}",
        "", "logged", "NoLogging", "ratio"
    );
    let report = |what: &str, logged: f64, nolog: f64| {
        println!(
            "{what:<34} {logged:>10.0} r/s {nolog:>10.0} r/s {:>8.3}",
            logged / nolog
        );
    };
    // Alternate the two tables so that drift of the machine hits both alike.
    let (mut ins_l, mut ins_n) = (Vec::new(), Vec::new());
    for round in 0..3 {
        for logging in [true, false] {
            let name = format!("t_{}_{round}", if logging { "log" } else { "nolog" });
            let t = table(&ndb, &name, logging)?;
            let t0 = Instant::now();
            ndb.insert_batch(&t, &[0, 1, 2], rows(n, 0))?;
            let r = n as f64 / t0.elapsed().as_secs_f64();
            if logging { &mut ins_l } else { &mut ins_n }.push(r);
            ndb.drop_table(&name, false)?;
        }
    }
    report("insert_batch", median(&mut ins_l), median(&mut ins_n));
    let small = (n / 4).max(1000);
    let (mut tl, mut tn, mut ul, mut un) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        for logging in [true, false] {
            let name = format!("u_{}_{round}", if logging { "log" } else { "nolog" });
            let t = table(&ndb, &name, logging)?;
            let ins = insert_txns(&ndb, &t, small, 100)?;
            let upd = update_txns(&ndb, &t, small, 100, round)?;
            if logging {
                tl.push(ins);
                ul.push(upd);
            } else {
                tn.push(ins);
                un.push(upd);
            }
            ndb.drop_table(&name, false)?;
        }
    }
    report(
        "insert, 100 rows per transaction",
        median(&mut tl),
        median(&mut tn),
    );
    report(
        "update, 100 rows per transaction",
        median(&mut ul),
        median(&mut un),
    );

    // Durable commits, one at a time, and fdatasync beside them.
    let t = table(&ndb, "d", true)?;
    let fsyncs = || -> (u64, u64) {
        cluster
            .inner()
            .data_nodes
            .iter()
            .filter_map(|n| n.log.as_ref())
            .map(|l| l.redo.counters())
            .fold((0, 0), |(f, g), c| (f + c.fdatasyncs, g + c.group_commits))
    };
    let (f0, g0) = fsyncs();
    let mut lat = Vec::with_capacity(commits);
    let mut commit_only = Vec::with_capacity(commits);
    for i in 0..commits as u64 {
        let t0 = Instant::now();
        let mut tx = ndb.start_transaction()?;
        tx.define(
            &t,
            OpKind::Write,
            &[("id", Value::UInt(i % 100))],
            &[("a", Value::Int(i as i64)), ("b", Value::Str(value_b(i)))],
            None,
        )?;
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        commit_only.push(t0.elapsed().as_secs_f64() * 1e6);
        let gci = tx.gci().ok_or("no GCI after commit")?;
        cluster.wait_durable(gci, Duration::from_secs(30))?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let (f1, g1) = fsyncs();
    // The global checkpoint alone, run by this thread (no wake-up of the GCP thread).
    let mut gcp = Vec::with_capacity(commits);
    for i in 0..commits as u64 {
        let mut tx = ndb.start_transaction()?;
        tx.define(
            &t,
            OpKind::Write,
            &[("id", Value::UInt(i % 100))],
            &[("a", Value::Int(i as i64)), ("b", Value::Str(value_b(i)))],
            None,
        )?;
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
        let t0 = Instant::now();
        cluster.inner().force_gcp()?;
        gcp.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    // What a system file save costs: write aside, fsync, rename, fsync the directory.
    let mut atomic = Vec::with_capacity(commits);
    let sysfile = dir.join("atomic-probe");
    let tmp = dir.join("atomic-probe.tmp");
    for i in 0..commits {
        let t0 = Instant::now();
        {
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, &[i as u8; 512])?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &sysfile)?;
        std::fs::File::open(&dir)?.sync_all()?;
        atomic.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.join("fsync-probe"))?;
    f.set_len(64 << 20)?;
    f.write_all_at(&vec![0u8; 64 << 20], 0)?;
    f.sync_all()?;
    let block = vec![7u8; 4096];
    let mut fs = Vec::with_capacity(commits);
    for i in 0..commits as u64 {
        let t0 = Instant::now();
        f.write_all_at(&block, (i % 16_000) * 4096)?;
        f.sync_data()?;
        fs.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let p99 = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[(v.len() * 99 / 100).min(v.len() - 1)]
    };
    let (lm, fm) = (median(&mut lat), median(&mut fs));
    println!(
        "durable commit (commit + wait_durable)  median {lm:>8.0} us  p99 {:>8.0} us",
        p99(&mut lat)
    );
    println!(
        "4 KiB pwrite + fdatasync                median {fm:>8.0} us  p99 {:>8.0} us",
        p99(&mut fs)
    );
    println!(
        "  of which commit                      median {:>8.0} us",
        median(&mut commit_only)
    );
    println!(
        "  redo fdatasyncs per durable commit: {:.1} (all nodes), group commits {:.1}",
        (f1 - f0) as f64 / commits as f64,
        (g1 - g0) as f64 / commits as f64
    );
    println!(
        "force_gcp by the caller's thread       median {:>8.0} us  p99 {:>8.0} us",
        median(&mut gcp),
        p99(&mut gcp)
    );
    println!(
        "write aside + fsync + rename + dir fsync median {:>6.0} us  p99 {:>8.0} us",
        median(&mut atomic),
        p99(&mut atomic)
    );
    println!("durable commit / fdatasync: {:.2}", lm / fm);
    cluster.shutdown();
    drop(cluster);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
