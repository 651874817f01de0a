//! Interactive use (standard input is a terminal): rustyline with a history file kept
//! across runs, completion of command words, node ids, parameter names, table, index and
//! ndbinfo table names, hints (from history, else the syntax of the command being typed),
//! Ctrl-C to cancel the line (or the open SQL statement), Ctrl-D to quit.
//!
//! SQL statements continue over lines until `;` with the prompt `       -> `; the history
//! gets whole commands (a multi-line statement as one line). Ctrl-C while a command runs
//! does not kill the client (which would lose the embedded cluster's data): the command
//! cannot be cancelled, so it completes and a note says so.

use crate::input::{SQL_WORDS, Splitter};
use crate::shell::{Outcome, Runner};
use rndb::api::ClusterInner;
use rndb::config::{Section, params_of};
use rndb::mgm::parse::{FIRST_WORDS, NODE_VERBS, REPORTS};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::{Hinter, HistoryHinter};
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Editor, Helper};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Continuation prompt: the arrow ends where `rndb_mgm> ` ends.
pub const CONTINUATION: &str = "       -> ";

const SHELL_FIRST: &[&str] = &["HELP", "QUIT", "EXIT", "SOURCE", "PROMPT"];
const SQL_KEYWORDS: &[&str] = &[
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "ORDER",
    "HAVING",
    "LIMIT",
    "INTO",
    "VALUES",
    "TABLE",
    "TABLES",
    "INDEX",
    "DATABASE",
    "DATABASES",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "AS",
    "ON",
    "JOIN",
    "LEFT",
    "DISTINCT",
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "ASC",
    "DESC",
    "PRIMARY",
    "KEY",
    "ENGINE=ndbcluster",
    "TRANSACTION",
];
const SEVERITIES: &[&str] = &[
    "ALERT", "CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "ALL",
];

/// What completion knows of the cluster: node ids, the current database, and each
/// database's tables with their indexes. A shell gives them again after each command
/// ([`Interactive::names`]).
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub data_nodes: Vec<u32>,
    pub api_nodes: Vec<u32>,
    pub current_db: String,
    /// Database -> its tables, each with its index names.
    pub tables: BTreeMap<String, Vec<(String, Vec<String>)>>,
}

impl Names {
    /// The names of a cluster whose dictionary is in this process.
    pub fn of_cluster(cluster: &ClusterInner, current_db: &str) -> Names {
        let mut tables: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
        for t in cluster.dict.read().all().iter().filter(|t| !t.hidden) {
            tables.entry(t.database.clone()).or_default().push((
                t.def.name.clone(),
                t.def.indexes.iter().map(|i| i.name.clone()).collect(),
            ));
        }
        Names {
            data_nodes: cluster.data_nodes.iter().map(|n| n.node_id).collect(),
            api_nodes: cluster.api_node_ids().to_vec(),
            current_db: current_db.to_string(),
            tables,
        }
    }

    fn tables_of(&self, db: &str) -> &[(String, Vec<String>)] {
        self.tables
            .iter()
            .find(|(d, _)| d.eq_ignore_ascii_case(db))
            .map_or(&[], |(_, t)| t.as_slice())
    }
}

/// A shell the interactive loop runs: embedded, or against a management server.
pub trait Interactive: Runner {
    /// The lines printed before the first prompt.
    fn banner(&self) -> String;
    /// What completion knows now.
    fn names(&mut self) -> Names;
    /// The prompt (`PROMPT` changes it).
    fn prompt(&self) -> String;
    /// Called once before the first prompt.
    fn set_interactive(&mut self) {}
}

/// Completion, hints and hint colour for the editor.
pub struct MgmHelper {
    names: Names,
    history_hints: HistoryHinter,
}

impl MgmHelper {
    pub fn new(names: Names) -> MgmHelper {
        MgmHelper {
            names,
            history_hints: HistoryHinter::new(),
        }
    }

    /// Completes with `names` from now on.
    pub fn set_names(&mut self, names: Names) {
        self.names = names;
    }

    fn data_ids(&self) -> Vec<String> {
        self.names.data_nodes.iter().map(u32::to_string).collect()
    }

