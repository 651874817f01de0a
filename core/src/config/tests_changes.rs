//! Tests of programmatic changes (`set_*`), the to_ini round trip, file reading, and
//! robustness against arbitrary input.

use super::params::{G, M};
use super::tests::{SEED_002, assert_synced, ids, parse};
use super::*;

#[test]
fn set_data_node_param_validates_and_updates_typed_fields() {
    let mut c = ClusterConfig::embedded_default();
    assert_eq!(
        c.set_data_node_param("datamemory", "2G"),
        Ok(Restart::Rolling)
    );
    assert!(
        c.data_nodes
            .iter()
            .all(|n| n.data_memory == 2 * G && n.get_u64("DataMemory") == Some(2 * G))
    );
    assert_eq!(
        c.set_data_node_param("TransactionDeadlockDetectionTimeout", "5000"),
        Ok(Restart::None)
    );
    assert!(
        c.data_nodes
            .iter()
            .all(|n| n.transaction_deadlock_detection_timeout_ms == 5000)
    );
    assert_eq!(
        c.set_data_node_param("NoOfFragmentLogFiles", "32"),
        Ok(Restart::Initial)
    );
    assert_eq!(c.set_data_node_param("ODirect", "on"), Ok(Restart::Rolling));
    assert_eq!(
        c.data_nodes[1].get("ODirect"),
        Some(&ParamValue::Bool(true))
    );

    let before = c.clone();
    let e = c.set_data_node_param("DataMemory", "5000G").unwrap_err();
    assert_eq!(
        e.to_string(),
        "<argument>: [ndbd default] DataMemory=5000G: value out of range, allowed 1M..1024G"
    );
    assert_eq!(
        (e.file.as_str(), e.line, e.parameter.as_deref()),
        ("<argument>", 0, Some("DataMemory"))
    );
    let failures: &[(&str, &str, &str)] = &[
        (
            "DataMemroy",
            "1G",
            "<argument>: [ndbd default] unknown parameter 'DataMemroy' (did you mean DataMemory?)",
        ),
        (
            "PortNumber",
            "1",
            "<argument>: [ndbd default] parameter PortNumber does not belong in this section (it is a [ndb_mgmd] parameter)",
        ),
        (
            "ODirect",
            "maybe",
            "<argument>: [ndbd default] ODirect=maybe: bad value, expected a boolean (true/false, yes/no, on/off, 1/0)",
        ),
        (
            "NoOfReplicas",
            "3",
            "<argument>: [ndbd default] NoOfReplicas=3: the number of data nodes (2) must be a multiple of NoOfReplicas (3)",
        ),
        (
            "NodeId",
            "9",
            "<argument>: [ndbd default] NodeId=9: NodeId cannot be given in a default section",
        ),
        (
            "ThreadConfig",
            "a\nb",
            "<argument>: [ndbd default] ThreadConfig=a\nb: bad value, control characters are not allowed",
        ),
    ];
    for (name, value, expected) in failures {
        assert_eq!(
            c.set_data_node_param(name, value).unwrap_err().to_string(),
            *expected
        );
        assert_eq!(
            c, before,
            "a failed change leaves the configuration untouched"
        );
    }

    assert_eq!(
        c.set_data_node_param("NoOfReplicas", "1"),
        Ok(Restart::Initial)
    );
    assert_eq!(c.node_groups(), vec![vec![2], vec![3]]);
    assert_eq!(ids(&c.data_nodes, |n| n.node_group), vec![0, 1]);
    assert_eq!(
        c.set_data_node_param("IndexMemory", "64M"),
        Ok(Restart::Rolling)
    );
    assert_eq!(
        c.warnings,
        vec![
            "<argument>: IndexMemory is deprecated; its memory is taken from DataMemory"
                .to_string()
        ]
    );
    for n in &c.data_nodes {
        assert_synced(n);
    }
}

