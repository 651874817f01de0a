//! Cluster configuration: NDB's config.ini, read and written the way NDB users know it.
//!
//! [`ClusterConfig::parse`] reads `[ndbd]`, `[ndb_mgmd]`, `[mysqld]`/`[api]`, `[tcp]`,
//! `[system]` and `[computer]` sections (plus `[X default]`, aliases DB/MGM/API), checks every
//! value against NDB 7.6's parameter table ([`params`], [`table`]), assigns missing node ids
//! and node groups like NDB, and keeps deprecation warnings. Programmatic changes
//! ([`ClusterConfig::set_data_node_param`]) go through the same validation.
//!
//! Invariants:
//! - Every node's `params` map holds every parameter of its section that has a value
//!   (given, defaulted or derived) under its canonical name, typed and within range.
//! - The typed fields (`data_memory`, `node_id`...) are computed from `params` by one
//!   function (`Configured::sync`) run at the end of every build or change, so they never
//!   drift from `params`.
//! - A successful build or change leaves a configuration that passes all checks (unique
//!   node ids, NoOfReplicas equal on all data nodes and dividing their number, full node
//!   groups, TCP ends defined); a failed change leaves the configuration untouched.
//! - [`ClusterConfig::to_ini`] output parses back to an equal configuration.
//! - No input makes any function here panic.

mod build;
mod check;
pub mod params;
mod parse;
pub mod table;
mod value;
mod write;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_changes;
#[cfg(test)]
mod tests_errors;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{NdbError, codes};

/// Tests of disk data: `nodes` data nodes with `replicas`, small DataMemory (`data_memory`),
/// the smallest DiskPageBufferMemory (4M) and SharedGlobalMemory of 20M (room for
/// small undo buffers).
#[cfg(test)]
pub(crate) fn small_disk_test_config(
    nodes: u32,
    replicas: u32,
    data_memory: &str,
) -> ClusterConfig {
    let mut cfg = ClusterConfig::embedded(nodes, replicas).expect("config");
    for (name, value) in [
        ("DataMemory", data_memory),
        ("DiskPageBufferMemory", "4M"),
        ("SharedGlobalMemory", "20M"),
    ] {
        cfg.set_data_node_param(name, value).expect(name);
    }
    cfg
}

pub use params::{
    ParamDefault, ParamKind, ParamSpec, ParamValue, Restart, Section, Unit, format_size,
    lookup_param, lookup_param_in, params_of, parse_bool, parse_size,
};
pub use table::NO_NODEGROUP;

/// A configuration error: where (file, 1-based line; 0 = not from a file line), which
/// parameter, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: u32,
    pub parameter: Option<String>,
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(
        file: &str,
        line: u32,
        parameter: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.to_string(),
            line,
            parameter: parameter.map(str::to_string),
            message: message.into(),
        }
    }
}

/// `config.ini:7: [ndbd default] DataMemory=5000G: value out of range, allowed 1M..1024G`
/// (`<argument>: ...` when there is no line).
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", at(&self.file, self.line), self.message)
    }
}

impl std::error::Error for ConfigError {}

/// `file:line`, or `file` for line 0.
pub(crate) fn at(file: &str, line: u32) -> String {
    if line > 0 {
        format!("{file}:{line}")
    } else {
        file.to_string()
    }
}

impl From<ConfigError> for NdbError {
    fn from(e: ConfigError) -> NdbError {
        codes::bad_config(e)
    }
}

type ParamMap = BTreeMap<&'static str, ParamValue>;
type NameSet = BTreeSet<&'static str>;

/// One `[ndbd]` data node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DataNodeConfig {
    pub node_id: u32,
    /// Node group; [`NO_NODEGROUP`] (65536) for a node outside every group.
    pub node_group: u32,
    pub host_name: String,
    pub data_dir: PathBuf,
    pub no_of_replicas: u32,
    pub data_memory: u64,
    pub disk_page_buffer_memory: u64,
    pub shared_global_memory: u64,
    pub redo_buffer: u64,
    pub transaction_deadlock_detection_timeout_ms: u64,
    pub max_no_of_execution_threads: u32,
    pub time_between_global_checkpoints_ms: u64,
    pub time_between_local_checkpoints: u32,
    pub no_of_fragment_log_parts: u32,
    pub no_of_fragment_log_files: u64,
    pub fragment_log_file_size: u64,
    pub max_no_of_tables: u32,
    params: ParamMap,
    explicit: NameSet,
}

