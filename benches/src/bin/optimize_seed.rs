//! Issue 8, seed 001's experiment: tables t5 and t6 as in the seed (VARCHAR(32) utf8 key
//! parts, PRIMARY KEY (`id`,`name`); t6 with the extra columns), 1M rows each, then 50%
//! of each deleted and OPTIMIZE TABLE run, then a node restart of node 3 (which rebuilds
//! its replicas from scratch: the seed's "rolling restart" cure).
//!
//! Two delete patterns: `limit` — the seed's five `DELETE ... LIMIT 100000` statements
//! with `ndb_use_transactions=0` (rows go in scan order, so many pages empty by
//! themselves), and `scattered` — every second row by key (`DELETE ... WHERE unit % 2 =
//! 0`), which leaves every page half full: the case OPTIMIZE exists for.
//!
//! Printed: `REPORT MEMORYUSAGE` data and index pages of node 2 and node 3 after the
//! load, after each table's deletes, after each OPTIMIZE TABLE and after node 3's
//! restart; OPTIMIZE's time and note; and the primary-key read rate of a concurrent
//! reader (batches of 100 committed reads of t6 by key, one thread) in the two seconds
//! before OPTIMIZE TABLE t5 and during it. The figure: pages OPTIMIZE freed on node 2 /
//! pages the rebuild freed on node 3 (target ≥ 0.95), and read rate during / before
//! (target ≥ 0.70).
//!
//! The disk-data variant (`disk`): t6 with `data2` and `unit` STORAGE DISK in a
//! tablespace of 1 MB extents, every second row deleted; printed are the extents used on
//! each node after the deletes and after OPTIMIZE TABLE, and the extents OPTIMIZE freed /
//! the extents a rebuild would free — the extents the same rows take when loaded afresh
//! into a copy of the table (target ≥ 0.95).
//!
//! Usage: `cargo run --release -p rndb-benches --bin optimize_seed -- [rows] [pattern]`
//! (default 1000000, all three patterns: limit, scattered, disk).

use rndb::Value;
use rndb::api::{Cluster, Ndb, TableRuntime};
use rndb::config::ClusterConfig;
use rndb::sql::{Session, SqlResult};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const T5: &str = "CREATE TABLE `t5` (`id` varchar(32) CHARACTER SET utf8 NOT NULL, \
    `name` varchar(32) NOT NULL DEFAULT '', `unit` int(11) DEFAULT NULL, \
    PRIMARY KEY (`id`,`name`)) ENGINE=ndbcluster DEFAULT CHARSET=latin1";
const T6: &str = "CREATE TABLE `t6` ( `id` varchar(32) CHARACTER SET utf8 NOT NULL, \
    `name` varchar(32) NOT NULL DEFAULT '', c0 int unsigned not null, c1 int unsigned not null, \
    data2 varchar(255), `unit` int(11) DEFAULT NULL, PRIMARY KEY (`id`,`name`) ) \
    ENGINE=ndbcluster DEFAULT CHARSET=latin1";
const CHUNK: u64 = 20_000;

