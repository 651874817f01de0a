//! The cluster log: what ndb_mgmd writes to `ndb_<id>_cluster.log`, kept by the embedded
//! cluster. Lines have NDB's format
//! `2024-05-02 10:11:12 [MgmtSrvr] INFO     -- Node 2: Started (version rndb-0.1.0)`
//! (local time, severity padded to 8 characters).
//!
//! Invariants:
//! - Every event enters the in-memory ring (the last [`RING_EVENTS`] events, what
//!   `REPORT EventLog` shows), whatever the filter; the file gets the events that pass the
//!   filter (`CLUSTERLOG ON|OFF`, and the severities `CLUSTERLOG ON|OFF|TOGGLE <severity>`
//!   enables, INFO..ALERT by default, as NDB).
//! - The file exists only when the cluster has a data directory; it is rotated as NDB's
//!   default `LogDestination` (`maxsize=1000000,maxfiles=6`): the full file becomes `.1`,
//!   `.1` becomes `.2`, ..., `.6` is dropped. A file that cannot be written is reported by
//!   `CLUSTERLOG INFO`, never fails a command.
//! - Memory usage events: each data node's Data and Index usage is sampled at every
//!   management command and whenever a client calls [`sample_events`]; crossing 80, 90 or
//!   99 percent (up or down) logs `Node 2: Data usage increased to 81%(...)`, DBTUP's
//!   MemoryUsage event text.

use crate::api::ClusterInner;
use crate::config::ClusterConfig;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Events kept in memory.
pub const RING_EVENTS: usize = 1000;
/// NDB's default log file size limit and number of rotated files.
const MAX_FILE_SIZE: u64 = 1_000_000;
const MAX_FILES: u32 = 6;
/// Usage levels (percent) whose crossing is logged.
const THRESHOLDS: [u64; 3] = [80, 90, 99];

/// Event severities, in NDB's order (`CLUSTERLOG INFO` lists them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    Debug = 0,
    Info = 1,
    Warning = 2,
    Error = 3,
    Critical = 4,
    Alert = 5,
}

impl Severity {
    pub const ALL: [Severity; 6] = [
        Severity::Debug,
        Severity::Info,
        Severity::Warning,
        Severity::Error,
        Severity::Critical,
        Severity::Alert,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Severity::Debug => "DEBUG",
            Severity::Info => "INFO",
            Severity::Warning => "WARNING",
            Severity::Error => "ERROR",
            Severity::Critical => "CRITICAL",
            Severity::Alert => "ALERT",
        }
    }

    pub fn from_name(s: &str) -> Option<Severity> {
        Severity::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s))
    }
}

struct Entry {
    node: u32,
    line: String,
}

struct LogFile {
    path: PathBuf,
    file: File,
    size: u64,
}

struct Inner {
    ring: VecDeque<Entry>,
    file: Option<LogFile>,
    file_error: Option<String>,
    enabled: bool,
    severities: [bool; 6],
    /// Events kept for the owner to send on (a data node's engine: to its management
    /// server), at most [`MAX_FORWARDED`]; None: not forwarding.
    forwarded: Option<VecDeque<(Severity, String)>>,
}

/// Events a forwarding log keeps until taken (the oldest go first beyond it).
pub const MAX_FORWARDED: usize = 1000;

/// The cluster log of one cluster.
pub struct ClusterLog {
    inner: Mutex<Inner>,
    path: Option<PathBuf>,
}

impl ClusterLog {
    /// A log writing `<dir>/ndb_<mgm_id>_cluster.log` when `dir` is given (appending).
    pub fn new(dir: Option<&Path>, mgm_id: u32) -> ClusterLog {
        let path = dir.map(|d| d.join(format!("ndb_{mgm_id}_cluster.log")));
        let (file, file_error) = match &path {
            None => (None, None),
            Some(p) => match open_append(p) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(format!("cannot open {}: {e}", p.display()))),
            },
        };
        ClusterLog {
            inner: Mutex::new(Inner {
                ring: VecDeque::new(),
                file,
                file_error,
                enabled: true,
                severities: [false, true, true, true, true, true],
                forwarded: None,
            }),
            path,
        }
    }

    /// The log file's path (None without a data directory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Logs `Node <node>: <text>` from the management server.
    pub fn event(&self, severity: Severity, node: u32, text: &str) {
        let line = format!(
            "{} [MgmtSrvr] {:<8} -- Node {node}: {text}",
            local_timestamp(),
            severity.name()
        );
        let mut g = self.inner.lock();
        if g.ring.len() >= RING_EVENTS {
            g.ring.pop_front();
        }
        let write = g.enabled && g.severities[severity as usize];
        if write && g.file.is_some() {
            let r = write_line(g.file.as_mut().expect("checked"), &line);
            if let Err(e) = r {
                let path = g.file.as_ref().map(|f| f.path.display().to_string());
                g.file_error = Some(format!("cannot write {}: {e}", path.unwrap_or_default()));
                g.file = None;
            }
        }
        g.ring.push_back(Entry { node, line });
        if let Some(q) = g.forwarded.as_mut() {
            if q.len() >= MAX_FORWARDED {
                q.pop_front();
            }
            q.push_back((severity, text.to_string()));
        }
    }

    /// From now on every event is also kept for [`ClusterLog::take_forwarded`].
    pub fn start_forwarding(&self) {
        self.inner
            .lock()
            .forwarded
            .get_or_insert_with(VecDeque::new);
    }

    /// The events kept for forwarding since the last call, oldest first.
    pub fn take_forwarded(&self) -> Vec<(Severity, String)> {
        self.inner
            .lock()
            .forwarded
            .as_mut()
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// The events kept in memory about `node` (all nodes when None), oldest first.
    pub fn lines(&self, node: Option<u32>) -> Vec<String> {
        self.inner
            .lock()
            .ring
            .iter()
            .filter(|e| node.is_none_or(|n| n == e.node))
            .map(|e| e.line.clone())
            .collect()
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.lock().enabled
    }

    pub fn set_enabled(&self, on: bool) {
        self.inner.lock().enabled = on;
    }

    pub fn severity_enabled(&self, s: Severity) -> bool {
        self.inner.lock().severities[s as usize]
    }

    pub fn set_severity(&self, s: Severity, on: bool) {
        self.inner.lock().severities[s as usize] = on;
    }

    /// Why the file is not being written, if it is not.
    pub fn file_error(&self) -> Option<String> {
        self.inner.lock().file_error.clone()
    }
}

