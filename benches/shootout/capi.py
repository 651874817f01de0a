"""rndb embedded through its C ABI (librndb.so, capi/include/rndb.h), driven with ctypes.

The shootout's system ``rndb-embedded-capi``: the same embedded cluster as
``rndb-embedded`` (two data nodes, NoOfReplicas=2, in this process), started by the
connectstring ``embedded;datadir=...;DataMemory=...`` and used through the NDB API's
NdbRecord calls, as a C program would (capi/examples/ndbapi_record.cpp, flexAsynch):

* one record over the whole row, for key and result alike: ``id`` (BIGINT) at offset 0,
  ``v`` (VARBINARY(1024): a 2-byte little-endian length, then the bytes) at offset 8;
  a row is 1040 bytes (8-byte aligned);
* a single read: ``startTransaction``, ``readTuple(rec, row, rec, row, LM_CommittedRead)``
  (the C ABI's compact single read: capi/src/single.rs), ``execute(Commit)``,
  ``closeTransaction`` — four C calls;
* a batched read: one transaction, one ``readTuple`` per key, each into its own row of
  one buffer, and one ``execute(Commit, AO_IgnoreError)``: the C ABI runs a transaction
  of committed key reads as one engine batch (capi/src/batch.rs). A row that was not
  found keeps the length 0xFFFF written before the call (no VARBINARY(1024) is that
  long): n + 3 C calls for n keys, nothing per column. The NDB API has no call that
  defines many operations at once, so one call per key is the floor;
* updates (single, or all of a batch in one transaction) with ``updateTuple``, the
  load with ``insertTuple`` in transactions of 1000 rows. A write's row is copied by
  the call that defines it, so one row buffer serves a whole batch.

How Python calls C: through ctypes each of those calls costs Python ~1 µs, more than
the C ABI's own work for a read, so the measurement was ctypes' (2026-12-05/06 runs:
single reads 0.45-0.56x LMDB, whose ``txn.get`` is one call into a C extension). The
reads now go through ``capi_calls.c``: the same NDB API calls made from C, compiled at
the first use by cffi's API mode against ``rndb.h`` and librndb (``fast_calls``): one
call from Python per read or per batch, as for LMDB. Without cffi or a C compiler the
reads fall back to ctypes, and ``call_path()`` says which was used. Setup, the load and
the updates stay on ctypes (a transaction per call either way).

Every return code is checked; a failure raises ``CapiError`` with the NdbError's code
and message. The library is ``$RNDB_LIB``, else ``librndb.so`` of the release build
(``$CARGO_TARGET_DIR``, else ``target/``).
"""

from __future__ import annotations

import ctypes
import os
import time
from array import array
from ctypes import POINTER, Structure, c_char_p, c_int, c_uint32, c_void_p
from pathlib import Path
from typing import Any

from adapter_base import LOAD_RETRIES, Adapter

ROOT = Path(__file__).resolve().parents[2]

# Values of rndb.h's enums (NDB's).
COMMIT = 2
ABORT_ON_ERROR = 0
AO_IGNORE_ERROR = 2
LM_COMMITTED_READ = 2
STATUS_TEMPORARY = 1  # rndb_error_status: retrying the transaction may succeed
TUPLE_NOT_FOUND = 626
NO_SUCH_TABLE = 723

VALUE_MAX = 1024
VALUE_AT = 8  # the value's offset in a row (after the 8-byte key)
ROW = 1040  # 8 (id) + 2 (length) + 1024 (bytes) + 6 (pad to a multiple of 8)
ROW_Q, ROW_H = ROW // 8, ROW // 2  # the row stride in int64 and in uint16 units
LEN_H = VALUE_AT // 2  # the value's length in uint16 units from a row's start
MISSING = 0xFFFF  # a length no VARBINARY(1024) value has: "no row written here"
LOAD_BATCH = 1000