#[test]
fn set_node_param_changes_one_node() {
    let mut c = ClusterConfig::embedded_default();
    assert_eq!(c.set_node_param(3, "DataDir", "/d3"), Ok(Restart::Initial));
    let n3 = c.data_node(3).expect("node 3");
    assert_eq!(
        (
            n3.data_dir.to_str(),
            n3.get_str("FileSystemPath"),
            n3.get_str("BackupDataDir")
        ),
        (Some("/d3"), Some("/d3"), Some("/d3"))
    );
    assert_eq!(
        c.data_node(2).map(|n| n.data_dir.clone()),
        Some(PathBuf::from("."))
    );
    assert_eq!(
        c.set_node_param(9, "DataMemory", "1G")
            .unwrap_err()
            .to_string(),
        "<argument>: [ndbd] DataMemory=1G: no data node has NodeId 9"
    );
    assert_eq!(
        c.set_node_param(3, "NodeId", "2").unwrap_err().to_string(),
        "<argument>: [ndbd] NodeId=2: duplicate NodeId, already used by node 2"
    );
    assert_eq!(
        c.set_node_param(2, "NoOfReplicas", "1")
            .unwrap_err()
            .to_string(),
        "<argument>: [ndbd] NoOfReplicas=2: NoOfReplicas must be the same on all data nodes (node 2 has 1)"
    );
    assert_eq!(c.set_node_param(3, "NodeId", "9"), Ok(Restart::Initial));
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![2, 9]);
    assert_eq!(c.node_groups(), vec![vec![2, 9]]);
}

const RICH: &str = "[system]\nName=demo\n[computer]\nId=c1\nHostName=dn-host\n\
    [ndbd default]\nNoOfReplicas=2\nDataMemory=4G\nDiskPageBufferMemory=256M\nDataDir=/var/lib/mysql-cluster\nArbitration=waitexternal\n\
    [tcp default]\nSendBufferMemory=8M\n\
    [ndb_mgmd]\nNodeId=1\nHostName=mgm1\nLogDestination=FILE:filename=cluster.log,maxsize=1000000,maxfiles=6\n\
    [ndbd]\nNodeId=2\nExecuteOnComputer=c1\nODirect=yes\nThreadConfig=\"ldm={count=4};main # x\"\n\
    [ndbd]\nNodeId=3\nHostName=dn2\nFileSystemPath=/data/ndb # comment\n\
    [ndbd]\nHostName=dn3\nNodegroup=1\n[ndbd]\nHostName=dn4\nIndexMemory=0\n\
    [mysqld]\nNodeId=50\n[api]\nArbitrationRank=1\n\
    [tcp]\nNodeId1=2\nNodeId2=3\nChecksum=on\n";

#[test]
fn to_ini_round_trips() {
    let c = parse(RICH).expect("rich config parses");
    assert_eq!(ids(&c.data_nodes, |n| n.node_id), vec![2, 3, 4, 5]);
    assert_eq!(ids(&c.api_nodes, |n| n.node_id), vec![50, 6]);
    assert_eq!(c.node_groups(), vec![vec![2, 3], vec![4, 5]]);
    assert_eq!(
        c.data_nodes[0].get_str("ThreadConfig"),
        Some("ldm={count=4};main # x")
    );
    assert_eq!(c.data_nodes[0].host_name, "dn-host");
    let text = c.to_ini();
    let mut back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    back.warnings.clone_from(&c.warnings);
    assert_eq!(back, c, "\n{text}");
    assert!(
        text.contains(
            "[ndbd default]\nDataDir=/var/lib/mysql-cluster\nNoOfReplicas=2\nDataMemory=4G\n"
        ),
        "{text}"
    );

    let d = ClusterConfig::embedded_default();
    assert_eq!(
        ClusterConfig::parse(&d.to_ini(), "<defaults>"),
        Ok(d.clone())
    );
    let mut changed = d;
    changed
        .set_data_node_param("DataMemory", "1500M")
        .expect("set");
    changed.set_node_param(2, "HostName", "h2").expect("set");
    assert!(changed.to_ini().contains("DataMemory=1500M"));
    assert_eq!(
        ClusterConfig::parse(&changed.to_ini(), "<defaults>"),
        Ok(changed)
    );
}

