//! Tests of the config module as a whole: parsing, NDB defaults, errors (exact messages),
//! node ids and groups. Error messages: `tests_errors`; programmatic changes, round trips
//! and robustness: `tests_changes`.

use super::params::{G, K, M};
use super::*;

pub(super) fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
    ClusterConfig::parse(text, "config.ini")
}

pub(super) fn err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

pub(super) fn ids<T>(nodes: &[T], id: impl Fn(&T) -> u32) -> Vec<u32> {
    nodes.iter().map(id).collect()
}

/// The typed fields equal what `params` says.
pub(super) fn assert_synced(n: &DataNodeConfig) {
    let g = |name| n.get_u64(name).unwrap_or_else(|| panic!("{name} missing"));
    assert_eq!(u64::from(n.node_id), g("NodeId"));
    assert_eq!(u64::from(n.node_group), g("Nodegroup"));
    assert_eq!(Some(n.host_name.as_str()), n.get_str("HostName"));
    assert_eq!(n.data_dir.to_str(), n.get_str("DataDir"));
    assert_eq!(u64::from(n.no_of_replicas), g("NoOfReplicas"));
    assert_eq!(n.data_memory, g("DataMemory"));
    assert_eq!(n.disk_page_buffer_memory, g("DiskPageBufferMemory"));
    assert_eq!(n.shared_global_memory, g("SharedGlobalMemory"));
    assert_eq!(n.redo_buffer, g("RedoBuffer"));
    assert_eq!(
        n.transaction_deadlock_detection_timeout_ms,
        g("TransactionDeadlockDetectionTimeout")
    );
    assert_eq!(
        u64::from(n.max_no_of_execution_threads),
        g("MaxNoOfExecutionThreads")
    );
    assert_eq!(
        n.time_between_global_checkpoints_ms,
        g("TimeBetweenGlobalCheckpoints")
    );
    assert_eq!(
        u64::from(n.time_between_local_checkpoints),
        g("TimeBetweenLocalCheckpoints")
    );
    assert_eq!(
        u64::from(n.no_of_fragment_log_parts),
        g("NoOfFragmentLogParts")
    );
    assert_eq!(n.no_of_fragment_log_files, g("NoOfFragmentLogFiles"));
    assert_eq!(n.fragment_log_file_size, g("FragmentLogFileSize"));
    assert_eq!(u64::from(n.max_no_of_tables), g("MaxNoOfTables"));
}

pub(super) const SEED_002: &str = "[ndbd default]
NoOfReplicas=1
DataMemory=8000M
IndexMemory=1500M
ODirect=1
MaxNoOfExecutionThreads=4
LockPagesInMainMemory=1
TimeBetweenLocalCheckpoints=0
RealtimeScheduler=1
LongMessageBuffer=32M
[ndb_mgmd]
[ndbd]
[mysqld]
";

#[test]
fn seed_002_block_parses() {
    let c = parse(SEED_002).expect("seed 002 parses");
    assert_eq!(c.data_nodes.len(), 1);
    let n = &c.data_nodes[0];
    assert_eq!(n.no_of_replicas, 1);
    assert_eq!(n.data_memory, 8_388_608_000);
    assert_eq!(n.get_u64("IndexMemory"), Some(1500 * M));
    assert_eq!(n.get("ODirect"), Some(&ParamValue::Bool(true)));
    assert_eq!(n.max_no_of_execution_threads, 4);
    assert_eq!(n.get_u64("LockPagesInMainMemory"), Some(1));
    assert_eq!(n.time_between_local_checkpoints, 0);
    assert_eq!(n.get_bool("RealtimeScheduler"), Some(true));
    assert_eq!(n.get_u64("LongMessageBuffer"), Some(33_554_432));
    assert_eq!(
        c.warnings,
        vec![
            "config.ini:4: IndexMemory is deprecated; its memory is taken from DataMemory"
                .to_string()
        ]
    );
    // No ids given: numbered in file order, like NDB.
    assert_eq!(
        (c.mgm_nodes[0].node_id, n.node_id, c.api_nodes[0].node_id),
        (1, 2, 3)
    );
    assert_eq!(c.node_groups(), vec![vec![2]]);
    assert_eq!(c.source, "config.ini");
    assert_synced(n);
}

