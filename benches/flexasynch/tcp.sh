#!/usr/bin/env bash
# flexAsynch through the C ABI over TCP: rndb_mgmd and two rndbd (NoOfReplicas=2) on
# loopback, from a config.ini in a temporary directory; flexAsynch -ndbrecord with
# -p P parallel transactions, OPS operations per phase; every process is killed at the
# end. The Rust client's figure for the same read shape (batches of P keys, one in
# flight): cargo run --release -p rndb-benches --bin tcp_throughput -- --batch P
# --depth 1 --seconds 3 --no-redis.
#
#   benches/flexasynch/tcp.sh [parallel] [ops]      (defaults 32 20000)
set -euo pipefail
cd "$(dirname "$0")/../.."
P=${1:-32}
OPS=${2:-20000}
cargo build --release -q -p rndb-capi -p rndb-shell
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
target/release/flexAsynch -c "127.0.0.1:$port" -o "$OPS" -p "$P" -ndbrecord
