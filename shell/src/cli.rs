//! Command-line arguments (clap).

use clap::Parser;
use std::path::PathBuf;

/// rndb_mgm: the rndb management client and SQL shell. Without a connectstring it starts
/// the cluster in this process: the management server and data nodes of rndb_mgmd and
/// rndbd over an in-process network.
#[derive(Debug, Parser)]
#[command(
    name = "rndb_mgm",
    version = concat!(env!("CARGO_PKG_VERSION"), " (rndb-", env!("CARGO_PKG_VERSION"), ")"),
    about = "rndb management client and SQL shell: ndb_mgm's commands and the mysql client's SQL, on an embedded cluster",
    after_help = "Commands are read from -e, else from standard input: interactively on a terminal, \
as a script otherwise. Type HELP at the prompt for the commands."
)]
pub struct MgmArgs {
    /// Management server (rndb_mgmd) to connect to: host[:port] (port 1186 by default),
    /// NDB's connectstring. Without this option the cluster runs embedded.
    #[arg(
        short = 'c',
        long = "ndb-connectstring",
        visible_alias = "connect-string",
        value_name = "HOST:PORT"
    )]
    pub connectstring: Option<String>,

    /// Run the cluster in this process as distributed nodes (the default without -c):
    /// the management server and the data nodes of rndb_mgmd and rndbd (heartbeats,
    /// failover, node restarts) over an in-process network, with the configuration of
    /// -f (default: two data nodes, NoOfReplicas=2), their files in --data-dir; the
    /// shell talks to it as it does with -c.
    #[arg(long = "local", conflicts_with_all = ["connectstring", "direct"])]
    pub local: bool,

    /// Run the data nodes' engines on this process's threads instead, without the
    /// distribution layer (no transport between them, no heartbeats or failover: a
    /// transaction writes every replica itself), as Python's Cluster.embedded does.
    #[arg(long = "direct", conflicts_with = "connectstring")]
    pub direct: bool,

    /// Run these commands and exit (separated by ';' or newlines); stops at the first
    /// failing command with exit status 1.
    #[arg(short = 'e', long = "execute", value_name = "COMMANDS")]
    pub execute: Option<String>,

    /// config.ini of the embedded cluster (default: two data nodes, NoOfReplicas=2).
    #[arg(short = 'f', long = "config-file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Data directory of the embedded cluster (cluster log ndb_1_cluster.log, the data
    /// nodes' file systems ndb_<id>_fs).
    #[arg(long = "data-dir", value_name = "DIR", default_value = "./rndb-data")]
    pub data_dir: PathBuf,

    /// Initial start of the embedded data nodes, as ndbd --initial: the data and undo
    /// files an earlier run created in their file systems are removed first (and listed).
    #[arg(long = "initial")]
    pub initial: bool,

    /// Database the SQL session starts in.
    #[arg(
        short = 'd',
        long = "database",
        value_name = "NAME",
        default_value = "test"
    )]
    pub database: String,

    /// History file of the interactive client (default ~/.rndb_mgm_history).
    #[arg(long = "history-file", value_name = "FILE")]
    pub history_file: Option<PathBuf>,
}
