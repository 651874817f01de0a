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

use std::fmt;

pub use super::table::PARAMS;

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
    pub(crate) const SPELLINGS: [&'static str; 9] =
        ["ndbd", "db", "ndb_mgmd", "mgm", "mysqld", "api", "tcp", "system", "computer"];
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

/// A parameter value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ParamValue {
    Int(u64),
    Bool(bool),
    Str(String),
}

impl ParamValue {
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            ParamValue::Int(v) => Some(*v),
            ParamValue::Bool(b) => Some(u64::from(*b)),
            ParamValue::Str(_) => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ParamValue::Bool(b) => Some(*b),
            ParamValue::Int(v) => Some(*v != 0),
            ParamValue::Str(_) => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParamValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// As `ndb_config` shows values: integers in base units, booleans as true/false.
impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Str(s) => f.write_str(s),
        }
    }
}

enum IntError {
    Syntax,
    Overflow,
}

/// Reads `digits [K|M|G][B]` (suffix case-insensitive, 1024-based, blanks allowed between).
fn parse_int(s: &str) -> Result<u64, IntError> {
    let s = s.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(IntError::Syntax);
    }
    let mut value: u64 = 0;
    for b in digits.bytes() {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or(IntError::Overflow)?;
    }
    let suffix = rest.trim().to_ascii_uppercase();
    let mul = match suffix.as_str() {
        "" => 1,
        "K" | "KB" => K,
        "M" | "MB" => M,
        "G" | "GB" => G,
        _ => return Err(IntError::Syntax),
    };
    value.checked_mul(mul).ok_or(IntError::Overflow)
}

/// Parses an NDB size or count: `"64M"` -> 67108864, `"98m"`, `"1G"`, `"300"`, `"16K"`
/// (an optional trailing `B` is accepted: `"3072MB"`). `None` if malformed or over u64.
pub fn parse_size(s: &str) -> Option<u64> {
    parse_int(s).ok()
}

/// Writes a byte count with the largest exact 1024-based suffix (`102760448` -> `98M`).
pub fn format_size(v: u64) -> String {
    match v {
        0 => "0".to_string(),
        v if v % G == 0 => format!("{}G", v / G),
        v if v % M == 0 => format!("{}M", v / M),
        v if v % K == 0 => format!("{}K", v / K),
        v => v.to_string(),
    }
}

/// NDB's boolean spellings (plus on/off), case-insensitive.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "on" | "1" => Some(true),
        "false" | "no" | "n" | "off" | "0" => Some(false),
        _ => None,
    }
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
                        return Err("bad value, expected a non-negative integer (K, M or G suffix allowed)".into());
                    }
                };
                if v < self.min || v > self.max { Err(self.range_error()) } else { Ok(ParamValue::Int(v)) }
            }
            ParamKind::Bool => parse_bool(t)
                .map(ParamValue::Bool)
                .ok_or_else(|| "bad value, expected a boolean (true/false, yes/no, on/off, 1/0)".into()),
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
        let f = |v: u64| if self.unit == Unit::Bytes { format_size(v) } else { v.to_string() };
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

/// Removes one pair of surrounding double quotes.
fn unquote(s: &str) -> &str {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') { &s[1..s.len() - 1] } else { s }
}

fn needs_quotes(s: &str) -> bool {
    s.contains(['#', ';', '"']) || s.trim() != s
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
    PARAMS.iter().find(|p| p.section == section && p.name.eq_ignore_ascii_case(name))
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
                let mut v = (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
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
pub(crate) fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
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
    fn sizes_parse_1024_based() {
        assert_eq!(parse_size("64M"), Some(67_108_864));
        assert_eq!(parse_size("98m"), Some(102_760_448));
        assert_eq!(parse_size("1G"), Some(1_073_741_824));
        assert_eq!(parse_size("16k"), Some(16_384));
        assert_eq!(parse_size("300"), Some(300));
        assert_eq!(parse_size(" 2 g "), Some(2 * G));
        assert_eq!(parse_size("3072MB"), Some(3072 * M));
        for bad in ["", "M", "-1", "1.5G", "12T", "0x10", "1 2", "G1"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        assert_eq!(parse_size("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_size("18446744073709551616"), None);
        assert_eq!(parse_size("17179869184G"), None);
    }

    #[test]
    fn sizes_format_with_largest_exact_suffix() {
        assert_eq!(format_size(102_760_448), "98M");
        assert_eq!(format_size(1024 * G), "1024G");
        assert_eq!(format_size(512 * K), "512K");
        assert_eq!(format_size(1500), "1500");
        assert_eq!(format_size(0), "0");
    }

    #[test]
    fn booleans_accept_ndb_spellings() {
        for t in ["true", "YES", "y", "On", "1"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "No", "N", "off", "0"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("2"), None);
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn distance_counts_swaps_as_one_edit() {
        assert_eq!(distance("DataMemroy", "DataMemory"), 1);
        assert_eq!(distance("datamemory", "DataMemory"), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(nearest("DataMemroy", PARAMS.iter().map(|p| p.name)), Some("DataMemory"));
        assert_eq!(nearest("Foo", PARAMS.iter().map(|p| p.name)), None);
    }

    #[test]
    fn values_parse_by_kind_with_range_errors() {
        let dm = lookup_param("datamemory").expect("DataMemory in table");
        assert_eq!(dm.parse_value("80M"), Ok(ParamValue::Int(80 * M)));
        assert_eq!(dm.parse_value("5000G").unwrap_err(), "value out of range, allowed 1M..1024G");
        assert_eq!(dm.parse_value("-5").unwrap_err(), "value out of range, allowed 1M..1024G");
        assert_eq!(
            dm.parse_value("lots").unwrap_err(),
            "bad value, expected a non-negative integer (K, M or G suffix allowed)"
        );
        let arb = lookup_param("Arbitration").expect("Arbitration in table");
        assert_eq!(arb.parse_value("waitexternal"), Ok(ParamValue::Str("WaitExternal".into())));
        assert_eq!(arb.parse_value("x").unwrap_err(), "bad value, expected one of Default, Disabled, WaitExternal");
        let dir = lookup_param("DataDir").expect("DataDir in table");
        assert_eq!(dir.parse_value("\" /a b \""), Ok(ParamValue::Str(" /a b ".into())));
        assert_eq!(dir.parse_value("").unwrap_err(), "bad value, expected a non-empty path");
        assert_eq!(dir.format_value(&ParamValue::Str(" /a b ".into())), "\" /a b \"");
    }

    #[test]
    fn param_value_display_and_accessors() {
        assert_eq!(ParamValue::Int(102_760_448).to_string(), "102760448");
        assert_eq!(ParamValue::Bool(false).to_string(), "false");
        assert_eq!(ParamValue::Str("sparse".into()).to_string(), "sparse");
        assert_eq!(ParamValue::Bool(true).as_u64(), Some(1));
        assert_eq!(ParamValue::Str("x".into()).as_u64(), None);
    }
}
