//! The ndb_mgm command grammar: [`parse`] turns one command line into a [`Command`]
//! (pure, no cluster needed), with ndb_mgm's rules: keywords case-insensitive, a leading
//! node id or `ALL` for node commands, report names prefix-matched (`ALL REPORT mem`).
//!
//! Invariant: `parse` never panics and every error it returns is one line naming what was
//! wrong, with the nearest valid command when there is one.

use super::log::Severity;
use super::mgm_error;
use crate::error::{NdbError, Result};

/// Which nodes a node command is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    All,
    Node(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    MemoryUsage,
    EventLog,
    /// The DiskPageBufferMemory page cache and the advisor's predictions.
    DiskPageBuffer,
    /// Free and reclaimable memory and extents per table (chkfrag).
    Fragmentation,
}

impl Report {
    fn from_name(name: &str) -> Option<Report> {
        match name {
            "MemoryUsage" => Some(Report::MemoryUsage),
            "EventLog" => Some(Report::EventLog),
            "DiskPageBuffer" => Some(Report::DiskPageBuffer),
            "Fragmentation" => Some(Report::Fragmentation),
            _ => None,
        }
    }
}

/// `CLUSTERLOG ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterLogCmd {
    Info,
    /// ON/OFF/TOGGLE: None = the whole log, else these severities. `Some(true)` = ON,
    /// `Some(false)` = OFF, `None` = TOGGLE.
    Set(Option<bool>, Vec<Severity>),
}

/// `RESTART` / `STOP` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// -n: do not start again (wait for START).
    pub nostart: bool,
    /// -i: initial (wipe the node's file system).
    pub initial: bool,
    /// -a: abort transactions without waiting.
    pub abort: bool,
    /// -f: force, even if the cluster becomes incomplete.
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help(Option<String>),
    Show,
    Status(Target),
    Report(Target, Report),
    Dump(Target, Vec<u32>),
    ClusterLog(ClusterLogCmd),
    EnterSingleUser(u32),
    ExitSingleUser,
    Stop(Target, Flags),
    Start(Target),
    Restart(Target, Flags),
    Shutdown,
    RollingRestart,
    /// `SET <Parameter>=<value>` (data node parameter, all data nodes).
    Set {
        name: String,
        value: String,
    },
    /// `START BACKUP ...` / `ABORT BACKUP ...`.
    Backup(String),
    /// `CREATE NODEGROUP ...` / `DROP NODEGROUP ...`.
    NodeGroup(String),
    PurgeStaleSessions,
}

/// First words of the management commands (for classification and suggestions).
pub const FIRST_WORDS: &[&str] = &[
    "HELP",
    "SHOW",
    "ALL",
    "CLUSTERLOG",
    "ENTER",
    "EXIT",
    "SHUTDOWN",
    "ROLLING",
    "SET",
    "PURGE",
];

/// Verbs after `<id>` / `ALL`.
pub const NODE_VERBS: &[&str] = &["STATUS", "REPORT", "DUMP", "STOP", "START", "RESTART"];

/// Report names (`REPORT <name>`), as ndb_mgm spells them.
pub const REPORTS: &[&str] = &["MemoryUsage", "EventLog", "DiskPageBuffer", "Fragmentation"];

/// Whole command forms, for "did you mean".
const FORMS: &[&str] = &[
    "SHOW",
    "HELP",
    "ALL STATUS",
    "ALL REPORT MemoryUsage",
    "ALL REPORT DiskPageBuffer",
    "ALL REPORT Fragmentation",
    "CLUSTERLOG INFO",
    "CLUSTERLOG ON",
    "CLUSTERLOG OFF",
    "ENTER SINGLE USER MODE",
    "EXIT SINGLE USER MODE",
    "SHUTDOWN",
    "ROLLING RESTART",
    "PURGE STALE SESSIONS",
];

