//! Starting `rndb_mgmd`, `rndbd` and redis-server processes for the scenario
//! benchmarks (`tcp_throughput`, `failover_pause`), and killing them on drop: a
//! [`Procs`] guard owns every process a program started, so none outlives it, on error
//! too; [`ProcCluster`] is the usual cluster of them on loopback (a management server
//! and data nodes 2 and 3, NoOfReplicas=2, one node group).
//!
//! The binaries are looked up next to the running program ([`sibling_bin`]): build
//! them first with `cargo build --release -p rndb-shell`.

use rndb::cluster::client::{ConnectString, MgmConnection};
use rndb::transport::Role;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type AnyResult<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The data nodes of a [`ProcCluster`].
pub const DATA_NODES: [u32; 2] = [2, 3];

/// Every process this program started, killed (SIGKILL) when dropped; the work
/// directory is removed unless `keep`.
pub struct Procs {
    /// The processes' working directory: their output (`<name>.out`), config, data.
    pub dir: PathBuf,
    children: Vec<(String, Child)>,
    /// Keep `dir` when dropped (set until the run succeeded, so logs survive a failure).
    pub keep: bool,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.keep {
            eprintln!("logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Procs {
    /// A fresh working directory `rndb-<tag>-<pid>` under the temporary directory.
    pub fn new(tag: &str) -> AnyResult<Procs> {
        let dir = std::env::temp_dir().join(format!("rndb-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Procs {
            dir,
            children: Vec::new(),
            keep: true,
        })
    }

    /// Starts `bin` in the working directory as `name`, its output to `<name>.out`;
    /// returns its pid.
    pub fn spawn(&mut self, name: &str, bin: &Path, args: &[&str]) -> AnyResult<u32> {
        let out = std::fs::File::create(self.dir.join(format!("{name}.out")))?;
        let err = out.try_clone()?;
        let c = Command::new(bin)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let pid = c.id();
        self.children.push((name.to_string(), c));
        Ok(pid)
    }

    /// The pid of the running process `name`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.children
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.id())
    }

    /// SIGKILL one process, then reap it; returns the instant the signal was sent.
    pub fn kill(&mut self, name: &str) -> AnyResult<Instant> {
        let i = self
            .children
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| format!("no process {name}"))?;
        let (_, mut c) = self.children.remove(i);
        let t = Instant::now();
        c.kill()?;
        c.wait()?;
        Ok(t)
    }
}

