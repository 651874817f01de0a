"""OPTIMIZE TABLE and REPORT Fragmentation from Python: pages come back, rows stay."""

from __future__ import annotations

import re

import rndb


def _pages(report: str, node: int) -> int:
    m = re.search(rf"Node {node}: Data usage is \d+%\((\d+) 32K pages", report)
    assert m, report
    return int(m.group(1))


def test_optimize_gives_pages_back_and_the_report_recommends_it(
    cluster: rndb.Cluster, ndb: rndb.Ndb
) -> None:
    ndb.execute("CREATE TABLE frag (id INT PRIMARY KEY, a INT, b VARCHAR(120)) ENGINE=NDB")
    ndb.insert_many("frag", ({"id": i, "a": i % 13, "b": "v" * (i % 120)} for i in range(20000)))
    assert ndb.execute("DELETE FROM frag WHERE id % 4 <> 0") == 15000
    report = cluster.mgm("ALL REPORT Fragmentation")
    line = next(l for l in report.splitlines() if l.startswith("Node 2: test/def/frag: "))
    assert line.endswith(": recommended"), line
    m = re.search(r"would give back (\d+) pages", line)
    assert m, line
    promised = int(m.group(1))
    before = _pages(cluster.mgm("ALL REPORT MEMORYUSAGE"), 2)

    ndb.execute("SET ndb_optimization_delay = 0")
    result = ndb.execute("OPTIMIZE TABLE frag")
    # a note from each data node (both hold every fragment), then the status
    assert isinstance(result, list) and [r["Msg_type"] for r in result] == ["note", "note", "status"]
    assert result[2]["Msg_text"] == "OK"
    assert [r["Msg_text"][:7] for r in result[:2]] == ["Node 2:", "Node 3:"]
    assert all("DataMemory pages given back" in r["Msg_text"] for r in result[:2])

    after = _pages(cluster.mgm("ALL REPORT MEMORYUSAGE"), 2)
    assert before - after >= promised > 0, (before, after, promised)
    line = next(
        l for l in cluster.mgm("2 REPORT FRAG").splitlines() if l.startswith("Node 2: test/def/frag: ")
    )
    assert not line.endswith("recommended"), line
    rows = ndb.execute("SELECT id, a, b FROM frag ORDER BY id")
    assert rows == [{"id": i, "a": i % 13, "b": "v" * (i % 120)} for i in range(0, 20000, 4)]
    frags = cluster.ndbinfo("memory_per_fragment")
    assert all("reclaimable_fixed_bytes" in r and "reclaimable_disk_extents" in r for r in frags)
