//! The config.ini reader: turns text into a list of sections, each with its parameters
//! resolved against the table and their values typed and range-checked.
//!
//! Syntax (NDB's `InitConfigFileParser`): `[section]` or `[section default]` headers
//! (names and aliases case-insensitive), `name=value` or `name: value` lines (split at the
//! first `=` or `:`, so values may contain either), whole-line `#`/`;` comments, trailing
//! ` # ...` / ` ; ...` comments (outside double quotes), blank lines, CRLF line ends.
//!
//! Invariants: every entry of a returned section belongs to that section's type and holds
//! a value `ParamSpec::parse_value` accepted; a parameter appears at most once per section;
//! `NodeId` never appears in a default section; at most one `[system]`. Every error names
//! the file, the 1-based line and (where there is one) the parameter. Never panics.

use super::params::{self, ParamSpec, ParamValue, Section, lookup_param_in, params_of};
use super::{ConfigError, at};

/// One `name=value` line, resolved.
#[derive(Debug, Clone)]
pub(crate) struct RawEntry {
    pub spec: &'static ParamSpec,
    pub value: ParamValue,
    /// The value as written (for messages).
    pub text: String,
    pub line: u32,
}

/// One section of the file.
#[derive(Debug, Clone)]
pub(crate) struct RawSection {
    pub kind: Section,
    pub is_default: bool,
    /// The header as written, e.g. `[ndbd default]` or `[DB]`.
    pub header: String,
    pub line: u32,
    pub entries: Vec<RawEntry>,
}

/// Reads config.ini text. Deprecation warnings are appended to `warnings`.
pub(crate) fn parse_sections(
    text: &str,
    file: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<RawSection>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut sections: Vec<RawSection> = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = u32::try_from(idx + 1).unwrap_or(u32::MAX);
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let content = strip_comment(trimmed);
        if content.starts_with('[') {
            let section = parse_header(content, file, line, &sections)?;
            sections.push(section);
            continue;
        }
        let Some(section) = sections.last_mut() else {
            let name = content.split(['=', ':']).next().unwrap_or("").trim();
            return Err(ConfigError::new(
                file,
                line,
                Some(name),
                format!(
                    "{content}: parameter outside of any section (a section header such as [ndbd] must come first)"
                ),
            ));
        };
        let entry = parse_entry(content, file, line, section, warnings)?;
        section.entries.push(entry);
    }
    Ok(sections)
}

/// Cuts a trailing comment: `#` or `;` preceded by whitespace, outside double quotes.
fn strip_comment(s: &str) -> &str {
    let mut in_quotes = false;
    let mut prev_space = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '#' | ';' if prev_space && !in_quotes => return s[..i].trim_end(),
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    s
}

fn parse_header(
    content: &str,
    file: &str,
    line: u32,
    seen: &[RawSection],
) -> Result<RawSection, ConfigError> {
    let Some(inner) = content.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
        return Err(ConfigError::new(
            file,
            line,
            None,
            format!("malformed section header '{content}' (expected [name] or [name default])"),
        ));
    };
    let words: Vec<&str> = inner.split_whitespace().collect();
    let header = format!("[{}]", words.join(" "));
    let (kind, is_default) = match words.as_slice() {
        [name] => (Section::from_name(name), false),
        [name, d] if d.eq_ignore_ascii_case("default") => (Section::from_name(name), true),
        _ => (None, false),
    };
    let kind = match kind {
        Some(Section::System) if is_default => None,
        k => k,
    };
    let Some(kind) = kind else {
        let first = words.first().copied().unwrap_or("");
        let hint = params::nearest(first, Section::SPELLINGS.iter().copied())
            .filter(|s| !s.eq_ignore_ascii_case(first))
            .map(|s| format!(" (did you mean [{s}]?)"))
            .unwrap_or_default();
        return Err(ConfigError::new(
            file,
            line,
            None,
            format!("unknown section {header}{hint}"),
        ));
    };
    if kind == Section::System
        && let Some(first) = seen.iter().find(|s| s.kind == Section::System)
    {
        return Err(ConfigError::new(
            file,
            line,
            None,
            format!(
                "{header}: section may appear only once (first at line {})",
                first.line
            ),
        ));
    }
    Ok(RawSection {
        kind,
        is_default,
        header,
        line,
        entries: Vec::new(),
    })
}

fn parse_entry(
    content: &str,
    file: &str,
    line: u32,
    section: &RawSection,
    warnings: &mut Vec<String>,
) -> Result<RawEntry, ConfigError> {
    let header = &section.header;
    let malformed = || {
        ConfigError::new(
            file,
            line,
            None,
            format!("{header} malformed line '{content}' (expected name=value)"),
        )
    };
    let Some(split) = content.find(['=', ':']) else {
        return Err(malformed());
    };
    let name = content[..split].trim();
    let text = content[split + 1..].trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(malformed());
    }
    let spec = resolve_name(name, section.kind, header, file, line, warnings)?;
    if section.is_default && spec.name == "NodeId" {
        return Err(ConfigError::new(
            file,
            line,
            Some(spec.name),
            format!("{header} NodeId={text}: NodeId cannot be given in a default section"),
        ));
    }
    if let Some(prev) = section.entries.iter().find(|e| e.spec.name == spec.name) {
        return Err(ConfigError::new(
            file,
            line,
            Some(spec.name),
            format!(
                "{header} {}={text}: parameter given twice in this section (first at line {})",
                spec.name, prev.line
            ),
        ));
    }
    let value = spec.parse_value(text).map_err(|msg| {
        ConfigError::new(
            file,
            line,
            Some(spec.name),
            format!("{header} {}={text}: {msg}", spec.name),
        )
    })?;
    if let Some(warning) = spec.deprecated {
        warnings.push(format!("{}: {warning}", at(file, line)));
    }
    Ok(RawEntry {
        spec,
        value,
        text: text.to_string(),
        line,
    })
}