impl Procs {
    /// Waits (up to `secs`) for process `name` to exit on its own; its exit code.
    pub fn wait_exit(&mut self, name: &str, secs: u64) -> AnyResult<i32> {
        let i = self
            .children
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| format!("no process {name}"))?;
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(st) = self.children[i].1.try_wait()? {
                self.children.remove(i);
                return Ok(st.code().unwrap_or(-1));
            }
            if Instant::now() >= deadline {
                return Err(format!("{name} did not exit within {secs} s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A loopback port free at the time of the call.
pub fn free_port() -> AnyResult<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `rndb_mgmd` or `rndbd` next to this program (target/release).
pub fn sibling_bin(name: &str) -> AnyResult<PathBuf> {
    let exe = std::env::current_exe()?;
    let p = exe.parent().ok_or("no parent directory")?.join(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found: build it first with `cargo build --release -p rndb-shell`",
            p.display()
        )
        .into())
    }
}

/// A cluster of processes: rndb_mgmd (node 1) and data nodes 2 and 3 (`n2`, `n3`;
/// NoOfReplicas=2), started.
pub struct ProcCluster {
    pub procs: Procs,
    port: u16,
    /// The data nodes' ids, in `[ndbd]` order (node groups of two).
    data_nodes: Vec<u32>,
}

impl ProcCluster {
    /// Writes config.ini (DataMemory in MiB; HeartbeatIntervalDbDb if given, else the
    /// default), starts the processes and waits until both data nodes are started.
    pub fn start(tag: &str, data_memory_mb: u64, heartbeat_ms: Option<u64>) -> AnyResult<Self> {
        Self::start_with(tag, data_memory_mb, heartbeat_ms, "")
    }

    /// [`ProcCluster::start`] with more `[ndbd default]` lines (`Name=value\n` each).
    pub fn start_with(
        tag: &str,
        data_memory_mb: u64,
        heartbeat_ms: Option<u64>,
        extra: &str,
    ) -> AnyResult<Self> {
        Self::start_nodes(tag, data_memory_mb, heartbeat_ms, extra, &DATA_NODES)
    }

    /// [`ProcCluster::start_with`] of `groups` node groups of two data nodes (ids 2,
    /// 3, 4, ...).
    pub fn start_groups(tag: &str, data_memory_mb: u64, groups: u32) -> AnyResult<Self> {
        let ids: Vec<u32> = (2..2 + 2 * groups).collect();
        Self::start_nodes(tag, data_memory_mb, None, "", &ids)
    }

    fn start_nodes(
        tag: &str,
        data_memory_mb: u64,
        heartbeat_ms: Option<u64>,
        extra: &str,
        data_nodes: &[u32],
    ) -> AnyResult<Self> {
        let mgmd = sibling_bin("rndb_mgmd")?;
        let ndbd = sibling_bin("rndbd")?;
        let mut procs = Procs::new(tag)?;
        let port = free_port()?;
        let d = procs.dir.display().to_string();
        let mut t =
            format!("[ndbd default]\nNoOfReplicas=2\nDataMemory={data_memory_mb}M\nDataDir={d}\n");
        if let Some(hb) = heartbeat_ms {
            t.push_str(&format!("HeartbeatIntervalDbDb={hb}\n"));
        }
        t.push_str(extra);
        t.push_str(&format!(
            "[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\nDataDir={d}\n"
        ));
        for id in data_nodes {
            t.push_str(&format!("[ndbd]\nNodeId={id}\nHostName=127.0.0.1\n"));
        }
        t.push_str("[mysqld]\n");
        let cfg = procs.dir.join("config.ini");
        std::fs::write(&cfg, t)?;
        procs.spawn("mgmd", &mgmd, &["-f", &cfg.to_string_lossy()])?;
        let cs = format!("127.0.0.1:{port}");
        for id in data_nodes {
            procs.spawn(
                &format!("n{id}"),
                &ndbd,
                &["-c", &cs, &format!("--ndb-nodeid={id}")],
            )?;
        }
        let c = ProcCluster {
            procs,
            port,
            data_nodes: data_nodes.to_vec(),
        };
        c.wait_started(30)?;
        Ok(c)
    }

    /// Starts data node `id` again (`extra`: more arguments, e.g. `--initial`).
    pub fn spawn_data_node(&mut self, id: u32, extra: &[&str]) -> AnyResult<u32> {
        let ndbd = sibling_bin("rndbd")?;
        let cs = self.connectstring();
        let nodeid = format!("--ndb-nodeid={id}");
        let mut args = vec!["-c", cs.as_str(), nodeid.as_str()];
        args.extend_from_slice(extra);
        self.procs.spawn(&format!("n{id}"), &ndbd, &args)
    }

    /// A management command's answer (`ALL STOP`, `3 RESTART`, ...).
    pub fn mgm(&self, command: &str) -> AnyResult<String> {
        let cs = ConnectString::parse(&self.connectstring())?;
        let mut m = MgmConnection::open(&cs, Role::Api, Duration::from_secs(5))?;
        Ok(m.command(command)?)
    }

    pub fn connectstring(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Waits until `ALL STATUS` shows every data node started.
    pub fn wait_started(&self, secs: u64) -> AnyResult<()> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let cs = ConnectString::parse(&self.connectstring())?;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(mut m) = MgmConnection::open(&cs, Role::Api, Duration::from_secs(2))
                && let Ok(s) = m.command("ALL STATUS")
            {
                if self
                    .data_nodes
                    .iter()
                    .all(|id| s.contains(&format!("Node {id}: started")))
                {
                    return Ok(());
                }
                last = s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("the cluster did not start within {secs} s; last ALL STATUS: {last}").into())
    }

    /// The management server's cluster log so far (empty if not written yet).
    pub fn cluster_log(&self) -> String {
        std::fs::read_to_string(self.procs.dir.join("ndb_1_cluster.log")).unwrap_or_default()
    }
}
