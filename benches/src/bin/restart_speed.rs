//! Issue 6, restart speed in the form of the seed's table (data node restart times by
//! database size, with and without 10,000 updates/s before the crash), with
//! redis-server loading an RDB file of the same rows measured in the same run.
//!
//! Per database size (GB of DataMemory in use on the data node), every cluster life
//! runs in a child process (this program again, `RNDB_RESTART_CHILD=<mode>`), killed
//! with SIGKILL — a crash, not a shutdown:
//! 1. `load`: rows of ~200 bytes (BIGINT key, INT, VARCHAR(200) holding 160 random hex
//!    characters; the seed's database has 5M tuples per GB) until DataMemory in use
//!    reaches the size; a local checkpoint; then 1,000 updates (some redo); killed.
//! 2. `traffic`: system restart — measured: *without traffic* — then a local checkpoint,
//!    then 10,000 updates/s (100 per transaction, paced every 10 ms) for T seconds and
//!    killed while they run.
//! 3. `final`: system restart — measured: *with traffic* — then a graceful shutdown.
//! 4. `cold`: the files of the data directory are dropped from the page cache (fsync,
//!    then `dd iflag=nocache count=0` per file: only this program's files), and the
//!    cluster restarts once more — measured: *cold cache*.
//!
//! Restart-to-serving is the time from `Cluster::embedded_in` to the first answered
//! primary-key read. Rows restored per second per core: the restore of a node's
//! fragments runs on one thread per core, so it is restored rows / the CPU time of
//! those threads (`secs_restore_cpu`; builds before the parallel restore had one
//! thread and reported rows / `secs_restore_fragments`); a helper thread commits
//! DataMemory ahead of it, and the second figure counts that thread's CPU time too:
//! rows / (restore CPU time + helper CPU time). The restore's wall time is printed
//! beside them.
//!
//! Peer: redis-server (apt `redis-server`) on loopback with a temp dir, filled with the
//! same rows (key = id, value = "a:b") by pipelined MSETs, SAVE, then restarted (warm
//! page cache, then cold as above) and timed until PING answers PONG (redis answers
//! -LOADING until the RDB is loaded); its own "DB loaded from disk" time is reported too.
//!
//! One data node, NoOfReplicas=1: the disk of the benchmark machine writes ~120 MB/s,
//! and a second replica would double every byte written without changing the restore
//! path (nodes restore one after another, each on one thread).
//!
//! Usage: `cargo run --release -p rndb-benches --bin restart_speed -- [sizes_gb] [traffic_secs]`
//! (default `1,2,4` and 15). Data directories live under /tmp and are removed. With
//! `RNDB_BENCH_PERF=<file>` one more restart runs under `perf record` (not reported as
//! a figure).

