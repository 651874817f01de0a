//! A MySQL lexer: splits the input into statements and tokens, with byte positions.
//!
//! Used to split `;`-separated statements (quotes and comments respected), by the
//! parser of the statements rndb parses itself (DDL, SHOW, ...), to check a statement's
//! size and nesting before it is given to sqlparser, and to make the small same-length
//! rewrites sqlparser needs for MySQL syntax it does not know (`a MOD b`,
//! `LOCK IN SHARE MODE`), so that positions in sqlparser's errors stay right.
//!
//! Invariants: token `start..end` are byte offsets into the statement text on char
//! boundaries; string tokens hold the decoded value (MySQL escapes, doubled quotes);
//! `/*! ... */` comments are lexed as their content (mysqldump's versioned comments),
//! other comments are skipped; the lexer never panics, whatever the input.

use super::errors;
use crate::error::NdbError;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// Unquoted identifier or keyword, as written.
    Word(String),
    /// `back-quoted` identifier.
    Quoted(String),
    /// 'string' or "string", decoded.
    Str(String),
    /// X'..' or 0x.. literal.
    Hex(Vec<u8>),
    /// Numeric literal text.
    Num(String),
    /// @name (name lower-cased, without '@').
    UserVar(String),
    /// @@[scope.]name, as written without "@@".
    SysVar(String),
    /// Operator or punctuation.
    Sym(&'static str),
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

impl Token {
    /// The keyword (upper-cased) when this is an unquoted word.
    pub fn kw(&self) -> Option<String> {
        match &self.tok {
            Tok::Word(w) => Some(w.to_ascii_uppercase()),
            _ => None,
        }
    }
    pub fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.tok, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }
    pub fn is_sym(&self, s: &str) -> bool {
        matches!(&self.tok, Tok::Sym(x) if *x == s)
    }
}

/// One statement: its text (without the `;`) and tokens, positions relative to `text`.
#[derive(Debug, Clone)]
pub(crate) struct Statement<'a> {
    pub text: &'a str,
    pub tokens: Vec<Token>,
}

/// Most tokens a statement may have (a guard on memory; mysqld's is max_allowed_packet).
pub(crate) const MAX_TOKENS: usize = 4_000_000;
/// Most binary operators in one chain at one nesting level (parsed iteratively).
pub(crate) const MAX_CHAIN: usize = 4000;
/// Most postfix predicates (IS, LIKE, IN, BETWEEN, ...) chained at one level (recursive).
pub(crate) const MAX_POSTFIX: usize = 100;
/// Deepest parenthesis nesting.
pub(crate) const MAX_PARENS: usize = 200;

const SYMS: &[&str] = &[
    "<=>", "<=", ">=", "<>", "!=", "<<", ">>", "||", "&&", ":=", "::", "->", "(", ")", ",", ";",
    ".", "+", "-", "*", "/", "%", "=", "<", ">", "!", "~", "^", "&", "|", "?", "{", "}", "[", "]",
    ":",
];

/// Line and column (1-based, columns in characters) of byte offset `pos` in `text`.
pub(crate) fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let pos = floor_boundary(text, pos.min(text.len()));
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let col = match before.rfind('\n') {
        Some(i) => before[i + 1..].chars().count() + 1,
        None => before.chars().count() + 1,
    };
    (line, col)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The syntax error for byte offset `pos` of a statement.
pub(crate) fn syntax_at(text: &str, pos: usize) -> NdbError {
    let pos = floor_boundary(text, pos.min(text.len()));
    let (line, col) = line_col(text, pos);
    errors::syntax(line, col, &text[pos..])
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Open `/*! ... */` comments whose content is being lexed.
    exec_comments: usize,
}

