//! The command executor shared by every input mode: runs one command (management, shell
//! or SQL) against the embedded cluster and prints its output.
//!
//! Output: results go to stdout, error lines to stderr (both flushed after every command,
//! so a transcript that merges them keeps their order). SQL results print as the mysql
//! client prints them ([`rndb::sql::render`], with the real elapsed time), SQL errors as
//! its `ERROR <code> (<state>): <text>` line; management output as ndb_mgm prints it and
//! management errors as their one-line message.

use crate::input::{self, Kind};
use crate::progress::Progress;
use rndb::api::Cluster;
use rndb::mgm::{self, Command, Flags, Target};
use rndb::sql::{self, Session};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The mysql client's default max_allowed_packet: longer commands are refused (1153).
pub const MAX_COMMAND_BYTES: usize = 16 * 1024 * 1024;

/// How deep SOURCE may nest.
const MAX_SOURCE_DEPTH: usize = 16;

/// The text of `SOURCE <path>` at nesting `depth` (files being run around it); None
/// after printing why not (no name, nested too deep, unreadable, not UTF-8). Shared
/// by the embedded and the remote shell.
pub(crate) fn read_source_file(path: &str, depth: usize) -> Option<String> {
    let path = path.trim().trim_matches(|c| c == '\'' || c == '"');
    if path.is_empty() {
        print_err("SOURCE needs a file name: SOURCE <file>");
        return None;
    }
    if depth >= MAX_SOURCE_DEPTH {
        print_err(&format!(
            "SOURCE {path}: files nested deeper than {MAX_SOURCE_DEPTH} (a file sourcing itself?)"
        ));
        return None;
    }
    match std::fs::read(Path::new(path)) {
        Ok(b) => match String::from_utf8(b) {
            Ok(t) => Some(t),
            Err(_) => {
                print_err(&format!("SOURCE {path}: not a text file (not UTF-8)"));
                None
            }
        },
        Err(e) => {
            print_err(&format!("SOURCE {path}: {e}"));
            None
        }
    }
}

pub const DEFAULT_PROMPT: &str = "rndb_mgm> ";

/// What a command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    /// QUIT/EXIT, or SHUTDOWN (the management server stopped).
    Quit,
}

/// What every input mode (`-e`, scripts, the editor) drives: the embedded [`Shell`],
/// or the management client of a distributed cluster (`remote::RemoteShell`).
pub trait Runner {
    /// Runs one command (as split by [`input::Splitter`]).
    fn run(&mut self, text: &str) -> Outcome;
}

impl Runner for Shell {
    fn run(&mut self, text: &str) -> Outcome {
        Shell::run(self, text)
    }
}

impl crate::repl::Interactive for Shell {
    fn banner(&self) -> String {
        format!(
            "-- rndb Cluster -- Management Client --\nEmbedded cluster (--direct): data nodes {} ({}). Type HELP for help; SQL statements end with ';'.",
            self.cluster()
                .data_node_ids()
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            rndb::mgm::VERSION
        )
    }

    fn names(&mut self) -> crate::repl::Names {
        let db = self
            .current_db
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default();
        crate::repl::Names::of_cluster(self.cluster().inner(), &db)
    }

    fn prompt(&self) -> String {
        self.prompt.clone()
    }

    fn set_interactive(&mut self) {
        self.interactive = true;
    }
}

/// One shell: the cluster, its SQL session, and output settings.
pub struct Shell {
    cluster: Cluster,
    session: Option<Session>,
    /// The session's current database, shared with the completer.
    pub current_db: Arc<Mutex<String>>,
    pub prompt: String,
    /// Interactive: a blank line after SQL results, as the mysql client prints.
    pub interactive: bool,
    progress: Progress,
    depth: usize,
    /// Every data node is down (`ALL STOP`, `ALL RESTART -n`): the embedded cluster was
    /// shut down, and `ALL START` starts it again on its data directory.
    all_down: bool,
    /// `ALL RESTART -i -n`: the start that `ALL START` makes is an initial one.
    start_initial: bool,
}

/// One line (or block) of output to stdout, flushed; nothing for empty text.
pub(crate) fn print_out(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{text}");
    let _ = o.flush();
}

/// One line (or block) to stderr, flushed.
pub(crate) fn print_err(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{text}");
    let _ = e.flush();
}

