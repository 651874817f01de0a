//! The parameter table: every config.ini parameter rndb knows, with NDB 7.6 defaults and
//! ranges (mysql-server `storage/ndb/src/mgmsrv/ConfigInfo.cpp`, see ndb-internals.md §6.3).
//!
//! Invariants (checked by tests): one entry per (section, name); every fixed default parses
//! and lies in its range; a `Derived(src)` default names a parameter of the same section that
//! comes earlier in the table (so derivations resolve in one pass in table order); the data
//! node entry of a name shared by several sections comes first (what `lookup_param` returns).

use super::params::ParamDefault::{self, Assigned, Derived, Mandatory, Undefined};
use super::params::Section::{self, Api, Computer, NdbMgmd, Ndbd, System, Tcp};
use super::params::Unit::{self, Bytes, Millis, Number, Percent, Seconds};
use super::params::{G, K, M, MAX_INT_RNIL as MAX, ParamKind, ParamSpec, Restart};

const DYN: Restart = Restart::None;
const ROLL: Restart = Restart::Rolling;
const INIT: Restart = Restart::Initial;

const fn spec(
    section: Section,
    name: &'static str,
    kind: ParamKind,
    unit: Unit,
    default: ParamDefault,
) -> ParamSpec {
    ParamSpec {
        name,
        section,
        kind,
        unit,
        default,
        min: 0,
        max: 0,
        deprecated: None,
        restart: ROLL,
        description: "",
    }
}

/// An integer parameter with a fixed default.
#[allow(clippy::too_many_arguments)] // one table row per call
const fn int(
    s: Section,
    name: &'static str,
    unit: Unit,
    default: u64,
    min: u64,
    max: u64,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    opt_int(s, name, unit, ParamDefault::Int(default), min, max, r, d)
}

/// An integer parameter without a fixed default.
#[allow(clippy::too_many_arguments)] // one table row per call
const fn opt_int(
    s: Section,
    name: &'static str,
    unit: Unit,
    default: ParamDefault,
    min: u64,
    max: u64,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    let mut p = spec(s, name, ParamKind::Int, unit, default);
    p.min = min;
    p.max = max;
    p.restart = r;
    p.description = d;
    p
}

const fn boolean(
    s: Section,
    name: &'static str,
    default: bool,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    let mut p = spec(
        s,
        name,
        ParamKind::Bool,
        Number,
        ParamDefault::Bool(default),
    );
    p.max = 1;
    p.restart = r;
    p.description = d;
    p
}

const fn string(
    s: Section,
    name: &'static str,
    default: ParamDefault,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    let mut p = spec(s, name, ParamKind::Str, Number, default);
    p.restart = r;
    p.description = d;
    p
}

const fn path(
    s: Section,
    name: &'static str,
    default: ParamDefault,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    let mut p = string(s, name, default, r, d);
    p.kind = ParamKind::Path;
    p
}

const fn choice(
    s: Section,
    name: &'static str,
    options: &'static [&'static str],
    default: &'static str,
    r: Restart,
    d: &'static str,
) -> ParamSpec {
    string(s, name, ParamDefault::Str(default), r, d).with_kind(ParamKind::Choice(options))
}

impl ParamSpec {
    const fn with_kind(mut self, kind: ParamKind) -> ParamSpec {
        self.kind = kind;
        self
    }
    const fn deprecate(mut self, warning: &'static str) -> ParamSpec {
        self.deprecated = Some(warning);
        self
    }
}

const NODE_ID_DB: u64 = 144;
const NODE_ID_MAX: u64 = 255;
const PORT_MAX: u64 = 65535;
/// NDB_NO_NODEGROUP: a data node outside every node group.
pub const NO_NODEGROUP: u64 = 65536;

