"""The hand-written type stubs match the module (mypy.stubtest) and type-check usage."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import rndb


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MYPYPATH", None)
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_stubtest(tmp_path: Path) -> None:
    # run from an empty directory so that only the installed package is seen
    r = run(["mypy.stubtest", "rndb"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_package_is_typed() -> None:
    pkg = Path(rndb.__file__).parent
    assert (pkg / "py.typed").exists()
    assert (pkg / "_rndb.pyi").exists()


def test_stubs_type_check_user_code(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import datetime
        from decimal import Decimal
        import rndb

        def use(path: str) -> int:
            with rndb.Cluster.embedded(data_dir=path, DataMemory="256M", MaxNoOfTables=100) as cluster:
                ndb: rndb.Ndb = cluster.ndb("test")
                res = ndb.execute("SELECT 1")
                with ndb.transaction() as tx:
                    op = tx.read("t1", {"id": 1}, lock_mode=rndb.LM_Read)
                    tx.insert("t1", {"id": 2, "d": Decimal("1.5"), "t": datetime.date.today()})
                    tx.execute(rndb.NoCommit, rndb.AO_IgnoreError)
                    row = op.row
                    if row is not None:
                        print(row["a"])
                    err = op.error
                    if err is not None:
                        print(err.code + 1, err.status.upper())
                n: int = ndb.insert_many("t1", [{"id": 3}, (4, 5)], columns=["id", "a"])
                found = ndb.read_many("t1", [1, (2,), {"id": 3}])
                reader: rndb.Reader = ndb.reader("t1", columns=["a"])
                a = reader.get(1)
                many: list[object] = reader.get_many([1, (2,)])
                cols: list[str] = reader.columns
                print(a, many, cols, reader.table)
                for r in ndb.index_scan("t1", "ix_a", low=10, high=(20,), high_inclusive=False):
                    print(r["id"])
                report: str = cluster.mgm("ALL REPORT MEMORYUSAGE")
                usage = cluster.ndbinfo("memoryusage")
                gci = tx.gci
                return n + len(found) + len(report) + len(usage) + (gci or 0) + (res if isinstance(res, int) else 0)

        try:
            use("/tmp/x")
        except rndb.TemporaryError as e:
            print(e.code, e.classification, e.message, e.mysql_code)
        """
    )
    f = tmp_path / "user.py"
    f.write_text(code)
    r = run(["mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), str(f)], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