/// Finds the parameter `name` of section type `kind`, or explains why it is not there.
pub(crate) fn resolve_name(
    name: &str,
    kind: Section,
    header: &str,
    file: &str,
    line: u32,
    warnings: &mut Vec<String>,
) -> Result<&'static ParamSpec, ConfigError> {
    if let Some(spec) = lookup_param_in(kind, name) {
        return Ok(spec);
    }
    // NDB's deprecated spelling of NodeId in node sections.
    if name.eq_ignore_ascii_case("Id")
        && matches!(kind, Section::Ndbd | Section::NdbMgmd | Section::Api)
        && let Some(spec) = lookup_param_in(kind, "NodeId")
    {
        warnings.push(format!("{}: Id is deprecated, use NodeId", at(file, line)));
        return Ok(spec);
    }
    let message = if let Some(other) = params::PARAMS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
    {
        format!(
            "{header} parameter {} does not belong in this section (it is a [{}] parameter)",
            other.name,
            other.section.name()
        )
    } else if let Some(near) = params::nearest(name, params_of(kind).map(|p| p.name)) {
        format!("{header} unknown parameter '{name}' (did you mean {near}?)")
    } else {
        format!("{header} unknown parameter '{name}'")
    };
    Err(ConfigError::new(file, line, Some(name), message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<RawSection>, ConfigError> {
        parse_sections(text, "config.ini", &mut Vec::new())
    }

    #[test]
    fn comments_are_cut_outside_quotes_only() {
        assert_eq!(strip_comment("DataMemory=80M # eighty"), "DataMemory=80M");
        assert_eq!(strip_comment("DataMemory=80M\t; eighty"), "DataMemory=80M");
        assert_eq!(strip_comment("DataDir=/a#b"), "DataDir=/a#b");
        assert_eq!(
            strip_comment("LogDestination=\"FILE:x # y\" # c"),
            "LogDestination=\"FILE:x # y\""
        );
    }

    #[test]
    fn values_may_contain_separators() {
        let s = parse("[ndb_mgmd]\nLogDestination=FILE:filename=c.log,maxsize=1000000\n")
            .expect("parses");
        assert_eq!(
            s[0].entries[0].value,
            ParamValue::Str("FILE:filename=c.log,maxsize=1000000".into())
        );
        let s = parse("[ndbd]\nDataMemory : 80M\n").expect("parses");
        assert_eq!(s[0].entries[0].value, ParamValue::Int(80 * 1024 * 1024));
    }

    #[test]
    fn headers_accept_aliases_case_and_spacing() {
        let s = parse(
            "[ DB  DEFAULT ]\n[Mgm]\n[API]\n[mysqld default]\n[Computer]\nId=c1\nHostName=h\n",
        )
        .expect("parses");
        let kinds: Vec<_> = s.iter().map(|s| (s.kind, s.is_default)).collect();
        assert_eq!(
            kinds,
            vec![
                (Section::Ndbd, true),
                (Section::NdbMgmd, false),
                (Section::Api, false),
                (Section::Api, true),
                (Section::Computer, false)
            ]
        );
        assert_eq!(s[0].header, "[DB DEFAULT]");
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            parse("[ndbd\n").unwrap_err().to_string(),
            "config.ini:1: malformed section header '[ndbd' (expected [name] or [name default])"
        );
        assert_eq!(
            parse("\n[nbdd]\n").unwrap_err().to_string(),
            "config.ini:2: unknown section [nbdd] (did you mean [ndbd]?)"
        );
        assert_eq!(
            parse("[shm]\n").unwrap_err().to_string(),
            "config.ini:1: unknown section [shm]"
        );
        assert_eq!(
            parse("[system default]\n").unwrap_err().to_string(),
            "config.ini:1: unknown section [system default]"
        );
        assert_eq!(
            parse("[system]\nName=a\n[system]\n")
                .unwrap_err()
                .to_string(),
            "config.ini:3: [system]: section may appear only once (first at line 1)"
        );
    }

    #[test]
    fn id_alias_warns() {
        let mut w = Vec::new();
        let s = parse_sections("[ndbd]\nId=5\n", "c.ini", &mut w).expect("parses");
        assert_eq!(s[0].entries[0].spec.name, "NodeId");
        assert_eq!(w, vec!["c.ini:2: Id is deprecated, use NodeId".to_string()]);
    }
}
