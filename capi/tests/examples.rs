//! The C and C++ examples, built as an application would build them: compiled with
//! gcc/g++ against include/ and the librndb this test run built (target/<profile>),
//! run, and compared with their expected output (examples/<name>.expected;
//! `UPDATE_EXPECTED=1` rewrites those). Every example is compiled once per test run.
//! The C programs also run under valgrind (no invalid access, no definite leak), and
//! `make install` is checked once: its layout, and an application built with
//! `pkg-config --cflags --libs rndb` (and one linked statically).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// (source, arguments)
const EXAMPLES: &[(&str, &[&str])] = &[
    ("ndbapi_simple.cpp", &[]),
    ("ndbapi_scan.cpp", &[]),
    ("ndbapi_index_scan.cpp", &[]),
    ("ndbapi_async.cpp", &[]),
    ("ndbapi_record.cpp", &[]),
    ("ndbapi_disk.cpp", &[]),
    ("ndbapi_threads.cpp", &[]),
    ("ndbapi_durable.cpp", &[]),
    ("ndbapi_locks.cpp", &[]),
    ("ndbapi_failover.cpp", &[]),
    (
        "ndbapi_retries.cpp",
        &["embedded;TransactionDeadlockDetectionTimeout=300"],
    ),
    ("c_basic.c", &[]),
    ("c_bad_input.c", &[]),
];

fn capi_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// target/<profile>, where cargo put librndb.so for this test run.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

struct Built {
    dir: tempfile::TempDir,
    failures: Vec<String>,
}

