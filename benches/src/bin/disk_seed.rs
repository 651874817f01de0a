//! Issue 5: the seed's disk-data scenario, end to end, in one run.
//!
//! 1. An embedded cluster (default: 2 data nodes, one node group, NoOfReplicas=2) on a
//!    data directory under /tmp (removed at the end), DiskPageBufferMemory=64M; the
//!    logfile group, a tablespace and the seed's `t1 (id BIGINT AUTO_INCREMENT PRIMARY
//!    KEY, data1 VARCHAR(512), data2 VARCHAR(512)) ... STORAGE DISK` through SQL; N rows
//!    (default 650,000) with data1/data2 of uniformly random length 0..=512 (printable
//!    ASCII, seeded PRNG) loaded through `Ndb::insert_batch`.
//! 2. Random primary-key reads from one client thread, uniform over 1..=N, all columns,
//!    each a single-operation committed-read transaction through the Ndb API (or, with
//!    `--via sql`, `SET @x=..; SELECT * FROM t1 WHERE id=@x` through the SQL session):
//!    reads/s and the seed's hit ratio (direct_return / (direct_return + wait_io)) per
//!    interval, per node and in total; then the advisor's prediction for the larger size.
//! 3. DiskPageBufferMemory resized online to 512M on every data node through
//!    `PageCache::resize` (the management server's `SET DiskPageBufferMemory` only
//!    records the value: a rolling restart needs node recovery, and a restart on the
//!    same data directory needs persistence — neither exists yet), and step 2 again; the
//!    measured steady-state hit ratio beside the prediction.
//! 4. Inserts into a fresh t1 (DROP + CREATE) with 1, 5 and 20 client threads, five
//!    rows per transaction (auto-increment ids), with the page cache's and the undo
//!    log's counters after each run.
//!
//! Usage: `cargo run --release -p rndb-benches --bin disk_seed -- [--rows N]
//! [--seconds S] [--interval S] [--insert-rows N] [--threads 1,5,20] [--nodes N]
//! [--replicas R] [--via ndb|sql] [--small 64M] [--large 512M] [--cleaner-ms MS] [--keep]`
//!
//! `--cleaner-ms MS` starts each data node's page-cache cleaner (`PageCache::start_cleaner`,
//! 64 dirty pages per round) from the benchmark: the cluster does not start it, and
//! without it the dirty pages a load leaves behind are never evicted (see
//! `benches/tests/pgman_dirty_pages.rs`).

use rndb::api::TableRuntime;
use rndb::config::ClusterConfig;
use rndb::disk::pgman::PageCacheStats;
use rndb::sql::{Session, SqlResult};
use rndb::{AbortOption, Cluster, ExecType, LockMode, Ndb, NdbError, OpKind, Value};
use rndb_benches::Rng;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Args {
    rows: u64,
    seconds: f64,
    interval: f64,
    insert_rows: u64,
    threads: Vec<usize>,
    nodes: u32,
    replicas: u32,
    via_sql: bool,
    small: String,
    large: String,
    keep: bool,
    /// Start each node's PGMAN background cleaner with this interval (0: as the cluster
    /// starts it today, i.e. not at all).
    cleaner_ms: u64,
}

fn parse_size(s: &str) -> AnyResult<u64> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    Ok(num.parse::<u64>()? * mult)
}

fn parse_args() -> AnyResult<Args> {
    let mut a = Args {
        rows: 650_000,
        seconds: 60.0,
        interval: 5.0,
        insert_rows: 1_000_000,
        threads: vec![1, 5, 20],
        nodes: 2,
        replicas: 2,
        via_sql: false,
        small: "64M".into(),
        large: "512M".into(),
        keep: false,
        cleaner_ms: 0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        if flag == "--keep" {
            a.keep = true;
            i += 1;
            continue;
        }
        let v = argv
            .get(i + 1)
            .ok_or_else(|| format!("{flag} needs a value"))?
            .clone();
        match flag {
            "--rows" => a.rows = v.parse()?,
            "--seconds" => a.seconds = v.parse()?,
            "--interval" => a.interval = v.parse()?,
            "--insert-rows" => a.insert_rows = v.parse()?,
            "--threads" => a.threads = v.split(',').map(|t| t.parse()).collect::<Result<_, _>>()?,
            "--nodes" => a.nodes = v.parse()?,
            "--replicas" => a.replicas = v.parse()?,
            "--via" => a.via_sql = v == "sql",
            "--small" => a.small = v,
            "--large" => a.large = v,
            "--cleaner-ms" => a.cleaner_ms = v.parse()?,
            _ => return Err(format!("unknown option {flag}").into()),
        }
        i += 2;
    }
    if a.rows == 0 || a.seconds <= 0.0 || a.interval <= 0.0 {
        return Err("--rows, --seconds and --interval must be positive".into());
    }
    Ok(a)
}

