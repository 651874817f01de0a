//! `rndb_mgmd` and `rndbd`: the management server and the data node processes of a
//! distributed cluster, with NDB's options. Both run in the foreground (NDB's
//! `--nodaemon`; `--nodaemon` is accepted and changes nothing) and end on SIGINT or
//! SIGTERM: the management server after closing its connections, a data node after
//! leaving the cluster (a graceful stop).

use clap::Parser;
use rndb::cluster::client::ConnectString;
use rndb::cluster::mgmd::MgmServer;
use rndb::cluster::ndbd::{DataNodeOptions, DataNodeProcess};
use rndb::config::ClusterConfig;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

fn catch_termination() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// rndb_mgmd: the rndb management server (NDB's ndb_mgmd).
#[derive(Debug, Parser)]
#[command(name = "rndb_mgmd", version = concat!(env!("CARGO_PKG_VERSION"), " (rndb-", env!("CARGO_PKG_VERSION"), ")"))]
pub struct MgmdArgs {
    /// The cluster's config.ini.
    #[arg(short = 'f', long = "config-file", value_name = "FILE")]
    pub config_file: PathBuf,
    /// NDB's option to reread config.ini instead of the configuration cache; rndb keeps
    /// no cache and always reads the file.
    #[arg(long = "initial")]
    pub initial: bool,
    /// Which [ndb_mgmd] of the file this server is (default: the first).
    #[arg(long = "ndb-nodeid", value_name = "N")]
    pub node_id: Option<u32>,
    /// Run in the foreground (always the case).
    #[arg(long = "nodaemon")]
    pub nodaemon: bool,
}

/// rndbd: an rndb data node (NDB's ndbd).
#[derive(Debug, Parser)]
#[command(name = "rndbd", version = concat!(env!("CARGO_PKG_VERSION"), " (rndb-", env!("CARGO_PKG_VERSION"), ")"))]
pub struct NdbdArgs {
    /// The management server: [nodeid=N,]host[:port].
    #[arg(
        short = 'c',
        long = "ndb-connectstring",
        visible_alias = "connect-string",
        value_name = "CONNECTSTRING",
        default_value = "localhost:1186"
    )]
    pub connectstring: String,
    /// Initial start: the node's file system (DataDir/ndb_<id>_fs) is removed first.
    #[arg(long = "initial")]
    pub initial: bool,
    /// Connect, then wait for START from the management client.
    #[arg(short = 'n', long = "nostart")]
    pub nostart: bool,
    /// This node's id (an [ndbd] NodeId of config.ini).
    #[arg(long = "ndb-nodeid", value_name = "N")]
    pub node_id: Option<u32>,
    /// Run in the foreground (always the case).
    #[arg(long = "nodaemon")]
    pub nodaemon: bool,
}

/// `rndb_mgmd`: returns the exit status.
pub fn main_mgmd() -> i32 {
    let args = MgmdArgs::parse();
    let cfg = match ClusterConfig::from_file(&args.config_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rndb_mgmd: {e}");
            return 1;
        }
    };
    for w in &cfg.warnings {
        eprintln!("Warning: {w}");
    }
    let Some(me) = (match args.node_id {
        Some(id) => cfg.mgm_nodes.iter().find(|m| m.node_id == id),
        None => cfg.mgm_nodes.first(),
    })
    .cloned() else {
        eprintln!(
            "rndb_mgmd: {} has no [ndb_mgmd]{}",
            args.config_file.display(),
            args.node_id
                .map(|i| format!(" with NodeId={i}"))
                .unwrap_or_default()
        );
        return 1;
    };
    if let Err(e) = std::fs::create_dir_all(&me.data_dir) {
        eprintln!("rndb_mgmd: DataDir {}: {e}", me.data_dir.display());
        return 1;
    }
    catch_termination();
    let server = match MgmServer::start(cfg, me.node_id, None, Some(&me.data_dir)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rndb_mgmd: {}", e.message);
            return 1;
        }
    };
    println!(
        "rndb_mgmd {}: node {} listening on {}, cluster log {}",
        rndb::mgm::VERSION,
        me.node_id,
        server.addr(),
        me.data_dir
            .join(format!("ndb_{}_cluster.log", me.node_id))
            .display()
    );
    while !server.shutdown_requested() && !SIGNALLED.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // A SHUTDOWN's STOP messages go out before the connections close.
    std::thread::sleep(Duration::from_millis(200));
    server.stop();
    0
}

/// `rndbd`: returns the exit status (0 after a graceful stop, 1 after a forced
/// shutdown or a failed start).
pub fn main_ndbd() -> i32 {
    let args = NdbdArgs::parse();
    let cs = match ConnectString::parse(&args.connectstring) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rndbd: {}", e.message);
            return 1;
        }
    };
    catch_termination();
    let node = match DataNodeProcess::start(DataNodeOptions {
        connectstring: cs,
        node_id: args.node_id,
        initial: args.initial,
        nostart: args.nostart,
        connect_timeout: None,
        echo: true,
    }) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("rndbd: {}", e.message);
            return 1;
        }
    };
    loop {
        if SIGNALLED.load(Ordering::Relaxed) {
            return node.stop();
        }
        let s = node.status();
        if s.state == rndb::transport::NodeState::Stopped {
            if let Some(r) = &s.stop_reason {
                eprintln!("rndbd: node {} stopped: {r}", node.node_id);
            }
            return node.wait();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
