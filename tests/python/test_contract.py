"""The issue's contract, line by line, with exact values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rndb


def test_constants_have_ndb_values() -> None:
    assert (rndb.NoCommit, rndb.Commit, rndb.Rollback) == (1, 2, 3)
    assert (rndb.LM_Read, rndb.LM_Exclusive, rndb.LM_CommittedRead, rndb.LM_SimpleRead) == (0, 1, 2, 3)
    assert (rndb.AbortOnError, rndb.AO_IgnoreError) == (0, 2)
    assert issubclass(rndb.NdbError, Exception)
    for sub in (rndb.TemporaryError, rndb.PermanentError, rndb.UnknownResultError):
        assert issubclass(sub, rndb.NdbError)


def test_contract(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="256M") as cluster:
        assert cluster.data_node_ids == [2, 3]
        assert cluster.data_dir == tmp_path
        assert "DataMemory=256M" in cluster.config_ini
        ndb = cluster.ndb("test")
        assert ndb.database == "test"
        assert (
            ndb.execute(
                "CREATE TABLE t1 (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, a INT, "
                "b VARCHAR(32), INDEX ix_a (a)) ENGINE=ndbcluster"
            )
            == 0
        )
        with ndb.transaction() as tx:
            ins = tx.insert("t1", {"id": 1, "a": 10, "b": "x"})
            assert ins.kind == "insert" and not ins.executed
        assert tx.state == "Closed"
        assert ins.executed and ins.error is None
        with ndb.transaction() as tx:
            op = tx.read("t1", {"id": 1})
            assert op.row is None and not op.executed
            tx.execute(rndb.NoCommit)
            assert op.row == {"id": 1, "a": 10, "b": "x"}
            assert tx.state == "Open"

        rows = [{"id": i, "a": i % 100, "b": f"row {i}"} for i in range(2, 1002)]
        assert ndb.insert_many("t1", rows) == 1000
        keys = [1, 2, 1001, 5000]
        found = ndb.read_many("t1", keys)
        assert found == [{"id": 1, "a": 10, "b": "x"}, rows[0], rows[-1], None]

        everything = [{"id": 1, "a": 10, "b": "x"}] + rows
        assert sorted(ndb.scan("t1"), key=lambda r: r["id"]) == everything

        ranged = list(ndb.index_scan("t1", "ix_a", low=10, high=20, high_inclusive=False))
        expected = [r for r in everything if 10 <= r["a"] < 20]
        assert [r["a"] for r in ranged] == sorted(r["a"] for r in expected)
        assert sorted(ranged, key=lambda r: r["id"]) == expected

        assert ndb.execute("SELECT * FROM t1 WHERE id = 1") == [{"id": 1, "a": 10, "b": "x"}]
        assert ndb.execute("UPDATE t1 SET a = 11 WHERE id = 1") == 1
        assert ndb.execute("DELETE FROM t1 WHERE id >= 1000") == 2

        report = cluster.mgm("ALL REPORT MEMORYUSAGE")
        usage = cluster.ndbinfo("memoryusage")
        assert [sorted(r) for r in usage] == [
            ["memory_type", "node_id", "total", "total_pages", "used", "used_pages"]
        ] * 4
        lines = []
        for r in usage:
            what = r["memory_type"].split()[0]
            pct = r["used_pages"] * 100 // r["total_pages"]
            lines.append(
                f"Node {r['node_id']}: {what} usage is {pct}%"
                f"({r['used_pages']} 32K pages of total {r['total_pages']})"
            )
        assert report == "\n".join(lines)
        assert [r["node_id"] for r in usage] == [2, 2, 3, 3]
        assert all(r["total_pages"] == 256 * 1024 // 32 for r in usage)
        assert all(r["total"] == 256 * 1024 * 1024 for r in usage)
        assert usage[0]["used_pages"] > 0
        assert cluster.ndbinfo("ndbinfo.memoryusage") == usage
    assert cluster.closed

    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many("t1", [1])
    e = ei.value
    assert (e.code, e.status, e.classification) == (4009, "UnknownResult", "UnknownResultError")
    assert isinstance(e, rndb.UnknownResultError)
    assert re.search(r"\b4009\b", str(e)) and "Cluster Failure" in str(e)
