"""`rndbd` data nodes keep their rows on disk: a commit waited for with
`MgmClient.wait_durable` survives SIGKILL of every data node, a SHUTDOWN of the whole
cluster keeps every commit, and each restart of all the processes is a system restart
that the cluster log reports — real `rndb_mgmd` and `rndbd` processes on loopback."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import rndb
from test_connect import binaries, cluster_dir, connect_when_up, spawn, wait_for

__all__ = ["cluster_dir"]


def start_nodes(
    procs: list[subprocess.Popen[bytes]], d: Path, port: int, c: rndb.MgmClient
) -> list[subprocess.Popen[bytes]]:
    _, ndbd_bin = binaries()
    nodes = [
        spawn(procs, d, str(ndbd_bin), "-c", f"127.0.0.1:{port}", f"--ndb-nodeid={n}")
        for n in (2, 3)
    ]

    def both_started() -> bool:
        s = c.mgm("ALL STATUS")
        return "Node 2: started" in s and "Node 3: started" in s

    wait_for("both data nodes started", 60, both_started)
    return nodes


def rows(c: rndb.MgmClient, n: int) -> list[int | None]:
    got = c.read_many("kv", range(n), columns=["v"])
    return [None if r is None else r["v"] for r in got]


def test_every_durable_commit_survives_a_crash_of_every_data_node_and_a_shutdown(
    cluster_dir: tuple[Path, int, list[subprocess.Popen[bytes]]],
) -> None:
    d, port, procs = cluster_dir
    mgmd_bin, _ = binaries()
    spawn(procs, d, str(mgmd_bin), "-f", str(d / "config.ini"))
    c = connect_when_up(port)
    nodes = start_nodes(procs, d, port, c)
    c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=NDB")
    assert c.insert_many("kv", ({"id": i, "v": i * 7} for i in range(300))) == 300
    with c.start_transaction() as tx:
        tx.update("kv", {"id": 5, "v": -5})
        tx.delete("kv", {"id": 6})
        tx.commit()
        gci = tx.gci
    assert gci is not None and gci > 0
    c.wait_durable(gci, timeout=20.0)
    # SIGKILL of both data nodes: nothing gets a chance to write a last checkpoint.
    for p in nodes:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    start_nodes(procs, d, port, c)
    c2 = connect_when_up(port)
    want: list[int | None] = [i * 7 for i in range(300)]
    want[5], want[6] = -5, None
    wait_for("the data nodes answer reads", 30, lambda: _readable(c2))
    assert rows(c2, 300) == want
    log = (d / "ndb_1_cluster.log").read_text()
    assert "System restart: restoring GCI" in log, log[-2000:]
    # Commits not waited for are kept by a SHUTDOWN (its last global checkpoint).
    assert c2.insert_many("kv", ({"id": i, "v": i} for i in range(300, 400))) == 100
    out = c2.mgm("SHUTDOWN")
    assert "3 NDB Cluster node(s) have shutdown." in out, out
    for p in procs:
        if p.poll() is None and p.args[0] != str(mgmd_bin):
            assert p.wait(timeout=20) == 0
    c.close()
    c2.close()
    spawn(procs, d, str(mgmd_bin), "-f", str(d / "config.ini"))
    c3 = connect_when_up(port)
    start_nodes(procs, d, port, c3)
    wait_for("the data nodes answer reads", 30, lambda: _readable(c3))
    got = rows(c3, 400)
    assert got[:300] == want
    assert got[300:] == list(range(300, 400))
    c3.close()


def _readable(c: rndb.MgmClient) -> bool:
    try:
        c.read_many("kv", [0], columns=["v"])
        return True
    except rndb.TemporaryError:
        return False
