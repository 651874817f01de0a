#!/usr/bin/env python3
"""The cost of hidden keys over the node code: inserts into a table without a primary key
(each row's `$PK` from the data nodes' tuple-id service, `sys.SYSTAB_0`) against the same
inserts into a table whose key the caller gives, on ``rndb.Cluster.embedded`` in one run.

* ``insert_many`` of N rows in transactions of 1000 (the API node takes blocks of
  hidden-key values, 1024 doubling to 2^20, one SYSTAB_0 transaction per block);
* SQL ``INSERT ... VALUES`` of 100 rows per statement (the capture's stand-in keys are
  replaced by values of the service before the apply).

    .venv/bin/python benches/py_hidden_key.py [--rows 100000] [--repeat 3]

Prints rows/s for each table and hidden/given. The best of ``--repeat`` passes, each on
fresh tables.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import rndb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, rndb.Cluster.embedded(data_dir=tmp, DataMemory="512M") as c:
        ndb = c.ndb("test")
        for rep in range(args.repeat):
            ndb.execute(f"CREATE TABLE h{rep} (a INT NOT NULL, b INT NOT NULL) ENGINE=NDB")
            ndb.execute(f"CREATE TABLE p{rep} (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL) ENGINE=NDB")
            ndb.execute(f"CREATE TABLE hs{rep} (a INT NOT NULL, b INT NOT NULL) ENGINE=NDB")
            ndb.execute(f"CREATE TABLE ps{rep} (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL) ENGINE=NDB")
            runs = {
                "insert_many, hidden key": lambda: ndb.insert_many(
                    f"h{rep}", ({"a": i, "b": i} for i in range(n)), batch_size=1000
                ),
                "insert_many, key given": lambda: ndb.insert_many(
                    f"p{rep}", ({"id": i, "a": i, "b": i} for i in range(n)), batch_size=1000
                ),
                "SQL INSERT x100, hidden key": lambda: sql_inserts(ndb, f"hs{rep}", n // 10, False),
                "SQL INSERT x100, key given": lambda: sql_inserts(ndb, f"ps{rep}", n // 10, True),
            }
            for name, fn in runs.items():
                t0 = time.perf_counter()
                rows = fn()
                rate = rows / (time.perf_counter() - t0)
                best[name] = max(best.get(name, 0.0), rate)
    for name, rate in best.items():
        print(f"{name:32} {rate:12,.0f} rows/s")
    print(f"insert_many hidden/given: {best['insert_many, hidden key'] / best['insert_many, key given']:.2f}")
    print(
        "SQL INSERT hidden/given: "
        f"{best['SQL INSERT x100, hidden key'] / best['SQL INSERT x100, key given']:.2f}"
    )


def sql_inserts(ndb: rndb.Ndb, table: str, rows: int, with_key: bool) -> int:
    done = 0
    while done < rows:
        if with_key:
            values = ",".join(f"({i}, {i}, {i})" for i in range(done, done + 100))
        else:
            values = ",".join(f"({i}, {i})" for i in range(done, done + 100))
        ndb.execute(f"INSERT INTO {table} VALUES {values}")
        done += 100
    return done


if __name__ == "__main__":
    main()
