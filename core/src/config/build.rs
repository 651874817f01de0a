//! From parsed sections to a [`ClusterConfig`]: defaults applied, node ids assigned, and a
//! [`Locator`] that maps every value back to its file line for later messages.
//!
//! Invariants:
//! - A node's value of a parameter comes from, in increasing priority: the table default,
//!   the `[X default]` sections (later ones win, wherever they are in the file), its own
//!   section.
//! - Node ids: given ids are kept; when no id is given anywhere, sections are numbered in
//!   file order like NDB's parser (mgmd first in the usual layout -> 1, 2, 3...); when some
//!   ids are given, the rest get the lowest free ids, data nodes first (file order), then
//!   management, then API nodes, so data nodes stay within 1..144.
//! - Every built configuration goes through [`super::check::finalize`] (derived values,
//!   cross-section checks, node groups, typed fields), as do programmatic changes.

use std::collections::BTreeMap;

use super::params::{ParamDefault, ParamValue, Section, params_of};
use super::parse::RawSection;
use super::{ClusterConfig, ConfigError, Configured, NameSet, ParamMap};

/// Where one value came from, for messages.
#[derive(Debug, Clone)]
struct Origin {
    line: u32,
    header: String,
    text: String,
}

/// Maps nodes and their values back to file lines (or to `<argument>` for set_*).
pub(crate) struct Locator {
    pub(crate) file: String,
    fallback_header: String,
    sections: BTreeMap<(Section, usize), (u32, String)>,
    values: BTreeMap<(Section, usize, &'static str), Origin>,
}

impl Locator {
    pub(crate) fn argument(header: &str) -> Locator {
        Locator {
            file: "<argument>".into(),
            fallback_header: header.into(),
            sections: BTreeMap::new(),
            values: BTreeMap::new(),
        }
    }

    pub(crate) fn section(&self, kind: Section, idx: usize) -> (u32, String) {
        self.sections
            .get(&(kind, idx))
            .cloned()
            .unwrap_or_else(|| (0, self.fallback_header.clone()))
    }

    /// `header Name=value: message` at the line the value came from.
    pub(crate) fn error(
        &self,
        kind: Section,
        idx: usize,
        name: &'static str,
        params: &ParamMap,
        msg: &str,
    ) -> ConfigError {
        let current = || {
            let spec = params_of(kind).find(|p| p.name == name);
            spec.zip(params.get(name))
                .map(|(s, v)| s.format_value(v))
                .unwrap_or_default()
        };
        let (line, header, text) = match self.values.get(&(kind, idx, name)) {
            Some(o) => (o.line, o.header.clone(), o.text.clone()),
            None => {
                let (line, header) = self.section(kind, idx);
                let suffix = if line > 0 { " (default)" } else { "" };
                (line, header, format!("{}{suffix}", current()))
            }
        };
        ConfigError::new(
            &self.file,
            line,
            Some(name),
            format!("{header} {name}={text}: {msg}"),
        )
    }
}

/// One node-like section being assembled.
struct Item<'a> {
    sec: &'a RawSection,
    params: ParamMap,
    explicit: NameSet,
}

/// The parameter table's defaults of a section.
pub(crate) fn defaults_of(kind: Section) -> ParamMap {
    params_of(kind)
        .filter_map(|spec| spec.default_value().map(|v| (spec.name, v)))
        .collect()
}