/// One `[ndb_mgmd]` management node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MgmNodeConfig {
    pub node_id: u32,
    pub host_name: String,
    pub data_dir: PathBuf,
    pub port_number: u16,
    pub arbitration_rank: u32,
    params: ParamMap,
    explicit: NameSet,
}

/// One `[mysqld]`/`[api]` slot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApiNodeConfig {
    pub node_id: u32,
    /// Empty = any host may use the slot.
    pub host_name: String,
    pub arbitration_rank: u32,
    params: ParamMap,
    explicit: NameSet,
}

/// One `[tcp]` connection override.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TcpConfig {
    pub node_id1: u32,
    pub node_id2: u32,
    pub send_buffer_memory: u64,
    pub receive_buffer_memory: u64,
    pub checksum: bool,
    pub overload_limit: u64,
    params: ParamMap,
    explicit: NameSet,
}

/// The `[system]` section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SystemConfig {
    pub name: String,
    params: ParamMap,
    explicit: NameSet,
}

/// One `[computer]` section (target of `ExecuteOnComputer`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComputerConfig {
    pub id: String,
    pub host_name: String,
    params: ParamMap,
    explicit: NameSet,
}

/// Access to a section's parameter map; `sync` derives the typed fields from it.
pub(crate) trait Configured: Default {
    const SECTION: Section;
    fn parts(&self) -> (&ParamMap, &NameSet);
    fn parts_mut(&mut self) -> (&mut ParamMap, &mut NameSet);
    fn sync(&mut self);
    fn from_parts(params: ParamMap, explicit: NameSet) -> Self {
        let mut s = Self::default();
        let (p, e) = s.parts_mut();
        *p = params;
        *e = explicit;
        s.sync();
        s
    }
}

fn int_of(p: &ParamMap, name: &str) -> u64 {
    p.get(name).and_then(ParamValue::as_u64).unwrap_or(0)
}
fn u32_of(p: &ParamMap, name: &str) -> u32 {
    u32::try_from(int_of(p, name)).unwrap_or(u32::MAX)
}
fn str_of(p: &ParamMap, name: &str) -> String {
    p.get(name)
        .and_then(ParamValue::as_str)
        .unwrap_or("")
        .to_string()
}

macro_rules! configured {
    ($t:ty, $section:expr, |$s:ident, $p:ident| $sync:block) => {
        impl Configured for $t {
            const SECTION: Section = $section;
            fn parts(&self) -> (&ParamMap, &NameSet) {
                (&self.params, &self.explicit)
            }
            fn parts_mut(&mut self) -> (&mut ParamMap, &mut NameSet) {
                (&mut self.params, &mut self.explicit)
            }
            fn sync(&mut self) {
                let $s = self;
                let $p = &$s.params;
                $sync
            }
        }
        impl $t {
            /// The value of parameter `name` (case-insensitive canonical lookup), whether
            /// given, defaulted or derived.
            pub fn get(&self, name: &str) -> Option<&ParamValue> {
                lookup_param_in($section, name).and_then(|s| self.params.get(s.name))
            }
            /// An integer parameter (booleans as 0/1).
            pub fn get_u64(&self, name: &str) -> Option<u64> {
                self.get(name).and_then(ParamValue::as_u64)
            }
            pub fn get_bool(&self, name: &str) -> Option<bool> {
                self.get(name).and_then(ParamValue::as_bool)
            }
            pub fn get_str(&self, name: &str) -> Option<&str> {
                self.get(name).and_then(ParamValue::as_str)
            }
            /// Whether the parameter was given (own or default section, or set_*) rather than
            /// defaulted or derived.
            pub fn is_explicit(&self, name: &str) -> bool {
                lookup_param_in($section, name).is_some_and(|s| self.explicit.contains(s.name))
            }
            /// Every parameter with a value, by canonical name.
            pub fn params(&self) -> impl Iterator<Item = (&'static str, &ParamValue)> {
                self.params.iter().map(|(k, v)| (*k, v))
            }
        }
    };
}