#[test]
fn defaults_are_ndb_76() {
    let c = ClusterConfig::embedded_default();
    let n = &c.data_nodes[0];
    assert_eq!(n.data_memory, 102_760_448);
    assert_eq!(n.disk_page_buffer_memory, 67_108_864);
    assert_eq!(n.shared_global_memory, 134_217_728);
    assert_eq!(n.redo_buffer, 33_554_432);
    assert_eq!(n.transaction_deadlock_detection_timeout_ms, 1200);
    assert_eq!(n.max_no_of_execution_threads, 0);
    assert_eq!(n.time_between_global_checkpoints_ms, 2000);
    assert_eq!(n.time_between_local_checkpoints, 20);
    assert_eq!(
        (
            n.no_of_fragment_log_parts,
            n.no_of_fragment_log_files,
            n.fragment_log_file_size
        ),
        (4, 16, 16 * M)
    );
    assert_eq!(n.max_no_of_tables, 128);
    assert_eq!(n.host_name, "localhost");
    assert_eq!(n.data_dir, PathBuf::from("."));
    let expect_int = [
        ("IndexMemory", 0),
        ("LongMessageBuffer", 64 * M),
        ("TransactionBufferMemory", M),
        ("DiskPageBufferEntries", 10),
        ("TimeBetweenGlobalCheckpointsTimeout", 120_000),
        ("TimeBetweenEpochs", 100),
        ("TimeBetweenEpochsTimeout", 0),
        ("HeartbeatIntervalDbDb", 5000),
        ("HeartbeatIntervalDbApi", 1500),
        ("ArbitrationTimeout", 7500),
        ("TransactionInactiveTimeout", 4_294_967_039),
        ("MaxNoOfConcurrentTransactions", 4096),
        ("MaxNoOfConcurrentOperations", 32_768),
        ("MaxNoOfConcurrentScans", 256),
        ("BatchSizePerLocalScan", 256),
        ("MaxNoOfAttributes", 1000),
        ("MaxNoOfOrderedIndexes", 128),
        ("MaxNoOfUniqueHashIndexes", 64),
        ("MaxNoOfTriggers", 768),
        ("MinDiskWriteSpeed", 10 * M),
        ("MaxDiskWriteSpeed", 20 * M),
        ("MaxDiskWriteSpeedOtherNodeRestart", 50 * M),
        ("MaxDiskWriteSpeedOwnRestart", 200 * M),
        ("RecoveryWork", 60),
        ("InsertRecoveryWork", 40),
        ("MaxStartFailRetries", 3),
        ("LockPagesInMainMemory", 0),
        ("Numa", 1),
        ("MemReportFrequency", 0),
        ("StartupStatusReportFrequency", 0),
        ("BuildIndexThreads", 128),
        ("MinFreePct", 5),
        ("MaxAllocate", 32 * M),
        ("LcpScanProgressTimeout", 60),
        ("StartPartialTimeout", 30_000),
        ("StartPartitionedTimeout", 0),
        ("StartFailureTimeout", 0),
        ("DiskIOThreadPool", 2),
        ("BackupDiskWriteSpeedPct", 50),
        ("MaxBufferedEpochs", 100),
    ];
    for (name, v) in expect_int {
        assert_eq!(n.get_u64(name), Some(v), "{name}");
    }
    for (name, v) in [
        ("EnablePartialLcp", true),
        ("StopOnError", true),
        ("TwoPassInitialNodeRestartCopy", true),
        ("ODirect", false),
        ("RealtimeScheduler", false),
    ] {
        assert_eq!(n.get(name), Some(&ParamValue::Bool(v)), "{name}");
    }
    assert_eq!(n.get_str("Arbitration"), Some("Default"));
    assert_eq!(n.get_str("InitFragmentLogFiles"), Some("sparse"));
    assert_eq!(n.get_str("ThreadConfig"), Some(""));
    for p in [
        "FileSystemPath",
        "BackupDataDir",
        "FileSystemPathDD",
        "FileSystemPathDataFiles",
        "FileSystemPathUndoFiles",
    ] {
        assert_eq!(n.get_str(p), Some("."), "{p}");
    }
    assert_eq!(n.get("ServerPort"), None);
    assert_eq!(n.get("MaxNoOfLocalScans"), None);
    let m = &c.mgm_nodes[0];
    assert_eq!(
        (m.port_number, m.arbitration_rank, m.host_name.as_str()),
        (1186, 1, "localhost")
    );
    assert_eq!(
        (
            m.get_u64("ArbitrationDelay"),
            m.get_u64("HeartbeatIntervalMgmdMgmd")
        ),
        (Some(0), Some(1500))
    );
    let a = &c.api_nodes[0];
    assert_eq!(a.arbitration_rank, 0);
    let api_ints = [
        ("BatchSize", 256),
        ("BatchByteSize", 16 * K),
        ("MaxScanBatchSize", 256 * K),
    ];
    for (name, v) in api_ints {
        assert_eq!(a.get_u64(name), Some(v), "{name}");
    }
    assert_eq!(a.get_bool("AutoReconnect"), Some(true));
    assert_eq!(
        a.get_str("DefaultOperationRedoProblemAction"),
        Some("queue")
    );
    let api_default = parse("[ndbd default]\nNoOfReplicas=1\n[ndbd]\n[api]\n").expect("parses");
    assert_eq!(
        api_default.api_nodes[0].host_name, "",
        "empty HostName = any host"
    );
}

