//! Turning input text into commands: where a command ends, and whether it is a management
//! command (ndb_mgm's language), a shell command, or SQL.
//!
//! Rules (decided by the first word, case-insensitive):
//! - management: `SHOW` alone, `ALL ...`, `<node id> ...`, `CLUSTERLOG`, `ENTER`,
//!   `EXIT SINGLE USER MODE`, `SHUTDOWN`, `ROLLING`, `PURGE`, `SET <Parameter>=<value>`
//!   with an NDB parameter name ([`rndb::mgm::is_config_set`]), `START|ABORT BACKUP`,
//!   `CREATE|DROP NODEGROUP`. A management command ends at `;` or at the end of the line.
//! - shell: `HELP`, `QUIT`, `EXIT`, `\q`, `SOURCE <file>` / `\. <file>`, `PROMPT`,
//!   `CONNECT`; they end at `;` or the end of the line.
//! - SQL: the statements of the sql module (`SELECT`, `INSERT`, `SHOW TABLES`, `SET @x`,
//!   `USE`...). An SQL statement ends at a `;` outside quotes and comments, so it may span
//!   lines (the mysql client's rule); `USE db` also ends at the end of its line, as in the
//!   mysql client. At the end of the input an unterminated statement runs as it is.
//! - anything else is an unknown command, one line long.
//!
//! Lines starting with `#` or `--` between commands are comments.

use rndb::mgm;

/// First words of SQL statements the sql module runs.
pub const SQL_WORDS: &[&str] = &[
    "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "SET", "WITH", "CREATE", "DROP", "ALTER",
    "TRUNCATE", "USE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "BEGIN", "START", "COMMIT",
    "ROLLBACK", "OPTIMIZE", "ANALYZE", "LOCK", "UNLOCK", "FLUSH",
];

/// Shell commands.
pub const SHELL_WORDS: &[&str] = &["HELP", "QUIT", "EXIT", "SOURCE", "PROMPT", "CONNECT"];

/// What a command is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Mgm,
    Sql,
    Quit,
    Help(Option<String>),
    Source(String),
    Prompt(Option<String>),
    Connect,
    Unknown,
}

fn first_word(text: &str) -> &str {
    let t = text.trim_start();
    let end = t
        .find(|c: char| c.is_whitespace() || c == ';' || c == '(')
        .unwrap_or(t.len());
    if end == 0 && t.starts_with('(') {
        return "(";
    }
    &t[..end]
}

fn words_upper(text: &str) -> Vec<String> {
    text.trim()
        .trim_end_matches(';')
        .split_whitespace()
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Classifies one command's text.
pub fn classify(text: &str) -> Kind {
    let first = first_word(text).to_ascii_uppercase();
    let up = words_upper(text);
    let second = up.get(1).map(String::as_str);
    let rest = || {
        let t = text.trim().trim_end_matches(';').trim();
        t.get(first.len()..)
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
    };
    match first.as_str() {
        "QUIT" | "\\Q" if up.len() == 1 => Kind::Quit,
        "EXIT" if up.len() == 1 => Kind::Quit,
        "EXIT" => Kind::Mgm,
        "HELP" | "?" | "\\H" => Kind::Help(rest()),
        "SOURCE" | "\\." => Kind::Source(rest().unwrap_or_default()),
        "PROMPT" => Kind::Prompt(rest()),
        "CONNECT" => Kind::Connect,
        "SHOW" if up.len() == 1 => Kind::Mgm,
        "SET" if mgm::is_config_set(text) => Kind::Mgm,
        "START" | "ABORT" if second == Some("BACKUP") => Kind::Mgm,
        "CREATE" | "DROP" if second == Some("NODEGROUP") => Kind::Mgm,
        "ALL" | "CLUSTERLOG" | "ENTER" | "SHUTDOWN" | "ROLLING" | "PURGE" => Kind::Mgm,
        "(" => Kind::Sql,
        w if SQL_WORDS.contains(&w) => Kind::Sql,
        w if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) => Kind::Mgm,
        _ => Kind::Unknown,
    }
}

/// The nearest known command word to an unknown one.
pub fn suggestion(text: &str) -> Option<&'static str> {
    let first = first_word(text);
    let all: Vec<&'static str> = mgm::parse::FIRST_WORDS
        .iter()
        .chain(SQL_WORDS)
        .chain(SHELL_WORDS)
        .copied()
        .collect();
    mgm::suggest(first, &all)
}

/// Scanner state inside an SQL statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Scan {
    #[default]
    Code,
    Quote(char),
    BlockComment,
}

/// Splits lines of input into commands (see the module rules).
#[derive(Debug, Default)]
pub struct Splitter {
    /// The open SQL statement (lines so far).
    buf: String,
    scan: Scan,
}

/// The byte index of the `;` ending the statement in `s`, scanning from `state`.
fn find_end(s: &str, state: &mut Scan) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match *state {
            Scan::Quote(q) => {
                if c == b'\\' && q != '`' {
                    i += 1;
                } else if c == q as u8 {
                    if b.get(i + 1) == Some(&(q as u8)) {
                        i += 1; // doubled quote
                    } else {
                        *state = Scan::Code;
                    }
                }
            }
            Scan::BlockComment => {
                if c == b'*' && b.get(i + 1) == Some(&b'/') {
                    *state = Scan::Code;
                    i += 1;
                }
            }
            Scan::Code => match c {
                b'\'' | b'"' | b'`' => *state = Scan::Quote(c as char),
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    *state = Scan::BlockComment;
                    i += 1;
                }
                b'#' => return None,
                b'-' if b.get(i + 1) == Some(&b'-')
                    && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
                {
                    return None;
                }
                b';' => return Some(i),
                _ => {}
            },
        }
        i += 1;
    }
    None
}