fn id_of(k: u64) -> String {
    format!("{:016x}-{k}", k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn name_of(k: u64) -> String {
    format!("name-{}", k % 1000)
}

fn load(ndb: &Ndb, t: &Arc<TableRuntime>, rows: u64, wide: bool) -> AnyResult<()> {
    let mut n = 0;
    while n < rows {
        let batch: Vec<Vec<Value>> = (n..(n + CHUNK).min(rows))
            .map(|k| {
                let mut r = vec![Value::Str(id_of(k)), Value::Str(name_of(k))];
                if wide {
                    r.push(Value::UInt(k));
                    r.push(Value::UInt(k * 3));
                    r.push(Value::Str("d".repeat((k * 37 % 256) as usize)));
                }
                r.push(Value::Int(k as i64));
                r
            })
            .collect();
        let cols: Vec<usize> = (0..batch[0].len()).collect();
        ndb.insert_batch(t, &cols, batch)?;
        n += CHUNK;
    }
    Ok(())
}

/// Rows with odd keys (those a scattered delete keeps), wide, into `t`.
fn load_odd(ndb: &Ndb, t: &Arc<TableRuntime>, rows: u64) -> AnyResult<()> {
    let keys: Vec<u64> = (0..rows).filter(|k| k % 2 == 1).collect();
    for chunk in keys.chunks(CHUNK as usize) {
        let batch: Vec<Vec<Value>> = chunk
            .iter()
            .map(|&k| {
                vec![
                    Value::Str(id_of(k)),
                    Value::Str(name_of(k)),
                    Value::UInt(k),
                    Value::UInt(k * 3),
                    Value::Str("d".repeat((k * 37 % 256) as usize)),
                    Value::Int(k as i64),
                ]
            })
            .collect();
        ndb.insert_batch(t, &[0, 1, 2, 3, 4, 5], batch)?;
    }
    Ok(())
}

/// (data pages, index pages) per node, from `ALL REPORT MEMORYUSAGE`.
fn memory(c: &Cluster) -> AnyResult<Vec<(u32, u64, u64)>> {
    let text = rndb::mgm::execute(c.inner(), "ALL REPORT MEMORYUSAGE").map_err(|e| e.message)?;
    let mut out: Vec<(u32, u64, u64)> = Vec::new();
    for line in text.lines() {
        // Node 2: Data usage is 45%(14890 32K pages of total 32768)
        let node: u32 = line
            .strip_prefix("Node ")
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unexpected line {line:?}"))?;
        let pages: u64 = line
            .split('(')
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("unexpected line {line:?}"))?;
        match out.iter_mut().find(|e| e.0 == node) {
            Some(e) if line.contains("Index") => e.2 = pages,
            Some(e) => e.1 = pages,
            None => out.push((node, pages, 0)),
        }
    }
    Ok(out)
}

fn show(stage: &str, c: &Cluster) -> AnyResult<Vec<(u32, u64, u64)>> {
    let m = memory(c)?;
    let cells: Vec<String> = m
        .iter()
        .map(|(n, d, i)| format!("node {n}: data {d} index {i}"))
        .collect();
    println!("  {stage:<28} {}", cells.join(" | "));
    Ok(m)
}

fn sql(s: &mut Session, q: &str) -> AnyResult<Vec<SqlResult>> {
    Ok(s.execute(q).map_err(|e| format!("{q}: {e}"))?)
}

fn delete(s: &mut Session, table: &str, rows: u64, pattern: &str) -> AnyResult<f64> {
    let began = Instant::now();
    if pattern == "limit" {
        sql(s, "set ndb_use_transactions=0")?;
        // The seed's five DELETE ... LIMIT 100000 of 1M rows: a tenth of the rows each.
        for _ in 0..5 {
            sql(s, &format!("delete from {table} limit {}", rows / 10))?;
        }
        sql(s, "set ndb_use_transactions=1")?;
    } else {
        sql(s, "set ndb_use_transactions=0")?;
        sql(s, &format!("delete from {table} where unit % 2 = 0"))?;
        sql(s, "set ndb_use_transactions=1")?;
    }
    Ok(began.elapsed().as_secs_f64())
}

fn optimize(s: &mut Session, table: &str) -> AnyResult<(f64, String)> {
    let began = Instant::now();
    let r = sql(s, &format!("optimize table {table}"))?;
    let secs = began.elapsed().as_secs_f64();
    let note = match r.last() {
        Some(SqlResult::Rows { rows, .. }) => rows
            .iter()
            .map(|r| format!("{:?}", r.get(3)))
            .collect::<Vec<_>>()
            .join(" / "),
        _ => String::new(),
    };
    Ok((secs, note))
}

/// Committed reads of t6 by key in batches of 100 from one thread; counts into `reads`.
fn reader(c: Cluster, rows: u64, stop: Arc<AtomicBool>, reads: Arc<AtomicU64>) -> AnyResult<()> {
    let ndb = c.ndb("test");
    let t = ndb.table("t6")?;
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let keys: Vec<Vec<Value>> = (0..100)
            .map(|i| {
                let key = (k + i * 7919) % rows;
                vec![Value::Str(id_of(key)), Value::Str(name_of(key))]
            })
            .collect();
        ndb.read_batch(&t, &keys, &[5])?;
        reads.fetch_add(100, Ordering::Relaxed);
        k += 100;
    }
    Ok(())
}