use rndb::api::{Cluster, Ndb, TableRuntime};
use rndb::config::ClusterConfig;
use rndb::{AbortOption, ExecType, OpKind, Value};
use rndb_benches::{Rng, restart_table, restart_value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const CHILD_ENV: &str = "RNDB_RESTART_CHILD";
const CHUNK: u64 = 100_000;

fn config(gb: u64) -> AnyResult<ClusterConfig> {
    let mut cfg = ClusterConfig::embedded(1, 1)?;
    // The load writes about as much redo as data, and a table's fragments may all log
    // to one part: each part's ring holds 3x the data, so none passes half full (which
    // would start an LCP of its own). Sparse files: only what is written costs.
    let file_mb = 1024u64;
    let files = (gb * 3 + 1).max(3);
    for (k, v) in [
        ("DataMemory", format!("{}M", gb * 1024 + 1024)),
        ("TimeBetweenLocalCheckpoints", "31".into()),
        ("MinDiskWriteSpeed", "1000G".into()),
        ("MaxDiskWriteSpeed", "1000G".into()),
        ("FragmentLogFileSize", format!("{file_mb}M")),
        ("NoOfFragmentLogFiles", files.to_string()),
    ] {
        cfg.set_data_node_param(k, &v)?;
    }
    Ok(cfg)
}

fn used_bytes(cluster: &Cluster) -> u64 {
    cluster
        .data_node_ids()
        .iter()
        .map(|&id| cluster.inner().pool_of(id).used_pages() * 32768)
        .sum()
}

/// `n` updates of random keys below `rows`, 100 per transaction.
fn updates(ndb: &Ndb, t: &Arc<TableRuntime>, rng: &mut Rng, rows: u64, n: u64) -> AnyResult<()> {
    let mut done = 0;
    while done < n {
        let mut tx = ndb.start_transaction()?;
        for _ in 0..100.min(n - done) {
            let k = rng.next_u64() % rows;
            tx.define(
                t,
                OpKind::Update,
                &[("id", Value::UInt(k))],
                &[("a", Value::Int((rng.next_u64() % 1_000_000) as i64))],
                None,
            )?;
            done += 1;
        }
        tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
    }
    Ok(())
}

/// System restart, timed to the first answered read; prints the figures as `@@` lines.
fn restart(dir: &Path, gb: u64, rows: u64) -> AnyResult<(Cluster, Arc<TableRuntime>)> {
    let t0 = Instant::now();
    let cluster = Cluster::embedded_in(config(gb)?, dir.to_path_buf())?;
    let ndb = cluster.ndb("test");
    let t = ndb.table("t")?;
    let got = ndb.read_batch(&t, &[vec![Value::UInt(rows - 1)]], &[0, 1, 2])?;
    let serving = t0.elapsed().as_secs_f64();
    if got.first().and_then(|r| r.as_ref()).is_none() {
        return Err(format!("row {} missing after restart", rows - 1).into());
    }
    println!("@@ serving_secs {serving}");
    let stats = cluster
        .inner()
        .restart
        .lock()
        .clone()
        .ok_or("no restart statistics: not a system restart?")?;
    println!("@@ total_secs {}", stats.total_secs);
    println!("@@ define_secs {}", stats.secs_define_tables);
    for n in &stats.nodes {
        println!("@@ restored_rows {}", n.restored_rows);
        println!("@@ restore_secs {}", n.secs_restore_fragments);
        println!("@@ populate_cpu_secs {}", n.secs_populate_memory);
        println!("@@ restore_cpu_secs {}", n.secs_restore_cpu);
        println!("@@ redo_records {}", n.redo_records);
        println!("@@ redo_bytes {}", n.redo_bytes);
        println!("@@ redo_secs {}", n.secs_exec_redo_log);
    }
    println!("@@ used_bytes {}", used_bytes(&cluster));
    Ok((cluster, t))
}

fn child(mode: &str, dir: &Path, gb: u64, rows: u64, traffic_secs: u64) -> AnyResult<()> {
    let mut rng = Rng::new(7);
    match mode {
        "load" => {
            let cluster = Cluster::embedded_in(config(gb)?, dir.to_path_buf())?;
            let ndb = cluster.ndb("test");
            let t = restart_table(&ndb, "t")?;
            let target = gb << 30;
            let t0 = Instant::now();
            let mut n = 0u64;
            while used_bytes(&cluster) < target {
                let rows: Vec<Vec<Value>> = (n..n + CHUNK)
                    .map(|k| {
                        vec![
                            Value::UInt(k),
                            Value::Int((k % 1000) as i64),
                            Value::Str(restart_value(k)),
                        ]
                    })
                    .collect();
                ndb.insert_batch(&t, &[0, 1, 2], rows)?;
                n += CHUNK;
            }
            cluster.inner().force_gcp()?;
            println!("@@ rows {n}");
            println!("@@ load_secs {}", t0.elapsed().as_secs_f64());
            println!("@@ used_bytes {}", used_bytes(&cluster));
            let s = cluster.inner().run_lcp()?;
            println!("@@ lcp_ms {}", s.elapsed_ms);
            println!("@@ lcp_bytes {}", s.bytes);
            updates(&ndb, &t, &mut rng, n, 1000)?;
            cluster.inner().force_gcp()?;
        }
        "traffic" => {
            let (cluster, t) = restart(dir, gb, rows)?;
            let ndb = cluster.ndb("test");
            cluster.inner().run_lcp()?;
            let t0 = Instant::now();
            let mut sent = 0u64;
            let mut ready = false;
            loop {
                // 10,000 updates/s: 100 every 10 ms, catching up when behind.
                let due = (t0.elapsed().as_millis() as u64 / 10 + 1) * 100;
                if sent < due {
                    updates(&ndb, &t, &mut rng, rows, 100)?;
                    sent += 100;
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if !ready && t0.elapsed().as_secs() >= traffic_secs {
                    println!("@@ updates_sent {sent}");
                    println!(
                        "@@ update_rate {}",
                        sent as f64 / t0.elapsed().as_secs_f64()
                    );
                    println!("@@ READY");
                    std::io::stdout().flush()?;
                    ready = true;
                }
            }
        }
        "final" | "cold" => {
            let (cluster, _t) = restart(dir, gb, rows)?;
            cluster.shutdown();
            println!("@@ DONE");
            return Ok(());
        }
        _ => return Err(format!("unknown child mode {mode}").into()),
    }
    println!("@@ READY");
    std::io::stdout().flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Runs a child; returns its `@@ key value` lines, killing it (SIGKILL) at `@@ READY`.
fn run_child(
    mode: &str,
    dir: &Path,
    gb: u64,
    rows: u64,
    secs: u64,
) -> AnyResult<Vec<(String, f64)>> {
    let exe = std::env::current_exe()?;
    // `RNDB_BENCH_PERF=<file>`: one more restart, under `perf record` (not timed).
    let mut cmd = match (mode, std::env::var("RNDB_BENCH_PERF")) {
        ("perf", Ok(out)) => {
            let mut c = Command::new("perf");
            c.args([
                "record",
                "-F",
                "999",
                "--call-graph",
                "dwarf,16384",
                "-o",
                &out,
                "--",
            ])
            .arg(exe);
            c
        }
        _ => Command::new(exe),
    };
    let mut c: Child = cmd
        .env(CHILD_ENV, if mode == "perf" { "final" } else { mode })
        .args([
            dir.to_string_lossy().to_string(),
            gb.to_string(),
            rows.to_string(),
            secs.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()?;
    let out = c.stdout.take().ok_or("no child stdout")?;
    let mut kv = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line?;
        let Some(rest) = line.strip_prefix("@@ ") else {
            continue;
        };
        if rest == "READY" {
            c.kill()?;
            break;
        }
        if rest == "DONE" {
            break;
        }
        let mut it = rest.splitn(2, ' ');
        let k = it.next().unwrap_or_default().to_string();
        let v: f64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        kv.push((k, v));
    }
    let status = c.wait()?;
    if mode == "final" || mode == "cold" || mode == "perf" {
        if !status.success() {
            return Err(format!("child {mode} failed: {status}").into());
        }
    } else if kv.is_empty() {
        return Err(format!("child {mode} died before reporting: {status}").into());
    }
    Ok(kv)
}

fn get(kv: &[(String, f64)], k: &str) -> f64 {
    kv.iter()
        .filter(|(key, _)| key == k)
        .map(|(_, v)| *v)
        .sum::<f64>()
}

/// Drops the files under `dir` from the page cache (after writing them back).
fn drop_cache(dir: &Path) -> AnyResult<()> {
    let mut stack = vec![dir.to_path_buf()];
    let mut files: Vec<PathBuf> = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    for f in &files {
        std::fs::File::open(f)?.sync_all()?;
        Command::new("dd")
            .arg(format!("if={}", f.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()?;
    }
    Ok(())
}

fn report(what: &str, kv: &[(String, f64)]) {
    let rows = get(kv, "restored_rows");
    let restore = get(kv, "restore_secs");
    // Older builds do not report the restore's CPU time: one thread, its wall time.
    let restore_cpu = match get(kv, "restore_cpu_secs") {
        c if c > 0.0 => c,
        _ => restore,
    };
    let helper = get(kv, "populate_cpu_secs");
    println!(
        "  {what:<16} serving {:>7.2} s | restore {:>6.2} s, {:.2} CPU-s ({:>5.2}M rows, {:>5.2}M rows/s/core; {:>5.2}M counting the helper's {:.2} CPU-s) | redo {:>6.2} s ({:>7} records, {:>6.1} MB) | define {:.3} s",
        get(kv, "serving_secs"),
        restore,
        restore_cpu,
        rows / 1e6,
        rows / restore_cpu / 1e6,
        rows / (restore_cpu + helper) / 1e6,
        helper,
        get(kv, "redo_secs"),
        get(kv, "redo_records"),
        get(kv, "redo_bytes") / 1e6,
        get(kv, "define_secs"),
    );
}

// ---- redis ----

fn resp(parts: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

/// One command, one reply (first line; bulk replies read in full).
fn redis_cmd(port: u16, parts: &[&[u8]]) -> AnyResult<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let mut buf = Vec::new();
    resp(parts, &mut buf);
    s.write_all(&buf)?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    if let Some(n) = line.strip_prefix('$') {
        let n: usize = n.trim().parse()?;
        let mut body = vec![0u8; n + 2];
        r.read_exact(&mut body)?;
        return Ok(String::from_utf8_lossy(&body).into_owned());
    }
    Ok(line)
}

fn redis_start(dir: &Path, port: u16) -> AnyResult<Child> {
    Ok(Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.to_string_lossy(),
            "--dbfilename",
            "dump.rdb",
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            &dir.join("redis.log").to_string_lossy(),
        ])
        .stdout(Stdio::null())
        .spawn()?)
}

/// Seconds from `t0` until PING answers PONG (not -LOADING, not refused).
fn redis_wait(port: u16, t0: Instant) -> AnyResult<f64> {
    loop {
        if let Ok(r) = redis_cmd(port, &[b"PING"])
            && r.starts_with("+PONG")
        {
            return Ok(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("redis did not answer within 300 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn redis_stop(mut c: Child, port: u16) -> AnyResult<()> {
    let _ = redis_cmd(port, &[b"SHUTDOWN", b"NOSAVE"]);
    c.wait()?;
    Ok(())
}

/// The "DB loaded from disk: X seconds" of the last start in the log.
fn redis_logged_load(dir: &Path) -> f64 {
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    log.lines()
        .rev()
        .find_map(|l| {
            let i = l.find("DB loaded from disk: ")?;
            l[i + 21..].split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(f64::NAN)
}

fn redis_run(rows: u64, port: u16) -> AnyResult<()> {
    let dir = std::env::temp_dir().join(format!("rndb-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let c = redis_start(&dir, port)?;
    redis_wait(port, Instant::now())?;
    // Pipelined MSETs of 1000 pairs; a reader thread drains the replies.
    let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let mut rd = s.try_clone()?;
    let msets = rows.div_ceil(1000);
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut buf = vec![0u8; 1 << 16];
        let (mut got, want) = (0u64, msets * 5);
        while got < want {
            let n = rd.read(&mut buf)?;
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        Ok(got)
    });
    let t0 = Instant::now();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &s);
    let mut buf = Vec::new();
    let mut i = 0;
    while i < rows {
        let end = (i + 1000).min(rows);
        let kvs: Vec<(String, String)> = (i..end)
            .map(|k| (k.to_string(), format!("{}:{}", k % 1000, restart_value(k))))
            .collect();
        let mut parts: Vec<&[u8]> = vec![b"MSET"];
        for (k, v) in &kvs {
            parts.push(k.as_bytes());
            parts.push(v.as_bytes());
        }
        buf.clear();
        resp(&parts, &mut buf);
        w.write_all(&buf)?;
        i = end;
    }
    w.flush()?;
    drop(w);
    let got = reader.join().map_err(|_| "reader panicked")??;
    if got != msets * 5 {
        return Err(format!("redis: {got} reply bytes for {msets} MSETs").into());
    }
    let load = t0.elapsed().as_secs_f64();
    let dbsize = redis_cmd(port, &[b"DBSIZE"])?;
    let mem = redis_cmd(port, &[b"INFO", b"memory"])?;
    let used = mem
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    let t1 = Instant::now();
    redis_cmd(port, &[b"SAVE"])?;
    let save = t1.elapsed().as_secs_f64();
    let rdb = std::fs::metadata(dir.join("dump.rdb"))?.len();
    redis_stop(c, port)?;
    println!(
        "  redis fill {:.1} s ({} keys: {}), used_memory {:.2} GB, SAVE {:.1} s, RDB {:.2} GB",
        load,
        rows,
        dbsize.trim(),
        used / 1e9,
        save,
        rdb as f64 / 1e9
    );
    for cold in [false, true] {
        if cold {
            drop_cache(&dir)?;
        }
        let t0 = Instant::now();
        let c = redis_start(&dir, port)?;
        let serving = redis_wait(port, t0)?;
        let info = redis_cmd(port, &[b"INFO", b"persistence"])?;
        let loading = info
            .lines()
            .find_map(|l| l.strip_prefix("loading:"))
            .unwrap_or("?")
            .trim()
            .to_string();
        let keys = redis_cmd(port, &[b"DBSIZE"])?;
        redis_stop(c, port)?;
        let logged = redis_logged_load(&dir);
        println!(
            "  redis {:<10} serving {:>7.2} s (loading:{loading}, {} keys) | RDB load logged {:.2} s ({:.2}M keys/s, one thread)",
            if cold { "cold" } else { "warm" },
            serving,
            keys.trim().trim_start_matches(':'),
            logged,
            rows as f64 / logged / 1e6
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        let n = |i: usize| -> u64 { args.get(i).and_then(|s| s.parse().ok()).unwrap_or(0) };
        return child(&mode, Path::new(&args[1]), n(2), n(3), n(4));
    }
    let sizes: Vec<u64> = args
        .get(1)
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4]);
    let traffic_secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(15);
    let port = 16379 + (std::process::id() % 1000) as u16;
    println!(
        "rndb restart_speed: 1 data node, NoOfReplicas=1, rows of ~200 B, \
         traffic 10,000 updates/s for {traffic_secs} s before the crash"
    );
    for gb in sizes {
        let dir = std::env::temp_dir().join(format!("rndb-restart-{}-{gb}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let load = run_child("load", &dir, gb, 0, 0)?;
        let rows = get(&load, "rows") as u64;
        println!(
            "{gb} GB: {rows} rows, DataMemory in use {:.2} GB, load {:.1} s, full LCP {:.1} s ({:.2} GB)",
            get(&load, "used_bytes") / 1e9,
            get(&load, "load_secs"),
            get(&load, "lcp_ms") / 1e3,
            get(&load, "lcp_bytes") / 1e9
        );
        let warm = run_child("traffic", &dir, gb, rows, traffic_secs)?;
        report("no traffic", &warm);
        println!(
            "  (then {} updates at {:.0}/s before the crash)",
            get(&warm, "updates_sent"),
            get(&warm, "update_rate")
        );
        let with = run_child("final", &dir, gb, rows, 0)?;
        report("10k upd/s", &with);
        drop_cache(&dir)?;
        let cold = run_child("cold", &dir, gb, rows, 0)?;
        report("cold cache", &cold);
        if std::env::var("RNDB_BENCH_PERF").is_ok() {
            let p = run_child("perf", &dir, gb, rows, 0)?;
            report("under perf", &p);
        }
        let du = Command::new("du").args(["-sh"]).arg(&dir).output()?;
        print!("  data dir: {}", String::from_utf8_lossy(&du.stdout));
        std::fs::remove_dir_all(&dir)?;
        match Command::new("redis-server").arg("--version").output() {
            Ok(_) => redis_run(rows, port)?,
            Err(e) => println!("  redis-server: not run ({e}); install it for the peer's figures"),
        }
    }
    Ok(())
}
