//! `rndb_mgm -c host:port`: the management client of a distributed cluster. Commands
//! go to the management server (`rndb_mgmd`) over one connection and its answers are
//! printed as ndb_mgm prints them; the same input modes as the embedded shell (`-e`,
//! scripts, the interactive editor). SQL goes to the data nodes (an API connection,
//! `rndb::cluster::remote`, opened at the first statement): DDL reaches every data
//! node, SELECT and SHOW are answered by one; INSERT, REPLACE, UPDATE and DELETE are
//! captured on a data node and applied through a TC (`rndb::cluster::remote_sql`).
//! `USE db` picks the database of the statements that follow.
//!
//! A connection that breaks is opened again once, at the next command. Node commands
//! wait for their effect (`node_commands`).
//!
//! `rndb_mgm` without `-c` runs the cluster in its own process (`LocalCluster`: the
//! management server and data nodes over an in-process network) and this shell
//! against it, holding the cluster: its API node connects at once (SHOW lists it), and
//! START brings back nodes whose process ended.

use crate::input::{self, Kind};
use crate::shell::{DEFAULT_PROMPT, Outcome, Runner, print_err, print_out};
use rndb::cluster::client::{ConnectString, MgmConnection};
use rndb::cluster::local::LocalCluster;
use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_session::RemoteSession;
use rndb::transport::Role;
use std::time::Duration;

/// How long connecting to the management server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The management client of one management server.
pub struct RemoteShell {
    cs: ConnectString,
    /// The connectstring as given (for the data nodes' connection).
    cs_text: String,
    conn: Option<MgmConnection>,
    /// The SQL session on the data nodes, once a statement needed them (it keeps an
    /// open BEGIN ... COMMIT transaction).
    pub(crate) data: Option<RemoteSession>,
    database: String,
    pub prompt: String,
    /// SOURCE files being run (nesting).
    depth: usize,
    /// The cluster this shell started in its own process, if it did.
    pub(crate) local: Option<LocalCluster>,
    /// What completion knows, and whether a statement changed it since.
    names: crate::repl::Names,
    names_stale: bool,
}

impl RemoteShell {
    /// Connects now (an unreachable server is an error naming the connectstring).
    pub fn connect(connectstring: &str) -> Result<RemoteShell, String> {
        let cs = ConnectString::parse(connectstring).map_err(|e| e.message)?;
        let conn = MgmConnection::open(&cs, Role::Api, CONNECT_TIMEOUT).map_err(|e| e.message)?;
        Ok(RemoteShell {
            cs,
            cs_text: connectstring.to_string(),
            conn: Some(conn),
            data: None,
            database: "test".to_string(),
            prompt: DEFAULT_PROMPT.to_string(),
            depth: 0,
            local: None,
            names: crate::repl::Names::default(),
            names_stale: true,
        })
    }

    /// The shell of a cluster it started in this process (module notes): its API node
    /// connects now.
    pub fn in_process(cluster: LocalCluster, database: &str) -> Result<RemoteShell, String> {
        let cs = cluster.connectstring();
        let mut shell = RemoteShell::connect(&cs)?;
        let api = cluster
            .connect(CONNECT_TIMEOUT)
            .map_err(|e| rndb::sql::render_error(&e))?;
        shell.data = Some(RemoteSession::new(std::sync::Arc::new(api)));
        shell.database = database.to_string();
        shell.local = Some(cluster);
        Ok(shell)
    }

    /// The cluster this shell started, to shut it down after the shell.
    pub fn take_local(&mut self) -> Option<LocalCluster> {
        self.data = None;
        self.local.take()
    }

    pub fn connectstring(&self) -> &ConnectString {
        &self.cs
    }

    /// Sends one management command; its output or its error line.
    pub(crate) fn command(&mut self, text: &str) -> Result<String, String> {
        for attempt in 0..2 {
            if self.conn.is_none() {
                match MgmConnection::open(&self.cs, Role::Api, CONNECT_TIMEOUT) {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => return Err(e.message),
                }
            }
            let Some(c) = self.conn.as_mut() else {
                continue;
            };
            match c.command(text) {
                Ok(t) => return Ok(t),
                // The server refused the command: its message.
                Err(e) if e.code != 4009 => return Err(e.message),
                Err(e) => {
                    self.conn = None;
                    if attempt == 1 {
                        return Err(e.message);
                    }
                }
            }
        }
        Err("management server connection lost".into())
    }

    /// Runs one SQL statement on the data nodes; its output, or the error as the
    /// mysql client prints it.
    fn sql(&mut self, text: &str) -> Result<String, String> {
        let stmt = text.trim().trim_end_matches(';').trim();
        let words: Vec<&str> = stmt.split_whitespace().collect();
        if words.len() == 2 && words[0].eq_ignore_ascii_case("USE") {
            self.database = words[1].trim_matches('`').to_string();
            self.names_stale = true;
            return Ok("Database changed".into());
        }
        if words.first().is_some_and(|w| {
            ["CREATE", "DROP", "ALTER", "RENAME", "TRUNCATE"]
                .iter()
                .any(|d| w.eq_ignore_ascii_case(d))
        }) {
            self.names_stale = true;
        }
        if self.data.is_none() {
            let c = RemoteCluster::connect(&self.cs_text, CONNECT_TIMEOUT)
                .map_err(|e| rndb::sql::render_error(&e))?;
            self.data = Some(RemoteSession::new(std::sync::Arc::new(c)));
        }
        let Some(d) = self.data.as_mut() else {
            return Err("no data node connection".into());
        };
        d.execute(&self.database, stmt)
            .map_err(|e| rndb::sql::render_error(&e))
    }