fn wait_started(c: &Cluster, id: u32) -> AnyResult<()> {
    use rndb::api::node_restart::NodeRunState;
    let n = c.inner().node(id).ok_or("no node")?.clone();
    let deadline = Instant::now() + Duration::from_secs(600);
    while n.run_state() != NodeRunState::Started {
        if n.run_state() == NodeRunState::Stopped || Instant::now() > deadline {
            return Err(format!("node {id} did not start").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn run(rows: u64, pattern: &str) -> AnyResult<()> {
    println!("pattern {pattern}, {rows} rows per table");
    let mut cfg = ClusterConfig::embedded(2, 2)?;
    cfg.set_data_node_param("DataMemory", "1G")?;
    let c = Cluster::embedded(cfg)?;
    let ndb = c.ndb("test");
    let mut s = Session::new(c.ndb("test"));
    sql(&mut s, T5)?;
    sql(&mut s, T6)?;
    let began = Instant::now();
    load(&ndb, &ndb.table("t5")?, rows, false)?;
    load(&ndb, &ndb.table("t6")?, rows, true)?;
    println!("  loaded in {:.1} s", began.elapsed().as_secs_f64());
    show("after population", &c)?;
    let secs = delete(&mut s, "t5", rows, pattern)?;
    let t5_before = table_pages(&c, "t5", 3)?;
    show(&format!("after t5 deletes ({secs:.1} s)"), &c)?;
    // The concurrent reader: its rate before OPTIMIZE TABLE t5 and during it.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let handle = {
        let (c2, stop2, reads2) = (c.clone(), stop.clone(), reads.clone());
        std::thread::spawn(move || reader(c2, rows, stop2, reads2))
    };
    std::thread::sleep(Duration::from_millis(300));
    let r0 = reads.load(Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let before_rate = (reads.load(Ordering::Relaxed) - r0) as f64 / t0.elapsed().as_secs_f64();
    let r1 = reads.load(Ordering::Relaxed);
    let t1 = Instant::now();
    let (secs, note) = optimize(&mut s, "t5")?;
    let during_rate = (reads.load(Ordering::Relaxed) - r1) as f64 / t1.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    handle.join().map_err(|_| "reader panicked")??;
    show(&format!("after OPTIMIZE t5 ({secs:.1} s)"), &c)?;
    println!("    {note}");
    println!(
        "  reads of t6: {before_rate:.0}/s before, {during_rate:.0}/s during OPTIMIZE t5 ({:.2})",
        during_rate / before_rate
    );
    let secs = delete(&mut s, "t6", rows, pattern)?;
    let t6_before = table_pages(&c, "t6", 3)?;
    show(&format!("after t6 deletes ({secs:.1} s)"), &c)?;
    let (secs, note) = optimize(&mut s, "t6")?;
    show(&format!("after OPTIMIZE t6 ({secs:.1} s)"), &c)?;
    println!("    {note}");
    let t5_after = table_pages(&c, "t5", 3)?;
    let t6_after = table_pages(&c, "t6", 3)?;
    rndb::mgm::execute(c.inner(), "3 RESTART").map_err(|e| e.message)?;
    let began = Instant::now();
    wait_started(&c, 3)?;
    show(
        &format!(
            "after restart of node 3 ({:.1} s)",
            began.elapsed().as_secs_f64()
        ),
        &c,
    )?;
    // Node 3 was optimized like node 2, then rebuilt from scratch by its restart: the
    // rebuild frees what OPTIMIZE freed plus what the restart freed on top.
    for (name, before, after) in [("t5", &t5_before, &t5_after), ("t6", &t6_before, &t6_after)] {
        let rebuilt = table_pages(&c, name, 3)?;
        for p in [before, after, &rebuilt] {
            println!(
                "  {name} node 3 fixed {} var {} ordered {} hash {}",
                p.fixed, p.var, p.ordered, p.hash
            );
        }
        for (what, with_hash) in [
            ("data (fixed+var+ordered)", false),
            ("all (with hash index)", true),
        ] {
            let (b, a, r) = (
                before.sum(with_hash),
                after.sum(with_hash),
                rebuilt.sum(with_hash),
            );
            let (by_optimize, by_rebuild) = (b as i64 - a as i64, b as i64 - r as i64);
            println!(
                "  {name} node 3 {what}: {b} pages after deletes, {a} after OPTIMIZE, {r} rebuilt; OPTIMIZE freed {by_optimize} of the rebuild's {by_rebuild} ({:.3})",
                by_optimize as f64 / by_rebuild.max(1) as f64
            );
        }
    }
    Ok(())
}

/// A table's pages on one node, summed over its replicas there.
struct TablePages {
    fixed: u64,
    var: u64,
    ordered: u64,
    hash: u64,
}

impl TablePages {
    fn sum(&self, with_hash: bool) -> u64 {
        self.fixed + self.var + self.ordered + if with_hash { self.hash } else { 0 }
    }
}

fn table_pages(c: &Cluster, name: &str, node: u32) -> AnyResult<TablePages> {
    let t = c.ndb("test").table(name)?;
    let mut p = TablePages {
        fixed: 0,
        var: 0,
        ordered: 0,
        hash: 0,
    };
    for cell in t.all_cells().filter(|cell| cell.node_id == node) {
        let m = cell.state.lock().memory();
        p.fixed += u64::from(m.fixed_pages);
        p.var += u64::from(m.var_pages);
        p.ordered += m.ordered.iter().map(|o| u64::from(o.1)).sum::<u64>();
        p.hash += u64::from(m.hash_pages);
    }
    Ok(p)
}

const T6D: &str = "CREATE TABLE `t6d` ( `id` varchar(32) CHARACTER SET utf8 NOT NULL, \
    `name` varchar(32) NOT NULL DEFAULT '', c0 int unsigned not null, c1 int unsigned not null, \
    data2 varchar(255) STORAGE DISK, `unit` int(11) STORAGE DISK DEFAULT NULL, \
    PRIMARY KEY (`id`,`name`) ) TABLESPACE ts_1 STORAGE DISK ENGINE=ndbcluster DEFAULT CHARSET=latin1";

/// (free, total) extents of the tablespace's data files on `node`.
fn extents(c: &Cluster, node: u32) -> AnyResult<(u64, u64)> {
    let n = c.inner().node(node).ok_or("no node")?;
    Ok(n.disk.tsman.files_info().iter().fold((0, 0), |(f, t), i| {
        (f + i.free_extents, t + i.total_extents)
    }))
}

/// The disk-data variant: t6 with `data2` and `unit` STORAGE DISK, every second row
/// deleted; extents given back by OPTIMIZE on node 2 against node 3's rebuild.
fn run_disk(rows: u64) -> AnyResult<()> {
    println!("pattern disk (t6d: data2, unit STORAGE DISK; every second row deleted), {rows} rows");
    let dir = std::path::PathBuf::from(format!("/tmp/rndb-optimize-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = (|| -> AnyResult<()> {
        let mut cfg = ClusterConfig::embedded(2, 2)?;
        cfg.set_data_node_param("DataMemory", "1G")?;
        cfg.set_data_node_param("DiskPageBufferMemory", "256M")?;
        cfg.set_data_node_param("SharedGlobalMemory", "128M")?;
        let c = Cluster::embedded_in(cfg, dir.clone())?;
        let ndb = c.ndb("test");
        let mut s = Session::new(c.ndb("test"));
        sql(
            &mut s,
            "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=512M UNDO_BUFFER_SIZE=32M ENGINE=NDB",
        )?;
        let ts_mb = (rows * 400 / 1_000_000).max(64);
        sql(
            &mut s,
            &format!(
                "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE={ts_mb}M EXTENT_SIZE=1M ENGINE=NDB"
            ),
        )?;
        sql(&mut s, T6D)?;
        let began = Instant::now();
        load(&ndb, &ndb.table("t6d")?, rows, true)?;
        println!("  loaded in {:.1} s", began.elapsed().as_secs_f64());
        let show_ext = |stage: &str| -> AnyResult<(u64, u64)> {
            let (f2, t2) = extents(&c, 2)?;
            let (f3, _) = extents(&c, 3)?;
            println!(
                "  {stage:<28} extents used: node 2 {} node 3 {} (of {t2})",
                t2 - f2,
                t2 - f3
            );
            Ok((t2 - f2, t2 - f3))
        };
        show("after population", &c)?;
        show_ext("after population")?;
        let secs = delete(&mut s, "t6d", rows, "scattered")?;
        show(&format!("after deletes ({secs:.1} s)"), &c)?;
        let (_, used3_deleted) = show_ext("after deletes")?;
        let (secs, note) = optimize(&mut s, "t6d")?;
        show(&format!("after OPTIMIZE ({secs:.1} s)"), &c)?;
        let (_, used3_optimized) = show_ext("after OPTIMIZE")?;
        println!("    {note}");
        // The rebuild: the surviving rows (odd keys) loaded into a fresh copy of the
        // table (a node restart with a data directory does not copy disk data yet).
        sql(&mut s, &T6D.replace("`t6d`", "`t6r`"))?;
        load_odd(&ndb, &ndb.table("t6r")?, rows)?;
        let (_, used3_both) = show_ext("after loading the copy t6r")?;
        let rebuilt = used3_both - used3_optimized;
        let by_optimize = used3_deleted as i64 - used3_optimized as i64;
        let by_rebuild = used3_deleted as i64 - rebuilt as i64;
        println!(
            "  t6d node 3 extents: {used3_deleted} after deletes, {used3_optimized} after OPTIMIZE, {rebuilt} for the same rows loaded afresh; OPTIMIZE freed {by_optimize} of the rebuild's {by_rebuild} ({:.3})",
            by_optimize as f64 / by_rebuild.max(1) as f64
        );
        Ok(())
    })();
    std::fs::remove_dir_all(&dir)?;
    result
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let patterns: Vec<&str> = match args.get(2).map(String::as_str) {
        Some(p) => vec![p],
        None => vec!["limit", "scattered", "disk"],
    };
    for p in patterns {
        if p == "disk" {
            run_disk(rows)?;
        } else {
            run(rows, p)?;
        }
    }
    Ok(())
}