pub(crate) fn build(
    file: &str,
    sections: &[RawSection],
    warnings: Vec<String>,
) -> Result<ClusterConfig, ConfigError> {
    let mut loc = Locator {
        file: file.into(),
        fallback_header: String::new(),
        sections: BTreeMap::new(),
        values: BTreeMap::new(),
    };
    let mut items: Vec<Item> = Vec::new();
    let mut origins: Vec<BTreeMap<&'static str, Origin>> = Vec::new();
    let mut defaults: BTreeMap<Section, Vec<&RawSection>> = BTreeMap::new();
    for d in sections.iter().filter(|s| s.is_default) {
        defaults.entry(d.kind).or_default().push(d);
    }
    for sec in sections.iter().filter(|s| !s.is_default) {
        let mut params = ParamMap::new();
        let mut explicit = NameSet::new();
        let mut orig = BTreeMap::new();
        for spec in params_of(sec.kind) {
            if let Some(v) = spec.default_value() {
                params.insert(spec.name, v);
            }
        }
        let own_defaults = defaults.get(&sec.kind).map_or(&[][..], Vec::as_slice);
        for s in own_defaults.iter().copied().chain(std::iter::once(sec)) {
            for e in &s.entries {
                params.insert(e.spec.name, e.value.clone());
                explicit.insert(e.spec.name);
                orig.insert(
                    e.spec.name,
                    Origin {
                        line: e.line,
                        header: s.header.clone(),
                        text: e.text.clone(),
                    },
                );
            }
        }
        if let Some(spec) = params_of(sec.kind)
            .find(|p| p.default == ParamDefault::Mandatory && !params.contains_key(p.name))
        {
            return Err(ConfigError::new(
                file,
                sec.line,
                Some(spec.name),
                format!(
                    "{} mandatory parameter {} is missing from this section",
                    sec.header, spec.name
                ),
            ));
        }
        items.push(Item {
            sec,
            params,
            explicit,
        });
        origins.push(orig);
    }
    if !items.iter().any(|i| i.sec.kind == Section::Ndbd) {
        return Err(ConfigError::new(
            file,
            0,
            None,
            "no [ndbd] section: at least one data node must be defined",
        ));
    }
    assign_node_ids(file, &mut items, &origins)?;

    let mut cfg = ClusterConfig {
        warnings,
        source: file.into(),
        ..ClusterConfig::default()
    };
    let mut counts: BTreeMap<Section, usize> = BTreeMap::new();
    for (item, orig) in items.into_iter().zip(origins) {
        let kind = item.sec.kind;
        let idx = *counts.entry(kind).and_modify(|c| *c += 1).or_insert(0);
        loc.sections
            .insert((kind, idx), (item.sec.line, item.sec.header.clone()));
        for (name, o) in orig {
            loc.values.insert((kind, idx, name), o);
        }
        let (p, e) = (item.params, item.explicit);
        match kind {
            Section::Ndbd => cfg.data_nodes.push(Configured::from_parts(p, e)),
            Section::NdbMgmd => cfg.mgm_nodes.push(Configured::from_parts(p, e)),
            Section::Api => cfg.api_nodes.push(Configured::from_parts(p, e)),
            Section::Tcp => cfg.tcp_connections.push(Configured::from_parts(p, e)),
            Section::Computer => cfg.computers.push(Configured::from_parts(p, e)),
            Section::System => cfg.system = Some(Configured::from_parts(p, e)),
        }
    }
    if let Some(tcp_defaults) = defaults.get(&Section::Tcp) {
        let mut params = defaults_of(Section::Tcp);
        let mut explicit = NameSet::new();
        for e in tcp_defaults.iter().flat_map(|s| &s.entries) {
            params.insert(e.spec.name, e.value.clone());
            explicit.insert(e.spec.name);
        }
        cfg.tcp_default = Some(Configured::from_parts(params, explicit));
    }
    let mut computer_ids = std::collections::BTreeSet::new();
    if let Some((i, c)) = cfg
        .computers
        .iter()
        .enumerate()
        .find(|(_, c)| !computer_ids.insert(c.id.as_str()))
    {
        return Err(loc.error(
            Section::Computer,
            i,
            "Id",
            &c.params,
            "a [computer] with this Id is already defined",
        ));
    }
    super::check::finalize(&mut cfg, &loc)?;
    Ok(cfg)
}

fn is_node(kind: Section) -> bool {
    matches!(kind, Section::Ndbd | Section::NdbMgmd | Section::Api)
}

fn max_id(kind: Section) -> u32 {
    if kind == Section::Ndbd { 144 } else { 255 }
}

pub(crate) fn id_of(params: &ParamMap) -> Option<u32> {
    params
        .get("NodeId")
        .and_then(ParamValue::as_u64)
        .and_then(|v| u32::try_from(v).ok())
}

fn assign_node_ids(
    file: &str,
    items: &mut [Item],
    origins: &[BTreeMap<&'static str, Origin>],
) -> Result<(), ConfigError> {
    let nodes: Vec<usize> = (0..items.len())
        .filter(|&i| is_node(items[i].sec.kind))
        .collect();
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    for &i in &nodes {
        if let Some(id) = id_of(&items[i].params) {
            if let Some(&j) = used.get(&id) {
                let o = origins[i].get("NodeId");
                let (line, text) = o.map_or((items[i].sec.line, id.to_string()), |o| {
                    (o.line, o.text.clone())
                });
                let prev_line = origins[j]
                    .get("NodeId")
                    .map_or(items[j].sec.line, |o| o.line);
                return Err(ConfigError::new(
                    file,
                    line,
                    Some("NodeId"),
                    format!(
                        "{} NodeId={text}: duplicate NodeId, already used by {} at line {prev_line}",
                        items[i].sec.header, items[j].sec.header
                    ),
                ));
            }
            used.insert(id, i);
        }
    }
    let file_order_fits = nodes
        .iter()
        .enumerate()
        .all(|(pos, &i)| pos < max_id(items[i].sec.kind) as usize);
    let order: Vec<usize> = if used.is_empty() && file_order_fits {
        nodes.clone()
    } else {
        let kinds: Vec<Section> = nodes.iter().map(|&i| items[i].sec.kind).collect();
        [Section::Ndbd, Section::NdbMgmd, Section::Api]
            .iter()
            .flat_map(|k| {
                nodes
                    .iter()
                    .zip(&kinds)
                    .filter(move |(_, kind)| *kind == k)
                    .map(|(&i, _)| i)
            })
            .collect()
    };
    for i in order {
        let item = &mut items[i];
        if id_of(&item.params).is_none() {
            let max = max_id(item.sec.kind);
            let Some(id) = (1..=max).find(|id| !used.contains_key(id)) else {
                return Err(ConfigError::new(
                    file,
                    item.sec.line,
                    Some("NodeId"),
                    format!(
                        "{} no free NodeId left for this node (allowed 1..{max})",
                        item.sec.header
                    ),
                ));
            };
            used.insert(id, i);
            item.params.insert("NodeId", ParamValue::Int(u64::from(id)));
        }
        item.explicit.insert("NodeId");
    }
    Ok(())
}
