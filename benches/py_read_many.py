#!/usr/bin/env python3
"""Primary-key lookups from Python: rndb's read_many against SQLite in memory.

The issue's table: BIGINT UNSIGNED key, INT, VARCHAR(32) holding 16 characters; 1M rows
loaded with insert_many. Then every key is looked up once, in random order:

* rndb ``ndb.read_many(table, keys)`` in batches of 1000 keys (a dict per row);
* SQLite, ``SELECT ... WHERE id=?`` per key through one cursor (the statement cache
  keeps it prepared), rows as tuples (SQLite's default) and as dicts (what rndb returns);
* SQLite, ``SELECT ... WHERE id IN (?, ..., ?)`` with 1000 keys per statement.

Run against a release build (``pip install ./py`` builds one):

    .venv/bin/python benches/py_read_many.py [--rows N] [--batch 1000] [--repeat 3]

Prints rows/s for each and the ratios. The best of ``--repeat`` passes is reported.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable

import rndb


def best_of(repeat: int, fn: Callable[[], int]) -> tuple[float, int]:
    """Runs fn `repeat` times; returns (best seconds, rows of the last run)."""
    best = float("inf")
    n = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t0)
    return best, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-memory", default="1G")
    args = ap.parse_args()
    n_rows, batch = args.rows, args.batch

    rows = [{"id": i, "a": i % 100_000, "b": f"v{i:015d}"} for i in range(n_rows)]
    keys = list(range(n_rows))
    random.Random(42).shuffle(keys)
    batches = [keys[i : i + batch] for i in range(0, n_rows, batch)]
    print(f"rows={n_rows:,} batch={batch} python={sys.version.split()[0]} rndb={rndb.__version__}")

    # ---- rndb -------------------------------------------------------------------
    with tempfile.TemporaryDirectory() as tmp, rndb.Cluster.direct(
        data_dir=tmp, DataMemory=args.data_memory
    ) as cluster:
        ndb = cluster.ndb("test")
        ndb.create_table(
            "t1",
            {"id": "BIGINT UNSIGNED NOT NULL", "a": "INT", "b": "VARCHAR(32)"},
            primary_key="id",
        )
        t0 = time.perf_counter()
        inserted = ndb.insert_many("t1", rows)
        t_ins = time.perf_counter() - t0
        assert inserted == n_rows
        print(f"rndb insert_many:                {n_rows / t_ins:>12,.0f} rows/s  ({t_ins:.2f} s)")

        def rndb_read() -> int:
            found = 0
            for b in batches:
                for r in ndb.read_many("t1", b):
                    found += r is not None
            return found

        t_rndb, found = best_of(args.repeat, rndb_read)
        assert found == n_rows, found
        sample = ndb.read_many("t1", [keys[0]])[0]
        assert sample == rows[keys[0]], sample
        rndb_rate = n_rows / t_rndb
        print(f"rndb read_many ({batch}/call, dicts): {rndb_rate:>12,.0f} rows/s  ({t_rndb:.2f} s)")

    # ---- SQLite -----------------------------------------------------------------
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t1 (id INTEGER PRIMARY KEY, a INT, b VARCHAR(32))")
    t0 = time.perf_counter()
    db.executemany("INSERT INTO t1 VALUES (:id, :a, :b)", rows)
    db.commit()
    t_ins = time.perf_counter() - t0
    print(f"sqlite executemany insert:       {n_rows / t_ins:>12,.0f} rows/s  ({t_ins:.2f} s)")

    def sqlite_point() -> int:
        cur = db.cursor()
        found = 0
        q = "SELECT id, a, b FROM t1 WHERE id=?"
        for k in keys:
            found += cur.execute(q, (k,)).fetchone() is not None
        return found

    def sqlite_point_dict() -> int:
        cur = db.cursor()
        found = 0
        q = "SELECT id, a, b FROM t1 WHERE id=?"
        for k in keys:
            r = cur.execute(q, (k,)).fetchone()
            if r is not None:
                _ = {"id": r[0], "a": r[1], "b": r[2]}
                found += 1
        return found

    in_q = f"SELECT id, a, b FROM t1 WHERE id IN ({','.join('?' * batch)})"

    def sqlite_in() -> int:
        cur = db.cursor()
        found = 0
        for b in batches:
            q = in_q if len(b) == batch else f"SELECT id, a, b FROM t1 WHERE id IN ({','.join('?' * len(b))})"
            found += len(cur.execute(q, b).fetchall())
        return found

    t_pt, f1 = best_of(args.repeat, sqlite_point)
    t_ptd, f2 = best_of(args.repeat, sqlite_point_dict)
    t_in, f3 = best_of(args.repeat, sqlite_in)
    assert f1 == f2 == f3 == n_rows, (f1, f2, f3)
    pt, ptd, inn = n_rows / t_pt, n_rows / t_ptd, n_rows / t_in
    print(f"sqlite WHERE id=? per key (tuples): {pt:>12,.0f} rows/s  ({t_pt:.2f} s)")
    print(f"sqlite WHERE id=? per key (dicts):  {ptd:>12,.0f} rows/s  ({t_ptd:.2f} s)")
    print(f"sqlite WHERE id IN ({batch}) (tuples): {inn:>12,.0f} rows/s  ({t_in:.2f} s)")
    print(f"ratio rndb / sqlite per-key (tuples): {rndb_rate / pt:.2f}x")
    print(f"ratio rndb / sqlite per-key (dicts):  {rndb_rate / ptd:.2f}x")
    print(f"ratio rndb / sqlite IN ({batch}):       {rndb_rate / inn:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
