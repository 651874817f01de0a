//! Cross-section rules and programmatic changes: [`finalize`] turns an assembled
//! configuration into a checked one; [`set_param`] changes data node parameters through it.
//!
//! Invariants:
//! - Derived parameters (FileSystemPath <- DataDir, BackupDataDir and FileSystemPathDD <-
//!   FileSystemPath, ...) follow their source unless given; `ExecuteOnComputer` supplies
//!   HostName unless HostName is given.
//! - Node ids are unique over all nodes; NoOfReplicas is equal on all data nodes and divides
//!   the number of data nodes in node groups; MaxNoOfConcurrentOperations >=
//!   MaxNoOfConcurrentTransactions; `[tcp]` ends are defined nodes, one a data node.
//! - Node groups: explicit `Nodegroup` first, then the other data nodes in file order fill
//!   the lowest group with fewer than NoOfReplicas members; every group must end up full.
//! - `finalize` is the single place that re-derives values, runs the checks and syncs the
//!   typed fields; `set_param` works on a copy and commits it only if `finalize` accepts it.

use std::collections::BTreeMap;

use super::build::{Locator, id_of};
use super::params::{ParamDefault, ParamValue, Section, params_of};
use super::table::NO_NODEGROUP;
use super::{ClusterConfig, ConfigError, Configured, ParamMap, Restart};

/// Re-derives values, checks every cross-section rule, forms node groups, syncs typed fields.
pub(crate) fn finalize(cfg: &mut ClusterConfig, loc: &Locator) -> Result<(), ConfigError> {
    let computers: BTreeMap<String, String> = cfg
        .computers
        .iter()
        .map(|c| (c.id.clone(), c.host_name.clone()))
        .collect();
    derive_all(&mut cfg.data_nodes, &computers, loc)?;
    derive_all(&mut cfg.mgm_nodes, &computers, loc)?;
    derive_all(&mut cfg.api_nodes, &computers, loc)?;

    let mut seen: BTreeMap<u32, (Section, usize)> = BTreeMap::new();
    let all = node_params(cfg);
    for &(kind, idx, params) in &all {
        let id = id_of(params).unwrap_or(0);
        if let Some(&(k, i)) = seen.get(&id) {
            let (line, header) = loc.section(k, i);
            let by = if line > 0 {
                format!("{header} at line {line}")
            } else {
                format!("node {id}")
            };
            return Err(loc.error(
                kind,
                idx,
                "NodeId",
                params,
                &format!("duplicate NodeId, already used by {by}"),
            ));
        }
        seen.insert(id, (kind, idx));
    }
    check_data_nodes(cfg, loc)?;
    form_node_groups(cfg, loc)?;
    for (idx, t) in cfg.tcp_connections.iter().enumerate() {
        let (a, b) = (
            u32::try_from(int(&t.params, "NodeId1")).unwrap_or(0),
            u32::try_from(int(&t.params, "NodeId2")).unwrap_or(0),
        );
        if a == b {
            return Err(loc.error(
                Section::Tcp,
                idx,
                "NodeId2",
                &t.params,
                "a connection from a node to itself is not allowed",
            ));
        }
        let kind_of = |id: u32| seen.get(&id).map(|&(k, _)| k);
        for (name, id) in [("NodeId1", a), ("NodeId2", b)] {
            if kind_of(id).is_none() {
                return Err(loc.error(
                    Section::Tcp,
                    idx,
                    name,
                    &t.params,
                    &format!("no node has NodeId {id}"),
                ));
            }
        }
        let (ka, kb) = (kind_of(a), kind_of(b));
        let mgm = Some(Section::NdbMgmd);
        if ka != Some(Section::Ndbd) && kb != Some(Section::Ndbd) && !(ka == mgm && kb == mgm) {
            return Err(loc.error(
                Section::Tcp,
                idx,
                "NodeId2",
                &t.params,
                "a connection needs a data node at one end (or two management nodes)",
            ));
        }
    }
    cfg.data_nodes.iter_mut().for_each(Configured::sync);
    cfg.mgm_nodes.iter_mut().for_each(Configured::sync);
    cfg.api_nodes.iter_mut().for_each(Configured::sync);
    Ok(())
}

fn int(p: &ParamMap, name: &str) -> u64 {
    p.get(name).and_then(ParamValue::as_u64).unwrap_or(0)
}

