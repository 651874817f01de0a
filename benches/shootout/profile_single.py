#!/usr/bin/env python3
"""Where a single-row read over TCP goes: rndb cluster against redis, per operation.

For each system (started as the shootout starts it, 100k records × 100 B), N unbatched
primary-key reads of uniform keys from this process, and per read: the wall time, the
CPU time of this client process and of the server processes (user + system, every
thread, from /proc), and the context switches of the server processes' threads and of
the client's (voluntary + involuntary, /proc/PID/task/*/status). A thread handing a
request to another thread costs a wake-up and a switch; on 2 shared cores each is tens
of microseconds, so the count of switches per read tells how many hand-offs the path has.

    benches/shootout/.venv/bin/python benches/shootout/profile_single.py [--reads N]
        [--systems rndb-cluster-r2,rndb-cluster-r1,redis]

(Optional: `py-spy record --native -o prof.svg -- python profile_single.py` for the
client's frames.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
from adapters import ADAPTERS  # noqa: E402
from workload import value_bytes  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def switches(pid: int) -> int:
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
        except FileNotFoundError:  # the thread ended
            pass
    return n


def measure(system: str, reads: int, records: int) -> dict[str, float]:
    start = {"redis": lambda: servers.start_redis(512),
             "memcached": lambda: servers.start_memcached(512),
             "rndb-cluster-r2": lambda: servers.start_rndb_cluster(2, 512),
             "rndb-cluster-r1": lambda: servers.start_rndb_cluster(1, 512)}[system]
    srv = start()
    try:
        a = ADAPTERS[system](srv.params)
        a.setup()
        a.load(records, value_bytes(100, 0))
        import random

        keys = [random.randrange(records) for _ in range(reads)]
        for k in keys[:1000]:  # warm
            a.read(k)
        pids = srv.pids()
        me = os.getpid()
        c0, s0 = cpu_s(me), sum(cpu_s(p) for p in pids)
        x0, y0 = switches(me), sum(switches(p) for p in pids)
        t0 = time.perf_counter()
        for k in keys:
            a.read(k)
        wall = time.perf_counter() - t0
        c1, s1 = cpu_s(me), sum(cpu_s(p) for p in pids)
        x1, y1 = switches(me), sum(switches(p) for p in pids)
        a.close()
        return {"wall_us": wall / reads * 1e6, "client_cpu_us": (c1 - c0) / reads * 1e6,
                "server_cpu_us": (s1 - s0) / reads * 1e6, "client_switches": (x1 - x0) / reads,
                "server_switches": (y1 - y0) / reads}
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=20_000)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--systems", default="rndb-cluster-r2,rndb-cluster-r1,redis")
    args = ap.parse_args()
    print("| system | wall µs/read | client CPU µs/read | server CPU µs/read "
          "| client switches/read | server switches/read |")
    print("|---|---:|---:|---:|---:|---:|")
    try:
        for s in args.systems.split(","):
            m = measure(s, args.reads, args.records)
            print(f"| {s} | {m['wall_us']:.1f} | {m['client_cpu_us']:.1f} | "
                  f"{m['server_cpu_us']:.1f} | {m['client_switches']:.2f} | "
                  f"{m['server_switches']:.2f} |", flush=True)
    finally:
        servers.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
