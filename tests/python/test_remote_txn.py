"""Transactions in rounds over TCP from Python (`MgmClient.start_transaction()`), against
real `rndb_mgmd` and four `rndbd` processes in two node groups: NoCommit rounds whose
writes nobody else sees until the commit, row locks held between rounds, rollback
(explicit, by `with`, by close), AbortOnError and AO_IgnoreError for missing rows, a
failed write aborting the earlier rounds, and the coordinator's node killed under an
open transaction."""

from __future__ import annotations

import subprocess
import time

import pytest

import rndb
from test_remote_scan import four_nodes  # noqa: F401  (the fixture)

Nodes = tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]]


def setup_table(c: rndb.MgmClient, rows: int = 20) -> None:
    c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB")
    assert c.insert_many("kv", ({"id": i, "v": f"v{i}"} for i in range(rows))) == rows


def committed(c: rndb.MgmClient, key: int) -> str | None:
    row = c.read_many("kv", [key])[0]
    return None if row is None else str(row["v"])


def test_rounds_commit_together_and_hold_their_locks(four_nodes: Nodes) -> None:  # noqa: F811
    c, _ = four_nodes
    setup_table(c)
    tx = c.start_transaction()
    assert tx.state == "Open" and tx.tc_node is None
    tx.update("kv", {"id": 1, "v": "r1"})
    tx.insert("kv", {"id": 100, "v": "new"})
    tx.execute(rndb.NoCommit)
    assert tx.tc_node in (2, 3, 4, 5)
    # The round's writes are the transaction's own until it commits.
    assert committed(c, 1) == "v1" and committed(c, 100) is None
    own = tx.read("kv", {"id": 100}, lock_mode=rndb.LM_Read)
    tx.execute(rndb.NoCommit)
    assert own.row == {"id": 100, "v": "new"}
    # Another transaction wants row 1's lock: it waits, then times out (266).
    other = c.start_transaction()
    other.update("kv", {"id": 1, "v": "other"})
    with pytest.raises(rndb.TemporaryError) as ei:
        other.commit()
    assert ei.value.code == 266, ei.value
    assert other.state == "Aborted"
    tx.write("kv", {"id": 2, "v": "r3"})
    tx.commit()
    assert tx.state == "Committed" and (tx.gci or 0) > 0
    assert [committed(c, k) for k in (1, 2, 100)] == ["r1", "r3", "new"]
    with pytest.raises(rndb.NdbError) as ei:
        tx.execute(rndb.NoCommit)
    assert ei.value.code == 4604
    tx.close()
    assert tx.state == "Closed"


def test_rollback_by_call_by_with_and_by_close(four_nodes: Nodes) -> None:  # noqa: F811
    c, _ = four_nodes
    setup_table(c)
    tx = c.start_transaction()
    tx.delete("kv", {"id": 3})
    tx.execute(rndb.NoCommit)
    tx.rollback()
    assert tx.state == "Aborted" and committed(c, 3) == "v3"

    with pytest.raises(ValueError):
        with c.start_transaction() as t:
            t.update("kv", {"id": 4, "v": "gone"})
            t.execute(rndb.NoCommit)
            raise ValueError("the block fails")
    assert committed(c, 4) == "v4"

    with c.start_transaction() as t:
        t.update("kv", {"id": 5, "v": "kept"})
    assert t.state == "Closed" and committed(c, 5) == "kept"

    t = c.start_transaction()
    t.update("kv", {"id": 6, "v": "dropped"})
    t.execute(rndb.NoCommit)
    t.close()
    # Closing rolled back and freed the lock: a new writer is not kept waiting.
    start = time.monotonic()
    c.transaction([("update", "kv", {"id": 6, "v": "after"})])
    assert time.monotonic() - start < 1.0
    assert committed(c, 6) == "after"


