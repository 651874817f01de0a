//! Non-interactive input: `-e "commands"` and standard input that is not a terminal (a
//! script, read line by line, nothing echoed but the output).
//!
//! - `-e`: commands separated by `;` or newlines; the first failing command stops the run
//!   (exit status 1), as ndb_mgm's `-e`.
//! - script: every command runs; a failing one prints its error line and the script goes
//!   on; the exit status is 1 if any command failed.
//! - A line longer than [`MAX_COMMAND_BYTES`] is refused with the mysql client's error
//!   1153 (never held in memory whole); lines that are not UTF-8 text (or hold NUL or
//!   other control bytes) are binary data: one error line per run of such lines.

use crate::input::{self, Splitter};
use crate::shell::{MAX_COMMAND_BYTES, Outcome, Runner};
use std::io::BufRead;

/// Runs `-e` text; the exit status.
pub fn run_execute(shell: &mut impl Runner, text: &str) -> i32 {
    for cmd in input::split_all(text) {
        match shell.run(&cmd) {
            Outcome::Ok => {}
            Outcome::Failed => return 1,
            Outcome::Quit => return 0,
        }
    }
    0
}

/// One physical line: its bytes (at most `cap + 1` kept) and its full length.
fn read_line_capped(r: &mut impl BufRead, cap: usize) -> std::io::Result<Option<(Vec<u8>, usize)>> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some((kept, total)));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        total += chunk.len();
        if kept.len() <= cap {
            let room = cap + 1 - kept.len();
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some((kept, total)));
        }
    }
}

/// The line as text: UTF-8 without control characters other than tab and CR (NUL, ESC
/// and the like make it binary data).
fn as_text(bytes: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(bytes).ok()?;
    let ok = s.chars().all(|c| !c.is_control() || c == '\t' || c == '\r');
    ok.then_some(s)
}

fn report_binary(run: &mut Option<(usize, usize)>) -> bool {
    match run.take() {
        None => false,
        Some((a, b)) => {
            let which = if a == b {
                format!("line {a}")
            } else {
                format!("lines {a}-{b}")
            };
            eprintln!("Invalid input at {which}: binary data (not UTF-8 text), skipped");
            true
        }
    }
}

/// Reads a script from `reader`; the exit status.
pub fn run_script(shell: &mut impl Runner, reader: &mut impl BufRead) -> i32 {
    let mut sp = Splitter::new();
    let mut failed = false;
    let mut line_no = 0usize;
    let mut binary: Option<(usize, usize)> = None;
    loop {
        let line = match read_line_capped(reader, MAX_COMMAND_BYTES) {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                eprintln!("rndb_mgm: cannot read standard input: {e}");
                failed = true;
                break;
            }
        };
        line_no += 1;
        let (bytes, total) = line;
        if total > MAX_COMMAND_BYTES {
            report_binary(&mut binary);
            sp.reset();
            eprintln!(
                "ERROR 1153 (08S01): Got a packet bigger than 'max_allowed_packet' bytes (line {line_no} is {total} bytes, the limit {MAX_COMMAND_BYTES}); skipped"
            );
            failed = true;
            continue;
        }
        let Some(text) = as_text(&bytes) else {
            binary = Some((binary.map_or(line_no, |b| b.0), line_no));
            sp.reset();
            continue;
        };
        failed |= report_binary(&mut binary);
        let text = text.strip_suffix('\r').unwrap_or(text);
        for cmd in sp.feed(text) {
            match shell.run(&cmd) {
                Outcome::Ok => {}
                Outcome::Failed => failed = true,
                Outcome::Quit => return i32::from(failed),
            }
        }
    }
    failed |= report_binary(&mut binary);
    if let Some(cmd) = sp.finish()
        && shell.run(&cmd) == Outcome::Failed
    {
        failed = true;
    }
    i32::from(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_lines() {
        let data = b"abc\nxxxxxxxxxx\n\nlast".to_vec();
        let mut r = std::io::BufReader::with_capacity(4, &data[..]);
        let mut got = Vec::new();
        while let Some((b, n)) = read_line_capped(&mut r, 5).expect("read") {
            got.push((String::from_utf8(b).expect("utf8"), n));
        }
        assert_eq!(
            got,
            vec![
                ("abc".into(), 3),
                ("xxxxxx".into(), 10),
                (String::new(), 0),
                ("last".into(), 4)
            ]
        );
        assert_eq!(as_text(b"SHOW\r"), Some("SHOW\r"));
        assert_eq!(as_text(b"a\x00b"), None);
        assert_eq!(as_text(b"\xff\xfe"), None);
    }
}
