"""The key-value shootout's pure parts (benches/shootout): the seeded Zipf keys, the
percentiles and spread, the measurement loop against an in-memory adapter, the
rewriting of benches/RESULTS.md's issue-9 section, the C ABI adapter's row buffers; and
that adapter against a built librndb.so (an embedded cluster in this process, a few
hundred keys; skipped when no librndb.so is built). No server is started."""

from __future__ import annotations

import ctypes
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benches" / "shootout"))

import report  # noqa: E402
import runner  # noqa: E402
from adapters import Adapter  # noqa: E402
from workload import WORKLOADS, KeyPool, percentile, spread, zeta, zipf_ranks  # noqa: E402


def test_zipf_shape_and_seed() -> None:
    n, count = 1000, 400_000
    a = zipf_ranks(n, count, np.random.default_rng(7))
    b = zipf_ranks(n, count, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert a.min() >= 0 and a.max() < n
    freq = np.bincount(a, minlength=n) / count
    # P(rank 0) = 1 / zeta(n); rank 0 over rank 1 is 2^theta.
    assert freq[0] == pytest.approx(1 / zeta(n, 0.99), rel=0.03)
    assert freq[0] / freq[1] == pytest.approx(2**0.99, rel=0.06)
    # The tail: the hottest 10% of items take most of the draws, far from uniform.
    assert 0.6 < freq[: n // 10].sum() < 0.8
    assert not np.array_equal(a, zipf_ranks(n, count, np.random.default_rng(8)))


def test_key_pool_mix_and_spread_of_hot_keys() -> None:
    a = KeyPool(WORKLOADS["ycsb-a"], 10_000, seed=3, size=100_000)
    assert sum(a.updates) / a.size == pytest.approx(0.5, abs=0.01)
    hot = np.bincount(np.array(a.keys)).argmax()
    assert hot != 0  # the permutation moved rank 0 away from key 0
    c = KeyPool(WORKLOADS["ycsb-c"], 10_000, seed=3, size=100_000)
    assert not any(c.updates)
    pk = KeyPool(WORKLOADS["pk"], 10_000, seed=3, size=100_000)
    assert np.bincount(np.array(pk.keys)).max() < 40  # uniform: ~10 each
    keys, ups = pk.take(99_990, 20)  # wraps
    assert keys == pk.keys[99_990:] + pk.keys[:10] and len(ups) == 20


def test_percentile_and_spread() -> None:
    xs = list(range(1, 101))
    assert percentile(xs, 50) == 50
    assert percentile(xs, 99) == 99
    assert percentile(xs, 100) == 100
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))
    assert spread([10.0, 11.0, 12.0]) == pytest.approx(2 / 11)
    assert spread([3.0, 3.0, 3.0]) == 0


class DictAdapter(Adapter):
    """An in-memory system for the loop."""

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.d: dict[int, bytes] = {}
        self.batches = 0

    def load(self, n: int, value: bytes) -> None:
        self.d = dict.fromkeys(range(n), value)

    def read(self, key: int) -> bytes | None:
        return self.d.get(key)

    def read_batch(self, keys: list[int]) -> int:
        self.batches += 1
        return sum(k in self.d for k in keys)

    def update(self, key: int, value: bytes) -> None:
        self.d[key] = value

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.d.update(items)


@pytest.mark.parametrize("batch", [1, 100])
def test_run_loop_counts(batch: int) -> None:
    a = DictAdapter({})
    a.load(5000, b"x" * 10)
    pool = KeyPool(WORKLOADS["ycsb-b"], 5000, seed=1, size=50_000)
    r = runner.run_loop(a, pool, 0, batch, 0.05, 10)
    assert r.ops > 0 and r.misses == 0
    assert r.reads + r.updates == r.ops
    assert 0 < r.updates < r.reads
    assert len(r.lat_ns) == (r.ops if batch == 1 else a.batches)
    assert any(v == b"b" * 10 for v in a.d.values())  # updates wrote stamp 1
    a.d.pop(pool.keys[0])
    assert runner.run_loop(a, pool, 0, batch, 0.01, 10).misses >= 1


OTHER = "# Benchmark results\n\nintro\n\n## Issue 8 — other\n\nkeep me\n"