impl DataNodeConfig {
    /// Replaces a parameter's value as stored, without validating the configuration
    /// or deriving the typed fields from it again: for a configuration cut down by its
    /// owner (a data node's local engine), so that a later validation sees what the
    /// owner set in the typed fields.
    pub(crate) fn set_stored(&mut self, name: &'static str, v: ParamValue) {
        self.params.insert(name, v);
    }
}

configured!(DataNodeConfig, Section::Ndbd, |s, p| {
    s.node_id = u32_of(p, "NodeId");
    s.node_group = u32_of(p, "Nodegroup");
    s.host_name = str_of(p, "HostName");
    s.data_dir = PathBuf::from(str_of(p, "DataDir"));
    s.no_of_replicas = u32_of(p, "NoOfReplicas");
    s.data_memory = int_of(p, "DataMemory");
    s.disk_page_buffer_memory = int_of(p, "DiskPageBufferMemory");
    s.shared_global_memory = int_of(p, "SharedGlobalMemory");
    s.redo_buffer = int_of(p, "RedoBuffer");
    s.transaction_deadlock_detection_timeout_ms = int_of(p, "TransactionDeadlockDetectionTimeout");
    s.max_no_of_execution_threads = u32_of(p, "MaxNoOfExecutionThreads");
    s.time_between_global_checkpoints_ms = int_of(p, "TimeBetweenGlobalCheckpoints");
    s.time_between_local_checkpoints = u32_of(p, "TimeBetweenLocalCheckpoints");
    s.no_of_fragment_log_parts = u32_of(p, "NoOfFragmentLogParts");
    s.no_of_fragment_log_files = int_of(p, "NoOfFragmentLogFiles");
    s.fragment_log_file_size = int_of(p, "FragmentLogFileSize");
    s.max_no_of_tables = u32_of(p, "MaxNoOfTables");
});
configured!(MgmNodeConfig, Section::NdbMgmd, |s, p| {
    s.node_id = u32_of(p, "NodeId");
    s.host_name = str_of(p, "HostName");
    s.data_dir = PathBuf::from(str_of(p, "DataDir"));
    s.port_number = u16::try_from(int_of(p, "PortNumber")).unwrap_or(u16::MAX);
    s.arbitration_rank = u32_of(p, "ArbitrationRank");
});
configured!(ApiNodeConfig, Section::Api, |s, p| {
    s.node_id = u32_of(p, "NodeId");
    s.host_name = str_of(p, "HostName");
    s.arbitration_rank = u32_of(p, "ArbitrationRank");
});
configured!(TcpConfig, Section::Tcp, |s, p| {
    s.node_id1 = u32_of(p, "NodeId1");
    s.node_id2 = u32_of(p, "NodeId2");
    s.send_buffer_memory = int_of(p, "SendBufferMemory");
    s.receive_buffer_memory = int_of(p, "ReceiveBufferMemory");
    s.checksum = int_of(p, "Checksum") != 0;
    s.overload_limit = int_of(p, "OverloadLimit");
});
configured!(SystemConfig, Section::System, |s, p| {
    s.name = str_of(p, "Name");
});
configured!(ComputerConfig, Section::Computer, |s, p| {
    s.id = str_of(p, "Id");
    s.host_name = str_of(p, "HostName");
});

/// A whole cluster configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterConfig {
    /// In file order (node groups are formed in this order).
    pub data_nodes: Vec<DataNodeConfig>,
    pub mgm_nodes: Vec<MgmNodeConfig>,
    pub api_nodes: Vec<ApiNodeConfig>,
    /// Deprecation and similar warnings, each `file:line: text`.
    pub warnings: Vec<String>,
    /// File name, or `"<defaults>"` for the embedded configuration.
    pub source: String,
    pub tcp_connections: Vec<TcpConfig>,
    /// `[tcp default]`: what every connection without its own `[tcp]` section gets
    /// (NDB generates a `[tcp]` section per connection from it).
    pub tcp_default: Option<TcpConfig>,
    pub computers: Vec<ComputerConfig>,
    pub system: Option<SystemConfig>,
}

impl ClusterConfig {
    /// Parses config.ini text; `file_name` is used in messages and kept as `source`.
    pub fn parse(text: &str, file_name: &str) -> Result<ClusterConfig, ConfigError> {
        let mut warnings = Vec::new();
        let sections = parse::parse_sections(text, file_name, &mut warnings)?;
        build::build(file_name, &sections, warnings)
    }

