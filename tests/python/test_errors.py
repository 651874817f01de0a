"""Bad input: every case raises rndb.NdbError (or a subclass) with NDB's values."""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path

import pytest

import rndb
from conftest import create_t1


def test_error_attributes(ndb: rndb.Ndb, t1: str) -> None:
    with pytest.raises(rndb.PermanentError) as ei:
        ndb.read_many("nope", [1])
    e = ei.value
    assert isinstance(e, rndb.NdbError)
    assert e.code == 723
    assert e.status == "PermanentError"
    assert e.classification == "SchemaError"
    assert e.message == "No such table existed: nope"
    assert e.mysql_code == 1146
    assert str(e) == "No such table existed: nope (NDB error 723, Permanent error, Schema error)"


def test_user_raised_error_has_defaults() -> None:
    e = rndb.NdbError("mine")
    assert (e.code, e.status, e.message, e.mysql_code) == (0, "PermanentError", "", 0)
    with pytest.raises(rndb.NdbError):
        raise rndb.TemporaryError("x")
    assert pickle.loads(pickle.dumps(e)).args == ("mine",)


def test_malformed_sql(ndb: rndb.Ndb) -> None:
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("SELEC * FROM t1")
    assert ei.value.mysql_code == 1064
    assert ei.value.status == "PermanentError"
    with pytest.raises(rndb.NdbError):
        ndb.execute("CREATE TABLE (")


@pytest.mark.parametrize("bad", [[1], object(), {1: 2}, {1, 2}, 1j])
def test_wrong_types_in_dicts(ndb: rndb.Ndb, t1: str, bad: object) -> None:
    for call in (
        lambda: ndb.insert_many(t1, [{"id": 1, "a": bad}]),
        lambda: ndb.transaction().insert(t1, {"id": 1, "a": bad}),
        lambda: ndb.transaction().update(t1, {"id": 1, "a": bad}),
    ):
        with pytest.raises(rndb.NdbError) as ei:
            call()
        assert ei.value.code == 4217
        assert ei.value.classification == "ApplicationError"
        assert "column 'a'" in ei.value.message
        assert type(bad).__name__ in ei.value.message
    # in a key
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many(t1, [{"id": bad}])
    assert ei.value.code == 4217 and "column 'id'" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        ndb.transaction().read(t1, {"id": bad})
    assert ei.value.code == 4217


def test_rows_and_keys_of_the_wrong_shape(ndb: rndb.Ndb, t1: str) -> None:
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, [(1, 2, "x")])  # tuples need columns=
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, [(1, 2)], columns=["id", "a", "b"])
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, 5)  # type: ignore[arg-type]
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, [{3: 1}])  # type: ignore[dict-item]
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many(t1, [(1, 2)])
    assert ei.value.code == 4264
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many(t1, [1], columns="a")
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, [{"id": 1}], batch_size=0)
    assert ei.value.code == 4118


def test_missing_key_columns(ndb: rndb.Ndb, t1: str) -> None:
    tx = ndb.transaction()
    for define in (tx.update, tx.write, tx.delete):
        with pytest.raises(rndb.NdbError) as ei:
            define(t1, {"a": 1})
        assert ei.value.code == 4264
        assert "id" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        tx.read(t1, {"a": 1})
    assert ei.value.code == 4264 and "'id'" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many(t1, [{"b": "x"}])
    assert ei.value.code == 4264
    # an insert without its key (no auto-increment) fails at execute
    tx.insert(t1, {"a": 1})
    with pytest.raises(rndb.NdbError) as ei:
        tx.execute(rndb.Commit)
    assert ei.value.code in (4264, 839)
    assert tx.state == "Aborted"


def test_varchar_too_long(ndb: rndb.Ndb, t1: str) -> None:
    assert ndb.insert_many(t1, [{"id": 1, "b": "x" * 32}]) == 1
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, [{"id": 2, "b": "x" * 33}])
    e = ei.value
    assert (e.code, e.classification, e.mysql_code) == (4209, "ApplicationError", 1406)
    assert "'b'" in e.message
    # 32 characters of 4 bytes each fit: the limit counts characters
    assert ndb.insert_many(t1, [{"id": 3, "b": "🚀" * 32}]) == 1
    assert ndb.read_many(t1, [2, 3], columns=["b"]) == [None, {"b": "🚀" * 32}]


