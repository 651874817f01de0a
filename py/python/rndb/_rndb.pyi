"""Type stubs of the rndb extension module (hand-written; checked by mypy.stubtest)."""

import datetime
import decimal
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Literal, final

__version__: Final[str]

NoCommit: Final = 1
Commit: Final = 2
Rollback: Final = 3
LM_Read: Final = 0
LM_Exclusive: Final = 1
LM_CommittedRead: Final = 2
LM_SimpleRead: Final = 3
AbortOnError: Final = 0
AO_IgnoreError: Final = 2

#: A column value as Python sees it.
_Value = (
    None
    | int
    | float
    | str
    | bytes
    | decimal.Decimal
    | datetime.date
    | datetime.datetime
    | datetime.timedelta
)
#: A value passed in (bytearray is accepted as bytes).
_InValue = _Value | bytearray
_Row = dict[str, Any]
#: A primary key: a dict of the key columns, a tuple in key order, or a bare value.
_Key = Mapping[str, _InValue] | tuple[_InValue, ...] | list[_InValue] | _InValue
_Bound = _InValue | tuple[_InValue, ...] | list[_InValue]
_Status = Literal["TemporaryError", "PermanentError", "UnknownResult"]
_TxStateName = Literal["Open", "Committed", "Aborted", "Closed"]

class NdbError(Exception):
    """An NDB error: NDB's code, status, classification and message."""

    code: int
    status: str
    classification: str
    message: str
    mysql_code: int

class TemporaryError(NdbError): ...
class PermanentError(NdbError): ...
class UnknownResultError(NdbError): ...