/// Splits `input` at top-level `;` and lexes each statement. Empty statements (only
/// whitespace or comments) are skipped. A lexing error is returned in place of the
/// statement where it occurs, so earlier statements can run first.
pub(crate) fn statements(input: &str) -> Vec<Result<Statement<'_>, NdbError>> {
    let mut out = Vec::new();
    let mut lx = Lexer {
        src: input,
        b: input.as_bytes(),
        pos: 0,
        exec_comments: 0,
    };
    loop {
        let stmt_start = lx.pos;
        let mut tokens: Vec<Token> = Vec::new();
        let mut ended = false;
        let mut failed = None;
        loop {
            match lx.next_token() {
                Ok(None) => {
                    ended = true;
                    break;
                }
                Ok(Some(t)) => {
                    if t.is_sym(";") {
                        break;
                    }
                    tokens.push(t);
                    if tokens.len() > MAX_TOKENS {
                        failed = Some(errors::too_big());
                        break;
                    }
                }
                Err(pos) => {
                    let base = tokens.first().map(|t| t.start).unwrap_or(pos);
                    let base = base.max(stmt_start).min(pos);
                    failed = Some(syntax_at(&input[base..], pos - base));
                    break;
                }
            }
        }
        if let Some(e) = failed {
            out.push(Err(e));
            return out;
        }
        if let (Some(first), Some(last)) = (tokens.first(), tokens.last()) {
            let (s, e) = (first.start, last.end);
            let text = &input[s..e];
            for t in &mut tokens {
                t.start -= s;
                t.end -= s;
            }
            out.push(Ok(Statement { text, tokens }));
        }
        if ended {
            return out;
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

impl Lexer<'_> {
    fn peek(&self, off: usize) -> u8 {
        self.b.get(self.pos + off).copied().unwrap_or(0)
    }

    fn char_at(&self, pos: usize) -> Option<char> {
        self.src.get(pos..).and_then(|s| s.chars().next())
    }

    /// Skips whitespace and comments; returns Err(pos) for an unterminated comment.
    fn skip_space(&mut self) -> Result<(), usize> {
        loop {
            let c = self.peek(0);
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' || c == 0x0c || c == 0x0b {
                self.pos += 1;
            } else if c == b'#'
                || (c == b'-'
                    && self.peek(1) == b'-'
                    && matches!(self.peek(2), 0 | b' ' | b'\t' | b'\n' | b'\r'))
            {
                while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else if c == b'/' && self.peek(1) == b'*' {
                if self.peek(2) == b'!' {
                    // executable comment: lex its content; skip an optional version
                    self.pos += 3;
                    self.exec_comments += 1;
                    while self.peek(0).is_ascii_digit() {
                        self.pos += 1;
                    }
                    continue;
                }
                let start = self.pos;
                match self.src[self.pos + 2..].find("*/") {
                    Some(i) => self.pos += 2 + i + 2,
                    None => return Err(start),
                }
            } else if c == b'*' && self.peek(1) == b'/' && self.exec_comments > 0 {
                // end of an executable comment
                self.exec_comments -= 1;
                self.pos += 2;
            } else {
                return Ok(());
            }
        }
    }

    fn next_token(&mut self) -> Result<Option<Token>, usize> {
        self.skip_space()?;
        let start = self.pos;
        if start >= self.b.len() {
            return Ok(None);
        }
        let c = self.b[start];
        let tok = match c {
            b'\'' | b'"' => Tok::Str(self.string(c)?),
            b'`' => {
                self.pos += 1;
                let mut s = String::new();
                loop {
                    match self.src[self.pos..].find('`') {
                        None => return Err(start),
                        Some(i) => {
                            s.push_str(&self.src[self.pos..self.pos + i]);
                            self.pos += i + 1;
                            if self.peek(0) == b'`' {
                                s.push('`');
                                self.pos += 1;
                            } else {
                                break;
                            }
                        }
                    }
                }
                Tok::Quoted(s)
            }
            b'@' => {
                self.pos += 1;
                let sys = self.peek(0) == b'@';
                if sys {
                    self.pos += 1;
                }
                let name = if matches!(self.peek(0), b'\'' | b'"' | b'`') && !sys {
                    let q = self.peek(0);
                    if q == b'`' {
                        self.pos += 1;
                        let e = self.src[self.pos..].find('`').ok_or(start)?;
                        let n = self.src[self.pos..self.pos + e].to_string();
                        self.pos += e + 1;
                        n
                    } else {
                        self.string(q)?
                    }
                } else {
                    let s = self.pos;
                    while let Some(ch) = self.char_at(self.pos) {
                        if is_ident_char(ch) || ch == '.' {
                            self.pos += ch.len_utf8();
                        } else {
                            break;
                        }
                    }
                    self.src[s..self.pos].to_string()
                };
                if name.is_empty() {
                    return Err(start);
                }
                if sys {
                    Tok::SysVar(name)
                } else {
                    Tok::UserVar(name.to_lowercase())
                }
            }
            b'0' if matches!(self.peek(1), b'x' | b'X') && self.peek(2).is_ascii_hexdigit() => {
                self.pos += 2;
                let s = self.pos;
                while self.peek(0).is_ascii_hexdigit() {
                    self.pos += 1;
                }
                if self.char_at(self.pos).is_some_and(is_ident_char) {
                    self.pos = start;
                    self.word()
                } else {
                    Tok::Hex(hex_bytes(&self.src[s..self.pos]).ok_or(start)?)
                }
            }
            b'x' | b'X' if self.peek(1) == b'\'' => {
                self.pos += 2;
                let e = self.src[self.pos..].find('\'').ok_or(start)?;
                let h = &self.src[self.pos..self.pos + e];
                self.pos += e + 1;
                if !h.len().is_multiple_of(2) {
                    return Err(start);
                }
                Tok::Hex(hex_bytes(h).ok_or(start)?)
            }
            b'b' | b'B' if self.peek(1) == b'\'' => {
                self.pos += 2;
                let e = self.src[self.pos..].find('\'').ok_or(start)?;
                let bits = &self.src[self.pos..self.pos + e];
                self.pos += e + 1;
                if !bits.bytes().all(|b| b == b'0' || b == b'1') || bits.len() > 64 {
                    return Err(start);
                }
                let v = bits
                    .bytes()
                    .fold(0u64, |acc, b| (acc << 1) | (b - b'0') as u64);
                Tok::Num(v.to_string())
            }
            b'0'..=b'9' => self.number(),
            b'.' if self.peek(1).is_ascii_digit() => self.number(),
            _ => {
                let ch = self.char_at(start).ok_or(start)?;
                if is_ident_char(ch) {
                    self.word()
                } else {
                    let rest = &self.src[start..];
                    match SYMS.iter().find(|s| rest.starts_with(**s)) {
                        Some(s) => {
                            self.pos += s.len();
                            Tok::Sym(s)
                        }
                        None => return Err(start),
                    }
                }
            }
        };
        Ok(Some(Token {
            tok,
            start,
            end: self.pos,
        }))
    }

    fn word(&mut self) -> Tok {
        let s = self.pos;
        while let Some(ch) = self.char_at(self.pos) {
            if is_ident_char(ch) {
                self.pos += ch.len_utf8();
            } else {
                break;
            }
        }
        Tok::Word(self.src[s..self.pos].to_string())
    }

    fn number(&mut self) -> Tok {
        let s = self.pos;
        while self.peek(0).is_ascii_digit() {
            self.pos += 1;
        }
        if self.peek(0) == b'.' {
            self.pos += 1;
            while self.peek(0).is_ascii_digit() {
                self.pos += 1;
            }
        }
        if matches!(self.peek(0), b'e' | b'E')
            && (self.peek(1).is_ascii_digit()
                || (matches!(self.peek(1), b'+' | b'-') && self.peek(2).is_ascii_digit()))
        {
            self.pos += 2;
            while self.peek(0).is_ascii_digit() {
                self.pos += 1;
            }
        }
        // MySQL identifiers may start with digits: 1abc
        if self.char_at(self.pos).is_some_and(is_ident_char)
            && !self.src[s..self.pos].contains(['.', 'e', 'E'])
        {
            self.pos = s;
            return self.word();
        }
        Tok::Num(self.src[s..self.pos].to_string())
    }

    /// A quoted string with MySQL escapes; Err(start) when unterminated.
    fn string(&mut self, q: u8) -> Result<String, usize> {
        let start = self.pos;
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.pos) else {
                return Err(start);
            };
            if c == q {
                if self.peek(1) == q {
                    out.push(q);
                    self.pos += 2;
                    continue;
                }
                self.pos += 1;
                break;
            }
            if c == b'\\' {
                let Some(&n) = self.b.get(self.pos + 1) else {
                    return Err(start);
                };
                let e: &[u8] = match n {
                    b'0' => b"\0",
                    b'\'' => b"'",
                    b'"' => b"\"",
                    b'b' => b"\x08",
                    b'n' => b"\n",
                    b'r' => b"\r",
                    b't' => b"\t",
                    b'Z' => b"\x1a",
                    b'\\' => b"\\",
                    b'%' => b"\\%",
                    b'_' => b"\\_",
                    _ => {
                        // any other escaped character stands for itself
                        self.pos += 1;
                        continue;
                    }
                };
                out.extend_from_slice(e);
                self.pos += 2;
                continue;
            }
            out.push(c);
            self.pos += 1;
        }
        Ok(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
    }
}