#[test]
fn embedded_layouts() {
    let c = ClusterConfig::embedded_default();
    assert_eq!(c.source, "<defaults>");
    assert!(c.warnings.is_empty());
    assert_eq!(ids(&c.mgm_nodes, |n| n.node_id), vec![1]);
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![2, 3]);
    assert_eq!(ids(&c.api_nodes, |n| n.node_id), vec![4, 5, 6, 7]);
    assert_eq!(c.node_groups(), vec![vec![2, 3]]);
    assert_eq!(c.no_of_replicas(), 2);
    assert!(c.api_nodes.iter().all(|a| a.host_name == "localhost"));
    let four = ClusterConfig::embedded(4, 2).expect("4 nodes, 2 replicas");
    assert_eq!(four.node_groups(), vec![vec![2, 3], vec![4, 5]]);
    assert_eq!(ids(&four.api_nodes, |n| n.node_id), vec![6, 7, 8, 9]);
    assert_eq!(
        ClusterConfig::embedded(1, 1)
            .expect("single node")
            .node_groups(),
        vec![vec![2]]
    );
    assert_eq!(
        ClusterConfig::embedded(3, 2).unwrap_err().to_string(),
        "<defaults>:2: [ndbd default] NoOfReplicas=2: the number of data nodes (3) must be a multiple of NoOfReplicas (2)"
    );
    assert_eq!(
        ClusterConfig::embedded(2, 5).unwrap_err().to_string(),
        "<defaults>:2: [ndbd default] NoOfReplicas=5: value out of range, allowed 1..4"
    );
    assert_eq!(
        ClusterConfig::embedded(0, 1).unwrap_err().to_string(),
        "<defaults>: no [ndbd] section: at least one data node must be defined"
    );
    assert_eq!(
        ClusterConfig::embedded(143, 1)
            .expect("143 nodes")
            .data_nodes[142]
            .node_id,
        144
    );
    assert!(ClusterConfig::embedded(144, 1).is_err());
    assert!(ClusterConfig::embedded(u32::MAX, 1).is_err());
}

