"""The embedded distributed cluster from Python (`rndb.LocalCluster`): the management
server and data nodes of rndb_mgmd/rndbd inside this process over an in-process
network. NDB's default layout with SQL and the management commands, a data node
killed under writes and restarted with every acknowledged write kept, a graceful
shutdown and a system restart from the data directory, and misuse."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

import rndb


def small(**kw: object) -> rndb.LocalCluster:
    return rndb.LocalCluster.start(
        DataMemory="32M", HeartbeatIntervalDbDb=100, **kw  # type: ignore[arg-type]
    )


def test_the_default_layout_runs_distributed_in_this_process() -> None:
    cluster = rndb.LocalCluster.start()
    try:
        cs = cluster.connectstring
        assert cs.startswith("local=") and cs.endswith(":1186"), cs
        assert cluster.running_nodes() == [2, 3]
        data_dir = cluster.data_dir
        assert isinstance(data_dir, pathlib.Path)
        assert (data_dir / "ndb_2_fs").is_dir()
        c = cluster.connect()
        status = c.mgm("ALL STATUS")
        assert "Node 2: started" in status and "Node 3: started" in status, status
        c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB")
        assert c.insert_many("kv", ({"id": i, "v": f"v{i}"} for i in range(100))) == 100
        assert "100" in c.sql("SELECT COUNT(*) FROM kv")
        assert c.read_many("kv", [7, 1000]) == [{"id": 7, "v": "v7"}, None]
        # Every data node's rows in ndbinfo, and OPTIMIZE TABLE on every node.
        mem = c.sql("SELECT DISTINCT node_id FROM ndbinfo.memoryusage")
        assert "|       2 |" in mem and "|       3 |" in mem, mem
        opt = c.sql("OPTIMIZE TABLE kv")
        assert "Node 2: " in opt and "Node 3: " in opt and "| OK " in opt, opt
        # Unique-index conflicts resolved as MySQL does, over the transport.
        c.sql("CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY ue (email)) ENGINE=NDB")
        c.sql("INSERT INTO u VALUES (1, 'a'), (2, 'b')")
        assert "Duplicates: 1" in c.sql("INSERT IGNORE INTO u VALUES (3, 'a'), (4, 'c')")
        assert "2 rows affected" in c.sql("REPLACE INTO u VALUES (5, 'b')")
        assert c.read_many("u", [1, 2, 3, 4, 5]) == [
            {"id": 1, "email": "a"},
            None,
            None,
            {"id": 4, "email": "c"},
            {"id": 5, "email": "b"},
        ]
        # The client's session variables go with its statements; another client has
        # its own.
        c.sql("SET @k = 7, ndb_table_no_logging = 1")
        assert "| v7 |" in c.sql("SELECT v FROM kv WHERE id = @k")
        assert "|                      1 |" in c.sql("SELECT @@ndb_table_no_logging")
        # rndb.connect with the connectstring reaches the same cluster.
        other = rndb.connect(cs)
        assert other.read_many("kv", [99]) == [{"id": 99, "v": "v99"}]
        assert "| NULL |" in other.sql("SELECT @k")
        assert "|                      0 |" in other.sql("SELECT @@ndb_table_no_logging")
        other.close()
        c.close()
        assert cluster.shutdown() == {2: 0, 3: 0}
    finally:
        cluster.close()
    assert not data_dir.exists(), "the scratch directory goes with the cluster"
    assert "closed" in repr(cluster)
    with pytest.raises(rndb.NdbError):
        cluster.running_nodes()


def test_a_node_killed_under_writes_restarts_and_no_acknowledged_write_is_lost(
    tmp_path: pathlib.Path,
) -> None:
    with small(data_dir=tmp_path) as cluster:
        c = cluster.connect()
        c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v INT) ENGINE=NDB")
        acked: dict[int, int] = {}
        maybe: dict[int, int] = {}
        temporary: list[int] = []

        def write_round(n: int) -> None:
            keys = [(n * 7 + i) % 300 for i in range(10)]
            try:
                c.transaction([("write", "kv", {"id": k, "v": n}) for k in keys])
            except rndb.TemporaryError as e:
                temporary.append(e.code)
                return
            except rndb.UnknownResultError:
                for k in keys:
                    maybe[k] = n
                return
            for k in keys:
                acked[k] = n
                maybe.pop(k, None)

        n = 0
        for _ in range(50):
            n += 1
            write_round(n)
        cluster.kill_node(3)
        assert cluster.running_nodes() == [2]
        deadline = time.monotonic() + 10
        while "Node 3: not connected" not in c.mgm("3 STATUS"):
            assert time.monotonic() < deadline, c.mgm("3 STATUS")
            n += 1
            write_round(n)
        for _ in range(50):
            n += 1
            write_round(n)
        cluster.start_node(3)
        while True:
            n += 1
            write_round(n)
            if "Node 3: started" in c.mgm("3 STATUS"):
                break
        cluster.wait_started([3], timeout=60)
        for _ in range(50):
            n += 1
            write_round(n)
        assert all(code in (4010, 4025, 4028, 266, 4009, 4035, 1204) for code in temporary), temporary
        rows = c.read_many("kv", sorted(acked))
        for k, row in zip(sorted(acked), rows):
            assert row is not None, k
            assert row["v"] == acked[k] or (k in maybe and row["v"] == maybe[k]), (
                k,
                row,
                acked[k],
            )
        log = "\n".join(cluster.log_lines())
        assert "Node 3: Node restart completed" in log, log
        c.close()


def test_a_shutdown_cluster_restarts_from_its_data_directory(tmp_path: pathlib.Path) -> None:
    with small(data_dir=tmp_path) as cluster:
        c = cluster.connect()
        c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(8)) ENGINE=NDB")
        c.insert_many("kv", ({"id": i, "v": "kept"} for i in range(30)))
        c.close()
    # __exit__ shut it down gracefully; the files stay.
    assert (tmp_path / "ndb_2_fs").is_dir()
    with small(data_dir=tmp_path) as cluster:
        c = cluster.connect()
        assert all(r == {"id": i, "v": "kept"} for i, r in enumerate(c.read_many("kv", range(30))))
        c.close()


def test_misuse_gets_clear_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(rndb.NdbError):
        rndb.LocalCluster.start(initial=True)
    with pytest.raises(rndb.NdbError):
        rndb.LocalCluster.start(data_nodes=2, config_file=os.devnull)
    with pytest.raises(rndb.NdbError) as ei:
        rndb.connect("local=999999999,127.0.0.1:1186", timeout=1.0)
    assert ei.value.code == 4009, ei.value
    with small(data_dir=tmp_path) as cluster:
        with pytest.raises(rndb.NdbError) as ei:
            cluster.kill_node(9)
        assert "not running" in ei.value.message
        with pytest.raises(rndb.NdbError) as ei:
            cluster.start_node(2)
        assert "running already" in ei.value.message
        with pytest.raises(rndb.NdbError):
            cluster.wait_started(timeout=-1)
    with pytest.raises(rndb.NdbError):
        cluster.connect()