    /// Table, index and database names for SQL completion (`db.` prefix: that database's).
    fn sql_names(&self, word: &str) -> Vec<String> {
        let current = self.names.current_db.clone();
        let mut out = Vec::new();
        if let Some((db, _)) = word.split_once('.') {
            if db.eq_ignore_ascii_case("ndbinfo") {
                out.extend(
                    rndb::ndbinfo::table_names()
                        .iter()
                        .map(|t| format!("{db}.{t}")),
                );
            } else {
                out.extend(
                    self.names
                        .tables_of(db)
                        .iter()
                        .map(|(t, _)| format!("{db}.{t}")),
                );
            }
            return out;
        }
        for (t, indexes) in self.names.tables_of(&current) {
            out.push(t.clone());
            out.extend(indexes.iter().cloned());
        }
        if current.eq_ignore_ascii_case("ndbinfo") {
            out.extend(rndb::ndbinfo::table_names().iter().map(|t| t.to_string()));
        }
        out.extend(
            rndb::ndbinfo::table_names()
                .iter()
                .map(|t| format!("ndbinfo.{t}")),
        );
        let mut dbs: Vec<String> = self.names.tables.keys().cloned().collect();
        dbs.extend(["ndbinfo".to_string(), "information_schema".to_string()]);
        if !current.is_empty() {
            dbs.push(current);
        }
        dbs.sort();
        dbs.dedup();
        out.extend(dbs);
        out
    }

    /// Candidates for the word after `prev` (upper-cased earlier words).
    fn candidates(&self, prev: &[String], word: &str) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let p: Vec<&str> = prev.iter().map(String::as_str).collect();
        let is_target = |w: &str| w == "ALL" || w.chars().all(|c| c.is_ascii_digit());
        match p.as_slice() {
            [] => {
                let mut c = s(FIRST_WORDS);
                c.extend(s(SHELL_FIRST));
                c.extend(s(SQL_WORDS));
                c.extend(self.data_ids());
                c.sort();
                c.dedup();
                c
            }
            [t] if is_target(t) => s(NODE_VERBS),
            [t, "REPORT"] if is_target(t) => s(REPORTS),
            [t, "DUMP"] if is_target(t) => s(&["1000"]),
            [t, "RESTART", ..] if is_target(t) => s(&["-n", "-i", "-a", "-f"]),
            [t, "STOP", ..] if is_target(t) => s(&["-a", "-f"]),
            ["CLUSTERLOG"] => s(&["ON", "OFF", "TOGGLE", "INFO"]),
            ["CLUSTERLOG", "ON" | "OFF" | "TOGGLE", ..] => s(SEVERITIES),
            ["ENTER" | "EXIT"] => s(&["SINGLE"]),
            ["ENTER" | "EXIT", "SINGLE"] => s(&["USER"]),
            ["ENTER" | "EXIT", "SINGLE", "USER"] => s(&["MODE"]),
            ["ENTER", "SINGLE", "USER", "MODE"] => {
                self.names.api_nodes.iter().map(u32::to_string).collect()
            }
            ["ROLLING"] => s(&["RESTART"]),
            ["PURGE"] => s(&["STALE"]),
            ["PURGE", "STALE"] => s(&["SESSIONS"]),
            ["SET"] if !word.starts_with('@') => params_of(Section::Ndbd)
                .map(|p| p.name.to_string())
                .collect(),
            ["HELP"] => {
                let mut c = s(FIRST_WORDS);
                c.extend(s(NODE_VERBS));
                c.extend(s(&["SQL", "QUIT", "SOURCE", "PROMPT"]));
                c
            }
            [first, ..] if SQL_WORDS.contains(first) => {
                let mut c = self.sql_names(word);
                // after FROM, INTO, TABLE... only names make sense
                let names_only = p.last().is_some_and(|w| {
                    matches!(
                        *w,
                        "FROM"
                            | "JOIN"
                            | "INTO"
                            | "UPDATE"
                            | "TABLE"
                            | "DESCRIBE"
                            | "DESC"
                            | "USE"
                            | "TRUNCATE"
                            | "INDEX"
                            | "ON"
                    )
                });
                if !names_only && !word.contains('.') {
                    c.extend(s(SQL_KEYWORDS));
                }
                c
            }
            _ => Vec::new(),
        }
    }
}

/// Keeps the user's case for keywords: `sta` completes to `status`.
fn in_case_of(word: &str, candidate: &str) -> String {
    let keyword = candidate
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '=');
    if keyword && !word.is_empty() && word.chars().all(|c| !c.is_ascii_uppercase()) {
        candidate.to_ascii_lowercase()
    } else {
        candidate.to_string()
    }
}

impl Completer for MgmHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '='))
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        let prev: Vec<String> = before[..start]
            .split_whitespace()
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let lw = word.to_ascii_lowercase();
        let mut out: Vec<Pair> = self
            .candidates(&prev, word)
            .into_iter()
            .filter(|c| c.to_ascii_lowercase().starts_with(&lw))
            .map(|c| {
                let r = in_case_of(word, &c);
                Pair {
                    display: r.clone(),
                    replacement: r,
                }
            })
            .collect();
        out.sort_by(|a, b| a.display.cmp(&b.display));
        out.dedup_by(|a, b| a.display == b.display);
        Ok((start, out))
    }
}

