//! What SQL costs over TCP beside the key operations that make the same change or read
//! the same rows, in the same run. Statements that change rows are captured on a data
//! node (one of each node group when there are several) and applied by the client
//! through a TC (`cluster::remote_sql`, `remote_sql_groups`); with several node groups
//! a SELECT of a table is run by the client over every group (`remote_select`). A
//! cluster of real processes on loopback (`rndb_mgmd` and 2 × `groups` `rndbd`,
//! NoOfReplicas=2), one client, one statement at a time:
//!
//! - `UPDATE kv SET n = n + 1 WHERE id = k` against one Update key operation of the
//!   same row (a transaction of one round);
//! - `INSERT INTO kv VALUES (k, 0)` against one Insert key operation;
//! - `UPDATE kv SET n = n + 1 WHERE id BETWEEN a AND a+R-1` (R rows in one statement)
//!   against R Update operations in one transaction;
//! - `SELECT n FROM kv WHERE id = k` against one committed key read;
//! - `SELECT COUNT(*), SUM(n) FROM kv` against a scan of the table's `n` column
//!   summed by the client;
//! - `SELECT COUNT(*) FROM kv WHERE n = -7` (no row matches; `n` has no index: the
//!   condition is pushed to the data nodes' scans) against the same scan of `n`
//!   without it (what the statement cost before conditions were pushed);
//! - a session transaction `BEGIN; UPDATE .. WHERE id = a; UPDATE .. WHERE id = b;
//!   COMMIT` (`RemoteSession`) against one transaction of the two Update operations;
//! - apart: one Insert key operation into a table with a unique index against one into
//!   the same table without it (with several node groups the primary checks the value
//!   in the other groups first).
//!
//! Reported: median and 99th-percentile latency per statement or transaction, and the
//! ratio of the medians.
//!
//! Usage (after `cargo build --release -p rndb-shell`):
//! `cargo run --release -p rndb-benches --bin tcp_sql -- [statements] [range_rows] [groups] [--local]`
//! (defaults 2000, 500, 1). `--local`: the same nodes inside this process over the
//! in-process network (`cluster::local`, what `rndb_mgm` and C's `embedded` start),
//! instead of processes over loopback TCP.

use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_scan::RemoteScanSpec;
use rndb::cluster::remote_session::RemoteSession;
use rndb::schema::Value;
use rndb::transport::data::{KeyOp, OpType};
use rndb_benches::procs::ProcCluster;
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DB: &str = "test";
const KEYS: i64 = 10_000;

fn update_op(id: i64, n: i64) -> KeyOp {
    KeyOp {
        op: OpType::Update,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(id)],
        values: vec![(1, Value::Int(n))],
        columns: Vec::new(),
    }
}

/// (median, 99th percentile) in microseconds.
fn percentiles(mut us: Vec<f64>) -> (f64, f64) {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// Runs `f` `n` times, timing each call.
fn timed(n: usize, mut f: impl FnMut(usize) -> AnyResult<()>) -> AnyResult<(f64, f64)> {
    let mut us = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i)?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(percentiles(us))
}

fn line(what: &str, sql: (f64, f64), key_ops: (f64, f64)) {
    println!(
        "| {what} | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} |",
        sql.0,
        sql.1,
        key_ops.0,
        key_ops.1,
        sql.0 / key_ops.0
    );
}

