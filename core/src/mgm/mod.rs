//! Management commands with ndb_mgm's grammar and output lines, shared by the shell
//! (`rndb_mgm`), the Python module (`cluster.mgm(...)`) and the C ABI.
//!
//! Commands ([`parse`] then [`run`], or [`execute`] for both):
//! - `SHOW`, `ALL STATUS` / `<id> STATUS`, `ALL REPORT MEMORYUSAGE` / `<id> REPORT
//!   MemoryUsage` / `REPORT EventLog` / `REPORT DiskPageBuffer` ([`disk_report`]: the
//!   page cache and the advisor's predictions) / `REPORT Fragmentation` ([`frag_report`]:
//!   what OPTIMIZE TABLE would give back, per table) (report names case-insensitive and
//!   prefix-matched, as ndb_mgm does), `<id> DUMP 1000`;
//! - `CLUSTERLOG ON|OFF|TOGGLE [severity...]`, `CLUSTERLOG INFO`: the cluster log
//!   ([`log`]), written to `ndb_<mgm id>_cluster.log` in the data directory;
//! - `ENTER SINGLE USER MODE <api id>` / `EXIT SINGLE USER MODE` (real: other API nodes get
//!   error 299, see [`crate::api::cluster`]);
//! - `SHUTDOWN` (really stops the embedded cluster);
//! - `SET <Parameter>=<value>`: changes a data node parameter in the cluster's
//!   configuration, applying the ones that need no restart at once;
//! - `<id> STOP`, `<id> START`, `<id> RESTART [-n] [-i] [-a] [-f]`, `ROLLING RESTART`:
//!   refused with the reason (node recovery and persistence do not exist yet), never
//!   faked; `START BACKUP`, `CREATE NODEGROUP` likewise. `ALL RESTART -i` (an initial
//!   system restart) replaces the cluster, so the shell (`rndb_mgm`), which owns it, does
//!   it; here it is refused. [`initial_start_lines`] is what an initial start says about
//!   the disk-data files it removed.
//!
//! Errors are NDB error 5001 (5000 for configuration errors) with a one-line message.
//! Every command first samples memory usage, so threshold crossings reach the cluster log.

pub mod disk_report;
pub mod frag_report;
pub mod help;
pub mod log;
pub mod parse;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_disk;
#[cfg(test)]
mod tests_frag;

pub use log::{ClusterLog, MgmState, Severity, sample_events};
pub use parse::{ClusterLogCmd, Command, Flags, Report, Target, is_config_set, parse, suggest};

use crate::api::ClusterInner;
use crate::config::{ParamValue, Restart, Section, lookup_param_in};
use crate::error::{ErrorClassification, NdbError, Result, codes};

/// NDB version string the nodes report.
pub const VERSION: &str = concat!("rndb-", env!("CARGO_PKG_VERSION"));

pub fn mgm_error(msg: impl Into<String>) -> NdbError {
    NdbError::new(5001, ErrorClassification::ApplicationError, msg)
}

/// Runs one management command and returns its output (lines joined by '\n').
pub fn execute(cluster: &ClusterInner, command: &str) -> Result<String> {
    match parse(command)? {
        None => Ok(String::new()),
        Some(cmd) => run(cluster, &cmd),
    }
}

