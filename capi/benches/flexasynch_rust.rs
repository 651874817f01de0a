//! The flexAsynch batches through the Rust API, to compare with the C++ program of
//! `benches/flexasynch/` (the C ABI's overhead): table TAB0 with a 2-word key (COL0,
//! BIGINT UNSIGNED) and 24 Uint32 attributes, batches of 32 single-operation
//! transactions per thread, phases insert, read, update, delete.
//!
//! What the C ABI does with a batch of 32 transactions prepared with executeAsynchPrepare
//! and sent with sendPollNdb, done here through the Rust API: committed reads go through
//! `Ndb::read_batch_visit` (one call for the 32 keys, each row copied from its stored
//! form into a row of 24 Uint32), writes run one engine `Transaction` each
//! (`define_by_pos` + `execute(Commit)`). For reference, three other ways to read:
//! `read_values` (`Ndb::read_batch_into`, rows decoded into `Value`s), `read_tx32` (one
//! Transaction with 32 reads) and `read_tx_per_op` (one Transaction per read).
//!
//! Usage: `cargo bench -p rndb-capi --bench flexasynch_rust -- [threads] [ops_per_thread] [parallel]`
//! (`FLEXASYNCH_PHASES=insert,update` runs only the phases named, and
//! `FLEXASYNCH_READ_PASSES=n` reads every key n times in the read phases, as
//! flexAsynch.cpp does)
//! Prints one line per phase: `rust <phase> <threads> <ops/s>`, and `rust_cpu <phase>
//! <threads> <ops/s>` with the CPU time of the threads instead of the elapsed time (as
//! flexAsynch.cpp does: each thread times its own share; the longest gives the rate).

use rndb_core::api::{Cluster, Ndb, TableRuntime, TableSpec};
use rndb_core::config::ClusterConfig;
use rndb_core::schema::{Column, ColumnType};
use rndb_core::{AbortOption, ExecType, LockMode, OpKind, Value};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const ATTRS: usize = 24;

fn table(ndb: &Ndb) -> rndb_core::Result<Arc<TableRuntime>> {
    let mut columns = vec![
        Column::new(
            "COL0",
            ColumnType::Int {
                bytes: 8,
                unsigned: true,
            },
        )
        .primary_key(),
    ];
    for a in 1..=ATTRS {
        columns.push(
            Column::new(
                format!("COL{a}"),
                ColumnType::Int {
                    bytes: 4,
                    unsigned: true,
                },
            )
            .not_null(),
        );
    }
    ndb.create_table(TableSpec {
        name: "TAB0".into(),
        columns,
        primary_key: vec![],
        indexes: vec![],
        logging: true,
        if_not_exists: false,
        tablespace: None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Insert,
    Read,
    ReadValues,
    ReadTx32,
    ReadTxPerOp,
    Update,
    Delete,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Read => "read",
            Phase::ReadValues => "read_values",
            Phase::ReadTx32 => "read_tx32",
            Phase::ReadTxPerOp => "read_tx_per_op",
            Phase::Update => "update",
            Phase::Delete => "delete",
        }
    }
}

fn key_of(thread: u64, i: u64) -> u64 {
    (thread << 32) | i
}

fn attrs(k: u64, delta: u32) -> Vec<(usize, Value)> {
    (1..=ATTRS)
        .map(|a| {
            (
                a,
                Value::UInt((k as u32).wrapping_add(a as u32 + delta) as u64),
            )
        })
        .collect()
}