    fn source(&mut self, path: &str) -> Outcome {
        let Some(text) = crate::shell::read_source_file(path, self.depth) else {
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

impl Runner for RemoteShell {
    fn run(&mut self, text: &str) -> Outcome {
        let text = text.trim();
        if text.is_empty() {
            return Outcome::Ok;
        }
        match input::classify(text) {
            Kind::Quit => Outcome::Quit,
            Kind::Help(topic) => crate::shell::print_help(topic.as_deref()),
            Kind::Mgm => self.node_command(text.trim_end_matches(';')),
            Kind::Sql => match self.sql(text) {
                Ok(t) => {
                    print_out(&t);
                    Outcome::Ok
                }
                Err(e) => {
                    print_err(&e);
                    Outcome::Failed
                }
            },
            Kind::Source(path) => self.source(&path),
            Kind::Prompt(p) => {
                self.prompt = match p {
                    Some(p) => format!("{} ", p.trim_matches(|c| c == '"' || c == '\'').trim_end()),
                    None => DEFAULT_PROMPT.to_string(),
                };
                Outcome::Ok
            }
            Kind::Connect if self.local.is_some() => {
                print_err(
                    "CONNECT: this client runs the cluster in its own process; to manage another cluster, start rndb_mgm with -c host:port (rndb_mgmd's address)",
                );
                Outcome::Failed
            }
            Kind::Connect => {
                let target = text
                    .trim_end_matches(';')
                    .split_whitespace()
                    .nth(1)
                    .map(str::to_string);
                let Some(target) = target else {
                    print_err("CONNECT needs a connectstring: CONNECT host[:port]");
                    return Outcome::Failed;
                };
                match RemoteShell::connect(&target) {
                    Ok(s) => {
                        let prompt = std::mem::take(&mut self.prompt);
                        *self = s;
                        self.prompt = prompt;
                        print_out(&format!("Connected to Management Server at: {target}"));
                        Outcome::Ok
                    }
                    Err(e) => {
                        print_err(&e);
                        Outcome::Failed
                    }
                }
            }
            Kind::Unknown => {
                let hint = input::suggestion(text)
                    .map(|s| format!(" Did you mean {s}?"))
                    .unwrap_or_default();
                print_err(&format!(
                    "Invalid command: {}.{hint} Type HELP for help.",
                    rndb::mgm::parse::shorten(text)
                ));
                Outcome::Failed
            }
        }
    }
}

impl crate::repl::Interactive for RemoteShell {
    fn banner(&self) -> String {
        let head = "-- rndb Cluster -- Management Client --";
        match &self.local {
            Some(local) => format!(
                "{head}\nCluster in this process: data nodes {} ({}), management server at {}. Type HELP for help; SQL statements end with ';'.",
                local
                    .config()
                    .data_nodes
                    .iter()
                    .map(|n| n.node_id.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                rndb::mgm::VERSION,
                local.connectstring()
            ),
            None => {
                let (host, port) = &self.cs.hosts[0];
                format!("{head}\nConnected to Management Server at: {host}:{port}")
            }
        }
    }

    fn names(&mut self) -> crate::repl::Names {
        if self.names_stale {
            self.names = self.fetch_names();
            self.names_stale = false;
        }
        self.names.clone()
    }

    fn prompt(&self) -> String {
        self.prompt.clone()
    }
}

impl RemoteShell {
    /// What completion knows, asked of the cluster: the node ids from SHOW, the tables
    /// from the data nodes (when this shell has its SQL connection), at most
    /// [`MAX_COMPLETION_DATABASES`] databases.
    fn fetch_names(&mut self) -> crate::repl::Names {
        let mut names = crate::repl::Names {
            current_db: self.database.clone(),
            ..Default::default()
        };
        if let Ok(show) = self.command("SHOW") {
            let mut section = "";
            for line in show.lines() {
                if line.starts_with('[') {
                    section = line;
                } else if let Some(id) = line
                    .strip_prefix("id=")
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|d| d.parse::<u32>().ok())
                {
                    if section.contains("(NDB)") {
                        names.data_nodes.push(id);
                    } else if section.contains("(API)") {
                        names.api_nodes.push(id);
                    }
                }
            }
        }
        let Some(d) = self.data.as_mut() else {
            return names;
        };
        let cells = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with("| "))
                .skip(1)
                .map(|l| l.trim_matches('|').trim().to_string())
                .collect()
        };
        let databases = d
            .execute(&self.database, "SHOW DATABASES")
            .map(|t| cells(&t))
            .unwrap_or_default();
        for db in databases
            .into_iter()
            .filter(|db| !rndb::sql::is_virtual_database(db))
            .take(MAX_COMPLETION_DATABASES)
        {
            let tables = d
                .execute(
                    &db,
                    &format!("SHOW TABLES FROM `{}`", db.replace('`', "``")),
                )
                .map(|t| cells(&t))
                .unwrap_or_default();
            names
                .tables
                .insert(db, tables.into_iter().map(|t| (t, Vec::new())).collect());
        }
        names
    }
}

/// Databases whose tables completion asks for.
const MAX_COMPLETION_DATABASES: usize = 64;