#[test]
fn syntax_comments_separators_and_case() {
    let text = "\u{feff}# comment\r\n; another\r\n\r\n[NDBD DEFAULT]\r\nnoofreplicas = 1\r\ndatamemory: 1g   # trailing\r\n\
                DiskPageBufferMemory=96m ; trailing too\r\nODirect=YES\r\n[DB]\r\nhostname=h1\r\n[Mgm]\r\n[API]\r\n";
    let c = parse(text).expect("parses");
    let n = &c.data_nodes[0];
    assert_eq!(
        (n.no_of_replicas, n.data_memory, n.disk_page_buffer_memory),
        (1, G, 96 * M)
    );
    assert_eq!(n.get_bool("odirect"), Some(true));
    assert_eq!(n.host_name, "h1");
    assert_eq!((c.mgm_nodes.len(), c.api_nodes.len()), (1, 1));
    let sizes = parse("[ndbd default]\nNoOfReplicas=1\nRedoBuffer=2048k\nSharedGlobalMemory=0\n[ndbd]\nDataMemory=3072MB\n").expect("parses");
    let n = &sizes.data_nodes[0];
    assert_eq!(
        (n.redo_buffer, n.shared_global_memory, n.data_memory),
        (2 * M, 0, 3 * G)
    );
}

#[test]
fn default_section_after_node_sections_still_applies() {
    let c = parse("[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\nDataMemory=2G\n[ndb_mgmd]\n[ndbd default]\nDataMemory=1G\nNoOfReplicas=2\n").expect("parses");
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![2, 3]);
    assert_eq!(c.data_nodes[0].data_memory, G);
    assert_eq!(
        c.data_nodes[1].data_memory,
        2 * G,
        "own section beats the default section"
    );
    assert_eq!(c.no_of_replicas(), 2);
    assert_eq!(c.mgm_nodes[0].node_id, 1, "lowest free id");
}

#[test]
fn node_ids_given_are_kept_and_missing_ones_assigned_data_nodes_first() {
    let text = "[ndb_mgmd]\n[ndbd]\nNodeId=3\n[ndbd]\n[mysqld]\n[mysqld]\nNodeId=1\n";
    let c = parse(text).expect("parses");
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![3, 2]);
    assert_eq!(ids(&c.mgm_nodes, |n| n.node_id), vec![4]);
    assert_eq!(ids(&c.api_nodes, |n| n.node_id), vec![5, 1]);
    assert_eq!(
        c.node_groups(),
        vec![vec![3, 2]],
        "groups follow file order"
    );
    // No id anywhere: file order, so the usual layout gives mgmd 1, data 2 and 3, api 4..
    let c = parse("[ndb_mgmd]\n[ndbd]\n[ndbd]\n[mysqld]\n[mysqld]\n[mysqld]\n[mysqld]\n")
        .expect("parses");
    assert_eq!(ids(&c.mgm_nodes, |n| n.node_id), vec![1]);
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![2, 3]);
    assert_eq!(ids(&c.api_nodes, |n| n.node_id), vec![4, 5, 6, 7]);
    // ...unless file order would push a data node past 144.
    let many_api = format!(
        "{}[ndbd default]\nNoOfReplicas=1\n[ndbd]\n",
        "[api]\n".repeat(150)
    );
    let c = parse(&many_api).expect("parses");
    assert_eq!(c.data_nodes[0].node_id, 1);
    assert_eq!(c.api_nodes[0].node_id, 2);
    let full = format!(
        "{}[ndbd default]\nNoOfReplicas=1\n[ndbd]\n[api]\nNodeId=1\n",
        "[api]\n".repeat(255)
    );
    assert_eq!(
        err(&full),
        "config.ini:254: [api] no free NodeId left for this node (allowed 1..255)"
    );
}

#[test]
fn node_groups_honour_explicit_nodegroup() {
    let text = "[ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n[ndbd]\nNodeId=4\nNodegroup=0\n[ndbd]\nNodeId=5\n[ndbd]\nNodeId=6\nNodegroup=65536\n";
    let c = parse(text).expect("parses");
    assert_eq!(c.node_groups(), vec![vec![2, 4], vec![3, 5]]);
    assert_eq!(
        ids(&c.data_nodes, |n| n.node_group),
        vec![0, 1, 0, 1, 65536]
    );
    for n in &c.data_nodes {
        assert_synced(n);
    }
    let odd = "[ndbd]\n[ndbd]\n[ndbd]\nNodegroup=65536\n[ndbd]\nNodegroup=65536\n[ndbd]\n";
    assert_eq!(
        err(odd),
        "config.ini:1: [ndbd] NoOfReplicas=2 (default): the number of data nodes (3) must be a multiple of NoOfReplicas (2) (not counting 2 node(s) with Nodegroup=65536)"
    );
}

