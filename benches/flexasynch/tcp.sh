#!/usr/bin/env bash
# flexAsynch through the C ABI over TCP: rndb_mgmd and two rndbd (NoOfReplicas=2) on
# loopback, from a config.ini in a temporary directory; flexAsynch -ndbrecord with
# -p P parallel transactions, OPS operations per phase; every process is killed at the
# end. Then, in the same run, the Rust client with the same read shape (batches of P
# keys, one in flight; its own rndb_mgmd and rndbd): tcp_throughput --batch P --depth 1
# --seconds 3 --no-redis, and the ratio of the two read rates.
#
#   benches/flexasynch/tcp.sh [parallel] [ops]      (defaults 32 20000)
set -euo pipefail
cd "$(dirname "$0")/../.."
P=${1:-32}
OPS=${2:-20000}
cargo build --release -q -p rndb-capi -p rndb-shell -p rndb-benches
g++ -std=c++17 -O2 -pthread -Icapi/include benches/flexasynch/flexAsynch.cpp \
  -Ltarget/release -lrndb -Wl,-rpath,"$PWD/target/release" -o target/release/flexAsynch
dir=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$dir/config.ini" <<INI
[ndbd default]
NoOfReplicas=2
DataMemory=1G
DataDir=$dir
[ndb_mgmd]
NodeId=1
HostName=127.0.0.1
PortNumber=$port
DataDir=$dir
[ndbd]
NodeId=2
HostName=127.0.0.1
[ndbd]
NodeId=3
HostName=127.0.0.1
[mysqld]
[mysqld]
INI
target/release/rndb_mgmd -f "$dir/config.ini" >"$dir/mgmd.log" 2>&1 &
pids+=($!)
for n in 2 3; do
  target/release/rndbd -c "127.0.0.1:$port" >"$dir/ndbd$n.log" 2>&1 &
  pids+=($!)
done
c_out=$(target/release/flexAsynch -c "127.0.0.1:$port" -o "$OPS" -p "$P" -ndbrecord)
echo "$c_out"
kill -9 "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()
r_out=$(target/release/tcp_throughput --batch "$P" --depth 1 --seconds 3 --no-redis)
echo "$r_out" | grep -E '^rndb (reads|writes)'
c_read=$(echo "$c_out" | awk '$1 == "capi_rec" && $2 == "read" {print $4}')
r_read=$(echo "$r_out" | awk '$1 == "rndb" && $2 == "reads:" {print $3}')
python3 -c "import sys; c, r = float(sys.argv[1]), float(sys.argv[2]); print(f'reads: C ABI {c:,.0f}/s, Rust client {r:,.0f}/s, C/Rust {c / r:.2f}')" "$c_read" "$r_read"