/// The parameter table. Data node entries first.
#[rustfmt::skip]
pub static PARAMS: &[ParamSpec] = &[
    // ---- [ndbd] identity and placement
    opt_int(Ndbd, "NodeId", Number, Assigned, 1, NODE_ID_DB, INIT, "Number identifying the data node (1..144)"),
    string(Ndbd, "HostName", ParamDefault::Str("localhost"), INIT, "Host the data node runs on"),
    string(Ndbd, "ExecuteOnComputer", Undefined, INIT, "Id of a [computer] section giving the host"),
    path(Ndbd, "DataDir", ParamDefault::Str("."), INIT, "Directory for log, trace and pid files"),
    path(Ndbd, "FileSystemPath", Derived("DataDir"), INIT, "Directory for REDO logs, LCPs and metadata (default DataDir)"),
    path(Ndbd, "BackupDataDir", Derived("FileSystemPath"), ROLL, "Directory for backups (default FileSystemPath)"),
    path(Ndbd, "FileSystemPathDD", Derived("FileSystemPath"), INIT, "Directory for disk data files (default FileSystemPath)"),
    path(Ndbd, "FileSystemPathDataFiles", Derived("FileSystemPathDD"), INIT, "Directory for tablespace data files"),
    path(Ndbd, "FileSystemPathUndoFiles", Derived("FileSystemPathDD"), INIT, "Directory for undo log files"),
    opt_int(Ndbd, "ServerPort", Number, Undefined, 1, PORT_MAX, ROLL, "Port used to set up transporters"),
    opt_int(Ndbd, "Nodegroup", Number, Assigned, 0, NO_NODEGROUP, INIT, "Node group of the data node (65536 = none)"),
    int(Ndbd, "NoOfReplicas", Number, 2, 1, 4, INIT, "Number of copies of all data (nodes per node group)"),
    // ---- memory
    int(Ndbd, "DataMemory", Bytes, 98 * M, M, 1024 * G, ROLL, "Memory for rows and (since 7.6) hash indexes"),
    int(Ndbd, "IndexMemory", Bytes, 0, 0, 1024 * G, ROLL, "Deprecated; hash indexes use DataMemory")
        .deprecate("IndexMemory is deprecated; its memory is taken from DataMemory"),
    int(Ndbd, "DiskPageBufferMemory", Bytes, 64 * M, 4 * M, 1024 * G, ROLL, "Page cache for disk data"),
    int(Ndbd, "DiskPageBufferEntries", Number, 10, 1, 1000, ROLL, "Page entries per 32K page of DiskPageBufferMemory"),
    int(Ndbd, "SharedGlobalMemory", Bytes, 128 * M, 0, 64 * G, ROLL, "Shared pool (undo buffer, transient records)"),
    int(Ndbd, "RedoBuffer", Bytes, 32 * M, M, 4 * G, ROLL, "Buffer for REDO log writes"),
    int(Ndbd, "LongMessageBuffer", Bytes, 64 * M, 512 * K, 4 * G, ROLL, "Buffer for long internal messages"),
    int(Ndbd, "TransactionBufferMemory", Bytes, M, K, MAX, ROLL, "Buffer for key and attribute info in TC"),
    int(Ndbd, "MinFreePct", Percent, 5, 0, 100, ROLL, "Memory kept free for restarts"),
    int(Ndbd, "MaxAllocate", Bytes, 32 * M, M, G, ROLL, "Largest single allocation for table memory"),
    int(Ndbd, "StringMemory", Number, 25, 0, MAX, ROLL, "Memory for schema strings (% of maximum)"),
    int(Ndbd, "LockPagesInMainMemory", Number, 0, 0, 2, ROLL, "0 = no, 1 = lock after allocation, 2 = lock before"),
    int(Ndbd, "Numa", Number, 1, 0, 1, ROLL, "Interleave memory across NUMA nodes"),
    // ---- REDO log and checkpoints
    int(Ndbd, "NoOfFragmentLogParts", Number, 4, 4, 32, INIT, "Number of REDO log parts"),
    int(Ndbd, "NoOfFragmentLogFiles", Number, 16, 3, MAX, INIT, "REDO log files per log part"),
    int(Ndbd, "FragmentLogFileSize", Bytes, 16 * M, 4 * M, G, INIT, "Size of one REDO log file"),
    choice(Ndbd, "InitFragmentLogFiles", &["sparse", "full"], "sparse", INIT, "Whether REDO files are written out at creation"),
    int(Ndbd, "TimeBetweenGlobalCheckpoints", Millis, 2000, 20, 32000, ROLL, "Time between group commits to disk"),
    int(Ndbd, "TimeBetweenGlobalCheckpointsTimeout", Millis, 120_000, 10, MAX, ROLL, "GCP stop detection timeout"),
    int(Ndbd, "TimeBetweenEpochs", Millis, 100, 0, 32000, ROLL, "Time between epochs (micro GCPs)"),
    int(Ndbd, "TimeBetweenEpochsTimeout", Millis, 0, 0, 256_000, ROLL, "Epoch stop detection timeout (0 = off)"),
    int(Ndbd, "TimeBetweenLocalCheckpoints", Number, 20, 0, 31, ROLL, "LCP trigger: 2log of 4-byte words written"),
    int(Ndbd, "MaxBufferedEpochs", Number, 100, 0, 100_000, ROLL, "Epochs a subscriber may lag"),
    int(Ndbd, "MaxBufferedEpochBytes", Bytes, 25 * M, 25 * M, MAX, ROLL, "Bytes buffered for lagging subscribers"),
    int(Ndbd, "RedoOverCommitLimit", Seconds, 20, 0, MAX, ROLL, "Seconds of REDO overload before aborting"),
    int(Ndbd, "RedoOverCommitCounter", Number, 3, 0, MAX, ROLL, "REDO overloads before transactions abort"),
    boolean(Ndbd, "EnablePartialLcp", true, ROLL, "Write only changed rows in most LCPs"),
    int(Ndbd, "RecoveryWork", Percent, 60, 25, 100, ROLL, "Storage overhead allowed for LCP files"),
    int(Ndbd, "InsertRecoveryWork", Percent, 40, 0, 70, ROLL, "RecoveryWork used for insert-heavy loads"),
    boolean(Ndbd, "EnableRedoControl", false, ROLL, "Adapt LCP speed to REDO log fill"),
    int(Ndbd, "LcpScanProgressTimeout", Seconds, 60, 0, MAX, ROLL, "LCP fragment scan stall limit"),
    int(Ndbd, "MaxLCPStartDelay", Seconds, 0, 0, 600, ROLL, "Delay of LCP start while copying data"),
    int(Ndbd, "MinDiskWriteSpeed", Bytes, 10 * M, M, 1024 * G, DYN, "Minimum LCP and backup write rate per second"),
    int(Ndbd, "MaxDiskWriteSpeed", Bytes, 20 * M, M, 1024 * G, DYN, "Maximum LCP and backup write rate per second"),
    int(Ndbd, "MaxDiskWriteSpeedOtherNodeRestart", Bytes, 50 * M, M, 1024 * G, DYN, "Write rate while another node restarts"),
    int(Ndbd, "MaxDiskWriteSpeedOwnRestart", Bytes, 200 * M, M, 1024 * G, DYN, "Write rate during own restart"),
    int(Ndbd, "BackupDiskWriteSpeedPct", Percent, 50, 0, 90, DYN, "Share of write rate reserved for backups"),
    int(Ndbd, "DiskSyncSize", Bytes, 4 * M, 32 * K, MAX, ROLL, "Bytes written before a forced sync"),
    boolean(Ndbd, "CompressedLCP", false, ROLL, "Compress LCP files"),
    boolean(Ndbd, "CompressedBackup", false, ROLL, "Compress backup files"),
    boolean(Ndbd, "ODirect", false, ROLL, "Use O_DIRECT for LCP, backup and REDO files"),
    int(Ndbd, "DiskIOThreadPool", Number, 2, 0, MAX, ROLL, "Threads for disk data file IO"),
    // ---- heartbeats, arbitration, timeouts
    int(Ndbd, "HeartbeatIntervalDbDb", Millis, 5000, 10, MAX, ROLL, "Heartbeat interval between data nodes"),
    int(Ndbd, "HeartbeatIntervalDbApi", Millis, 1500, 100, MAX, ROLL, "Heartbeat interval to API nodes"),
    int(Ndbd, "HeartbeatOrder", Number, 0, 0, 65535, ROLL, "Position in the heartbeat ring (0 = by node id)"),
    int(Ndbd, "ConnectCheckIntervalDelay", Millis, 0, 0, MAX, ROLL, "Extra connectivity check before declaring a node dead"),
    int(Ndbd, "ArbitrationTimeout", Millis, 7500, 10, MAX, ROLL, "Time to wait for an arbitrator's answer"),
    choice(Ndbd, "Arbitration", &["Default", "Disabled", "WaitExternal"], "Default", ROLL, "Arbitration scheme"),
    int(Ndbd, "TimeBetweenWatchDogCheck", Millis, 6000, 70, MAX, ROLL, "Watchdog check interval"),
    int(Ndbd, "TransactionDeadlockDetectionTimeout", Millis, 1200, 50, MAX, DYN, "Time a transaction may wait for a lock (error 266)"),
    int(Ndbd, "TransactionInactiveTimeout", Millis, MAX, 0, MAX, DYN, "Time a transaction may stay idle"),
    int(Ndbd, "StartPartialTimeout", Millis, 30_000, 0, MAX, ROLL, "Wait for all nodes before a partial start"),
    int(Ndbd, "StartPartitionedTimeout", Millis, 0, 0, MAX, ROLL, "Wait before a possibly partitioned start"),
    int(Ndbd, "StartFailureTimeout", Millis, 0, 0, MAX, ROLL, "Start must complete within this time (0 = no limit)"),
    int(Ndbd, "StartNoNodegroupTimeout", Millis, 15_000, 0, MAX, ROLL, "Wait for nodes without a node group"),
    int(Ndbd, "RestartSubscriberConnectTimeout", Millis, 120_000, 0, MAX, ROLL, "Wait for subscribers at restart"),
    // ---- transaction and schema resources
    int(Ndbd, "MaxNoOfConcurrentTransactions", Number, 4096, 32, MAX, ROLL, "Transaction records per data node"),
    int(Ndbd, "MaxNoOfConcurrentOperations", Number, 32 * K, 32, MAX, ROLL, "Operation records in TC"),
    opt_int(Ndbd, "MaxNoOfLocalOperations", Number, Undefined, 32, MAX, ROLL, "Operation records in LQH (default 1.1 x concurrent)"),
    int(Ndbd, "MaxDMLOperationsPerTransaction", Number, 0xffff_ffff, 32, 0xffff_ffff, ROLL, "DML operations per transaction"),
    int(Ndbd, "MaxNoOfConcurrentIndexOperations", Number, 8 * K, 0, MAX, ROLL, "Unique index operation records"),
    int(Ndbd, "MaxNoOfFiredTriggers", Number, 4000, 0, MAX, ROLL, "Concurrently fired triggers"),
    int(Ndbd, "MaxNoOfConcurrentScans", Number, 256, 2, 500, ROLL, "Concurrent scans per data node"),
    opt_int(Ndbd, "MaxNoOfLocalScans", Number, Undefined, 32, MAX, ROLL, "Local scan records (default 4 x concurrent scans)"),
    int(Ndbd, "BatchSizePerLocalScan", Number, 256, 1, 992, ROLL, "Lock records per local scan"),
    int(Ndbd, "MaxParallelScansPerFragment", Number, 256, 1, MAX, ROLL, "Parallel scans on one fragment"),
    int(Ndbd, "MaxNoOfTables", Number, 128, 8, 20320, ROLL, "Table objects"),
    int(Ndbd, "MaxNoOfAttributes", Number, 1000, 32, MAX, ROLL, "Attributes (columns) over all tables"),
    int(Ndbd, "MaxNoOfOrderedIndexes", Number, 128, 0, MAX, ROLL, "Ordered indexes"),
    int(Ndbd, "MaxNoOfUniqueHashIndexes", Number, 64, 0, MAX, ROLL, "Unique hash indexes"),
    int(Ndbd, "MaxNoOfTriggers", Number, 768, 0, MAX, ROLL, "Trigger objects"),
    int(Ndbd, "DefaultHashmapSize", Number, 3840, 0, 3840, ROLL, "Buckets of the default partition hash map"),
    // ---- threads, restart behaviour, reporting
    int(Ndbd, "MaxNoOfExecutionThreads", Number, 0, 0, 72, ROLL, "Execution threads for ndbmtd (0 = default)"),
    string(Ndbd, "ThreadConfig", ParamDefault::Str(""), ROLL, "Thread layout (ldm, tc, recv, send, main, rep, io)"),
    boolean(Ndbd, "RealtimeScheduler", false, ROLL, "Real-time scheduling of execution threads"),
    boolean(Ndbd, "StopOnError", true, ROLL, "Stop instead of restarting after an error"),
    int(Ndbd, "MaxStartFailRetries", Number, 3, 0, MAX, ROLL, "Start attempts when StopOnError is false"),
    int(Ndbd, "MaxNoOfSavedMessages", Number, 25, 0, MAX, ROLL, "Error log entries and trace files kept"),
    boolean(Ndbd, "Diskless", false, INIT, "Keep nothing on disk"),
    int(Ndbd, "BuildIndexThreads", Number, 128, 0, 128, ROLL, "Threads building ordered indexes at restart"),
    boolean(Ndbd, "TwoPassInitialNodeRestartCopy", true, ROLL, "Copy data in two passes at initial node restart"),
    int(Ndbd, "MaxParallelCopyInstances", Number, 0, 0, 64, ROLL, "Parallel fragment copies at node restart (0 = default)"),
    int(Ndbd, "MemReportFrequency", Seconds, 0, 0, MAX, DYN, "Seconds between memory reports (0 = at thresholds)"),
    int(Ndbd, "StartupStatusReportFrequency", Seconds, 0, 0, MAX, DYN, "Seconds between start progress reports"),
    int(Ndbd, "BackupReportFrequency", Seconds, 0, 0, MAX, DYN, "Seconds between backup progress reports"),
    // ---- [ndb_mgmd]
    opt_int(NdbMgmd, "NodeId", Number, Assigned, 1, NODE_ID_MAX, INIT, "Number identifying the management node"),
    string(NdbMgmd, "HostName", ParamDefault::Str("localhost"), INIT, "Host the management server runs on"),
    string(NdbMgmd, "ExecuteOnComputer", Undefined, INIT, "Id of a [computer] section giving the host"),
    path(NdbMgmd, "DataDir", ParamDefault::Str("."), ROLL, "Directory for the cluster log and config cache"),
    int(NdbMgmd, "PortNumber", Number, 1186, 0, PORT_MAX, ROLL, "Port the management server listens on"),
    int(NdbMgmd, "ArbitrationRank", Number, 1, 0, 2, ROLL, "0 = never arbitrator, 1 = high priority, 2 = low"),
    int(NdbMgmd, "ArbitrationDelay", Millis, 0, 0, MAX, ROLL, "Delay before answering arbitration requests"),
    string(NdbMgmd, "LogDestination", Undefined, ROLL, "Cluster log destination (CONSOLE, SYSLOG, FILE:...)"),
    int(NdbMgmd, "HeartbeatIntervalMgmdMgmd", Millis, 1500, 100, MAX, ROLL, "Heartbeat interval between management nodes"),
    // ---- [mysqld] / [api]
    opt_int(Api, "NodeId", Number, Assigned, 1, NODE_ID_MAX, INIT, "Number identifying the API node"),
    string(Api, "HostName", ParamDefault::Str(""), ROLL, "Host allowed to use this slot (empty = any host)"),
    string(Api, "ExecuteOnComputer", Undefined, ROLL, "Id of a [computer] section giving the host"),
    int(Api, "ArbitrationRank", Number, 0, 0, 2, ROLL, "0 = never arbitrator, 1 = high priority, 2 = low"),
    int(Api, "ArbitrationDelay", Millis, 0, 0, MAX, ROLL, "Delay before answering arbitration requests"),
    int(Api, "BatchSize", Number, 256, 1, 992, ROLL, "Rows per scan batch"),
    int(Api, "BatchByteSize", Bytes, 16 * K, K, M, ROLL, "Bytes per scan batch"),
    int(Api, "MaxScanBatchSize", Bytes, 256 * K, 32 * K, 16 * M, ROLL, "Bytes per scan batch over all fragments"),
    boolean(Api, "AutoReconnect", true, ROLL, "Reconnect after losing the cluster"),
    choice(Api, "DefaultOperationRedoProblemAction", &["queue", "abort"], "queue", ROLL, "What operations do when the REDO log is overloaded"),
    // ---- [tcp]
    opt_int(Tcp, "NodeId1", Number, Mandatory, 1, NODE_ID_MAX, INIT, "One end of the connection"),
    opt_int(Tcp, "NodeId2", Number, Mandatory, 1, NODE_ID_MAX, INIT, "Other end of the connection"),
    string(Tcp, "HostName1", Undefined, ROLL, "Host of NodeId1 (default its HostName)"),
    string(Tcp, "HostName2", Undefined, ROLL, "Host of NodeId2 (default its HostName)"),
    int(Tcp, "SendBufferMemory", Bytes, 2 * M, 64 * K, MAX, ROLL, "Send buffer of the connection"),
    int(Tcp, "ReceiveBufferMemory", Bytes, 2 * M, 16 * K, MAX, ROLL, "Receive buffer of the connection"),
    boolean(Tcp, "Checksum", false, ROLL, "Checksum every message"),
    int(Tcp, "OverloadLimit", Bytes, 0, 0, MAX, ROLL, "Unsent bytes before the connection counts as overloaded"),
    // ---- [system], [computer]
    string(System, "Name", Mandatory, ROLL, "Name of the cluster"),
    int(System, "PrimaryMGMNode", Number, 0, 0, MAX, ROLL, "Node id of the primary management node"),
    int(System, "ConfigGenerationNumber", Number, 0, 0, MAX, ROLL, "Configuration generation number"),
    string(Computer, "Id", Mandatory, ROLL, "Name referenced by ExecuteOnComputer"),
    string(Computer, "HostName", Mandatory, ROLL, "Host name of the computer"),
];

