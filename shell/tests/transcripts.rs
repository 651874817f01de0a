//! Transcript tests: each `tests/shell/<name>.script` is fed to the real `rndb_mgm`
//! (standard input, or `-e` with `#! execute`), and everything it prints (stdout and
//! stderr merged, times, timestamps and paths masked) must equal `<name>.expected`,
//! whose first line is `# exit status: N`.
//!
//! Directives at the top of a script (lines starting with `#!`, comments to the shell):
//! - `#! execute`: pass the rest of the script as `-e` instead of standard input;
//! - `#! args: A B ...`: more arguments (`$TRANSCRIPTS` = the transcripts directory);
//! - `#! cluster-log`: append the cluster log file (`ndb_1_cluster.log`) to the output,
//!   its lines sorted (after masking, and with every `GCI <n>` as `GCI N`): the data
//!   nodes run on threads of their own, so the order in which two nodes' lines reach
//!   the log varies between runs, and so does the number of the global checkpoint a
//!   restart finds (one every TimeBetweenGlobalCheckpoints); which lines there are
//!   does not (`ALL RESTART`, a system restart, stops the nodes as `ALL STOP` does: no
//!   node logs another's departure).
//!
//! `RNDB_BLESS=1 cargo test -p rndb-shell --test transcripts` rewrites the expected
//! files from the actual output (review the diff before committing).

mod common;

use common::*;
use std::path::Path;

fn transcript(name: &str) {
    let dir_t = transcripts_dir();
    let script_path = dir_t.join(format!("{name}.script"));
    let script = std::fs::read_to_string(&script_path).expect("script");
    let tdir = dir_t.canonicalize().expect("transcripts dir");
    let mut args: Vec<String> = Vec::new();
    let mut execute = false;
    let mut cluster_log = false;
    let mut body = Vec::new();
    for line in script.lines() {
        if let Some(d) = line.strip_prefix("#! ") {
            if d == "execute" {
                execute = true;
            } else if d == "cluster-log" {
                cluster_log = true;
            } else if let Some(a) = d.strip_prefix("args:") {
                args.extend(
                    a.split_whitespace()
                        .map(|w| w.replace("$TRANSCRIPTS", &tdir.display().to_string())),
                );
            } else {
                panic!("{name}: unknown directive {d}");
            }
        } else {
            body.push(line.replace("$TRANSCRIPTS", &tdir.display().to_string()));
        }
    }
    let body = body.join("\n") + "\n";
    let dir = tempdir();
    let stdin = if execute {
        args.push("-e".into());
        args.push(body.trim_end().to_string());
        Vec::new()
    } else {
        body.into_bytes()
    };
    let run = run_in(dir.path(), &args, &stdin);
    let mut actual = format!("# exit status: {}\n{}", run.status, run.output);
    if cluster_log {
        let log = std::fs::read_to_string(dir.path().join("data/ndb_1_cluster.log"))
            .expect("cluster log");
        actual.push_str("== ndb_1_cluster.log\n");
        let masked = without_gci_numbers(&mask(&log, dir.path()));
        let mut lines: Vec<&str> = masked.lines().collect();
        lines.sort_unstable();
        for l in lines {
            actual.push_str(l);
            actual.push('\n');
        }
    }
    let actual = actual.replace(&tdir.display().to_string(), "$TRANSCRIPTS");
    let expected_path = dir_t.join(format!("{name}.expected"));
    if std::env::var_os("RNDB_BLESS").is_some() {
        std::fs::write(&expected_path, &actual).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if expected != actual {
        let first_diff = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name}: output differs from {} at line {}\n--- expected:\n{}\n--- actual:\n{}",
            expected_path.display(),
            first_diff + 1,
            expected,
            actual
        );
    }
}

/// `text` with the number after each `GCI ` as `N`.
fn without_gci_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("GCI ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push('N');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn gci_numbers_are_masked() {
    assert_eq!(
        without_gci_numbers("restoring GCI 12 from GCI 3; GCI x, GCI"),
        "restoring GCI N from GCI N; GCI x, GCI"
    );
}

macro_rules! transcripts {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                transcript(stringify!($name));
            }
        )*
    };
}

transcripts!(
    show_status,
    memory_report,
    clusterlog,
    single_user_mode,
    node_restarts,
    set_parameters,
    shutdown,
    help,
    seeds_sql,
    sql_error_mid_script,
    execute_stops_at_failure,
    execute_ok,
    source_file,
    config_file,
    unknown_commands,
    initial_restart,
    direct_mode,
);

#[test]
fn every_script_has_a_test() {
    let listed = [
        "show_status",
        "memory_report",
        "clusterlog",
        "single_user_mode",
        "node_restarts",
        "set_parameters",
        "shutdown",
        "help",
        "seeds_sql",
        "sql_error_mid_script",
        "execute_stops_at_failure",
        "execute_ok",
        "source_file",
        "config_file",
        "unknown_commands",
        "initial_restart",
        "direct_mode",
    ];
    for e in std::fs::read_dir(transcripts_dir()).expect("dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "script") {
            let stem = p.file_stem().and_then(|s| s.to_str()).expect("name");
            assert!(listed.contains(&stem), "{stem}.script has no test");
            assert!(
                Path::new(&p.with_extension("expected")).exists()
                    || std::env::var_os("RNDB_BLESS").is_some(),
                "{stem}.expected missing"
            );
        }
    }
}

#[test]
fn masking() {
    let d = Path::new("/tmp/x");
    assert_eq!(
        mask(
            "1 row in set (0.01 sec)\n2024-05-02 10:11:12 [MgmtSrvr] /tmp/x/data (12.5 sec)",
            d
        ),
        "1 row in set (X.XX sec)\nYYYY-MM-DD HH:MM:SS [MgmtSrvr] $DIR/data (12.5 sec)"
    );
    assert_eq!(
        mask(
            "0 rows, 12 millis (committed ahead: 64 MB, 3 millis)\nrestored GCI 1 in 0.008 s\n3 s ago",
            d
        ),
        "0 rows, N millis (committed ahead: N MB, N millis)\nrestored GCI 1 in T s\n3 s ago"
    );
    assert_eq!(
        mask("| 2 rows moved in 0.03 sec; 1 page |", d),
        "| 2 rows moved in X.XX sec; 1 page |"
    );
}