/// The syntax still to type after a known command start (shown when history has none).
fn syntax_hint(line: &str) -> Option<String> {
    let up = line.to_ascii_uppercase();
    let words: Vec<&str> = up.split_whitespace().collect();
    let ends_space = line.ends_with(' ');
    let hint = match (words.as_slice(), ends_space) {
        (["ENTER"], true) => "SINGLE USER MODE <api node id>",
        (["ENTER", "SINGLE", "USER", "MODE"], true) => "<api node id>",
        (["EXIT"], true) => "SINGLE USER MODE",
        (["ROLLING"], true) => "RESTART",
        (["CLUSTERLOG"], true) => "ON|OFF|TOGGLE [severity] | INFO",
        (["SET"], true) => "<Parameter>=<value>",
        ([t, "RESTART"], true) if t.parse::<u32>().is_ok() || *t == "ALL" => "[-n] [-i] [-a] [-f]",
        ([t, "REPORT"], true) if t.parse::<u32>().is_ok() || *t == "ALL" => {
            "MemoryUsage|EventLog|DiskPageBuffer|Fragmentation"
        }
        ([t, "DUMP"], true) if t.parse::<u32>().is_ok() || *t == "ALL" => "1000",
        ([t], true) if t.parse::<u32>().is_ok() || *t == "ALL" => {
            "STATUS|REPORT|DUMP|RESTART|STOP|START"
        }
        _ => return None,
    };
    Some(hint.to_string())
}

impl Hinter for MgmHelper {
    type Hint = String;

    fn hint(&self, line: &str, pos: usize, ctx: &Context<'_>) -> Option<String> {
        if pos < line.len() {
            return None;
        }
        self.history_hints
            .hint(line, pos, ctx)
            .or_else(|| syntax_hint(line))
    }
}

impl Highlighter for MgmHelper {
    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        Cow::Owned(format!("\x1b[2m{hint}\x1b[0m"))
    }
}

impl Validator for MgmHelper {}

impl Helper for MgmHelper {}

/// Where the history is kept: `--history-file`, else `$HOME/.rndb_mgm_history`, else in
/// the data directory.
pub fn history_path(explicit: Option<PathBuf>, data_dir: &std::path::Path) -> PathBuf {
    explicit
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".rndb_mgm_history"))
        })
        .unwrap_or_else(|| data_dir.join(".rndb_mgm_history"))
}

/// The interactive loop; the exit status.
pub fn run_interactive<S: Interactive>(shell: &mut S, history: PathBuf) -> i32 {
    let config = Config::builder()
        .max_history_size(1000)
        .and_then(|b| b.history_ignore_dups(true))
        .map(|b| {
            b.history_ignore_space(true)
                .completion_type(CompletionType::List)
                .auto_add_history(false)
                .build()
        });
    let editor = config.and_then(Editor::<MgmHelper, DefaultHistory>::with_config);
    let mut rl = match editor {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rndb_mgm: cannot use the terminal: {e}");
            return 1;
        }
    };
    rl.set_helper(Some(MgmHelper::new(shell.names())));
    let _ = rl.load_history(&history);
    shell.set_interactive();
    catch_sigint();
    println!("{}", shell.banner());
    let mut sp = Splitter::new();
    let mut lines: Vec<String> = Vec::new();
    loop {
        let prompt = if sp.pending() {
            CONTINUATION.to_string()
        } else {
            shell.prompt()
        };
        match rl.readline(&prompt) {
            Ok(line) => {
                lines.push(line.clone());
                let cmds = sp.feed(&line);
                if !sp.pending() {
                    let entry = lines.join(" ");
                    lines.clear();
                    if !entry.trim().is_empty() && !entry.starts_with(' ') {
                        let _ = rl.add_history_entry(entry.as_str());
                        // saved after every command: a killed client keeps it
                        let _ = rl.save_history(&history);
                    }
                }
                for cmd in cmds {
                    INTERRUPTED.store(false, Ordering::Relaxed);
                    let outcome = shell.run(&cmd);
                    let names = shell.names();
                    if let Some(h) = rl.helper_mut() {
                        h.set_names(names);
                    }
                    if INTERRUPTED.swap(false, Ordering::Relaxed) {
                        eprintln!(
                            "Ctrl-C: a running command cannot be cancelled; it ran to completion"
                        );
                    }
                    if outcome == Outcome::Quit {
                        return 0;
                    }
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C: cancel the line and any open statement
                sp.reset();
                lines.clear();
            }
            Err(ReadlineError::Eof) => {
                if let Some(cmd) = sp.finish() {
                    let _ = shell.run(&cmd);
                }
                return 0;
            }
            Err(e) => {
                eprintln!("rndb_mgm: cannot read the terminal: {e}");
                return 1;
            }
        }
    }
}

