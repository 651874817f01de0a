//! Issue 7's figure for the data path over TCP: one API client process against a
//! cluster of real processes on loopback (`rndb_mgmd` and two `rndbd`, NoOfReplicas=2,
//! one node group), with redis-server measured in the same run as the peer.
//!
//! - Table `kv (id BIGINT PRIMARY KEY, v VARBINARY(S)) ENGINE=NDB`, N keys loaded with
//!   batched Write operations (1000 per transaction, 4 transactions in flight); each
//!   value is S bytes, the key's 8 bytes (little-endian) then filler.
//! - Reads: batches of B keys through `RemoteCluster::read_submit` (one request per data
//!   node: each key goes to its partition's primary), D batches in flight in a ring,
//!   for T seconds; the value column is read and every row checked (found, S bytes,
//!   its key in the first 8 bytes).
//! - Writes: one transaction of B Write operations per batch through
//!   `RemoteCluster::execute_submit`, D in flight, for T seconds. The batches walk a
//!   shuffled permutation of the keys, so the D·B keys in flight are distinct (no lock
//!   waits between the client's own transactions) when D·B ≤ N. The last batch is read
//!   back and checked at the end.
//! - Peer, once the cluster's processes are killed (it gets the same 2 cores):
//!   redis-server (`--save '' --appendonly no`) on a free loopback port and
//!   `redis-benchmark -t set,get -d S -r N -c 1`, once with `-P` = B·D (the same
//!   requests in flight as the client; capped at 16384) and once with `-P` = B; `-n`
//!   from a short calibration run, for about T seconds per test. SET runs before GET,
//!   so every key of the keyspace exists when GET runs.
//!
//! CPU seconds of this process, each data node and redis-server over each phase are
//! read from /proc and reported with the rates: the machine has 2 cores, shared by
//! the client, both data nodes (and the management server), or by redis-server and
//! redis-benchmark.
//!
//! Every process started is killed when the program ends, on error too (a guard).
//!
//! Usage (after `cargo build --release -p rndb-shell`, which builds `rndb_mgmd` and
//! `rndbd` next to this program):
//! `cargo run --release -p rndb-benches --bin tcp_throughput -- [--keys N]
//! [--value-size S] [--batch B] [--depth D] [--seconds T] [--no-redis] [--local]`
//! (defaults 100000, 100, 256, 16, 5; `--no-redis` measures rndb alone; `--local` also
//! runs the same phases, once the processes ended, on the same nodes started inside
//! this process over the in-process network (`cluster::local`: the management server,
//! two data nodes and the client in one process, socket pairs instead of TCP), and
//! reports them beside the processes').

use rndb::cluster::remote::{Pending, ReadPending, RemoteCluster};
use rndb::schema::Value;
use rndb::transport::data::{KeyOp, OpType};
use rndb_benches::Rng;
use rndb_benches::procs::{ProcCluster, Procs, free_port};
use std::collections::VecDeque;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DB: &str = "test";
/// NDB 7.4 on a 2-core NUC, one data node, NDB API (perf-anchors.md §0/§1).
const NDB_ANCHOR_READS: f64 = 589_000.0;
const LOAD_BATCH: usize = 1000;
const LOAD_DEPTH: usize = 4;
const REDIS_PIPELINE_CAP: usize = 16_384;

struct Args {
    keys: u64,
    value_size: usize,
    batch: usize,
    depth: usize,
    seconds: f64,
    /// Measure rndb only (no redis).
    no_redis: bool,
    /// Also run the same phases on the distributed nodes inside this process
    /// (`cluster::local`, the in-process network), after the processes end.
    local: bool,
}