fn node_params(cfg: &ClusterConfig) -> Vec<(Section, usize, &ParamMap)> {
    let d = cfg
        .data_nodes
        .iter()
        .map(|n| &n.params)
        .enumerate()
        .map(|(i, p)| (Section::Ndbd, i, p));
    let m = cfg
        .mgm_nodes
        .iter()
        .map(|n| &n.params)
        .enumerate()
        .map(|(i, p)| (Section::NdbMgmd, i, p));
    let a = cfg
        .api_nodes
        .iter()
        .map(|n| &n.params)
        .enumerate()
        .map(|(i, p)| (Section::Api, i, p));
    d.chain(m).chain(a).collect()
}

/// Derived parameters and ExecuteOnComputer -> HostName.
fn derive_all<T: Configured>(
    nodes: &mut [T],
    computers: &BTreeMap<String, String>,
    loc: &Locator,
) -> Result<(), ConfigError> {
    for (idx, node) in nodes.iter_mut().enumerate() {
        let (params, explicit) = node.parts_mut();
        for spec in params_of(T::SECTION) {
            if let ParamDefault::Derived(src) = spec.default
                && !explicit.contains(spec.name)
            {
                match params.get(src).cloned() {
                    Some(v) => params.insert(spec.name, v),
                    None => params.remove(spec.name),
                };
            }
        }
        if let Some(comp) = params
            .get("ExecuteOnComputer")
            .and_then(ParamValue::as_str)
            .map(str::to_string)
            && !explicit.contains("HostName")
        {
            let Some(host) = computers.get(&comp) else {
                return Err(loc.error(
                    T::SECTION,
                    idx,
                    "ExecuteOnComputer",
                    params,
                    &format!("no [computer] section has Id={comp}"),
                ));
            };
            params.insert("HostName", ParamValue::Str(host.clone()));
        }
    }
    Ok(())
}

fn check_data_nodes(cfg: &ClusterConfig, loc: &Locator) -> Result<(), ConfigError> {
    let Some(first) = cfg.data_nodes.first() else {
        return Err(ConfigError::new(
            &loc.file,
            0,
            None,
            "no [ndbd] section: at least one data node must be defined",
        ));
    };
    let replicas = int(&first.params, "NoOfReplicas");
    for (idx, n) in cfg.data_nodes.iter().enumerate() {
        let p = &n.params;
        if p.get("HostName")
            .and_then(ParamValue::as_str)
            .is_some_and(str::is_empty)
        {
            return Err(loc.error(
                Section::Ndbd,
                idx,
                "HostName",
                p,
                "a data node needs a host name",
            ));
        }
        let (ops, trans) = (
            int(p, "MaxNoOfConcurrentOperations"),
            int(p, "MaxNoOfConcurrentTransactions"),
        );
        if ops < trans {
            let msg = format!(
                "MaxNoOfConcurrentOperations must be at least MaxNoOfConcurrentTransactions ({trans})"
            );
            return Err(loc.error(Section::Ndbd, idx, "MaxNoOfConcurrentOperations", p, &msg));
        }
        let r = int(p, "NoOfReplicas");
        if r != replicas {
            let msg = format!(
                "NoOfReplicas must be the same on all data nodes (node {} has {replicas})",
                int(&first.params, "NodeId")
            );
            return Err(loc.error(Section::Ndbd, idx, "NoOfReplicas", p, &msg));
        }
    }
    Ok(())
}