def test_unknown_table_and_column(ndb: rndb.Ndb, t1: str) -> None:
    for call in (
        lambda: ndb.insert_many("nope", [{"id": 1}]),
        lambda: ndb.read_many("nope", [1]),
        lambda: ndb.scan("nope"),
        lambda: ndb.transaction().insert("nope", {"id": 1}),
    ):
        with pytest.raises(rndb.NdbError) as ei:
            call()
        assert ei.value.code == 723 and "nope" in ei.value.message
    for call in (
        lambda: ndb.insert_many(t1, [{"id": 1, "zz": 1}]),
        lambda: ndb.read_many(t1, [1], columns=["id", "zz"]),
        lambda: ndb.scan(t1, columns=["zz"]),
        lambda: ndb.transaction().update(t1, {"id": 1, "zz": 1}),
        lambda: ndb.transaction().read(t1, {"id": 1}, columns=["zz"]),
    ):
        with pytest.raises(rndb.NdbError) as ei:
            call()
        assert ei.value.code == 4004 and "zz" in ei.value.message
        assert ei.value.mysql_code == 1054
    with pytest.raises(rndb.NdbError) as ei:
        ndb.index_scan(t1, "no_index")
    assert ei.value.code == 4243


def test_bad_constants(ndb: rndb.Ndb, t1: str) -> None:
    tx = ndb.transaction()
    with pytest.raises(rndb.NdbError) as ei:
        tx.execute(7)
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError):
        tx.execute(rndb.NoCommit, 1)
    with pytest.raises(rndb.NdbError):
        tx.read(t1, 1, lock_mode=9)
    with pytest.raises(rndb.NdbError):
        ndb.scan(t1, lock_mode=-1)


def test_data_memory_full(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="2M") as cluster:
        ndb = cluster.ndb("test")
        create_t1(ndb)
        committed = 0
        batch = 500
        err = None
        for start in range(0, 1_000_000, batch):
            rows = [{"id": i, "a": i, "b": f"{i:016d}"} for i in range(start, start + batch)]
            try:
                assert ndb.insert_many("t1", rows, batch_size=batch) == batch
            except rndb.NdbError as e:
                err = e
                break
            committed += batch
        assert err is not None, "DataMemory never filled"
        assert err.classification == "InsufficientSpace"
        assert err.code in (827, 625, 902)
        assert err.mysql_code == 1114
        assert err.status == "PermanentError"
        assert committed > 1000
        # no committed row lost, the failed batch left nothing behind
        assert sum(1 for _ in ndb.scan("t1")) == committed
        got = ndb.read_many("t1", range(committed + batch))
        assert all(r is not None for r in got[:committed])
        assert all(r is None for r in got[committed:])
        # still deletable and insertable again
        with ndb.transaction() as tx:
            for i in range(200):
                tx.delete("t1", {"id": i})
        assert ndb.insert_many("t1", [{"id": 10_000_000 + i, "a": 1, "b": "after"} for i in range(50)]) == 50
        assert ndb.read_many("t1", [0, 10_000_000, committed - 1])[1:] == [
            {"id": 10_000_000, "a": 1, "b": "after"},
            {"id": committed - 1, "a": committed - 1, "b": f"{committed - 1:016d}"},
        ]
        assert "Data usage is" in cluster.mgm("ALL REPORT MEMORYUSAGE")


def test_transaction_used_after_close(ndb: rndb.Ndb, t1: str) -> None:
    tx = ndb.transaction()
    tx.insert(t1, {"id": 1, "a": 1})
    tx.commit()
    assert tx.state == "Committed"
    for call in (
        lambda: tx.insert(t1, {"id": 2}),
        lambda: tx.read(t1, {"id": 1}),
        lambda: tx.execute(rndb.NoCommit),
        lambda: tx.commit(),
        lambda: tx.scan(t1),
    ):
        with pytest.raises(rndb.NdbError) as ei:
            call()
        assert ei.value.code == 4604
        assert ei.value.status == "PermanentError"
    tx.close()
    assert tx.state == "Closed"
    with pytest.raises(rndb.NdbError) as ei:
        tx.delete(t1, {"id": 1})
    assert ei.value.code == 4604
    tx2 = ndb.transaction()
    tx2.close()
    with pytest.raises(rndb.NdbError) as ei:
        tx2.insert(t1, {"id": 5})
    assert ei.value.code == 4604
    # after a with block
    with ndb.transaction() as tx3:
        pass
    with pytest.raises(rndb.NdbError) as ei:
        tx3.read(t1, {"id": 1})
    assert ei.value.code == 4604


