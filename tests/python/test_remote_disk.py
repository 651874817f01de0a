"""Disk-data tables on real `rndbd` processes: the logfile group, tablespace and a
STORAGE DISK table made over TCP, rows written, then a data node killed with SIGKILL
and started again — its copy makes the disk objects and the table in its own files and
gets every row, which it then serves alone once the other node is killed too."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import rndb
from test_connect import binaries, connect_when_up, free_port, spawn, wait_for

ROWS = 1200


def test_a_disk_table_survives_a_node_restart_by_copy(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "config.ini").write_text(
        "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\nDiskPageBufferMemory=8M\n"
        f"HeartbeatIntervalDbDb=100\nDataDir={tmp_path}\n"
        f"[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={port}\nDataDir={tmp_path}\n"
        "[ndbd]\nNodeId=2\nHostName=127.0.0.1\n[ndbd]\nNodeId=3\nHostName=127.0.0.1\n[mysqld]\n"
    )
    mgmd_bin, ndbd_bin = binaries()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        spawn(procs, tmp_path, str(mgmd_bin), "-f", str(tmp_path / "config.ini"))
        c = connect_when_up(port)
        nodes = {
            n: spawn(procs, tmp_path, str(ndbd_bin), "-c", f"127.0.0.1:{port}", f"--ndb-nodeid={n}")
            for n in (2, 3)
        }

        def started(*ids: int) -> bool:
            s = c.mgm("ALL STATUS")
            return all(f"Node {i}: started" in s for i in ids)

        wait_for("both data nodes started", 30, lambda: started(2, 3))
        c.sql("CREATE LOGFILE GROUP lg1 ADD UNDOFILE 'undo1.log' INITIAL_SIZE 4M UNDO_BUFFER_SIZE 2M ENGINE NDB")
        c.sql(
            "CREATE TABLESPACE ts1 ADD DATAFILE 'ts1.dat' USE LOGFILE GROUP lg1 "
            "EXTENT_SIZE 256K INITIAL_SIZE 8M ENGINE NDB"
        )
        c.sql("ALTER TABLESPACE ts1 ADD DATAFILE 'ts1b.dat' INITIAL_SIZE 4M ENGINE NDB")
        c.sql(
            "CREATE TABLE d (id INT PRIMARY KEY, note VARCHAR(200)) "
            "TABLESPACE ts1 STORAGE DISK ENGINE=NDB"
        )
        assert c.insert_many("d", ({"id": i, "note": f"row {i} " + "x" * 100} for i in range(ROWS))) == ROWS
        with c.start_transaction() as tx:
            tx.update("d", {"id": 7, "note": "changed"})

        nodes[3].kill()
        nodes[3].wait(timeout=10)
        wait_for("node 3 seen gone", 20, lambda: "Node 3: not connected" in c.mgm("ALL STATUS"))
        # Written while node 3 is down: only its copy can bring these.
        deadline = time.monotonic() + 30
        while True:
            try:
                c.transaction([("write", "d", {"id": ROWS, "note": "while down"}), ("delete", "d", {"id": 0})])
                break
            except rndb.TemporaryError:
                # Until node 2 installs the view without node 3 (its read lease ran out).
                assert time.monotonic() < deadline, "node 2 never took writes alone"
                time.sleep(0.05)
        nodes[3] = spawn(procs, tmp_path, str(ndbd_bin), "-c", f"127.0.0.1:{port}", "--ndb-nodeid=3")
        wait_for("node 3 started again after its copy", 60, lambda: started(2, 3))

        nodes[2].kill()
        nodes[2].wait(timeout=10)
        wait_for("node 2 seen gone", 20, lambda: "Node 2: not connected" in c.mgm("ALL STATUS"))

        def serving_alone() -> bool:
            try:
                c.read_many("d", [1])
                return True
            except rndb.NdbError as e:
                # 4035 until node 3 takes over; 4009 until the client has dialled the
                # restarted node 3 at its new port.
                assert e.code in (4009, 4035) or isinstance(e, rndb.TemporaryError), e
                return False

        wait_for("node 3 serving alone", 30, serving_alone)
        got = c.read_many("d", list(range(ROWS + 1)))
        assert got[0] is None, "the delete made while node 3 was down reached it"
        assert got[7] == {"id": 7, "note": "changed"}
        assert got[ROWS] == {"id": ROWS, "note": "while down"}
        assert all(got[i] == {"id": i, "note": f"row {i} " + "x" * 100} for i in range(1, ROWS) if i != 7)
        files = c.sql("SELECT FILE_NAME FROM information_schema.FILES ORDER BY FILE_NAME")
        for name in ("ts1.dat", "ts1b.dat", "undo1.log"):
            assert name in files, files
        c.close()
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
