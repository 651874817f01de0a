//! Tests of configuration errors: every kind of mistake, with its exact message (file,
//! line, section, parameter, value and, for ranges, the allowed range in NDB's units).

use super::tests::{err, parse};
use super::*;

#[test]
fn error_out_of_range_names_file_line_parameter_and_range() {
    let text = "[ndb_mgmd]\nNodeId=1\n\n[ndbd]\nNodeId=2\n[ndbd default]\nDataMemory=5000G\n";
    let e = parse(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "config.ini:7: [ndbd default] DataMemory=5000G: value out of range, allowed 1M..1024G"
    );
    assert_eq!(
        (e.file.as_str(), e.line, e.parameter.as_deref()),
        ("config.ini", 7, Some("DataMemory"))
    );
    assert_eq!(
        err("[ndbd]\nLongMessageBuffer=256K\n"),
        "config.ini:2: [ndbd] LongMessageBuffer=256K: value out of range, allowed 512K..4G"
    );
    assert_eq!(
        err("[ndbd]\nTimeBetweenGlobalCheckpoints=10\n"),
        "config.ini:2: [ndbd] TimeBetweenGlobalCheckpoints=10: value out of range, allowed 20..32000"
    );
    assert_eq!(
        err("[ndbd]\nMaxNoOfConcurrentScans=501\n"),
        "config.ini:2: [ndbd] MaxNoOfConcurrentScans=501: value out of range, allowed 2..500"
    );
    assert_eq!(
        err("[ndbd]\nNodeId=145\n"),
        "config.ini:2: [ndbd] NodeId=145: value out of range, allowed 1..144"
    );
    assert_eq!(
        err("[api]\nNodeId=256\n"),
        "config.ini:2: [api] NodeId=256: value out of range, allowed 1..255"
    );
    assert_eq!(
        err("[ndbd]\nDataMemory=99999999999999999999\n"),
        "config.ini:2: [ndbd] DataMemory=99999999999999999999: value out of range, allowed 1M..1024G"
    );
}

