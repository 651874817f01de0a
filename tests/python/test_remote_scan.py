"""Scans over TCP from Python: `MgmClient.scan()` and `MgmClient.index_scan()` against
real `rndb_mgmd` and four `rndbd` processes in two node groups — every row once, index
order across the groups in both directions, bounds, errors with NDB's codes, and a
scan whose data node is killed fails with a temporary error that a new scan gets past."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import rndb
from test_connect import binaries, connect_when_up, free_port, wait_for

ROWS = 1500


def grp(i: int) -> int:
    return (i * 7919) % 53


@pytest.fixture
def four_nodes(tmp_path: Path) -> Iterator[tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]]]:
    port = free_port()
    sections = "".join(f"[ndbd]\nNodeId={n}\nHostName=127.0.0.1\n" for n in (2, 3, 4, 5))
    (tmp_path / "config.ini").write_text(
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\nHeartbeatIntervalDbDb=100\n"
        f"DataDir={tmp_path}\n[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\n"
        f"DataDir={tmp_path}\n{sections}[mysqld]\n"
    )
    mgmd_bin, ndbd_bin = binaries()
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(*args: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"proc-{len(procs)}.out", "wb") as out:
            p = subprocess.Popen(list(args), cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        procs.append(p)
        return p

    spawn(str(mgmd_bin), "-f", str(tmp_path / "config.ini"))
    c = connect_when_up(port)
    nodes = {
        n: spawn(str(ndbd_bin), "-c", f"127.0.0.1:{port}", f"--ndb-nodeid={n}") for n in (2, 3, 4, 5)
    }

    def started() -> bool:
        s = c.mgm("ALL STATUS")
        return all(f"Node {n}: started" in s for n in nodes)

    wait_for("four data nodes started", 60, started)
    try:
        yield c, nodes
    finally:
        c.close()
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def load(c: rndb.MgmClient) -> dict[int, tuple[int, str]]:
    c.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, name VARCHAR(16), INDEX ig (g)) ENGINE=NDB")
    model = {i: (grp(i), f"n{i}") for i in range(ROWS)}
    n = c.insert_many("t", ({"id": i, "g": g, "name": s} for i, (g, s) in model.items()))
    assert n == ROWS
    return model


def test_scans_over_two_node_groups(
    four_nodes: tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]],
) -> None:
    c, _ = four_nodes
    model = load(c)
    for batch in (1, 100, 992):
        rows = list(c.scan("t", batch_size=batch))
        assert len(rows) == ROWS, batch
        assert {r["id"]: (r["g"], r["name"]) for r in rows} == model
    it = c.scan("t", columns=["id"])
    assert it.columns == ["id"]
    assert sorted(r["id"] for r in it) == sorted(model)

    def want(keep: Callable[[int], bool]) -> list[int]:
        return sorted(i for i, (g, _) in model.items() if keep(g))

    for desc in (False, True):
        rows = list(c.index_scan("t", "ig", low=10, high=20, descending=desc, batch_size=7))
        gs = [r["g"] for r in rows]
        assert gs == sorted(gs, reverse=desc), "index order across both node groups"
        assert sorted(r["id"] for r in rows) == want(lambda g: 10 <= g <= 20)
    rows = list(c.index_scan("t", "ig", low=10, high=20, low_inclusive=False, high_inclusive=False))
    assert sorted(r["id"] for r in rows) == want(lambda g: 10 < g < 20)
    rows = list(c.index_scan("t", "ig", low=50, columns=["g"]))
    assert rows and all(set(r) == {"g"} and r["g"] >= 50 for r in rows)
    # Closed early, and as a context manager.
    with c.scan("t", batch_size=10) as it:
        assert next(it)["id"] in model
    with pytest.raises(StopIteration):
        next(it)

    with pytest.raises(rndb.NdbError) as ei:
        c.scan("nope")
    assert ei.value.code == 723
    with pytest.raises(rndb.NdbError) as ei:
        c.index_scan("t", "nope")
    assert ei.value.code == 4243
    with pytest.raises(rndb.NdbError) as ei:
        c.scan("t", columns=["nope"])
    assert "nope" in str(ei.value)
    with pytest.raises(rndb.NdbError):
        c.scan("t", batch_size=0)
    with pytest.raises(rndb.NdbError):
        c.index_scan("t", "ig", low="not a number")


def test_a_scan_whose_node_is_killed_fails_temporarily(
    four_nodes: tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]],
) -> None:
    c, nodes = four_nodes
    model = load(c)
    it = c.scan("t", batch_size=20)
    assert next(it)["id"] in model
    # One node of each group: the scan reads each group from one of its two nodes, so it
    # either lost a node (a temporary error) or returns every row.
    nodes[2].kill()
    nodes[4].kill()
    got = 1
    err: rndb.NdbError | None = None
    try:
        for _ in it:
            got += 1
    except rndb.NdbError as e:
        err = e
    if err is not None:
        assert err.status == "TemporaryError", err
    else:
        assert got == ROWS, "a scan that did not lose its node returns every row"
    wait_for(
        "nodes 2 and 4 seen gone",
        20,
        lambda: all(f"Node {n}: not connected" in c.mgm("ALL STATUS") for n in (2, 4)),
    )
    for _ in range(100):
        try:
            rows = list(c.scan("t"))
            break
        except rndb.NdbError as e:
            assert e.status == "TemporaryError", e
            time.sleep(0.05)
    else:
        pytest.fail("a new scan never succeeded")
    assert sorted(r["id"] for r in rows) == sorted(model)