/// Edit distance with transpositions (optimal string alignment), case-insensitive, on
/// at most 64 characters (commands are short): `SHWO` is one edit from `SHOW`.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(64).map(|c| c.to_ascii_uppercase()).collect();
    let b: Vec<char> = b.chars().take(64).map(|c| c.to_ascii_uppercase()).collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate nearest to `word` when it is close enough to be a typo.
pub fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if word.is_empty() || word.chars().count() > 64 {
        return None;
    }
    let best = candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .min_by_key(|(d, _)| *d)?;
    let limit = (best.1.len() / 3).max(1);
    // a prefix of a candidate also counts ("SHUT" -> SHUTDOWN)
    let prefix = candidates.iter().find(|c| {
        word.len() >= 2
            && c.to_ascii_uppercase()
                .starts_with(&word.to_ascii_uppercase())
    });
    if best.0 <= limit {
        Some(best.1)
    } else {
        prefix.copied()
    }
}

/// Shortens user text for an error message (control characters escaped).
pub fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == MAX {
            out.push_str(&format!("... ({} bytes)", text.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn invalid(command: &str, hint: Option<String>) -> NdbError {
    let hint = hint
        .map(|h| format!(" Did you mean {h}?"))
        .unwrap_or_default();
    mgm_error(format!(
        "Invalid command: {}.{hint} Type HELP for help.",
        shorten(command.trim())
    ))
}

/// Parses one management command; `Ok(None)` for an empty line or a comment (`#`).
pub fn parse(command: &str) -> Result<Option<Command>> {
    let text = command.trim().trim_end_matches(';').trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let up: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let rest_is = |from: usize, expect: &[&str]| -> bool {
        up.len() == from + expect.len() && up[from..].iter().zip(expect).all(|(a, b)| a == b)
    };
    let cmd = match up[0].as_str() {
        "HELP" | "?" => Command::Help((words.len() > 1).then(|| words[1..].join(" "))),
        "SHOW" if words.len() == 1 => Command::Show,
        "SHOW" => {
            return Err(mgm_error(format!(
                "Invalid command: {}. SHOW takes no arguments (SQL's SHOW statements are run by the shell, ending with ';'). Type HELP for help.",
                shorten(text)
            )));
        }
        "SHUTDOWN" if words.len() == 1 => Command::Shutdown,
        "ROLLING" if rest_is(1, &["RESTART"]) => Command::RollingRestart,
        "ENTER" if up.len() == 5 && up[1..4] == ["SINGLE", "USER", "MODE"] => {
            match words[4].parse::<u32>() {
                Ok(id) => Command::EnterSingleUser(id),
                Err(_) => {
                    return Err(mgm_error(format!(
                        "Invalid node id: {}. ENTER SINGLE USER MODE takes the id of an API node.",
                        shorten(words[4])
                    )));
                }
            }
        }
        "ENTER" if rest_is(1, &["SINGLE", "USER", "MODE"]) => {
            return Err(mgm_error(
                "ENTER SINGLE USER MODE needs the id of the API node that keeps access, e.g. ENTER SINGLE USER MODE 4",
            ));
        }
        "EXIT" if rest_is(1, &["SINGLE", "USER", "MODE"]) => Command::ExitSingleUser,
        "CLUSTERLOG" => return parse_clusterlog(text, &up).map(Some),
        "SET" => return parse_set(text).map(Some),
        "PURGE" if rest_is(1, &["STALE", "SESSIONS"]) => Command::PurgeStaleSessions,
        "START" | "ABORT" if up.get(1).is_some_and(|w| w == "BACKUP") => {
            Command::Backup(text.to_string())
        }
        "CREATE" | "DROP" if up.get(1).is_some_and(|w| w == "NODEGROUP") => {
            Command::NodeGroup(text.to_string())
        }
        "ALL" => return parse_node(text, Target::All, &words, &up).map(Some),
        first => match first.parse::<u32>() {
            Ok(id) => return parse_node(text, Target::Node(id), &words, &up).map(Some),
            Err(_) => return Err(invalid(text, nearest_form(text, &up[0]))),
        },
    };
    Ok(Some(cmd))
}

/// The command the user most likely meant: a whole form close to the text, else a form
/// starting with the same (valid) first word (`ROLLING` -> `ROLLING RESTART`), else the
/// nearest first word.
fn nearest_form(text: &str, first: &str) -> Option<String> {
    let close = FORMS
        .iter()
        .find(|f| distance(text, f) <= (f.len() / 4).max(1));
    let same_start = || {
        FORMS
            .iter()
            .filter(|f| f.split(' ').next() == Some(first))
            .min_by_key(|f| distance(text, f))
    };
    close
        .or_else(same_start)
        .copied()
        .or_else(|| suggest(first, FIRST_WORDS))
        .map(str::to_string)
}

fn parse_node(text: &str, target: Target, words: &[&str], up: &[String]) -> Result<Command> {
    let name = match target {
        Target::All => "ALL".to_string(),
        Target::Node(id) => id.to_string(),
    };
    let Some(verb) = up.get(1) else {
        return Err(mgm_error(format!(
            "Invalid command: {}. A node command needs a verb: {name} STATUS, {name} REPORT MemoryUsage, {name} DUMP 1000, {name} RESTART... Type HELP for help.",
            shorten(text)
        )));
    };
    let args = &words[2..];
    let no_args = |cmd: Command| -> Result<Command> {
        if args.is_empty() {
            Ok(cmd)
        } else {
            Err(mgm_error(format!(
                "Invalid command: {}. {verb} takes no arguments. Type HELP {verb} for help.",
                shorten(text)
            )))
        }
    };
    match verb.as_str() {
        "STATUS" => no_args(Command::Status(target)),
        "START" => no_args(Command::Start(target)),
        "REPORT" => {
            let Some(what) = args.first() else {
                return Err(mgm_error(format!(
                    "Missing report type: {name} REPORT <report>, <report> = {}",
                    REPORTS.join(" | ")
                )));
            };
            let matches: Vec<&str> = REPORTS
                .iter()
                .filter(|r| {
                    r.to_ascii_uppercase()
                        .starts_with(&what.to_ascii_uppercase())
                })
                .copied()
                .collect();
            match (matches.as_slice(), args.len()) {
                ([one], 1) => Report::from_name(one)
                    .map(|r| Command::Report(target, r))
                    .ok_or_else(|| mgm_error(format!("Unknown report type: {one}"))),
                _ => Err(mgm_error(format!(
                    "Unknown report type: {}. Known reports: {}",
                    shorten(&args.join(" ")),
                    REPORTS.join(", ")
                ))),
            }
        }
        "DUMP" => {
            if args.is_empty() {
                return Err(mgm_error(format!(
                    "Missing dump code: {name} DUMP <code> [args], e.g. {name} DUMP 1000"
                )));
            }
            let mut codes = Vec::new();
            for a in args {
                let v = if let Some(h) = a.strip_prefix("0x").or_else(|| a.strip_prefix("0X")) {
                    u32::from_str_radix(h, 16)
                } else {
                    a.parse::<u32>()
                };
                match v {
                    Ok(v) => codes.push(v),
                    Err(_) => {
                        return Err(mgm_error(format!(
                            "Invalid dump argument: {}. DUMP takes 32-bit numbers (decimal or 0x hex)",
                            shorten(a)
                        )));
                    }
                }
            }
            Ok(Command::Dump(target, codes))
        }
        "STOP" | "RESTART" => {
            let allowed: &[&str] = if verb == "STOP" {
                &["-a", "-f"]
            } else {
                &["-n", "-i", "-a", "-f"]
            };
            let mut flags = Flags::default();
            for a in args {
                let f = a.to_ascii_lowercase();
                if !allowed.contains(&f.as_str()) {
                    return Err(mgm_error(format!(
                        "Invalid option: {} for {verb}. Allowed options: {}. Type HELP {verb} for help.",
                        shorten(a),
                        allowed.join(" ")
                    )));
                }
                match f.as_str() {
                    "-n" => flags.nostart = true,
                    "-i" => flags.initial = true,
                    "-a" => flags.abort = true,
                    _ => flags.force = true,
                }
            }
            Ok(if verb == "STOP" {
                Command::Stop(target, flags)
            } else {
                Command::Restart(target, flags)
            })
        }
        "CLUSTERLOG" => Err(mgm_error(
            "Per-node log levels (<id> CLUSTERLOG <category>=<level>) are not supported; use CLUSTERLOG ON|OFF|TOGGLE [severity] or CLUSTERLOG INFO",
        )),
        other => {
            let hint = suggest(other, NODE_VERBS).map(|v| format!("{name} {v}"));
            Err(invalid(text, hint))
        }
    }
}

fn parse_clusterlog(text: &str, up: &[String]) -> Result<Command> {
    let usage = || {
        mgm_error(format!(
            "Invalid command: {}. Use CLUSTERLOG ON|OFF|TOGGLE [ALERT|CRITICAL|ERROR|WARNING|INFO|DEBUG...] or CLUSTERLOG INFO",
            shorten(text)
        ))
    };
    let Some(sub) = up.get(1) else {
        return Err(usage());
    };
    let mode = match sub.as_str() {
        "INFO" if up.len() == 2 => return Ok(Command::ClusterLog(ClusterLogCmd::Info)),
        "ON" => Some(true),
        "OFF" => Some(false),
        "TOGGLE" => None,
        _ => return Err(usage()),
    };
    let mut sevs = Vec::new();
    for w in &up[2..] {
        let s = if w == "ALL" {
            sevs.extend(Severity::ALL);
            continue;
        } else {
            Severity::from_name(w)
        };
        match s {
            Some(s) => sevs.push(s),
            None => {
                return Err(mgm_error(format!(
                    "Invalid severity level: {}. Valid levels: ALERT CRITICAL ERROR WARNING INFO DEBUG ALL",
                    shorten(w)
                )));
            }
        }
    }
    Ok(Command::ClusterLog(ClusterLogCmd::Set(mode, sevs)))
}

/// Whether `SET ...` text is a configuration change (`SET <Parameter>=<value>` with an
/// NDB-style parameter name) rather than SQL's SET: the word after SET is a known data
/// node parameter (case-insensitive), or is written like one (starts with an upper-case
/// letter, has a lower-case letter, only letters and digits: `DiskPageBufferMemory`),
/// whatever follows it (so `SET DataMemory` without a value is a management error, not
/// an open SQL statement). SQL's variables are lower-case with underscores, `@user` or
/// `@@system`, or `NAMES`/`TRANSACTION`/scopes.
pub fn is_config_set(text: &str) -> bool {
    let t = text.trim_start();
    let Some(rest) = t
        .get(..3)
        .filter(|w| w.eq_ignore_ascii_case("SET"))
        .map(|_| &t[3..])
    else {
        return false;
    };
    if !rest.starts_with(|c: char| c.is_whitespace()) {
        return false;
    }
    let rest = rest.trim_start();
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let after = &rest[name.len()..];
    if name.is_empty()
        || !(after.is_empty() || after.starts_with(|c: char| c.is_whitespace() || c == '='))
    {
        return false;
    }
    if crate::config::lookup_param_in(crate::config::Section::Ndbd, &name).is_some() {
        return true;
    }
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().any(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

fn parse_set(text: &str) -> Result<Command> {
    let rest = text[3..].trim();
    let Some((name, value)) = rest.split_once('=') else {
        return Err(mgm_error(format!(
            "Invalid command: {}. Use SET <Parameter>=<value>, e.g. SET DiskPageBufferMemory=512M",
            shorten(text)
        )));
    };
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(mgm_error(format!(
            "Invalid command: {}. Use SET <Parameter>=<value>, e.g. SET DiskPageBufferMemory=512M",
            shorten(text)
        )));
    }
    Ok(Command::Set {
        name: name.to_string(),
        value: value.to_string(),
    })
}
