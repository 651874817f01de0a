//! Progress of long operations (a statement that runs for more than a second: loads,
//! big deletes). On a terminal a status line on stderr shows the elapsed time and is
//! erased before the operation's output; otherwise a plain line on stderr every 10
//! seconds. Short operations print nothing, so transcripts stay deterministic.
//!
//! One watcher thread per shell (not one per statement): [`Progress::begin`] publishes
//! the running operation, the guard it returns withdraws it. The watcher prints and the
//! guard erases under the same mutex, so a status line never lands inside output.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Shown after this long.
const QUIET: Duration = Duration::from_secs(1);
/// Plain lines (not a terminal) this often.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

struct Op {
    start: Instant,
    label: String,
    /// A status line is on the terminal.
    shown: bool,
    next_plain: Duration,
}

#[derive(Default)]
struct State {
    op: Option<Op>,
    closed: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// The watcher of one shell.
pub struct Progress {
    shared: Shared,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The running operation; withdrawn (and its status line erased) on drop.
pub struct Running<'a> {
    shared: &'a Shared,
}

fn label_of(text: &str) -> String {
    let head: String = text.chars().take(200).collect();
    let one_line = head.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s: String = one_line.chars().take(50).collect();
    if one_line.chars().count() > 50 || text.len() > head.len() {
        s.push_str("...");
    }
    s
}

impl Progress {
    /// `tty`: draw a status line (stderr is a terminal) rather than plain lines.
    pub fn new(tty: bool) -> Progress {
        let shared: Shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || watch(&s, tty))
            .ok();
        Progress { shared, thread }
    }

    pub fn begin(&self, text: &str) -> Running<'_> {
        if let Ok(mut g) = self.shared.0.lock() {
            g.op = Some(Op {
                start: Instant::now(),
                label: label_of(text),
                shown: false,
                next_plain: PLAIN_EVERY,
            });
        }
        Running {
            shared: &self.shared,
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut g) = self.shared.0.lock()
            && let Some(op) = g.op.take()
            && op.shown
        {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Ok(mut g) = self.shared.0.lock() {
            g.closed = true;
        }
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(shared: &Shared, tty: bool) {
    let spinner = ['|', '/', '-', '\\'];
    let mut tick = 0usize;
    let (lock, cv) = &**shared;
    let Ok(mut g) = lock.lock() else {
        return;
    };
    loop {
        g = match cv.wait_timeout(g, Duration::from_millis(100)) {
            Ok((g, _)) => g,
            Err(_) => return,
        };
        if g.closed {
            return;
        }
        let Some(op) = g.op.as_mut() else {
            continue;
        };
        let t = op.start.elapsed();
        if t < QUIET {
            continue;
        }
        let mut e = std::io::stderr().lock();
        if tty {
            let _ = write!(
                e,
                "\r\x1b[K{} running {:.1} s: {}",
                spinner[tick % spinner.len()],
                t.as_secs_f64(),
                op.label
            );
            let _ = e.flush();
            tick += 1;
            op.shown = true;
        } else if t >= op.next_plain {
            let _ = writeln!(e, "-- still running after {} s: {}", t.as_secs(), op.label);
            op.next_plain += PLAIN_EVERY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(label_of("SELECT\n  1"), "SELECT 1");
        let long = format!("INSERT INTO t VALUES {}", "(1),".repeat(100));
        assert!(label_of(&long).ends_with("..."));
        assert_eq!(label_of(&long).chars().count(), 53);
        let p = Progress::new(false);
        drop(p.begin("SELECT 1"));
    }
}
