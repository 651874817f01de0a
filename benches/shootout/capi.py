"""rndb embedded through its C ABI (librndb.so, capi/include/rndb.h), driven with ctypes.

The shootout's system ``rndb-embedded-capi``: the same embedded cluster as
``rndb-embedded`` (two data nodes, NoOfReplicas=2, in this process), started by the
connectstring ``embedded;datadir=...;DataMemory=...`` and used through the NDB API's
NdbRecord calls, as a C program would (capi/examples/ndbapi_record.cpp):

* a key record over ``id`` (BIGINT, 8 bytes at offset 0) and a value record over ``v``
  (VARBINARY(1024): a 2-byte little-endian length, then the bytes; 1026 bytes a row);
* a single read: ``startTransaction``, ``readTuple(key_rec, key, val_rec, row,
  LM_CommittedRead)``, ``execute(Commit)``, ``closeTransaction`` — four C calls;
* a batched read: one transaction, one ``readTuple`` per key into its own row of one
  result buffer, one ``execute(Commit, AO_IgnoreError)``: the C ABI runs a transaction
  of committed key reads as one engine batch (capi/src/batch.rs). A row that was not
  found keeps the length 0xFFFF written before the call (no VARBINARY(1024) is that
  long), so a batch costs one C call per key plus three, and nothing per column;
* updates (single, or all of a batch in one transaction) with ``updateTuple``, the
  load with ``insertTuple`` in transactions of 1000 rows. Key and value rows are
  copied by the call that defines the operation, so one buffer of each serves a batch.

Every return code is checked; a failure raises ``CapiError`` with the NdbError's code
and message. The library is ``$RNDB_LIB``, else ``librndb.so`` of the release build
(``$CARGO_TARGET_DIR``, else ``target/``).
"""

from __future__ import annotations

import ctypes
import os
from array import array
from ctypes import POINTER, Structure, c_char_p, c_int, c_uint32, c_void_p
from pathlib import Path
from typing import Any

from adapter_base import Adapter

ROOT = Path(__file__).resolve().parents[2]

# Values of rndb.h's enums (NDB's).
COMMIT = 2
ABORT_ON_ERROR = 0
AO_IGNORE_ERROR = 2
LM_COMMITTED_READ = 2
TUPLE_NOT_FOUND = 626
NO_SUCH_TABLE = 723

KEY_SIZE = 8
VALUE_MAX = 1024
ROW = 2 + VALUE_MAX  # a VARBINARY(1024) value: 2-byte length, then the bytes
ROW_H = ROW // 2  # the row stride in uint16 units
MISSING = 0xFFFF  # a length no VARBINARY(1024) value has: "no row written here"
LOAD_BATCH = 1000

CREATE_KV = ("CREATE TABLE kv (id BIGINT NOT NULL PRIMARY KEY, "
             "v VARBINARY(1024) NOT NULL) ENGINE=NDB")


class CapiError(RuntimeError):
    """A failed C ABI call: the NdbError's code and message."""

    def __init__(self, what: str, code: int, message: str) -> None:
        super().__init__(f"{what}: error {code}: {message}")
        self.code = code
        self.message = message


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


def error_of(err: Any) -> tuple[int, str]:
    """(code, message) of an ``rndb_error*``."""
    if not err:
        return -1, "no error object"
    e = err.contents
    return e.code, (e.message or b"").decode("utf-8", "replace")


def u16_rows(n: int) -> array:
    """A result buffer of `n` value rows, each row's length set to MISSING."""
    buf = array("H", bytes(n * ROW))
    buf[::ROW_H] = array("H", [MISSING]) * n
    return buf


def address(buf: array) -> int:
    addr: int = buf.buffer_info()[0]
    return addr


