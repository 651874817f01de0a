//! The command line and bad input, through the real binary: --help, --version, -c,
//! configuration errors, the default data directory, and what a new user might pipe in
//! (binary garbage, a 10 MB line, a line over max_allowed_packet).

mod common;

use common::*;
use std::process::{Command, Stdio};

fn plain(args: &[&str]) -> (i32, String, String) {
    plain_in(tempdir().path(), args)
}

/// `rndb_mgm args` in `dir` (also its HOME), no standard input: status, stdout, stderr.
fn plain_in(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_and_version() {
    let (status, out, _) = plain(&["--help"]);
    assert_eq!(status, 0);
    for opt in [
        "--ndb-connectstring",
        "--execute",
        "--config-file",
        "--data-dir",
        "--database",
        "--history-file",
        "--local",
        "--version",
    ] {
        assert!(out.contains(opt), "--help lists {opt}:\n{out}");
    }
    let (status, out, _) = plain(&["--version"]);
    assert_eq!(status, 0);
    assert_eq!(
        out.trim(),
        concat!(
            "rndb_mgm ",
            env!("CARGO_PKG_VERSION"),
            " (rndb-",
            env!("CARGO_PKG_VERSION"),
            ")"
        )
    );
    let (status, _, err) = plain(&["--frobnicate"]);
    assert_eq!(status, 2, "usage error");
    assert!(err.contains("--frobnicate"), "{err}");
}

#[test]
fn a_connectstring_without_a_management_server_is_an_error_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let cs = format!("127.0.0.1:{port}");
    for args in [
        &["-c", cs.as_str(), "-e", "SHOW"][..],
        &[format!("--ndb-connectstring={cs}").as_str()][..],
    ] {
        let (status, out, err) = plain(args);
        assert_eq!(status, 1);
        assert_eq!(out, "");
        assert!(
            err.contains(&format!(
                "Unable to connect with connect string: nodeid=0,{cs}"
            )),
            "{err}"
        );
    }
    let (status, _, err) = plain(&["-c", "nodeid=x,h"]);
    assert_eq!(status, 1);
    assert!(err.contains("nodeid is not a number"), "{err}");
}

#[test]
fn configuration_errors() {
    let dir = tempdir();
    let ini = dir.path().join("config.ini");
    std::fs::write(
        &ini,
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=5000G\n[ndbd]\n[ndbd]\n",
    )
    .expect("write");
    let run = run_in(
        dir.path(),
        &[
            "--config-file".into(),
            ini.display().to_string(),
            "-e".into(),
            "SHOW".into(),
        ],
        b"",
    );
    assert_eq!(run.status, 1);
    assert_eq!(
        run.output,
        "rndb_mgm: $DIR/config.ini:3: [ndbd default] DataMemory=5000G: value out of range, allowed 1M..1024G\n"
    );
    let run = run_in(
        dir.path(),
        &["--config-file".into(), "nope.ini".into()],
        b"SHOW\n",
    );
    assert_eq!(run.status, 1);
    assert!(
        run.output
            .starts_with("rndb_mgm: nope.ini: cannot read configuration file: "),
        "{}",
        run.output
    );
    // deprecation warnings go to stderr, the cluster starts
    std::fs::write(
        &ini,
        "[ndbd default]\nIndexMemory=16M\n[ndbd]\n[ndbd]\n[mysqld]\n",
    )
    .expect("write");
    let run = run_in(
        dir.path(),
        &["--config-file".into(), ini.display().to_string()],
        b"ALL STATUS\nSHOW\n",
    );
    assert_eq!(run.status, 0, "{}", run.output);
    assert!(
        run.output
            .contains("[ndb_mgmd(MGM)]\t1 node(s)\nid=4\t@127.0.0.1"),
        "the embedded management server takes a free node id: {}",
        run.output
    );
    assert!(
        run.output
            .starts_with("Warning: $DIR/config.ini:2: IndexMemory is deprecated"),
        "{}",
        run.output
    );
    assert!(
        run.output
            .contains("Node 1: started (rndb-VERSION)\nNode 2: started (rndb-VERSION)\n"),
        "{}",
        run.output
    );
}