fn parse_args() -> AnyResult<Args> {
    let mut a = Args {
        keys: 100_000,
        value_size: 100,
        batch: 256,
        depth: 16,
        seconds: 5.0,
        no_redis: false,
        local: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || -> AnyResult<String> {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value").into())
        };
        match flag.as_str() {
            "--keys" => a.keys = val()?.parse()?,
            "--value-size" => a.value_size = val()?.parse()?,
            "--batch" => a.batch = val()?.parse()?,
            "--depth" => a.depth = val()?.parse()?,
            "--seconds" => a.seconds = val()?.parse()?,
            "--no-redis" => a.no_redis = true,
            "--local" => a.local = true,
            "-h" | "--help" => {
                println!(
                    "tcp_throughput [--keys N] [--value-size S] [--batch B] [--depth D] [--seconds T] [--no-redis] [--local]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.keys == 0 || a.batch == 0 || a.depth == 0 || a.value_size < 8 {
        return Err("keys, batch and depth must be > 0 and value-size >= 8".into());
    }
    Ok(a)
}

// ---- processes ----

/// CPU seconds (user + system) of a process so far, from /proc.
fn cpu_secs(pid: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = match s.rfind(')') {
        Some(i) => &s[i + 2..],
        None => return f64::NAN,
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

// ---- rndb ----

fn value_for(key: u64, size: usize, stamp: u8) -> Vec<u8> {
    let mut v = vec![b'a' + (stamp % 26); size];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v
}

fn write_op(key: u64, size: usize, stamp: u8) -> KeyOp {
    KeyOp {
        op: OpType::Write,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(key as i64)],
        values: vec![(1, Value::Bytes(value_for(key, size, stamp)))],
        columns: Vec::new(),
    }
}

fn load(api: &std::sync::Arc<RemoteCluster>, a: &Args) -> AnyResult<f64> {
    let t = Instant::now();
    let mut ring: VecDeque<Pending> = VecDeque::new();
    let mut next = 0u64;
    while next < a.keys || !ring.is_empty() {
        while next < a.keys && ring.len() < LOAD_DEPTH {
            let end = (next + LOAD_BATCH as u64).min(a.keys);
            let ops = (next..end).map(|k| write_op(k, a.value_size, 0)).collect();
            ring.push_back(api.execute_submit(ops)?);
            next = end;
        }
        if let Some(p) = ring.pop_front() {
            RemoteCluster::execute_wait(p)?;
        }
    }
    Ok(a.keys as f64 / t.elapsed().as_secs_f64())
}

/// The keys of batch `i`: consecutive slices of a shuffled permutation, wrapping.
fn batch_keys(perm: &[u64], i: usize, b: usize) -> impl Iterator<Item = u64> + '_ {
    let n = perm.len();
    (0..b).map(move |j| perm[(i * b + j) % n])
}

struct Phase {
    ops: u64,
    secs: f64,
    errors: Vec<String>,
    /// Per batch, from its submit until its wait returned (ms), sorted.
    latency_ms: Vec<f64>,
}

impl Phase {
    fn new(ops: u64, secs: f64, errors: Vec<String>, mut latency_ms: Vec<f64>) -> Phase {
        latency_ms.sort_by(f64::total_cmp);
        Phase {
            ops,
            secs,
            errors,
            latency_ms,
        }
    }
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs
    }
    fn latency(&self) -> String {
        let l = &self.latency_ms;
        if l.is_empty() {
            return "no batches".into();
        }
        let q = |f: f64| l[((l.len() - 1) as f64 * f) as usize];
        format!(
            "batch submit-to-answer median {:.2} ms, p99 {:.2} ms",
            q(0.5),
            q(0.99)
        )
    }
}

fn check_rows(
    keys: &[u64],
    rows: &[Option<Vec<Value>>],
    size: usize,
    stamp: Option<u8>,
) -> AnyResult<()> {
    for (k, r) in keys.iter().zip(rows) {
        let v = match r.as_ref().map(|r| &r[..]) {
            Some([Value::Bytes(v)]) => v,
            other => return Err(format!("key {k}: read {other:?}").into()),
        };
        let ok = v.len() == size
            && v[..8] == k.to_le_bytes()
            && stamp.is_none_or(|s| v[8..].iter().all(|&c| c == b'a' + (s % 26)));
        if !ok {
            return Err(format!("key {k}: wrong value {v:?}").into());
        }
    }
    Ok(())
}

fn read_phase(api: &RemoteCluster, a: &Args, perm: &[u64]) -> AnyResult<Phase> {
    let mut ring: VecDeque<(Vec<u64>, Instant, ReadPending)> = VecDeque::new();
    let mut i = 0usize;
    let mut ops = 0u64;
    let mut errors = Vec::new();
    let mut lat = Vec::new();
    let t = Instant::now();
    let until = Duration::from_secs_f64(a.seconds);
    loop {
        let submitting = t.elapsed() < until;
        while submitting && ring.len() < a.depth {
            let ks: Vec<u64> = batch_keys(perm, i, a.batch).collect();
            i += 1;
            let keys: Vec<Vec<Value>> = ks.iter().map(|&k| vec![Value::Int(k as i64)]).collect();
            let sent = Instant::now();
            ring.push_back((ks, sent, api.read_submit(DB, "kv", &keys, &[1])?));
        }
        let Some((ks, sent, p)) = ring.pop_front() else {
            break;
        };
        let r = p.wait();
        lat.push(sent.elapsed().as_secs_f64() * 1e3);
        match r {
            Ok(rows) => {
                check_rows(&ks, &rows, a.value_size, Some(0))?;
                ops += ks.len() as u64;
            }
            Err(e) => errors.push(format!("{} {}", e.code, e.message)),
        }
    }
    Ok(Phase::new(ops, t.elapsed().as_secs_f64(), errors, lat))
}

fn write_phase(api: &RemoteCluster, a: &Args, perm: &[u64]) -> AnyResult<Phase> {
    let mut ring: VecDeque<(Instant, Pending)> = VecDeque::new();
    let mut i = 0usize;
    let mut ops = 0u64;
    let mut errors = Vec::new();
    let mut lat = Vec::new();
    let mut last: Vec<u64> = Vec::new();
    let t = Instant::now();
    let until = Duration::from_secs_f64(a.seconds);
    loop {
        let submitting = t.elapsed() < until;
        while submitting && ring.len() < a.depth {
            last = batch_keys(perm, i, a.batch).collect();
            i += 1;
            let ops = last.iter().map(|&k| write_op(k, a.value_size, 1)).collect();
            ring.push_back((Instant::now(), api.execute_submit(ops)?));
        }
        let Some((sent, p)) = ring.pop_front() else {
            break;
        };
        let r = RemoteCluster::execute_wait(p);
        lat.push(sent.elapsed().as_secs_f64() * 1e3);
        match r {
            Ok(c) if c.results.len() == a.batch => ops += a.batch as u64,
            Ok(c) => {
                return Err(format!("{} results for {} writes", c.results.len(), a.batch).into());
            }
            Err(e) => errors.push(format!("{} {}", e.code, e.message)),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    if errors.is_empty() {
        let keys: Vec<Vec<Value>> = last.iter().map(|&k| vec![Value::Int(k as i64)]).collect();
        let rows = api.read_batch(DB, "kv", &keys, &[1])?;
        check_rows(&last, &rows, a.value_size, Some(1))?;
    }
    Ok(Phase::new(ops, secs, errors, lat))
}

// ---- redis ----

struct Redis {
    pid: String,
    port: u16,
}

/// (SET/s, GET/s) of one redis-benchmark run; a failed run is retried twice (once in
/// a few runs redis-benchmark 7.0 with a deep pipeline ends with "All clients
/// disconnected... aborting." while the server logs nothing).
fn redis_benchmark(r: &Redis, a: &Args, pipeline: usize, n: u64) -> AnyResult<(f64, f64)> {
    let mut tries = 0;
    loop {
        match redis_benchmark_once(r, a, pipeline, n) {
            Err(e) if tries < 2 => {
                tries += 1;
                println!(
                    "redis-benchmark -P {pipeline} failed, retrying: {}",
                    e.to_string().replace('\n', " / ")
                );
            }
            res => return res,
        }
    }
}

fn redis_benchmark_once(r: &Redis, a: &Args, pipeline: usize, n: u64) -> AnyResult<(f64, f64)> {
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &r.port.to_string(),
            "-t",
            "set,get",
            "-d",
            &a.value_size.to_string(),
            "-P",
            &pipeline.to_string(),
            "-c",
            "1",
            "-n",
            &n.to_string(),
            "-r",
            &a.keys.to_string(),
            "--csv",
        ])
        .stdin(Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "redis-benchmark failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let rps = |test: &str| -> AnyResult<f64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("\"{test}\",")))
            .ok_or_else(|| format!("no {test} line in: {text}"))?;
        Ok(line
            .split(',')
            .nth(1)
            .ok_or("csv")?
            .trim_matches('"')
            .parse()?)
    };
    Ok((rps("SET")?, rps("GET")?))
}