CREATE_KV = ("CREATE TABLE kv (id BIGINT NOT NULL PRIMARY KEY, "
             "v VARBINARY(1024) NOT NULL) ENGINE=NDB")


class CapiError(RuntimeError):
    """A failed C ABI call: the NdbError's code and message."""

    def __init__(self, what: str, code: int, message: str, status: int = 2) -> None:
        super().__init__(f"{what}: error {code}: {message}")
        self.code = code
        self.message = message
        self.temporary = status == STATUS_TEMPORARY


class Error(Structure):
    """rndb.h's ``rndb_error`` (NDB's ``struct NdbError``)."""

    _fields_ = [("status", c_int), ("classification", c_int), ("code", c_int),
                ("mysql_code", c_int), ("message", c_char_p), ("details", c_char_p)]


class RecordSpec(Structure):
    """rndb.h's ``rndb_record_spec`` (NDB's ``RecordSpecification``)."""

    _fields_ = [("column", c_void_p), ("offset", c_uint32), ("nullbit_byte_offset", c_uint32),
                ("nullbit_bit_in_byte", c_uint32), ("column_flags", c_uint32)]


P, E = c_void_p, POINTER(Error)
#: name: (result type, argument types) — the functions of rndb.h used here.
PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "rndb_version": (c_char_p, []),
    "rndb_last_error": (E, []),
    "rndb_cluster_connection_create": (P, [c_char_p]),
    "rndb_cluster_connection_connect": (c_int, [P, c_int, c_int, c_int]),
    "rndb_cluster_connection_get_error": (E, [P]),
    "rndb_cluster_connection_free": (c_int, [P]),
    "rndb_ndb_create": (P, [P, c_char_p]),
    "rndb_ndb_init": (c_int, [P, c_int]),
    "rndb_ndb_get_error": (E, [P]),
    "rndb_ndb_free": (c_int, [P]),
    "rndb_ndb_get_dictionary": (P, [P]),
    "rndb_dict_get_table": (P, [P, c_char_p]),
    "rndb_dict_get_error": (E, [P]),
    "rndb_table_get_column_by_name": (P, [P, c_char_p]),
    "rndb_dict_create_record": (P, [P, P, POINTER(RecordSpec), c_uint32, c_uint32]),
    "rndb_execute_sql": (c_int, [P, c_char_p, POINTER(c_char_p)]),
    "rndb_ndb_start_transaction": (P, [P]),
    "rndb_ndb_close_transaction": (c_int, [P, P]),
    "rndb_transaction_read_tuple": (P, [P, P, P, P, P, c_int, P]),
    "rndb_transaction_insert_tuple": (P, [P, P, P, P, P, P]),
    "rndb_transaction_update_tuple": (P, [P, P, P, P, P, P]),
    "rndb_transaction_execute": (c_int, [P, c_int, c_int, c_int]),
    "rndb_transaction_get_error": (E, [P]),
    "rndb_operation_get_error": (E, [P]),
}


def library_path() -> Path:
    if os.environ.get("RNDB_LIB"):
        return Path(os.environ["RNDB_LIB"])
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return target / "release" / "librndb.so"


def load(path: Path | None = None) -> ctypes.CDLL:
    """librndb with the prototypes set (ctypes.CDLL: the GIL is released in each call)."""
    lib = ctypes.CDLL(str(path or library_path()))
    for name, (res, args) in PROTOTYPES.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


#: The C functions of capi_calls.c, as cffi declares them (rndb.h's types opaque).
FAST_CDEF = """
typedef struct rndb_ndb rndb_ndb;
typedef struct rndb_record rndb_record;
typedef struct rndb_operation rndb_operation;
struct shootout_ctx {
  rndb_ndb *ndb;
  const rndb_record *rec;
  char *row;
  size_t len_at;
  char *rows;
  size_t stride;
  const rndb_operation **ops;
  int code;
  char msg[256];
};
int shootout_read(struct shootout_ctx *c, long long key);
int shootout_read_batch(struct shootout_ctx *c, int n);
"""

