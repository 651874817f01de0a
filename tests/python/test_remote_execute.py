"""`MgmClient.execute`: SQL over the transport returns the values themselves, as the
embedded `Ndb.execute` does — the same Python types (int, str, bytes, Decimal, date,
datetime, float, None) for the same statements, the affected-row counts, and the
errors with NDB's and MySQL's codes. Against the embedded distributed cluster
(`rndb.LocalCluster`), one node group and two."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pytest

import rndb

CREATE = (
    "CREATE TABLE typed (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, i INT, d DECIMAL(10,2), "
    "f DOUBLE, s VARCHAR(20), b VARBINARY(8), dt DATE, ts DATETIME, KEY ix_i (i)) ENGINE=NDB"
)

SCRIPT = [
    CREATE,
    "INSERT INTO typed VALUES (1, -5, 12.34, 0.5, 'one', 0x0102, '2026-12-07', "
    "'2026-12-07 18:30:00'), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(3, 7, -0.01, 1e10, 'three', 0x, '1999-01-31', '2000-02-29 23:59:59')",
    "SELECT * FROM typed ORDER BY id",
    "SELECT id, i * 2 AS twice, CONCAT(s, '!') AS bang FROM typed WHERE i IS NOT NULL ORDER BY id",
    "UPDATE typed SET i = i + 1 WHERE id IN (1, 3)",
    "SELECT COUNT(*) AS n, SUM(i) AS total, MAX(d) AS top FROM typed",
    "DELETE FROM typed WHERE id = 2",
    "SELECT id FROM typed WHERE id = 2",
    "SET @x = 41",
    "SELECT @x + 1 AS answer",
]


@pytest.mark.parametrize("data_nodes", [2, 4])
def test_execute_over_the_transport_gives_the_embedded_values(tmp_path: Path, data_nodes: int) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path / "embedded", DataMemory="32M") as embedded:
        ndb = embedded.ndb("test")
        expected = [ndb.execute(q) for q in SCRIPT]
    with rndb.LocalCluster.start(data_nodes=data_nodes, DataMemory="32M") as local:
        c = local.connect()
        got = [c.execute(q) for q in SCRIPT]
        c.close()
    for q, g, e in zip(SCRIPT, got, expected):
        assert g == e, q
        if isinstance(e, list):
            for grow, erow in zip(g, e):
                assert [type(v) for v in grow.values()] == [type(v) for v in erow.values()], q
    rows = got[2]
    assert isinstance(rows, list)
    assert rows[0] == {
        "id": 1,
        "i": -5,
        "d": decimal.Decimal("12.34"),
        "f": 0.5,
        "s": "one",
        "b": b"\x01\x02",
        "dt": datetime.date(2026, 12, 7),
        "ts": datetime.datetime(2026, 12, 7, 18, 30),
    }
    assert rows[1] == {"id": 2, "i": None, "d": None, "f": None, "s": None, "b": None, "dt": None, "ts": None}
    assert got[1] == 3 and got[4] == 2 and got[6] == 1
    assert got[7] == []
    assert got[9] == [{"answer": 42}]


def test_execute_raises_ndb_and_mysql_errors_and_keeps_a_transaction(tmp_path: Path) -> None:
    with rndb.LocalCluster.start(DataMemory="32M") as local:
        c = local.connect()
        c.execute("CREATE TABLE kv (id INT PRIMARY KEY, v INT) ENGINE=NDB")
        assert c.execute("INSERT INTO kv VALUES (1, 10)") == 1
        with pytest.raises(rndb.NdbError) as dup:
            c.execute("INSERT INTO kv VALUES (1, 11)")
        assert dup.value.code == 630
        with pytest.raises(rndb.NdbError) as missing:
            c.execute("SELECT * FROM nosuch")
        assert "nosuch" in str(missing.value)
        # A transaction's rows are its own until COMMIT, with values.
        assert c.execute("BEGIN") == 0
        assert c.execute("UPDATE kv SET v = 20 WHERE id = 1") == 1
        assert c.execute("SELECT v FROM kv WHERE id = 1") == [{"v": 20}]
        other = local.connect()
        assert other.execute("SELECT v FROM kv WHERE id = 1") == [{"v": 10}]
        assert c.execute("COMMIT") == 0
        assert other.execute("SELECT v FROM kv WHERE id = 1") == [{"v": 20}]
        # The rendered form is the same statement's.
        assert "| 20 |" in c.sql("SELECT v FROM kv WHERE id = 1")
        other.close()
        c.close()


def test_a_result_larger_than_one_answer_comes_back_and_the_connection_stays() -> None:
    with rndb.LocalCluster.start(DataMemory="128M") as local:
        c = local.connect()
        c.execute("CREATE TABLE wide (id INT PRIMARY KEY, v VARCHAR(1000)) ENGINE=NDB")
        assert c.insert_many("wide", ({"id": i, "v": "w" * 1000} for i in range(20_000))) == 20_000
        # ~20 MB of values: more than one answer (16 MiB) carries. The data node
        # refuses it (1153); a SELECT of one table is then read over the scans and put
        # together at the API node.
        rows = c.execute("SELECT * FROM wide ORDER BY id DESC")
        assert len(rows) == 20_000 and rows[0] == {"id": 19_999, "v": "w" * 1000}
        assert sum(len(r["v"]) for r in rows) == 20_000_000
        # A statement that is no SELECT of a table still gets 1153 with the reason.
        with pytest.raises(rndb.NdbError) as big:
            c.execute("SELECT REPEAT('w', 17000000) AS x")
        assert big.value.mysql_code == 1153, big.value
        assert "LIMIT" in str(big.value)
        # The same connection goes on; parts of the result come back.
        assert c.execute("SELECT COUNT(*) AS n FROM wide") == [{"n": 20_000}]
        part = c.execute("SELECT id, v FROM wide WHERE id < 5000 ORDER BY id")
        assert isinstance(part, list) and len(part) == 5000 and part[4999]["id"] == 4999
        assert sum(1 for _ in c.scan("wide")) == 20_000
        # A statement changing more rows than one transaction holds: 233, nothing
        # changed (NDB's MaxNoOfConcurrentOperations, 32768 by default).
        c.execute("CREATE TABLE many (id INT PRIMARY KEY, v INT) ENGINE=NDB")
        assert c.insert_many("many", ({"id": i, "v": 0} for i in range(40_000))) == 40_000
        with pytest.raises(rndb.NdbError) as ops:
            c.execute("UPDATE many SET v = 1")
        assert ops.value.code == 233, ops.value
        assert c.execute("SELECT COUNT(*) AS n FROM many WHERE v = 1") == [{"n": 0}]
        c.close()