/// Ctrl-C while a command runs (outside the line editor, which reads Ctrl-C as a key).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// A running statement cannot be cancelled (the engine has no KILL QUERY): Ctrl-C must
/// not kill the process and with it the embedded cluster's data. It is noted instead.
fn catch_sigint() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rndb::api::Cluster;

    fn names(h: &MgmHelper, line: &str) -> Vec<String> {
        let history = DefaultHistory::new();
        let ctx = Context::new(&history);
        h.complete(line, line.len(), &ctx)
            .expect("complete")
            .1
            .into_iter()
            .map(|p| p.replacement)
            .collect()
    }

    #[test]
    fn completion_follows_a_replaced_cluster() {
        let c = Cluster::embedded_default().expect("start");
        let mut h = MgmHelper::new(Names::of_cluster(c.inner(), "test"));
        assert!(!names(&h, "").contains(&"5".to_string()));
        let cfg = rndb::config::ClusterConfig::embedded(4, 2).expect("config");
        let c4 = Cluster::embedded(cfg).expect("start 4");
        h.set_names(Names::of_cluster(c4.inner(), "test"));
        let all = names(&h, "");
        for id in ["2", "3", "4", "5"] {
            assert!(all.contains(&id.to_string()), "{id}: {all:?}");
        }
    }

    #[test]
    fn completion() {
        let c = Cluster::embedded_default().expect("start");
        let mut s = rndb::sql::Session::new(c.ndb("test"));
        s.execute("CREATE TABLE t1 (id INT PRIMARY KEY, a INT, INDEX ix_a (a)) ENGINE=ndbcluster")
            .expect("create");
        let mut h = MgmHelper::new(Names::of_cluster(c.inner(), "test"));
        assert_eq!(
            names(&h, "ALL STA"),
            vec!["STATUS", "START"]
                .into_iter()
                .rev()
                .map(String::from)
                .collect::<Vec<_>>()
        );
        assert_eq!(names(&h, "all sta"), vec!["start", "status"]);
        assert_eq!(names(&h, "2 REPORT m"), vec!["MemoryUsage"]);
        assert_eq!(names(&h, "ALL REPORT diskp"), vec!["DiskPageBuffer"]);
        assert_eq!(
            names(&h, "2 REPORT "),
            vec!["DiskPageBuffer", "EventLog", "Fragmentation", "MemoryUsage"]
        );
        assert_eq!(names(&h, "SH"), vec!["SHOW", "SHUTDOWN"]);
        assert_eq!(names(&h, "CLUSTERLOG O"), vec!["OFF", "ON"]);
        assert_eq!(
            names(&h, "ENTER SINGLE USER MODE "),
            vec!["4", "5", "6", "7"]
        );
        assert_eq!(
            names(&h, "SET DiskPage"),
            vec!["DiskPageBufferEntries", "DiskPageBufferMemory"]
        );
        assert_eq!(names(&h, "SELECT * FROM t"), vec!["t1", "test"]);
        assert_eq!(names(&h, "SELECT * FROM t1 wh"), vec!["where"]);
        assert_eq!(names(&h, "DROP INDEX ix"), vec!["ix_a"]);
        assert_eq!(
            names(&h, "SELECT * FROM ndbinfo.mem"),
            vec!["ndbinfo.memory_per_fragment", "ndbinfo.memoryusage"]
        );
        h.set_names(Names::of_cluster(c.inner(), "ndbinfo"));
        assert_eq!(names(&h, "SELECT * FROM no"), vec!["nodes"]);
        assert!(names(&h, "").contains(&"2".to_string()), "node ids");
        assert_eq!(
            syntax_hint("ENTER ").as_deref(),
            Some("SINGLE USER MODE <api node id>")
        );
        assert_eq!(
            syntax_hint("2 RESTART ").as_deref(),
            Some("[-n] [-i] [-a] [-f]")
        );
        assert_eq!(
            syntax_hint("ALL REPORT ").as_deref(),
            Some("MemoryUsage|EventLog|DiskPageBuffer|Fragmentation")
        );
        assert_eq!(syntax_hint("SELECT "), None);
    }
}