#[test]
fn from_file_reads_and_names_the_file() {
    let path = std::env::temp_dir().join(format!("rndb-config-test-{}.ini", std::process::id()));
    std::fs::write(&path, SEED_002).expect("write temp file");
    let c = ClusterConfig::from_file(&path);
    let _ = std::fs::remove_file(&path);
    let c = c.expect("parses");
    assert_eq!(c.source, path.display().to_string());
    assert_eq!(c.data_nodes[0].data_memory, 8000 * M);
    let missing = ClusterConfig::from_file(Path::new("/nonexistent/rndb/config.ini")).unwrap_err();
    assert_eq!(
        (missing.file.as_str(), missing.line),
        ("/nonexistent/rndb/config.ini", 0)
    );
    assert!(
        missing
            .to_string()
            .starts_with("/nonexistent/rndb/config.ini: cannot read configuration file: "),
        "{missing}"
    );
}

/// Pseudo-random input must never panic, and whatever parses must round-trip.
#[test]
fn arbitrary_input_never_panics_and_parsed_configs_round_trip() {
    const LINES: &[&str] = &[
        "[ndbd]",
        "[ndbd default]",
        "[DB]",
        "[ndb_mgmd]",
        "[mysqld]",
        "[api default]",
        "[tcp]",
        "[computer]",
        "[system]",
        "NodeId=2",
        "NodeId=3",
        "NodeId=255",
        "NoOfReplicas=1",
        "NoOfReplicas=2",
        "Nodegroup=0",
        "Nodegroup=65536",
        "DataMemory=1G",
        "DataMemory: 80M # c",
        "HostName=h",
        "HostName=",
        "ExecuteOnComputer=c",
        "Id=c",
        "Name=n",
        "NodeId1=2",
        "NodeId2=3",
        "DataDir=/x",
        "FileSystemPath=/fs",
        "IndexMemory=1M",
        "ODirect=y",
        "Arbitration=disabled",
        "ThreadConfig=\"a;b # c\"",
        "LogDestination=FILE:filename=x.log",
        "# comment",
        "",
        "ArbitrationRank=2",
    ];
    const NOISE: &[&str] = &[
        "[",
        "]",
        "=",
        ":",
        "#",
        ";",
        "\"",
        " ",
        "\t",
        "\r",
        "é",
        "\u{feff}",
        "NodeId=",
        "DataMemory=",
        "1G",
        "99999999999999999999G",
        "-1",
        "0",
        "default",
        "ndbd",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut parsed = 0;
    for _ in 0..3000 {
        let mut text = String::new();
        if next(2) == 0 {
            text.push_str("[ndbd default]\nNoOfReplicas=1\n[ndbd]\n");
        }
        for _ in 0..next(12) {
            if next(8) == 0 {
                for _ in 0..1 + next(4) {
                    text.push_str(NOISE[next(NOISE.len())]);
                }
            } else {
                text.push_str(LINES[next(LINES.len())]);
            }
            text.push('\n');
        }
        if let Ok(c) = parse(&text) {
            parsed += 1;
            let again = c.to_ini();
            let mut back =
                parse(&again).unwrap_or_else(|e| panic!("{e}\ninput:\n{text}\nwritten:\n{again}"));
            back.warnings.clone_from(&c.warnings);
            assert_eq!(back, c, "input:\n{text}\nwritten:\n{again}");
            c.data_nodes.iter().for_each(assert_synced);
        }
    }
    assert!(
        parsed > 100,
        "the generator should produce many valid configurations, got {parsed}"
    );
}
