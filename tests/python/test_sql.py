"""ndb.execute: SQL through one session per Ndb object."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

import rndb

DDL = (
    "CREATE TABLE t1 (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, a INT, "
    "b VARCHAR(32), INDEX ix_a (a)) ENGINE=ndbcluster"
)


def test_dml_counts_and_rows(ndb: rndb.Ndb) -> None:
    assert ndb.execute(DDL) == 0
    assert ndb.execute("INSERT INTO t1 VALUES (1, 10, 'x'), (2, 20, 'y'), (3, NULL, NULL)") == 3
    assert ndb.execute("SELECT * FROM t1 ORDER BY id") == [
        {"id": 1, "a": 10, "b": "x"},
        {"id": 2, "a": 20, "b": "y"},
        {"id": 3, "a": None, "b": None},
    ]
    assert ndb.execute("SELECT b, id FROM t1 WHERE a > 15") == [{"b": "y", "id": 2}]
    assert ndb.execute("SELECT * FROM t1 WHERE id = 99") == []
    assert ndb.execute("UPDATE t1 SET a = a + 1 WHERE id <= 2") == 2
    assert ndb.execute("DELETE FROM t1 WHERE id = 3") == 1
    assert ndb.execute("SELECT COUNT(*) AS n, SUM(a) AS s FROM t1") == [{"n": 2, "s": Decimal("32")}] or ndb.execute(
        "SELECT COUNT(*) AS n, SUM(a) AS s FROM t1"
    ) == [{"n": 2, "s": 32}]
    # SQL and the NDB API see the same rows
    assert ndb.read_many("t1", [1, 2, 3]) == [{"id": 1, "a": 11, "b": "x"}, {"id": 2, "a": 21, "b": "y"}, None]
    with ndb.transaction() as tx:
        tx.insert("t1", {"id": 4, "a": 40, "b": "api"})
    assert ndb.execute("SELECT b FROM t1 WHERE id = 4") == [{"b": "api"}]


def test_value_types_through_sql(ndb: rndb.Ndb) -> None:
    ndb.execute(
        "CREATE TABLE v (id INT PRIMARY KEY, d DECIMAL(8,2), dt DATE, dtm DATETIME, "
        "tm TIME, f DOUBLE, vb VARBINARY(8)) ENGINE=ndbcluster"
    )
    ndb.execute(
        "INSERT INTO v VALUES (1, 12.5, '2024-02-29', '2024-02-29 12:34:56', '-01:02:03', 0.25, 'ab')"
    )
    assert ndb.execute("SELECT d, dt, dtm, tm, f, vb FROM v") == [
        {
            "d": Decimal("12.50"),
            "dt": dt.date(2024, 2, 29),
            "dtm": dt.datetime(2024, 2, 29, 12, 34, 56),
            "tm": -dt.timedelta(hours=1, minutes=2, seconds=3),
            "f": 0.25,
            "vb": b"ab",
        }
    ]


def test_session_state_persists(cluster: rndb.Cluster, ndb: rndb.Ndb) -> None:
    ndb.execute(DDL)
    ndb.execute("SET @x = 41")
    assert ndb.execute("SELECT @x + 1 AS y") == [{"y": 42}]
    # explicit transactions span calls; another Ndb object has its own session
    other = cluster.ndb("test")
    assert not ndb.sql_in_transaction
    ndb.execute("BEGIN")
    assert ndb.sql_in_transaction
    ndb.execute("INSERT INTO t1 VALUES (1, 1, 'in tx')")
    assert ndb.execute("SELECT b FROM t1 WHERE id = 1") == [{"b": "in tx"}]
    assert other.execute("SELECT * FROM t1") == []
    ndb.execute("ROLLBACK")
    assert ndb.execute("SELECT * FROM t1") == []
    ndb.execute("BEGIN")
    ndb.execute("INSERT INTO t1 VALUES (2, 2, 'kept')")
    ndb.execute("COMMIT")
    assert other.execute("SELECT b FROM t1") == [{"b": "kept"}]


def test_use_database(cluster: rndb.Cluster, ndb: rndb.Ndb) -> None:
    ndb.execute("CREATE DATABASE db2")
    assert ndb.sql_database == "test"
    ndb.execute("USE db2")
    assert ndb.sql_database == "db2"
    assert ndb.database == "test"  # the NDB API calls of this object stay in "test"
    ndb.execute("CREATE TABLE t2 (id INT PRIMARY KEY) ENGINE=ndbcluster")
    ndb.execute("INSERT INTO t2 VALUES (7)")
    assert ndb.execute("SELECT id FROM t2") == [{"id": 7}]
    db2 = cluster.ndb("db2")
    assert db2.tables() == ["t2"]
    assert db2.read_many("t2", [7]) == [{"id": 7}]
    assert "t2" not in cluster.ndb("test").tables()


def test_last_statement_wins(ndb: rndb.Ndb) -> None:
    ndb.execute(DDL)
    assert ndb.execute("INSERT INTO t1 VALUES (1, 1, 'a'); SELECT id FROM t1") == [{"id": 1}]
    assert ndb.execute("SELECT id FROM t1; DELETE FROM t1") == 1


def test_sql_errors(ndb: rndb.Ndb) -> None:
    ndb.execute(DDL)
    ndb.execute("INSERT INTO t1 VALUES (1, 1, 'a')")
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("INSERT INTO t1 VALUES (1, 2, 'b')")
    assert ei.value.mysql_code == 1062
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("SELECT * FROM nope")
    assert ei.value.mysql_code == 1146
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("SELECT zz FROM t1")
    assert ei.value.mysql_code == 1054
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("INSERT INTO t1 VALUES (2, 2, '" + "x" * 33 + "')")
    assert ei.value.mysql_code == 1406
    # the session still works after errors
    assert ndb.execute("SELECT id FROM t1") == [{"id": 1}]


def test_ndbinfo_through_sql(cluster: rndb.Cluster, ndb: rndb.Ndb) -> None:
    rows = ndb.execute("SELECT node_id, memory_type FROM ndbinfo.memoryusage")
    assert rows == [{k: r[k] for k in ("node_id", "memory_type")} for r in cluster.ndbinfo("memoryusage")]


def test_explain(ndb: rndb.Ndb) -> None:
    ndb.execute(DDL)
    assert ndb.explain("SELECT * FROM t1 WHERE id = 1") == "t1: primary key lookup (1 key)"
    assert "t1" in ndb.explain("SELECT * FROM t1 WHERE a BETWEEN 1 AND 5")