#[test]
fn default_data_directory() {
    let dir = tempdir();
    let out = Command::new(BIN)
        .args(["-e", "CLUSTERLOG INFO"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    // the data directory is made absolute (files recorded for --initial do not depend
    // on the working directory)
    assert_eq!(
        mask(&String::from_utf8_lossy(&out.stdout), dir.path()),
        "Severities enabled: INFO WARNING ERROR CRITICAL ALERT\nLog file: $DIR/rndb-data/ndb_1_cluster.log\n"
    );
    let log = std::fs::read_to_string(dir.path().join("rndb-data/ndb_1_cluster.log")).expect("log");
    assert!(log.contains("[MgmtSrvr] INFO     -- Node 3: Started (version rndb-"));
}

#[test]
fn empty_input_and_comments() {
    let dir = tempdir();
    let run = run_in(dir.path(), &[], b"");
    assert_eq!((run.status, run.output.as_str()), (0, ""));
    let run = run_in(dir.path(), &[], b"# a comment\n\n-- another\n   \n;\n");
    assert_eq!((run.status, run.output.as_str()), (0, ""));
    // CRLF line ends
    let run = run_in(dir.path(), &[], b"2 STATUS\r\nSELECT 1 AS x;\r\n");
    assert_eq!(run.status, 0);
    assert!(
        run.output
            .starts_with("Node 2: started (rndb-VERSION)\n+---+\n| x |"),
        "{}",
        run.output
    );
}

#[test]
fn garbage_and_huge_lines() {
    let dir = tempdir();
    let mut input = Vec::new();
    input.extend_from_slice(b"ALL STATUS\n");
    // binary garbage: a run of three lines, then text, then one more line
    let mut x: u32 = 12345;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let b = (x >> 16) as u8;
                if b == b'\n' { 0 } else { b }
            })
            .collect()
    };
    for _ in 0..3 {
        input.extend(noise(300));
        input.push(b'\n');
    }
    input.extend_from_slice(b"2 STATUS\n");
    input.extend(noise(5000));
    input.extend_from_slice(b"\nSELECT 'after garbage' AS ok;\n");
    // a 10 MB line of nothing useful, then a valid 10 MB statement
    input.extend(std::iter::repeat_n(b'y', 10 * 1024 * 1024));
    input.push(b'\n');
    input.extend_from_slice(b"SELECT LENGTH('");
    input.extend(std::iter::repeat_n(b'z', 10 * 1024 * 1024));
    input.extend_from_slice(b"') AS n;\n");
    // over max_allowed_packet (16 MB), inside an open statement
    input.extend_from_slice(b"SELECT\n");
    input.extend(std::iter::repeat_n(b'w', 17 * 1024 * 1024));
    input.extend_from_slice(b"\n3 STATUS\n");
    let run = run_in(dir.path(), &[], &input);
    assert_eq!(run.status, 1);
    let expected = "\
Node 2: started (rndb-VERSION)
Node 3: started (rndb-VERSION)
Invalid input at lines 2-4: binary data (not UTF-8 text), skipped
Node 2: started (rndb-VERSION)
Invalid input at line 6: binary data (not UTF-8 text), skipped
+---------------+
| ok            |
+---------------+
| after garbage |
+---------------+
1 row in set (X.XX sec)
Invalid command: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy... (10485760 bytes). Type HELP for help.
+----------+
| n        |
+----------+
| 10485760 |
+----------+
1 row in set (X.XX sec)
ERROR 1153 (08S01): Got a packet bigger than 'max_allowed_packet' bytes (line 11 is 17825792 bytes, the limit 16777216); skipped
Node 3: started (rndb-VERSION)
";
    assert_eq!(run.output, expected);
}

#[test]
fn execute_mode_exit_status() {
    let dir = tempdir();
    let run = run_in(
        dir.path(),
        &["-e".into(), "SHOW TABLES; SELECT 1 AS a".into()],
        b"",
    );
    assert_eq!(run.status, 0, "{}", run.output);
    let run = run_in(
        dir.path(),
        &["-e".into(), "SELECT * FROM nosuch; ALL STATUS".into()],
        b"",
    );
    assert_eq!(run.status, 1);
    assert_eq!(
        run.output, "ERROR 1146 (42S02): Table 'test.nosuch' doesn't exist\n",
        "stops after the failing command"
    );
    let run = run_in(dir.path(), &["-e".into(), "2 RESTART -x; SHOW".into()], b"");
    assert_eq!(run.status, 1);
    assert_eq!(
        run.output,
        "Invalid option: -x for RESTART. Allowed options: -n -i -a -f. Type HELP RESTART for help.\n"
    );
    // -e ignores standard input
    let run = run_in(dir.path(), &["-e".into(), "1 STATUS".into()], b"FROB\n");
    assert_eq!(
        (run.status, run.output.as_str()),
        (0, "Node 1: connected (rndb-VERSION)\n")
    );
    // another database
    let run = run_in(
        dir.path(),
        &[
            "-d".into(),
            "ndbinfo".into(),
            "-e".into(),
            "SELECT count(*) AS n FROM nodes".into(),
        ],
        b"",
    );
    assert_eq!(run.status, 0, "{}", run.output);
    assert!(run.output.contains("| 2 |"), "{}", run.output);
}