/// Runs a parsed command.
pub fn run(cluster: &ClusterInner, cmd: &Command) -> Result<String> {
    // After ALL STOP (`all_data_nodes_down`) the closed cluster still answers what only
    // reads its state: every data node not connected.
    let down_read = cluster.is_closed()
        && cluster
            .data_nodes
            .iter()
            .all(|n| n.run_state() == crate::api::node_restart::NodeRunState::Stopped)
        && matches!(
            cmd,
            Command::Show | Command::Status(_) | Command::ClusterLog(_)
        );
    if !matches!(cmd, Command::Help(_)) && !down_read {
        cluster.check_open()?;
        sample_events(cluster);
    }
    match cmd {
        Command::Help(None) => Ok(help::GENERAL.to_string()),
        Command::Help(Some(t)) => help::topic(t).map(str::to_string).ok_or_else(|| {
            mgm_error(format!(
                "No help for {}. Type HELP for the list of commands.",
                parse::shorten(t)
            ))
        }),
        Command::Show => Ok(show(cluster)),
        Command::Status(t) => status(cluster, *t),
        Command::Report(t, Report::MemoryUsage) => {
            Ok(memory_report(cluster, &data_targets(cluster, *t)?))
        }
        Command::Report(t, Report::DiskPageBuffer) => Ok(disk_report::disk_page_buffer_lines(
            cluster,
            &data_targets(cluster, *t)?,
        )
        .join("\n")),
        Command::Report(t, Report::Fragmentation) => {
            Ok(frag_report::fragmentation_lines(cluster, &data_targets(cluster, *t)?).join("\n"))
        }
        Command::Report(t, Report::EventLog) => {
            let mut out = Vec::new();
            for id in data_targets(cluster, *t)? {
                out.extend(cluster.mgm.log.lines(Some(id)));
            }
            Ok(out.join("\n"))
        }
        Command::Dump(t, codes) => dump(cluster, *t, codes),
        Command::ClusterLog(c) => Ok(clusterlog(&cluster.mgm.log, c)),
        Command::EnterSingleUser(id) => enter_single_user(cluster, *id),
        Command::ExitSingleUser => exit_single_user(cluster),
        Command::Stop(t, _) => {
            let ids = data_targets(cluster, *t)?;
            match t {
                Target::All if cluster.data_dir.is_some() => Err(mgm_error("Shutdown of NDB Cluster node(s) refused here: ALL STOP stops every data node of the embedded cluster, and starting them again (ALL START, a system restart) replaces the cluster, which only its owner can do. rndb_mgm does it; from the API, shut the cluster down and start it again with Cluster::embedded_in on the same directory.".to_string())),
                Target::All => Err(mgm_error("Shutdown of NDB Cluster node(s) failed: ALL STOP would stop every data node, and this cluster keeps nothing on disk (no data directory): they would come back empty. Use SHUTDOWN to stop the cluster.".to_string())),
                Target::Node(id) => {
                    cluster.stop_node(*id)?;
                    Ok(format!(
                        "Node {id}: Node shutdown initiated\nNode {} has shutdown.",
                        ids[0]
                    ))
                }
            }
        }
        Command::Start(t) => {
            let ids = data_targets(cluster, *t)?;
            let stopped: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|&id| {
                    cluster.node(id).is_some_and(|n| {
                        n.run_state() == crate::api::node_restart::NodeRunState::Stopped
                    })
                })
                .collect();
            if stopped.is_empty() {
                return Err(mgm_error(format!(
                    "Start failed: data node(s) {} already started",
                    join_ids(&ids)
                )));
            }
            let mut out = Vec::new();
            for id in stopped {
                cluster.start_node(id)?;
                out.push(format!("Database node {id} is being started."));
            }
            Ok(out.join("\n"))
        }
        Command::Restart(t, flags) => restart(cluster, *t, flags),
        Command::RollingRestart => rolling_restart(cluster),
        Command::Shutdown => Ok(shutdown(cluster)),
        Command::Set { name, value } => set(cluster, name, value),
        Command::Backup(text) | Command::NodeGroup(text) => Err(mgm_error(not_in_rndb(cmd, text))),
        Command::PurgeStaleSessions => Ok("No sessions purged".to_string()),
    }
}

/// Why `START BACKUP` and `CREATE NODEGROUP` (`cmd`, typed as `text`) are refused, in
/// every kind of cluster.
pub fn not_in_rndb(cmd: &Command, text: &str) -> String {
    let what = match cmd {
        Command::Backup(_) => {
            "online backups (START BACKUP, ndb_restore) are not implemented in rndb; a restart recovers from the data directory's checkpoints and redo"
        }
        _ => {
            "adding or dropping node groups online is not implemented in rndb; the node groups are the configuration's [ndbd] sections"
        }
    };
    format!("{}: {what}.", parse::shorten(text))
}

