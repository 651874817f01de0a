"""Transactions with NdbTransaction semantics."""

from __future__ import annotations

import pytest

import rndb
from conftest import create_t1


def row(i: int, a: int | None = None, b: str | None = None) -> dict[str, object]:
    return {"id": i, "a": a, "b": b}


def test_with_block_commits_and_stamps_gci(ndb: rndb.Ndb, t1: str) -> None:
    with ndb.transaction() as tx:
        assert tx.state == "Open" and tx.gci is None
        tx.insert(t1, row(1, 1, "one"))
        tx.insert(t1, row(2, 2, "two"))
        assert ndb.read_many(t1, [1]) == [None]  # not executed yet
    assert tx.state == "Closed"
    assert isinstance(tx.gci, int) and tx.gci >= 1
    assert ndb.read_many(t1, [1, 2]) == [row(1, 1, "one"), row(2, 2, "two")]


def test_with_block_rolls_back_on_exception(ndb: rndb.Ndb, t1: str) -> None:
    with pytest.raises(KeyError), ndb.transaction() as tx:
        tx.insert(t1, row(1, 1))
        tx.execute(rndb.NoCommit)
        raise KeyError("boom")
    assert tx.state == "Closed" and tx.gci is None
    assert ndb.read_many(t1, [1]) == [None]


def test_commit_inside_with_block(ndb: rndb.Ndb, t1: str) -> None:
    with ndb.transaction() as tx:
        tx.insert(t1, row(1))
        tx.commit()
        assert tx.state == "Committed"
        gci = tx.gci
    assert tx.gci == gci
    with ndb.transaction() as tx:
        tx.insert(t1, row(2))
        tx.rollback()
        assert tx.state == "Aborted"
    assert ndb.read_many(t1, [1, 2]) == [row(1), None]


def test_error_in_with_block_commit_raises(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [row(1)])
    with pytest.raises(rndb.NdbError) as ei, ndb.transaction() as tx:
        tx.insert(t1, row(5))
        tx.insert(t1, row(1))  # duplicate: fails the commit at exit
    assert ei.value.code == 630
    assert ei.value.classification == "ConstraintViolation"
    assert ei.value.mysql_code == 1062
    assert ndb.read_many(t1, [5]) == [None]


def test_no_commit_is_private_then_rollback(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [row(1, 10)])
    tx = ndb.transaction()
    tx.insert(t1, row(2, 20))
    tx.update(t1, {"id": 1, "a": 99})
    tx.execute(rndb.NoCommit)
    # others see the committed state
    assert ndb.read_many(t1, [1, 2]) == [row(1, 10), None]
    # the transaction reads its own writes
    op = tx.read(t1, {"id": 1}, columns=["a"])
    tx.execute(rndb.NoCommit)
    assert op.row == {"a": 99}
    tx.execute(rndb.Rollback)
    assert tx.state == "Aborted"
    assert ndb.read_many(t1, [1, 2]) == [row(1, 10), None]
    tx.close()


def test_all_operation_kinds(ndb: rndb.Ndb, t1: str) -> None:
    with ndb.transaction() as tx:
        ops = [
            tx.insert(t1, row(1, 1, "a")),
            tx.insert(t1, row(2, 2, "b")),
            tx.write(t1, row(3, 3, "c")),  # write = insert when absent
        ]
    assert [o.kind for o in ops] == ["insert", "insert", "write"]
    assert all(o.executed and o.error is None and o.row is None for o in ops)
    with ndb.transaction() as tx:
        tx.update(t1, {"id": 1, "b": "A"})
        tx.write(t1, {"id": 2, "a": 20})  # write = overwrite when present
        d = tx.delete(t1, {"id": 3, "a": "ignored"})
        assert d.kind == "delete" and d.table == "t1"
    assert ndb.read_many(t1, [1, 2, 3]) == [row(1, 1, "A"), {"id": 2, "a": 20, "b": "b"}, None]


def test_read_with_key_forms_and_columns(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [row(7, 70, "seven")])
    with ndb.transaction() as tx:
        ops = [
            tx.read(t1, {"id": 7}),
            tx.read(t1, 7, columns=["b"]),
            tx.read(t1, (7,), columns=("a", "id"), lock_mode=rndb.LM_CommittedRead),
            tx.read(t1, {"ID": 7}, lock_mode=rndb.LM_SimpleRead),
            tx.read(t1, {"id": 7, "a": 1}, lock_mode=rndb.LM_Exclusive),
        ]
        tx.execute(rndb.Commit)
    assert [o.row for o in ops] == [
        row(7, 70, "seven"),
        {"b": "seven"},
        {"a": 70, "id": 7},
        row(7, 70, "seven"),
        row(7, 70, "seven"),
    ]


def ndb_with_t1(engine: str, request: pytest.FixtureRequest) -> rndb.Ndb:
    """The `ndb` fixture (node code) with table t1 created, or `direct_ndb` (which has it)."""
    ndb: rndb.Ndb = request.getfixturevalue("direct_ndb" if engine == "direct" else "ndb")
    if engine == "embedded":
        create_t1(ndb)
    return ndb


