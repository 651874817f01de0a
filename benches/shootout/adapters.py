"""One adapter per system, all with the same interface, each on its standard Python client.

An adapter is opened from picklable parameters (ports, paths; the embedded rndb cluster
object for threads), so that extra client processes can open their own. rndb's C ABI
(cffi and ctypes) is in capi.py. Interface (adapter_base.Adapter):

* ``setup()`` creates the table (once, before ``load``); ``load(n, value)`` writes keys
  0..n-1, in the system's batched form;
* ``read(key)`` returns the value or None; ``read_batch(keys)`` returns how many keys
  were found, in one request where the system has one (MGET, get_many, a Lua function,
  ``IN (...)``, ``read_many`` / ``Reader.get_many``, one LMDB transaction with
  ``getmulti``, one transaction of NdbRecord reads for the C ABI);
* ``update(key, value)``; ``update_batch({key: value})`` in one request or transaction;
* ``close()``.

Keys are ints 0..n-1; values are bytes. Key encodings follow each system's usual form:
decimal strings for redis and memcached, 8-byte big-endian for LMDB, integers elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

from adapter_base import BATCH_LOAD, LOAD_RETRIES, Adapter
from capi import RndbCapi


class Redis(Adapter):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import redis

        self.r = redis.Redis(host="127.0.0.1", port=params["port"])

    def load(self, n: int, value: bytes) -> None:
        for s in range(0, n, BATCH_LOAD):
            self.r.mset({str(k): value for k in range(s, min(n, s + BATCH_LOAD))})

    def read(self, key: int) -> bytes | None:
        v: bytes | None = self.r.get(str(key))
        return v

    def read_batch(self, keys: list[int]) -> int:
        return sum(v is not None for v in self.r.mget([str(k) for k in keys]))

    def update(self, key: int, value: bytes) -> None:
        self.r.set(str(key), value)

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.r.mset({str(k): v for k, v in items.items()})

    def close(self) -> None:
        self.r.close()


class Memcached(Adapter):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        from pymemcache.client.base import Client

        self.c = Client(("127.0.0.1", params["port"]), no_delay=True)

    def load(self, n: int, value: bytes) -> None:
        for s in range(0, n, BATCH_LOAD):
            failed = self.c.set_many({str(k): value for k in range(s, min(n, s + BATCH_LOAD))},
                                     noreply=False)
            if failed:
                raise RuntimeError(f"memcached: {len(failed)} keys not stored (memory?)")

    def read(self, key: int) -> bytes | None:
        v: bytes | None = self.c.get(str(key))
        return v

    def read_batch(self, keys: list[int]) -> int:
        sk = [str(k) for k in keys]
        got = self.c.get_many(sk)
        return sum(k in got for k in sk)

    def update(self, key: int, value: bytes) -> None:
        self.c.set(str(key), value, noreply=False)

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.c.set_many({str(k): v for k, v in items.items()}, noreply=False)

    def close(self) -> None:
        self.c.close()


class Tarantool(Adapter):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import tarantool

        self.c = tarantool.Connection("127.0.0.1", params["port"])
        self.space = self.c.space("kv")

    def load(self, n: int, value: bytes) -> None:
        for s in range(0, n, BATCH_LOAD):
            self.c.call("mput", [[[k, value] for k in range(s, min(n, s + BATCH_LOAD))]])

    def read(self, key: int) -> bytes | None:
        r = self.space.select(key)
        return r[0][1] if r else None

    def read_batch(self, keys: list[int]) -> int:
        vals = self.c.call("mget", [keys])[0]
        return sum(v is not None for v in vals)

    def update(self, key: int, value: bytes) -> None:
        self.space.replace((key, value))

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.c.call("mput", [[[k, v] for k, v in items.items()]])

    def close(self) -> None:
        self.c.close()


class MariaDB(Adapter):
    """MariaDB Connector/Python (on Connector/C): binary protocol with server-side
    prepared statements when `prepared`, else the text protocol (client-side
    substitution)."""

    prepared = True

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import mariadb

        first = mariadb.connect(host="127.0.0.1", port=params["port"], user="root")
        first.cursor().execute("CREATE DATABASE IF NOT EXISTS bench")
        first.close()
        self.conn = mariadb.connect(host="127.0.0.1", port=params["port"], user="root",
                                    database="bench", autocommit=True)
        # One cursor per statement: with prepared=True each holds its statement prepared
        # (Connector/Python 1.1 mixes up results when one cursor alternates statements).
        self.curs: dict[str, Any] = {}
        self.batch_sql: dict[int, str] = {}

    def cur(self, sql: str, tag: str = "") -> Any:
        c = self.curs.get(tag + sql)
        if c is None:
            c = self.curs[tag + sql] = self.conn.cursor(prepared=self.prepared)
        return c

    def setup(self) -> None:
        cur = self.conn.cursor()
        cur.execute("DROP TABLE IF EXISTS kv")
        cur.execute("CREATE TABLE kv (id BIGINT PRIMARY KEY, v VARBINARY(1024) NOT NULL)"
                    " ENGINE=InnoDB")

    def load(self, n: int, value: bytes) -> None:
        cur = self.conn.cursor()
        for s in range(0, n, 10 * BATCH_LOAD):
            cur.executemany("INSERT INTO kv (id, v) VALUES (?, ?)",
                            [(k, value) for k in range(s, min(n, s + 10 * BATCH_LOAD))])

    def warm(self) -> None:
        """A full scan of the clustered index: every page in the buffer pool."""
        cur = self.conn.cursor()
        cur.execute("SELECT COUNT(*), SUM(LENGTH(v)) FROM kv")
        cur.fetchall()

    def read(self, key: int) -> bytes | None:
        cur = self.cur("SELECT v FROM kv WHERE id = ?")
        cur.execute("SELECT v FROM kv WHERE id = ?", (key,))
        row = cur.fetchone()
        return row[0] if row else None

    def read_batch(self, keys: list[int]) -> int:
        sql = self.batch_sql.get(len(keys))
        if sql is None:
            sql = "SELECT id, v FROM kv WHERE id IN (" + ",".join("?" * len(keys)) + ")"
            self.batch_sql[len(keys)] = sql
        cur = self.cur(sql)
        cur.execute(sql, tuple(keys))
        found = {r[0] for r in cur.fetchall()}
        return sum(k in found for k in keys)

    def update(self, key: int, value: bytes) -> None:
        self.cur("UPDATE kv SET v = ? WHERE id = ?").execute(
            "UPDATE kv SET v = ? WHERE id = ?", (value, key))

    def update_batch(self, items: dict[int, bytes]) -> None:
        sql = "UPDATE kv SET v = ? WHERE id = ?"
        self.cur(sql, "many:").executemany(sql, [(v, k) for k, v in items.items()])

    def close(self) -> None:
        self.conn.close()


class MariaDBText(MariaDB):
    prepared = False


class SQLite(Adapter):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import sqlite3

        self.db = sqlite3.connect(f"{params['path']}/kv.db", isolation_level=None,
                                  check_same_thread=False)
        for pragma in ["journal_mode=WAL", "synchronous=OFF", "cache_size=-4000000",
                       "mmap_size=17179869184"]:
            self.db.execute(f"PRAGMA {pragma}")

    def setup(self) -> None:
        self.db.execute("CREATE TABLE kv (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")

    def load(self, n: int, value: bytes) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO kv VALUES (?, ?)", ((k, value) for k in range(n)))
        self.db.execute("COMMIT")

    def warm(self) -> None:
        self.db.execute("SELECT COUNT(*), SUM(LENGTH(v)) FROM kv").fetchall()

    def read(self, key: int) -> bytes | None:
        row = self.db.execute("SELECT v FROM kv WHERE id = ?", (key,)).fetchone()
        return row[0] if row else None

    def read_batch(self, keys: list[int]) -> int:
        sql = "SELECT id, v FROM kv WHERE id IN (" + ",".join("?" * len(keys)) + ")"
        found = {r[0] for r in self.db.execute(sql, keys)}
        return sum(k in found for k in keys)

    def update(self, key: int, value: bytes) -> None:
        self.db.execute("UPDATE kv SET v = ? WHERE id = ?", (value, key))

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("UPDATE kv SET v = ? WHERE id = ?", [(v, k) for k, v in items.items()])
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


class LMDB(Adapter):
    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import lmdb

        self.env = lmdb.open(params["path"], map_size=64 << 30, sync=False, metasync=False,
                             max_readers=64, readahead=False)

    def load(self, n: int, value: bytes) -> None:
        for s in range(0, n, 100_000):
            with self.env.begin(write=True) as txn:
                txn.cursor().putmulti(
                    ((k.to_bytes(8, "big"), value) for k in range(s, min(n, s + 100_000))),
                    append=True)

    def read(self, key: int) -> bytes | None:
        with self.env.begin() as txn:
            v: bytes | None = txn.get(key.to_bytes(8, "big"))
            return v

    def read_batch(self, keys: list[int]) -> int:
        with self.env.begin() as txn:
            return len(txn.cursor().getmulti([k.to_bytes(8, "big") for k in keys]))

    def update(self, key: int, value: bytes) -> None:
        with self.env.begin(write=True) as txn:
            txn.put(key.to_bytes(8, "big"), value)

    def update_batch(self, items: dict[int, bytes]) -> None:
        with self.env.begin(write=True) as txn:
            for k, v in items.items():
                txn.put(k.to_bytes(8, "big"), v)

    def close(self) -> None:
        self.env.close()


class RndbEmbedded(Adapter):
    """The embedded cluster through the Python module (`Ndb`); extra clients are threads
    on the same cluster (the module releases the GIL in the engine). Reads go through a
    prepared reader (`ndb.reader("kv", columns=["v"])`: `get` returns the value itself,
    `get_many` a list), made once the table exists."""

    worker = "thread"

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.ndb = params["cluster"].ndb("test")
        if "kv" in self.ndb.tables():  # an extra client: the table is there
            self._prepare()

    def setup(self) -> None:
        self.ndb.create_table("kv", {"id": "BIGINT NOT NULL", "v": "VARBINARY(1024) NOT NULL"},
                              primary_key="id")
        self._prepare()

    def _prepare(self) -> None:
        reader = self.ndb.reader("kv", columns=["v"])
        # reader.get(key) is the whole read (the value or None): it is the adapter's
        # read, with no Python frame around it.
        self.read = reader.get  # type: ignore[method-assign]
        self.get_many = reader.get_many

    def load(self, n: int, value: bytes) -> None:
        """insert_many, one transaction of 1000 rows per call, so that a temporary error
        (410: the redo log is full until a checkpoint frees it, when loading outpaces
        checkpoints) is retried for that transaction alone, as an NDB application does."""
        import rndb

        for s in range(0, n, BATCH_LOAD):
            rows = [(k, value) for k in range(s, min(n, s + BATCH_LOAD))]
            for attempt in range(LOAD_RETRIES):
                try:
                    self.ndb.insert_many("kv", rows, columns=["id", "v"], batch_size=BATCH_LOAD)
                    break
                except rndb.TemporaryError:
                    if attempt == LOAD_RETRIES - 1:
                        raise
                    time.sleep(0.1)

    def read(self, key: int) -> bytes | None:
        raise RuntimeError("rndb-embedded: read before the table exists")

    def read_batch(self, keys: list[int]) -> int:
        got = self.get_many(keys)
        return len(got) - got.count(None)

    def update(self, key: int, value: bytes) -> None:
        with self.ndb.transaction() as tx:
            tx.update("kv", {"id": key, "v": value})

    def update_batch(self, items: dict[int, bytes]) -> None:
        with self.ndb.transaction() as tx:
            for k, v in items.items():
                tx.update("kv", {"id": k, "v": v})


class RndbCluster(Adapter):
    """rndb_mgmd + rndbd processes through `rndb.connect` (the client's data path over TCP)."""

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        import rndb

        self.c = rndb.connect(params["connectstring"], timeout=10.0)

    def setup(self) -> None:
        self.c.sql("CREATE TABLE kv (id BIGINT PRIMARY KEY, v VARBINARY(1024) NOT NULL) ENGINE=NDB")

    def load(self, n: int, value: bytes) -> None:
        """insert_many in calls of 1000 rows (one transaction each): a temporary error (410:
        a data node's redo log is full until its checkpoint frees it) is retried for that
        call alone, as an NDB application does."""
        import rndb

        for s in range(0, n, BATCH_LOAD):
            rows = [{"id": k, "v": value} for k in range(s, min(n, s + BATCH_LOAD))]
            for attempt in range(LOAD_RETRIES):
                try:
                    self.c.insert_many("kv", rows, batch_size=BATCH_LOAD)
                    break
                except rndb.TemporaryError:
                    if attempt == LOAD_RETRIES - 1:
                        raise
                    time.sleep(0.1)

    def read(self, key: int) -> bytes | None:
        r = self.c.read_many("kv", [key], columns=["v"])[0]
        return r["v"] if r else None

    def read_batch(self, keys: list[int]) -> int:
        return sum(r is not None for r in self.c.read_many("kv", keys, columns=["v"]))

    def update(self, key: int, value: bytes) -> None:
        self.c.transaction([("update", "kv", {"id": key, "v": value})])

    def update_batch(self, items: dict[int, bytes]) -> None:
        self.c.transaction([("update", "kv", {"id": k, "v": v}) for k, v in items.items()])

    def close(self) -> None:
        self.c.close()


ADAPTERS: dict[str, type[Adapter]] = {
    "rndb-embedded": RndbEmbedded,
    "rndb-embedded-capi": RndbCapi,
    "rndb-cluster-r2": RndbCluster,
    "rndb-cluster-r1": RndbCluster,
    "redis": Redis,
    "memcached": Memcached,
    "tarantool": Tarantool,
    "mariadb-prepared": MariaDB,
    "mariadb-text": MariaDBText,
    "sqlite": SQLite,
    "lmdb": LMDB,
}