fn join_ids(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// "Node 9: no such node (...)" naming the nodes there are.
fn no_such_node(cluster: &ClusterInner, id: u32) -> NdbError {
    let data: Vec<u32> = cluster.data_nodes.iter().map(|n| n.node_id).collect();
    node_error(
        id,
        &data,
        &[cluster.mgm.mgm_node_id],
        cluster.api_node_ids(),
    )
}

/// The error for a node command naming node `id`, which is not one of the data nodes
/// `data`: a management or API node of the configuration, or no node at all. Shared
/// by the embedded cluster and `rndb_mgmd`.
pub(crate) fn node_error(id: u32, data: &[u32], mgm: &[u32], api: &[u32]) -> NdbError {
    if mgm.contains(&id) || api.contains(&id) {
        return mgm_error(format!(
            "Node {id}: not a data node; this command is for data nodes ({})",
            join_ids(data)
        ));
    }
    mgm_error(format!(
        "Node {id}: no such node. Data nodes: {}; management node: {}; API nodes: {}",
        join_ids(data),
        join_ids(mgm),
        join_ids(api)
    ))
}

/// The data node ids a command is for; error when `<id>` is not a data node.
fn data_targets(cluster: &ClusterInner, t: Target) -> Result<Vec<u32>> {
    match t {
        Target::All => Ok(cluster.data_nodes.iter().map(|n| n.node_id).collect()),
        Target::Node(id) if cluster.node(id).is_some() => Ok(vec![id]),
        Target::Node(id) => Err(no_such_node(cluster, id)),
    }
}

fn data_node_state(cluster: &ClusterInner) -> &'static str {
    if cluster.single_user_node().is_some() {
        "single user mode"
    } else {
        "started"
    }
}