/// A printable ASCII string of uniformly random length 0..=512.
fn random_text(rng: &mut Rng) -> String {
    let len = (rng.next_u64() % 513) as usize;
    (0..len)
        .map(|_| (b' ' + (rng.next_u64() % 95) as u8) as char)
        .collect()
}

fn sql(s: &mut Session, text: &str) -> AnyResult<Vec<SqlResult>> {
    s.execute(text)
        .map_err(|e| format!("{text}: {}", rndb::sql::render_error(&e)).into())
}

fn print_sql(s: &mut Session, text: &str) {
    println!("mysql> {text}");
    match s.execute(text) {
        Ok(rs) => {
            for r in rs {
                println!("{}", rndb::sql::render(&r, Duration::ZERO).trim_end());
            }
        }
        Err(e) => println!("{}", rndb::sql::render_error(&e)),
    }
}

/// Page cache counters of every data node.
fn snapshot(c: &Cluster) -> Vec<PageCacheStats> {
    c.inner()
        .data_nodes
        .iter()
        .map(|n| n.disk.pgman.stats())
        .collect()
}

/// (direct_return, wait_io) between two snapshots of one node.
fn hit_delta(a: &PageCacheStats, b: &PageCacheStats) -> (u64, u64) {
    (
        b.page_requests_direct_return - a.page_requests_direct_return,
        b.page_requests_wait_io - a.page_requests_wait_io,
    )
}

fn pct(hit: u64, miss: u64) -> f64 {
    if hit + miss == 0 {
        f64::NAN
    } else {
        100.0 * hit as f64 / (hit + miss) as f64
    }
}

/// Per node and total hit ratio between two snapshots.
fn hit_ratios(a: &[PageCacheStats], b: &[PageCacheStats]) -> (Vec<f64>, f64) {
    let (mut th, mut tm) = (0, 0);
    let per = a
        .iter()
        .zip(b)
        .map(|(x, y)| {
            let (h, m) = hit_delta(x, y);
            th += h;
            tm += m;
            pct(h, m)
        })
        .collect();
    (per, pct(th, tm))
}

/// What one read phase measured.
struct ReadPhase {
    label: String,
    reads_per_s_all: f64,
    reads_per_s_steady: f64,
    steady_per_node: Vec<f64>,
    steady_total: f64,
    /// Page requests (direct_return + wait_io) per node in the steady window.
    steady_requests: Vec<u64>,
}

enum Reader {
    Ndb(Ndb),
    Sql(Box<Session>),
}

impl Reader {
    /// Reads row `k` (all columns); returns (data1 length, data2 length).
    fn read(&mut self, t: &Arc<TableRuntime>, k: u64) -> AnyResult<(usize, usize)> {
        let row = match self {
            Reader::Ndb(ndb) => {
                let mut tx = ndb.start_transaction()?;
                let op = tx.define_by_pos(
                    t,
                    OpKind::Read(LockMode::CommittedRead),
                    vec![(0, Value::Int(k as i64))],
                    Vec::new(),
                    None,
                )?;
                tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
                let row = tx.take_row(op);
                tx.close();
                row.ok_or_else(|| format!("id {k}: no row"))?
            }
            Reader::Sql(s) => {
                sql(s, &format!("SET @x={k}"))?;
                match sql(s, "SELECT * FROM t1 WHERE id=@x")?.pop() {
                    Some(SqlResult::Rows { mut rows, .. }) if rows.len() == 1 => {
                        rows.pop().unwrap_or_default()
                    }
                    _ => return Err(format!("id {k}: not exactly one row").into()),
                }
            }
        };
        let len = |v: &Value| match v {
            Value::Str(s) => s.len(),
            Value::Bytes(b) => b.len(),
            _ => usize::MAX,
        };
        match row.as_slice() {
            [id, d1, d2] if id.as_i128() == Some(k as i128) => Ok((len(d1), len(d2))),
            _ => Err(format!("id {k}: unexpected row {row:?}").into()),
        }
    }
}

