"""Tables without a primary key (NDB's hidden key `$PK`) on the node code: each new row
gets its hidden key from the data nodes' tuple-id service (`sys.SYSTAB_0`), whether it
comes from SQL, insert_many, a transaction or a second client, with one or two node
groups; the values stay unique across a data node stopped and across a system restart.
The direct engines give the same answers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import rndb


def script(ndb: rndb.Ndb, node_groups: int) -> list[object]:
    """The same calls on either engine; what each returned. With two node groups, the
    REPLACE of a row whose unique value another group holds is left out: it is refused
    (893) for any table, as docs/cluster.md says."""
    out: list[object] = []
    ndb.execute("CREATE TABLE h (a INT, b VARCHAR(10), UNIQUE KEY (a)) ENGINE=NDB")
    out.append(ndb.execute("INSERT INTO h VALUES (1, 'one'), (2, 'two'), (3, 'three')"))
    out.append(ndb.execute("INSERT INTO h SELECT a + 10, b FROM h"))
    out.append(ndb.insert_many("h", [{"a": 100 + i, "b": f"m{i}"} for i in range(300)], batch_size=64))
    out.append(ndb.insert_many("h", [(500 + i, "s") for i in range(5)], columns=["a", "b"]))
    with ndb.transaction() as tx:
        tx.insert("h", {"a": 1000, "b": "tx"})
        tx.insert("h", {"a": 1001, "b": "tx"})
    out.append(ndb.execute("UPDATE h SET b = 'upd' WHERE a IN (2, 12)"))
    out.append(ndb.execute("DELETE FROM h WHERE a >= 100 AND a < 200"))
    if node_groups == 1:
        out.append(ndb.execute("REPLACE INTO h VALUES (3, 'replaced')"))
    with pytest.raises(rndb.NdbError) as ei:
        ndb.execute("INSERT INTO h VALUES (1, 'dup')")
    out.append(ei.value.mysql_code)
    out.append(ndb.execute("INSERT IGNORE INTO h VALUES (1, 'dup'), (7, 'seven')"))
    ndb.execute("BEGIN")
    ndb.execute("INSERT INTO h VALUES (8, 'eight')")
    ndb.execute("UPDATE h SET b = 'eight!' WHERE a = 8")
    ndb.execute("COMMIT")
    out.append(ndb.execute("SELECT a, b FROM h WHERE a < 20 OR a >= 500 ORDER BY a"))
    out.append(ndb.execute("SELECT COUNT(*) AS n, COUNT(DISTINCT a) AS d, MAX(a) AS m FROM h"))
    out.append(ndb.columns("h"))
    return out


@pytest.mark.parametrize("data_nodes", [2, 4])
def test_rows_without_primary_key_on_the_nodes_as_on_the_direct_engines(
    tmp_path: Path, data_nodes: int
) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path / "nodes", data_nodes=data_nodes, DataMemory="32M") as c:
        nodes = script(c.ndb("test"), data_nodes // 2)
        # one row of SYSTAB_0, for h: its next value is past every one given
        systab = c.ndb("sys").execute("SELECT SYSKEY_0, NEXTID FROM SYSTAB_0")
    with rndb.Cluster.direct(data_dir=tmp_path / "direct", data_nodes=data_nodes, DataMemory="32M") as c:
        direct = script(c.ndb("test"), data_nodes // 2)
    assert nodes == direct
    assert nodes[:3] == [3, 3, 300]
    assert nodes[-2] == [{"n": 215, "d": 215, "m": 1001}]
    assert len(systab) == 1 and systab[0]["NEXTID"] > 215, systab


def test_hidden_keys_stay_unique_across_clients_a_stopped_node_and_a_restart(tmp_path: Path) -> None:
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")
        ndb.execute("CREATE TABLE h (a INT, who INT) ENGINE=NDB")
        errors: list[BaseException] = []

        def writer(client: int, conn: rndb.Ndb | rndb.MgmClient) -> None:
            try:
                for r in range(40):
                    if r % 2:
                        conn.execute(f"INSERT INTO h VALUES ({r}, {client}), ({r}, {client})")
                    else:
                        conn.insert_many("h", [{"a": r, "who": client}] * 2)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        # two connections, each with its own blocks of values, inserting at once
        with rndb.connect(cluster.connectstring) as other:
            threads = [
                threading.Thread(target=writer, args=(1, ndb)),
                threading.Thread(target=writer, args=(2, other)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        assert ndb.execute("SELECT who, COUNT(*) AS n FROM h GROUP BY who ORDER BY who") == [
            {"who": 1, "n": 80},
            {"who": 2, "n": 80},
        ]
        # SYSTAB_0's row is replicated: with a data node stopped the values go on
        assert cluster.mgm("2 STOP").endswith("Node 2 has shutdown.")
        ndb.insert_many("h", [{"a": 0, "who": 3}] * 5)
        assert cluster.mgm("2 START") == "Database node 2 is being started."
        ndb.execute("INSERT INTO h VALUES (0, 3)")
    # a system restart: a new connection takes values past every one given before
    with rndb.Cluster.embedded(data_dir=tmp_path, DataMemory="32M") as cluster:
        ndb = cluster.ndb("test")
        ndb.insert_many("h", [{"a": 0, "who": 4}] * 10)
        ndb.execute("INSERT INTO h VALUES (0, 4), (0, 4)")
        assert ndb.execute("SELECT who, COUNT(*) AS n FROM h GROUP BY who ORDER BY who") == [
            {"who": 1, "n": 80},
            {"who": 2, "n": 80},
            {"who": 3, "n": 6},
            {"who": 4, "n": 12},
        ]


def test_key_operations_that_need_the_hidden_key_say_so(ndb: rndb.Ndb) -> None:
    # An insert or write gets a new hidden key; an update or delete must name one.
    ndb.create_table("h", {"a": "INT"})
    tx = ndb.transaction()
    tx.write("h", {"a": 1})
    for define in (lambda: tx.update("h", {"a": 2}), lambda: tx.delete("h", {"a": 1})):
        with pytest.raises(rndb.NdbError) as ei:
            define()
        assert ei.value.code == 4264 and "$PK" in ei.value.message, ei.value
    tx.execute(rndb.Commit)
    assert ndb.execute("SELECT a FROM h") == [{"a": 1}]
