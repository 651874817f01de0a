"""`Ndb.reader`: the prepared primary-key read (values, tuples, None for missing keys,
errors with NDB codes) and the column cache `read_many` shares with it."""

from __future__ import annotations

import threading

import pytest

import rndb


def test_reader_values_tuples_and_missing(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": i, "a": i * 10, "b": f"s{i}"} for i in range(1, 6)])
    ndb.insert_many(t1, [{"id": 9}])  # a and b NULL
    one = ndb.reader(t1, columns=["b"])
    assert one.get(3) == "s3"
    assert one.get(99) is None
    assert one.get(9) is None  # a NULL value reads as None too: ask for a tuple to tell
    two = ndb.reader(t1, columns=("a", "b"))
    assert two.get(2) == (20, "s2")
    assert two.get(9) == (None, None)
    assert two.get(99) is None
    assert two.get_many([1, 99, 5]) == [(10, "s1"), None, (50, "s5")]
    assert one.get_many(k for k in range(4, 8)) == ["s4", "s5", None, None]
    assert one.get_many([]) == []
    every = ndb.reader(t1)
    assert every.columns == ["id", "a", "b"] and every.table == "t1"
    assert every.get(1) == (1, 10, "s1")
    exists = ndb.reader(t1, columns=[])
    assert exists.get(1) == () and exists.get(99) is None
    assert repr(one) == '<rndb.Reader table="t1" columns=["b"]>'
    # key forms: a tuple in key order and a dict, as read_many takes them
    assert one.get((4,)) == "s4" and one.get({"id": 5}) == "s5"


def test_reader_bytes_and_many_keys(ndb: rndb.Ndb) -> None:
    ndb.create_table("kv", {"id": "BIGINT NOT NULL", "v": "VARBINARY(1024) NOT NULL"},
                     primary_key="id")
    n = 40_000  # more than one engine call in get_many (32,768 keys per call)
    ndb.insert_many("kv", ((k, k.to_bytes(4, "big") * 25) for k in range(n)), columns=["id", "v"])
    r = ndb.reader("kv", columns=["v"])
    assert r.get(7) == (7).to_bytes(4, "big") * 25
    got = r.get_many(range(-5, n + 5))
    assert got[:5] == [None] * 5 and got[-5:] == [None] * 5
    assert got[5:-5] == [k.to_bytes(4, "big") * 25 for k in range(n)]


def test_reader_errors(ndb: rndb.Ndb, t1: str) -> None:
    with pytest.raises(rndb.NdbError) as ei:
        ndb.reader(t1, columns=["a", "zz"])
    assert ei.value.code == 4004 and "zz" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei:
        ndb.reader("nope")
    assert ei.value.code == 723
    with pytest.raises(rndb.NdbError) as ei:
        ndb.reader(t1, columns="a")  # type: ignore[arg-type]
    assert ei.value.code == 4118
    r = ndb.reader(t1, columns=["a"])
    for bad in [object(), 1.5j, b"\x01"]:
        with pytest.raises(rndb.NdbError) as ei:
            r.get(bad)
        assert ei.value.code in (4217, 4209), bad
    with pytest.raises(rndb.NdbError) as ei:
        r.get(-1)  # BIGINT UNSIGNED
    assert ei.value.code == 4209 or ei.value.code == 4217
    with pytest.raises(rndb.NdbError) as ei:
        r.get((1, 2))
    assert ei.value.code == 4264
    with pytest.raises(rndb.NdbError) as ei:
        r.get({"a": 1})
    assert ei.value.code == 4264
    with pytest.raises(rndb.NdbError) as ei:
        r.get_many(5)  # type: ignore[arg-type]
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        r.get_many([1, object()])
    assert ei.value.code == 4217


def test_reader_follows_the_table(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": 1, "a": 1}])
    r = ndb.reader(t1, columns=["a"])
    assert r.get(1) == 1
    ndb.truncate_table(t1)
    assert r.get(1) is None
    ndb.insert_many(t1, [{"id": 1, "a": 2}])
    assert r.get(1) == 2
    ndb.drop_table(t1)
    with pytest.raises(rndb.NdbError) as ei:
        r.get(1)
    assert ei.value.code == 723
    ndb.create_table(t1, {"id": "INT NOT NULL", "x": "INT", "a": "VARCHAR(8)"}, primary_key="id")
    ndb.insert_many(t1, [{"id": 1, "a": "new"}])
    assert r.get(1) == "new"  # resolved again by name: now the third column
    ndb.drop_table(t1)
    ndb.create_table(t1, {"id": "INT NOT NULL"}, primary_key="id")
    with pytest.raises(rndb.NdbError) as ei:
        r.get(1)
    assert ei.value.code == 4004


def test_read_many_cache_follows_the_table(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": 1, "a": 1, "b": "x"}])
    cols = ["b", "a"]
    assert ndb.read_many(t1, [1], columns=cols) == [{"b": "x", "a": 1}]
    cols.append("id")  # the same list object, other names: not the cached entry
    assert ndb.read_many(t1, [1], columns=cols) == [{"b": "x", "a": 1, "id": 1}]
    assert ndb.read_many(t1, [1], columns=iter(["a"])) == [{"a": 1}]
    assert ndb.read_many(t1, [1], columns=iter(["a"])) == [{"a": 1}]
    assert ndb.read_many(t1, [1]) == [{"id": 1, "a": 1, "b": "x"}]
    ndb.drop_table(t1)
    ndb.create_table(t1, {"id": "INT NOT NULL", "b": "INT"}, primary_key="id")
    ndb.insert_many(t1, [{"id": 1, "b": 5}])
    assert ndb.read_many(t1, [1], columns=["b"]) == [{"b": 5}]
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many(t1, [1], columns=["b", "a"])
    assert ei.value.code == 4004
    for i in range(100):  # more (table, columns) pairs than the cache keeps
        assert ndb.read_many(t1, [1], columns=["b"] * (i + 1))[0] == {"b": 5}


def test_reader_from_threads(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": i, "a": i} for i in range(1000)])
    r = ndb.reader(t1, columns=["a"])
    bad: list[object] = []

    def go(off: int) -> None:
        for i in range(2000):
            k = (i * 7 + off) % 1000
            if r.get(k) != k:
                bad.append(k)

    ts = [threading.Thread(target=go, args=(o,)) for o in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []


def test_reader_after_close() -> None:
    c = rndb.Cluster.embedded(DataMemory="32M")
    ndb = c.ndb("test")
    ndb.create_table("t", {"id": "INT NOT NULL", "a": "INT"}, primary_key="id")
    r = ndb.reader("t", columns=["a"])
    c.close()
    with pytest.raises(rndb.NdbError):
        r.get(1)


def test_reader_disk_and_blob_columns(ndb: rndb.Ndb) -> None:
    # Reads of these columns release the GIL (I/O, the parts table): same results.
    ndb.execute("CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M "
                "UNDO_BUFFER_SIZE=1M ENGINE=NDB")
    ndb.execute("CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg "
                "INITIAL_SIZE=2M EXTENT_SIZE=256K ENGINE=NDB")
    ndb.create_table("d", {"id": "BIGINT NOT NULL", "m": "INT", "dk": "VARCHAR(64) STORAGE DISK"},
                     primary_key="id", tablespace="ts_1")
    ndb.insert_many("d", [(i, i, f"disk{i}") for i in range(50)], columns=["id", "m", "dk"])
    assert ndb.reader("d", columns=["dk"]).get(7) == "disk7"
    assert ndb.reader("d", columns=["m", "dk"]).get_many([3, 99]) == [(3, "disk3"), None]
    ndb.create_table("b", {"id": "INT NOT NULL", "bl": "BLOB", "tx": "TEXT"}, primary_key="id")
    big = bytes(range(256)) * 40
    ndb.insert_many("b", [(1, big, "t" * 5000), (2, None, "")], columns=["id", "bl", "tx"])
    r = ndb.reader("b", columns=["bl", "tx"])
    assert r.get(1) == (big, "t" * 5000)
    assert r.get(2) == (None, "") and r.get(3) is None
