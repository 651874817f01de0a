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
    with pytest.raises(rndb.NdbError) as ei:
        c.sql("DELETE FROM s ORDER BY id LIMIT 1")
    assert ei.value.code == 4003 and "LIMIT" in str(ei.value), ei.value
    assert rows(c, "SELECT COUNT(*) AS n FROM s") == [{"n": "21"}]
