//! Helpers of the shell's integration tests: running the real `rndb_mgm` binary with
//! its standard output and error merged in order, and masking what changes between runs.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_rndb_mgm");

/// The transcripts directory (`tests/shell` of the workspace).
pub fn transcripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shell")
}

/// What a run printed (stdout and stderr merged, in order) and its exit status.
pub struct Run {
    pub output: String,
    pub status: i32,
}

/// Runs `rndb_mgm` with `args` in a fresh data directory (`$DATA`, also HOME), `stdin`
/// piped in. `dir` is kept by the caller to look at files afterwards.
pub fn run_in(dir: &Path, args: &[String], stdin: &[u8]) -> Run {
    let out_path = dir.join("output.txt");
    let out = std::fs::File::create(&out_path).expect("output file");
    let err = out.try_clone().expect("clone");
    let data = dir.join("data");
    let mut child = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(args)
        .env("HOME", dir)
        .env("TZ", "UTC")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("spawn rndb_mgm");
    {
        let mut si = child.stdin.take().expect("stdin");
        // the shell may exit before reading everything (QUIT, SHUTDOWN)
        let _ = si.write_all(stdin);
    }
    let status = child.wait().expect("wait").code().unwrap_or(-1);
    let output =
        String::from_utf8_lossy(&std::fs::read(&out_path).expect("read output")).into_owned();
    Run {
        output: mask(&output, dir),
        status,
    }
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// The end of `D+.DD` starting at `start` (digits, a dot, two digits), if it is there.
fn decimal_end(b: &[u8], start: usize) -> Option<usize> {
    let mut j = start;
    while j < b.len() && is_digit(b[j]) {
        j += 1;
    }
    (j > start
        && b.get(j) == Some(&b'.')
        && b.get(j + 1).copied().is_some_and(is_digit)
        && b.get(j + 2).copied().is_some_and(is_digit))
    .then_some(j + 3)
}

/// Masks times (`(0.01 sec)` -> `(X.XX sec)`, `in 0.01 sec` -> `in X.XX sec`), timestamps (`YYYY-MM-DD HH:MM:SS`), the
/// version, and the run's directory (`$DIR`).
pub fn mask(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "$DIR");
    let text = text.replace(concat!("rndb-", env!("CARGO_PKG_VERSION")), "rndb-VERSION");
    let text = text.replace(
        concat!("rndb_mgm ", env!("CARGO_PKG_VERSION")),
        "rndb_mgm VERSION",
    );
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        // (N.NN sec), and OPTIMIZE TABLE's "in N.NN sec" (the width stays below 10 s)
        if let Some((end, with)) = [("(", " sec)", "(X.XX sec)"), ("in ", " sec", "in X.XX sec")]
            .into_iter()
            .find_map(|(open, close, with)| {
                if !text[i..].starts_with(open) {
                    return None;
                }
                let end = decimal_end(b, i + open.len())?;
                text[end..]
                    .starts_with(close)
                    .then_some((end + close.len(), with))
            })
        {
            out.push_str(with);
            i = end;
            continue;
        }
        // YYYY-MM-DD HH:MM:SS
        if i + 19 <= b.len() {
            let s = &b[i..i + 19];
            let shape = b"dddd-dd-dd dd:dd:dd";
            if s.iter()
                .zip(shape)
                .all(|(c, m)| if *m == b'd' { is_digit(*c) } else { c == m })
            {
                out.push_str("YYYY-MM-DD HH:MM:SS");
                i += 19;
                continue;
            }
        }
        let ch = text[i..].chars().next().expect("char");
        out.push(ch);
        i += ch.len_utf8();
    }
    // Durations and sizes of a restart's cluster log lines (`12 millis`, `committed
    // ahead: 64 MB`, `restored GCI 1 in 0.008 s`).
    let out = mask_number_before(&out, " millis", "N", false);
    let out = mask_number_before(&out, " MB, ", "N", false);
    // `Node 2: restarted in 41 ms` (ROLLING RESTART).
    let out = mask_number_before(&out, " ms", "N", true);
    mask_number_before(&out, " s", "T", true)
}

/// Replaces each number (digits and dots) that ends right before `suffix` with `with`
/// (with `eol`, only where `suffix` ends its line).
fn mask_number_before(text: &str, suffix: &str, with: &str, eol: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut rest = line;
        while let Some(at) = rest.find(suffix) {
            let after = &rest[at + suffix.len()..];
            if eol && !after.is_empty() {
                out.push_str(&rest[..at + suffix.len()]);
                rest = after;
                continue;
            }
            let head = &rest[..at];
            let num_start = head
                .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map_or(0, |k| k + 1);
            if num_start < head.len() && head[num_start..].starts_with(|c: char| c.is_ascii_digit())
            {
                out.push_str(&head[..num_start]);
                out.push_str(with);
            } else {
                out.push_str(head);
            }
            out.push_str(suffix);
            rest = after;
        }
        out.push_str(rest);
    }
    out
}

/// A fresh directory for one run.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rndb-shell-test")
        .tempdir()
        .expect("tempdir")
}