fn hex_bytes(h: &str) -> Option<Vec<u8>> {
    let h = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

fn is_postfix_kw(w: &str) -> bool {
    matches!(
        w.to_ascii_uppercase().as_str(),
        "IS" | "LIKE" | "IN" | "BETWEEN" | "COLLATE" | "REGEXP" | "RLIKE" | "SOUNDS" | "MEMBER"
    )
}

fn is_binary_kw(w: &str) -> bool {
    matches!(
        w.to_ascii_uppercase().as_str(),
        "AND" | "OR" | "XOR" | "NOT" | "DIV" | "MOD"
    )
}

/// Checks the nesting of a statement before it is parsed: parenthesis depth, and at each
/// level the length of operator chains (sqlparser builds them as nested boxes).
pub(crate) fn check_complexity(st: &Statement<'_>) -> Result<(), NdbError> {
    // per open level: (binary operators, postfix predicates) since its last comma
    let mut levels: Vec<(usize, usize)> = vec![(0, 0)];
    for t in &st.tokens {
        match &t.tok {
            Tok::Sym("(") => {
                levels.push((0, 0));
                if levels.len() > MAX_PARENS {
                    return Err(errors::too_deep());
                }
            }
            Tok::Sym(")") if levels.len() > 1 => {
                levels.pop();
            }
            Tok::Sym(",") => {
                if let Some(l) = levels.last_mut() {
                    *l = (0, 0);
                }
            }
            Tok::Sym(s) if !matches!(*s, "." | ";" | "{" | "}" | "[" | "]") => {
                if let Some(l) = levels.last_mut() {
                    l.0 += 1;
                    if matches!(*s, "::" | "->") {
                        l.1 += 1;
                    }
                }
            }
            Tok::Word(w) if is_binary_kw(w) => {
                if let Some(l) = levels.last_mut() {
                    l.0 += 1;
                }
            }
            Tok::Word(w) if is_postfix_kw(w) => {
                if let Some(l) = levels.last_mut() {
                    l.0 += 1;
                    l.1 += 1;
                }
            }
            _ => {}
        }
        if let Some(l) = levels.last()
            && (l.0 > MAX_CHAIN || l.1 > MAX_POSTFIX)
        {
            return Err(errors::too_deep());
        }
    }
    Ok(())
}

/// Whether a token can end an operand (so a following `MOD` is the operator).
fn ends_operand(t: &Token) -> bool {
    match &t.tok {
        Tok::Num(_) | Tok::Str(_) | Tok::Hex(_) | Tok::Quoted(_) => true,
        Tok::UserVar(_) | Tok::SysVar(_) => true,
        Tok::Sym(s) => *s == ")",
        Tok::Word(w) => !matches!(
            w.to_ascii_uppercase().as_str(),
            "SELECT"
                | "WHERE"
                | "AND"
                | "OR"
                | "XOR"
                | "NOT"
                | "ON"
                | "SET"
                | "BY"
                | "HAVING"
                | "WHEN"
                | "THEN"
                | "ELSE"
                | "DISTINCT"
                | "CASE"
                | "IS"
                | "LIKE"
                | "IN"
                | "BETWEEN"
                | "VALUES"
                | "RETURN"
                | "DIV"
                | "MOD"
        ),
    }
}

/// Same-length rewrites for sqlparser: `x MOD y` -> `x %   y`; a trailing
/// `LOCK IN SHARE MODE` is blanked out (the bool says it was there).
pub(crate) fn rewrite_for_sqlparser(st: &Statement<'_>) -> (String, bool) {
    let mut bytes = st.text.as_bytes().to_vec();
    let toks = &st.tokens;
    let mut share_lock = false;
    for i in 0..toks.len() {
        if toks[i].is_kw("MOD") && i > 0 && ends_operand(&toks[i - 1]) {
            let t = &toks[i];
            bytes[t.start] = b'%';
            for b in &mut bytes[t.start + 1..t.end] {
                *b = b' ';
            }
        }
        if toks[i].is_kw("LOCK")
            && i + 3 < toks.len()
            && toks[i + 1].is_kw("IN")
            && toks[i + 2].is_kw("SHARE")
            && toks[i + 3].is_kw("MODE")
        {
            share_lock = true;
            for b in &mut bytes[toks[i].start..toks[i + 3].end] {
                *b = b' ';
            }
        }
    }
    // only ASCII bytes were replaced by ASCII bytes at token boundaries
    let text = String::from_utf8(bytes).unwrap_or_else(|_| st.text.to_string());
    (text, share_lock)
}

/// Texts of the select-list items of a SELECT statement (as written), for column names.
/// `start` is the index of the SELECT keyword token.
pub(crate) fn select_item_texts(st: &Statement<'_>, start: usize) -> Vec<String> {
    let toks = &st.tokens;
    let mut i = start + 1;
    while i < toks.len()
        && toks[i].kw().is_some_and(|k| {
            matches!(
                k.as_str(),
                "DISTINCT"
                    | "ALL"
                    | "DISTINCTROW"
                    | "HIGH_PRIORITY"
                    | "STRAIGHT_JOIN"
                    | "SQL_SMALL_RESULT"
                    | "SQL_BIG_RESULT"
                    | "SQL_BUFFER_RESULT"
                    | "SQL_NO_CACHE"
                    | "SQL_CACHE"
                    | "SQL_CALC_FOUND_ROWS"
            )
        })
    {
        i += 1;
    }
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut item_start = i;
    while i < toks.len() {
        let t = &toks[i];
        if t.is_sym("(") {
            depth += 1;
        } else if t.is_sym(")") {
            if depth == 0 {
                break;
            }
            depth -= 1;
        } else if depth == 0 {
            if t.is_sym(",") {
                items.push(span_text(st, item_start, i));
                item_start = i + 1;
            } else if t.kw().is_some_and(|k| {
                matches!(
                    k.as_str(),
                    "FROM"
                        | "WHERE"
                        | "GROUP"
                        | "HAVING"
                        | "ORDER"
                        | "LIMIT"
                        | "INTO"
                        | "FOR"
                        | "LOCK"
                        | "UNION"
                        | "WINDOW"
                )
            }) {
                break;
            }
        }
        i += 1;
    }
    if item_start < i {
        items.push(span_text(st, item_start, i));
    }
    items
}

fn span_text(st: &Statement<'_>, from: usize, to: usize) -> String {
    if from >= to || to > st.tokens.len() {
        return String::new();
    }
    st.text[st.tokens[from].start..st.tokens[to - 1].end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        let v = statements(s);
        v.into_iter()
            .next()
            .expect("one")
            .expect("lexes")
            .tokens
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn lexes_mysql_tokens() {
        assert_eq!(
            toks("SELECT `a``b`, 'it''s\\n', x'41', 0x42, 1.5e3, @X, @@session.autocommit"),
            vec![
                Tok::Word("SELECT".into()),
                Tok::Quoted("a`b".into()),
                Tok::Sym(","),
                Tok::Str("it's\n".into()),
                Tok::Sym(","),
                Tok::Hex(b"A".to_vec()),
                Tok::Sym(","),
                Tok::Hex(b"B".to_vec()),
                Tok::Sym(","),
                Tok::Num("1.5e3".into()),
                Tok::Sym(","),
                Tok::UserVar("x".into()),
                Tok::Sym(","),
                Tok::SysVar("session.autocommit".into()),
            ]
        );
        assert_eq!(
            toks("a<=>b -- c\n/* x */ #y\n /*!40101 d*/"),
            vec![
                Tok::Word("a".into()),
                Tok::Sym("<=>"),
                Tok::Word("b".into()),
                Tok::Word("d".into()),
            ]
        );
    }

    #[test]
    fn splits_statements() {
        let v = statements("select ';' ; ; select 2;\n-- only a comment\n");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].as_ref().map(|s| s.text).ok(), Some("select ';'"));
        assert_eq!(v[1].as_ref().map(|s| s.text).ok(), Some("select 2"));
        let v = statements("select 1; select 'abc");
        assert!(v[0].is_ok());
        let e = v[1].as_ref().expect_err("unterminated");
        assert_eq!(e.mysql_code, 1064);
        assert!(e.message.contains("near ''abc' at line 1 column 8"), "{e}");
    }

    #[test]
    fn rewrites_mod_and_share_lock() {
        let v = statements("select a mod 3, mod(a,2) from t lock in share mode");
        let st = v[0].as_ref().expect("ok");
        let (text, share) = rewrite_for_sqlparser(st);
        assert!(share);
        assert_eq!(text.len(), st.text.len());
        assert!(text.starts_with("select a %   3, mod(a,2) from t"));
        assert_eq!(
            select_item_texts(st, 0),
            vec!["a mod 3".to_string(), "mod(a,2)".to_string()]
        );
    }

    #[test]
    fn complexity_limits() {
        let long = format!("select {}1", "1+".repeat(MAX_CHAIN + 1));
        let v = statements(&long);
        let st = v[0].as_ref().expect("ok");
        assert_eq!(check_complexity(st).map_err(|e| e.mysql_code), Err(1436));
        let ok = format!("select a in ({}1)", "1,".repeat(100_000));
        let v = statements(&ok);
        assert!(check_complexity(v[0].as_ref().expect("ok")).is_ok());
    }
}