impl Splitter {
    pub fn new() -> Splitter {
        Splitter::default()
    }

    /// Whether an SQL statement is open (the next line continues it).
    pub fn pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Forgets the open statement (Ctrl-C).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.scan = Scan::Code;
    }

    /// Takes one line (without its newline); returns the commands it completes.
    pub fn feed(&mut self, line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = line;
        if self.pending() {
            match find_end(rest, &mut self.scan) {
                Some(i) => {
                    self.buf.push_str(&rest[..i]);
                    out.push(std::mem::take(&mut self.buf));
                    self.scan = Scan::Code;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.buf.push_str(rest);
                    self.buf.push('\n');
                    return out;
                }
            }
        }
        loop {
            let t = rest.trim_start();
            if t.is_empty() || t.starts_with('#') || t.starts_with("--") {
                return out;
            }
            if let Some(after) = t.strip_prefix(';') {
                rest = after;
                continue;
            }
            if classify(t) == Kind::Sql {
                let mut state = Scan::Code;
                match find_end(t, &mut state) {
                    Some(i) => {
                        out.push(t[..i].to_string());
                        rest = &t[i + 1..];
                    }
                    None if first_word(t).eq_ignore_ascii_case("USE") => {
                        out.push(t.to_string());
                        return out;
                    }
                    None => {
                        self.scan = state;
                        self.buf.push_str(t);
                        self.buf.push('\n');
                        return out;
                    }
                }
            } else {
                match t.find(';') {
                    Some(i) => {
                        out.push(t[..i].to_string());
                        rest = &t[i + 1..];
                    }
                    None => {
                        out.push(t.to_string());
                        return out;
                    }
                }
            }
        }
    }

    /// End of input: the open statement, if any.
    pub fn finish(&mut self) -> Option<String> {
        let s = std::mem::take(&mut self.buf);
        self.scan = Scan::Code;
        let s = s.trim_end().to_string();
        (!s.trim().is_empty()).then_some(s)
    }
}

/// Splits a whole text (`-e` argument, a sourced file) into commands.
pub fn split_all(text: &str) -> Vec<String> {
    let mut sp = Splitter::new();
    let mut out = Vec::new();
    for line in text.lines() {
        out.extend(sp.feed(line));
    }
    out.extend(sp.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        for (text, kind) in [
            ("SHOW", Kind::Mgm),
            ("show;", Kind::Mgm),
            ("SHOW TABLES", Kind::Sql),
            ("all status", Kind::Mgm),
            ("2 REPORT MemoryUsage", Kind::Mgm),
            ("SET DiskPageBufferMemory=512M", Kind::Mgm),
            ("SET @x = 1", Kind::Sql),
            ("set autocommit=0", Kind::Sql),
            ("START TRANSACTION", Kind::Sql),
            ("START BACKUP", Kind::Mgm),
            ("EXIT", Kind::Quit),
            ("quit;", Kind::Quit),
            ("EXIT SINGLE USER MODE", Kind::Mgm),
            ("ENTER SINGLE USER MODE 4", Kind::Mgm),
            ("HELP", Kind::Help(None)),
            ("help show", Kind::Help(Some("show".into()))),
            ("SOURCE /tmp/x.sql", Kind::Source("/tmp/x.sql".into())),
            ("(SELECT 1)", Kind::Sql),
            ("select(1)", Kind::Sql),
            ("SHWO", Kind::Unknown),
            ("\u{0}\u{1}", Kind::Unknown),
        ] {
            assert_eq!(classify(text), kind, "{text}");
        }
        assert_eq!(suggestion("SHWO"), Some("SHOW"));
        assert_eq!(suggestion("SELCT * FROM t"), Some("SELECT"));
        assert_eq!(suggestion("qwertyuiop"), None);
    }

    #[test]
    fn splitting() {
        assert_eq!(
            split_all("SHOW; ALL STATUS\nSELECT 1; SELECT 2"),
            vec!["SHOW", "ALL STATUS", "SELECT 1", "SELECT 2"]
        );
        assert_eq!(
            split_all(
                "SELECT node_id,\n  100*(sum(a)/(sum(a)+sum(b))) AS x\nFROM t GROUP BY node_id;\nALL STATUS"
            ),
            vec![
                "SELECT node_id,\n  100*(sum(a)/(sum(a)+sum(b))) AS x\nFROM t GROUP BY node_id",
                "ALL STATUS"
            ]
        );
        assert_eq!(
            split_all("INSERT INTO t VALUES ('a;b', \"c;\", `d;`); -- x;y\nSELECT 'it''s;'"),
            vec![
                "INSERT INTO t VALUES ('a;b', \"c;\", `d;`)",
                "SELECT 'it''s;'"
            ]
        );
        assert_eq!(
            split_all("SELECT 'multi\nline;' /* c;\n */ ;"),
            vec!["SELECT 'multi\nline;' /* c;\n */ "]
        );
        assert_eq!(
            split_all("USE ndbinfo\nSELECT 1;"),
            vec!["USE ndbinfo", "SELECT 1"]
        );
        assert_eq!(split_all("# comment\n-- comment\n\n;;SHOW"), vec!["SHOW"]);
        assert_eq!(split_all("SELECT 'a\\';'"), vec!["SELECT 'a\\';'"]);
        let mut sp = Splitter::new();
        assert!(sp.feed("SELECT").is_empty());
        assert!(sp.pending());
        sp.reset();
        assert!(!sp.pending());
        assert_eq!(sp.feed("ALL STATUS"), vec!["ALL STATUS"]);
    }
}
