"""Starting and stopping the shootout's servers on loopback, one system at a time.

Each ``start_*`` returns a ``Server``: the processes it started (each in its own
process group), the parameters an adapter needs to connect (ports, paths), and
``stop()``, which kills every process it started and removes its directory. Every
Server is also kept in ``RUNNING`` so that ``stop_all()`` (called by shootout.py in a
``finally`` and on SIGTERM/SIGINT) ends whatever is still up, on error too.

Configuration, chosen so that every system keeps its data in memory and none waits for
a disk on commit (rndb's commits are durable at the next global checkpoint, not at
commit): redis ``--save '' --appendonly no``; memcached as is; Tarantool memtx with its
WAL written but not fsynced (``wal_mode='write'``, the default); MariaDB InnoDB with a
buffer pool larger than the data, ``innodb_flush_log_at_trx_commit=0`` and no binlog,
warmed by a full scan after the load; rndb with its default redo and checkpoints.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: cargo's release directory (CARGO_TARGET_DIR when set, as cargo itself does).
RELEASE = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "release"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(what: str, secs: float, ok: Callable[[], bool], procs: list[subprocess.Popen[bytes]]) -> None:
    """Polls ok() until it is true; fails after `secs` or when a process has exited."""
    deadline = time.monotonic() + secs
    while True:
        try:
            if ok():
                return
        except (OSError, ConnectionError, RuntimeError, ValueError) as e:  # not up yet
            last = e
        else:
            last = None
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: {p.args[0]} exited with {p.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not up within {secs} s ({last})")
        time.sleep(0.1)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Server:
    """The processes of one system, its directory and what a client needs."""

    system: str
    dir: Path
    params: dict[str, Any] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.dir / f"{name}.out", "wb") as out:
            p = subprocess.Popen(
                args,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.procs.append(p)
        pidfile = os.environ.get("SHOOTOUT_PIDFILE")
        if pidfile:
            with open(pidfile, "a") as f:
                f.write(f"{p.pid}\n")
        return p

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.poll() is None]

    def stop(self) -> None:
        for close in self.closers:
            close()
        self.closers.clear()
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(timeout=30)
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self in RUNNING:
            RUNNING.remove(self)


RUNNING: list[Server] = []


def stop_all() -> None:
    """Stops every server still running (the shootout's finally and signal handlers)."""
    for s in list(RUNNING):
        s.stop()


def new_server(system: str) -> Server:
    s = Server(system, Path(tempfile.mkdtemp(prefix=f"shootout-{system}-")))
    RUNNING.append(s)
    return s


def start_redis(mem_mb: int) -> Server:
    s = new_server("redis")
    port = free_port()
    s.spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--protected-mode", "no", "--dir", str(s.dir)])
    wait_for("redis-server", 20, lambda: port_open(port), s.procs)
    s.params = {"port": port}
    return s


def start_memcached(mem_mb: int) -> Server:
    s = new_server("memcached")
    port = free_port()
    s.spawn("memcached", ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                          "-m", str(mem_mb), "-t", "2", "-c", "1024", "-u", "root"])
    wait_for("memcached", 20, lambda: port_open(port), s.procs)
    s.params = {"port": port}
    return s


TARANTOOL_INIT = """
box.cfg{listen = '127.0.0.1:%(port)d', work_dir = '%(dir)s', memtx_memory = %(mem)d,
        wal_mode = 'write', log_level = 4, checkpoint_interval = 0}
box.schema.user.grant('guest', 'read,write,execute', 'universe', nil, {if_not_exists = true})
local s = box.schema.space.create('kv', {if_not_exists = true})
s:create_index('pk', {type = 'hash', parts = {1, 'unsigned'}, if_not_exists = true})
function mget(keys)
    local out = {}
    for i, k in ipairs(keys) do
        local t = s:get(k)
        if t then out[i] = t[2] else out[i] = box.NULL end
    end
    return out
end
function mput(rows)
    box.begin()
    for _, r in ipairs(rows) do s:replace(r) end
    box.commit()
    return #rows
end
local f = io.open('%(dir)s/ready', 'w')
f:write('ready')
f:close()
"""


