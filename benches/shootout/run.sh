#!/usr/bin/env bash
# The key-value shootout (issue 9) in one command: installs the servers (apt) and the
# clients (pip, into benches/shootout/.venv), builds rndb's release binaries, librndb
# (the C ABI) and the Python module, runs benches/shootout/shootout.py (which starts every server on loopback, one
# system at a time, and writes benches/RESULTS.md's issue-9 subsection and the PNGs),
# and kills whatever it started, on error or interrupt too.
#
#   benches/shootout/run.sh --quick     (make shootout-quick; a few minutes)
#   benches/shootout/run.sh --full      (make shootout; at most ~30 minutes)
# Further arguments go to shootout.py (--systems, --workloads, --seconds, --reps, --no-write).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/shootout"
VENV=${SHOOTOUT_VENV:-$HERE/.venv}
cd "$ROOT"

# Servers from Debian's packages (a system that cannot be installed is reported as such
# in the results, not skipped silently).
need=()
for pair in redis-server:redis-server memcached:memcached tarantool:tarantool \
            mariadbd:mariadb-server mariadb_config:libmariadb-dev; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" \
            || echo "shootout: apt-get install ${need[*]} failed; the results will say so" >&2
    else
        echo "shootout: cannot install ${need[*]} (not root or no apt-get); the results will say so" >&2
    fi
fi

# Clients and plotting into the shootout's own venv; rndb's release builds.
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q -r "$HERE/requirements.txt"
# rndb_mgmd/rndbd for the cluster systems, librndb.so for rndb-embedded-capi (ctypes).
cargo build --release -p rndb-shell -p rndb-capi
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" develop --release -q -m py/Cargo.toml

# Every server's pid is appended to this file as it starts (servers.py); the trap kills
# those still alive, should shootout.py itself be killed before its own cleanup.
export SHOOTOUT_PIDFILE
SHOOTOUT_PIDFILE=$(mktemp /tmp/shootout-pids.XXXXXX)
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    while read -r p; do
        kill -KILL -- "-$p" 2>/dev/null || true
    done < "$SHOOTOUT_PIDFILE"
    rm -f "$SHOOTOUT_PIDFILE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$VENV/bin/python" "$HERE/shootout.py" "$@" &
pid=$!
wait "$pid"