#[test]
fn error_messages_for_each_case() {
    let cases: &[(&str, &str)] = &[
        (
            "[ndbd default]\nDataMemroy=5G\n",
            "config.ini:2: [ndbd default] unknown parameter 'DataMemroy' (did you mean DataMemory?)",
        ),
        (
            "[ndbd]\nFrobnicate=1\n",
            "config.ini:2: [ndbd] unknown parameter 'Frobnicate'",
        ),
        (
            "[ndbd]\nPortNumber=1186\n",
            "config.ini:2: [ndbd] parameter PortNumber does not belong in this section (it is a [ndb_mgmd] parameter)",
        ),
        (
            "# c\n[ndbx]\n",
            "config.ini:2: unknown section [ndbx] (did you mean [ndbd]?)",
        ),
        (
            "[ndbd]\nDataMemory 80M\n",
            "config.ini:2: [ndbd] malformed line 'DataMemory 80M' (expected name=value)",
        ),
        (
            "[ndbd]\n= 80M\n",
            "config.ini:2: [ndbd] malformed line '= 80M' (expected name=value)",
        ),
        (
            "[ndbd\n",
            "config.ini:1: malformed section header '[ndbd' (expected [name] or [name default])",
        ),
        (
            "[ndbd]\nODirect=maybe\n",
            "config.ini:2: [ndbd] ODirect=maybe: bad value, expected a boolean (true/false, yes/no, on/off, 1/0)",
        ),
        (
            "[ndbd]\nDataMemory=lots\n",
            "config.ini:2: [ndbd] DataMemory=lots: bad value, expected a non-negative integer (K, M or G suffix allowed)",
        ),
        (
            "[ndbd]\nArbitration=sometimes\n",
            "config.ini:2: [ndbd] Arbitration=sometimes: bad value, expected one of Default, Disabled, WaitExternal",
        ),
        (
            "[ndbd]\nDataDir=\n",
            "config.ini:2: [ndbd] DataDir=: bad value, expected a non-empty path",
        ),
        (
            "[ndb_mgmd]\nNodeId=2\n[ndbd]\nNodeId=2\n",
            "config.ini:4: [ndbd] NodeId=2: duplicate NodeId, already used by [ndb_mgmd] at line 2",
        ),
        (
            "[ndb_mgmd]\n[mysqld]\n",
            "config.ini: no [ndbd] section: at least one data node must be defined",
        ),
        (
            "",
            "config.ini: no [ndbd] section: at least one data node must be defined",
        ),
        (
            "DataMemory=1G\n[ndbd]\n",
            "config.ini:1: DataMemory=1G: parameter outside of any section (a section header such as [ndbd] must come first)",
        ),
        (
            "[ndbd]\nDataMemory=1G\ndatamemory=2G\n",
            "config.ini:3: [ndbd] DataMemory=2G: parameter given twice in this section (first at line 2)",
        ),
        (
            "[ndbd default]\nNodeId=2\n",
            "config.ini:2: [ndbd default] NodeId=2: NodeId cannot be given in a default section",
        ),
        (
            "[ndbd]\n[ndbd]\n[ndbd]\n",
            "config.ini:1: [ndbd] NoOfReplicas=2 (default): the number of data nodes (3) must be a multiple of NoOfReplicas (2)",
        ),
        (
            "[tcp]\nNodeId1=2\n[ndbd]\n",
            "config.ini:1: [tcp] mandatory parameter NodeId2 is missing from this section",
        ),
        (
            "[system]\n",
            "config.ini:1: [system] mandatory parameter Name is missing from this section",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=2\n[tcp]\nNodeId1=2\nNodeId2=9\n",
            "config.ini:7: [tcp] NodeId2=9: no node has NodeId 9",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nNodeId=2\n[tcp]\nNodeId1=2\nNodeId2=2\n",
            "config.ini:7: [tcp] NodeId2=2: a connection from a node to itself is not allowed",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\n[ndbd]\n[api]\n[api]\n[tcp]\nNodeId1=2\nNodeId2=3\n",
            "config.ini:8: [tcp] NodeId2=3: a connection needs a data node at one end (or two management nodes)",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nExecuteOnComputer=c9\n",
            "config.ini:4: [ndbd] ExecuteOnComputer=c9: no [computer] section has Id=c9",
        ),
        (
            "[computer]\nId=c1\nHostName=a\n[computer]\nId=c1\nHostName=b\n[ndbd]\n",
            "config.ini:5: [computer] Id=c1: a [computer] with this Id is already defined",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\n[ndbd]\nHostName=\n",
            "config.ini:4: [ndbd] HostName=: a data node needs a host name",
        ),
        (
            "[ndbd default]\nNoOfReplicas=1\nMaxNoOfConcurrentOperations=100\n[ndbd]\n",
            "config.ini:3: [ndbd default] MaxNoOfConcurrentOperations=100: MaxNoOfConcurrentOperations must be at least MaxNoOfConcurrentTransactions (4096)",
        ),
        (
            "[ndbd]\nNoOfReplicas=1\n[ndbd]\nNoOfReplicas=2\n",
            "config.ini:4: [ndbd] NoOfReplicas=2: NoOfReplicas must be the same on all data nodes (node 1 has 1)",
        ),
        (
            "[ndbd]\nNodegroup=0\n[ndbd]\nNodegroup=0\n[ndbd]\nNodegroup=0\n[ndbd]\n",
            "config.ini:6: [ndbd] Nodegroup=0: node group 0 already has NoOfReplicas (2) members",
        ),
        (
            "[ndbd]\nNodegroup=3\n[ndbd]\n",
            "config.ini:2: [ndbd] Nodegroup=3: node group 3 has 1 member(s) but NoOfReplicas is 2",
        ),
        (
            "[ndbd]\nNodegroup=65536\n",
            "config.ini:1: [ndbd] NoOfReplicas=2 (default): at least one data node must belong to a node group",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(err(text), *expected, "input:\n{text}");
    }
}

#[test]
fn error_carries_parameter_and_converts_to_ndb_error() {
    let e = parse("[ndbd default]\nDataMemroy=5G\n").unwrap_err();
    assert_eq!((e.line, e.parameter.as_deref()), (2, Some("DataMemroy")));
    let dup = parse("[ndb_mgmd]\nNodeId=2\n[ndbd]\nNodeId=2\n").unwrap_err();
    assert_eq!(dup.parameter.as_deref(), Some("NodeId"));
    let ndb: NdbError = e.into();
    assert_eq!(ndb.code, 5000);
    assert_eq!(
        ndb.message,
        "Configuration error: config.ini:2: [ndbd default] unknown parameter 'DataMemroy' (did you mean DataMemory?)"
    );
}
