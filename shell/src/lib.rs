//! rndb's command-line programs. `rndb_mgm` is the management client and SQL shell in
//! one: ndb_mgm's commands for the nodes and the mysql client's SQL for the data,
//! against the cluster's nodes started in this process (the default: the management
//! server and data nodes over an in-process network), a management server (`-c`), or
//! the data nodes' engines on this process's threads (`--direct`) (see docs/shell.md).
//!
//! Layout: [`cli`] (arguments), [`input`] (where commands end, management vs SQL),
//! [`shell`] (running one command and printing its output), [`script`] (`-e` and piped
//! input), [`repl`] (the interactive editor), [`progress`] (long operations).

pub mod cli;
pub mod daemons;
pub mod input;
pub mod node_commands;
pub mod progress;
pub mod remote;
pub mod repl;
pub mod script;
pub mod shell;

use clap::Parser;
use rndb::api::Cluster;
use rndb::config::ClusterConfig;
use std::io::IsTerminal;

/// `rndb_mgm`: returns the process exit status.
pub fn main_mgm() -> i32 {
    let args = cli::MgmArgs::parse();
    if let Some(cs) = &args.connectstring {
        return run_remote(cs, &args);
    }
    let config = match &args.config_file {
        Some(path) => match ClusterConfig::from_file(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rndb_mgm: {e}");
                return 1;
            }
        },
        None => ClusterConfig::embedded_default(),
    };
    for w in &config.warnings {
        eprintln!("Warning: {w}");
    }
    if !args.direct {
        return run_local(config, &args);
    }
    if let Err(e) = std::fs::create_dir_all(&args.data_dir) {
        eprintln!(
            "rndb_mgm: cannot create the data directory {}: {e}",
            args.data_dir.display()
        );
        return 1;
    }
    // Absolute, so the files the data nodes record (for a later --initial) do not
    // depend on the directory rndb_mgm was started from.
    let data_dir = std::path::absolute(&args.data_dir).unwrap_or_else(|_| args.data_dir.clone());
    // A system restart (the data directory holds an earlier run) reports each step as
    // it happens on a terminal (scripts get them in the cluster log only).
    let on_terminal = std::io::stderr().is_terminal();
    let started = Cluster::embedded_reporting(config, data_dir, args.initial, &|line| {
        if on_terminal {
            eprintln!("{line}");
        }
    });
    let cluster = match started {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rndb_mgm: cannot start the embedded cluster: {}", e.message);
            return 1;
        }
    };
    for line in rndb::mgm::initial_start_lines(&cluster.inner().initial_removed) {
        eprintln!("{line}");
    }
    let mut sh = shell::Shell::new(
        cluster.clone(),
        &args.database,
        std::io::stderr().is_terminal(),
    );
    let status = if let Some(text) = &args.execute {
        script::run_execute(&mut sh, text)
    } else if std::io::stdin().is_terminal() {
        let history = repl::history_path(args.history_file.clone(), &args.data_dir);
        repl::run_interactive(&mut sh, history)
    } else {
        script::run_script(&mut sh, &mut std::io::stdin().lock())
    };
    // ALL RESTART -i replaces the shell's cluster: stop the one running now
    let current = sh.cluster().clone();
    drop(sh);
    current.shutdown();
    cluster.shutdown();
    status
}

/// `rndb_mgm -c`: the shell against a management server.
fn run_remote(cs: &str, args: &cli::MgmArgs) -> i32 {
    let mut sh = match remote::RemoteShell::connect(cs) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rndb_mgm: {e}");
            return 1;
        }
    };
    run_shell(&mut sh, args)
}

/// The shell against a management server, reading `-e`, the terminal or a script.
fn run_shell(sh: &mut remote::RemoteShell, args: &cli::MgmArgs) -> i32 {
    if let Some(text) = &args.execute {
        script::run_execute(sh, text)
    } else if std::io::stdin().is_terminal() {
        let history = repl::history_path(args.history_file.clone(), &args.data_dir);
        repl::run_interactive(sh, history)
    } else {
        script::run_script(sh, &mut std::io::stdin().lock())
    }
}

/// `rndb_mgm` (without `-c` or `--direct`): starts the cluster's nodes in this process
/// (`rndb::cluster::local`), runs the shell against their management server as `-c`
/// does (holding the cluster: `remote::RemoteShell::in_process`), then shuts them down
/// gracefully (unless a SHUTDOWN did already).
fn run_local(config: ClusterConfig, args: &cli::MgmArgs) -> i32 {
    let data_dir = std::path::absolute(&args.data_dir).unwrap_or_else(|_| args.data_dir.clone());
    let cluster =
        match rndb::cluster::local::LocalCluster::start(config, Some(&data_dir), args.initial) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rndb_mgm: cannot start the cluster: {}", e.message);
                return 1;
            }
        };
    if args.initial {
        for line in node_commands::initial_removed_lines(&cluster.log_lines()) {
            eprintln!("{line}");
        }
    }
    let mut sh = match remote::RemoteShell::in_process(cluster, &args.database) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rndb_mgm: {e}");
            return 1;
        }
    };
    let status = run_shell(&mut sh, args);
    if let Some(cluster) = sh.take_local() {
        drop(sh);
        // After the shell's own SHUTDOWN the nodes have ended: nobody answers, and
        // that is no failure.
        let _ = cluster.shutdown();
    }
    status
}