#[test]
fn derived_paths_and_computers() {
    let text = "[computer]\nId=c1\nHostName=dn-host\n[ndbd default]\nNoOfReplicas=1\nDataDir=/var/lib/ndb\n\
                [ndbd]\nExecuteOnComputer=c1\n[ndbd]\nFileSystemPath=/fs\n[ndbd]\nExecuteOnComputer=c1\nHostName=own\n";
    let c = parse(text).expect("parses");
    let [a, b, d] = &c.data_nodes[..] else {
        panic!("three data nodes")
    };
    assert_eq!(a.host_name, "dn-host");
    assert_eq!(d.host_name, "own", "HostName beats ExecuteOnComputer");
    assert_eq!(a.get_str("FileSystemPath"), Some("/var/lib/ndb"));
    assert_eq!(a.get_str("BackupDataDir"), Some("/var/lib/ndb"));
    assert_eq!(b.data_dir, PathBuf::from("/var/lib/ndb"));
    for p in [
        "FileSystemPath",
        "BackupDataDir",
        "FileSystemPathDD",
        "FileSystemPathUndoFiles",
    ] {
        assert_eq!(b.get_str(p), Some("/fs"), "{p}");
    }
    assert!(b.is_explicit("filesystempath") && !b.is_explicit("BackupDataDir"));
    assert_eq!(c.computers[0].host_name, "dn-host");
}

#[test]
fn tcp_system_and_mgm_sections() {
    let text = "[system]\nName=demo\n[tcp default]\nSendBufferMemory=8M\n[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=2\n\
                [ndb_mgmd]\nNodeId=1\nPortNumber=1187\nArbitrationRank=2\nLogDestination=FILE:filename=c.log,maxsize=1000000\n\
                [tcp]\nNodeId1=1\nNodeId2=2\nChecksum=on\n";
    let c = parse(text).expect("parses");
    assert_eq!(c.system.as_ref().map(|s| s.name.as_str()), Some("demo"));
    let t = &c.tcp_connections[0];
    assert_eq!(
        (
            t.node_id1,
            t.node_id2,
            t.send_buffer_memory,
            t.receive_buffer_memory,
            t.checksum
        ),
        (1, 2, 8 * M, 2 * M, true)
    );
    let m = &c.mgm_nodes[0];
    assert_eq!((m.port_number, m.arbitration_rank), (1187, 2));
    assert_eq!(
        m.get_str("logdestination"),
        Some("FILE:filename=c.log,maxsize=1000000")
    );
}

#[test]
fn tcp_default_applies_to_every_connection_without_its_own_section() {
    let text = "[tcp default]\nSendBufferMemory=8M\nOverloadLimit=6M\n[ndbd default]\nNoOfReplicas=2\n\
                [ndbd]\nNodeId=2\n[ndbd]\nNodeId=3\n[ndb_mgmd]\nNodeId=1\n\
                [tcp]\nNodeId1=2\nNodeId2=3\nSendBufferMemory=4M\n";
    let c = parse(text).expect("parses");
    // Its own section (either order of the ends), its values over the defaults.
    assert_eq!(c.send_buffer_of(3, 2), (4 * M, 6 * M));
    // No section of its own: [tcp default].
    assert_eq!(c.send_buffer_of(1, 2), (8 * M, 6 * M));
    // The configuration the management server sends keeps [tcp default].
    let again = ClusterConfig::parse(&c.to_ini(), "again").expect("round trip");
    assert_eq!(again.send_buffer_of(1, 3), (8 * M, 6 * M));
    assert_eq!(again.tcp_default, c.tcp_default);
    // Without any [tcp default]: NDB's 2M and OverloadLimit 0.
    let plain = parse("[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=2\n").expect("parses");
    assert_eq!(plain.send_buffer_of(1, 2), (2 * M, 0));
}
