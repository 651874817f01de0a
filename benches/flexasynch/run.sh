#!/usr/bin/env bash
# flexAsynch through the C ABI (flexAsynch.cpp over NdbApi.hpp + librndb; operations
# defined with getValue/setValue per attribute, and with NdbRecord) and the same batches
# through the Rust API (capi/benches/flexasynch_rust.rs), in one run, with 1 and 2
# threads: each configuration alternates the three REPS times and reports the median
# ops/s per phase and the C ABI's overhead (Rust rate / C++ rate - 1): once from the
# elapsed time of the phases, once from the CPU time of the benchmark threads (each
# program times its threads' own shares; on a loaded machine the elapsed time mostly
# measures the scheduler). A third table takes each program's best run instead of the
# median (the run least disturbed by the rest of the machine). RAW=file keeps the lines
# of every run. The work each program does per operation, counted in instructions and
# so free of this noise: benches/flexasynch/instructions.sh.
#
# The read phases go over the keys READ_PASSES times (default 10), so that they last long
# enough to time.
#
#   benches/flexasynch/run.sh [ops_per_thread] [reps]      (defaults 200000 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
OPS=${1:-200000}
REPS=${2:-3}
export FLEXASYNCH_READ_PASSES=${READ_PASSES:-10}
# The same features as ab.sh: the library is then built once for all three scripts (the
# feature only adds the benchmark-only functions of capi/src/bench_ref.rs).
cargo build --release -q -p rndb-capi --features bench-reference
cargo bench -q -p rndb-capi --features bench-reference --bench flexasynch_rust --no-run 2>/dev/null
g++ -std=c++17 -O2 -pthread -Icapi/include benches/flexasynch/flexAsynch.cpp \
  -Ltarget/release -lrndb -Wl,-rpath,"$PWD/target/release" -o target/release/flexAsynch
out=$(mktemp)
trap 'if [ -n "${RAW:-}" ]; then cp "$out" "$RAW"; fi; rm -f "$out"' EXIT
for threads in 1 2; do
  for ((r = 0; r < REPS; r++)); do
    target/release/flexAsynch -t "$threads" -o "$OPS" >>"$out"
    target/release/flexAsynch -t "$threads" -o "$OPS" -ndbrecord >>"$out"
    cargo bench -q -p rndb-capi --features bench-reference --bench flexasynch_rust -- "$threads" "$OPS" 2>/dev/null | grep '^rust' >>"$out"
  done
done
python3 - "$out" "$OPS" "$REPS" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    who, phase, threads, rate = line.split()
    rates.setdefault((who, phase, int(threads)), []).append(float(rate))
med = {k: statistics.median(v) for k, v in rates.items()}
best = {(w + "_best", p, t): max(v) for (w, p, t), v in rates.items() if not w.endswith("_cpu")}
med.update(best)
print(f"flexAsynch: TAB0 (2-word key + 24 Uint32), 32 parallel transactions per thread, "
      f"{sys.argv[2]} ops per thread, median of {sys.argv[3]} runs")
for sfx, title in (("", "ops/s, elapsed time"),
                   ("_cpu", "ops per CPU-second of the benchmark threads (less sensitive to other load)"),
                   ("_best", f"ops/s, elapsed time, best of the {sys.argv[3]} runs of each program")):
    print(f"\n{title}")
    print(f"{'phase':<10}{'threads':>8}{'C++ NdbRecAttr':>16}{'C++ NdbRecord':>15}{'Rust API':>12}"
          f"{'overhead RecAttr':>18}{'overhead Record':>17}")
    for threads in (1, 2):
        for phase in ("insert", "read", "update", "delete"):
            c, cr, r = (med.get((w + sfx, phase, threads)) for w in ("capi", "capi_rec", "rust"))
            if None in (c, cr, r):
                continue
            print(f"{phase:<10}{threads:>8}{c:>16,.0f}{cr:>15,.0f}{r:>12,.0f}"
                  f"{(r / c - 1) * 100:>17.0f}%{(r / cr - 1) * 100:>16.0f}%")
        for phase in ("read_values", "read_tx32", "read_tx_per_op"):
            r = med.get(("rust" + sfx, phase, threads))
            if r is not None:
                print(f"{phase:<16}{threads:>2}{'':>31}{r:>12,.0f}   (Rust API, other ways to read)")
PY
