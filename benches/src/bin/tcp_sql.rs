//! What SQL that changes rows costs over TCP (`cluster::remote_sql`: a data node
//! captures the statement, the client applies the rows through a TC), beside the key
//! operation that makes the same change, in the same run. A cluster of real processes
//! on loopback (`rndb_mgmd` and two `rndbd`, NoOfReplicas=2, one node group), one
//! client, one statement at a time:
//!
//! - `UPDATE kv SET n = n + 1 WHERE id = k` against one Update key operation of the
//!   same row (a transaction of one round);
//! - `INSERT INTO kv VALUES (k, 0)` against one Insert key operation;
//! - `UPDATE kv SET n = n + 1 WHERE id BETWEEN a AND a+R-1` (R rows in one statement)
//!   against R Update operations in one transaction.
//!
//! Reported: median and 99th-percentile latency per statement or transaction, and the
//! ratio of the medians.
//!
//! Usage (after `cargo build --release -p rndb-shell`):
//! `cargo run --release -p rndb-benches --bin tcp_sql -- [statements] [range_rows]`
//! (defaults 2000, 500).

use rndb::cluster::remote::RemoteCluster;
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
    let mut args = std::env::args().skip(1);
    let statements: usize = args.next().map_or(Ok(2000), |s| s.parse())?;
    let range_rows: i64 = args.next().map_or(Ok(500), |s| s.parse())?;
    let mut cluster = ProcCluster::start("tcp-sql", 256, None)?;
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &cluster.connectstring(),
        Duration::from_secs(10),
    )?);
    api.sql(
        DB,
        "CREATE TABLE kv (id BIGINT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=NDB",
    )?;
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|k| format!("({k}, 0)")).collect();
        api.sql(DB, &format!("INSERT INTO kv VALUES {}", values.join(", ")))?;
    }
    println!(
        "tcp_sql: {KEYS} rows loaded by SQL over TCP; {statements} statements per figure, one at a time"
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
    api.close();
    cluster.procs.keep = false;
    Ok(())
}
