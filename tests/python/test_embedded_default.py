"""The embedded default runs the node code (ARCHITECTURE decision 5): rndb_mgmd and two
rndbd in this process, reachable by a second client; Cluster.direct keeps the engines
on the caller's threads and gives the same answers."""

from __future__ import annotations

from pathlib import Path

import pytest

import rndb
from conftest import create_t1


def script(cluster: rndb.Cluster) -> list[object]:
    """The same calls on either engine; what each returned."""
    ndb = cluster.ndb("test")
    create_t1(ndb)
    out: list[object] = []
    out.append(ndb.insert_many("t1", [(i, i % 3, f"r{i}") for i in range(50)], columns=["id", "a", "b"]))
    out.append(ndb.execute("UPDATE t1 SET b = 'x' WHERE a = 2"))
    out.append(ndb.read_many("t1", [1, 2, 99]))
    out.append(ndb.reader("t1", columns=["b", "a"]).get_many([2, 3, 99]))
    out.append(ndb.reader("t1", columns=[]).get_many([2, 99]))
    out.append(sorted(r["id"] for r in ndb.index_scan("t1", "ix_a", low=1, high=1)))
    out.append(ndb.execute("SELECT a, COUNT(*) AS n FROM t1 GROUP BY a ORDER BY a"))
    with ndb.transaction() as tx:
        op = tx.read("t1", {"id": 4}, columns=["b"])
        tx.delete("t1", {"id": 5})
    out.append(op.row)
    out.append(ndb.execute("SELECT COUNT(*) AS n FROM t1"))
    out.append(ndb.explain("SELECT * FROM t1 WHERE id = 3"))
    out.append(ndb.columns("t1"))
    out.append(ndb.tables())
    out.append(ndb.drop_table("nope", if_exists=True))
    return out


def test_embedded_and_direct_give_the_same_answers(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path / "nodes", DataMemory="32M") as c:
        nodes = script(c)
    with rndb.Cluster.direct(data_dir=tmp_path / "direct", DataMemory="32M") as c:
        assert repr(c).startswith("<rndb.Cluster direct data_nodes=[2, 3]")
        assert c.connectstring is None
        direct = script(c)
    assert nodes == direct
    assert nodes[2] == [{"id": 1, "a": 1, "b": "r1"}, {"id": 2, "a": 2, "b": "x"}, None]
    assert nodes[4] == [(), None]


def test_the_embedded_cluster_is_the_node_code_and_takes_a_second_client(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="32M") as cluster:
        cs = cluster.connectstring
        assert cs is not None and cs.startswith("local=")
        ndb = cluster.ndb("test")
        create_t1(ndb)
        ndb.insert_many("t1", [{"id": i, "a": i} for i in range(10)])
        with rndb.connect(cs) as other:
            # the management server of the embedded cluster answers another client
            status = other.mgm("ALL STATUS")
            assert "Node 2: started" in status and "Node 3: started" in status, status
            assert other.read_many("t1", [3, 42]) == [{"id": 3, "a": 3, "b": None}, None]
            other.insert_many("t1", [{"id": 42, "a": 0}])
        assert ndb.read_many("t1", [42], columns=["a"]) == [{"a": 0}]
        # a global checkpoint now, and the commits before it are durable
        with ndb.transaction() as tx:
            tx.update("t1", {"id": 1, "a": -1})
        gci = tx.gci
        assert gci is not None
        assert cluster.checkpoint() >= gci >> 32
        cluster.wait_durable(gci, timeout=10)
        # a data node stopped by command is gone when mgm returns; writes go on
        assert cluster.mgm("3 STOP").endswith("Node 3 has shutdown.")
        assert "Node 3: not connected" in cluster.mgm("ALL STATUS")
        ndb.insert_many("t1", [{"id": 100, "a": 1}])
        assert cluster.mgm("3 START") == "Database node 3 is being started."
        assert "Node 3: started" in cluster.mgm("ALL STATUS")
    # closed: a system restart on the same directory finds every commit
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")
        assert ndb.read_many("t1", [1, 42, 100], columns=["a"]) == [{"a": -1}, {"a": 0}, {"a": 1}]


def test_use_and_errors_over_the_nodes(ndb: rndb.Ndb) -> None:
    create_t1(ndb)
    ndb.execute("CREATE DATABASE other")
    assert ndb.sql_database == "test"
    ndb.execute("USE other")
    assert ndb.sql_database == "other"
    ndb.execute("CREATE TABLE o (id INT PRIMARY KEY) ENGINE=ndbcluster")
    assert ndb.execute("SHOW TABLES") == [{"Tables_in_other": "o"}]
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("USE nowhere")
    assert ei.value.mysql_code == 1049
    assert ndb.sql_database == "other"
    # the NDB API calls keep working in the Ndb object's database
    assert ndb.tables() == ["t1"]
    ndb.insert_many("t1", [{"id": 1}])
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many("t1", [{"id": 1}])
    assert (ei.value.code, ei.value.mysql_code) == (630, 1062)
