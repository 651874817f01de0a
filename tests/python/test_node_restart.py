"""Node stop and restart from Python (`cluster.mgm`): a stopped node is left out while
reads and writes go on, `START` copies its data back from the live replica, and the
restarted node alone then serves everything."""

from __future__ import annotations

import time

import pytest

import rndb
from conftest import create_t1


def wait_started(cluster: rndb.Cluster, node: int) -> None:
    deadline = time.monotonic() + 60
    while not cluster.mgm(f"{node} STATUS").startswith(f"Node {node}: started"):
        assert time.monotonic() < deadline, cluster.mgm("ALL STATUS")
        time.sleep(0.01)


def test_stop_start_and_read_from_the_restarted_node() -> None:
    with rndb.Cluster.embedded(DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")
        create_t1(ndb)
        ndb.insert_many("t1", ({"id": i, "a": i, "b": f"r{i}"} for i in range(5_000)))
        assert cluster.mgm("3 STOP") == "Node 3: Node shutdown initiated\nNode 3 has shutdown."
        assert "Node 3: not connected" in cluster.mgm("ALL STATUS")
        with ndb.transaction() as tx:
            tx.update("t1", {"id": 7, "a": -7})
            tx.delete("t1", {"id": 8})
            tx.insert("t1", {"id": 9_000, "a": 1, "b": "new"})
        with pytest.raises(rndb.NdbError) as ei:
            cluster.mgm("2 STOP")
        assert "Node shutdown would cause system crash" in str(ei.value)
        assert cluster.mgm("3 START") == "Database node 3 is being started."
        wait_started(cluster, 3)
        cluster.mgm("2 STOP")
        rows = ndb.read_many("t1", [7, 8, 9_000, 4_999])
        assert rows[0] is not None and rows[0]["a"] == -7
        assert rows[1] is None
        assert rows[2] is not None and rows[2]["b"] == "new"
        assert rows[3] is not None and rows[3]["b"] == "r4999"
        cluster.mgm("2 START")
        wait_started(cluster, 2)


def test_data_memory_changes_by_rolling_restart() -> None:
    with rndb.Cluster.embedded(DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")
        create_t1(ndb)
        ndb.insert_many("t1", ({"id": i, "a": i, "b": f"r{i}"} for i in range(2_000)))
        assert "of total 1024)" in cluster.mgm("ALL REPORT MEMORYUSAGE")
        out = cluster.mgm("SET DataMemory=48M")
        assert "each data node takes it when it next starts" in out
        assert "of total 1024)" in cluster.mgm("ALL REPORT MEMORYUSAGE")
        out = cluster.mgm("ROLLING RESTART")
        assert out.endswith("Rolling restart completed."), out
        report = cluster.mgm("ALL REPORT MEMORYUSAGE")
        assert report.count("of total 1536)") == 4, report
        rows = ndb.read_many("t1", [0, 1_999])
        assert rows[0] is not None and rows[1] is not None and rows[1]["b"] == "r1999"