def test_config_file_with_typo(tmp_path: Path) -> None:
    ini = tmp_path / "config.ini"
    ini.write_text(
        "[ndbd default]\nNoOfReplicas=2\nDataMemry=64M\n\n"
        "[ndb_mgmd]\nHostName=localhost\n\n[ndbd]\nHostName=localhost\n\n"
        "[ndbd]\nHostName=localhost\n\n[mysqld]\n"
    )
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(config_file=ini)
    e = ei.value
    assert e.code == 5000
    assert f"{ini}:3:" in e.message
    assert "DataMemry" in e.message
    assert "DataMemory" in e.message  # the suggestion
    # the corrected file starts
    ini.write_text(ini.read_text().replace("DataMemry", "DataMemory"))
    with rndb.Cluster.embedded(config_file=str(ini), DataMemory="32M") as c:
        assert c.data_node_ids == [2, 3]
        assert "DataMemory=32M" in c.config_ini
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(config_file=tmp_path / "missing.ini")
    assert ei.value.code == 5000 and "missing.ini" in ei.value.message


def test_bad_parameters() -> None:
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(DataMemry="64M")
    assert ei.value.code == 5000 and "DataMemry" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(DataMemory="lots")
    assert ei.value.code == 5000 and "DataMemory" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(DataMemory=1.5)  # type: ignore[arg-type]
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(data_nodes=3, no_of_replicas=2)
    assert ei.value.code == 5000
    with pytest.raises(rndb.NdbError) as ei:
        rndb.Cluster.embedded(config_file="x.ini", data_nodes=2)
    assert ei.value.code == 4118
    with rndb.Cluster.embedded(data_nodes=4, no_of_replicas=2, DataMemory=64 * 1024 * 1024) as c:
        assert c.data_node_ids == [2, 3, 4, 5]
    with rndb.Cluster.embedded(data_nodes=1, MaxNoOfTables=300) as c:
        assert c.data_node_ids == [2]
        assert "MaxNoOfTables=300" in c.config_ini


def test_lock_timeout_is_temporary(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": 1, "a": 1}])
    holder = ndb.transaction()
    holder.read(t1, {"id": 1}, lock_mode=rndb.LM_Exclusive)
    holder.execute(rndb.NoCommit)
    waiter = ndb.transaction()
    waiter.update(t1, {"id": 1, "a": 2})
    t0 = time.monotonic()
    with pytest.raises(rndb.TemporaryError) as ei:
        waiter.execute(rndb.Commit)
    assert time.monotonic() - t0 >= 0.19
    e = ei.value
    assert (e.code, e.status, e.classification, e.mysql_code) == (266, "TemporaryError", "TimeoutExpired", 1205)
    assert waiter.state == "Aborted"
    assert waiter.error is not None and waiter.error.code == 266
    # committed reads do not wait
    assert ndb.read_many(t1, [1]) == [{"id": 1, "a": 1, "b": None}]
    holder.commit()

    # the retry loop NDB applications write
    attempts = 0
    while True:
        attempts += 1
        try:
            with ndb.transaction() as tx:
                tx.update(t1, {"id": 1, "a": 3})
            break
        except rndb.TemporaryError:
            assert attempts < 5
    assert attempts == 1
    assert ndb.read_many(t1, [1], columns=["a"]) == [{"a": 3}]


def test_lock_wait_releases_the_gil(ndb: rndb.Ndb, t1: str) -> None:
    """A transaction waiting for a row lock does not block other Python threads: the
    holder commits from another thread while the waiter waits."""
    ndb.insert_many(t1, [{"id": 1, "a": 1}])
    holder = ndb.transaction()
    holder.update(t1, {"id": 1, "a": 5})
    holder.execute(rndb.NoCommit)
    threading.Timer(0.05, holder.commit).start()
    with ndb.transaction() as tx:
        op = tx.read(t1, {"id": 1}, lock_mode=rndb.LM_Read)
        tx.execute(rndb.NoCommit)
    assert op.row == {"id": 1, "a": 5, "b": None}


def test_cluster_closed(tmp_path: Path) -> None:
    cluster = rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="8M")
    ndb = cluster.ndb("test")
    create_t1(ndb)
    ndb.insert_many("t1", [{"id": 1}])
    tx = ndb.transaction()
    tx.insert("t1", {"id": 2})
    scan = ndb.scan("t1", batch_size=1)
    cluster.close()
    cluster.close()  # idempotent
    assert cluster.closed
    for call in (
        lambda: ndb.read_many("t1", [1]),
        lambda: ndb.insert_many("t1", [{"id": 3}]),
        lambda: ndb.transaction(),
        lambda: tx.execute(rndb.Commit),
        lambda: cluster.ndb("test"),
        lambda: cluster.mgm("SHOW"),
        lambda: cluster.ndbinfo("memoryusage"),
        lambda: ndb.execute("SELECT 1"),
        lambda: next(scan),
    ):
        with pytest.raises(rndb.NdbError) as ei:
            call()
        assert ei.value.code == 4009, ei.value
        assert isinstance(ei.value, rndb.UnknownResultError)