struct RedisRun {
    pipeline: usize,
    set: f64,
    get: f64,
    cpu_server: f64,
    secs: f64,
}

/// A calibration run, then one sized for about `a.seconds` per test.
fn redis_measure(r: &Redis, a: &Args, pipeline: usize) -> AnyResult<RedisRun> {
    let (s0, g0) = redis_benchmark(r, a, pipeline, 200_000.max(a.keys * 2))?;
    let n = (s0.min(g0) * a.seconds) as u64;
    let c0 = cpu_secs(&r.pid);
    let t = Instant::now();
    let (set, get) = redis_benchmark(r, a, pipeline, n.max(a.keys * 2))?;
    Ok(RedisRun {
        pipeline,
        set,
        get,
        cpu_server: cpu_secs(&r.pid) - c0,
        secs: t.elapsed().as_secs_f64(),
    })
}

fn redis_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else {
        format!("{:.0}k", r / 1e3)
    }
}

fn errors_line(p: &Phase) -> String {
    if p.errors.is_empty() {
        "no errors".into()
    } else {
        format!("{} failed batches, first: {}", p.errors.len(), p.errors[0])
    }
}

/// redis-server on a free port (same directory, killed with the other processes),
/// measured with B·D requests in flight and with B.
fn redis_runs(procs: &mut Procs, a: &Args) -> AnyResult<Vec<RedisRun>> {
    let port = free_port()?;
    let rdir = procs.dir.display().to_string();
    let pid = procs.spawn(
        "redis",
        Path::new("/usr/bin/redis-server"),
        &[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &rdir,
            "--save",
            "",
            "--appendonly",
            "no",
        ],
    )?;
    let redis = Redis {
        pid: pid.to_string(),
        port,
    };
    let t = Instant::now();
    while !redis_ping(port) {
        if t.elapsed() > Duration::from_secs(10) {
            return Err("redis-server did not answer PING within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let matched = (a.batch * a.depth).min(REDIS_PIPELINE_CAP);
    let mut runs = vec![redis_measure(&redis, a, matched)?];
    if a.batch != matched {
        runs.push(redis_measure(&redis, a, a.batch)?);
    }
    for r in &runs {
        println!(
            "redis -c 1 -P {:<5}: SET {:>10.0}/s, GET {:>10.0}/s; redis-server busy {:.2} cores over both tests",
            r.pipeline,
            r.set,
            r.get,
            r.cpu_server / r.secs
        );
    }
    Ok(runs)
}

/// Creates and loads `kv`, then runs the read and the write phase against `api`,
/// printing each with the CPU of the processes in `pids` (name, pid or "self").
fn rndb_phases(
    api: &std::sync::Arc<RemoteCluster>,
    a: &Args,
    pids: &[(&str, String)],
) -> AnyResult<(Phase, Phase)> {
    api.sql(
        DB,
        &format!(
            "CREATE TABLE kv (id BIGINT PRIMARY KEY, v VARBINARY({})) ENGINE=NDB",
            a.value_size
        ),
    )?;
    let load_rate = load(api, a)?;
    println!(
        "loaded {} rows: {:.0} rows/s (Write, {LOAD_BATCH} per transaction, {LOAD_DEPTH} in flight)",
        a.keys, load_rate
    );

    let mut perm: Vec<u64> = (0..a.keys).collect();
    Rng::new(0x7cb_7e57).shuffle(&mut perm);
    if (a.batch * a.depth) as u64 > a.keys {
        println!(
            "note: B*D = {} > N: writes in flight overlap and may wait for each other's locks",
            a.batch * a.depth
        );
    }
    let cpu_now = || pids.iter().map(|(_, p)| cpu_secs(p)).collect::<Vec<f64>>();
    let cpu_line = |c0: &[f64], c1: &[f64], secs: f64| {
        pids.iter()
            .zip(c0.iter().zip(c1))
            .map(|((n, _), (a, b))| format!("{n} {:.2}", (b - a) / secs))
            .collect::<Vec<_>>()
            .join(", ")
    };

    let c0 = cpu_now();
    let reads = read_phase(api, a, &perm)?;
    let c1 = cpu_now();
    println!(
        "rndb reads:  {:>10.0} rows/s ({} rows in {:.2} s; {}; {}); cores busy: {}",
        reads.rate(),
        reads.ops,
        reads.secs,
        errors_line(&reads),
        reads.latency(),
        cpu_line(&c0, &c1, reads.secs)
    );
    let writes = write_phase(api, a, &perm)?;
    let c2 = cpu_now();
    println!(
        "rndb writes: {:>10.0} rows/s ({} rows in {:.2} s; {}; {}); cores busy: {}",
        writes.rate(),
        writes.ops,
        writes.secs,
        errors_line(&writes),
        writes.latency(),
        cpu_line(&c1, &c2, writes.secs)
    );
    Ok((reads, writes))
}

fn main() -> AnyResult<()> {
    let a = parse_args()?;
    let row_bytes = a.value_size as u64 + 64;
    let data_memory_mb = (a.keys * row_bytes * 3 / (1 << 20)).max(256);
    println!(
        "tcp_throughput: {} keys, VARBINARY({}) values of {} bytes, batches of {} keys, {} in flight, {:.1} s per phase",
        a.keys, a.value_size, a.value_size, a.batch, a.depth, a.seconds
    );
    println!(
        "machine: {} cores, load average {}; the client, both data nodes, the management server \
         and redis-server + redis-benchmark share them (redis runs after rndb's phases)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );

    let mut cluster = ProcCluster::start("tcp-throughput", data_memory_mb, None)?;
    let api = std::sync::Arc::new(RemoteCluster::connect(
        &cluster.connectstring(),
        Duration::from_secs(10),
    )?);
    let pids: Vec<(&str, String)> = [("client", "self".to_string())]
        .into_iter()
        .chain(["n2", "n3"].iter().map(|n| {
            (
                *n,
                cluster.procs.pid(n).map_or("0".into(), |p| p.to_string()),
            )
        }))
        .collect();
    let (reads, writes) = rndb_phases(&api, &a, &pids)?;
    api.close();
    drop(api);
    // The cluster's processes stop before redis runs: the peer gets the same 2 cores.
    for n in ["n2", "n3", "mgmd"] {
        cluster.procs.kill(n)?;
    }

    let local = if a.local {
        let cfg = rndb::config::ClusterConfig::parse(
            &format!(
                "[ndbd default]\nNoOfReplicas=2\nDataMemory={data_memory_mb}M\n\
                 [ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n\
                 [ndbd]\nNodeId=2\nHostName=127.0.0.1\n[ndbd]\nNodeId=3\nHostName=127.0.0.1\n[mysqld]\n"
            ),
            "tcp_throughput.ini",
        )?;
        let dir = cluster.procs.dir.join("local");
        let lc = rndb::cluster::local::LocalCluster::start(cfg, Some(&dir), false)?;
        let api = std::sync::Arc::new(lc.connect(Duration::from_secs(10))?);
        println!(
            "the same on the nodes inside this process ({}):",
            lc.connectstring()
        );
        let r = rndb_phases(&api, &a, &[("process", "self".to_string())])?;
        api.close();
        drop(api);
        drop(lc);
        Some(r)
    } else {
        None
    };

    let runs = if a.no_redis {
        Vec::new()
    } else {
        redis_runs(&mut cluster.procs, &a)?
    };
    cluster.procs.keep = false;

    println!();
    let mut head = format!("| figure | rndb over TCP (B={}, D={}) |", a.batch, a.depth);
    let mut rule = String::from("|---|---:|");
    for r in &runs {
        head.push_str(&format!(" redis -P {} | rndb / redis |", r.pipeline));
        rule.push_str("---:|---:|");
    }
    println!("{head}\n{rule}");
    for (what, rndb, peer) in [
        (
            "PK reads / GET per s",
            reads.rate(),
            (|r| r.get) as fn(&RedisRun) -> f64,
        ),
        ("writes / SET per s", writes.rate(), |r: &RedisRun| r.set),
    ] {
        let mut line = format!("| {what} | {} |", fmt_rate(rndb));
        for r in &runs {
            line.push_str(&format!(" {} | {:.2} |", fmt_rate(peer(r)), rndb / peer(r)));
        }
        println!("{line}");
    }
    if let Some((lr, lw)) = &local {
        println!(
            "in-process network (one process: client, management server, both data nodes): \
             reads {} ({:.2} of TCP), writes {} ({:.2} of TCP)",
            fmt_rate(lr.rate()),
            lr.rate() / reads.rate(),
            fmt_rate(lw.rate()),
            lw.rate() / writes.rate()
        );
    }
    println!(
        "NDB 7.4 anchor (one data node on a 2-core NUC, NDB API): 589k reads/s; rndb reads / anchor = {:.2}",
        reads.rate() / NDB_ANCHOR_READS
    );
    println!(
        "note: 2 cores shared by the client, both data nodes and the management server (rndb) \
         or by redis-server and redis-benchmark (redis); rndb writes go to both replicas"
    );
    let local_errors = local
        .as_ref()
        .is_some_and(|(r, w)| !r.errors.is_empty() || !w.errors.is_empty());
    if !reads.errors.is_empty() || !writes.errors.is_empty() || local_errors {
        return Err("some batches failed (see above)".into());
    }
    Ok(())
}