@pytest.mark.parametrize("engine", ["embedded", "direct"])
def test_missing_row_abort_on_error_and_ignore_error(engine: str, request: pytest.FixtureRequest) -> None:
    ndb = ndb_with_t1(engine, request)
    t1 = "t1"
    ndb.insert_many(t1, [row(1, 1)])
    tx = ndb.transaction()
    missing = tx.read(t1, {"id": 404})
    present = tx.read(t1, {"id": 1})
    tx.execute(rndb.NoCommit, rndb.AO_IgnoreError)
    assert missing.row is None and missing.executed
    assert missing.error is not None
    assert (missing.error.code, missing.error.classification) == (626, "NoDataFound")
    assert present.row == row(1, 1) and present.error is None
    assert tx.state == "Open"
    # an insert of an existing key with IgnoreError: only the operation fails
    dup = tx.insert(t1, row(1))
    new = tx.insert(t1, row(2))
    tx.execute(rndb.Commit, rndb.AO_IgnoreError)
    assert dup.error is not None and dup.error.code == 630
    assert new.error is None
    assert ndb.read_many(t1, [2]) == [row(2)]

    # AbortOnError (the default): execute raises, the transaction is aborted
    tx = ndb.transaction()
    op = tx.read(t1, {"id": 404})
    with pytest.raises(rndb.NdbError) as ei:
        tx.execute(rndb.NoCommit)
    assert ei.value.code == 626
    assert isinstance(ei.value, rndb.PermanentError)
    assert op.error is not None and op.error.code == 626 and op.row is None
    assert tx.state == "Aborted"
    assert tx.error is not None and tx.error.code == 626
    tx.close()
    assert tx.state == "Closed"


def test_update_of_missing_row_and_key_change(ndb: rndb.Ndb, t1: str) -> None:
    with pytest.raises(rndb.NdbError) as ei, ndb.transaction() as tx:
        tx.update(t1, {"id": 1, "a": 1})
    assert ei.value.code == 626
    with pytest.raises(rndb.NdbError) as ei, ndb.transaction() as tx:
        tx.delete(t1, {"id": 1})
    assert ei.value.code == 626


def test_operations_in_several_executes(ndb: rndb.Ndb, t1: str) -> None:
    with ndb.transaction() as tx:
        first = tx.insert(t1, row(1, 1))
        tx.execute(rndb.NoCommit)
        second = tx.read(t1, 1)
        tx.execute(rndb.NoCommit)
        assert first.executed and second.row == row(1, 1)
        third = tx.update(t1, {"id": 1, "a": 2})
        assert not third.executed
    assert third.executed
    assert ndb.read_many(t1, [1]) == [row(1, 2)]


@pytest.mark.parametrize("engine", ["embedded", "direct"])
def test_transaction_repr_and_id(engine: str, request: pytest.FixtureRequest) -> None:
    ndb = ndb_with_t1(engine, request)
    t1 = "t1"
    a, b = ndb.transaction(), ndb.transaction()
    assert a.id != b.id
    kind = "Transaction" if engine == "direct" else "RemoteTransaction"
    assert repr(a).startswith(f"<rndb.{kind} id=") and "Open" in repr(a)
    op = a.insert(t1, row(1))
    assert repr(op) == "<rndb.Operation insert t1 pending>"
    a.close()
    b.close()
    assert "Closed" in repr(a)


@pytest.mark.parametrize("engine", ["embedded", "direct"])
def test_scans_inside_a_transaction(engine: str, request: pytest.FixtureRequest) -> None:
    # A scan of a transaction sees its changes of the rounds executed before (over the
    # data nodes: in its local transaction at each node group's node), and others do
    # not see them before the commit.
    ndb = ndb_with_t1(engine, request)
    t1 = "t1"
    ndb.insert_many(t1, [row(i, i % 5) for i in range(50)])
    with ndb.transaction() as tx:
        tx.insert(t1, row(100, 3))
        tx.delete(t1, {"id": 0})
        tx.update(t1, {"id": 1, "b": "mine"})
        tx.execute(rndb.NoCommit)
        for mode in (rndb.LM_CommittedRead, rndb.LM_Read, rndb.LM_Exclusive):
            seen = {r["id"]: r["b"] for r in tx.scan(t1, lock_mode=mode)}
            assert 100 in seen and 0 not in seen and len(seen) == 50, (mode, sorted(seen))
            assert seen[1] == "mine", mode
        got = [r["id"] for r in tx.index_scan(t1, "ix_a", low=3, high=3, columns=["id"], lock_mode=rndb.LM_Read)]
        # (whether an ordered-index scan shows the transaction's own uncommitted insert
        # is the engine's business: its ordered indexes take a row at commit; the
        # committed rows must all be there)
        assert sorted(set(got) - {100}) == [i for i in range(50) if i % 5 == 3]
        # outside the transaction: the committed rows
        assert len(list(ndb.scan(t1))) == 50 and ndb.read_many(t1, [100]) == [None]
        # a second round, then the scan again
        tx.delete(t1, {"id": 100})
        tx.execute(rndb.NoCommit)
        assert 100 not in {r["id"] for r in tx.scan(t1)}
        tx.rollback()
    assert ndb.read_many(t1, [0, 1, 100]) == [row(0, 0), row(1, 1), None]
    # a scan of a transaction that has run no round reads the committed rows
    with ndb.transaction() as tx:
        assert len(list(tx.scan(t1))) == 50


def test_exclusive_scan_locks_until_commit(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [row(i, i) for i in range(10)])
    tx = ndb.transaction()
    assert len(list(tx.scan(t1, lock_mode=rndb.LM_Exclusive))) == 10
    other = ndb.transaction()
    other.update(t1, {"id": 3, "a": 0})
    with pytest.raises(rndb.TemporaryError) as ei:
        other.execute(rndb.Commit)
    assert ei.value.code == 266
    tx.commit()
    with ndb.transaction() as again:
        again.update(t1, {"id": 3, "a": 0})
    assert ndb.read_many(t1, [3], columns=["a"]) == [{"a": 0}]