fn compiler(src: &str) -> (&'static str, &'static [&'static str]) {
    if src.ends_with(".cpp") {
        (
            "g++",
            &["-std=c++17", "-pthread", "-Wall", "-Wextra", "-Werror"],
        )
    } else {
        (
            "gcc",
            &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"],
        )
    }
}

/// Compiles every example once (in parallel); the binaries live in a temporary dir.
fn built() -> &'static Built {
    static B: OnceLock<Built> = OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let lib = lib_dir();
        assert!(
            lib.join("librndb.so").exists(),
            "{} missing: build it first with `cargo build -p rndb-capi` (make test does)",
            lib.join("librndb.so").display()
        );
        let include = capi_dir().join("include");
        let mut jobs = Vec::new();
        for (src, _) in EXAMPLES {
            let (cc, flags) = compiler(src);
            let out = dir.path().join(stem(src));
            let child = Command::new(cc)
                .args(flags)
                .arg("-I")
                .arg(&include)
                .arg(capi_dir().join("examples").join(src))
                .arg("-L")
                .arg(&lib)
                .arg("-lrndb")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-o")
                .arg(&out)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{cc}: {e}"));
            jobs.push((src, child));
        }
        let mut failures = Vec::new();
        for (src, child) in jobs {
            let out = child.wait_with_output().expect("compiler");
            if !out.status.success() {
                failures.push(format!(
                    "{src} did not compile:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Built { dir, failures }
    })
}

fn stem(src: &str) -> &str {
    src.rsplit_once('.').map_or(src, |(s, _)| s)
}

fn binary(src: &str) -> PathBuf {
    let b = built();
    assert!(b.failures.is_empty(), "{}", b.failures.join("\n"));
    b.dir.path().join(stem(src))
}

fn args_of(src: &str) -> &'static [&'static str] {
    EXAMPLES
        .iter()
        .find(|(s, _)| *s == src)
        .map_or(&[], |(_, a)| *a)
}

/// Compares `src`'s standard output, SQL times normalized (`without_sql_times`), with
/// its `.expected` file.
fn check_output(src: &str, out: &Output) {
    let stdout = without_sql_times(&String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{src} exited with {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let expected_path = capi_dir()
        .join("examples")
        .join(format!("{}.expected", stem(src)));
    if std::env::var_os("UPDATE_EXPECTED").is_some() {
        std::fs::write(&expected_path, stdout.as_bytes()).expect("write expected output");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
    if stdout != expected {
        let diff: Vec<String> = expected
            .lines()
            .zip(stdout.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}:\n  expected: {a}\n  got:      {b}", i + 1))
            .collect();
        panic!(
            "{src}: output differs from {} ({} vs {} lines)\n{}\nfull output:\n{stdout}",
            expected_path.display(),
            expected.lines().count(),
            stdout.lines().count(),
            diff.join("\n")
        );
    }
}

fn run_example(src: &str) {
    let out = Command::new(binary(src))
        .args(args_of(src))
        .env_remove("NDB_CONNECTSTRING")
        .output()
        .expect("run example");
    check_output(src, &out);
}

#[test]
fn ndbapi_disk() {
    run_example("ndbapi_disk.cpp");
}

#[test]
fn ndbapi_failover() {
    run_example("ndbapi_failover.cpp");
}

#[test]
fn ndbapi_locks() {
    run_example("ndbapi_locks.cpp");
}

#[test]
fn ndbapi_durable() {
    run_example("ndbapi_durable.cpp");
}

#[test]
fn ndbapi_simple() {
    run_example("ndbapi_simple.cpp");
}

#[test]
fn ndbapi_scan() {
    run_example("ndbapi_scan.cpp");
}

#[test]
fn ndbapi_index_scan() {
    run_example("ndbapi_index_scan.cpp");
}

#[test]
fn ndbapi_async() {
    run_example("ndbapi_async.cpp");
}

#[test]
fn ndbapi_record() {
    run_example("ndbapi_record.cpp");
}

#[test]
fn ndbapi_threads() {
    run_example("ndbapi_threads.cpp");
}

#[test]
fn ndbapi_retries() {
    run_example("ndbapi_retries.cpp");
}

#[test]
fn c_basic() {
    run_example("c_basic.c");
}

#[test]
fn c_bad_input() {
    run_example("c_bad_input.c");
}

/// `embedded;config=PATH;datadir=PATH` reads config.ini (here one data node,
/// NoOfReplicas=1) and keeps the node's files in the data directory; a config.ini that does not parse fails connect() with the file,
/// line and parameter named.
#[test]
fn connectstring_with_config_ini() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ini = dir.path().join("config.ini");
    std::fs::write(
        &ini,
        "[ndbd default]\nNoOfReplicas=1\nDataMemory=64M\n\n[ndb_mgmd]\nHostName=localhost\n\n\
         [ndbd]\nHostName=localhost\n\n[mysqld]\n",
    )
    .expect("write config.ini");
    let cs = format!(
        "embedded;config={};datadir={}",
        ini.display(),
        dir.path().display()
    );
    let out = Command::new(binary("ndbapi_simple.cpp"))
        .arg(&cs)
        .output()
        .expect("run");
    check_output("ndbapi_simple.cpp", &out);
    // The one data node of that config.ini kept its files in the data directory.
    assert!(
        dir.path().join("ndb_2_fs").is_dir() && !dir.path().join("ndb_3_fs").exists(),
        "the node's files in the data directory"
    );

    std::fs::write(
        &ini,
        "[ndbd default]\nNoOfReplicas=1\nDataMemory=5000G\n[ndbd]\n",
    )
    .expect("write config.ini");
    let out = Command::new(binary("ndbapi_simple.cpp"))
        .arg(&cs)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a bad config.ini must fail connect()"
    );
    assert!(
        stderr.contains("config.ini:3") && stderr.contains("DataMemory"),
        "the error names the file, line and parameter: {stderr}"
    );
}

/// The C programs, and the C++ programs that cover NdbApi.hpp's objects (transactions,
/// operations, scans, rec attrs, records, asynchronous callbacks), under valgrind: no
/// invalid read or write, no definite leak (nothing suppressed), same output.
#[test]
fn c_programs_under_valgrind() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        panic!("valgrind is needed by this test (it is on every machine of this project)");
    }
    for src in [
        "c_bad_input.c",
        "c_basic.c",
        "ndbapi_simple.cpp",
        "ndbapi_scan.cpp",
        "ndbapi_async.cpp",
        "ndbapi_record.cpp",
    ] {
        let out = under_valgrind(src, args_of(src));
        check_output(src, &out);
    }
}

