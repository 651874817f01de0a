#!/usr/bin/env bash
# The shell's default (the cluster's nodes in rndb_mgm's process, talking over the
# in-process network) against --direct (the engines on the shell's threads), same run,
# alternated: wall time of rndb_mgm for a script of N single-row INSERTs and N point
# SELECTs (each statement its own transaction, as the mysql client sends them), start
# and shutdown included, and of `-e SHOW` alone (start, one command, shutdown).
#
#   cargo build --release -p rndb-shell && benches/shell_modes.sh [N] [ROUNDS]
set -euo pipefail
N=${1:-2000}
ROUNDS=${2:-3}
BIN=${BIN:-target/release/rndb_mgm}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

{
  echo "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=NDB;"
  for ((i = 0; i < N; i++)); do echo "INSERT INTO t VALUES ($i, 'value $i');"; done
  for ((i = 0; i < N; i++)); do echo "SELECT v FROM t WHERE id = $i;"; done
  echo "SELECT COUNT(*) FROM t;"
} > "$WORK/script.sql"

now() { date +%s.%N; }
run() { # mode args...
  local mode=$1; shift
  rm -rf "$WORK/data"
  local t0 t1
  t0=$(now)
  "$BIN" --data-dir "$WORK/data" "$@" > "$WORK/out.txt" 2>&1
  t1=$(now)
  if ! grep -q "$N" "$WORK/out.txt" && [[ "$*" != *SHOW* ]]; then
    echo "$mode: unexpected output" >&2; tail -5 "$WORK/out.txt" >&2; exit 1
  fi
  echo "$t1 - $t0" | bc
}

printf '%-6s %-22s %-10s %-10s %-6s\n' round what default direct ratio
for ((r = 1; r <= ROUNDS; r++)); do
  d=$(run default < "$WORK/script.sql")
  x=$(run direct --direct < "$WORK/script.sql")
  printf '%-6s %-22s %-10.3f %-10.3f %-6.2f\n' "$r" "script ${N}+${N} stmts" "$d" "$x" "$(echo "$d / $x" | bc -l)"
  d=$(run default -e SHOW)
  x=$(run direct --direct -e SHOW)
  printf '%-6s %-22s %-10.3f %-10.3f %-6.2f\n' "$r" "-e SHOW" "$d" "$x" "$(echo "$d / $x" | bc -l)"
done
