//! The parameter model: what a config.ini parameter is (section, type, default, range,
//! deprecation, restart class) and how its values are read and written.
//!
//! Invariants:
//! - Every parameter is identified by its canonical NDB spelling (`DataMemory`), matched
//!   case-insensitively; the table ([`super::table::PARAMS`]) holds one entry per
//!   (section, name), so a parameter living in several sections (`HostName`) has one entry
//!   per section with that section's default and range.
//! - A value that [`ParamSpec::parse_value`] accepts is of the parameter's type and within
//!   `min..=max`; integers are stored in NDB's base unit (bytes, milliseconds, seconds...).
//! - [`ParamSpec::format_value`] writes a value back in a form `parse_value` reads to the
//!   same value (byte sizes with the largest exact K/M/G suffix, 1024-based).
//! - Unknown names get a "did you mean" suggestion only when one edit in three (at most
//!   three) turns them into a known name.

use std::fmt;

pub use super::table::PARAMS;
use super::value::{IntError, needs_quotes, parse_int, unquote};
pub use super::value::{ParamValue, format_size, parse_bool, parse_size};

/// 1024-based size units, as NDB reads `K`, `M`, `G`.
pub const K: u64 = 1024;
pub const M: u64 = 1024 * K;
pub const G: u64 = 1024 * M;
/// NDB's `MAX_INT_RNIL` (0xfffffeff): the upper bound of "unlimited" 32-bit parameters.
pub const MAX_INT_RNIL: u64 = 0xffff_feff;

/// A config.ini section type; aliases (`DB`, `MGM`, `API`) map onto these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    Ndbd,
    NdbMgmd,
    Api,
    Tcp,
    System,
    Computer,
}

impl Section {
    /// The section name as written in a generated config.ini (`ndbd`, `ndb_mgmd`, `mysqld`...).
    pub fn name(self) -> &'static str {
        match self {
            Section::Ndbd => "ndbd",
            Section::NdbMgmd => "ndb_mgmd",
            Section::Api => "mysqld",
            Section::Tcp => "tcp",
            Section::System => "system",
            Section::Computer => "computer",
        }
    }

    /// Resolves a section name or alias, case-insensitively.
    pub fn from_name(name: &str) -> Option<Section> {
        let n = name.to_ascii_lowercase();
        Some(match n.as_str() {
            "ndbd" | "db" => Section::Ndbd,
            "ndb_mgmd" | "mgm" => Section::NdbMgmd,
            "mysqld" | "api" => Section::Api,
            "tcp" => Section::Tcp,
            "system" => Section::System,
            "computer" => Section::Computer,
            _ => return None,
        })
    }

    /// Every accepted spelling, for "did you mean" suggestions.
    pub(crate) const SPELLINGS: [&'static str; 9] = [
        "ndbd", "db", "ndb_mgmd", "mgm", "mysqld", "api", "tcp", "system", "computer",
    ];
}

/// What applying a changed value requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Restart {
    /// Takes effect at once.
    None,
    /// Data nodes restarted one at a time.
    Rolling,
    /// System or initial (node) restart: file system layout or cluster topology changes.
    Initial,
}

impl Restart {
    pub fn describe(self) -> &'static str {
        match self {
            Restart::None => "takes effect immediately",
            Restart::Rolling => "requires a rolling restart of the data nodes",
            Restart::Initial => "requires an initial (system) restart",
        }
    }
}

impl fmt::Display for Restart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The value type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Unsigned integer, K/M/G suffixes accepted.
    Int,
    /// true/false, yes/no, y/n, on/off, 1/0.
    Bool,
    /// Free text (may be empty).
    Str,
    /// A non-empty file system path.
    Path,
    /// One of a fixed list of words, matched case-insensitively, stored as listed.
    Choice(&'static [&'static str]),
}

/// The unit of an integer parameter (how ranges and values are shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Millis,
    Seconds,
    Percent,
    Number,
}

/// Where a parameter's value comes from when the file does not give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamDefault {
    Int(u64),
    Bool(bool),
    Str(&'static str),
    /// No value unless given (NDB's UNDEFINED).
    Undefined,
    /// Must be given (NDB's MANDATORY).
    Mandatory,
    /// Assigned by the configuration (NodeId, Nodegroup).
    Assigned,
    /// Takes the value of another parameter of the same section (FileSystemPath <- DataDir).
    Derived(&'static str),
}

/// One parameter of one section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    /// Canonical NDB spelling.
    pub name: &'static str,
    pub section: Section,
    pub kind: ParamKind,
    pub unit: Unit,
    pub default: ParamDefault,
    pub min: u64,
    pub max: u64,
    /// Warning given when the parameter is used.
    pub deprecated: Option<&'static str>,
    pub restart: Restart,
    pub description: &'static str,
}

