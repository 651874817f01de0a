"""Durability from Python: every commit reports its GCI, `Cluster.wait_durable(gci)`
returns once that commit is on disk on every data node, and `Cluster.embedded` on an
existing data directory is a system restart that recovers it — after a graceful close
and after the process is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rndb

COLUMNS = {"id": "BIGINT UNSIGNED NOT NULL", "a": "INT", "b": "VARCHAR(32)"}
PARAMS = {"DataMemory": "32M", "NoOfFragmentLogFiles": "3", "FragmentLogFileSize": "4M"}


def test_gci_and_wait_durable(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path / "d", **PARAMS) as c:
        ndb = c.ndb()
        ndb.create_table("t", COLUMNS, primary_key="id")
        tx = ndb.transaction()
        tx.insert("t", {"id": 1, "a": 10, "b": "x"})
        assert tx.gci is None
        tx.commit()
        gci = tx.gci
        assert isinstance(gci, int) and gci >> 32 >= 1
        c.wait_durable(gci)
        # a later commit never gets an older GCI
        tx2 = ndb.transaction()
        tx2.write("t", {"id": 2, "a": 20, "b": "y"})
        tx2.commit()
        assert tx2.gci is not None and tx2.gci >= gci
        assert c.checkpoint() >= tx2.gci >> 32
        with pytest.raises(rndb.NdbError):
            c.wait_durable(gci, timeout=-1.0)


def test_restart_after_close_keeps_everything(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        ndb = c.ndb()
        ndb.create_table("t", COLUMNS, primary_key="id", indexes={"ix_a": ["a"]})
        rows = [(i, i % 7, f"v{i}") for i in range(500)]
        assert ndb.insert_many("t", rows, columns=["id", "a", "b"]) == 500
        ndb.execute("update t set b = 'changed' where id < 10")
        ndb.execute("delete from t where id >= 490")
    # no wait_durable: a graceful close runs a last global checkpoint
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        ndb = c.ndb()
        assert ndb.execute("select count(*) as n from t") == [{"n": 490}]
        assert ndb.execute("select b from t where id = 3") == [{"b": "changed"}]
        assert ndb.execute("select b from t where id = 11") == [{"b": "v11"}]
        # the ordered index was rebuilt with the rows
        assert ndb.execute("select count(*) as n from t where a = 3") == [
            {"n": sum(1 for i in range(490) if i % 7 == 3)}
        ]
        info = c.ndbinfo("restart_info")
        assert sorted(r["node_id"] for r in info) == c.data_node_ids
        assert all(r["node_restart_status"] == "Restart completed" for r in info)


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import rndb
    params = {"DataMemory": "32M", "NoOfFragmentLogFiles": "3", "FragmentLogFileSize": "4M",
              "TimeBetweenGlobalCheckpoints": "30000"}
    c = rndb.Cluster.embedded(data_dir=sys.argv[1], **params)
    ndb = c.ndb()
    ndb.create_table("t", {"id": "INT NOT NULL", "v": "INT"}, primary_key="id")
    tx = ndb.transaction()
    tx.insert("t", {"id": 1, "v": 100})
    tx.commit()
    c.wait_durable(tx.gci)
    tx = ndb.transaction()
    tx.insert("t", {"id": 2, "v": 200})
    tx.commit()  # not waited for: the checkpoint is 30 s away
    print("committed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_sigkill_keeps_what_wait_durable_confirmed(tmp_path: Path) -> None:
    d = tmp_path / "d"
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(d)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert "committed" in r.stdout
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        rows = {row["id"]: row["v"] for row in c.ndb().scan("t")}
        # the durable commit is there; the other was never checkpointed
        assert rows == {1: 100}
        tx = c.ndb().transaction()
        tx.insert("t", {"id": 2, "v": 2})
        tx.commit()
        assert tx.gci is not None


def test_diskless_and_scratch_clusters_still_give_gcis(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(DataMemory="16M") as c:
        ndb = c.ndb()
        ndb.create_table("t", COLUMNS, primary_key="id")
        tx = ndb.transaction()
        tx.insert("t", {"id": 1, "a": 1, "b": "b"})
        tx.commit()
        assert tx.gci is not None
        c.wait_durable(tx.gci, timeout=30)
    assert not any(os.scandir(tmp_path))


def test_initial_start_discards_the_data_directory(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        c.ndb().create_table("t", COLUMNS, primary_key="id")
    with rndb.Cluster.embedded(data_dir=d, initial=True, **PARAMS) as c:
        assert c.ndb().tables() == []
        assert c.ndbinfo("restart_info") == []
    with pytest.raises(rndb.NdbError):
        rndb.Cluster.embedded(initial=True)


DISK_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import rndb
    # a local checkpoint every 16 KB of redo: several run while the rows change
    params = {"DataMemory": "32M", "NoOfFragmentLogFiles": "3", "FragmentLogFileSize": "4M",
              "TimeBetweenLocalCheckpoints": "12"}
    c = rndb.Cluster.embedded(data_dir=sys.argv[1], **params)
    ndb = c.ndb()
    ndb.execute(
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M "
        "UNDO_BUFFER_SIZE=1M ENGINE=NDB"
    )
    ndb.execute(
        "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg "
        "INITIAL_SIZE=8M EXTENT_SIZE=256K ENGINE=NDB"
    )
    ndb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, d VARCHAR(600)) "
        "TABLESPACE ts_1 STORAGE DISK ENGINE=NDB"
    )
    for i in range(300):
        ndb.execute(f"INSERT INTO t VALUES ({i}, {i}, '{'x' * (i % 500)}')")
    ndb.execute("UPDATE t SET d = 'after the checkpoint' WHERE id < 50")
    ndb.execute("DELETE FROM t WHERE id >= 250")
    tx = ndb.transaction()
    tx.insert("t", {"id": 1000, "a": 1, "d": "last"})
    tx.commit()
    c.wait_durable(tx.gci)
    print("durable", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_disk_data_tables_survive_sigkill_and_close(tmp_path: Path) -> None:
    d = tmp_path / "d"
    r = subprocess.run(
        [sys.executable, "-c", DISK_CHILD, str(d)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert "durable" in r.stdout
    for life in range(2):
        with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
            ndb = c.ndb()
            rows = {row["id"]: row for row in ndb.scan("t")}
            assert len(rows) == 251, life
            assert rows[1000]["d"] == ("last" if life == 0 else "life 0")
            assert rows[10]["d"] == "after the checkpoint"
            assert rows[100]["d"] == "x" * 100
            files = ndb.execute(
                "select file_name, free_extents, total_extents from "
                "information_schema.files where file_type = 'DATAFILE'"
            )
            assert files and all(f["free_extents"] < f["total_extents"] for f in files)
            info = c.ndbinfo("restart_info")
            assert all(r["node_restart_status"] == "Restart completed" for r in info)
            # and it takes new writes (a second life closes gracefully)
            ndb.execute(f"UPDATE t SET d = 'life {life}' WHERE id = 1000")
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        assert c.ndb().execute("select d from t where id = 1000") == [{"d": "life 1"}]
    with rndb.Cluster.embedded(data_dir=d, initial=True, **PARAMS) as c:
        assert c.ndb().tables() == []


STOPPED_NODE_CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import rndb
    params = {"DataMemory": "32M", "NoOfFragmentLogFiles": "3", "FragmentLogFileSize": "4M"}
    c = rndb.Cluster.embedded(data_dir=sys.argv[1], **params)
    ndb = c.ndb()
    ndb.create_table("t", {"id": "INT NOT NULL", "v": "INT"}, primary_key="id")
    ndb.insert_many("t", [(i, i) for i in range(300)], columns=["id", "v"])
    out = c.mgm("ROLLING RESTART")
    assert out.endswith("Rolling restart completed."), out
    c.mgm("3 STOP")
    ndb.execute("delete from t where id < 100")
    tx = ndb.transaction()
    tx.insert("t", {"id": 1000, "v": 7})
    tx.commit()
    c.wait_durable(tx.gci)
    print("durable", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_node_restarts_on_a_data_directory_and_a_crash_with_a_node_stopped(
    tmp_path: Path,
) -> None:
    """A rolling restart works on a data directory; then, with node 3 stopped, rows
    change and the process is killed: the system restart recovers them from node 2
    (node 3's own files, older, would bring the deleted rows back) and restarts node 3
    by copy."""
    d = tmp_path / "d"
    r = subprocess.run(
        [sys.executable, "-c", STOPPED_NODE_CHILD, str(d)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert "durable" in r.stdout
    with rndb.Cluster.embedded(data_dir=d, **PARAMS) as c:
        rows = {row["id"]: row["v"] for row in c.ndb().scan("t")}
        assert rows == {**{i: i for i in range(100, 300)}, 1000: 7}
        deadline = time.monotonic() + 60
        while "Node 3: started" not in c.mgm("ALL STATUS"):
            assert time.monotonic() < deadline, c.mgm("ALL STATUS")
            time.sleep(0.05)
        c.mgm("2 STOP")
        rows = {row["id"]: row["v"] for row in c.ndb().scan("t")}
        assert rows == {**{i: i for i in range(100, 300)}, 1000: 7}
