"""cluster.mgm (the management client's language) and cluster.ndbinfo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rndb
from conftest import create_t1


def test_mgm_commands(cluster: rndb.Cluster) -> None:
    show = cluster.mgm("SHOW")
    assert show.splitlines()[:2] == ["Cluster Configuration", "---------------------"]
    assert "[ndbd(NDB)]\t2 node(s)" in show
    assert re.search(r"^id=2\t@127\.0\.0\.1 .*Nodegroup: 0, \*\)$", show, re.M)
    status = cluster.mgm("ALL STATUS").splitlines()
    assert [s.split(":")[0] for s in status] == ["Node 2", "Node 3"]
    assert all(": started (" in s for s in status)
    assert cluster.mgm("3 report mem").splitlines() == cluster.mgm("ALL REPORT MEMORYUSAGE").splitlines()[2:]
    assert cluster.mgm("") == ""
    for bad in ("FROB", "ALL REPORT Foo", "9 STATUS"):
        with pytest.raises(rndb.NdbError) as ei:
            cluster.mgm(bad)
        assert ei.value.code == 5001


def test_memory_usage_follows_the_data(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")

        def data_pages() -> list[int]:
            return [r["used_pages"] for r in cluster.ndbinfo("memoryusage") if r["memory_type"] == "Data memory"]

        empty = data_pages()
        create_t1(ndb)
        ndb.insert_many("t1", ({"id": i, "a": i, "b": "0123456789abcdef"} for i in range(20_000)))
        full = data_pages()
        assert all(f > e for f, e in zip(full, empty, strict=True))
        # both replicas hold the rows: the same usage on both nodes
        assert full[0] == full[1]
        report = cluster.mgm("ALL REPORT MEMORYUSAGE")
        assert f"Node 2: Data usage is {full[0] * 100 // 1024}%({full[0]} 32K pages of total 1024)" in report
        ndb.drop_table("t1")
        assert data_pages() == empty


def test_ndbinfo_tables(cluster: rndb.Cluster, ndb: rndb.Ndb) -> None:
    create_t1(ndb)
    ndb.insert_many("t1", [{"id": 1}])
    nodes = cluster.ndbinfo("nodes")
    assert [n["node_id"] for n in nodes] == [2, 3]
    frags = cluster.ndbinfo("memory_per_fragment")
    assert frags and all(isinstance(r, dict) for r in frags)
    with pytest.raises(rndb.NdbError) as ei:
        cluster.ndbinfo("nope")
    assert ei.value.code == 723 and "nope" in ei.value.message


def test_close_releases_data_memory(tmp_path: Path) -> None:
    cluster = rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="16M")
    ndb = cluster.ndb("test")
    create_t1(ndb)
    ndb.insert_many("t1", ({"id": i} for i in range(5000)))
    assert "closed" not in repr(cluster)
    cluster.close()
    assert repr(cluster) == "<rndb.Cluster data_nodes=[2, 3] closed>"
    with pytest.raises(rndb.NdbError) as ei:
        cluster.mgm("ALL REPORT MEMORYUSAGE")
    assert ei.value.code == 4009