    /// The `[tcp]` parameters of the connection between nodes `a` and `b`: its own
    /// `[tcp]` section, else `[tcp default]`, else NDB's defaults. Returns
    /// (SendBufferMemory, OverloadLimit) in bytes.
    pub fn send_buffer_of(&self, a: u32, b: u32) -> (u64, u64) {
        let own = self
            .tcp_connections
            .iter()
            .find(|t| (t.node_id1, t.node_id2) == (a, b) || (t.node_id1, t.node_id2) == (b, a));
        match own.or(self.tcp_default.as_ref()) {
            Some(t) => (t.send_buffer_memory, t.overload_limit),
            None => {
                let d = TcpConfig::from_parts(build::defaults_of(Section::Tcp), NameSet::new());
                (d.send_buffer_memory, d.overload_limit)
            }
        }
    }

    /// Reads and parses a config.ini file (invalid UTF-8 is replaced, not rejected).
    pub fn from_file(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| {
            ConfigError::new(
                &name,
                0,
                None,
                format!("cannot read configuration file: {e}"),
            )
        })?;
        ClusterConfig::parse(&String::from_utf8_lossy(&bytes), &name)
    }

    /// No config.ini: what a fresh NDB config gives: one `[ndb_mgmd]` (id 1), two `[ndbd]`
    /// (ids 2, 3) with NoOfReplicas=2 (one node group), four `[mysqld]` slots (ids 4..7),
    /// all HostName localhost, defaults for everything.
    pub fn embedded_default() -> ClusterConfig {
        ClusterConfig::embedded(2, 2).unwrap_or_else(|e| ClusterConfig {
            warnings: vec![e.to_string()],
            source: "<defaults>".into(),
            ..ClusterConfig::default()
        })
    }

    /// `n` data nodes (ids 2..=n+1) with the given NoOfReplicas, mgmd id 1, four API slots.
    pub fn embedded(data_nodes: u32, no_of_replicas: u32) -> Result<ClusterConfig, ConfigError> {
        if data_nodes > 143 {
            let msg = format!("{data_nodes} data nodes do not fit in the data node ids 2..144");
            return Err(ConfigError::new("<defaults>", 0, Some("NodeId"), msg));
        }
        ClusterConfig::parse(
            &write::embedded_ini(data_nodes, no_of_replicas),
            "<defaults>",
        )
    }

    /// Sets a data-node parameter on every data node as `[ndbd default]` would. Validates
    /// name, type and range like the file parser (file `<argument>`, line 0) and re-checks
    /// the whole configuration (a NoOfReplicas change regroups the nodes). Returns what
    /// applying it requires. On error nothing changes.
    pub fn set_data_node_param(&mut self, name: &str, value: &str) -> Result<Restart, ConfigError> {
        check::set_param(self, None, name, value)
    }

    /// Same as [`ClusterConfig::set_data_node_param`] for the data node `node_id` only.
    pub fn set_node_param(
        &mut self,
        node_id: u32,
        name: &str,
        value: &str,
    ) -> Result<Restart, ConfigError> {
        check::set_param(self, Some(node_id), name, value)
    }

    /// config.ini text that parses back to this configuration.
    pub fn to_ini(&self) -> String {
        write::to_ini(self)
    }

    /// Data node ids per node group, groups in ascending group id, nodes in file order.
    /// Nodes outside every group ([`NO_NODEGROUP`]) are left out.
    pub fn node_groups(&self) -> Vec<Vec<u32>> {
        let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for n in &self.data_nodes {
            if u64::from(n.node_group) != NO_NODEGROUP {
                groups.entry(n.node_group).or_default().push(n.node_id);
            }
        }
        groups.into_values().collect()
    }

    /// The data node with id `node_id`.
    pub fn data_node(&self, node_id: u32) -> Option<&DataNodeConfig> {
        self.data_nodes.iter().find(|n| n.node_id == node_id)
    }

    /// NoOfReplicas (equal on all data nodes).
    pub fn no_of_replicas(&self) -> u32 {
        self.data_nodes.first().map_or(0, |n| n.no_of_replicas)
    }
}