impl ParamSpec {
    /// Reads a value as written in config.ini (already stripped of comments). The error is
    /// the tail of a config error message: `value out of range, allowed 1M..1024G`.
    pub fn parse_value(&self, text: &str) -> Result<ParamValue, String> {
        let t = text.trim();
        match self.kind {
            ParamKind::Int => {
                let v = match parse_int(t) {
                    Ok(v) => v,
                    Err(IntError::Overflow) => return Err(self.range_error()),
                    Err(IntError::Syntax) if t.starts_with('-') && parse_int(&t[1..]).is_ok() => {
                        return Err(self.range_error());
                    }
                    Err(IntError::Syntax) => {
                        return Err(
                            "bad value, expected a non-negative integer (K, M or G suffix allowed)"
                                .into(),
                        );
                    }
                };
                if v < self.min || v > self.max {
                    Err(self.range_error())
                } else {
                    Ok(ParamValue::Int(v))
                }
            }
            ParamKind::Bool => parse_bool(t).map(ParamValue::Bool).ok_or_else(|| {
                "bad value, expected a boolean (true/false, yes/no, on/off, 1/0)".into()
            }),
            ParamKind::Str | ParamKind::Path => {
                let s = unquote(t);
                if s.chars().any(|c| c.is_control() && c != '\t') {
                    return Err("bad value, control characters are not allowed".into());
                }
                if self.kind == ParamKind::Path && s.is_empty() {
                    return Err("bad value, expected a non-empty path".into());
                }
                Ok(ParamValue::Str(s.to_string()))
            }
            ParamKind::Choice(options) => options
                .iter()
                .find(|o| o.eq_ignore_ascii_case(t))
                .map(|o| ParamValue::Str((*o).to_string()))
                .ok_or_else(|| format!("bad value, expected one of {}", options.join(", "))),
        }
    }

    fn range_error(&self) -> String {
        format!("value out of range, allowed {}", self.range_text())
    }

    /// The allowed range in NDB's units: `1M..1024G`, `20..32000`.
    pub fn range_text(&self) -> String {
        let f = |v: u64| {
            if self.unit == Unit::Bytes {
                format_size(v)
            } else {
                v.to_string()
            }
        };
        format!("{}..{}", f(self.min), f(self.max))
    }

    /// Writes a value the way config.ini would hold it; `parse_value` reads it back unchanged.
    pub fn format_value(&self, v: &ParamValue) -> String {
        match v {
            ParamValue::Int(n) if self.unit == Unit::Bytes => format_size(*n),
            ParamValue::Str(s) if needs_quotes(s) => format!("\"{s}\""),
            other => other.to_string(),
        }
    }

    /// The fixed default value, if the parameter has one.
    pub fn default_value(&self) -> Option<ParamValue> {
        match self.default {
            ParamDefault::Int(v) => Some(ParamValue::Int(v)),
            ParamDefault::Bool(b) => Some(ParamValue::Bool(b)),
            ParamDefault::Str(s) => Some(ParamValue::Str(s.to_string())),
            _ => None,
        }
    }
}

/// The parameter named `name` (case-insensitive), preferring the data node entry.
pub fn lookup_param(name: &str) -> Option<&'static ParamSpec> {
    let mut found = None;
    for p in PARAMS.iter().filter(|p| p.name.eq_ignore_ascii_case(name)) {
        if p.section == Section::Ndbd {
            return Some(p);
        }
        found = found.or(Some(p));
    }
    found
}

/// The parameter `name` of `section` (case-insensitive).
pub fn lookup_param_in(section: Section, name: &str) -> Option<&'static ParamSpec> {
    PARAMS
        .iter()
        .find(|p| p.section == section && p.name.eq_ignore_ascii_case(name))
}

/// All parameters of a section, in table order.
pub fn params_of(section: Section) -> impl Iterator<Item = &'static ParamSpec> {
    PARAMS.iter().filter(move |p| p.section == section)
}

/// Optimal-string-alignment distance (edits incl. adjacent swaps), ASCII case-insensitive.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<u8> = a.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<u8> = b.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[(i - 1) * w + j] + 1)
                    .min(d[i * w + j - 1] + 1)
                    .min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[(i - 2) * w + j - 2] + 1);
                }
                v
            };
        }
    }
    d[a.len() * w + b.len()]
}

/// The closest candidate to `name`, if close enough to be a likely typo.
pub(crate) fn nearest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    if name.len() > 64 {
        return None;
    }
    let limit = (name.len() / 3).clamp(1, 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = distance(name, c);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_swaps_as_one_edit() {
        assert_eq!(distance("DataMemroy", "DataMemory"), 1);
        assert_eq!(distance("datamemory", "DataMemory"), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(
            nearest("DataMemroy", PARAMS.iter().map(|p| p.name)),
            Some("DataMemory")
        );
        assert_eq!(nearest("Foo", PARAMS.iter().map(|p| p.name)), None);
    }

    #[test]
    fn values_parse_by_kind_with_range_errors() {
        let dm = lookup_param("datamemory").expect("DataMemory in table");
        assert_eq!(dm.parse_value("80M"), Ok(ParamValue::Int(80 * M)));
        assert_eq!(
            dm.parse_value("5000G").unwrap_err(),
            "value out of range, allowed 1M..1024G"
        );
        assert_eq!(
            dm.parse_value("-5").unwrap_err(),
            "value out of range, allowed 1M..1024G"
        );
        assert_eq!(
            dm.parse_value("lots").unwrap_err(),
            "bad value, expected a non-negative integer (K, M or G suffix allowed)"
        );
        let arb = lookup_param("Arbitration").expect("Arbitration in table");
        assert_eq!(
            arb.parse_value("waitexternal"),
            Ok(ParamValue::Str("WaitExternal".into()))
        );
        assert_eq!(
            arb.parse_value("x").unwrap_err(),
            "bad value, expected one of Default, Disabled, WaitExternal"
        );
        let dir = lookup_param("DataDir").expect("DataDir in table");
        assert_eq!(
            dir.parse_value("\" /a b \""),
            Ok(ParamValue::Str(" /a b ".into()))
        );
        assert_eq!(
            dir.parse_value("").unwrap_err(),
            "bad value, expected a non-empty path"
        );
        assert_eq!(
            dir.format_value(&ParamValue::Str(" /a b ".into())),
            "\" /a b \""
        );
    }
}