def test_update_results_appends_then_replaces() -> None:
    t1 = report.update_results(OTHER, "### Quick mode (generated)", "first\n")
    assert t1.startswith(OTHER.rstrip("\n"))
    assert report.SECTION in t1 and "first" in t1
    t2 = t1 + "\n### Notes\n\nhand-written\n"
    t3 = report.update_results(t2, "### Quick mode (generated)", "second\n")
    assert "first" not in t3 and "second" in t3 and "hand-written" in t3 and "keep me" in t3
    assert t3.index("second") < t3.index("### Notes")
    t4 = report.update_results(t3, "### Full mode (generated)", "full one\n")
    assert "second" in t4 and "full one" in t4 and t4.count(report.SECTION) == 1
    assert report.update_results(t4, "### Full mode (generated)", "full one\n") == t4
    # A later issue's section after ours stays where it is.
    t5 = t4 + "\n## Issue 10 — later\n\nlater text\n"
    t6 = report.update_results(t5, "### Quick mode (generated)", "third\n")
    assert t6.endswith("## Issue 10 — later\n\nlater text\n") and "third" in t6


def cell(system: str, ops: float, mode: str = "batched") -> dict[str, Any]:
    return {"system": system, "records": 100, "value_size": 100, "workload": "pk", "mode": mode,
            "clients": 1, "batch": 10, "reps": [ops] * 3, "ops_s": ops, "spread": 0.0,
            "p50_us": 10.0, "p99_us": 20.0, "misses": 0}


def test_render_ratios_and_targets() -> None:
    run = {"command": "make shootout-quick", "started": "s", "finished": "f", "commit": "c",
           "machine": "m", "versions": {"redis": "7"}, "plan_text": "p", "batch": 10,
           "status": [{"system": "tarantool", "dataset": "100 × 100 B", "status": "not installed"}],
           "workloads": ["pk"], "systems": ["rndb-cluster-r2", "redis", "rndb-embedded", "lmdb"],
           "datasets": [{"records": 100, "value_size": 100}], "loads": [],
           "cells": [cell("rndb-cluster-r2", 2000.0), cell("redis", 1000.0),
                     cell("rndb-cluster-r2", 100.0, "unbatched"), cell("redis", 200.0, "unbatched"),
                     cell("rndb-embedded", 500.0), cell("lmdb", 1000.0)]}
    md = report.render(run)
    assert "| redis | 200 ±0% · 0.50 | 1k ±0% · 2.00 |" in md  # unbatched, batched
    assert "| lmdb | — | 1k ±0% · 0.50 |" in md
    assert "rndb cluster > redis | 100 × 100 B | 2k vs 1k = 2.00× | yes |" in md
    assert "redis ÷ rndb cluster ≤ 1.5 | 100 × 100 B | 200 vs 100 = 2.00× | **no** |" in md
    assert "rndb embedded > lmdb | 100 × 100 B | 500 vs 1k = 0.50× | **no** |" in md
    assert "| tarantool | 100 × 100 B | not installed |" in md


def test_render_capi_rows_and_targets() -> None:
    run = {"command": "make shootout-quick", "started": "s", "finished": "f", "commit": "c",
           "machine": "m", "versions": {}, "plan_text": "p", "batch": 10, "status": [],
           "workloads": ["pk"], "systems": ["rndb-embedded", "rndb-embedded-capi", "lmdb"],
           "datasets": [{"records": 100, "value_size": 100}], "loads": [],
           "cells": [cell("rndb-embedded", 3000.0), cell("rndb-embedded-capi", 2000.0),
                     cell("lmdb", 1000.0), cell("rndb-embedded-capi", 500.0, "unbatched"),
                     cell("lmdb", 1000.0, "unbatched")]}
    md = report.render(run)
    assert "| rndb-embedded-capi | 500 ±0% | 2k ±0% |" in md  # rndb's own row: no ratio
    assert "| lmdb | 1k ±0% | 1k ±0% · 3.00 |" in md  # against the Python module's
    assert "batched PK reads: rndb embedded (C ABI) > lmdb | 100 × 100 B | 2k vs 1k = 2.00× | yes |" in md
    assert "unbatched PK reads: rndb embedded (C ABI) > lmdb | 100 × 100 B | 500 vs 1k = 0.50× | **no** |" in md