#: Per librndb path: the compiled module of capi_calls.c, or why there is none.
_fast: dict[Path, tuple[Any, str]] = {}
_fast_why = "ctypes (capi_calls.c not built)"


def fast_calls(lib_path: Path | None = None) -> Any:
    """The compiled module of capi_calls.c (its ``ffi`` and ``lib``) for the librndb at
    `lib_path`, built once into ``shootout-capi/`` next to that library (kept: rebuilt
    when the C file, the header or the library is newer), so that it links the very
    library ctypes loaded; None when cffi or the compiler is missing (``call_path`` says
    why)."""
    global _fast_why
    lib = Path(lib_path or library_path()).resolve()
    if lib in _fast:
        mod, _fast_why = _fast[lib]
        return mod
    mod, _fast_why = _build_fast(lib)
    _fast[lib] = (mod, _fast_why)
    return mod


def _build_fast(lib: Path) -> tuple[Any, str]:
    try:
        import importlib.util

        from cffi import FFI
    except ImportError as e:
        return None, f"ctypes (cffi missing: {e})"
    here = Path(__file__).resolve().parent
    include = ROOT / "capi" / "include"
    build = lib.parent / "shootout-capi"
    build.mkdir(exist_ok=True)
    name = "_rndb_shootout_capi"
    sources = [here / "capi_calls.c", include / "rndb.h", lib]
    built = sorted(build.glob(f"{name}*.so"))
    try:
        if not built or any(p.stat().st_mtime > built[0].stat().st_mtime for p in sources):
            ffi = FFI()
            ffi.cdef(FAST_CDEF)
            ffi.set_source(name, '#include "rndb.h"\n' + (here / "capi_calls.c").read_text(),
                           include_dirs=[str(include)], library_dirs=[str(lib.parent)],
                           libraries=["rndb"], extra_compile_args=["-O2"],
                           extra_link_args=[f"-Wl,-rpath,{lib.parent}"])
            ffi.compile(tmpdir=str(build), verbose=False)
            built = sorted(build.glob(f"{name}*.so"))
        spec = importlib.util.spec_from_file_location(name, built[0])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {built[0]}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:  # a missing compiler, a failed build: say so, use ctypes
        return None, f"ctypes (building capi_calls.c failed: {e})"
    return mod, "capi_calls.c through cffi"


def call_path() -> str:
    """How the adapter's reads reach librndb (the last ``fast_calls``)."""
    return _fast_why


def error_of(err: Any) -> tuple[int, str, int]:
    """(code, message, status) of an ``rndb_error*``."""
    if not err:
        return -1, "no error object", 2
    e = err.contents
    return e.code, (e.message or b"").decode("utf-8", "replace"), e.status