/// One thread's share of a phase, in batches of `parallel`; returns a checksum of what
/// it read.
fn run_phase(
    ndb: &Ndb,
    t: &Arc<TableRuntime>,
    phase: Phase,
    thread: u64,
    ops: u64,
    parallel: u64,
) -> rndb_core::Result<u64> {
    let read_cols: Vec<usize> = (1..=ATTRS).collect();
    let mut sum = 0u64;
    let (mut keys, mut out, mut found) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows: Vec<[u32; ATTRS]> = Vec::new();
    let mut i = 0;
    while i < ops {
        let n = parallel.min(ops - i);
        match phase {
            Phase::Read => {
                // As the C ABI does: each row found is copied from its stored form into
                // the caller's row (24 Uint32 values), under the fragment's mutex.
                keys.clear();
                keys.extend((0..n).map(|j| Value::UInt(key_of(thread, i + j))));
                rows.resize(n as usize, [0u32; ATTRS]);
                let layout = &t.def.layout;
                ndb.read_batch_visit(t, &keys, &mut |slot, stored| {
                    let row = &mut rows[slot];
                    for (a, x) in row.iter_mut().enumerate() {
                        if let Some(b) = layout.col_bytes(a + 1, stored.fixed, stored.var) {
                            *x = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                        }
                    }
                })?;
                for row in &rows[..n as usize] {
                    sum = row.iter().fold(sum, |s, &x| s.wrapping_add(x as u64));
                }
            }
            Phase::ReadValues => {
                keys.clear();
                keys.extend((0..n).map(|j| Value::UInt(key_of(thread, i + j))));
                ndb.read_batch_into(t, &keys, &read_cols, &mut out, &mut found)?;
                sum = sum.wrapping_add(checksum(&out));
            }
            Phase::ReadTx32 => {
                let mut tx = ndb.start_transaction()?;
                let mut ids = Vec::with_capacity(n as usize);
                for j in 0..n {
                    ids.push(tx.define_by_pos(
                        t,
                        OpKind::Read(LockMode::CommittedRead),
                        vec![(0, Value::UInt(key_of(thread, i + j)))],
                        Vec::new(),
                        Some(read_cols.clone()),
                    )?);
                }
                tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
                for id in ids {
                    if let Some(row) = tx.take_row(id) {
                        sum = sum.wrapping_add(checksum(&row));
                    }
                }
                tx.close();
            }
            _ => {
                for j in 0..n {
                    let k = key_of(thread, i + j);
                    let key = vec![(0, Value::UInt(k))];
                    let mut tx = ndb.start_transaction()?;
                    let op = match phase {
                        Phase::Insert => {
                            tx.define_by_pos(t, OpKind::Insert, key, attrs(k, 0), None)?
                        }
                        Phase::Update => {
                            tx.define_by_pos(t, OpKind::Update, key, attrs(k, 1), None)?
                        }
                        Phase::Delete => {
                            tx.define_by_pos(t, OpKind::Delete, key, Vec::new(), None)?
                        }
                        _ => tx.define_by_pos(
                            t,
                            OpKind::Read(LockMode::CommittedRead),
                            key,
                            Vec::new(),
                            Some(read_cols.clone()),
                        )?,
                    };
                    tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
                    if let Some(row) = tx.take_row(op) {
                        sum = sum.wrapping_add(checksum(&row));
                    }
                    tx.close();
                }
            }
        }
        i += n;
    }
    Ok(sum)
}

/// CPU time of the calling thread (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`; Linux).
fn thread_cpu() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a writable timespec.
    if unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `FLEXASYNCH_PHASES=insert,update,...` runs only the phases named (default: all), so
/// that the instruction counts of a phase can be compared under callgrind.
fn phase_selected(phase: Phase) -> bool {
    match std::env::var("FLEXASYNCH_PHASES") {
        Ok(list) => list.split(',').any(|p| p.trim() == phase.name()),
        Err(_) => true,
    }
}

/// How many times a phase goes over its keys: `FLEXASYNCH_READ_PASSES` for the read
/// phases (a read phase of one pass lasts tens of milliseconds), once for the others.
fn passes_of(phase: Phase) -> u64 {
    match phase {
        Phase::Insert | Phase::Update | Phase::Delete => 1,
        _ => std::env::var("FLEXASYNCH_READ_PASSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1u64)
            .max(1),
    }
}

fn checksum(row: &[Value]) -> u64 {
    row.iter()
        .map(|v| match v {
            Value::UInt(x) => *x,
            _ => 0,
        })
        .fold(0u64, u64::wrapping_add)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let threads: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(1);
    let ops: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let parallel: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(32);
    let mut cfg = ClusterConfig::embedded_default();
    cfg.set_data_node_param("DataMemory", "1G")?;
    let cluster = Cluster::embedded(cfg)?;
    let ndb = cluster.ndb("TEST_DB");
    let t = table(&ndb)?;
    for phase in [
        Phase::Insert,
        Phase::Read,
        Phase::ReadValues,
        Phase::ReadTx32,
        Phase::ReadTxPerOp,
        Phase::Update,
        Phase::Delete,
    ] {
        if !phase_selected(phase) {
            continue;
        }
        let barrier = Arc::new(Barrier::new(threads as usize));
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                let ndb = cluster.ndb("TEST_DB");
                let t = t.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || -> rndb_core::Result<(Duration, Duration, u64)> {
                    barrier.wait();
                    let t0 = Instant::now();
                    let c0 = thread_cpu();
                    let mut s = 0u64;
                    for _ in 0..passes_of(phase) {
                        s = s.wrapping_add(run_phase(&ndb, &t, phase, th, ops, parallel)?);
                    }
                    let cpu = thread_cpu().saturating_sub(c0);
                    Ok((t0.elapsed(), cpu, s))
                })
            })
            .collect();
        let (mut longest, mut longest_cpu) = (Duration::ZERO, Duration::ZERO);
        for h in handles {
            let (d, cpu, s) = h.join().map_err(|_| "thread panicked")??;
            std::hint::black_box(s);
            longest = longest.max(d);
            longest_cpu = longest_cpu.max(cpu);
        }
        let done = (threads * ops * passes_of(phase)) as f64;
        let rate = done / longest.as_secs_f64();
        println!("rust {} {threads} {rate:.0}", phase.name());
        let rate = done / longest_cpu.as_secs_f64();
        println!("rust_cpu {} {threads} {rate:.0}", phase.name());
    }
    cluster.shutdown();
    Ok(())
}
