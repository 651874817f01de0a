"""Disk data from Python: logfile group and tablespace through SQL, a STORAGE DISK table
created through the NDB API wrapper, rows written and read through both, and the
errors NDB gives (755 without a tablespace, 1601 / MySQL 1114 when the tablespace is
full, 768 dropping a tablespace in use)."""

from __future__ import annotations

import pytest

import rndb

LG = (
    "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M "
    "UNDO_BUFFER_SIZE=1M ENGINE=NDB"
)
TS = (
    "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg "
    "INITIAL_SIZE=2M EXTENT_SIZE=256K ENGINE=NDB"
)
COLUMNS = {"id": "BIGINT NOT NULL", "data1": "VARCHAR(512)", "data2": "VARCHAR(512)"}


def free_extents(ndb: rndb.Ndb) -> int:
    rows = ndb.execute(
        "select free_extents as f from information_schema.files where file_type='DATAFILE'"
    )
    assert isinstance(rows, list)
    return sum(int(r["f"]) for r in rows)


def test_disk_table_through_the_api_and_sql(ndb: rndb.Ndb) -> None:
    ndb.execute(LG)
    ndb.execute(TS)
    before = free_extents(ndb)
    ndb.create_table("t1", COLUMNS, primary_key="id", tablespace="ts_1", storage="disk")
    rows = [(i, "a" * (i % 300), "b" * (511 - i % 300)) for i in range(1, 401)]
    assert ndb.insert_many("t1", rows, columns=["id", "data1", "data2"]) == 400
    assert free_extents(ndb) < before, "the rows went to the tablespace"
    got = ndb.read_many("t1", [7, 399, 1000], columns=["data1", "data2"])
    assert got[0] is not None and got[1] is not None and got[2] is None
    assert (len(got[0]["data1"]), len(got[0]["data2"])) == (7, 504)
    assert (len(got[1]["data1"]), len(got[1]["data2"])) == (99, 412)
    ndb.execute("update t1 set data1 = 'changed' where id = 7")
    assert ndb.execute("select data1 from t1 where id = 7") == [{"data1": "changed"}]
    long_rows = sum(1 for r in rows if len(r[2]) > 400)
    assert ndb.execute("select count(*) as n from t1 where length(data2) > 400") == [{"n": long_rows}]
    scanned = sorted(r["id"] for r in ndb.scan("t1", columns=["id", "data1"]))
    assert scanned == list(range(1, 401))
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("DROP TABLESPACE ts_1")
    assert ei.value.code == 768
    ndb.drop_table("t1")
    assert free_extents(ndb) == before


def test_disk_errors(ndb: rndb.Ndb) -> None:
    with pytest.raises(rndb.NdbError) as ei:
        ndb.create_table("t", COLUMNS, primary_key="id", storage="disk")
    assert ei.value.code == 755
    with pytest.raises(rndb.NdbError):
        ndb.create_table("t", COLUMNS, primary_key="id", storage="tape")
    ndb.execute(LG)
    ndb.execute(TS)
    ndb.create_table("t", COLUMNS, primary_key="id", tablespace="ts_1", storage="disk")
    big = "z" * 512
    with pytest.raises(rndb.NdbError) as ei:
        for i in range(100_000):
            ndb.execute(f"insert into t values ({i}, '{big}', '{big}')")
    assert ei.value.mysql_code == 1114
    assert "The table 't' is full" in ei.value.message
    n = ndb.execute("select count(*) as n from t")
    assert isinstance(n, list) and n[0]["n"] > 100
    ndb.execute("ALTER TABLESPACE ts_1 ADD DATAFILE 'data2.dat' INITIAL_SIZE=2M ENGINE=NDB")
    ndb.execute(f"insert into t values (-1, '{big}', '{big}')")