class Rows:
    """`n` rows of the kv record in one buffer: keys as int64 (`q`), value lengths as
    uint16 (`h`), the bytes through `b`; `addr` the first row's address."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.q = array("q", bytes(n * ROW))
        self.b = memoryview(self.q).cast("B")
        self.h = self.b.cast("H")
        self.addr = address(self.q)

    def prepare(self, keys: list[int]) -> None:
        """Keys into the first len(keys) rows, their lengths set to MISSING."""
        n = len(keys)
        self.q[: n * ROW_Q: ROW_Q] = array("q", keys)
        self.h[LEN_H: n * ROW_H: ROW_H] = array("H", [MISSING]) * n

    def missing(self, n: int) -> int:
        """How many of the first `n` rows were not written by a read."""
        lens: list[int] = self.h[LEN_H: n * ROW_H: ROW_H].tolist()
        return lens.count(MISSING)

    def value(self, i: int) -> bytes | None:
        n = self.h[i * ROW_H + LEN_H]
        if n == MISSING:
            return None
        at = i * ROW + VALUE_AT + 2
        return self.b[at: at + n].tobytes()

    def set_value(self, i: int, value: bytes) -> None:
        n = len(value)
        if n > VALUE_MAX:
            raise CapiError("value", 4209, f"{n} bytes for VARBINARY({VALUE_MAX})")
        self.h[i * ROW_H + LEN_H] = n
        at = i * ROW + VALUE_AT + 2
        self.b[at: at + n] = value


def address(buf: array) -> int:
    addr: int = buf.buffer_info()[0]
    return addr


class CapiCluster:
    """The engines in this process through the C ABI (connectstring `direct`, as the
    recorded figures were measured): the connection (started by connect)."""

    def __init__(self, data_dir: str, data_memory_mb: int, lib_path: Path | None = None) -> None:
        self.lib_path = lib_path
        self.lib = load(lib_path)
        cs = f"direct;datadir={data_dir};DataMemory={data_memory_mb}M".encode()
        self.conn = self.lib.rndb_cluster_connection_create(cs)
        if not self.conn:
            raise CapiError("rndb_cluster_connection_create", *error_of(self.lib.rndb_last_error()))
        if self.lib.rndb_cluster_connection_connect(self.conn, 4, 5, 0) != 0:
            err = error_of(self.lib.rndb_cluster_connection_get_error(self.conn))
            self.lib.rndb_cluster_connection_free(self.conn)
            raise CapiError("rndb_cluster_connection_connect", *err)

    def version(self) -> str:
        v: bytes = self.lib.rndb_version()
        return v.decode()

    def close(self) -> None:
        if self.conn:
            if self.lib.rndb_cluster_connection_free(self.conn) != 0:
                raise CapiError("rndb_cluster_connection_free", *error_of(self.lib.rndb_last_error()))
            self.conn = None


class RndbCapi(Adapter):
    """The shootout adapter (adapter_base.Adapter): one ``rndb_ndb`` per instance; extra
    clients are threads with their own (the connection is shared, as NDB allows; ctypes
    releases the GIL in each C call)."""

    worker = "thread"

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        c: CapiCluster = params["capi"]
        self.lib = lib = c.lib
        self.ndb = lib.rndb_ndb_create(c.conn, b"test")
        if not self.ndb:
            raise CapiError("rndb_ndb_create", *error_of(lib.rndb_last_error()))
        self._check(lib.rndb_ndb_init(self.ndb, 1024) == 0, "rndb_ndb_init",
                    lib.rndb_ndb_get_error(self.ndb))
        self.rec = None
        self.one = Rows(1)  # the row of a single read, and of each write (copied at definition)
        self.vlast: bytes | None = None  # the value in self.one's row
        self.rows = Rows(LOAD_BATCH)  # the rows of a batched read
        # The calls of the single read, looked up once.
        self._start_tx = lib.rndb_ndb_start_transaction
        self._read_tuple = lib.rndb_transaction_read_tuple
        self._execute = lib.rndb_transaction_execute
        self._close_tx = lib.rndb_ndb_close_transaction
        # The reads through capi_calls.c (None: through ctypes, see the module notes;
        # params "calls": "ctypes" asks for ctypes).
        self.fast = None if params.get("calls") == "ctypes" else fast_calls(c.lib_path)
        self._record(if_exists=True)  # an extra client: the table is there

    def _check(self, ok: Any, what: str, err: Any) -> None:
        if not ok:
            raise CapiError(what, *error_of(err))

    def _record(self, if_exists: bool = False) -> None:
        """The record of kv's rows (after the table exists; `if_exists`: none made, no
        error, when it does not)."""
        lib = self.lib
        d = lib.rndb_ndb_get_dictionary(self.ndb)
        self._check(d, "rndb_ndb_get_dictionary", lib.rndb_ndb_get_error(self.ndb))
        t = lib.rndb_dict_get_table(d, b"kv")
        if not t and if_exists and error_of(lib.rndb_dict_get_error(d))[0] == NO_SUCH_TABLE:
            return
        self._check(t, "rndb_dict_get_table(kv)", lib.rndb_dict_get_error(d))
        specs = (RecordSpec * 2)()
        for spec, (col, offset) in zip(specs, [(b"id", 0), (b"v", VALUE_AT)]):
            c = lib.rndb_table_get_column_by_name(t, col)
            self._check(c, f"rndb_table_get_column_by_name({col!r})", lib.rndb_last_error())
            spec.column, spec.offset = c, offset
        rec = lib.rndb_dict_create_record(d, t, specs, 2, ctypes.sizeof(RecordSpec))
        self._check(rec, "rndb_dict_create_record", lib.rndb_dict_get_error(d))
        self.rec = rec
        if self.fast is not None:
            ffi = self.fast.ffi
            ctx = self.f_ctx = ffi.new("struct shootout_ctx *")
            ctx.ndb = ffi.cast("rndb_ndb *", self.ndb)
            ctx.rec = ffi.cast("const rndb_record *", rec)
            ctx.len_at = VALUE_AT
            ctx.stride = ROW
            self._f_read, self._f_unpack = self.fast.lib.shootout_read, ffi.unpack
            self._fast_rows()

    def setup(self) -> None:
        ok = self.lib.rndb_execute_sql(self.ndb, CREATE_KV.encode(), None) >= 0
        self._check(ok, "CREATE TABLE kv", self.lib.rndb_ndb_get_error(self.ndb))
        self._record()

    def _start(self) -> Any:
        tx = self._start_tx(self.ndb)
        if not tx:
            raise CapiError("rndb_ndb_start_transaction", *error_of(self.lib.rndb_ndb_get_error(self.ndb)))
        return tx

    def _end(self, tx: Any, ok: bool, what: str) -> None:
        """Raises the transaction's error when not `ok`, and closes it."""
        lib = self.lib
        err = None if ok else error_of(lib.rndb_transaction_get_error(tx))
        if self._close_tx(self.ndb, tx) != 0 and err is None:
            err = error_of(lib.rndb_ndb_get_error(self.ndb))
            what = "rndb_ndb_close_transaction"
        if err is not None:
            raise CapiError(what, *err)

    def _write(self, define: Any, key_rec: Any, items: Any, what: str) -> None:
        """One transaction of writes (insert or update) of (key, value) pairs, committed;
        each defined from the one row of self.one."""
        one, rec = self.one, self.rec
        q, addr = one.q, one.addr
        tx = self._start()
        try:
            for k, v in items:
                q[0] = k
                if v is not self.vlast:
                    self.vlast = None
                    one.set_value(0, v)
                    self.vlast = v
                if not define(tx, key_rec, addr if key_rec else None, rec, addr, None):
                    break
            else:
                ok = self._execute(tx, COMMIT, ABORT_ON_ERROR, 0) == 0
                self._end(tx, ok, what)
                return
        except BaseException:
            self._close_tx(self.ndb, tx)
            raise
        self._end(tx, False, what)

    def load(self, n: int, value: bytes) -> None:
        if self.rec is None:
            self._record()
        ins = self.lib.rndb_transaction_insert_tuple
        for s in range(0, n, LOAD_BATCH):
            for attempt in range(LOAD_RETRIES):  # a temporary error (410...) is retried
                try:
                    self._write(ins, None, ((k, value) for k in range(s, min(n, s + LOAD_BATCH))),
                                "insert")
                    break
                except CapiError as e:
                    if not e.temporary or attempt == LOAD_RETRIES - 1:
                        raise
                    time.sleep(0.1)

    def _fast_rows(self) -> None:
        """Points the cffi context at the row buffers (after they change)."""
        ffi, ctx = self.fast.ffi, self.f_ctx
        ctx.row = ffi.cast("char *", self.one.addr)
        ctx.rows = ffi.cast("char *", self.rows.addr)
        self.f_ops = ffi.new("const rndb_operation *[]", self.rows.n)  # kept alive here
        ctx.ops = self.f_ops
        self.f_value = ctx.row + VALUE_AT + 2

    def _fast_error(self, what: str) -> CapiError:
        ctx = self.f_ctx
        return CapiError(what, ctx.code, self.fast.ffi.string(ctx.msg).decode("utf-8", "replace"))

    def read(self, key: int) -> bytes | None:
        if self.fast is not None:
            self.vlast = None
            n = self._f_read(self.f_ctx, key)
            if n >= 0:
                return self._f_unpack(self.f_value, n)  # type: ignore[no-any-return]
            if n == -1:
                return None
            raise self._fast_error("read")
        one, rec, ndb = self.one, self.rec, self.ndb
        one.q[0] = key
        h = one.h
        h[LEN_H] = MISSING
        self.vlast = None
        tx = self._start_tx(ndb)
        if not tx:
            raise CapiError("rndb_ndb_start_transaction", *error_of(self.lib.rndb_ndb_get_error(ndb)))
        if not self._read_tuple(tx, rec, one.addr, rec, one.addr, LM_COMMITTED_READ, None):
            self._end(tx, False, "rndb_transaction_read_tuple")
        if self._execute(tx, COMMIT, ABORT_ON_ERROR, 0) != 0:
            code, msg, _ = error_of(self.lib.rndb_transaction_get_error(tx))
            self._end(tx, True, "read")
            if code == TUPLE_NOT_FOUND:
                return None
            raise CapiError("read", code, msg)
        if self._close_tx(ndb, tx) != 0:
            raise CapiError("rndb_ndb_close_transaction", *error_of(self.lib.rndb_ndb_get_error(ndb)))
        return one.b[VALUE_AT + 2: VALUE_AT + 2 + h[LEN_H]].tobytes()

    def read_batch(self, keys: list[int]) -> int:
        lib, n, rec = self.lib, len(keys), self.rec
        if n == 0:
            return 0
        if n > self.rows.n:
            self.rows = Rows(n)
            if self.fast is not None:
                self._fast_rows()
        rows = self.rows
        rows.prepare(keys)
        if self.fast is not None:
            found: int = self.fast.lib.shootout_read_batch(self.f_ctx, n)
            if found < 0:
                raise self._fast_error("read batch")
            return found
        rt = self._read_tuple
        tx = self._start()
        try:
            ops = [rt(tx, rec, a, rec, a, LM_COMMITTED_READ, None)
                   for a in range(rows.addr, rows.addr + n * ROW, ROW)]
        except BaseException:
            self._close_tx(self.ndb, tx)
            raise
        if not all(ops):
            self._end(tx, False, "rndb_transaction_read_tuple")
        if self._execute(tx, COMMIT, AO_IGNORE_ERROR, 0) != 0:
            self._end(tx, False, "read batch")
        missing = rows.missing(n)
        if missing:
            # Each row not written must be a key without a row (626), not another error.
            for i, op in enumerate(ops):
                if rows.value(i) is None:
                    code, msg, _ = error_of(lib.rndb_operation_get_error(op))
                    if code != TUPLE_NOT_FOUND:
                        self._end(tx, True, "read batch")
                        raise CapiError(f"read of key {keys[i]}", code, msg)
        self._end(tx, True, "read batch")
        return n - missing

    def update(self, key: int, value: bytes) -> None:
        self._write(self.lib.rndb_transaction_update_tuple, self.rec, ((key, value),), "update")

    def update_batch(self, items: dict[int, bytes]) -> None:
        self._write(self.lib.rndb_transaction_update_tuple, self.rec, items.items(), "update batch")

    def close(self) -> None:
        if self.ndb:
            ok = self.lib.rndb_ndb_free(self.ndb) == 0
            self.ndb = None
            self._check(ok, "rndb_ndb_free", self.lib.rndb_last_error())
