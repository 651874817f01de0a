#!/usr/bin/env python3
"""The key-value shootout (issue 9): rndb against redis, memcached, Tarantool, MariaDB,
SQLite and LMDB in one run, one Python load generator, each system's standard client.

For each data set, each system in turn: its server is started on loopback (or its files
made), the records loaded, then every cell of the plan runs ``--reps`` times for
``--seconds`` each, then the server is stopped, so that each system has the machine's
cores to itself. Every system reads the same seeded keys. Results go to
benches/shootout/results-MODE.json, PNGs to benches/shootout/plots/ and a generated
subsection of benches/RESULTS.md ("### Quick mode" or "### Full mode" of the issue-9
section; the rest of the file is left alone).

    python benches/shootout/shootout.py --quick      # a few minutes
    python benches/shootout/shootout.py --full       # at most ~30 minutes
    python benches/shootout/shootout.py --quick --systems redis,rndb-cluster-r2 \
        --workloads pk --no-write                     # a subset, nothing written

benches/shootout/run.sh installs what this needs first (make shootout / shootout-quick).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
from adapters import ADAPTERS  # noqa: E402
from report import plot, render, update_results  # noqa: E402
from runner import run_cell  # noqa: E402
from workload import WORKLOADS, percentile, spread, value_bytes  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SYSTEMS = list(ADAPTERS)
ALL_WL = list(WORKLOADS)

#: Each data set: the workloads run with one client (unbatched and batched), and the
#: workloads also run with more clients (client counts in `multi`).
PLANS: dict[str, dict[str, Any]] = {
    "quick": {"seconds": 1.0, "datasets": [
        {"records": 100_000, "value_size": 100, "workloads": ALL_WL,
         "multi_workloads": ["pk"], "multi": [2]},
    ]},
    "full": {"seconds": 1.5, "datasets": [
        {"records": 1_000_000, "value_size": 100, "workloads": ALL_WL,
         "multi_workloads": ["pk"], "multi": [2, 4]},
        {"records": 1_000_000, "value_size": 1024, "workloads": ["pk", "ycsb-b"],
         "multi_workloads": [], "multi": []},
        # Loading 10M rows from Python takes minutes per system: only the figures' pairs
        # (rndb cluster and redis, rndb embedded — Python and C ABI — and LMDB) fit the 30
        # minutes.
        {"records": 10_000_000, "value_size": 100, "workloads": ["pk"],
         "multi_workloads": [], "multi": [],
         "systems": ["rndb-embedded", "rndb-embedded-capi", "rndb-cluster-r2", "redis", "lmdb"]},
    ]},
}

NEEDS = {"redis": ("redis-server", "redis"), "memcached": ("memcached", "pymemcache"),
         "tarantool": ("tarantool", "tarantool"), "mariadb-prepared": ("mariadbd", "mariadb"),
         "mariadb-text": ("mariadbd", "mariadb"), "lmdb": (None, "lmdb"),
         "sqlite": (None, "sqlite3"), "rndb-embedded": (None, "rndb"),
         "rndb-embedded-capi": (str(servers.RELEASE / "librndb.so"), "ctypes"),
         "rndb-cluster-r2": (str(servers.RELEASE / "rndbd"), "rndb"),
         "rndb-cluster-r1": (str(servers.RELEASE / "rndbd"), "rndb")}


def missing(system: str) -> str | None:
    """Why a system cannot run here, or None."""
    binary, module = NEEDS[system]
    if binary and not (shutil.which(binary) or Path(binary).exists()):
        return f"not installed: {binary} not found"
    try:
        __import__(module)
    except ImportError as e:
        return f"not installed: Python module {module} ({e})"
    return None


def mem_mb(records: int, value_size: int) -> int:
    """Memory to give a server for the data set: about twice the raw rows."""
    return max(256, int(records * (value_size + 96) * 2 / (1 << 20)) + 128)


def start(system: str, records: int, value_size: int) -> servers.Server:
    mb = mem_mb(records, value_size)
    if system == "redis":
        return servers.start_redis(mb)
    if system == "memcached":
        return servers.start_memcached(mb)
    if system == "tarantool":
        return servers.start_tarantool(mb)
    if system.startswith("mariadb"):
        return servers.start_mariadb(mb)
    if system.startswith("rndb-cluster-r"):
        return servers.start_rndb_cluster(int(system[-1]), mb)
    if system == "rndb-embedded":
        return servers.start_rndb_embedded(mb)
    if system == "rndb-embedded-capi":
        return servers.start_rndb_capi(mb)
    return servers.start_embedded_dir(system)


def sh(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"? ({e})"


def versions() -> dict[str, str]:
    v: dict[str, str] = {"python": platform.python_version()}
    for s, args in [("redis-server", ["redis-server", "--version"]),
                    ("memcached", ["memcached", "-V"]),
                    ("tarantool", ["tarantool", "--version"]),
                    ("mariadbd", ["mariadbd", "--version"])]:
        if shutil.which(args[0]):
            v[s] = sh(args).splitlines()[0] if sh(args) else "?"
    import sqlite3

    v["sqlite"] = sqlite3.sqlite_version
    try:
        import capi

        v["librndb"] = capi.load(servers.RELEASE / "librndb.so").rndb_version().decode()
        capi.fast_calls(servers.RELEASE / "librndb.so")
        v["librndb reads from Python"] = capi.call_path()
    except OSError as e:
        v["librndb"] = f"absent ({e})"
    for mod in ["rndb", "redis", "hiredis", "pymemcache", "tarantool", "mariadb", "lmdb",
                "cffi"]:
        try:
            v[f"py:{mod}"] = metadata.version(mod)
        except metadata.PackageNotFoundError:
            v[f"py:{mod}"] = "absent"
    return v


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) / (1 << 20)
    return (f"{os.cpu_count()} × {cpu}, {mem:.0f} GiB, Linux {platform.release()}, "
            f"load average at start {os.getloadavg()[0]:.1f}")


def run_system(system: str, ds: dict[str, Any], args: argparse.Namespace, run: dict[str, Any]) -> None:
    recs, vs = ds["records"], ds["value_size"]
    srv = start(system, recs, vs)
    a = None
    try:
        a = ADAPTERS[system](srv.params)
        a.setup()
        t0 = time.perf_counter()
        a.load(recs, value_bytes(vs, 0))
        a.warm()
        load_s = time.perf_counter() - t0
        run["loads"].append({"system": system, "records": recs, "value_size": vs,
                             "rows_s": recs / load_s})
        print(f"  {system}: loaded {recs:,} in {load_s:.1f} s", file=sys.stderr, flush=True)
        cells = [(w, m, 1) for w in ds["workloads"] for m in ("unbatched", "batched")]
        cells += [(w, m, c) for c in ds["multi"] for w in ds["multi_workloads"]
                  for m in ("unbatched", "batched")]
        for w, mode, clients in cells:
            if w not in args.workloads:
                continue
            batch = 1 if mode == "unbatched" else args.batch
            reps, lat, misses = [], [], 0
            for rep in range(args.reps):
                seed = 1 + 1000 * rep + ALL_WL.index(w) * 10
                r = run_cell(system, a, srv.params, w, recs, seed, batch, clients, run["seconds"], vs)
                reps.append(r.ops / r.seconds)
                lat.extend(r.lat_ns)
                misses += r.misses
            cell = {"system": system, "records": recs, "value_size": vs, "workload": w,
                    "mode": mode, "clients": clients, "batch": batch, "reps": reps,
                    "ops_s": sorted(reps)[len(reps) // 2], "spread": spread(reps),
                    "p50_us": percentile(lat, 50) / 1e3, "p99_us": percentile(lat, 99) / 1e3,
                    "misses": misses}
            run["cells"].append(cell)
            print(f"    {w:7} {mode:9} c={clients}: {cell['ops_s']:>12,.0f} ops/s "
                  f"±{cell['spread'] * 100:.0f}%  p50 {cell['p50_us']:.1f} µs  "
                  f"p99 {cell['p99_us']:.1f} µs" + (f"  MISSES {misses}" if misses else ""),
                  file=sys.stderr, flush=True)
    finally:
        if a is not None:
            a.close()
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="100k records, a few minutes (default)")
    g.add_argument("--full", action="store_true", help="1M and 10M records, ≤ ~30 minutes")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--workloads", default=",".join(ALL_WL))
    ap.add_argument("--seconds", type=float, help="per repetition (plan's default)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--no-write", action="store_true", help="print only; write no results")
    args = ap.parse_args()
    mode = "full" if args.full else "quick"
    plan = PLANS[mode]
    args.workloads = args.workloads.split(",")
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in ADAPTERS:
            ap.error(f"unknown system {s}; known: {', '.join(SYSTEMS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    commit = sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    run: dict[str, Any] = {
        "mode": mode, "command": "make shootout" if mode == "full" else "make shootout-quick",
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": commit, "machine": machine(), "versions": versions(),
        "seconds": args.seconds or plan["seconds"], "reps": args.reps, "batch": args.batch,
        "systems": systems, "workloads": [w for w in ALL_WL if w in args.workloads],
        "datasets": plan["datasets"], "cells": [], "loads": [], "status": []}
    run["plan_text"] = (
        f"{args.reps} repetitions of {run['seconds']} s per cell; batched calls carry "
        f"{args.batch} operations; data sets: "
        + "; ".join(f"{d['records']:,} × {d['value_size']} B ({', '.join(d['workloads'])}"
                    + (f"; also {'/'.join(map(str, d['multi']))} clients for "
                       f"{', '.join(d['multi_workloads'])}" if d["multi"] else "")
                    + (f"; only {', '.join(d['systems'])}" if "systems" in d else "") + ")"
                    for d in plan["datasets"]) + ".")
    print(f"shootout {mode}: {run['machine']}", file=sys.stderr)
    try:
        for ds in plan["datasets"]:
            print(f"data set {ds['records']:,} × {ds['value_size']} B", file=sys.stderr)
            for system in systems:
                if system not in ds.get("systems", systems):
                    run["status"].append({"system": system,
                                          "dataset": f"{ds['records']:,} × {ds['value_size']} B",
                                          "status": "not in this data set's plan (load time)"})
                    continue
                why = missing(system)
                if why is None:
                    try:
                        run_system(system, ds, args, run)
                        continue
                    except Exception as e:  # one system's failure is reported, the run goes on
                        traceback.print_exc()
                        why = f"failed: {type(e).__name__}: {str(e)[:200]}"
                print(f"  {system}: {why}", file=sys.stderr)
                run["status"].append({"system": system,
                                      "dataset": f"{ds['records']:,} × {ds['value_size']} B",
                                      "status": why})
    finally:
        servers.stop_all()
    run["finished"] = datetime.datetime.now(datetime.UTC).strftime("%H:%M")
    if args.no_write:
        return 0
    run["plots"] = plot(run, HERE / "plots", mode)
    (HERE / f"results-{mode}.json").write_text(json.dumps(run, indent=1) + "\n")
    res = ROOT / "benches" / "RESULTS.md"
    res.write_text(update_results(res.read_text(), f"### {mode.capitalize()} mode (generated)",
                                  render(run)))
    print(f"wrote {res}, {HERE / f'results-{mode}.json'} and plots {run['plots']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
