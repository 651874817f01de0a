"""Table scans and ordered-index range scans."""

from __future__ import annotations

import pytest

import rndb

N = 600


@pytest.fixture
def loaded(ndb: rndb.Ndb, t1: str) -> list[dict[str, object]]:
    rows = [{"id": i, "a": i % 60, "b": f"r{i:04d}"} for i in range(N)]
    ndb.insert_many(t1, rows)
    return rows


def ids(rows: list[dict[str, object]]) -> list[object]:
    return sorted(r["id"] for r in rows)  # type: ignore[type-var]


def test_table_scan(ndb: rndb.Ndb, t1: str, loaded: list[dict[str, object]]) -> None:
    it = ndb.scan(t1)
    assert iter(it) is it
    assert it.columns == ["id", "a", "b"]
    got = list(it)
    assert sorted(got, key=lambda r: r["id"]) == loaded  # type: ignore[arg-type, return-value]
    with pytest.raises(StopIteration):
        next(it)
    # columns and batch sizes
    assert ids(list(ndb.scan(t1, columns=["id"], batch_size=1))) == list(range(N))
    assert all(list(r) == ["b", "a"] for r in ndb.scan(t1, columns=["b", "a"], batch_size=7))
    for mode in (rndb.LM_Read, rndb.LM_Exclusive, rndb.LM_SimpleRead, rndb.LM_CommittedRead):
        assert len(list(ndb.scan(t1, lock_mode=mode, batch_size=100))) == N
    with pytest.raises(rndb.NdbError) as ei:
        ndb.scan(t1, batch_size=0)
    assert ei.value.code == 4118


def test_empty_table_scan(ndb: rndb.Ndb, t1: str) -> None:
    assert list(ndb.scan(t1)) == []
    assert list(ndb.index_scan(t1, "ix_a")) == []


def test_index_scan_bounds(ndb: rndb.Ndb, t1: str, loaded: list[dict[str, object]]) -> None:
    def expect(pred: object) -> list[object]:
        return [r["id"] for r in loaded if pred(r["a"])]  # type: ignore[operator]

    def scan(**kw: object) -> list[dict[str, object]]:
        rows = list(ndb.index_scan(t1, "ix_a", **kw))  # type: ignore[arg-type]
        a = [r["a"] for r in rows]
        if kw.get("descending"):
            assert a == sorted(a, reverse=True)  # type: ignore[type-var]
        else:
            assert a == sorted(a)  # type: ignore[type-var]
        return rows

    assert ids(scan(low=10, high=20, high_inclusive=False)) == sorted(expect(lambda a: 10 <= a < 20))
    assert ids(scan(low=10, high=20)) == sorted(expect(lambda a: 10 <= a <= 20))
    assert ids(scan(low=10, high=20, low_inclusive=False)) == sorted(expect(lambda a: 10 < a <= 20))
    assert ids(scan(low=55)) == sorted(expect(lambda a: a >= 55))
    assert ids(scan(high=(2,), high_inclusive=False)) == sorted(expect(lambda a: a < 2))
    assert ids(scan(low=[30], high=[30])) == sorted(expect(lambda a: a == 30))
    assert ids(scan(low=70)) == []
    assert len(scan()) == N
    assert len(scan(batch_size=3)) == N
    desc = scan(low=50, descending=True)
    assert ids(desc) == sorted(expect(lambda a: a >= 50))
    assert desc[0]["a"] == 59
    only_id = list(ndb.index_scan(t1, "ix_a", low=5, high=5, columns=["id"]))
    assert sorted(r["id"] for r in only_id) == [5 + 60 * k for k in range(10)]
    assert all(list(r) == ["id"] for r in only_id)


def test_multi_column_index(ndb: rndb.Ndb) -> None:
    ndb.create_table(
        "m",
        {"id": "INT NOT NULL", "x": "INT", "y": "VARCHAR(8)"},
        primary_key="id",
        indexes={"ix_xy": ("x", "y")},
    )
    rows = [{"id": i, "x": i // 10, "y": f"{i % 10}"} for i in range(100)]
    ndb.insert_many("m", rows)
    got = list(ndb.index_scan("m", "ix_xy", low=(3, "5"), high=(4, "2")))
    assert [(r["x"], r["y"]) for r in got] == [(3, "5"), (3, "6"), (3, "7"), (3, "8"), (3, "9"), (4, "0"), (4, "1"), (4, "2")]
    prefix = list(ndb.index_scan("m", "ix_xy", low=7, high=7))  # prefix bound on x only
    assert [r["id"] for r in prefix] == list(range(70, 80))
    with pytest.raises(rndb.NdbError) as ei:
        ndb.index_scan("m", "ix_xy", low=(1, "2", 3))
    assert ei.value.code == 4118
    with pytest.raises(rndb.NdbError) as ei:
        ndb.index_scan("m", "ix_xy", low=[{"x": 1}])
    assert ei.value.code == 4217


def test_unique_index_is_not_range_scannable(ndb: rndb.Ndb) -> None:
    ndb.create_table("u", {"id": "INT NOT NULL", "e": "VARCHAR(20)"}, primary_key="id", unique_indexes={"u_e": "e"})
    ndb.insert_many("u", [{"id": 1, "e": "a"}])
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many("u", [{"id": 2, "e": "a"}])
    assert ei.value.code == 893
    with pytest.raises(rndb.NdbError) as ei:
        ndb.index_scan("u", "u_e")
    assert ei.value.code == 4118


def test_scan_close_and_context_manager(ndb: rndb.Ndb, t1: str, loaded: list[dict[str, object]]) -> None:
    with ndb.scan(t1, lock_mode=rndb.LM_Exclusive, batch_size=10) as it:
        first = next(it)
        assert set(first) == {"id", "a", "b"}
    with pytest.raises(StopIteration):
        next(it)
    # the scan's locks went with its transaction: the row can be updated now
    with ndb.transaction() as tx:
        tx.update(t1, {"id": first["id"], "a": -1})
    it2 = ndb.scan(t1, batch_size=10)
    next(it2)
    it2.close()
    it2.close()
    assert list(it2) == []


def test_abandoned_locking_scan_releases_locks(ndb: rndb.Ndb, t1: str, loaded: list[dict[str, object]]) -> None:
    it = ndb.scan(t1, lock_mode=rndb.LM_Exclusive, batch_size=N)
    row = next(it)
    del it  # dropping the iterator rolls its transaction back
    import gc

    gc.collect()
    with ndb.transaction() as tx:
        tx.update(t1, {"id": row["id"], "a": 0})