fn open_append(path: &Path) -> std::io::Result<LogFile> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(LogFile {
        path: path.to_path_buf(),
        file,
        size,
    })
}

fn write_line(f: &mut LogFile, line: &str) -> std::io::Result<()> {
    if f.size > 0 && f.size + line.len() as u64 + 1 > MAX_FILE_SIZE {
        rotate(&f.path)?;
        *f = open_append(&f.path)?;
    }
    f.file.write_all(format!("{line}\n").as_bytes())?;
    f.size += line.len() as u64 + 1;
    Ok(())
}

fn rotate(path: &Path) -> std::io::Result<()> {
    let numbered = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
    let _ = std::fs::remove_file(numbered(MAX_FILES));
    for n in (1..MAX_FILES).rev() {
        let from = numbered(n);
        if from.exists() {
            std::fs::rename(&from, numbered(n + 1))?;
        }
    }
    std::fs::rename(path, numbered(1))
}

/// `YYYY-MM-DD HH:MM:SS` in local time, as NDB's log handlers print it.
pub fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as libc::time_t)
        .unwrap_or(0);
    // SAFETY: localtime_r only writes the `tm` we pass; a zeroed tm is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&now, &mut tm).is_null() };
    if !ok {
        return "1970-01-01 00:00:00".to_string();
    }
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Management state of one cluster: the cluster log, the last memory usage levels, the
/// configuration generation.
pub struct MgmState {
    pub log: ClusterLog,
    /// Node id of the (embedded) management server.
    pub mgm_node_id: u32,
    /// Per data node: (Data level, Index level), a threshold index 0..=3.
    levels: Mutex<HashMap<u32, (usize, usize)>>,
    generation: AtomicU32,
}

impl MgmState {
    pub fn new(config: &ClusterConfig, data_dir: Option<&Path>) -> MgmState {
        // without an [ndb_mgmd] section the embedded management server takes the lowest
        // node id no other node uses
        let mgm_node_id = config.mgm_nodes.first().map_or_else(
            || {
                (1..=255)
                    .find(|id| {
                        !config.data_nodes.iter().any(|n| n.node_id == *id)
                            && !config.api_nodes.iter().any(|n| n.node_id == *id)
                    })
                    .unwrap_or(255)
            },
            |m| m.node_id,
        );
        MgmState {
            log: ClusterLog::new(data_dir, mgm_node_id),
            mgm_node_id,
            levels: Mutex::new(HashMap::new()),
            generation: AtomicU32::new(1),
        }
    }

    /// The configuration generation (1 at start, +1 per change).
    pub fn config_generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    pub(crate) fn next_generation(&self) -> u32 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }
}

fn level_of(used: u64, total: u64) -> usize {
    let pct = (used * 100).checked_div(total).unwrap_or(0);
    THRESHOLDS.iter().filter(|&&t| pct >= t).count()
}

/// Samples every data node's memory usage and logs the threshold crossings since the last
/// sample (DBTUP's MemoryUsage events). Cheap: reads page counters only.
pub fn sample_events(cluster: &ClusterInner) {
    if cluster.is_closed() {
        return;
    }
    let mut events = Vec::new();
    {
        let mut levels = cluster.mgm.levels.lock();
        for (node, data, index, total) in crate::ndbinfo::node_memory(cluster) {
            let now = (level_of(data, total), level_of(index, total));
            let before = *levels.entry(node).or_insert((0, 0));
            for (what, b, n, used) in [
                ("Data", before.0, now.0, data),
                ("Index", before.1, now.1, index),
            ] {
                if b != n {
                    let pct = (used * 100).checked_div(total).unwrap_or(0);
                    let dir = if n > b { "increased" } else { "decreased" };
                    events.push((
                        node,
                        format!("{what} usage {dir} to {pct}%({used} 32K pages of total {total})"),
                    ));
                }
            }
            levels.insert(node, now);
        }
    }
    for (node, text) in events {
        cluster.mgm.log.event(Severity::Info, node, &text);
    }
}