fn main() -> AnyResult<()> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let local = all.iter().any(|a| a == "--local");
    let mut args = all.into_iter().filter(|a| a != "--local");
    let statements: usize = args.next().map_or(Ok(2000), |s| s.parse())?;
    let range_rows: i64 = args.next().map_or(Ok(500), |s| s.parse())?;
    let groups: u32 = args.next().map_or(Ok(1), |s| s.parse())?;
    let mut cluster = ProcCluster::start_groups("tcp-sql", 256, groups)?;
    // --local: the processes only lend their configuration and directory.
    let in_process = if local {
        let text = std::fs::read_to_string(cluster.procs.dir.join("config.ini"))?;
        let cfg = rndb::config::ClusterConfig::parse(&text, "tcp_sql.ini")?;
        for n in 2..2 + 2 * groups {
            cluster.procs.kill(&format!("n{n}"))?;
        }
        cluster.procs.kill("mgmd")?;
        let dir = cluster.procs.dir.join("local");
        Some(rndb::cluster::local::LocalCluster::start(
            cfg,
            Some(&dir),
            false,
        )?)
    } else {
        None
    };
    let cs = match &in_process {
        Some(lc) => lc.connectstring(),
        None => cluster.connectstring(),
    };
    let api = std::sync::Arc::new(RemoteCluster::connect(&cs, Duration::from_secs(10))?);
    api.sql(
        DB,
        "CREATE TABLE kv (id BIGINT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=NDB",
    )?;
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|k| format!("({k}, 0)")).collect();
        api.sql(DB, &format!("INSERT INTO kv VALUES {}", values.join(", ")))?;
    }
    println!(
        "tcp_sql: {groups} node group(s) of 2 rndbd{}; {KEYS} rows loaded by SQL; \
         {statements} statements per figure, one at a time",
        if local {
            " inside this process (in-process network)"
        } else {
            " processes (loopback TCP)"
        }
    );
    println!("| figure | SQL: median / p99 µs | key operations: median / p99 µs | SQL / key ops |");
    println!("|---|---:|---:|---:|");
    let keys = |i: usize| (i as i64 * 7919) % KEYS;
    let upd_sql = timed(statements, |i| {
        api.sql(
            DB,
            &format!("UPDATE kv SET n = n + 1 WHERE id = {}", keys(i)),
        )?;
        Ok(())
    })?;
    let upd_ops = timed(statements, |i| {
        api.execute(vec![update_op(keys(i), i as i64)])?;
        Ok(())
    })?;
    line("UPDATE of one row by key", upd_sql, upd_ops);
    let ins_sql = timed(statements, |i| {
        api.sql(
            DB,
            &format!("INSERT INTO kv VALUES ({}, 0)", KEYS + i as i64),
        )?;
        Ok(())
    })?;
    let base = KEYS + statements as i64;
    let ins_ops = timed(statements, |i| {
        api.execute(vec![KeyOp {
            op: OpType::Insert,
            ..update_op(base + i as i64, 0)
        }])?;
        Ok(())
    })?;
    line("INSERT of one row", ins_sql, ins_ops);
    let ranges = (KEYS / range_rows).clamp(1, 20) as usize;
    let range_sql = timed(ranges, |i| {
        let a = i as i64 * range_rows;
        api.sql(
            DB,
            &format!(
                "UPDATE kv SET n = n + 1 WHERE id BETWEEN {a} AND {}",
                a + range_rows - 1
            ),
        )?;
        Ok(())
    })?;
    let range_ops = timed(ranges, |i| {
        let a = i as i64 * range_rows;
        api.execute((a..a + range_rows).map(|k| update_op(k, 1)).collect())?;
        Ok(())
    })?;
    line(
        &format!("UPDATE of {range_rows} rows in one statement / transaction"),
        range_sql,
        range_ops,
    );
    let read_sql = timed(statements, |i| {
        api.sql(DB, &format!("SELECT n FROM kv WHERE id = {}", keys(i)))?;
        Ok(())
    })?;
    let read_ops = timed(statements, |i| {
        api.read_batch(DB, "kv", &[vec![Value::Int(keys(i))]], &[1])?;
        Ok(())
    })?;
    line("SELECT of one row by key", read_sql, read_ops);
    let scans = (statements / 50).max(5);
    let sum_sql = timed(scans, |_| {
        api.sql(DB, "SELECT COUNT(*), SUM(n) FROM kv")?;
        Ok(())
    })?;
    let sum_ops = timed(scans, |_| {
        let mut spec = RemoteScanSpec::table(DB, "kv");
        spec.columns = vec![1];
        spec.batch_rows = 512;
        let sum: i128 = api
            .scan_all(spec)?
            .iter()
            .filter_map(|r| r[0].as_i128())
            .sum();
        std::hint::black_box(sum);
        Ok(())
    })?;
    line(
        &format!(
            "SELECT COUNT(*), SUM(n) of {} rows (scan)",
            KEYS + 2 * statements as i64
        ),
        sum_sql,
        sum_ops,
    );
    let none_sql = timed(scans, |_| {
        api.sql(DB, "SELECT COUNT(*) FROM kv WHERE n = -7")?;
        Ok(())
    })?;
    line(
        "SELECT COUNT(*) WHERE n = -7 (pushed condition, no match) / scan of n",
        none_sql,
        sum_ops,
    );
    let mut session = RemoteSession::new(api.clone());
    let txn_sql = timed(statements / 2, |i| {
        for q in [
            "BEGIN".to_string(),
            format!("UPDATE kv SET n = n - 1 WHERE id = {}", keys(2 * i)),
            format!("UPDATE kv SET n = n + 1 WHERE id = {}", keys(2 * i + 1)),
            "COMMIT".to_string(),
        ] {
            session.execute(DB, &q)?;
        }
        Ok(())
    })?;
    let txn_ops = timed(statements / 2, |i| {
        api.execute(vec![
            update_op(keys(2 * i), 1),
            update_op(keys(2 * i + 1), 2),
        ])?;
        Ok(())
    })?;
    line(
        "BEGIN; 2 UPDATEs by key; COMMIT (session) / one transaction of 2 Updates",
        txn_sql,
        txn_ops,
    );
    // The price of a unique index: with several node groups the primary asks the other
    // groups' nodes (`datapath::unique_check`) before it answers.
    api.sql(
        DB,
        "CREATE TABLE uq (id BIGINT PRIMARY KEY, v BIGINT, UNIQUE KEY uv (v)) ENGINE=NDB",
    )?;
    api.sql(
        DB,
        "CREATE TABLE nq (id BIGINT PRIMARY KEY, v BIGINT) ENGINE=NDB",
    )?;
    let insert_into = |table: &str, i: usize| KeyOp {
        op: OpType::Insert,
        database: DB.into(),
        table: table.into(),
        key: vec![Value::Int(i as i64)],
        values: vec![(1, Value::Int(i as i64))],
        columns: Vec::new(),
    };
    let with_unique = timed(statements, |i| {
        api.execute(vec![insert_into("uq", i)])?;
        Ok(())
    })?;
    let without = timed(statements, |i| {
        api.execute(vec![insert_into("nq", i)])?;
        Ok(())
    })?;
    println!();
    println!(
        "| figure | with a unique index: median / p99 µs | without: median / p99 µs | ratio |"
    );
    println!("|---|---:|---:|---:|");
    line(
        "one Insert key operation (the row's unique value new)",
        with_unique,
        without,
    );
    api.close();
    if let Some(lc) = in_process {
        let cfg = lc.config().clone();
        drop(lc);
        direct_engines(cfg, &cluster.procs.dir.join("direct"), statements)?;
    }
    cluster.procs.keep = false;
    Ok(())
}

