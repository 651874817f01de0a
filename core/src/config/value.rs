//! Parameter values and their text forms: sizes with K/M/G suffixes, NDB booleans, quoted
//! strings.
//!
//! Invariants: sizes are 1024-based and never overflow silently (overflow is an error, not
//! a wrap); [`format_size`] output is read back by [`parse_size`] to the same number; a string
//! that [`needs_quotes`] is written quoted and [`unquote`] restores it exactly.

use std::fmt;

use super::params::{G, K, M};

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

pub(crate) enum IntError {
    Syntax,
    Overflow,
}

/// Reads `digits [K|M|G][B]` (suffix case-insensitive, 1024-based, blanks allowed between).
pub(crate) fn parse_int(s: &str) -> Result<u64, IntError> {
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

/// Removes one pair of surrounding double quotes.
pub(crate) fn unquote(s: &str) -> &str {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

pub(crate) fn needs_quotes(s: &str) -> bool {
    s.contains(['#', ';', '"']) || s.trim() != s
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
    fn param_value_display_and_accessors() {
        assert_eq!(ParamValue::Int(102_760_448).to_string(), "102760448");
        assert_eq!(ParamValue::Bool(false).to_string(), "false");
        assert_eq!(ParamValue::Str("sparse".into()).to_string(), "sparse");
        assert_eq!(ParamValue::Bool(true).as_u64(), Some(1));
        assert_eq!(ParamValue::Str("x".into()).as_u64(), None);
    }
}