class CapiCluster:
    """The embedded cluster through the C ABI: the connection (started by connect)."""

    def __init__(self, data_dir: str, data_memory_mb: int, lib_path: Path | None = None) -> None:
        self.lib = load(lib_path)
        cs = f"embedded;datadir={data_dir};DataMemory={data_memory_mb}M".encode()
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
    """The shootout adapter (the interface of adapters.Adapter): one ``rndb_ndb`` per
    instance; extra clients are threads with their own (the connection is shared, as
    NDB allows; ctypes releases the GIL in each C call)."""

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
        self.key_rec = self.val_rec = None
        self.kbuf = array("q", [0])  # one key row: copied by the call that uses it
        self.vbuf = bytearray(ROW)  # one value row: likewise
        self.vbuf_c = (ctypes.c_char * ROW).from_buffer(self.vbuf)
        self.vaddr = ctypes.addressof(self.vbuf_c)
        self.vlast: bytes | None = None
        self.kaddr = address(self.kbuf)
        self.one = u16_rows(1)  # the result row of a single read
        self.one_addr = address(self.one)
        self.one_bytes = memoryview(self.one).cast("B")
        self.rows = u16_rows(LOAD_BATCH)
        # The calls of the single read, looked up once.
        self._start_tx = lib.rndb_ndb_start_transaction
        self._read_tuple = lib.rndb_transaction_read_tuple
        self._execute = lib.rndb_transaction_execute
        self._close_tx = lib.rndb_ndb_close_transaction
        self._records(if_exists=True)  # an extra client: the table is there

    def _check(self, ok: Any, what: str, err: Any) -> None:
        if not ok:
            raise CapiError(what, *error_of(err))

    def _records(self, if_exists: bool = False) -> None:
        """The key and value records of kv (after the table exists; `if_exists`: none
        made, no error, when it does not)."""
        lib = self.lib
        d = lib.rndb_ndb_get_dictionary(self.ndb)
        self._check(d, "rndb_ndb_get_dictionary", lib.rndb_ndb_get_error(self.ndb))
        t = lib.rndb_dict_get_table(d, b"kv")
        if not t and if_exists and error_of(lib.rndb_dict_get_error(d))[0] == NO_SUCH_TABLE:
            return
        self._check(t, "rndb_dict_get_table(kv)", lib.rndb_dict_get_error(d))
        recs = []
        for col in (b"id", b"v"):
            c = lib.rndb_table_get_column_by_name(t, col)
            self._check(c, f"rndb_table_get_column_by_name({col!r})", lib.rndb_last_error())
            spec = RecordSpec(c, 0, 0, 0, 0)
            r = lib.rndb_dict_create_record(d, t, ctypes.byref(spec), 1, ctypes.sizeof(RecordSpec))
            self._check(r, "rndb_dict_create_record", lib.rndb_dict_get_error(d))
            recs.append(r)
        self.key_rec, self.val_rec = recs

    def setup(self) -> None:
        ok = self.lib.rndb_execute_sql(self.ndb, CREATE_KV.encode(), None) >= 0
        self._check(ok, "CREATE TABLE kv", self.lib.rndb_ndb_get_error(self.ndb))
        self._records()

    def _ensure_records(self) -> None:
        if self.key_rec is None:
            self._records()

    def _start(self) -> Any:
        tx = self.lib.rndb_ndb_start_transaction(self.ndb)
        if not tx:
            raise CapiError("rndb_ndb_start_transaction", *error_of(self.lib.rndb_ndb_get_error(self.ndb)))
        return tx

    def _end(self, tx: Any, ok: bool, what: str, op: Any = None) -> None:
        """Raises the transaction's (or operation's) error when not `ok`, and closes it."""
        lib = self.lib
        err = None if ok else error_of(lib.rndb_transaction_get_error(tx) if op is None
                                       else lib.rndb_operation_get_error(op))
        if lib.rndb_ndb_close_transaction(self.ndb, tx) != 0 and err is None:
            err = error_of(lib.rndb_ndb_get_error(self.ndb))
            what = "rndb_ndb_close_transaction"
        if err is not None:
            raise CapiError(what, *err)

    def _set_value(self, value: bytes) -> None:
        if value is not self.vlast:
            n = len(value)
            if n > VALUE_MAX:
                raise CapiError("value", 4209, f"{n} bytes for VARBINARY({VALUE_MAX})")
            self.vbuf[0:2] = n.to_bytes(2, "little")
            self.vbuf[2:2 + n] = value
            self.vlast = value

    def _write(self, define: Any, items: Any, what: str) -> None:
        """One transaction of writes (insert or update) of (key, value) pairs, committed."""
        lib, kbuf, kaddr = self.lib, self.kbuf, self.kaddr
        krec, vrec, vaddr = self.key_rec, self.val_rec, self.vaddr
        tx = self._start()
        try:
            for k, v in items:
                kbuf[0] = k
                self._set_value(v)
                if not define(tx, krec, kaddr, vrec, vaddr, None):
                    break
            else:
                ok = lib.rndb_transaction_execute(tx, COMMIT, ABORT_ON_ERROR, 0) == 0
                self._end(tx, ok, what)
                return
        except BaseException:
            lib.rndb_ndb_close_transaction(self.ndb, tx)
            raise
        self._end(tx, False, what)

    def load(self, n: int, value: bytes) -> None:
        self._ensure_records()
        ins = self.lib.rndb_transaction_insert_tuple
        for s in range(0, n, LOAD_BATCH):
            self._write(ins, ((k, value) for k in range(s, min(n, s + LOAD_BATCH))), "insert")

    def read(self, key: int) -> bytes | None:
        ndb, one = self.ndb, self.one
        self.kbuf[0] = key
        one[0] = MISSING
        tx = self._start_tx(ndb)
        if not tx:
            raise CapiError("rndb_ndb_start_transaction", *error_of(self.lib.rndb_ndb_get_error(ndb)))
        if not self._read_tuple(tx, self.key_rec, self.kaddr, self.val_rec, self.one_addr,
                                LM_COMMITTED_READ, None):
            self._end(tx, False, "rndb_transaction_read_tuple")
        if self._execute(tx, COMMIT, ABORT_ON_ERROR, 0) != 0:
            code, msg = error_of(self.lib.rndb_transaction_get_error(tx))
            self._end(tx, True, "read")
            if code == TUPLE_NOT_FOUND:
                return None
            raise CapiError("read", code, msg)
        if self._close_tx(ndb, tx) != 0:
            raise CapiError("rndb_ndb_close_transaction", *error_of(self.lib.rndb_ndb_get_error(ndb)))
        return self.one_bytes[2:2 + one[0]].tobytes()

    def read_batch(self, keys: list[int]) -> int:
        lib, n = self.lib, len(keys)
        if n > len(self.rows) // ROW_H:
            self.rows = u16_rows(n)
        rows = self.rows
        rows[: n * ROW_H: ROW_H] = array("H", [MISSING]) * n
        karr = array("q", keys)
        kaddr, raddr = address(karr), address(rows)
        krec, vrec, rt = self.key_rec, self.val_rec, lib.rndb_transaction_read_tuple
        ops = []
        tx = self._start()
        for i in range(n):
            op = rt(tx, krec, kaddr + KEY_SIZE * i, vrec, raddr + ROW * i, LM_COMMITTED_READ, None)
            if not op:
                self._end(tx, False, "rndb_transaction_read_tuple")
            ops.append(op)
        if lib.rndb_transaction_execute(tx, COMMIT, AO_IGNORE_ERROR, 0) != 0:
            self._end(tx, False, "read batch")
        missing = rows[: n * ROW_H: ROW_H].count(MISSING)
        if missing:
            # Each row not written must be a key without a row (626), not another error.
            for i in range(n):
                if rows[i * ROW_H] == MISSING:
                    code, msg = error_of(lib.rndb_operation_get_error(ops[i]))
                    if code != TUPLE_NOT_FOUND:
                        self._end(tx, True, "read batch")
                        raise CapiError(f"read of key {keys[i]}", code, msg)
        self._end(tx, True, "read batch")
        return n - missing

    def update(self, key: int, value: bytes) -> None:
        self._write(self.lib.rndb_transaction_update_tuple, ((key, value),), "update")

    def update_batch(self, items: dict[int, bytes]) -> None:
        self._write(self.lib.rndb_transaction_update_tuple, items.items(), "update batch")

    def close(self) -> None:
        if self.ndb:
            ok = self.lib.rndb_ndb_free(self.ndb) == 0
            self.ndb = None
            self._check(ok, "rndb_ndb_free", self.lib.rndb_last_error())