#[cfg(test)]
mod tests {
    use super::super::params::{lookup_param, lookup_param_in};
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, p) in PARAMS.iter().enumerate() {
            let dup = PARAMS[..i]
                .iter()
                .any(|q| q.section == p.section && q.name.eq_ignore_ascii_case(p.name));
            assert!(!dup, "duplicate {}", p.name);
            if let Some(v) = p.default_value() {
                let text = p.format_value(&v);
                assert_eq!(p.parse_value(&text), Ok(v), "default of {}", p.name);
            }
            if let Derived(src) = p.default {
                assert!(
                    PARAMS[..i]
                        .iter()
                        .any(|q| q.section == p.section && q.name == src),
                    "{} <- {src}",
                    p.name
                );
            }
            if p.kind == ParamKind::Int {
                assert!(p.min <= p.max, "{}", p.name);
            }
            assert!(!p.description.is_empty(), "{}", p.name);
        }
    }

    #[test]
    fn lookup_prefers_data_node_entry() {
        let p = lookup_param("hostname").expect("HostName");
        assert_eq!(
            (p.section, p.default),
            (Ndbd, ParamDefault::Str("localhost"))
        );
        let api = lookup_param_in(Api, "HOSTNAME").expect("api HostName");
        assert_eq!(api.default, ParamDefault::Str(""));
        assert_eq!(lookup_param("PortNumber").map(|p| p.section), Some(NdbMgmd));
        assert!(lookup_param("NoSuchThing").is_none());
    }

    #[test]
    fn specs_carry_ndb_facts() {
        let p = |n| lookup_param(n).expect(n);
        assert_eq!(
            p("IndexMemory").deprecated,
            Some("IndexMemory is deprecated; its memory is taken from DataMemory")
        );
        assert_eq!(p("NoOfReplicas").restart, Restart::Initial);
        assert_eq!(p("FragmentLogFileSize").restart, Restart::Initial);
        assert_eq!(p("DataMemory").restart, Restart::Rolling);
        assert_eq!(
            p("TransactionDeadlockDetectionTimeout").restart,
            Restart::None
        );
        assert_eq!((p("DataMemory").min, p("DataMemory").max), (M, 1024 * G));
        assert_eq!(p("NodeId").max, 144);
        assert_eq!(lookup_param_in(Api, "NodeId").map(|p| p.max), Some(255));
        assert_eq!(
            p("TransactionInactiveTimeout").default,
            ParamDefault::Int(4_294_967_039)
        );
        assert_eq!(p("LongMessageBuffer").range_text(), "512K..4G");
        assert_eq!(p("TimeBetweenGlobalCheckpoints").range_text(), "20..32000");
    }
}
