#!/usr/bin/env python3
"""Where a single-key embedded read's time goes, per call, in one process: rndb's Python
module (`read_many` of one key, `Reader.get`), LMDB's `begin` + `get`, and rndb's C ABI
through ctypes step by step (a bare ctypes call, then startTransaction + close, +
readTuple, + execute: the four calls of the shootout's `rndb-embedded-capi` read) and
its batched read per key. Uniform random keys over 100,000 records of 100 B; best of 3
passes of 200,000 calls each.

    benches/shootout/.venv/bin/python benches/shootout/single_read.py

(after benches/shootout/run.sh, which builds the module and librndb.so; $RNDB_LIB or
$CARGO_TARGET_DIR choose the library as in capi.py).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import capi  # noqa: E402

N, CALLS = 100_000, 200_000


def best_us(f: Callable[[int], Any], keys: list[int]) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for k in keys:
            f(k)
        best = min(best, (time.perf_counter() - t) / len(keys))
    return best * 1e6


def main() -> None:
    import lmdb
    import rndb

    keys = [random.randrange(N) for _ in range(CALLS)]
    value = b"a" * 100
    out: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as d:
        c = rndb.Cluster.direct(data_dir=f"{d}/py", DataMemory="256M")
        ndb = c.ndb("test")
        ndb.create_table("kv", {"id": "BIGINT NOT NULL", "v": "VARBINARY(1024) NOT NULL"},
                         primary_key="id")
        ndb.insert_many("kv", [(k, value) for k in range(N)], columns=["id", "v"])
        r = ndb.reader("kv", columns=["v"])
        out.append(("py: read_many('kv', [k], columns=['v'])",
                    best_us(lambda k: ndb.read_many("kv", [k], columns=["v"]), keys)))
        out.append(("py: reader.get(k)", best_us(r.get, keys)))
        c.close()

        env = lmdb.open(f"{d}/lmdb", map_size=1 << 30, sync=False, metasync=False)
        with env.begin(write=True) as txn:
            for k in range(N):
                txn.put(k.to_bytes(8, "big"), value)

        def lget(k: int) -> Any:
            with env.begin() as txn:
                return txn.get(k.to_bytes(8, "big"))

        out.append(("lmdb: begin + get", best_us(lget, keys)))
        env.close()

        cc = capi.CapiCluster(f"{d}/capi", 256)
        a = capi.RndbCapi({"capi": cc})
        a.setup()
        a.load(N, value)
        lib, ndbh, rec, one = cc.lib, a.ndb, a.rec, a.one
        start, close = lib.rndb_ndb_start_transaction, lib.rndb_ndb_close_transaction
        rt, ex = lib.rndb_transaction_read_tuple, lib.rndb_transaction_execute

        def sc(k: int) -> None:
            close(ndbh, start(ndbh))

        def sr(k: int) -> None:
            tx = start(ndbh)
            rt(tx, rec, one.addr, rec, one.addr, capi.LM_COMMITTED_READ, None)
            close(ndbh, tx)

        def sre(k: int) -> None:
            one.q[0] = k
            tx = start(ndbh)
            rt(tx, rec, one.addr, rec, one.addr, capi.LM_COMMITTED_READ, None)
            ex(tx, capi.COMMIT, capi.ABORT_ON_ERROR, 0)
            close(ndbh, tx)

        out.append(("capi: a bare ctypes call (rndb_version)", best_us(lambda k: lib.rndb_version(), keys)))
        out.append(("capi: startTransaction + closeTransaction", best_us(sc, keys)))
        out.append(("capi: + readTuple (not executed)", best_us(sr, keys)))
        out.append(("capi: + execute(Commit): a whole read", best_us(sre, keys)))
        out.append(("capi: the adapter's read (checks, bytes)", best_us(a.read, keys)))
        batches = [keys[i:i + 1000] for i in range(0, len(keys), 1000)]
        best = min(_timed(lambda: [a.read_batch(b) for b in batches]) for _ in range(3))
        out.append(("capi: the adapter's batched read, per key", best / len(keys) * 1e6))
        a.close()
        cc.close()
    for name, us in out:
        print(f"{name:48} {us:6.2f} µs")


def _timed(f: Callable[[], Any]) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