def start_tarantool(mem_mb: int) -> Server:
    s = new_server("tarantool")
    port = free_port()
    init = s.dir / "init.lua"
    init.write_text(TARANTOOL_INIT % {"port": port, "dir": s.dir, "mem": mem_mb << 20})
    s.spawn("tarantool", ["tarantool", str(init)])
    wait_for("tarantool", 30, lambda: (s.dir / "ready").exists() and port_open(port), s.procs)
    s.params = {"port": port}
    return s


def start_mariadb(mem_mb: int) -> Server:
    s = new_server("mariadb")
    port = free_port()
    data = s.dir / "data"
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    s.spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--port={port}",
                         "--bind-address=127.0.0.1", f"--socket={s.dir}/mysql.sock",
                         f"--pid-file={s.dir}/mariadb.pid", "--user=root",
                         f"--innodb-buffer-pool-size={mem_mb}M",
                         "--innodb-flush-log-at-trx-commit=0", "--innodb-log-file-size=1G",
                         "--skip-log-bin", "--performance-schema=OFF", "--skip-name-resolve",
                         "--max-connections=200"])
    wait_for("mariadbd", 60, lambda: port_open(port), s.procs)
    s.params = {"port": port}
    return s


def rndb_config(d: Path, port: int, replicas: int, data_memory_mb: int) -> str:
    nodes = 2 if replicas == 2 else 1
    t = (f"[ndbd default]\nNoOfReplicas={replicas}\nDataMemory={data_memory_mb}M\nDataDir={d}\n"
         f"[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\nDataDir={d}\n")
    for nid in range(2, 2 + nodes):
        t += f"[ndbd]\nNodeId={nid}\nHostName=127.0.0.1\n"
    return t + "[mysqld]\n" * 16


def start_rndb_cluster(replicas: int, data_memory_mb: int) -> Server:
    """rndb_mgmd and two rndbd (NoOfReplicas=2) or one (NoOfReplicas=1), release builds."""
    import rndb

    s = new_server(f"rndb-r{replicas}")
    port = free_port()
    cfg = s.dir / "config.ini"
    cfg.write_text(rndb_config(s.dir, port, replicas, data_memory_mb))
    s.spawn("mgmd", [str(RELEASE / "rndb_mgmd"), "-f", str(cfg)])
    cs = f"127.0.0.1:{port}"
    node_ids = [2, 3] if replicas == 2 else [2]
    for nid in node_ids:
        s.spawn(f"n{nid}", [str(RELEASE / "rndbd"), "-c", cs, f"--ndb-nodeid={nid}"])

    def started() -> bool:
        try:
            c = rndb.connect(cs, timeout=2.0)
        except rndb.NdbError:
            return False
        try:
            st = c.mgm("ALL STATUS")
        finally:
            c.close()
        return all(f"Node {n}: started" in st for n in node_ids)

    wait_for("rndb cluster", 60, started, s.procs)
    s.params = {"connectstring": cs}
    return s


def start_rndb_embedded(data_memory_mb: int) -> Server:
    """The direct engines of the default layout (two data nodes, NoOfReplicas=2) in this
    process (`rndb.Cluster.direct`, as the shootout measured them before the embedded
    default ran the node code)."""
    import rndb

    s = new_server("rndb-embedded")
    cluster = rndb.Cluster.direct(data_dir=str(s.dir / "data"), DataMemory=f"{data_memory_mb}M")
    s.closers.append(cluster.close)
    s.params = {"cluster": cluster}
    return s


def start_rndb_capi(data_memory_mb: int) -> Server:
    """The same embedded cluster, started through the C ABI (librndb.so, via ctypes)."""
    from capi import CapiCluster

    s = new_server("rndb-embedded-capi")
    cluster = CapiCluster(str(s.dir / "data"), data_memory_mb, RELEASE / "librndb.so")
    s.closers.append(cluster.close)
    s.params = {"capi": cluster}
    return s


def start_embedded_dir(system: str) -> Server:
    """A directory for SQLite's or LMDB's files (no process)."""
    s = new_server(system)
    s.params = {"path": str(s.dir)}
    return s