impl Shell {
    /// `progress_tty`: long operations draw a status line (stderr is a terminal).
    pub fn new(cluster: Cluster, database: &str, progress_tty: bool) -> Shell {
        let session = Session::new(cluster.ndb(database));
        let current_db = Arc::new(Mutex::new(session.database().to_string()));
        Shell {
            cluster,
            session: Some(session),
            current_db,
            prompt: DEFAULT_PROMPT.to_string(),
            interactive: false,
            progress: Progress::new(progress_tty),
            depth: 0,
            all_down: false,
            start_initial: false,
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Runs one command (as split by [`input::Splitter`]).
    pub fn run(&mut self, text: &str) -> Outcome {
        let text = text.trim();
        if text.is_empty() {
            return Outcome::Ok;
        }
        if text.len() > MAX_COMMAND_BYTES {
            print_err(&format!(
                "ERROR 1153 (08S01): Got a packet bigger than 'max_allowed_packet' bytes (the command is {} bytes, the limit {MAX_COMMAND_BYTES})",
                text.len()
            ));
            return Outcome::Failed;
        }
        match input::classify(text) {
            Kind::Sql => self.sql(text),
            Kind::Mgm => self.mgm(text),
            Kind::Quit => Outcome::Quit,
            Kind::Help(topic) => self.help(topic.as_deref()),
            Kind::Source(path) => self.source(&path),
            Kind::Prompt(p) => {
                self.prompt = match p {
                    Some(p) => format!("{} ", p.trim_matches(|c| c == '"' || c == '\'').trim_end()),
                    None => DEFAULT_PROMPT.to_string(),
                };
                Outcome::Ok
            }
            Kind::Connect => {
                print_err(
                    "CONNECT: this client runs an embedded cluster; to manage a distributed cluster, start rndb_mgm with -c host:port (rndb_mgmd's address)",
                );
                Outcome::Failed
            }
            Kind::Unknown => {
                let hint = input::suggestion(text)
                    .map(|s| format!(" Did you mean {s}?"))
                    .unwrap_or_default();
                print_err(&format!(
                    "Invalid command: {}.{hint} Type HELP for help.",
                    mgm::parse::shorten(text)
                ));
                Outcome::Failed
            }
        }
    }

    fn mgm(&mut self, text: &str) -> Outcome {
        let cmd = match mgm::parse(text) {
            Ok(Some(c)) => c,
            Ok(None) => return Outcome::Ok,
            Err(e) => {
                print_err(&e.message);
                return Outcome::Failed;
            }
        };
        if self.all_down {
            return self.mgm_while_down(&cmd);
        }
        if let Command::Restart(Target::All, flags) = &cmd
            && (flags.initial || self.cluster.inner().data_dir.is_some())
        {
            return self.system_restart(flags);
        }
        if let Command::Stop(Target::All, _) = &cmd
            && self.cluster.inner().data_dir.is_some()
        {
            return self.stop_all();
        }
        let shutdown = cmd == Command::Shutdown;
        if shutdown {
            // the session's open transaction goes first, then the cluster
            self.session = None;
        }
        match mgm::run(self.cluster.inner(), &cmd) {
            Ok(out) => {
                print_out(&out);
                if shutdown {
                    return Outcome::Quit;
                }
                // As against a management server (`node_commands`): the next command
                // finds the node started.
                match cmd {
                    Command::Start(t) | Command::Restart(t, Flags { nostart: false, .. }) => {
                        self.wait_started(t)
                    }
                    _ => Outcome::Ok,
                }
            }
            Err(e) => {
                print_err(&e.message);
                Outcome::Failed
            }
        }
    }

    /// Waits until the data nodes of `target` that are starting are started (at most
    /// `node_commands::NODE_WAIT_TIMEOUT`); a node that stops again meanwhile (its
    /// restart failed: the cluster log says why) fails the command.
    fn wait_started(&self, target: Target) -> Outcome {
        use rndb::api::node_restart::NodeRunState;
        let inner = self.cluster.inner().clone();
        let ids: Vec<u32> = match target {
            Target::All => inner.data_nodes.iter().map(|n| n.node_id).collect(),
            Target::Node(id) => vec![id],
        };
        let deadline = Instant::now() + crate::node_commands::NODE_WAIT_TIMEOUT;
        loop {
            // Started as ALL STATUS says it: serving, and with a data directory the
            // restart's local checkpoint after the copy done too.
            let states: Vec<(u32, NodeRunState)> = ids
                .iter()
                .filter_map(|&id| {
                    inner.node(id).map(|n| match n.run_state() {
                        NodeRunState::Started if !n.restart_complete() => {
                            (id, NodeRunState::Starting)
                        }
                        s => (id, s),
                    })
                })
                .collect();
            if let Some((id, _)) = states.iter().find(|(_, s)| *s == NodeRunState::Stopped) {
                print_err(&format!(
                    "Node {id}: its restart failed and it is stopped again (the cluster log says why)"
                ));
                return Outcome::Failed;
            }
            if states.iter().all(|(_, s)| *s == NodeRunState::Started) {
                return Outcome::Ok;
            }
            if Instant::now() >= deadline {
                print_err(&format!(
                    "Node(s) not started within {} s: ALL STATUS shows where they are",
                    crate::node_commands::NODE_WAIT_TIMEOUT.as_secs()
                ));
                return Outcome::Failed;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// `ALL STOP` with a data directory: every data node stops (the embedded cluster is
    /// shut down: a last global checkpoint, then closed); `ALL START` starts them again
    /// (a system restart). Meanwhile SQL fails with 4009, and `ALL STATUS` and `SHOW`
    /// show the nodes not connected.
    fn stop_all(&mut self) -> Outcome {
        let Some(inner) = self.all_nodes_may("stop") else {
            return Outcome::Failed;
        };
        print_out("Executing STOP on all nodes.");
        self.take_down(&inner, None);
        self.start_initial = false;
        print_out("NDB Cluster has shutdown.");
        Outcome::Ok
    }

    /// The running cluster, if every data node may `verb` (stop, restart) now: not in
    /// single user mode; else prints why.
    fn all_nodes_may(&self, verb: &str) -> Option<std::sync::Arc<rndb::api::ClusterInner>> {
        let inner = self.cluster.inner().clone();
        if let Err(e) = inner.check_open() {
            print_err(&e.message);
            return None;
        }
        if inner.single_user_node().is_some() {
            print_err(&format!("Cannot {verb} nodes: single user mode"));
            return None;
        }
        Some(inner)
    }

    /// Shuts the embedded cluster down, keeping the shell: the state of `ALL STOP`
    /// (`restart` as [`mgm::on_all_stop`]'s).
    fn take_down(
        &mut self,
        inner: &std::sync::Arc<rndb::api::ClusterInner>,
        restart: Option<bool>,
    ) {
        mgm::on_all_stop(inner, restart);
        // the session's open transaction goes first, then the cluster
        self.session = None;
        self.cluster.shutdown();
        // Closed just above: cannot fail.
        let _ = mgm::all_data_nodes_down(inner);
        self.all_down = true;
    }

    /// A management command while every data node is down: `ALL START` starts them (a
    /// system restart on the data directory), `STATUS`, `SHOW`, `CLUSTERLOG` and
    /// `SHUTDOWN` work as usual, anything else needs running data nodes.
    fn mgm_while_down(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::Start(Target::All) => {
                print_out("NDB Cluster is being started.");
                self.start_again(self.start_initial)
            }
            Command::Start(Target::Node(id)) => {
                print_err(&format!(
                    "Start of node {id} alone refused: every data node is stopped, and they start together (a system restart): ALL START"
                ));
                Outcome::Failed
            }
            Command::Shutdown => {
                print_out(
                    "0 NDB Cluster node(s) have shutdown.\nDisconnecting to allow management server to shutdown.",
                );
                Outcome::Quit
            }
            Command::Show | Command::Status(_) | Command::ClusterLog(_) | Command::Help(_) => {
                match mgm::run(self.cluster.inner(), cmd) {
                    Ok(out) => {
                        print_out(&out);
                        Outcome::Ok
                    }
                    Err(e) => {
                        print_err(&e.message);
                        Outcome::Failed
                    }
                }
            }
            _ => {
                print_err(
                    "Every data node is stopped (ALL STOP or ALL RESTART -n); start them with ALL START",
                );
                Outcome::Failed
            }
        }
    }

    /// `ALL RESTART`: a system restart of the embedded cluster. The shell owns the
    /// cluster, so it stops it (a graceful shutdown: a last global checkpoint) and starts
    /// a new one from the current configuration (with the `SET` changes) in the same
    /// data directory: every node recovers what it saved (`Cluster::embedded_in`, each
    /// step reported on a terminal). With `-i`, an initial system restart, as ndbd
    /// --initial: every table is gone and the disk-data files the earlier run created
    /// are removed (and listed). Not in [`mgm::run`], which cannot replace its caller's
    /// cluster. (Without a data directory only `-i` comes here: the cluster keeps
    /// nothing on disk to restart from, and `mgm::run` refuses with that reason.)
    fn system_restart(&mut self, flags: &Flags) -> Outcome {
        let Some(inner) = self.all_nodes_may("restart") else {
            return Outcome::Failed;
        };
        print_out(
            "Executing RESTART on all nodes.\nStarting shutdown. This may take a while. Please wait...",
        );
        if flags.nostart {
            // The nodes wait for START, as NDB's do after ALL RESTART -n (with -i, the
            // files are removed when they start).
            self.take_down(&inner, Some(flags.initial));
            self.start_initial = flags.initial;
            print_out("All DB nodes are being restarted; they wait for ALL START.");
            return Outcome::Ok;
        }
        drop(inner);
        mgm::on_system_restart(self.cluster.inner(), flags.initial);
        // the session's open transaction goes first, then the cluster
        self.session = None;
        self.cluster.shutdown();
        let outcome = self.start_again(flags.initial);
        if outcome == Outcome::Ok {
            print_out("All DB nodes are being restarted.");
        }
        outcome
    }

    /// Starts the embedded cluster again from its current configuration (with the `SET`
    /// changes) on the same data directory, after it was shut down; `initial`: as ndbd
    /// --initial.
    fn start_again(&mut self, initial: bool) -> Outcome {
        let inner = self.cluster.inner().clone();
        let config = inner.config.read().clone();
        let data_dir = inner.data_dir.clone();
        let database = self
            .current_db
            .lock()
            .map(|db| db.clone())
            .unwrap_or_else(|_| "test".to_string());
        drop(inner);
        let on_terminal = std::io::stderr().is_terminal();
        let started = match data_dir {
            Some(dir) if initial => Cluster::embedded_initial(config, dir),
            Some(dir) => Cluster::embedded_reporting(config, dir, false, &|line| {
                if on_terminal {
                    eprintln!("{line}");
                }
            }),
            None => Cluster::embedded(config),
        };
        match started {
            Ok(cluster) => {
                self.cluster = cluster;
                let session = Session::new(self.cluster.ndb(&database));
                if let Ok(mut db) = self.current_db.lock() {
                    *db = session.database().to_string();
                }
                self.session = Some(session);
                self.all_down = false;
                self.start_initial = false;
                print_out(
                    &mgm::initial_start_lines(&self.cluster.inner().initial_removed).join("\n"),
                );
                Outcome::Ok
            }
            Err(e) => {
                // Down, as after ALL STOP: ALL START tries again.
                let _ = mgm::all_data_nodes_down(self.cluster.inner());
                self.all_down = true;
                print_err(&format!(
                    "Restart failed: the data nodes did not start again: {}. Every data node is stopped; ALL START tries again (after SET, if the configuration is the cause), QUIT leaves.",
                    e.message
                ));
                Outcome::Failed
            }
        }
    }

    fn sql(&mut self, text: &str) -> Outcome {
        let Some(session) = self.session.as_mut() else {
            print_err(if self.all_down {
                "ERROR 1296 (HY000): Got error 4009 'Cluster Failure' from NDBCLUSTER (every data node is stopped: ALL START starts them)"
            } else {
                "ERROR 2006 (HY000): the cluster has shut down"
            });
            return Outcome::Failed;
        };
        let start = Instant::now();
        let result = {
            let _running = self.progress.begin(text);
            session.execute(text)
        };
        let elapsed = start.elapsed();
        if let Ok(mut db) = self.current_db.lock() {
            *db = session.database().to_string();
        }
        mgm::sample_events(self.cluster.inner());
        match result {
            Ok(results) => {
                let is_use = results.len() == 1
                    && text
                        .split_whitespace()
                        .next()
                        .is_some_and(|w| w.eq_ignore_ascii_case("USE"));
                for r in &results {
                    if is_use {
                        // the mysql client's own USE command
                        print_out("Database changed");
                    } else {
                        print_out(&sql::render(r, elapsed));
                    }
                    if self.interactive {
                        let _ = writeln!(std::io::stdout());
                    }
                }
                Outcome::Ok
            }
            Err(e) => {
                print_err(&sql::render_error(&e));
                Outcome::Failed
            }
        }
    }

    fn help(&mut self, topic: Option<&str>) -> Outcome {
        print_help(topic)
    }

    /// Runs a file of commands; a failing command does not stop the file.
    fn source(&mut self, path: &str) -> Outcome {
        let Some(text) = read_source_file(path, self.depth) else {
            return Outcome::Failed;
        };
        self.depth += 1;
        let mut outcome = Outcome::Ok;
        for cmd in input::split_all(&text) {
            match self.run(&cmd) {
                Outcome::Ok => {}
                Outcome::Failed => outcome = Outcome::Failed,
                Outcome::Quit => {
                    outcome = Outcome::Quit;
                    break;
                }
            }
        }
        self.depth -= 1;
        outcome
    }
}

/// `HELP [<topic>]` of either shell (embedded, or against a management server).
pub fn print_help(topic: Option<&str>) -> Outcome {
    let text = match topic.map(|t| t.trim().to_ascii_uppercase()) {
        None => format!("{}\n{SHELL_HELP}", mgm::help::GENERAL),
        Some(t) if t == "SQL" => SQL_HELP.to_string(),
        Some(t) if ["QUIT", "EXIT"].contains(&t.as_str()) => "QUIT | EXIT | Ctrl-D\nLeave the client (a cluster it started in this process stops with it).\nEXIT SINGLE USER MODE is the management command: HELP ENTER.".to_string(),
        Some(t) if t == "SOURCE" => "SOURCE <file>\nRun the commands and SQL statements in <file>, as if typed; errors are\nprinted and the file goes on.".to_string(),
        Some(t) if t == "PROMPT" => "PROMPT [<prompt>]\nSet the prompt, or back to \"rndb_mgm> \" without an argument.".to_string(),
        Some(t) => match mgm::help::topic(&t) {
            Some(text) => text.to_string(),
            None => {
                print_err(&format!(
                    "No help for {}. Type HELP for the list of commands.",
                    mgm::parse::shorten(&t)
                ));
                return Outcome::Failed;
            }
        },
    };
    print_out(&text);
    Outcome::Ok
}

const SHELL_HELP: &str = "\
---------------------------------------------------------------------------
 Client commands and SQL
---------------------------------------------------------------------------
QUIT | EXIT                            Quit the client (Ctrl-D too)
SOURCE <file>                          Run the commands in <file>
PROMPT [<prompt-string>]               Set the prompt (default \"rndb_mgm> \")
<SQL statement>;                       Run SQL, ended by ';' (HELP SQL)";

const SQL_HELP: &str = "\
SQL statements run on the cluster as the mysql client runs them, and end with ';'
(a statement may span lines; the prompt shows -> while it is open):
  CREATE/DROP DATABASE, USE, CREATE/ALTER/DROP/TRUNCATE TABLE, CREATE/DROP INDEX,
  INSERT, REPLACE, UPDATE, DELETE, SELECT (joins, aggregates, GROUP BY, ORDER BY),
  BEGIN/COMMIT/ROLLBACK, SET @var / SET variable, SHOW TABLES/DATABASES/CREATE TABLE/
  INDEX/VARIABLES, DESCRIBE, EXPLAIN, OPTIMIZE TABLE (pages and extents given back;
  paced by SET ndb_optimization_delay = <ms>).
Monitoring tables: ndbinfo.memoryusage, ndbinfo.memory_per_fragment, ndbinfo.nodes
(or bare names after USE ndbinfo), with expressions, aggregates, WHERE, GROUP BY and
ORDER BY, e.g.
  SELECT node_id, 100*(sum(used)/(sum(used)+sum(total))) AS pct
  FROM ndbinfo.memoryusage GROUP BY node_id;
Division follows MySQL: exact DECIMAL results with 4 more digits of scale.";