fn status(cluster: &ClusterInner, t: Target) -> Result<String> {
    if let Target::Node(id) = t
        && cluster.node(id).is_none()
    {
        if id == cluster.mgm.mgm_node_id {
            return Ok(format!("Node {id}: connected ({VERSION})"));
        }
        if cluster.api_node_ids().contains(&id) {
            return Ok(if cluster.connected_api_nodes().contains(&id) {
                format!("Node {id}: connected ({VERSION})")
            } else {
                format!("Node {id}: not connected")
            });
        }
        return Err(no_such_node(cluster, id));
    }
    let state = data_node_state(cluster);
    Ok(data_targets(cluster, t)?
        .iter()
        .map(|&id| {
            use crate::api::node_restart::NodeRunState;
            let Some(n) = cluster.node(id) else {
                return format!("Node {id}: {state} ({VERSION})");
            };
            match n.run_state() {
                NodeRunState::Stopped => format!("Node {id}: not connected"),
                // With a data directory a restarted node serves once copied, and its
                // restart completes with the local checkpoint after the copy.
                NodeRunState::Started if n.restart_complete() => {
                    format!("Node {id}: {state} ({VERSION})")
                }
                NodeRunState::Starting | NodeRunState::Started => {
                    let phase = n.start_phase();
                    format!("Node {id}: starting (Last completed phase {phase}) ({VERSION})")
                }
            }
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

/// `Node N: Data usage is P%(U 32K pages of total T)` and the Index line, per node.
pub fn memory_report(cluster: &ClusterInner, nodes: &[u32]) -> String {
    memory_lines(cluster, nodes).join("\n")
}

fn memory_lines(cluster: &ClusterInner, nodes: &[u32]) -> Vec<String> {
    let mut lines = Vec::new();
    for (node, data, index, total) in crate::ndbinfo::node_memory(cluster) {
        if !nodes.contains(&node) {
            continue;
        }
        if cluster
            .node(node)
            .is_some_and(|n| n.run_state() == crate::api::node_restart::NodeRunState::Stopped)
        {
            lines.push(format!("Node {node}: not connected"));
            continue;
        }
        lines.push(usage_line(node, "Data", data, total));
        lines.push(usage_line(node, "Index", index, total));
    }
    lines
}

/// EventLogger's getTextMemoryUsage: percent truncated by integer division.
pub fn usage_line(node: u32, what: &str, used: u64, total: u64) -> String {
    let pct = (used * 100).checked_div(total).unwrap_or(0);
    format!("Node {node}: {what} usage is {pct}%({used} 32K pages of total {total})")
}

fn dump(cluster: &ClusterInner, t: Target, codes: &[u32]) -> Result<String> {
    let ids = data_targets(cluster, t)?;
    let mut out = dump_header(codes)?;
    for line in memory_lines(cluster, &ids) {
        // "Node 2: Data usage is ..." -> event of node 2
        let (node, text) = split_node(&line);
        cluster.mgm.log.event(Severity::Info, node, text);
        out.push(line);
    }
    Ok(out.join("\n"))
}

/// ndb_mgm's first lines for `DUMP <codes>`; an error for a code rndb does not know.
pub(crate) fn dump_header(codes: &[u32]) -> Result<Vec<String>> {
    if codes.first() != Some(&1000) {
        return Err(mgm_error(format!(
            "DUMP {} is not supported by rndb (supported: DUMP 1000, memory usage)",
            codes.first().copied().unwrap_or(0)
        )));
    }
    Ok(vec![
        "Sending dump signal with data:".to_string(),
        codes
            .iter()
            .map(|c| format!("0x{c:08x}"))
            .collect::<Vec<_>>()
            .join(" "),
    ])
}

/// What a data node process (`rndbd`) runs for the management server (`NodeCommand`,
/// `cluster::mgmd`): `REPORT MemoryUsage|DiskPageBuffer|Fragmentation` and `DUMP 1000`
/// give the node's own lines (its local engine holds only its replicas), `SET
/// <param>=<value>` applies a parameter that takes effect at once to the node. Any
/// other command is the management server's, not the node's: an error.
pub fn run_on_data_node(cluster: &ClusterInner, text: &str) -> Result<String> {
    let Some(cmd) = parse(text)? else {
        return Ok(String::new());
    };
    match cmd {
        Command::Report(
            _,
            r @ (Report::MemoryUsage | Report::DiskPageBuffer | Report::Fragmentation),
        ) => run(cluster, &Command::Report(Target::All, r)),
        Command::Dump(_, codes) => {
            dump_header(&codes)?;
            let ids: Vec<u32> = cluster.data_nodes.iter().map(|n| n.node_id).collect();
            Ok(memory_lines(cluster, &ids).join("\n"))
        }
        // The management server logs the change once for the cluster: the node's own
        // engine does not log it again.
        Command::Set { name, value } if applied_at_once(&name) => {
            set_logged(cluster, &name, &value, false)
        }
        _ => Err(mgm_error(format!(
            "{}: not a command a data node runs",
            parse::shorten(text)
        ))),
    }
}

/// Whether `SET <name>=...` takes effect on running data nodes without a restart (at
/// once, or at their next local checkpoint round): the management server then sends
/// it to every running data node.
pub(crate) fn applied_at_once(name: &str) -> bool {
    let pname = lookup_param_in(Section::Ndbd, name).map_or(name, |s| s.name);
    APPLIED_AT_ONCE.contains(&pname) || READ_AT_EACH_LCP_ROUND.contains(&pname)
}

/// What a `SET` of `pname` that running data nodes take ([`applied_at_once`]) does:
/// the same words for the embedded cluster and for `rndb_mgmd`.
pub(crate) fn set_effect_now(pname: &str, restart: Restart) -> &'static str {
    if READ_AT_EACH_LCP_ROUND.contains(&pname) {
        return "in effect from each data node's next local checkpoint round, no restart needed";
    }
    match restart {
        Restart::None => "in effect now, no restart needed",
        // The page cache resizes in place (growing adds frames, shrinking writes and
        // evicts pages) and keeps its history.
        _ => {
            "in effect now: every data node's page cache was resized online (NDB needs a rolling restart for this)"
        }
    }
}

/// (node id, text) of a line `Node N: text`; (0, line) for any other line.
pub(crate) fn split_node(line: &str) -> (u32, &str) {
    let rest = line.strip_prefix("Node ").unwrap_or(line);
    match rest.split_once(": ") {
        Some((n, text)) => (n.parse().unwrap_or(0), text),
        None => (0, line),
    }
}

/// `CLUSTERLOG ...` on the cluster log `log` (the embedded cluster's, or `rndb_mgmd`'s).
pub(crate) fn clusterlog(log: &ClusterLog, c: &ClusterLogCmd) -> String {
    match c {
        ClusterLogCmd::Info => {
            if !log.is_enabled() {
                return "Cluster logging is disabled.".to_string();
            }
            let on: Vec<&str> = Severity::ALL
                .iter()
                .filter(|s| log.severity_enabled(**s))
                .map(|s| s.name())
                .collect();
            let file = match (log.path(), log.file_error()) {
                (Some(_), Some(e)) => format!("Log file: not written ({e})"),
                (Some(p), None) => format!("Log file: {}", p.display()),
                (None, _) => {
                    "Log file: none (no data directory); ALL REPORT EventLog shows the events"
                        .to_string()
                }
            };
            format!("Severities enabled: {}\n{file}", on.join(" "))
        }
        ClusterLogCmd::Set(mode, sevs) if sevs.is_empty() => {
            let on = mode.unwrap_or(!log.is_enabled());
            log.set_enabled(on);
            format!(
                "Cluster logging is {}.",
                if on { "enabled" } else { "disabled" }
            )
        }
        ClusterLogCmd::Set(mode, sevs) => {
            let mut out = Vec::new();
            for s in sevs {
                let on = mode.unwrap_or(!log.severity_enabled(*s));
                log.set_severity(*s, on);
                out.push(format!(
                    "{} {}",
                    s.name(),
                    if on { "enabled" } else { "disabled" }
                ));
            }
            out.join("\n")
        }
    }
}

/// ENTER/EXIT SINGLE USER MODE as ndb_mgm words them: the embedded cluster's shell
/// (below, with `ClusterInner::enter_single_user_mode`) and `rndb_mgmd`
/// (`cluster::mgmd`) say the same.
pub(crate) mod single_user_text {
    pub fn not_api(id: u32) -> String {
        format!("node {id} is not an API node of this cluster")
    }
    pub fn already(current: u32) -> String {
        format!("the cluster is already in single user mode for node {current}")
    }
    pub fn enter_failed(id: u32, why: &str) -> String {
        format!("Entering single user mode for node {id} failed: {why}")
    }
    /// The data node's cluster log events, in order.
    pub const ENTERING_EVENT: &str = "Entering single user mode";
    pub fn entered_event(id: u32) -> String {
        format!("Entered single user mode Node {id} has exclusive access")
    }
    pub fn entered(id: u32) -> String {
        format!("Single user mode entered\nAccess is granted for API node {id} only.")
    }
    pub const NOT_IN_MODE: &str =
        "Exiting single user mode failed: the cluster is not in single user mode";
    pub fn exiting_event(was: u32) -> String {
        format!("Exiting single user mode (node {was} had exclusive access)")
    }
    pub const EXITING: &str = "Exiting single user mode in progress.\n\
        Use ALL STATUS or SHOW to see when single user mode has been exited.";
}

fn enter_single_user(cluster: &ClusterInner, id: u32) -> Result<String> {
    if let Err(e) = cluster.enter_single_user_mode(id) {
        let why = e
            .message
            .rsplit(": ")
            .next()
            .unwrap_or(&e.message)
            .to_string();
        return Err(mgm_error(single_user_text::enter_failed(id, &why)));
    }
    for n in &cluster.data_nodes {
        let log = &cluster.mgm.log;
        log.event(Severity::Info, n.node_id, single_user_text::ENTERING_EVENT);
        log.event(
            Severity::Info,
            n.node_id,
            &single_user_text::entered_event(id),
        );
    }
    Ok(single_user_text::entered(id))
}

fn exit_single_user(cluster: &ClusterInner) -> Result<String> {
    let Some(was) = cluster.single_user_node() else {
        return Err(mgm_error(single_user_text::NOT_IN_MODE));
    };
    cluster.exit_single_user_mode();
    for n in &cluster.data_nodes {
        cluster.mgm.log.event(
            Severity::Info,
            n.node_id,
            &single_user_text::exiting_event(was),
        );
    }
    Ok(single_user_text::EXITING.to_string())
}

fn restart(cluster: &ClusterInner, t: Target, flags: &Flags) -> Result<String> {
    let ids = data_targets(cluster, t)?;
    match t {
        Target::All if flags.initial => Err(mgm_error(format!(
            "Restart of data nodes {} refused here: ALL RESTART -i (an initial system restart, all data wiped) replaces the embedded cluster, which only its owner can do. rndb_mgm does it; from the API, shut the cluster down and start it with Cluster::embedded_initial. Nothing was restarted.",
            join_ids(&ids)
        ))),
        Target::All if cluster.data_dir.is_some() => Err(mgm_error(format!(
            "Restart of data nodes {} refused here: ALL RESTART (a system restart: every node stopped, then recovering what it saved) replaces the embedded cluster, which only its owner can do. rndb_mgm does it; from the API, shut the cluster down and start it again with Cluster::embedded_in on the same directory. Nothing was restarted.",
            join_ids(&ids)
        ))),
        Target::All => Err(mgm_error(format!(
            "Restart of data nodes {} refused: ALL RESTART is a system restart, and this cluster keeps nothing on disk (no data directory), so it would come back empty; ROLLING RESTART restarts every node while the cluster serves and keeps the data; ALL RESTART -i starts empty on purpose. Nothing was restarted.",
            join_ids(&ids)
        ))),
        Target::Node(id) => {
            // A node restart here copies the node's data from its live replicas: the
            // same as an initial node restart (-i), which NDB's --initial also does.
            cluster.stop_node(id)?;
            let mut out = format!("Node {id}: Node shutdown initiated");
            if flags.nostart {
                out.push_str(&format!(
                    "\nNode {id} is being restarted; it waits for START (-n)"
                ));
            } else {
                cluster.start_node(id)?;
                out.push_str(&format!("\nNode {id} is being restarted"));
            }
            Ok(out)
        }
    }
}

/// `ROLLING RESTART`: every data node restarted in turn, never two of one node group
/// at once: each is stopped, started (its data copied from the live replicas) and
/// waited for before the next (at most [`ROLLING_RESTART_NODE_TIMEOUT`] each); with a
/// data directory, until its files restore it again (its local checkpoint after the
/// copy is saved), so that a crash at any moment of the rolling restart leaves every
/// node group a node to restore from.
fn rolling_restart(cluster: &ClusterInner) -> Result<String> {
    use crate::api::node_restart::NodeRunState;
    if let Some(n) = cluster
        .data_nodes
        .iter()
        .find(|n| n.run_state() != NodeRunState::Started)
    {
        return Err(mgm_error(format!(
            "Rolling restart refused: node {} is not started; start it first",
            n.node_id
        )));
    }
    let mut out = vec!["Rolling restart of the data nodes, one at a time:".to_string()];
    for n in &cluster.data_nodes {
        let id = n.node_id;
        let t0 = std::time::Instant::now();
        cluster.stop_node(id)?;
        cluster.start_node(id)?;
        while n.run_state() != NodeRunState::Started || !n.restart_complete() {
            if n.run_state() == NodeRunState::Stopped {
                let why = n
                    .restart_failure
                    .lock()
                    .clone()
                    .unwrap_or_else(|| "see the cluster log".to_string());
                return Err(mgm_error(format!(
                    "Rolling restart stopped: node {id} failed to start again ({why}); it is stopped, {} node(s) restarted before it",
                    out.len() - 1
                )));
            }
            if t0.elapsed() > ROLLING_RESTART_NODE_TIMEOUT {
                return Err(mgm_error(format!(
                    "Rolling restart stopped: node {id} did not start within {} s",
                    ROLLING_RESTART_NODE_TIMEOUT.as_secs()
                )));
            }
            cluster.check_open()?;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        out.push(format!(
            "Node {id}: restarted in {} ms",
            t0.elapsed().as_millis()
        ));
    }
    out.push("Rolling restart completed.".to_string());
    Ok(out.join("\n"))
}

/// How long a rolling restart waits for one node.
pub const ROLLING_RESTART_NODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

fn shutdown(cluster: &ClusterInner) -> String {
    let ids: Vec<u32> = cluster.data_nodes.iter().map(|n| n.node_id).collect();
    let mut out = Vec::new();
    for id in &ids {
        cluster
            .mgm
            .log
            .event(Severity::Info, *id, "Cluster shutdown initiated");
        out.push(format!("Node {id}: Cluster shutdown initiated"));
    }
    cluster.shutdown();
    for id in &ids {
        cluster
            .mgm
            .log
            .event(Severity::Info, *id, "Node shutdown completed.");
        out.push(format!("Node {id}: Node shutdown completed."));
    }
    out.push(format!(
        "{} NDB Cluster node(s) have shutdown.",
        ids.len() + 1
    ));
    out.push("Disconnecting to allow management server to shutdown.".to_string());
    cluster.mgm.log.event(
        Severity::Info,
        cluster.mgm.mgm_node_id,
        "Management server shutdown completed.",
    );
    out.push("NDB Cluster has shutdown.".to_string());
    out.join("\n")
}

/// Parameters the running engine takes when they change
/// ([`ClusterInner::apply_dynamic_params`]), whatever restart NDB needs for them.
const APPLIED_AT_ONCE: &[&str] = &[
    "TransactionDeadlockDetectionTimeout",
    "DiskPageBufferMemory",
];

/// Parameters each local checkpoint round reads from the configuration when it starts
/// (`api::lcp`'s write pacing).
const READ_AT_EACH_LCP_ROUND: &[&str] = &[
    "MinDiskWriteSpeed",
    "MaxDiskWriteSpeed",
    "MaxDiskWriteSpeedOwnRestart",
];

/// Parameters a data node takes when it restarts (`ClusterInner::start_node`).
const APPLIED_AT_NODE_RESTART: &[&str] = &["DataMemory"];

fn set(cluster: &ClusterInner, name: &str, value: &str) -> Result<String> {
    set_logged(cluster, name, value, true)
}

/// `SET name=value`; `log`: the config change's line goes to the cluster log.
fn set_logged(cluster: &ClusterInner, name: &str, value: &str, log: bool) -> Result<String> {
    let spec = lookup_param_in(Section::Ndbd, name);
    let show = |v: Option<&ParamValue>| match (spec, v) {
        (Some(s), Some(v)) => s.format_value(v),
        _ => "(not set)".to_string(),
    };
    let (old, new, restart, ids) = {
        let mut config = cluster.config.write();
        let old = show(config.data_nodes.first().and_then(|n| n.get(name)));
        let restart = config
            .set_data_node_param(name, value)
            .map_err(codes::bad_config)?;
        let new = show(config.data_nodes.first().and_then(|n| n.get(name)));
        let ids: Vec<u32> = config.data_nodes.iter().map(|n| n.node_id).collect();
        (old, new, restart, ids)
    };
    let pname = spec.map_or(name, |s| s.name);
    let effect = match restart {
        _ if applied_at_once(pname) => {
            cluster.apply_dynamic_params()?;
            set_effect_now(pname, restart).to_string()
        }
        Restart::None => format!("no restart needed (rndb does not use {pname} yet)"),
        Restart::Rolling if APPLIED_AT_NODE_RESTART.contains(&pname) && cluster.data_dir.is_none() => "each data node takes it when it restarts, as with NDB: ROLLING RESTART (one node at a time, the data copied back) or <id> RESTART; until then every node keeps its current value".to_string(),
        Restart::Rolling => "NDB applies it with a rolling restart; rndb's data nodes read it when the cluster starts (a ROLLING RESTART here restarts each node with the values it started with; ALL RESTART -i in rndb_mgm applies it now, wiping all data)".to_string(),
        Restart::Initial => "an initial (system) restart is needed to apply it (until then the nodes keep the old value; ALL RESTART -i in rndb_mgm applies it now, wiping all data)".to_string(),
    };
    let what = format!(
        "{pname} changed from {old} to {new} for data nodes {}",
        join_ids(&ids)
    );
    if !log {
        return Ok(format!("{what}: {effect}"));
    }
    let generation = cluster.mgm.next_generation();
    cluster.mgm.log.event(
        Severity::Info,
        cluster.mgm.mgm_node_id,
        &format!(
            "Config change completed! New generation: {generation} ({what}; {})",
            restart.describe()
        ),
    );
    Ok(format!("{what}: {effect}"))
}

/// What an initial start (`--initial`) says about the disk-data files it removed: a
/// summary line, then one indented line per file; nothing when it removed none.
pub fn initial_start_lines(removed: &[std::path::PathBuf]) -> Vec<String> {
    if removed.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "Initial start: removed {} file{} created by an earlier run (NDB leaves them behind):",
        removed.len(),
        if removed.len() == 1 { "" } else { "s" }
    )];
    lines.extend(removed.iter().map(|p| format!("  {}", p.display())));
    lines
}

/// A data node's cluster log line for the disk-data files its initial start removed
/// (None when none).
pub fn initial_removed_event(removed: &[std::path::PathBuf]) -> Option<String> {
    (!removed.is_empty()).then(|| {
        format!(
            "Initial start: removed {} file{} created by an earlier run: {}",
            removed.len(),
            if removed.len() == 1 { "" } else { "s" },
            removed
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Called by the owner of the cluster (`rndb_mgm`) before it stops the cluster for
/// `ALL RESTART [-i]`: logs each data node's shutdown for the restart.
/// `ALL STOP` (`restart` None) or `ALL RESTART -n` (`Some(initial)`) of the embedded
/// cluster, which its owner (the shell) then shuts down: each data node's stop goes to
/// the cluster log, and once `cluster` is closed ([`all_data_nodes_down`]) every node
/// shows as not connected.
pub fn on_all_stop(cluster: &ClusterInner, restart: Option<bool>) {
    let completed = match restart {
        None => "Node shutdown completed.",
        Some(false) => "Node shutdown completed, restarting, no start.",
        Some(true) => "Node shutdown completed, restarting, no start (initial start).",
    };
    for n in &cluster.data_nodes {
        let log = &cluster.mgm.log;
        log.event(Severity::Info, n.node_id, "Node shutdown initiated");
        log.event(Severity::Alert, n.node_id, completed);
    }
}

/// After the owner closed `cluster` for `ALL STOP`: every data node is stopped, so that
/// `ALL STATUS` and `SHOW` (which read nothing else of a closed cluster) show them not
/// connected until the owner starts a new cluster.
pub fn all_data_nodes_down(cluster: &ClusterInner) -> Result<()> {
    if !cluster.is_closed() {
        return Err(crate::error::codes::internal(
            "all_data_nodes_down on a running cluster",
        ));
    }
    for n in &cluster.data_nodes {
        n.mark_stopped();
    }
    Ok(())
}

pub fn on_system_restart(cluster: &ClusterInner, initial: bool) {
    for n in &cluster.data_nodes {
        let log = &cluster.mgm.log;
        log.event(Severity::Info, n.node_id, "Node shutdown initiated");
        log.event(
            Severity::Info,
            n.node_id,
            if initial {
                "Node shutdown completed, restarting (initial start)."
            } else {
                "Node shutdown completed, restarting."
            },
        );
    }
}

/// Called once when a cluster starts: logs each data node's start (and, on an initial
/// start, the disk-data files removed from the node's file system).
pub fn on_cluster_start(cluster: &ClusterInner) {
    for n in &cluster.data_nodes {
        let log = &cluster.mgm.log;
        log.event(
            Severity::Info,
            n.node_id,
            &format!("Start initiated (version {VERSION})"),
        );
        let mine: Vec<std::path::PathBuf> = cluster
            .initial_removed
            .iter()
            .filter(|p| p.starts_with(n.disk.fs_dir()))
            .cloned()
            .collect();
        if let Some(line) = initial_removed_event(&mine) {
            log.event(Severity::Info, n.node_id, &line);
        }
        log.event(
            Severity::Info,
            n.node_id,
            &format!("Started (version {VERSION})"),
        );
    }
    sample_events(cluster);
}

fn show(cluster: &ClusterInner) -> String {
    let config = cluster.config.read();
    let state = match cluster.single_user_node() {
        Some(_) => ", single user mode",
        None => "",
    };
    let mut out = vec![
        "Cluster Configuration".to_string(),
        "---------------------".to_string(),
    ];
    out.push(format!("[ndbd(NDB)]\t{} node(s)", cluster.data_nodes.len()));
    use crate::api::node_restart::NodeRunState;
    let master = cluster
        .data_nodes
        .iter()
        .find(|n| n.run_state() == NodeRunState::Started && n.restart_complete())
        .map(|n| n.node_id);
    for n in cluster.data_nodes.iter() {
        let mark = if master == Some(n.node_id) { ", *" } else { "" };
        match n.run_state() {
            NodeRunState::Stopped => out.push(format!(
                "id={} (not connected, accepting connect from {})",
                n.node_id, n.config.host_name
            )),
            // With a data directory a restarted node is starting until the local
            // checkpoint after its copy is saved (as in ALL STATUS).
            NodeRunState::Started if n.restart_complete() => out.push(format!(
                "id={}\t@127.0.0.1  ({VERSION}{state}, Nodegroup: {}{mark})",
                n.node_id, n.node_group
            )),
            NodeRunState::Starting | NodeRunState::Started => out.push(format!(
                "id={}\t@127.0.0.1  ({VERSION}, starting, Nodegroup: {})",
                n.node_id, n.node_group
            )),
        }
    }
    out.push(format!(
        "\n[ndb_mgmd(MGM)]\t{} node(s)",
        config.mgm_nodes.len().max(1)
    ));
    if config.mgm_nodes.is_empty() {
        out.push(format!(
            "id={}\t@127.0.0.1  ({VERSION})",
            cluster.mgm.mgm_node_id
        ));
    }
    for n in &config.mgm_nodes {
        out.push(format!("id={}\t@127.0.0.1  ({VERSION})", n.node_id));
    }
    out.push(format!(
        "\n[mysqld(API)]\t{} node(s)",
        config.api_nodes.len()
    ));
    let connected = cluster.connected_api_nodes();
    for n in &config.api_nodes {
        if connected.contains(&n.node_id) {
            out.push(format!("id={}\t@127.0.0.1  ({VERSION})", n.node_id));
        } else {
            let from = if n.host_name.is_empty() {
                "any host".to_string()
            } else {
                n.host_name.clone()
            };
            out.push(format!(
                "id={} (not connected, accepting connect from {from})",
                n.node_id
            ));
        }
    }
    out.join("\n")
}
