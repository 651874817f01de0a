"""The measurement loop of the shootout: one cell = one system, data set, workload, mode
(unbatched or batched) and client count, run for a fixed time, repeated.

* Unbatched: one operation per call, each call timed (``perf_counter_ns``).
* Batched: ``batch`` operations of the mix per call: the reads in one ``read_batch``, the
  updates (deduplicated, last value wins) in one ``update_batch``; the round trip of the
  whole batch is the latency sample (per call, not divided by the batch size), and the
  rate counts rows.
* One client runs in this process. More clients run as processes (spawned, each with its
  own connection and its own key stream: seed + client index), or as threads for
  rndb embedded (the cluster lives in this process; its module releases the GIL). They
  start together after a barrier; the rate is all clients' operations over the longest
  client's time.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from adapters import ADAPTERS, Adapter
from workload import WORKLOADS, KeyPool, value_bytes

_POOLS: dict[tuple[str, int, int], KeyPool] = {}


def key_pool(workload: str, records: int, seed: int) -> KeyPool:
    """The key pool of a workload, record count and seed, drawn once and shared by every
    system of the run (so each system reads the same keys)."""
    k = (workload, records, seed)
    if k not in _POOLS:
        if len(_POOLS) > 16:
            _POOLS.clear()
        _POOLS[k] = KeyPool(WORKLOADS[workload], records, seed, size=1 << 20)
    return _POOLS[k]


@dataclass
class LoopResult:
    ops: int = 0
    reads: int = 0
    updates: int = 0
    misses: int = 0
    seconds: float = 0.0
    lat_ns: list[int] = field(default_factory=list)


def run_loop(a: Adapter, pool: KeyPool, start: int, batch: int, seconds: float,
             value_size: int) -> LoopResult:
    """Runs the mix against `a` for `seconds`; batch == 1 means unbatched."""
    r = LoopResult()
    upd_value = value_bytes(value_size, 1)
    lat = r.lat_ns
    clock = time.perf_counter_ns
    t_start = clock()
    deadline = t_start + int(seconds * 1e9)
    i = start
    if batch == 1:
        keys, ups = pool.keys, pool.updates
        size = pool.size
        while True:
            j = i % size
            k = keys[j]
            t0 = clock()
            if ups[j]:
                a.update(k, upd_value)
                r.updates += 1
            elif a.read(k) is None:
                r.misses += 1
            t1 = clock()
            lat.append(t1 - t0)
            i += 1
            if t1 >= deadline:
                break
        r.ops = i - start
        r.reads = r.ops - r.updates
    else:
        while True:
            ks, us = pool.take(i, batch)
            if any(us):
                reads = [k for k, u in zip(ks, us) if not u]
                items = {k: upd_value for k, u in zip(ks, us) if u}
            else:
                reads, items = ks, {}
            t0 = clock()
            if reads:
                r.misses += len(reads) - a.read_batch(reads)
            if items:
                a.update_batch(items)
            t1 = clock()
            lat.append(t1 - t0)
            r.reads += len(reads)
            r.updates += len(items)
            i += batch
            if t1 >= deadline:
                break
        r.ops = r.reads + r.updates
    r.seconds = (clock() - t_start) / 1e9
    return r


def _child(system: str, params: dict[str, Any], workload: str, records: int, seed: int,
           batch: int, seconds: float, value_size: int, barrier: Any, out: Any) -> None:
    """An extra client process: its own connection and key stream."""
    import sys

    sys.path.insert(0, params.pop("_path"))
    a = ADAPTERS[system](params)
    pool = key_pool(workload, records, seed)
    barrier.wait(timeout=120)
    res = run_loop(a, pool, 0, batch, seconds, value_size)
    a.close()
    out.put(res.__dict__)


def run_cell(system: str, a: Adapter, params: dict[str, Any], workload: str, records: int,
             seed: int, batch: int, clients: int, seconds: float, value_size: int) -> LoopResult:
    """One repetition of a cell with `clients` clients; the results merged."""
    pool = key_pool(workload, records, seed)
    if clients == 1:
        return run_loop(a, pool, 0, batch, seconds, value_size)
    results: list[LoopResult] = []
    if a.worker == "thread":
        extra = [ADAPTERS[system](params) for _ in range(clients)]
        start = threading.Barrier(clients)
        lock = threading.Lock()

        def go(ad: Adapter, idx: int) -> None:
            p = key_pool(workload, records, seed + idx)
            start.wait()
            res = run_loop(ad, p, 0, batch, seconds, value_size)
            with lock:
                results.append(res)

        for idx in range(clients):
            key_pool(workload, records, seed + idx)
        ts = [threading.Thread(target=go, args=(extra[i], i)) for i in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for ad in extra:
            ad.close()
    else:
        import os

        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(clients)
        out = ctx.Queue()
        child_params = dict(params, _path=os.path.dirname(os.path.abspath(__file__)))
        ps = [ctx.Process(target=_child, args=(system, dict(child_params), workload, records,
                                                 seed + i, batch, seconds, value_size, barrier, out))
              for i in range(clients)]
        for p in ps:
            p.start()
        try:
            for _ in ps:
                results.append(LoopResult(**out.get(timeout=300)))
        finally:
            for p in ps:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
    m = LoopResult()
    for res in results:
        m.ops += res.ops
        m.reads += res.reads
        m.updates += res.updates
        m.misses += res.misses
        m.seconds = max(m.seconds, res.seconds)
        m.lat_ns.extend(res.lat_ns)
    return m