@final
class Cluster:
    @staticmethod
    def embedded(
        *,
        data_dir: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        data_nodes: int | None = None,
        no_of_replicas: int | None = None,
        initial: bool = False,
        **params: str | int | bool,
    ) -> Cluster: ...
    @staticmethod
    def direct(
        *,
        data_dir: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        data_nodes: int | None = None,
        no_of_replicas: int | None = None,
        initial: bool = False,
        **params: str | int | bool,
    ) -> Cluster: ...
    def ndb(self, database: str = "test") -> Ndb: ...
    def mgm(self, command: str) -> str: ...
    def ndbinfo(self, name: str) -> list[_Row]: ...
    def close(self) -> None: ...
    def wait_durable(self, gci: int, timeout: float = 60.0) -> None: ...
    def checkpoint(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def data_node_ids(self) -> list[int]: ...
    @property
    def config_ini(self) -> str: ...
    @property
    def data_dir(self) -> pathlib.Path | None: ...
    @property
    def connectstring(self) -> str | None: ...
    def __enter__(self) -> Cluster: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

@final
class LocalCluster:
    @staticmethod
    def start(
        *,
        data_dir: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        data_nodes: int | None = None,
        no_of_replicas: int | None = None,
        initial: bool = False,
        **params: str | int | bool,
    ) -> LocalCluster: ...
    @property
    def connectstring(self) -> str: ...
    @property
    def data_dir(self) -> pathlib.Path | None: ...
    def connect(self, timeout: float = 5.0) -> MgmClient: ...
    def running_nodes(self) -> list[int]: ...
    def kill_node(self, node_id: int) -> None: ...
    def start_node(self, node_id: int, initial: bool = False) -> None: ...
    def wait_started(self, node_ids: list[int] | None = None, timeout: float = 60.0) -> None: ...
    def log_lines(self) -> list[str]: ...
    def shutdown(self) -> dict[int, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> LocalCluster: ...
    def __exit__(self, *args: object) -> Literal[False]: ...

@final
class MgmClient:
    @property
    def server_node_id(self) -> int: ...
    @property
    def node_id(self) -> int | None: ...
    @property
    def connectstring(self) -> str: ...
    def mgm(self, command: str) -> str: ...
    def close(self) -> None: ...
    def sql(self, sql: str, database: str = "test") -> str: ...
    def execute(self, sql: str, database: str = "test") -> list[_Row] | int | None: ...
    def wait_durable(self, gci: int, timeout: float = 60.0) -> None: ...
    def read_many(
        self,
        table: str,
        keys: Iterable[_Key],
        columns: Sequence[str] | None = None,
        database: str = "test",
    ) -> list[_Row | None]: ...
    def transaction(
        self,
        ops: Iterable[
            tuple[
                Literal["insert", "update", "write", "delete", "read"],
                str,
                Mapping[str, _InValue],
            ]
        ],
        database: str = "test",
    ) -> list[_Row | None]: ...
    def start_transaction(self, database: str = "test") -> RemoteTransaction: ...
    def insert_many(
        self,
        table: str,
        rows: Iterable[Mapping[str, _InValue] | Sequence[_InValue]],
        database: str = "test",
        batch_size: int = 500,
        columns: Sequence[str] | None = None,
    ) -> int: ...
    def scan(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        database: str = "test",
        batch_size: int = 256,
    ) -> RemoteScanIterator: ...
    def index_scan(
        self,
        table: str,
        index: str,
        low: _Bound | None = None,
        high: _Bound | None = None,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        descending: bool = False,
        columns: Sequence[str] | None = None,
        database: str = "test",
        batch_size: int = 256,
    ) -> RemoteScanIterator: ...
    def data_nodes(self) -> list[int]: ...
    def __enter__(self) -> MgmClient: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

def connect(connectstring: str, timeout: float = 5.0) -> MgmClient: ...

@final
class Ndb:
    @property
    def database(self) -> str: ...
    def transaction(self) -> Transaction | RemoteTransaction: ...
    def tables(self) -> list[str]: ...
    def create_table(
        self,
        name: str,
        columns: Mapping[str, str] | Iterable[tuple[str, str]],
        primary_key: str | Sequence[str] | None = None,
        indexes: Mapping[str, str | Sequence[str]] | None = None,
        unique_indexes: Mapping[str, str | Sequence[str]] | None = None,
        if_not_exists: bool = False,
        logging: bool = True,
        tablespace: str | None = None,
        storage: str | None = None,
    ) -> None: ...
    def drop_table(self, name: str, if_exists: bool = False) -> bool: ...
    def truncate_table(self, name: str) -> None: ...
    def columns(self, table: str) -> list[str]: ...
    def execute(self, sql: str) -> list[_Row] | int | None: ...
    def explain(self, sql: str) -> str: ...
    @property
    def sql_database(self) -> str: ...
    @property
    def sql_in_transaction(self) -> bool: ...
    def insert_many(
        self,
        table: str,
        rows: Iterable[Mapping[str, _InValue] | Sequence[_InValue]],
        columns: Sequence[str] | None = None,
        batch_size: int = 1000,
    ) -> int: ...
    def read_many(
        self,
        table: str,
        keys: Iterable[_Key],
        columns: Sequence[str] | None = None,
    ) -> list[_Row | None]: ...
    def reader(self, table: str, columns: Sequence[str] | None = None) -> Reader: ...
    def scan(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> ScanIterator | RemoteScanIterator: ...
    def index_scan(
        self,
        table: str,
        index: str,
        low: _Bound | None = None,
        high: _Bound | None = None,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        descending: bool = False,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> ScanIterator | RemoteScanIterator: ...

@final
class Reader:
    """A prepared committed read by primary key of fixed columns (``Ndb.reader``)."""

    @property
    def table(self) -> str: ...
    @property
    def columns(self) -> list[str]: ...
    def get(self, key: _Key) -> Any:
        """The value of the one column read, a tuple of the columns read, or None when
        no row has the key."""
    def get_many(self, keys: Iterable[_Key]) -> list[Any]: ...

@final
class Transaction:
    def insert(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def update(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def write(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def delete(self, table: str, key: Mapping[str, _InValue]) -> Operation: ...
    def read(
        self,
        table: str,
        key: _Key,
        columns: Sequence[str] | None = None,
        lock_mode: int = 0,
    ) -> Operation: ...
    def execute(self, exec_type: int = 1, abort_option: int = 0) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    def scan(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> ScanIterator: ...
    def index_scan(
        self,
        table: str,
        index: str,
        low: _Bound | None = None,
        high: _Bound | None = None,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        descending: bool = False,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> ScanIterator: ...
    @property
    def state(self) -> _TxStateName: ...
    @property
    def gci(self) -> int | None: ...
    @property
    def error(self) -> NdbError | None: ...
    @property
    def id(self) -> int: ...
    def __enter__(self) -> Transaction: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

@final
class Operation:
    @property
    def row(self) -> _Row | None: ...
    @property
    def error(self) -> NdbError | None: ...
    @property
    def executed(self) -> bool: ...
    @property
    def table(self) -> str: ...
    @property
    def kind(self) -> Literal["read", "insert", "update", "write", "delete"]: ...

@final
class RemoteTransaction:
    def insert(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def update(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def write(self, table: str, row: Mapping[str, _InValue]) -> Operation: ...
    def delete(self, table: str, key: Mapping[str, _InValue]) -> Operation: ...
    def read(
        self,
        table: str,
        key: _Key,
        columns: Sequence[str] | None = None,
        lock_mode: int = 0,
    ) -> Operation: ...
    def scan(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> RemoteScanIterator: ...
    def index_scan(
        self,
        table: str,
        index: str,
        low: _Bound | None = None,
        high: _Bound | None = None,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        descending: bool = False,
        columns: Sequence[str] | None = None,
        lock_mode: int = 2,
        batch_size: int = 256,
    ) -> RemoteScanIterator: ...
    def execute(self, exec_type: int = 1, abort_option: int = 0) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    @property
    def state(self) -> _TxStateName: ...
    @property
    def gci(self) -> int | None: ...
    @property
    def error(self) -> NdbError | None: ...
    @property
    def id(self) -> int: ...
    @property
    def tc_node(self) -> int | None: ...
    def __enter__(self) -> RemoteTransaction: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

@final
class RemoteScanIterator:
    def __iter__(self) -> RemoteScanIterator: ...
    def __next__(self) -> _Row: ...
    @property
    def columns(self) -> list[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> RemoteScanIterator: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

@final
class ScanIterator:
    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> _Row: ...
    @property
    def columns(self) -> list[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> ScanIterator: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

__all__ = [
    "AO_IgnoreError",
    "AbortOnError",
    "Cluster",
    "Commit",
    "LM_CommittedRead",
    "LM_Exclusive",
    "LM_Read",
    "LM_SimpleRead",
    "LocalCluster",
    "MgmClient",
    "Ndb",
    "NdbError",
    "NoCommit",
    "Operation",
    "PermanentError",
    "Reader",
    "RemoteScanIterator",
    "RemoteTransaction",
    "Rollback",
    "ScanIterator",
    "TemporaryError",
    "Transaction",
    "UnknownResultError",
    "__version__",
    "connect",
]