fn read_phase(
    c: &Cluster,
    reader: &mut Reader,
    t: &Arc<TableRuntime>,
    lens: &[(u16, u16)],
    args: &Args,
    label: &str,
    rng: &mut Rng,
) -> AnyResult<ReadPhase> {
    let ids: Vec<u32> = c.data_node_ids();
    let n = lens.len() as u64;
    println!(
        "\n## Random PK reads, DiskPageBufferMemory={label}, one thread, {} s",
        args.seconds
    );
    println!(
        "{:>6} {:>10} {}  {:>8}",
        "t (s)",
        "reads/s",
        ids.iter()
            .map(|i| format!("{:>9}", format!("node {i} %")))
            .collect::<Vec<_>>()
            .join(" "),
        "total %"
    );
    let start = Instant::now();
    let steady_from = args.seconds / 2.0;
    let first = snapshot(c);
    let mut last = first.clone();
    let mut steady_snap: Option<(Vec<PageCacheStats>, u64, Instant)> = None;
    let (mut reads, mut last_reads) = (0u64, 0u64);
    let mut last_t = start;
    let mut next_report = args.interval;
    loop {
        for _ in 0..64 {
            let k = 1 + rng.next_u64() % n;
            let (l1, l2) = reader.read(t, k)?;
            let (e1, e2) = lens[(k - 1) as usize];
            if (l1, l2) != (e1 as usize, e2 as usize) {
                return Err(format!(
                    "id {k}: lengths ({l1}, {l2}), loaded ({e1}, {e2}) — wrong row contents"
                )
                .into());
            }
            reads += 1;
        }
        let el = start.elapsed().as_secs_f64();
        if steady_snap.is_none() && el >= steady_from {
            steady_snap = Some((snapshot(c), reads, Instant::now()));
        }
        if el >= next_report {
            let now = snapshot(c);
            let (per, total) = hit_ratios(&last, &now);
            let dt = last_t.elapsed().as_secs_f64();
            println!(
                "{:>6.0} {:>10.0} {}  {:>8.2}",
                el,
                (reads - last_reads) as f64 / dt,
                per.iter()
                    .map(|p| format!("{p:>9.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                total
            );
            last = now;
            last_reads = reads;
            last_t = Instant::now();
            next_report += args.interval;
        }
        if el >= args.seconds {
            break;
        }
    }
    let end = snapshot(c);
    let total_s = start.elapsed().as_secs_f64();
    let (s0, r0, t0) = steady_snap.ok_or("no steady window")?;
    let (steady_per_node, steady_total) = hit_ratios(&s0, &end);
    let steady_requests = s0
        .iter()
        .zip(&end)
        .map(|(a, b)| {
            let (h, m) = hit_delta(a, b);
            h + m
        })
        .collect();
    let rs = (reads - r0) as f64 / t0.elapsed().as_secs_f64();
    let (whole, whole_total) = hit_ratios(&first, &end);
    println!(
        "whole phase: {reads} reads, {:.0} reads/s, hit ratio {} total {:.2}%",
        reads as f64 / total_s,
        fmt_nodes(&ids, &whole),
        whole_total
    );
    println!(
        "steady (last half): {rs:.0} reads/s, hit ratio {} total {steady_total:.2}%",
        fmt_nodes(&ids, &steady_per_node)
    );
    for (i, (a, b)) in first.iter().zip(&end).enumerate() {
        println!(
            "  node {}: pages_read +{}, pages_written +{}, wait_queue +{}, resident {} / {} pages, dirty {}",
            ids[i],
            b.pages_read - a.pages_read,
            b.pages_written - a.pages_written,
            b.page_requests_wait_queue - a.page_requests_wait_queue,
            b.resident_pages,
            b.capacity_pages,
            b.dirty_pages
        );
    }
    Ok(ReadPhase {
        label: label.to_string(),
        reads_per_s_all: reads as f64 / total_s,
        reads_per_s_steady: rs,
        steady_per_node,
        steady_total,
        steady_requests,
    })
}

fn fmt_nodes(ids: &[u32], v: &[f64]) -> String {
    ids.iter()
        .zip(v)
        .map(|(i, p)| format!("node {i} {p:.2}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Undo log figures of one node: (records, bytes, syncs, pages written, buffer waits,
/// out of space, checkpoints, logspace used, logspace high, logspace total).
#[derive(Clone, Copy, Default)]
struct UndoFigures {
    records: u64,
    bytes: u64,
    syncs: u64,
    pages_written: u64,
    buffer_waits: u64,
    out_of_space: u64,
    checkpoints: u64,
    used: u64,
    high: u64,
    total: u64,
}

fn undo_figures(c: &Cluster) -> Vec<UndoFigures> {
    c.inner()
        .data_nodes
        .iter()
        .map(|n| match n.disk.logfile_group() {
            Some(g) => {
                let k = g.counters();
                let s = g.log_space();
                UndoFigures {
                    records: k.records,
                    bytes: k.bytes,
                    syncs: k.syncs,
                    pages_written: k.pages_written,
                    buffer_waits: k.buffer_waits,
                    out_of_space: k.out_of_space,
                    checkpoints: n.disk.undo_checkpoints(),
                    used: s.used_bytes,
                    high: s.high_bytes,
                    total: s.total_bytes,
                }
            }
            None => UndoFigures::default(),
        })
        .collect()
}

struct InsertRun {
    threads: usize,
    rows: u64,
    rows_per_s: f64,
    temp_errors: BTreeMap<u32, u64>,
    pages_written: u64,
    pages_written_lcp: u64,
    pages_read: u64,
    log_waits: u64,
    undo_records: u64,
    undo_mb: f64,
    undo_syncs: u64,
    undo_checkpoints: u64,
    undo_high_mb: f64,
    undo_total_mb: f64,
}

fn insert_run(c: &Cluster, threads: usize, total_rows: u64) -> AnyResult<InsertRun> {
    let per_thread = total_rows / threads as u64;
    let pc0 = snapshot(c);
    let u0 = undo_figures(c);
    let start = Instant::now();
    let results: Vec<AnyResult<BTreeMap<u32, u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|ti| {
                let ndb = c.ndb("test");
                s.spawn(move || -> AnyResult<BTreeMap<u32, u64>> {
                    let t = ndb.table("t1")?;
                    let mut rng = Rng::new(0x5eed_0000 + ti as u64 * 7919 + threads as u64);
                    let mut errors = BTreeMap::new();
                    let mut done = 0u64;
                    while done < per_thread {
                        let batch = (per_thread - done).min(5);
                        let rows: Vec<(String, String)> = (0..batch)
                            .map(|_| (random_text(&mut rng), random_text(&mut rng)))
                            .collect();
                        let mut attempt = 0;
                        loop {
                            match insert_txn(&ndb, &t, &rows) {
                                Ok(()) => break,
                                Err(e) if e.is_temporary() && attempt < 100 => {
                                    *errors.entry(e.code).or_insert(0) += 1;
                                    attempt += 1;
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                                Err(e) => {
                                    return Err(format!(
                                        "thread {ti}: insert failed after {done} rows: {}",
                                        rndb::sql::render_error(&e)
                                    )
                                    .into());
                                }
                            }
                        }
                        done += batch;
                    }
                    Ok(errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut temp_errors = BTreeMap::new();
    for r in results {
        for (k, v) in r? {
            *temp_errors.entry(k).or_insert(0) += v;
        }
    }
    let pc1 = snapshot(c);
    let u1 = undo_figures(c);
    let rows = per_thread * threads as u64;
    let sum = |f: &dyn Fn(&PageCacheStats) -> u64| -> u64 {
        pc0.iter().zip(&pc1).map(|(a, b)| f(b) - f(a)).sum()
    };
    let usum = |f: &dyn Fn(&UndoFigures) -> u64| -> u64 {
        u0.iter().zip(&u1).map(|(a, b)| f(b) - f(a)).sum()
    };
    let run = InsertRun {
        threads,
        rows,
        rows_per_s: rows as f64 / secs,
        temp_errors,
        pages_written: sum(&|s| s.pages_written),
        pages_written_lcp: sum(&|s| s.pages_written_lcp),
        pages_read: sum(&|s| s.pages_read),
        log_waits: sum(&|s| s.log_waits),
        undo_records: usum(&|u| u.records),
        undo_mb: usum(&|u| u.bytes) as f64 / (1 << 20) as f64,
        undo_syncs: usum(&|u| u.syncs),
        undo_checkpoints: usum(&|u| u.checkpoints),
        undo_high_mb: u1.iter().map(|u| u.high).max().unwrap_or(0) as f64 / (1 << 20) as f64,
        undo_total_mb: u1.iter().map(|u| u.total).max().unwrap_or(0) as f64 / (1 << 20) as f64,
    };
    println!(
        "{threads:>2} thread(s): {rows} rows in {secs:.2} s = {:.0} rows/s; temporary errors retried {:?}",
        run.rows_per_s, run.temp_errors
    );
    println!(
        "   page cache (all nodes): pages_written +{}, pages_written_lcp +{}, pages_read +{}, log_waits +{}",
        run.pages_written, run.pages_written_lcp, run.pages_read, run.log_waits
    );
    for (i, (a, b)) in u0.iter().zip(&u1).enumerate() {
        println!(
            "   undo node {}: records +{}, bytes +{}, syncs +{}, pages_written +{}, buffer_waits +{}, out_of_space(1501) +{}, checkpoints +{}, logspace used {} / {} (high {})",
            c.data_node_ids()[i],
            b.records - a.records,
            b.bytes - a.bytes,
            b.syncs - a.syncs,
            b.pages_written - a.pages_written,
            b.buffer_waits - a.buffer_waits,
            b.out_of_space - a.out_of_space,
            b.checkpoints - a.checkpoints,
            b.used,
            b.total,
            b.high
        );
    }
    Ok(run)
}

fn insert_txn(ndb: &Ndb, t: &Arc<TableRuntime>, rows: &[(String, String)]) -> Result<(), NdbError> {
    let mut tx = ndb.start_transaction()?;
    for (d1, d2) in rows {
        tx.define_by_pos(
            t,
            OpKind::Insert,
            Vec::new(),
            vec![(1, Value::Str(d1.clone())), (2, Value::Str(d2.clone()))],
            None,
        )?;
    }
    tx.execute(ExecType::Commit, AbortOption::AbortOnError)
}

const T1: &str = "CREATE TABLE t1 (id BIGINT NOT NULL AUTO_INCREMENT, data1 VARCHAR(512) DEFAULT NULL, data2 VARCHAR(512) DEFAULT NULL, PRIMARY KEY (id)) ENGINE=ndbcluster TABLESPACE ts_1 STORAGE DISK";

fn main() -> AnyResult<()> {
    let args = parse_args()?;
    let small_bytes = parse_size(&args.small)?;
    let large_bytes = parse_size(&args.large)?;
    let dir = PathBuf::from(format!("/tmp/rndb-disk-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run(&args, &dir, small_bytes, large_bytes);
    if args.keep {
        println!("kept {}", dir.display());
    } else {
        std::fs::remove_dir_all(&dir)?;
    }
    result
}

fn run(args: &Args, dir: &std::path::Path, small_bytes: u64, large_bytes: u64) -> AnyResult<()> {
    let mut cfg = ClusterConfig::embedded(args.nodes, args.replicas)?;
    cfg.set_data_node_param("DataMemory", "1G")?;
    cfg.set_data_node_param("DiskPageBufferMemory", &args.small)?;
    cfg.set_data_node_param("SharedGlobalMemory", "384M")?;
    let c = Cluster::embedded_in(cfg, dir.to_path_buf())?;
    let ndb = c.ndb("test");
    let mut s = Session::new(c.ndb("test"));
    if args.cleaner_ms > 0 {
        for n in &c.inner().data_nodes {
            n.disk
                .pgman
                .start_cleaner(Duration::from_millis(args.cleaner_ms))?;
        }
    }
    println!(
        "rndb disk_seed: {} rows, {} data node(s), NoOfReplicas={}, DiskPageBufferMemory={} then {}, reads via {}, PGMAN cleaner {}, data dir {}",
        args.rows,
        args.nodes,
        args.replicas,
        args.small,
        args.large,
        if args.via_sql {
            "SQL session"
        } else {
            "Ndb API"
        },
        if args.cleaner_ms > 0 {
            format!("started by the benchmark, every {} ms", args.cleaner_ms)
        } else {
            "not started (as the cluster runs today)".to_string()
        },
        dir.display()
    );

    // Storage: ~560 bytes per row on disk at most on average (512 of data, record
    // header, slot); data files of 128M with 60% headroom for partly filled extents and
    // the insert runs. Every replica holds every row of its node group.
    let rows_per_node = args.rows * args.replicas as u64 / args.nodes as u64
        + args.insert_rows * args.replicas as u64 / args.nodes as u64;
    let data_files = (rows_per_node * 560 * 16 / 10).div_ceil(128 << 20) + 1;
    let t0 = Instant::now();
    sql(
        &mut s,
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=512M UNDO_BUFFER_SIZE=64M ENGINE=NDB",
    )?;
    sql(
        &mut s,
        "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=128M ENGINE=NDB",
    )?;
    for i in 2..=data_files {
        sql(
            &mut s,
            &format!(
                "ALTER TABLESPACE ts_1 ADD DATAFILE 'data{i}.dat' INITIAL_SIZE=128M ENGINE=NDB"
            ),
        )?;
    }
    sql(&mut s, T1)?;
    println!(
        "storage: logfile group lg (undo 512M, undo buffer 64M), tablespace ts_1 with {data_files} data files of 128M per node, created in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // Load.
    let t = ndb.table("t1")?;
    let mut rng = Rng::new(650_000);
    let mut lens: Vec<(u16, u16)> = Vec::with_capacity(args.rows as usize);
    let t0 = Instant::now();
    let mut loaded = 0u64;
    while loaded < args.rows {
        let n = (args.rows - loaded).min(10_000);
        let rows: Vec<Vec<Value>> = (0..n)
            .map(|_| {
                let (a, b) = (random_text(&mut rng), random_text(&mut rng));
                lens.push((a.len() as u16, b.len() as u16));
                vec![Value::Str(a), Value::Str(b)]
            })
            .collect();
        loaded += ndb.insert_batch(&t, &[1, 2], rows)?;
    }
    let load_s = t0.elapsed().as_secs_f64();
    let load_rate = args.rows as f64 / load_s;
    println!(
        "load: {} rows in {load_s:.1} s = {load_rate:.0} rows/s (Ndb::insert_batch, 1000 rows per transaction, one thread)",
        args.rows
    );
    for (i, st) in snapshot(&c).iter().enumerate() {
        println!(
            "  after load, node {}: resident {} / {} pages, dirty {}, pages_written {}, direct_return {}, wait_io {}",
            c.data_node_ids()[i],
            st.resident_pages,
            st.capacity_pages,
            st.dirty_pages,
            st.pages_written,
            st.page_requests_direct_return,
            st.page_requests_wait_io
        );
    }
    print_sql(&mut s, "SELECT count(*), max(id) FROM t1");
    print_sql(
        &mut s,
        "SELECT FILE_NAME, FREE_EXTENTS, TOTAL_EXTENTS, EXTRA FROM information_schema.FILES WHERE FILE_TYPE='DATAFILE' AND FILE_NAME='data1.dat'",
    );

    // Reads at the small size.
    let mut reader = if args.via_sql {
        Reader::Sql(Box::new(Session::new(c.ndb("test"))))
    } else {
        Reader::Ndb(c.ndb("test"))
    };
    let mut rrng = Rng::new(0x5eed);
    let small = read_phase(&c, &mut reader, &t, &lens, args, &args.small, &mut rrng)?;
    let hit_query = "SELECT node_id, 100*(sum(page_requests_direct_return)/(sum(page_requests_direct_return)+sum(page_requests_wait_io))) as hit_ratio_pct FROM ndbinfo.diskpagebuffer GROUP BY node_id";
    print_sql(&mut s, hit_query);

    // The advisor, before resizing.
    let sizes = [small_bytes, 128 << 20, 256 << 20, large_bytes, 1 << 30];
    let ids = c.data_node_ids();
    let mut predicted_large = Vec::new();
    println!("\nadvisor (PageCache::advice) before the resize:");
    for (i, n) in c.inner().data_nodes.iter().enumerate() {
        let adv = n.disk.pgman.advice(&sizes);
        println!(
            "  node {}: {}",
            ids[i],
            adv.iter()
                .map(|(b, p)| format!("{}M {p:.2}%", b >> 20))
                .collect::<Vec<_>>()
                .join(", ")
        );
        predicted_large.push(
            adv.iter()
                .find(|(b, _)| *b == large_bytes)
                .map_or(f64::NAN, |x| x.1),
        );
    }
    print_sql(
        &mut s,
        "SELECT node_id, buffer_mb, predicted_hit_ratio_pct FROM ndbinfo.diskpagebuffer_advice",
    );

    // Resize online on every data node.
    let t0 = Instant::now();
    for n in &c.inner().data_nodes {
        n.disk.pgman.resize(large_bytes)?;
    }
    println!(
        "\nresized DiskPageBufferMemory {} -> {} on every data node online (PageCache::resize) in {:.3} s",
        args.small,
        args.large,
        t0.elapsed().as_secs_f64()
    );
    let large = read_phase(&c, &mut reader, &t, &lens, args, &args.large, &mut rrng)?;
    print_sql(&mut s, hit_query);
    // The prediction in total, weighted by each node's page requests.
    let req: u64 = large.steady_requests.iter().sum();
    let predicted_total = predicted_large
        .iter()
        .zip(&large.steady_requests)
        .map(|(p, r)| p * *r as f64)
        .sum::<f64>()
        / req.max(1) as f64;
    println!(
        "\nadvisor predicted at {}: {} total {predicted_total:.2}%; measured (steady): {} total {:.2}%; difference {:+.2} points",
        args.large,
        fmt_nodes(&ids, &predicted_large),
        fmt_nodes(&ids, &large.steady_per_node),
        large.steady_total,
        predicted_total - large.steady_total
    );
    drop(reader);

    // Inserts into a fresh t1.
    println!(
        "\n## Inserts into a fresh t1, batches of five rows per transaction, {} rows per run",
        args.insert_rows
    );
    let mut inserts = Vec::new();
    for &th in &args.threads {
        let t0 = Instant::now();
        sql(&mut s, "DROP TABLE t1")?;
        let drop_s = t0.elapsed().as_secs_f64();
        sql(&mut s, T1)?;
        println!("(DROP TABLE t1 took {drop_s:.2} s; created again)");
        inserts.push(insert_run(&c, th, args.insert_rows)?);
    }
    print_sql(&mut s, "SELECT * FROM ndbinfo.logspaces");
    print_sql(&mut s, "SELECT * FROM ndbinfo.logbuffers");
    print_sql(&mut s, "SELECT * FROM ndbinfo.diskpagebuffer");

    // The table to paste.
    let via = if args.via_sql {
        "SQL `SELECT * FROM t1 WHERE id=@x`"
    } else {
        "Ndb API single-read transaction"
    };
    println!("\n| figure | rndb | seed (2011, NDB 7.1.9) |");
    println!("|---|---|---|");
    println!(
        "| load {} rows (`insert_batch`, 1 thread) | {load_rate:.0} rows/s | |",
        args.rows
    );
    for (p, seed_tps, seed_hit) in [
        (&small, "274 tps (after 340 s)", "93.36 / 93.66%"),
        (
            &large,
            "2330 tps (after 3310 s)",
            "99.20 / 99.53% (after 1780 s)",
        ),
    ] {
        println!(
            "| random PK reads, 1 thread, {via}, DiskPageBufferMemory={} | {:.0} reads/s (whole phase {:.0}) | {} |",
            p.label, p.reads_per_s_steady, p.reads_per_s_all, seed_tps
        );
        println!(
            "| hit ratio at {} (steady: last half of {} s), per node / total | {} / {:.2}% | {} |",
            p.label,
            args.seconds,
            p.steady_per_node
                .iter()
                .map(|x| format!("{x:.2}%"))
                .collect::<Vec<_>>()
                .join(", "),
            p.steady_total,
            seed_hit
        );
    }
    println!(
        "| advisor's prediction for {} made at {} (per node / total) | {} / {predicted_total:.2}% ({:+.2} points vs measured) | none (no advisor in NDB) |",
        args.large,
        args.small,
        predicted_large
            .iter()
            .map(|x| format!("{x:.2}%"))
            .collect::<Vec<_>>()
            .join(", "),
        predicted_total - large.steady_total
    );
    println!(
        "\n| insert threads | rows | rows/s | temporary errors retried | pages_written | pages_written_lcp | pages_read | log_waits | undo records | undo MB | undo syncs | undo checkpoints | undo high / total MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &inserts {
        println!(
            "| {} | {} | {:.0} | {:?} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {:.1} / {:.0} |",
            r.threads,
            r.rows,
            r.rows_per_s,
            r.temp_errors,
            r.pages_written,
            r.pages_written_lcp,
            r.pages_read,
            r.log_waits,
            r.undo_records,
            r.undo_mb,
            r.undo_syncs,
            r.undo_checkpoints,
            r.undo_high_mb,
            r.undo_total_mb
        );
    }
    c.shutdown();
    Ok(())
}
