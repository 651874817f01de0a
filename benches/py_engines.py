#!/usr/bin/env python3
"""Python's embedded default (the node code in this process) against the direct engines.

``rndb.Cluster.embedded`` runs the management server and two data nodes of
``rndb_mgmd``/``rndbd`` in this process, reached through the client paths of a cluster
of processes (in-process network, TC prepare chain over both replicas, the scan
protocol); ``rndb.Cluster.direct`` runs the data nodes' engines on the caller's thread.
Same layout (two data nodes, NoOfReplicas=2), same table, same calls, in one run:

* ``insert_many`` of N rows in transactions of 1000;
* ``read_many`` of every key, 1000 keys per call, random order;
* ``reader(...).get(key)``: single-key reads, one call each;
* a transaction of one update per commit (``with ndb.transaction()``);
* a full ``scan``.

    .venv/bin/python benches/py_engines.py [--rows 200000] [--singles 5000] [--repeat 3]

Prints operations/s per engine and embedded/direct. The best of ``--repeat`` passes.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable

import rndb


def best_of(repeat: int, fn: Callable[[], int]) -> float:
    """Operations per second of the best of `repeat` runs of fn (which returns its count)."""
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def measure(start: Callable[..., rndb.Cluster], args: argparse.Namespace) -> dict[str, float]:
    n = args.rows
    keys = list(range(n))
    random.Random(7).shuffle(keys)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, start(data_dir=tmp, DataMemory="512M") as c:
        ndb = c.ndb("test")
        ndb.create_table(
            "t1",
            {"id": "BIGINT UNSIGNED NOT NULL", "a": "INT", "b": "VARCHAR(32)"},
            primary_key="id",
        )
        t0 = time.perf_counter()
        ndb.insert_many("t1", ({"id": i, "a": i, "b": f"v{i:015d}"} for i in range(n)), batch_size=1000)
        out["insert_many rows/s"] = n / (time.perf_counter() - t0)

        def read_all() -> int:
            for i in range(0, n, 1000):
                ndb.read_many("t1", keys[i : i + 1000])
            return n

        out["read_many rows/s"] = best_of(args.repeat, read_all)
        r = ndb.reader("t1", columns=["b"])
        singles = keys[: args.singles]

        def gets() -> int:
            for k in singles:
                r.get(k)
            return len(singles)

        out["reader.get calls/s"] = best_of(args.repeat, gets)

        def updates() -> int:
            for k in singles[: args.singles // 5]:
                with ndb.transaction() as tx:
                    tx.update("t1", {"id": k, "a": -1})
            return args.singles // 5

        out["1-update commits/s"] = best_of(args.repeat, updates)
        out["scan rows/s"] = best_of(args.repeat, lambda: sum(1 for _ in ndb.scan("t1", batch_size=992)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--singles", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"rows={args.rows:,} singles={args.singles:,} python={sys.version.split()[0]} rndb={rndb.__version__}")
    embedded = measure(rndb.Cluster.embedded, args)
    direct = measure(rndb.Cluster.direct, args)
    print(f"{'':24} {'embedded':>12} {'direct':>12} {'embedded/direct':>16}")
    for k in embedded:
        print(f"{k:24} {embedded[k]:12,.0f} {direct[k]:12,.0f} {embedded[k] / direct[k]:16.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
