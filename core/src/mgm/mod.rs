//! Management commands with ndb_mgm's grammar and output lines, shared by the shell, the
//! Python module (`cluster.mgm(...)`) and the C ABI.
//!
//! Implemented here: `SHOW`, `ALL STATUS` / `<id> STATUS`, `ALL REPORT MEMORYUSAGE` /
//! `<id> REPORT MemoryUsage` (report names are case-insensitive and prefix-matched, as
//! ndb_mgm does), `<id> DUMP 1000` (memory usage to the cluster log, printed here).

use crate::api::ClusterInner;
use crate::error::{ErrorClassification, NdbError, Result};

/// NDB version string the nodes report.
pub const VERSION: &str = concat!("rndb-", env!("CARGO_PKG_VERSION"));

fn mgm_error(msg: impl Into<String>) -> NdbError {
    NdbError::new(5001, ErrorClassification::ApplicationError, msg)
}

/// Runs one management command and returns its output (lines joined by '\n').
pub fn execute(cluster: &ClusterInner, command: &str) -> Result<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some(first) = words.first() else {
        return Ok(String::new());
    };
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    if upper[0] == "SHOW" && words.len() == 1 {
        return Ok(show(cluster));
    }
    let targets: Vec<u32> = if upper[0] == "ALL" {
        cluster.data_nodes.iter().map(|n| n.node_id).collect()
    } else if let Ok(id) = first.parse::<u32>() {
        if cluster.node(id).is_none() {
            return Err(mgm_error(format!(
                "Node {id}: not a data node of this cluster"
            )));
        }
        vec![id]
    } else {
        return Err(mgm_error(format!("Invalid command: {command}")));
    };
    match upper.get(1).map(String::as_str) {
        Some("STATUS") if words.len() == 2 => Ok(targets
            .iter()
            .map(|id| format!("Node {id}: started ({VERSION})"))
            .collect::<Vec<_>>()
            .join("\n")),
        Some("REPORT") => {
            let Some(what) = upper.get(2) else {
                return Err(mgm_error("REPORT needs a report type: MemoryUsage"));
            };
            if words.len() == 3 && "MEMORYUSAGE".starts_with(what.as_str()) && !what.is_empty() {
                Ok(memory_report(cluster, &targets))
            } else {
                Err(mgm_error(format!("Unknown report type: {}", words[2])))
            }
        }
        Some("DUMP") if words.get(2) == Some(&"1000") => Ok(memory_report(cluster, &targets)),
        _ => Err(mgm_error(format!("Invalid command: {command}"))),
    }
}

/// `Node N: Data usage is P%(U 32K pages of total T)` and the Index line, per node.
pub fn memory_report(cluster: &ClusterInner, nodes: &[u32]) -> String {
    let mut lines = Vec::new();
    for (node, data, index, total) in crate::ndbinfo::node_memory(cluster) {
        if !nodes.contains(&node) {
            continue;
        }
        lines.push(usage_line(node, "Data", data, total));
        lines.push(usage_line(node, "Index", index, total));
    }
    lines.join("\n")
}

/// EventLogger's getTextMemoryUsage: percent truncated by integer division.
pub fn usage_line(node: u32, what: &str, used: u64, total: u64) -> String {
    let pct = (used * 100).checked_div(total).unwrap_or(0);
    format!("Node {node}: {what} usage is {pct}%({used} 32K pages of total {total})")
}

fn show(cluster: &ClusterInner) -> String {
    let config = cluster.config.read();
    let mut out = vec![
        "Cluster Configuration".to_string(),
        "---------------------".to_string(),
    ];
    out.push(format!("[ndbd(NDB)]\t{} node(s)", config.data_nodes.len()));
    for (i, n) in config.data_nodes.iter().enumerate() {
        let master = if i == 0 { ", *" } else { "" };
        out.push(format!(
            "id={}\t@127.0.0.1  ({VERSION}, Nodegroup: {}{master})",
            n.node_id, n.node_group
        ));
    }
    out.push(format!(
        "\n[ndb_mgmd(MGM)]\t{} node(s)",
        config.mgm_nodes.len()
    ));
    for n in &config.mgm_nodes {
        out.push(format!("id={}\t@127.0.0.1  ({VERSION})", n.node_id));
    }
    out.push(format!(
        "\n[mysqld(API)]\t{} node(s)",
        config.api_nodes.len()
    ));
    for n in &config.api_nodes {
        out.push(format!(
            "id={} (not connected, accepting connect from any host)",
            n.node_id
        ));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Cluster;
    use crate::config::ClusterConfig;

    #[test]
    fn memory_report_lines() {
        assert_eq!(
            usage_line(2, "Data", 14890, 32768),
            "Node 2: Data usage is 45%(14890 32K pages of total 32768)"
        );
        let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
        let out = execute(c.inner(), "all report mem").expect("report");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].starts_with("Node 2: Data usage is 0%(0 32K pages of total "),
            "{}",
            lines[0]
        );
        assert!(
            lines[3].starts_with("Node 3: Index usage is 0%(0 32K pages"),
            "{}",
            lines[3]
        );
        assert_eq!(
            execute(c.inner(), "3 REPORT MemoryUsage")
                .expect("one")
                .lines()
                .count(),
            2
        );
        assert_eq!(
            execute(c.inner(), "9 REPORT MemoryUsage").map_err(|e| e.code),
            Err(5001)
        );
        assert_eq!(
            execute(c.inner(), "ALL REPORT Foo").map_err(|e| e.code),
            Err(5001)
        );
        assert_eq!(
            execute(c.inner(), "ALL STATUS")
                .expect("status")
                .lines()
                .count(),
            2
        );
    }
}
