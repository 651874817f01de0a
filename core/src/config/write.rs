//! Writing configurations as config.ini text: [`to_ini`] and the embedded default layout.
//!
//! Invariants: `to_ini` writes only values that were given (never defaults or derived
//! values, which the reader recomputes), every node with its `NodeId`, data nodes in their
//! order (node groups are formed in file order), values through `ParamSpec::format_value`
//! (which the reader parses back unchanged). Values given identically on every data node
//! go to `[ndbd default]`. Hence `ClusterConfig::parse(&c.to_ini(), ..)` rebuilds `c`.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::params::params_of;
use super::{ClusterConfig, Configured, DataNodeConfig, NameSet, ParamMap};

pub(crate) fn to_ini(cfg: &ClusterConfig) -> String {
    let mut out = String::new();
    let source: String = cfg.source.chars().filter(|c| !c.is_control()).collect();
    let _ = writeln!(out, "# rndb cluster configuration (from {source})");
    let none = NameSet::new();
    if let Some(s) = &cfg.system {
        section(&mut out, "system", s, &none);
    }
    for c in &cfg.computers {
        section(&mut out, "computer", c, &none);
    }
    let common = common_data_params(&cfg.data_nodes);
    if let Some(first) = cfg.data_nodes.first().filter(|_| !common.is_empty()) {
        out.push_str("\n[ndbd default]\n");
        write_params(&mut out, first, &|name| common.contains(name));
    }
    for m in &cfg.mgm_nodes {
        section(&mut out, "ndb_mgmd", m, &none);
    }
    for d in &cfg.data_nodes {
        section(&mut out, "ndbd", d, &common);
    }
    for a in &cfg.api_nodes {
        section(&mut out, "mysqld", a, &none);
    }
    if let Some(t) = &cfg.tcp_default {
        out.push_str("\n[tcp default]\n");
        let explicit = &t.parts().1;
        write_params(&mut out, t, &|p| explicit.contains(p));
    }
    for t in &cfg.tcp_connections {
        section(&mut out, "tcp", t, &none);
    }
    out
}

fn section<T: Configured>(out: &mut String, name: &str, node: &T, skip: &NameSet) {
    let _ = writeln!(out, "\n[{name}]");
    let (_, explicit) = node.parts();
    write_params(out, node, &|p| explicit.contains(p) && !skip.contains(p));
}

/// Writes `Name=value` for the parameters `include` selects, in table order.
fn write_params<T: Configured>(out: &mut String, node: &T, include: &dyn Fn(&str) -> bool) {
    let params: &ParamMap = node.parts().0;
    for spec in params_of(T::SECTION) {
        if let Some(v) = params.get(spec.name).filter(|_| include(spec.name)) {
            let _ = writeln!(out, "{}={}", spec.name, spec.format_value(v));
        }
    }
}

/// Parameters (other than NodeId) given on every data node with the same value.
fn common_data_params(nodes: &[DataNodeConfig]) -> NameSet {
    let Some(first) = nodes.first() else {
        return BTreeSet::new();
    };
    first
        .explicit
        .iter()
        .copied()
        .filter(|name| *name != "NodeId")
        .filter(|name| {
            nodes
                .iter()
                .all(|n| n.explicit.contains(name) && n.params.get(name) == first.params.get(name))
        })
        .collect()
}

/// The embedded layout: mgmd 1, data nodes 2..=n+1, four API slots after them.
pub(crate) fn embedded_ini(data_nodes: u32, no_of_replicas: u32) -> String {
    let mut out = String::from("[ndbd default]\n");
    let _ = writeln!(out, "NoOfReplicas={no_of_replicas}");
    out.push_str("[ndb_mgmd]\nNodeId=1\n");
    for i in 0..u64::from(data_nodes) {
        let _ = writeln!(out, "[ndbd]\nNodeId={}", i + 2);
    }
    for i in 0..4 {
        let _ = writeln!(
            out,
            "[mysqld]\nNodeId={}\nHostName=localhost",
            u64::from(data_nodes) + 2 + i
        );
    }
    out
}