def test_capi_result_rows_and_errors() -> None:
    import capi

    rows = capi.Rows(3)
    assert len(rows.b) == 3 * capi.ROW and capi.ROW % 8 == 0 and rows.addr == rows.q.buffer_info()[0]
    rows.prepare([7, -1, 2**40])
    assert rows.missing(3) == 3 and rows.value(1) is None  # every row "not written"
    assert list(rows.q[:: capi.ROW_Q]) == [7, -1, 2**40]
    rows.set_value(1, b"abc")
    assert rows.missing(3) == 2 and rows.value(1) == b"abc"
    assert bytes(rows.b[capi.ROW: capi.ROW + 13]) == (-1).to_bytes(8, "little", signed=True) + b"\x03\x00abc"
    rows.set_value(2, b"")
    assert rows.value(2) == b"" and rows.missing(3) == 1
    with pytest.raises(capi.CapiError) as ei:
        rows.set_value(0, b"x" * 1025)
    assert ei.value.code == 4209
    e = capi.Error(2, 2, 626, 0, b"Tuple did not exist", None)
    assert capi.error_of(ctypes.pointer(e)) == (626, "Tuple did not exist", 2)
    assert capi.error_of(None) == (-1, "no error object", 2)
    err = capi.CapiError("read", *capi.error_of(ctypes.pointer(e)))
    assert err.code == 626 and str(err) == "read: error 626: Tuple did not exist"
    assert not err.temporary
    assert capi.CapiError("insert", 410, "REDO log files overloaded", 1).temporary
    assert ctypes.sizeof(capi.RecordSpec) == 8 + 4 * 4


def librndb() -> Path | None:
    """A built librndb.so: the debug build `make test` makes, else a release build."""
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    for kind in ("debug", "release"):
        if (target / kind / "librndb.so").exists():
            return target / kind / "librndb.so"
    return None


@pytest.mark.parametrize("calls", ["cffi", "ctypes"])
def test_capi_adapter_against_librndb(tmp_path: Path, calls: str) -> None:
    lib = librndb()
    if lib is None:
        pytest.skip("no librndb.so under target/debug or target/release: "
                    "run `cargo build -p rndb-capi` (make test-rust does)")
    import capi

    if calls == "cffi":
        pytest.importorskip("cffi")
    cluster = capi.CapiCluster(str(tmp_path / "data"), 64, lib)
    try:
        a = capi.RndbCapi({"capi": cluster, "calls": calls})
        # The reads take the path asked for: capi_calls.c compiled through cffi (gcc is
        # there), or ctypes.
        assert (a.fast is not None) == (calls == "cffi"), capi.call_path()
        a.setup()
        a.load(300, b"v" * 100)
        assert a.read(7) == b"v" * 100 and a.read(300) is None and a.read(-1) is None
        assert a.read_batch(list(range(295, 305))) == 5
        assert a.read_batch([]) == 0
        a.update(3, b"")
        a.update_batch({4: b"x" * 1024, 5: b"y"})
        assert (a.read(3), a.read(4), a.read(5)) == (b"", b"x" * 1024, b"y")
        with pytest.raises(capi.CapiError) as ei:
            a.update(1000, b"z")  # no such row
        assert ei.value.code == 626
        with pytest.raises(capi.CapiError) as ei:
            a.update(1, b"z" * 1025)
        assert ei.value.code == 4209
        with pytest.raises(capi.CapiError) as ei:
            a.setup()  # the table exists
        assert ei.value.code != 0 and ei.value.message
        # A batch larger than the adapter's row buffer (it grows), with misses.
        assert a.read_batch(list(range(-600, 1200))) == 300
        # A second client (a thread's) on the same connection finds the table.
        b = capi.RndbCapi({"capi": cluster, "calls": calls})
        assert b.read_batch(list(range(0, 300, 7))) == len(range(0, 300, 7))
        lp = runner.key_pool("ycsb-b", 300, 5)
        r = runner.run_loop(b, lp, 0, 50, 0.05, 100)
        assert r.ops > 0 and r.misses == 0 and r.updates > 0
        b.close()
        a.close()
    finally:
        cluster.close()
    with pytest.raises(capi.CapiError) as ei:
        capi.CapiCluster(str(tmp_path / "data2"), -1, lib)  # DataMemory=-1M
    assert "rndb_cluster_connection_connect" in str(ei.value) and ei.value.code != 0
