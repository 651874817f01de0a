"""ndbinfo over TCP against rndb_mgmd and four rndbd (two node groups): every live data
node's rows of ndbinfo.transporters, memoryusage and memory_per_fragment, gathered by
the node that runs the query (which it may run whatever the number of node groups,
since it reads no replicas); a killed data node's peers show its transporter
DISCONNECTED with their counters kept, and count a second connection once it is
back."""

from __future__ import annotations

import subprocess
import time

import pytest

import rndb
from test_connect import binaries, wait_for
from test_remote_scan import four_nodes  # noqa: F401  (the fixture)

Nodes = tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]]


def rows(c: rndb.MgmClient, sql: str) -> list[dict[str, str]]:
    lines = [ln for ln in c.sql(sql).splitlines() if ln.startswith("|")]
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    return [dict(zip(head, (v.strip() for v in ln.strip("|").split("|")))) for ln in lines[1:]]


def transporters(c: rndb.MgmClient) -> dict[tuple[int, int], dict[str, str]]:
    got = rows(c, "SELECT * FROM ndbinfo.transporters")
    return {(int(r["node_id"]), int(r["remote_node_id"])): r for r in got}


def test_transporters_of_every_data_node(four_nodes: Nodes, tmp_path_factory: pytest.TempPathFactory) -> None:  # noqa: F811
    c, nodes = four_nodes
    c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB")
    c.insert_many("kv", ({"id": i, "v": "x"} for i in range(200)))
    t = transporters(c)
    data = [2, 3, 4, 5]
    for n in data:
        for p in [1, *data]:
            if p == n:
                continue
            r = t[(n, p)]
            assert r["status"] == "CONNECTED", r
            assert r["remote_address"].startswith("127.0.0.1:"), r
            assert int(r["connect_count"]) == 1 and int(r["bytes_sent"]) > 0, r
            assert (r["slowdown"], r["overloaded"]) == ("0", "0"), r
    # The writes went to both replicas: a group's nodes sent each other after-images.
    assert int(t[(2, 3)]["bytes_sent"]) > 1000 or int(t[(3, 2)]["bytes_sent"]) > 1000, t
    per_node = rows(c, "SELECT node_id, COUNT(*) AS n FROM ndbinfo.transporters GROUP BY node_id")
    assert [r["node_id"] for r in per_node] == ["2", "3", "4", "5"]
    # Every other ndbinfo table too: each data node's memory, and its fragments of kv.
    mem = rows(c, "SELECT node_id, memory_type FROM ndbinfo.memoryusage")
    assert [(r["node_id"], r["memory_type"]) for r in mem] == [
        (str(n), t) for n in (2, 3, 4, 5) for t in ("Data memory", "Index memory")
    ], mem
    frags = rows(c, "SELECT DISTINCT node_id FROM ndbinfo.memory_per_fragment WHERE fq_name LIKE '%kv%'")
    assert sorted(r["node_id"] for r in frags) == ["2", "3", "4", "5"], frags
    # A statement mixing a table with ndbinfo is still refused with two node groups.
    with pytest.raises(rndb.NdbError) as ei:
        c.sql("SELECT * FROM ndbinfo.transporters, kv")
    assert ei.value.code == 4003

    nodes[5].kill()
    nodes[5].wait(timeout=10)

    def five_gone() -> bool:
        try:
            t = transporters(c)
        except rndb.TemporaryError:
            return False
        return all(t.get((n, 5), {}).get("status") == "DISCONNECTED" for n in (2, 3, 4))

    wait_for("node 5's transporters down", 30, five_gone)
    t = transporters(c)
    assert not any(n == 5 for n, _ in t), "a dead node has no rows"
    assert int(t[(4, 5)]["bytes_sent"]) > 0 and t[(4, 5)]["remote_address"] == ""

    _, ndbd_bin = binaries()
    port = c.connectstring.rsplit(":", 1)[1]
    out = tmp_path_factory.mktemp("node5")
    with open(out / "rndbd.out", "wb") as f:
        again = subprocess.Popen(
            [str(ndbd_bin), "-c", f"127.0.0.1:{port}", "--ndb-nodeid=5"],
            cwd=out,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=f,
        )
    try:
        wait_for("node 5 started again", 60, lambda: "Node 5: started" in c.mgm("ALL STATUS"))
        deadline = time.monotonic() + 30
        while True:
            t = transporters(c)
            if (5, 2) in t and t[(4, 5)]["status"] == "CONNECTED":
                break
            assert time.monotonic() < deadline, t
            time.sleep(0.1)
        assert int(t[(4, 5)]["connect_count"]) == 2, t[(4, 5)]
    finally:
        again.kill()
        again.wait(timeout=10)
