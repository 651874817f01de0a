//! `rndb_mgm -c host:port`: the management client of a distributed cluster. Commands
//! go to the management server (`rndb_mgmd`) over one connection and its answers are
//! printed as ndb_mgm prints them; the same input modes as the embedded shell (`-e`,
//! scripts, the interactive editor). SQL goes to the data nodes (an API connection,
//! `rndb::cluster::remote`, opened at the first statement): DDL reaches every data
//! node, SELECT and SHOW are answered by one; INSERT, REPLACE, UPDATE and DELETE are
//! captured on a data node and applied through a TC (`rndb::cluster::remote_sql`).
//! `USE db` picks the database of the statements that follow.
//!
//! A connection that breaks is opened again once, at the next command.

use crate::input::{self, Kind, Splitter};
use crate::shell::{DEFAULT_PROMPT, Outcome, Runner, print_err, print_out};
use rndb::cluster::client::{ConnectString, MgmConnection};
use rndb::cluster::remote::RemoteCluster;
use rndb::cluster::remote_session::RemoteSession;
use rndb::transport::Role;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
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
    data: Option<RemoteSession>,
    database: String,
    pub prompt: String,
    /// SOURCE files being run (nesting).
    depth: usize,
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
        })
    }

    pub fn connectstring(&self) -> &ConnectString {
        &self.cs
    }

    /// Sends one management command; its output or its error line.
    fn command(&mut self, text: &str) -> Result<String, String> {
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
            return Ok("Database changed".into());
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
            Kind::Mgm | Kind::Help(_) => {
                let shutdown = text
                    .trim_end_matches(';')
                    .trim()
                    .eq_ignore_ascii_case("SHUTDOWN");
                match self.command(text.trim_end_matches(';')) {
                    Ok(t) => {
                        print_out(&t);
                        if shutdown { Outcome::Quit } else { Outcome::Ok }
                    }
                    Err(e) => {
                        print_err(&e);
                        Outcome::Failed
                    }
                }
            }
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

/// The interactive loop against a management server; the exit status.
pub fn run_interactive(shell: &mut RemoteShell, history: std::path::PathBuf) -> i32 {
    let mut rl = match DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rndb_mgm: cannot use the terminal: {e}");
            return 1;
        }
    };
    let _ = rl.load_history(&history);
    println!("-- rndb Cluster -- Management Client --");
    let (host, port) = shell.connectstring().hosts[0].clone();
    println!("Connected to Management Server at: {host}:{port}");
    let mut sp = Splitter::new();
    loop {
        let prompt = shell.prompt.clone();
        match rl.readline(&prompt) {
            Ok(line) => {
                if !line.trim().is_empty() && !line.starts_with(' ') {
                    let _ = rl.add_history_entry(line.as_str());
                    let _ = rl.save_history(&history);
                }
                for cmd in sp.feed(&line) {
                    if shell.run(&cmd) == Outcome::Quit {
                        return 0;
                    }
                }
            }
            Err(ReadlineError::Interrupted) => sp.reset(),
            Err(ReadlineError::Eof) => return 0,
            Err(e) => {
                eprintln!("rndb_mgm: cannot read the terminal: {e}");
                return 1;
            }
        }
    }
}
