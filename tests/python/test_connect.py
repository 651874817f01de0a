"""`rndb.connect("host:port")`: a management client of a distributed cluster — real
`rndb_mgmd` and `rndbd` processes on loopback, driven from Python as `ndb_mgm -c` drives
NDB's."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import rndb

ROOT = Path(__file__).resolve().parents[2]


def binaries() -> tuple[Path, Path]:
    """The debug builds of rndb_mgmd and rndbd (`make test` builds them first; built here
    when missing)."""
    d = ROOT / "target" / "debug"
    mgmd, ndbd = d / "rndb_mgmd", d / "rndbd"
    if not (mgmd.exists() and ndbd.exists()):
        subprocess.run(
            ["cargo", "build", "-p", "rndb-shell", "--bins"], cwd=ROOT, check=True, timeout=1200
        )
    return mgmd, ndbd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(what: str, secs: float, ok: Callable[[], bool]) -> None:
    deadline = time.monotonic() + secs
    while not ok():
        assert time.monotonic() < deadline, f"{what}: timed out"
        time.sleep(0.05)


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[tuple[Path, int, list[subprocess.Popen[bytes]]]]:
    port = free_port()
    cfg = (
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\nHeartbeatIntervalDbDb=100\n"
        f"DataDir={tmp_path}\n[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\n"
        f"DataDir={tmp_path}\n[ndbd]\nNodeId=2\nHostName=127.0.0.1\n"
        "[ndbd]\nNodeId=3\nHostName=127.0.0.1\n[mysqld]\n"
    )
    (tmp_path / "config.ini").write_text(cfg)
    procs: list[subprocess.Popen[bytes]] = []
    yield tmp_path, port, procs
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def spawn(procs: list[subprocess.Popen[bytes]], d: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(d / f"{Path(args[0]).name}-{len(procs)}.out", "wb") as out:
        # The child keeps its own descriptor of the file.
        p = subprocess.Popen(list(args), cwd=d, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    procs.append(p)
    return p


def connect_when_up(port: int) -> rndb.MgmClient:
    deadline = time.monotonic() + 20
    while True:
        try:
            return rndb.connect(f"127.0.0.1:{port}", timeout=2.0)
        except rndb.NdbError:
            assert time.monotonic() < deadline, "rndb_mgmd did not come up"
            time.sleep(0.05)


def test_manage_a_distributed_cluster(
    cluster_dir: tuple[Path, int, list[subprocess.Popen[bytes]]],
) -> None:
    d, port, procs = cluster_dir
    mgmd_bin, ndbd_bin = binaries()
    mgmd = spawn(procs, d, str(mgmd_bin), "-f", str(d / "config.ini"))
    c = connect_when_up(port)
    assert c.server_node_id == 1
    assert c.connectstring == f"127.0.0.1:{port}"
    assert "Node 2: not connected" in c.mgm("ALL STATUS")
    nodes = [spawn(procs, d, str(ndbd_bin), "-c", f"127.0.0.1:{port}") for _ in range(2)]

    def both_started() -> bool:
        s = c.mgm("ALL STATUS")
        return "Node 2: started" in s and "Node 3: started" in s

    wait_for("both data nodes started", 30, both_started)
    show = c.mgm("SHOW")
    assert "id=2\t@127.0.0.1" in show and "id=3\t@127.0.0.1" in show, show
    with pytest.raises(rndb.NdbError) as ei:
        c.mgm("9 STATUS")
    assert "9" in str(ei.value)
    out = c.mgm("3 RESTART")
    assert "Node 3" in out, out
    wait_for("node 3 started again", 30, both_started)
    out = c.mgm("SHUTDOWN")
    assert "3 NDB Cluster node(s) have shutdown." in out, out
    for p in [*nodes, mgmd]:
        assert p.wait(timeout=20) == 0
    c.close()
    c.close()
    with pytest.raises(rndb.NdbError) as ei:
        c.mgm("SHOW")
    assert "closed" in str(ei.value)


def test_connect_errors() -> None:
    with pytest.raises(rndb.NdbError) as ei:
        rndb.connect(f"127.0.0.1:{free_port()}", timeout=0.5)
    assert ei.value.code == 4009, ei.value
    with pytest.raises(rndb.NdbError):
        rndb.connect("127.0.0.1:notaport")
    with pytest.raises(rndb.NdbError):
        rndb.connect("127.0.0.1:1186", timeout=-1)
    with pytest.raises(TypeError):
        rndb.connect(1186)  # type: ignore[arg-type]


def test_rows_over_tcp_survive_kill_9_and_a_restart_by_copy(
    cluster_dir: tuple[Path, int, list[subprocess.Popen[bytes]]],
) -> None:
    """Real processes: rows written through the data nodes' TC survive a SIGKILL of one
    data node under a write load; the restarted node gets every row by copy, and then
    serves them alone once the other node is killed too."""
    import threading

    d, port, procs = cluster_dir
    mgmd_bin, ndbd_bin = binaries()
    spawn(procs, d, str(mgmd_bin), "-f", str(d / "config.ini"))
    c = connect_when_up(port)
    nodes = {
        n: spawn(procs, d, str(ndbd_bin), "-c", f"127.0.0.1:{port}", f"--ndb-nodeid={n}")
        for n in (2, 3)
    }

    def started(*ids: int) -> Callable[[], bool]:
        return lambda: all(f"Node {i}: started" in c.mgm("ALL STATUS") for i in ids)

    wait_for("both data nodes started", 30, started(2, 3))
    assert "Query OK" in c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(32)) ENGINE=NDB")
    assert sorted(c.data_nodes()) == [2, 3]
    assert c.insert_many("kv", ({"id": i, "v": "old"} for i in range(2000))) == 2000
    rows = c.read_many("kv", [0, 1999, 5000])
    assert rows == [{"id": 0, "v": "old"}, {"id": 1999, "v": "old"}, None]
    with pytest.raises(rndb.NdbError) as ei:
        c.transaction([("insert", "kv", {"id": 5000, "v": "x"}), ("insert", "kv", {"id": 1, "v": "dup"})])
    assert ei.value.code == 630
    assert c.read_many("kv", [5000]) == [None], "the failed transaction left nothing"
    res = c.transaction([("update", "kv", {"id": 1, "v": "one"}), ("read", "kv", {"id": 1})])
    assert res == [None, {"id": 1, "v": "one"}]
    # SQL that changes rows, over TCP: captured on a data node, applied through a TC.
    assert "2 rows affected" in c.sql("UPDATE kv SET v = 'sql' WHERE id IN (10, 11)")
    assert "1 row affected" in c.sql("INSERT INTO kv VALUES (6000, 'new')")
    assert "1 row affected" in c.sql("DELETE FROM kv WHERE id = 6000")
    assert c.read_many("kv", [10, 11, 6000]) == [{"id": 10, "v": "sql"}, {"id": 11, "v": "sql"}, None]
    with pytest.raises(rndb.NdbError) as ei:
        c.sql("INSERT INTO kv VALUES (10, 'dup')")
    assert ei.value.code == 630
    assert c.read_many("kv", [10]) == [{"id": 10, "v": "sql"}]

    acked: dict[int, int] = {}
    maybe: dict[int, set[int]] = {}
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        r = 0
        try:
            while not stop.is_set():
                r += 1
                keys = [(r * 13 + i) % 2000 for i in range(10)]
                try:
                    c.transaction([("write", "kv", {"id": k, "v": str(r)}) for k in keys])
                    for k in keys:
                        acked[k] = r
                        maybe.pop(k, None)
                except rndb.NdbError as e:
                    assert e.code in (4010, 4012, 4035, 266, 4009) or e.status == "TemporaryError", e
                    if e.code == 4012:
                        for k in keys:
                            maybe.setdefault(k, set()).add(r)
                    time.sleep(0.01)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            failures.append(e)

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.5)
    nodes[3].kill()
    nodes[3].wait(timeout=10)
    wait_for("node 3 seen gone", 20, lambda: "Node 3: not connected" in c.mgm("ALL STATUS"))
    time.sleep(0.5)
    nodes[3] = spawn(procs, d, str(ndbd_bin), "-c", f"127.0.0.1:{port}", "--ndb-nodeid=3")
    wait_for("node 3 started again after its copy", 60, started(2, 3))
    time.sleep(0.5)
    stop.set()
    t.join(timeout=30)
    assert not failures, failures
    assert len(acked) > 100, len(acked)

    def check() -> None:
        got = c.read_many("kv", list(range(2000)))
        for k in range(2000):
            row = got[k]
            assert row is not None, f"key {k} lost"
            v = row["v"]
            if k in acked:
                ok = v == str(acked[k]) or int(v) in maybe.get(k, set())
                assert ok, f"key {k}: acknowledged {acked[k]}, maybe {maybe.get(k)}, has {v}"

    check()
    # Node 3 alone must hold everything: kill node 2.
    nodes[2].kill()
    nodes[2].wait(timeout=10)
    wait_for("node 2 seen gone", 20, lambda: "Node 2: not connected" in c.mgm("ALL STATUS"))

    last = [""]

    def node3_serves() -> bool:
        try:
            check()
            return True
        except rndb.NdbError as e:
            assert e.code in (4010, 4035, 4009, 4012), e
            last[0] = f"{e} / {c.mgm('ALL STATUS')}"
            return False

    try:
        wait_for("node 3 serves every row alone", 20, node3_serves)
    except AssertionError:
        raise AssertionError(f"node 3 alone: {last[0]}") from None
    c.close()


def test_single_user_mode_against_rndb_mgmd(
    cluster_dir: tuple[Path, int, list[subprocess.Popen[bytes]]],
) -> None:
    """Real processes: a client holds the config's one [mysqld] slot while connected
    (SHOW lists it); in single user mode for it, a second client (no slot left) gets
    299 for reads, writes and SQL, and everything works again after EXIT."""
    d, port, procs = cluster_dir
    mgmd_bin, ndbd_bin = binaries()
    spawn(procs, d, str(mgmd_bin), "-f", str(d / "config.ini"))
    owner = connect_when_up(port)
    for n in (2, 3):
        spawn(procs, d, str(ndbd_bin), "-c", f"127.0.0.1:{port}", f"--ndb-nodeid={n}")
    wait_for(
        "both data nodes started",
        30,
        lambda: owner.mgm("ALL STATUS").count(": started") == 2,
    )
    assert "Query OK" in owner.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(32)) ENGINE=NDB")
    api_id = owner.node_id
    assert api_id is not None and api_id > 3, api_id
    other = rndb.connect(f"127.0.0.1:{port}", timeout=5.0)
    assert other.node_id is None, "the only [mysqld] slot is taken"
    assert f"id={api_id}\t@127.0.0.1" in owner.mgm("SHOW")
    owner.transaction([("insert", "kv", {"id": 1, "v": "a"})])

    out = other.mgm(f"ENTER SINGLE USER MODE {api_id}")
    assert out == f"Single user mode entered\nAccess is granted for API node {api_id} only."

    def refused() -> bool:
        try:
            other.read_many("kv", [1])
        except rndb.NdbError as e:
            assert e.code == 299, e
            return True
        return False

    wait_for("the other client refused", 10, refused)
    with pytest.raises(rndb.NdbError) as ei:
        other.transaction([("insert", "kv", {"id": 2, "v": "b"})])
    assert ei.value.code == 299 and "single user mode" in str(ei.value), ei.value
    with pytest.raises(rndb.NdbError) as ei:
        other.sql("SELECT * FROM kv")
    assert ei.value.code == 299
    owner.transaction([("insert", "kv", {"id": 3, "v": "c"})])
    assert owner.read_many("kv", [1, 3]) == [{"id": 1, "v": "a"}, {"id": 3, "v": "c"}]
    assert owner.mgm("ALL STATUS").count("single user mode") == 2

    assert other.mgm("EXIT SINGLE USER MODE").startswith("Exiting single user mode in progress.")
    wait_for("the other client admitted", 10, lambda: not refused())
    other.transaction([("insert", "kv", {"id": 2, "v": "b"})])
    assert other.read_many("kv", [2]) == [{"id": 2, "v": "b"}]
    owner.close()
    other.close()