def test_missing_rows_and_failed_writes(four_nodes: Nodes) -> None:  # noqa: F811
    c, _ = four_nodes
    setup_table(c)
    # AbortOnError: a read of a missing row fails the transaction, nothing commits.
    tx = c.start_transaction()
    tx.update("kv", {"id": 7, "v": "no"})
    op = tx.read("kv", {"id": 999})
    with pytest.raises(rndb.NdbError) as ei:
        tx.commit()
    assert ei.value.code == 626
    assert op.error is not None and op.error.code == 626
    assert tx.state == "Aborted" and committed(c, 7) == "v7"
    # AO_IgnoreError: the read reports 626 and the rest commits.
    tx = c.start_transaction()
    tx.update("kv", {"id": 7, "v": "yes"})
    op = tx.read("kv", {"id": 999})
    tx.execute(rndb.Commit, rndb.AO_IgnoreError)
    assert op.error is not None and op.error.code == 626 and op.row is None
    assert committed(c, 7) == "yes"
    # A duplicate insert in a later round aborts the earlier rounds too.
    tx = c.start_transaction()
    tx.update("kv", {"id": 8, "v": "round1"})
    tx.execute(rndb.NoCommit)
    tx.insert("kv", {"id": 9, "v": "dup"})
    with pytest.raises(rndb.NdbError) as ei:
        tx.execute(rndb.NoCommit)
    assert ei.value.code == 630
    assert tx.state == "Aborted" and tx.error is not None
    assert committed(c, 8) == "v8"
    with pytest.raises(rndb.NdbError) as ei:
        tx.update("kv", {"id": 8, "v": "more"})
    assert ei.value.code == 4604
    with pytest.raises(rndb.NdbError) as ei:
        tx.read("kv", {"id": 1}, lock_mode=7)
    assert ei.value.code == 4118


def test_the_coordinator_killed_under_an_open_transaction(four_nodes: Nodes) -> None:  # noqa: F811
    c, nodes = four_nodes
    setup_table(c)
    tx = c.start_transaction()
    for k in range(10, 20):
        tx.update("kv", {"id": k, "v": "lost"})
    tx.execute(rndb.NoCommit)
    tc = tx.tc_node
    assert tc is not None
    nodes[tc].kill()
    nodes[tc].wait(timeout=10)
    # The client has seen the connection end (else a commit written to the socket
    # before it did is one that may have committed: 4012, rightly).
    deadline = time.monotonic() + 10
    while tc in c.data_nodes():
        assert time.monotonic() < deadline, "the client still reaches the killed node"
        time.sleep(0.01)
    with pytest.raises(rndb.TemporaryError) as ei:
        tx.commit()
    assert ei.value.code == 4010, ei.value
    assert tx.state == "Aborted"
    # The survivors aborted it: every row as before, and no lock left behind.
    deadline = time.monotonic() + 30
    while True:
        try:
            got = [committed(c, k) for k in range(10, 20)]
            c.transaction([("update", "kv", {"id": 10, "v": "free"})])
            break
        except rndb.TemporaryError:
            assert time.monotonic() < deadline, "the cluster did not settle"
            time.sleep(0.1)
    assert got == [f"v{k}" for k in range(10, 20)]


def test_a_locking_scan_holds_every_row_it_returned(four_nodes: Nodes) -> None:  # noqa: F811
    """An LM_Exclusive scan inside a transaction locks each batch before returning it:
    another transaction cannot change a returned row until the scanning one ends, the
    updates made by key from the scanned values all commit, and a committed-read scan
    in the same transaction takes no lock."""
    c, _ = four_nodes
    setup_table(c, rows=40)
    c.sql("CREATE INDEX ix_v ON kv (v)")
    tx = c.start_transaction()
    scanned = {int(r["id"]): str(r["v"]) for r in tx.scan("kv", lock_mode=rndb.LM_Exclusive, batch_size=16)}
    assert sorted(scanned) == list(range(40))
    # The scan alone holds the rows: another transaction's update waits, then 266.
    other = c.start_transaction()
    other.update("kv", {"id": 7, "v": "other"})
    with pytest.raises(rndb.TemporaryError) as ei:
        other.commit()
    assert ei.value.code == 266, ei.value
    for k, v in scanned.items():
        tx.update("kv", {"id": k, "v": v + "!"})
    tx.execute(rndb.NoCommit)
    # Until the commit, committed reads see the old values.
    assert committed(c, 7) == "v7"
    tx.commit()
    assert [committed(c, k) for k in (0, 7, 39)] == ["v0!", "v7!", "v39!"]
    # An index scan with LM_Exclusive returns the values read under the lock, the
    # columns asked for only.
    tx = c.start_transaction()
    rows = list(tx.index_scan("kv", "ix_v", low="v1", high="v2", high_inclusive=False,
                              columns=["v"], lock_mode=rndb.LM_Exclusive))
    assert rows and all(set(r) == {"v"} and str(r["v"]).startswith("v1") for r in rows), rows
    # A committed-read scan locks nothing: another writer goes through.
    assert len(list(tx.scan("kv"))) == 40
    w = c.start_transaction()
    w.update("kv", {"id": 30, "v": "free"})
    w.commit()
    tx.rollback()
    assert committed(c, 30) == "free"
