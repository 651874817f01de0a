#!/usr/bin/env bash
# The C ABI's added work per operation, counted in instructions (valgrind's callgrind):
# repeatable for the same binaries whatever else the machine is doing, unlike the
# elapsed and CPU times of run.sh on a shared VM.
#
# For each program (flexAsynch.cpp with -ndbrecord over the C ABI, and the Rust API
# program of capi/benches/flexasynch_rust.rs doing the same batches), one thread, each
# phase set is run with OPS_LO and OPS_HI operations; the difference of the two totals
# divided by OPS_HI - OPS_LO is the cost of one operation of those phases without the
# start-up. A phase's own cost is the set with it minus the set without it (every set
# starts with the inserts the other phases need).
#
#   benches/flexasynch/instructions.sh [ops_lo] [ops_hi]      (defaults 10000 30000)
set -euo pipefail
cd "$(dirname "$0")/../.."
LO=${1:-10000}
HI=${2:-30000}
# The same features as ab.sh: the library is then built once for all three scripts (the
# feature only adds the benchmark-only functions of capi/src/bench_ref.rs).
cargo build --release -q -p rndb-capi --features bench-reference
g++ -std=c++17 -O2 -pthread -Icapi/include benches/flexasynch/flexAsynch.cpp \
  -Ltarget/release -lrndb -Wl,-rpath,"$PWD/target/release" -o target/release/flexAsynch
rust_bin=$(cargo bench -q -p rndb-capi --features bench-reference --bench flexasynch_rust --no-run 2>&1 |
  sed -n 's/.*(\(.*flexasynch_rust-[0-9a-f]*\)).*/\1/p' | tail -1)
if [ -z "$rust_bin" ]; then
  rust_bin=$(ls -t target/release/deps/flexasynch_rust-* | grep -v '\.d$' | head -1)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# total instructions of one run: who (c|rust), phases, ops
count() {
  local who=$1 phases=$2 ops=$3 out="$work/cg.$1.$2.$3"
  local cmd
  if [ "$who" = c ]; then
    cmd=(target/release/flexAsynch -t 1 -o "$ops" -ndbrecord)
  else
    cmd=("$rust_bin" 1 "$ops")
  fi
  FLEXASYNCH_PHASES=$phases valgrind --tool=callgrind --callgrind-out-file="$out" \
    "${cmd[@]}" >/dev/null 2>"$out.err"
  sed -n 's/^summary: *//p;s/^totals: *//p' "$out" | head -1
}

declare -A per
for who in c rust; do
  for set in insert insert,read insert,update insert,delete; do
    lo=$(count "$who" "$set" "$LO")
    hi=$(count "$who" "$set" "$HI")
    per[$who,$set]=$(((hi - lo) / (HI - LO)))
  done
done
echo "flexAsynch, instructions per operation (callgrind, 1 thread, ${LO} vs ${HI} ops, NdbRecord)"
printf '%-8s %12s %12s %10s\n' phase "C ABI" "Rust API" overhead
for phase in insert read update delete; do
  if [ "$phase" = insert ]; then
    c=${per[c,insert]}
    r=${per[rust,insert]}
  else
    c=$((per[c,insert,$phase] - per[c,insert]))
    r=$((per[rust,insert,$phase] - per[rust,insert]))
  fi
  python3 -c "import sys; c,r=int(sys.argv[2]),int(sys.argv[3]); print(f'{sys.argv[1]:<8} {c:>12,} {r:>12,} {(c/r-1)*100:>9.1f}%')" \
    "$phase" "$c" "$r"
done
