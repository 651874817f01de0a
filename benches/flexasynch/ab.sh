#!/usr/bin/env bash
# The same-run A/B of the C ABI against the Rust API: flexAsynch.cpp -ab, one process per
# thread count, in which every thread alternates slices through its NdbRecord path over
# the C ABI ("C ABI") with slices through exactly the Rust API batches of
# capi/benches/flexasynch_rust.rs ("Rust API", the benchmark-only functions of
# capi/src/bench_ref.rs, cargo feature bench-reference), on the same threads, table and
# keys, in the order A B B A A B... So both sides see the same machine, to within a
# slice (a read slice is one pass over each thread's keys, tens of milliseconds).
#
# Per phase and thread count: the median rate of each side over its PAIRS slices (with
# their min and max), the overhead of the medians (Rust median / C ABI median - 1, as
# run.sh), and the overhead of each pair of neighbouring slices (Rust slice / C ABI slice
# - 1): median, quartiles, min and max. Once from the elapsed time of the slices, once from
# the CPU time of the benchmark threads. RUNS=n repeats each process n times (the pairs of
# all runs pooled); RAW=file keeps the per-slice lines; LIBRNDB_DIR=dir runs the program
# on the librndb.so in dir instead (an older build, with the same header and feature);
# FROM="raw1 raw2..." only summarises earlier RAW files, pooled (the run index of each
# file's lines is kept apart).
#
#   benches/flexasynch/ab.sh [ops_per_thread] [pairs]      (defaults 200000 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
OPS=${1:-200000}
PAIRS=${2:-10}
RUNS=${RUNS:-1}
out=$(mktemp)
trap 'if [ -n "${RAW:-}" ]; then cp "$out" "$RAW"; fi; rm -f "$out"' EXIT
if [ -n "${FROM:-}" ]; then
  f=0
  for raw in $FROM; do
    sed "s/^ab \([0-9]*\) /ab $f.\1 /" "$raw" >>"$out"
    f=$((f + 1))
  done
else
  cargo build --release -q -p rndb-capi --features bench-reference
  g++ -std=c++17 -O2 -pthread -Icapi/include benches/flexasynch/flexAsynch.cpp \
    -Ltarget/release -lrndb -Wl,-rpath,"$PWD/target/release" -o target/release/flexAsynch
  for ((r = 0; r < RUNS; r++)); do
    for threads in 1 2; do
      LD_LIBRARY_PATH=${LIBRNDB_DIR:-} FLEXASYNCH_AB_PAIRS=$PAIRS target/release/flexAsynch \
        -t "$threads" -o "$OPS" -ab | sed "s/^ab /ab $r /" >>"$out"
    done
  done
fi
python3 - "$out" "$OPS" "$PAIRS" "$RUNS" "${FROM:-}" <<'PY'
import statistics, sys

def quartiles(v):
    v = sorted(v)
    if len(v) < 2:
        return v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[2]

slices = {}
for line in open(sys.argv[1]):
    _, run, phase, threads, pair, side, rate, cpu = line.split()
    key = (phase, int(threads))
    slices.setdefault(key, {}).setdefault((run, int(pair)), {})[side] = (float(rate), float(cpu))
if sys.argv[5]:
    print(f"flexAsynch -ab: the slices of {sys.argv[5]}, pooled")
else:
    print(f"flexAsynch -ab: TAB0 (2-word key + 24 Uint32), 32 parallel transactions per thread, "
          f"{sys.argv[2]} ops per thread and read slice, {sys.argv[3]} slice pairs per phase, "
          f"{sys.argv[4]} run(s)")
for col, title in ((0, "ops/s, elapsed time of each slice"),
                   (1, "ops per CPU-second of the benchmark threads")):
    print(f"\n{title}")
    print(f"{'phase':<8}{'thr':>4}{'C ABI median':>14}{'(min-max)':>22}{'Rust median':>13}"
          f"{'(min-max)':>22}{'ovh med':>9}   pairwise overhead: median [q1, q3] (min .. max), n")
    for threads in (1, 2):
        for phase in ("insert", "read", "update", "delete"):
            pairs = slices.get((phase, threads))
            if not pairs:
                continue
            both = [p for p in pairs.values() if "capi" in p and "rust" in p]
            c = [p["capi"][col] for p in both]
            r = [p["rust"][col] for p in both]
            if not both:
                continue
            mc, mr = statistics.median(c), statistics.median(r)
            pw = [(b / a - 1) * 100 for a, b in zip(c, r)]
            q1, q3 = quartiles(pw)
            print(f"{phase:<8}{threads:>4}{mc:>14,.0f}{f'({min(c):,.0f}-{max(c):,.0f})':>22}"
                  f"{mr:>13,.0f}{f'({min(r):,.0f}-{max(r):,.0f})':>22}{(mr / mc - 1) * 100:>8.1f}%"
                  f"   {statistics.median(pw):.1f}% [{q1:.1f}, {q3:.1f}] "
                  f"({min(pw):.1f} .. {max(pw):.1f}), {len(pw)}")
PY
