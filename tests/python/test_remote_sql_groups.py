"""SQL through `rndb.connect(...).sql` against real `rndb_mgmd` and four `rndbd` processes
in two node groups: a SELECT of a table is run by the client over both groups, and a
statement that changes rows is captured on each group and applied in one transaction."""

from __future__ import annotations

import subprocess

import pytest

import rndb
from test_remote_ndbinfo import rows
from test_remote_scan import four_nodes  # noqa: F401  (the fixture)

Nodes = tuple[rndb.MgmClient, dict[int, subprocess.Popen[bytes]]]


def test_sql_over_two_node_groups(four_nodes: Nodes) -> None:  # noqa: F811
    c, _nodes = four_nodes
    c.sql("CREATE TABLE s (id INT AUTO_INCREMENT PRIMARY KEY, g INT NOT NULL, v VARCHAR(20)) ENGINE=NDB")
    for _ in range(3):
        out = c.sql("INSERT INTO s (g, v) VALUES " + ", ".join(f"({i % 3}, 'v{i}')" for i in range(10)))
        assert "10 rows affected" in out and "Records: 10  Duplicates: 0" in out, out
    assert "9 rows affected" in c.sql("UPDATE s SET v = CONCAT(v, '!') WHERE g = 1")
    assert "9 rows affected" in c.sql("DELETE FROM s WHERE g = 2")
    got = rows(c, "SELECT g, COUNT(*) AS n, COUNT(DISTINCT id) AS ids, MIN(v) AS lo FROM s GROUP BY g ORDER BY g")
    assert got == [
        {"g": "0", "n": "12", "ids": "12", "lo": "v0"},
        {"g": "1", "n": "9", "ids": "9", "lo": "v1!"},
    ], got
    # The rows are in both node groups: the key operations' scan sees the same ones.
    ids = sorted(int(r["id"]) for r in rows(c, "SELECT id FROM s ORDER BY id"))
    assert sorted(r["id"] for r in c.scan("s")) == ids
    assert len(set(ids)) == 21
    with pytest.raises(rndb.NdbError) as ei:
        c.sql(f"INSERT INTO s (id, g) VALUES ({ids[-1]}, 0)")
    assert ei.value.code == 630 and "Duplicate entry" in str(ei.value), ei.value
    # ORDER BY ... LIMIT over both groups: the keys are chosen over every group.
    assert "2 rows affected" in c.sql("DELETE FROM s ORDER BY id DESC LIMIT 2")
    assert rows(c, "SELECT COUNT(*) AS n, MAX(id) AS top FROM s") == [{"n": "19", "top": str(ids[-3])}]
    # INSERT ... SELECT: the SELECT reads both groups; new AUTO_INCREMENT keys.
    assert "19 rows affected" in c.sql("INSERT INTO s (g, v) SELECT g + 10, v FROM s")
    assert rows(c, "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM s WHERE g >= 10") == [
        {"n": "19", "ids": "19"}
    ]


def test_a_transaction_over_tcp(four_nodes: Nodes) -> None:  # noqa: F811
    c, _nodes = four_nodes
    c.sql("CREATE TABLE acct (id INT PRIMARY KEY, bal INT NOT NULL) ENGINE=NDB")
    c.sql("INSERT INTO acct VALUES (1, 100), (2, 100), (3, 100)")
    c.sql("BEGIN")
    assert "1 row affected" in c.sql("UPDATE acct SET bal = bal - 30 WHERE id = 1")
    assert "1 row affected" in c.sql("UPDATE acct SET bal = bal + 30 WHERE id = 2")
    # The transaction sees its own changes ...
    assert rows(c, "SELECT id, bal FROM acct ORDER BY id") == [
        {"id": "1", "bal": "70"},
        {"id": "2", "bal": "130"},
        {"id": "3", "bal": "100"},
    ]
    c.sql("COMMIT")
    assert rows(c, "SELECT SUM(bal) AS total, MIN(bal) AS lo FROM acct") == [{"total": "300", "lo": "70"}]
    c.sql("START TRANSACTION")
    c.sql("DELETE FROM acct")
    assert rows(c, "SELECT COUNT(*) AS n FROM acct") == [{"n": "0"}]
    c.sql("ROLLBACK")
    assert rows(c, "SELECT COUNT(*) AS n FROM acct") == [{"n": "3"}]
    # A row changed by another client before COMMIT: the transaction changes nothing.
    other = rndb.connect(c.connectstring)
    try:
        c.sql("BEGIN")
        c.sql("UPDATE acct SET bal = 0")
        other.sql("UPDATE acct SET bal = 99 WHERE id = 3")
        with pytest.raises(rndb.TemporaryError) as ei:
            c.sql("COMMIT")
        assert ei.value.code == 266, ei.value
    finally:
        other.close()
    assert rows(c, "SELECT id, bal FROM acct ORDER BY id") == [
        {"id": "1", "bal": "70"},
        {"id": "2", "bal": "130"},
        {"id": "3", "bal": "99"},
    ]


def test_a_unique_index_holds_over_both_node_groups(four_nodes: Nodes) -> None:  # noqa: F811
    c, _nodes = four_nodes
    c.sql("CREATE TABLE m (id INT PRIMARY KEY, email VARCHAR(40), UNIQUE KEY ue (email)) ENGINE=NDB")
    c.sql("INSERT INTO m VALUES (1, 'a@e')")
    # Twenty keys spread over both groups: every one is refused the taken value.
    for k in range(2, 22):
        with pytest.raises(rndb.NdbError) as ei:
            c.sql(f"INSERT INTO m VALUES ({k}, 'a@e')")
        assert ei.value.code == 893, ei.value
        c.sql(f"INSERT INTO m VALUES ({k}, 'e{k}@e')")
    with pytest.raises(rndb.NdbError) as ei:
        c.sql("UPDATE m SET email = 'a@e' WHERE id = 7")
    assert ei.value.code == 893, ei.value
    assert rows(c, "SELECT COUNT(*) AS n, COUNT(DISTINCT email) AS d FROM m") == [{"n": "21", "d": "21"}]
    # Freed, the value is taken by a row of whichever group.
    c.sql("DELETE FROM m WHERE id = 1")
    assert "1 row affected" in c.sql("UPDATE m SET email = 'a@e' WHERE id = 7")