fn form_node_groups(cfg: &mut ClusterConfig, loc: &Locator) -> Result<(), ConfigError> {
    let Some(first) = cfg.data_nodes.first() else {
        return Ok(());
    };
    let replicas = int(&first.params, "NoOfReplicas").max(1);
    let grouped = cfg
        .data_nodes
        .iter()
        .filter(|n| {
            int(&n.params, "Nodegroup") != NO_NODEGROUP || !n.explicit.contains("Nodegroup")
        })
        .count();
    let outside = cfg.data_nodes.len() - grouped;
    if grouped == 0 || !(grouped as u64).is_multiple_of(replicas) {
        let mut msg = format!(
            "the number of data nodes ({grouped}) must be a multiple of NoOfReplicas ({replicas})"
        );
        if grouped == 0 {
            msg = "at least one data node must belong to a node group".into();
        } else if outside > 0 {
            msg.push_str(&format!(
                " (not counting {outside} node(s) with Nodegroup={NO_NODEGROUP})"
            ));
        }
        return Err(loc.error(Section::Ndbd, 0, "NoOfReplicas", &first.params, &msg));
    }
    let mut members: BTreeMap<u64, u64> = BTreeMap::new();
    for (idx, n) in cfg
        .data_nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.explicit.contains("Nodegroup"))
    {
        let g = int(&n.params, "Nodegroup");
        if g == NO_NODEGROUP {
            continue;
        }
        let count = members.entry(g).or_insert(0);
        *count += 1;
        if *count > replicas {
            let msg = format!("node group {g} already has NoOfReplicas ({replicas}) members");
            return Err(loc.error(Section::Ndbd, idx, "Nodegroup", &n.params, &msg));
        }
    }
    for n in cfg
        .data_nodes
        .iter_mut()
        .filter(|n| !n.explicit.contains("Nodegroup"))
    {
        let g = (0..)
            .find(|g| members.get(g).is_none_or(|&c| c < replicas))
            .unwrap_or(0);
        *members.entry(g).or_insert(0) += 1;
        n.params.insert("Nodegroup", ParamValue::Int(g));
    }
    let in_group = |g: u64, n: &super::DataNodeConfig| int(&n.params, "Nodegroup") == g;
    let partial: Vec<(u64, u64)> = members
        .iter()
        .filter(|(_, c)| **c != replicas)
        .map(|(g, c)| (*g, *c))
        .collect();
    // Report a group the user named, if any, at the Nodegroup line that named it.
    let named = partial.iter().find(|(g, _)| {
        cfg.data_nodes
            .iter()
            .any(|n| in_group(*g, n) && n.explicit.contains("Nodegroup"))
    });
    if let Some(&(g, c)) = named.or(partial.first()) {
        let idx = cfg
            .data_nodes
            .iter()
            .position(|n| in_group(g, n) && n.explicit.contains("Nodegroup"));
        let idx = idx
            .or_else(|| cfg.data_nodes.iter().position(|n| in_group(g, n)))
            .unwrap_or(0);
        let msg = format!("node group {g} has {c} member(s) but NoOfReplicas is {replicas}");
        return Err(loc.error(
            Section::Ndbd,
            idx,
            "Nodegroup",
            &cfg.data_nodes[idx].params,
            &msg,
        ));
    }
    Ok(())
}

/// `set_data_node_param` (`node == None`) and `set_node_param`.
pub(crate) fn set_param(
    cfg: &mut ClusterConfig,
    node: Option<u32>,
    name: &str,
    value: &str,
) -> Result<Restart, ConfigError> {
    let header = if node.is_some() {
        "[ndbd]"
    } else {
        "[ndbd default]"
    };
    let file = "<argument>";
    let mut warnings = Vec::new();
    let spec = super::parse::resolve_name(name, Section::Ndbd, header, file, 0, &mut warnings)?;
    if node.is_none() && spec.name == "NodeId" {
        return Err(ConfigError::new(
            file,
            0,
            Some(spec.name),
            format!("{header} NodeId={value}: NodeId cannot be given in a default section"),
        ));
    }
    let v = spec.parse_value(value).map_err(|msg| {
        ConfigError::new(
            file,
            0,
            Some(spec.name),
            format!("{header} {}={}: {msg}", spec.name, value.trim()),
        )
    })?;
    let mut next = cfg.clone();
    let mut touched = 0;
    for n in next
        .data_nodes
        .iter_mut()
        .filter(|n| node.is_none_or(|id| n.node_id == id))
    {
        n.params.insert(spec.name, v.clone());
        n.explicit.insert(spec.name);
        touched += 1;
    }
    if let (Some(id), 0) = (node, touched) {
        return Err(ConfigError::new(
            file,
            0,
            Some(spec.name),
            format!(
                "{header} {}={}: no data node has NodeId {id}",
                spec.name,
                value.trim()
            ),
        ));
    }
    finalize(&mut next, &Locator::argument(header))?;
    if let Some(w) = spec.deprecated {
        warnings.push(format!("{file}: {w}"));
    }
    next.warnings.extend(warnings);
    *cfg = next;
    Ok(spec.restart)
}