#[test]
fn a_second_run_on_the_data_directory_is_a_system_restart() {
    let dir = tempdir();
    let run = run_in(
        dir.path(),
        &["-e".into(), "CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(10)); INSERT INTO t VALUES (1, 'one'), (2, 'two')".into()],
        b"",
    );
    assert_eq!(run.status, 0, "{}", run.output);
    let run = run_in(
        dir.path(),
        &["-e".into(), "SELECT b FROM t ORDER BY a".into()],
        b"",
    );
    assert_eq!(run.status, 0, "{}", run.output);
    assert!(
        run.output.contains("| one |") && run.output.contains("| two |"),
        "{}",
        run.output
    );
    // the restart's steps are in the cluster log
    let log = std::fs::read_to_string(dir.path().join("data/ndb_1_cluster.log")).expect("log");
    assert!(
        log.contains("Node 2: System restart: recovering to GCI"),
        "{log}"
    );
    assert!(log.contains("Node 3: Executed REDO log:"), "{log}");
    assert!(
        log.contains("Node 2: Start phase 5 completed (system restart)"),
        "{log}"
    );
    // --initial starts empty again
    let run = run_in(
        dir.path(),
        &["--initial".into(), "-e".into(), "SELECT b FROM t".into()],
        b"",
    );
    assert_eq!(run.status, 1, "{}", run.output);
    assert!(run.output.contains("doesn't exist"), "{}", run.output);
}

/// `--local`: rndb_mgmd's and rndbd's code in the shell's process. A node restart
/// through the management server keeps the rows, the nodes' files go to --data-dir,
/// and a second run on it is a system restart with the rows still there.
#[test]
fn local_runs_the_distributed_nodes_in_process_and_restarts_from_the_data_directory() {
    let dir = tempdir();
    let run = |commands: &str| plain_in(dir.path(), &["--local", "-e", commands]);
    let (status, out, err) = run("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=NDB; \
         INSERT INTO t VALUES (1,10),(2,20); 3 RESTART; SELECT SUM(v) FROM t; ALL STATUS");
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("Node 3 is being restarted"), "{out}");
    assert!(out.contains("|     30 |"), "{out}");
    assert!(out.contains("Node 2: started"), "{out}");
    for f in ["ndb_1_cluster.log", "ndb_2_fs", "ndb_3_fs"] {
        assert!(dir.path().join("rndb-data").join(f).exists(), "{f}");
    }
    let (status, out, err) = run("SELECT id, v FROM t ORDER BY id");
    assert_eq!(status, 0, "{out}{err}");
    assert!(
        out.contains("|  1 | 10 |") && out.contains("|  2 | 20 |"),
        "{out}"
    );
    let (status, _, err) = plain(&["--local", "-c", "127.0.0.1:1186", "-e", "SHOW"]);
    assert_eq!(status, 2, "--local and -c conflict: {err}");
    // SOURCE against a management server: a file sourcing itself stops at the nesting
    // limit (it recursed until the stack overflowed before), no name is an error.
    std::fs::write(dir.path().join("loop.sql"), "SELECT 1;\nSOURCE loop.sql\n").expect("write");
    let (status, out, err) = run("SOURCE loop.sql");
    assert_eq!(status, 1, "{out}{err}");
    assert!(err.contains("files nested deeper than 16"), "{err}");
    assert_eq!(out.matches("1 row in set").count(), 16, "{out}");
    let (status, _, err) = run("SOURCE");
    assert_eq!(status, 1);
    assert!(err.contains("SOURCE needs a file name"), "{err}");
}
