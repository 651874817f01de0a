//! The real interactive shell in a pseudo-terminal (openpty from libc, no tmux needed):
//! the prompt and banner, Tab completion, the continuation prompt of an open SQL
//! statement, history recall with the up arrow (also across runs, from the history
//! file), hints, Ctrl-C cancelling the line and an open statement, Ctrl-D quitting.
//!
//! Checks look at what the commands print (a completed or recalled command runs and
//! prints its output), not at the terminal's redraw sequences.

mod common;

use common::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Pty {
    child: Child,
    master: File,
    out: Arc<Mutex<Vec<u8>>>,
}

const TIMEOUT: Duration = Duration::from_secs(20);

impl Pty {
    fn spawn(dir: &Path) -> Pty {
        let mut master: libc::c_int = -1;
        let mut slave: libc::c_int = -1;
        let ws = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes the two descriptors; the other pointers may be null.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &ws,
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: fresh descriptors owned from here on.
        let slave = unsafe { OwnedFd::from_raw_fd(slave) };
        let master = unsafe { File::from_raw_fd(master) };
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup"));
        let mut cmd = Command::new(BIN);
        cmd.arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--history-file")
            .arg(dir.join("history"))
            .env("TERM", "xterm")
            .env("HOME", dir)
            .stdin(io(&slave))
            .stdout(io(&slave))
            .stderr(io(&slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn rndb_mgm in a pty");
        drop(slave);
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let mut reader = master.try_clone().expect("clone master");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break, // EIO once the child has exited
                    Ok(n) => sink.lock().expect("out").extend_from_slice(&buf[..n]),
                }
            }
        });
        Pty { child, master, out }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to pty");
        self.master.flush().expect("flush");
        // let the line editor take the keys one batch at a time
        std::thread::sleep(Duration::from_millis(150));
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().expect("out")).into_owned()
    }

    /// Waits until `needle` occurs at least `n` times in the output.
    fn wait_for(&self, needle: &str, n: usize) {
        let start = Instant::now();
        loop {
            let t = self.text();
            if t.matches(needle).count() >= n {
                return;
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "timed out waiting for {n} x {needle:?}; output so far:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }

    fn wait_exit(&mut self) -> i32 {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s.code().unwrap_or(-1);
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "the shell did not exit:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

const UP: &[u8] = b"\x1b[A";
const STARTED: &str = "Node 3: started (rndb-";

#[test]
fn interactive_session() {
    let dir = tempdir();
    let mut p = Pty::spawn(dir.path());
    p.wait_for("-- rndb Cluster -- Management Client --", 1);
    p.wait_for("rndb_mgm> ", 1);

    // Tab completes the verb: "ALL STAT" -> "ALL STATUS"
    p.send(b"ALL STAT");
    p.send(b"\t");
    p.send(b"\r");
    p.wait_for(STARTED, 1);
    // lower case and a node id
    p.send(b"2 report mem\t\r");
    p.wait_for("Node 2: Index usage is 0%", 1);

    // an SQL statement left open continues on the next line
    p.send(b"SELECT 41 + 1\r");
    p.wait_for("       -> ", 1);
    p.send(b"AS answer;\r");
    p.wait_for("| answer |", 1);
    p.wait_for("1 row in set (", 1);

    // up arrow recalls the whole statement; Enter runs it again
    p.send(UP);
    p.send(b"\r");
    p.wait_for("| answer |", 2);
    // two entries back: "2 report mem..." and three: ALL STATUS
    p.send(UP);
    p.send(UP);
    p.send(UP);
    p.send(b"\r");
    p.wait_for(STARTED, 2);

    // Ctrl-C cancels the line being typed
    p.send(b"FROBNICATE");
    p.send(b"\x03");
    p.send(b"1 STATUS\r");
    p.wait_for("Node 1: connected (rndb-", 1);
    assert_eq!(p.count("Invalid command: FROBNICATE"), 0, "{}", p.text());
    // ... and an open SQL statement
    p.send(b"SELECT\r");
    p.wait_for("       -> ", 2);
    p.send(b"\x03");
    p.send(b"ALL STATUS\r");
    p.wait_for(STARTED, 3);
    assert_eq!(p.count("ERROR 1064"), 0, "{}", p.text());

    // an error keeps the shell running
    p.send(b"SHWO\r");
    p.wait_for(
        "Invalid command: SHWO. Did you mean SHOW? Type HELP for help.",
        1,
    );
    p.send(b"HELP SHOW\r");
    p.wait_for("Print the cluster configuration", 1);

    // Ctrl-D quits with status 0
    p.send(b"\x04");
    assert_eq!(p.wait_exit(), 0);
    let history = std::fs::read_to_string(dir.path().join("history")).expect("history file");
    assert!(history.contains("ALL STATUS"), "{history}");
    assert!(history.contains("SELECT 41 + 1 AS answer;"), "{history}");
    assert!(!history.contains("FROBNICATE"), "{history}");

    // a new run recalls the previous run's history
    let mut p = Pty::spawn(dir.path());
    p.wait_for("rndb_mgm> ", 1);
    p.send(UP); // HELP SHOW, the last command of the previous run
    p.send(b"\r");
    p.wait_for("Print the cluster configuration", 1);
    p.send(b"QUIT\r");
    assert_eq!(p.wait_exit(), 0);
}

#[test]
fn hint_and_shutdown() {
    let dir = tempdir();
    let mut p = Pty::spawn(dir.path());
    p.wait_for("rndb_mgm> ", 1);
    // the syntax hint of ENTER, shown dim after the cursor
    p.send(b"ENTER ");
    p.wait_for("SINGLE USER MODE <api node id>", 1);
    p.send(b"\x15"); // Ctrl-U: clear the line
    p.send(b"SHUTDOWN\r");
    p.wait_for("NDB Cluster has shutdown.", 1);
    assert_eq!(p.wait_exit(), 0);
}
