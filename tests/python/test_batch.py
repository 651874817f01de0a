"""insert_many / read_many: the throughput paths."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import rndb


def test_insert_many_forms(ndb: rndb.Ndb, t1: str) -> None:
    # dicts, with differing column sets (defaults/NULL for the missing ones)
    assert ndb.insert_many(t1, [{"id": 1, "a": 1, "b": "x"}, {"id": 2, "a": 2}, {"b": "z", "id": 3}]) == 3
    # tuples and lists with columns=
    assert ndb.insert_many(t1, [(4, 4, "w"), [5, 5, "v"]], columns=["id", "a", "b"]) == 2
    assert ndb.insert_many(t1, [("u", 6)], columns=("b", "id")) == 1
    # a generator, mixed dicts and tuples, small transactions
    def gen() -> Iterator[object]:
        for i in range(7, 107):
            yield {"id": i, "a": i} if i % 2 else (i, i)

    assert ndb.insert_many(t1, gen(), columns=["id", "a"], batch_size=7) == 100  # type: ignore[arg-type]
    assert ndb.insert_many(t1, []) == 0
    got = ndb.read_many(t1, range(1, 108))
    assert got[:6] == [
        {"id": 1, "a": 1, "b": "x"},
        {"id": 2, "a": 2, "b": None},
        {"id": 3, "a": None, "b": "z"},
        {"id": 4, "a": 4, "b": "w"},
        {"id": 5, "a": 5, "b": "v"},
        {"id": 6, "a": None, "b": "u"},
    ]
    assert got[6:106] == [{"id": i, "a": i, "b": None} for i in range(7, 107)]
    assert got[106] is None


def test_insert_many_large_and_batched(ndb: rndb.Ndb, t1: str) -> None:
    n = 50_000
    assert ndb.insert_many(t1, ({"id": i, "a": i % 1000, "b": f"{i:016d}"} for i in range(n)), batch_size=999) == n
    assert sum(1 for _ in ndb.scan(t1, batch_size=5000)) == n
    got = ndb.read_many(t1, range(n - 5, n + 5))
    assert got == [{"id": i, "a": i % 1000, "b": f"{i:016d}"} for i in range(n - 5, n)] + [None] * 5


def test_insert_many_failure_keeps_earlier_batches(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": 25}])
    rows = [{"id": i} for i in range(30)]
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(t1, rows, batch_size=10)
    assert ei.value.code == 630
    got = ndb.read_many(t1, range(30))
    # batches [0, 10) and [10, 20) committed; [20, 30) rolled back except the old row
    assert [r is not None for r in got] == [True] * 20 + [False] * 5 + [True] + [False] * 4


def test_read_many_key_forms(ndb: rndb.Ndb) -> None:
    ndb.create_table(
        "kv",
        {"k1": "INT NOT NULL", "k2": "VARCHAR(10) NOT NULL", "v": "DOUBLE"},
        primary_key=["k1", "k2"],
    )
    ndb.insert_many("kv", [(i, str(i), i / 2) for i in range(10)], columns=["k1", "k2", "v"])
    got = ndb.read_many("kv", [(1, "1"), {"k2": "2", "k1": 2}, [3, "3"], (3, "4")], columns=["v"])
    assert got == [{"v": 0.5}, {"v": 1.0}, {"v": 1.5}, None]
    with pytest.raises(rndb.NdbError) as ei:
        ndb.read_many("kv", [1])
    assert ei.value.code == 4264
    assert ndb.read_many("kv", []) == []


def test_read_many_columns_and_order(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, [{"id": i, "a": -i, "b": str(i)} for i in range(100)])
    keys = [99, 0, 50, 1000, 50]
    assert ndb.read_many(t1, keys, columns=["b", "a"]) == [
        {"b": "99", "a": -99},
        {"b": "0", "a": 0},
        {"b": "50", "a": -50},
        None,
        {"b": "50", "a": -50},
    ]
    assert list(ndb.read_many(t1, iter([3]), columns=[])[0].items()) == []  # type: ignore[union-attr]
    # dict keys come out in the column order asked for
    first = ndb.read_many(t1, [1], columns=["b", "id", "a"])[0]
    assert first is not None and list(first) == ["b", "id", "a"]


def test_read_many_many_keys(ndb: rndb.Ndb, t1: str) -> None:
    n = 40_000  # more than one trip into the engine
    ndb.insert_many(t1, ({"id": i, "a": i} for i in range(0, n, 2)))
    got = ndb.read_many(t1, range(n))
    assert len(got) == n
    assert all((r is not None) == (i % 2 == 0) for i, r in enumerate(got))
    assert got[n - 2] == {"id": n - 2, "a": n - 2, "b": None}


def test_gil_released_during_insert_many(ndb: rndb.Ndb, t1: str) -> None:
    """A second Python thread makes progress while insert_many runs."""
    rows = [{"id": i, "a": i, "b": "0123456789abcdef"} for i in range(60_000)]
    count = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal count
        while not stop.is_set():
            count += 1

    th = threading.Thread(target=spin)
    th.start()
    try:
        time.sleep(0.02)
        before = count
        t0 = time.perf_counter()
        assert ndb.insert_many(t1, rows) == len(rows)
        elapsed = time.perf_counter() - t0
        during = count - before
    finally:
        stop.set()
        th.join()
    assert elapsed > 0
    assert during > 10_000, f"the other thread ran {during} iterations in {elapsed:.2f}s"


def test_gil_released_during_read_many(ndb: rndb.Ndb, t1: str) -> None:
    ndb.insert_many(t1, ({"id": i} for i in range(30_000)))
    progress: list[int] = []

    def reader() -> None:
        for _ in range(3):
            progress.append(len(ndb.read_many(t1, range(30_000))))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert progress == [30_000] * 6


def test_concurrent_writers_from_threads(ndb: rndb.Ndb, t1: str) -> None:
    errors: list[BaseException] = []

    def writer(base: int) -> None:
        try:
            for i in range(200):
                with ndb.transaction() as tx:
                    tx.insert(t1, {"id": base + i, "a": base})
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(k * 1000,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sum(1 for _ in ndb.scan(t1)) == 800