/// `--local`: the same statements on the direct engines (`api::Cluster`, the data
/// nodes' engines on this thread, what `rndb_mgm --direct` and Python's
/// `Cluster.embedded` run), against the same statements over the in-process nodes
/// (measured again here, after the other figures).
fn direct_engines(
    cfg: rndb::config::ClusterConfig,
    dir: &std::path::Path,
    statements: usize,
) -> AnyResult<()> {
    let keys = |i: usize| (i as i64 * 7919) % KEYS;
    let run = |sql: &mut dyn FnMut(&str) -> AnyResult<()>| -> AnyResult<[(f64, f64); 2]> {
        sql("CREATE TABLE kv2 (id BIGINT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=NDB")?;
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(500) {
            let values: Vec<String> = chunk.iter().map(|k| format!("({k}, 0)")).collect();
            sql(&format!("INSERT INTO kv2 VALUES {}", values.join(", ")))?;
        }
        let upd = timed(statements, |i| {
            sql(&format!("UPDATE kv2 SET n = n + 1 WHERE id = {}", keys(i)))
        })?;
        let sel = timed(statements, |i| {
            sql(&format!("SELECT n FROM kv2 WHERE id = {}", keys(i)))
        })?;
        Ok([upd, sel])
    };
    let nodes = {
        let lc = rndb::cluster::local::LocalCluster::start(
            cfg.clone(),
            Some(&dir.join("nodes")),
            false,
        )?;
        let api = std::sync::Arc::new(lc.connect(Duration::from_secs(10))?);
        let r = run(&mut |q: &str| {
            api.sql(DB, q)?;
            Ok(())
        })?;
        api.close();
        r
    };
    let direct = {
        let c = rndb::api::Cluster::embedded_in(cfg, dir.join("engines"))?;
        let mut session = rndb::sql::Session::new(c.ndb(DB));
        let r = run(&mut |q: &str| {
            session.execute(q)?;
            Ok(())
        })?;
        c.shutdown();
        r
    };
    println!();
    println!(
        "| statement | in-process nodes: median / p99 µs | direct engines: median / p99 µs | ratio |"
    );
    println!("|---|---:|---:|---:|");
    line("UPDATE of one row by key", nodes[0], direct[0]);
    line("SELECT of one row by key", nodes[1], direct[1]);
    Ok(())
}