/// Runs example `src` with `args` under valgrind: no invalid access, no definite leak.
fn under_valgrind(src: &str, args: &[&str]) -> Output {
    let out = Command::new("valgrind")
        .args([
            "-q",
            "--error-exitcode=1",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
        ])
        .arg(binary(src))
        .args(args)
        .env_remove("NDB_CONNECTSTRING")
        .output()
        .expect("run valgrind");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("Invalid "),
        "valgrind found errors in {src} {args:?} ({}):\n{stderr}\n--- stdout:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// `make install PREFIX=DIR` (with this run's debug build instead of a release build),
/// then an application built with `pkg-config --cflags --libs rndb`, and one linked
/// against librndb.a.
#[test]
fn make_install_and_pkg_config() {
    let prefix = tempfile::tempdir().expect("temp dir");
    let root = capi_dir().parent().expect("workspace").to_path_buf();
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&root)
        .arg("install")
        .arg(format!("PREFIX={}", prefix.path().display()))
        .arg("CAPI_BUILD=true")
        .arg(format!("CAPI_LIBDIR={}", lib_dir().display()))
        .output()
        .expect("make");
    assert!(
        out.status.success(),
        "make install failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "lib/librndb.so",
        "lib/librndb.a",
        "include/rndb.h",
        "include/NdbApi.hpp",
        "lib/pkgconfig/rndb.pc",
    ] {
        assert!(prefix.path().join(f).is_file(), "{f} not installed");
    }
    let pc_path = prefix.path().join("lib/pkgconfig");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "rndb"])
        .env("PKG_CONFIG_PATH", &pc_path)
        .output();
    let flags = match flags {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => panic!(
            "pkg-config --cflags --libs rndb failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("pkg-config: {e}"),
    };
    let app = prefix.path().join("app");
    let mut cmd = Command::new("g++");
    cmd.arg(capi_dir().join("examples/ndbapi_simple.cpp"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&app);
    let out = cmd.output().expect("g++");
    assert!(
        out.status.success(),
        "g++ app.cpp $(pkg-config --cflags --libs rndb) failed ({flags}):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Runs without LD_LIBRARY_PATH: the .pc file adds an rpath to PREFIX/lib.
    let out = Command::new(&app)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run app");
    check_output("ndbapi_simple.cpp", &out);

    let static_app = prefix.path().join("app_static");
    let out = Command::new("gcc")
        .arg(capi_dir().join("examples/c_basic.c"))
        .arg("-I")
        .arg(prefix.path().join("include"))
        .arg(prefix.path().join("lib/librndb.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&static_app)
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "static link against librndb.a failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ldd = Command::new("ldd").arg(&static_app).output().expect("ldd");
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("librndb"),
        "the static application still needs librndb.so"
    );
    let out = Command::new(&static_app).output().expect("run static app");
    check_output("c_basic.c", &out);
}

/// The header compiles as C89-compatible C99 and as C++11 (what NDB API users have).
#[test]
fn headers_compile_in_older_dialects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let include = capi_dir().join("include");
    let c = dir.path().join("h.c");
    std::fs::write(
        &c,
        "#include \"rndb.h\"\nint main(void) { return rndb_init(); }\n",
    )
    .expect("write");
    let cpp = dir.path().join("h.cpp");
    std::fs::write(
        &cpp,
        "#include <NdbApi.hpp>\nint main() { return ndb_init(); }\n",
    )
    .expect("write");
    for (cc, std, src) in [("gcc", "-std=c99", &c), ("g++", "-std=c++11", &cpp)] {
        let out = Command::new(cc)
            .args([std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I"])
            .arg(&include)
            .arg(src)
            .output()
            .expect("compiler");
        assert!(
            out.status.success(),
            "{cc} {std}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `rndb_mgmd` and two `rndbd` (NoOfReplicas=2) on loopback, killed when dropped.
struct ProcCluster {
    dir: tempfile::TempDir,
    procs: Vec<std::process::Child>,
    port: u16,
}

impl Drop for ProcCluster {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

impl ProcCluster {
    fn start() -> ProcCluster {
        let bin = lib_dir();
        if !bin.join("rndb_mgmd").exists() || !bin.join("rndbd").exists() {
            let mut build = Command::new(env!("CARGO"));
            build.args(["build", "-p", "rndb-shell", "--bins"]);
            if bin.ends_with("release") {
                build.arg("--release");
            }
            assert!(build.status().expect("cargo build").success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("config.ini"),
            format!(
                "[ndbd default]\nNoOfReplicas=2\nDataMemory=64M\nHeartbeatIntervalDbDb=100\n\
                 TransactionDeadlockDetectionTimeout=300\nDataDir={d}\n\
                 [ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\nDataDir={d}\n\
                 [ndbd]\nNodeId=2\nHostName=127.0.0.1\n[ndbd]\nNodeId=3\nHostName=127.0.0.1\n\
                 [mysqld]\n[mysqld]\n[mysqld]\n[mysqld]\n"
            ),
        )
        .expect("config.ini");
        let spawn = |args: &[String], log: &str| {
            let out = std::fs::File::create(dir.path().join(log)).expect("log file");
            let err = out.try_clone().expect("log file");
            Command::new(&args[0])
                .args(&args[1..])
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", args[0]))
        };
        let mgmd = bin.join("rndb_mgmd").display().to_string();
        let ndbd = bin.join("rndbd").display().to_string();
        let config = dir.path().join("config.ini").display().to_string();
        let mut procs = vec![spawn(&[mgmd, "-f".into(), config], "mgmd.log")];
        let cs = format!("127.0.0.1:{port}");
        for n in 0..2 {
            procs.push(spawn(
                &[ndbd.clone(), "-c".into(), cs.clone()],
                &format!("ndbd{n}.log"),
            ));
        }
        ProcCluster { dir, procs, port }
    }

    fn connectstring(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn logs(&self) -> String {
        ["mgmd.log", "ndbd0.log", "ndbd1.log"]
            .iter()
            .map(|f| {
                let t = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
                format!("--- {f}\n{t}")
            })
            .collect()
    }
}

/// "(0.02 sec)" as "(0.00 sec)": a statement's time depends on the machine's load (and
/// under valgrind, on valgrind).
fn without_sql_times(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(" sec)") {
        let head = &rest[..at];
        match head.rfind('(') {
            Some(open)
                if head[open + 1..]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.') =>
            {
                out.push_str(&head[..=open]);
                out.push_str("0.00");
            }
            _ => out.push_str(head),
        }
        out.push_str(" sec)");
        rest = &rest[at + 5..];
    }
    out.push_str(rest);
    out
}

/// The examples that run against the distributed nodes as they are, with another
/// connectstring (not ndbapi_disk, not ndbapi_durable: see below).
const DISTRIBUTED_EXAMPLES: [&str; 9] = [
    "ndbapi_simple.cpp",
    "ndbapi_scan.cpp",
    "ndbapi_index_scan.cpp",
    "ndbapi_async.cpp",
    "ndbapi_record.cpp",
    "ndbapi_retries.cpp",
    "ndbapi_threads.cpp",
    "ndbapi_locks.cpp",
    "c_basic.c",
];

/// The examples against real processes (`host:port` instead of `embedded`, nothing
/// else changed): the same output as on the embedded cluster. Not here: ndbapi_disk
/// (information_schema.FILES over TCP lists the files of the data node that runs the
/// query only) and ndbapi_durable (it restarts its own embedded cluster).
#[test]
fn examples_against_rndb_mgmd_and_two_rndbd() {
    let c = ProcCluster::start();
    let cs = c.connectstring();
    for src in DISTRIBUTED_EXAMPLES {
        let out = Command::new(binary(src))
            .arg(&cs)
            .env_remove("NDB_CONNECTSTRING")
            .output()
            .expect("run example");
        if !out.status.success() {
            eprintln!("{}", c.logs());
        }
        check_output(src, &out);
    }
    // The remote path's rounds, batches, scans and locks under valgrind.
    let out = under_valgrind("ndbapi_locks.cpp", &[&cs]);
    check_output("ndbapi_locks.cpp", &out);
}

/// Every example that takes a connectstring, on `direct` (the data nodes' engines on
/// the program's own threads, no transport) instead of `embedded`: the same output.
#[test]
fn examples_on_the_direct_engines() {
    for (src, args) in EXAMPLES {
        // These two name their own connectstring.
        if matches!(*src, "ndbapi_durable.cpp" | "c_bad_input.c") {
            continue;
        }
        let cs = match args.first() {
            Some(a) => a.replacen("embedded", "direct", 1),
            None => "direct;DataMemory=32M".to_string(),
        };
        assert!(cs.starts_with("direct"), "{src}: {cs}");
        let out = Command::new(binary(src))
            .arg(&cs)
            .env_remove("NDB_CONNECTSTRING")
            .output()
            .expect("run example");
        check_output(src, &out);
    }
}

/// kill -9 of a data node while ndbapi_failover inserts over TCP: the program retries
/// what the failure aborted (4010, and 4012 read back) and then finds every row once,
/// by a scan and by key: the embedded output.
#[test]
fn a_data_node_killed_under_the_c_api_loses_no_row() {
    use std::io::BufRead;
    let mut c = ProcCluster::start();
    let mut child = Command::new(binary("ndbapi_failover.cpp"))
        .arg(c.connectstring())
        .env_remove("NDB_CONNECTSTRING")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run example");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        let progress = line.starts_with("progress");
        seen.push(line);
        if progress {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.starts_with("progress")),
        "no progress line: {seen:?}\n{}",
        c.logs()
    );
    // Node 3 (the second rndbd), in the middle of the inserts.
    let victim = &mut c.procs[2];
    victim.kill().expect("kill -9");
    victim.wait().expect("reap");
    let rest: Vec<String> = lines.map_while(|l| l.ok()).collect();
    let out = child.wait_with_output().expect("wait");
    if !out.status.success() {
        eprintln!("stderr after the kill: {rest:?}\n{}", c.logs());
    }
    check_output("ndbapi_failover.cpp", &out);
}

#[test]
fn sql_times_are_normalized_and_nothing_else() {
    assert_eq!(
        without_sql_times("1 row in set (0.02 sec)\nQuery OK (12.5 sec) (x sec)"),
        "1 row in set (0.00 sec)\nQuery OK (0.00 sec) (x sec)"
    );
}
