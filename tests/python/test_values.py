"""Every value type round trip: Python -> engine -> Python, through each path."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

import rndb

COLUMNS = {
    "id": "INT NOT NULL",
    "ti": "TINYINT",
    "tu": "TINYINT UNSIGNED",
    "si": "SMALLINT",
    "mi": "MEDIUMINT",
    "i": "INT",
    "iu": "INT UNSIGNED",
    "bi": "BIGINT",
    "bu": "BIGINT UNSIGNED",
    "f": "FLOAT",
    "d": "DOUBLE",
    "dec": "DECIMAL(12,3)",
    "ch": "CHAR(10)",
    "vc": "VARCHAR(40)",
    "l1": "VARCHAR(10) CHARACTER SET latin1",
    "bin": "BINARY(4)",
    "vb": "VARBINARY(20)",
    "dt": "DATE",
    "dtm": "DATETIME",
    "ts": "TIMESTAMP",
    "tm": "TIME",
    "bl": "BLOB",
    "tx": "TEXT",
}

ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "ti": -128,
        "tu": 255,
        "si": -32768,
        "mi": 8388607,
        "i": -2147483648,
        "iu": 4294967295,
        "bi": -(2**63),
        "bu": 2**64 - 1,
        "f": 0.1,
        "d": 3.141592653589793,
        "dec": Decimal("-123456789.125"),
        "ch": "fixed",
        "vc": "héllo wörld ✓ 🚀",
        "l1": "café",
        "bin": b"\x00\x01\x02\x03",
        "vb": b"\xff\x00binary",
        "dt": dt.date(2024, 2, 29),
        "dtm": dt.datetime(1999, 12, 31, 23, 59, 58),
        "ts": dt.datetime(2038, 1, 19, 3, 14, 7),
        "tm": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
        "bl": bytes(range(256)) * 40,
        "tx": "long text ✓ " * 1000,
    },
    {
        "id": 2,
        "ti": 127,
        "tu": 0,
        "si": 32767,
        "mi": -8388608,
        "i": 2147483647,
        "iu": 0,
        "bi": 2**63 - 1,
        "bu": 0,
        "f": -2.5,
        "d": -1e300,
        "dec": Decimal("0.001"),
        "ch": "",
        "vc": "",
        "l1": "",
        "bin": b"abcd",
        "vb": b"",
        "dt": dt.date(1, 1, 1),
        "dtm": dt.datetime(9999, 12, 31, 23, 59, 59),
        "ts": dt.datetime(1970, 1, 1, 0, 0, 1),
        "tm": dt.timedelta(hours=838, minutes=59, seconds=59),
        "bl": b"",
        "tx": "",
    },
    # every nullable column NULL
    {"id": 3, **{c: None for c in COLUMNS if c != "id"}},
]


@pytest.fixture
def types_table(ndb: rndb.Ndb) -> str:
    ndb.create_table("types", COLUMNS, primary_key="id")
    return "types"


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def test_round_trip_transaction(ndb: rndb.Ndb, types_table: str) -> None:
    with ndb.transaction() as tx:
        for r in ROWS:
            tx.insert(types_table, r)
    with ndb.transaction() as tx:
        ops = [tx.read(types_table, {"id": r["id"]}) for r in ROWS]
        tx.execute(rndb.Commit)
    assert [op.row for op in ops] == ROWS
    # exact Python types, not just equal values
    row = ops[0].row
    assert row is not None
    assert type(row["dec"]) is Decimal and str(row["dec"]) == "-123456789.125"
    assert type(row["dtm"]) is dt.datetime and type(row["dt"]) is dt.date
    assert type(row["tm"]) is dt.timedelta
    assert type(row["bin"]) is bytes and type(row["vc"]) is str
    assert type(row["f"]) is float and row["f"] == 0.1
    assert type(row["bu"]) is int and row["bu"] == 18446744073709551615


def test_round_trip_batches_and_scans(ndb: rndb.Ndb, types_table: str) -> None:
    assert ndb.insert_many(types_table, ROWS) == 3
    assert ndb.read_many(types_table, [1, 2, 3, 4]) == ROWS + [None]
    assert by_id(list(ndb.scan(types_table))) == ROWS


def test_tuple_rows_and_bytearray(ndb: rndb.Ndb, types_table: str) -> None:
    assert ndb.insert_many(types_table, [(7, bytearray(b"xy"), "7")], columns=["id", "vb", "vc"]) == 1
    assert ndb.read_many(types_table, [7], columns=["vb", "vc", "i"]) == [{"vb": b"xy", "vc": "7", "i": None}]


def test_update_and_write_values(ndb: rndb.Ndb, types_table: str) -> None:
    ndb.insert_many(types_table, [ROWS[2]])
    with ndb.transaction() as tx:
        tx.update(types_table, {"id": 3, "dec": Decimal("5"), "dt": dt.date(2000, 1, 2), "bu": 2**64 - 2})
    with ndb.transaction() as tx:
        tx.write(types_table, {"id": 4, "tm": dt.timedelta(seconds=-1), "f": 1.5, "bl": b"x" * 60000 + b"y"})
    got = ndb.read_many(types_table, [3, 4], columns=["dec", "dt", "bu", "tm", "f", "bl"])
    assert got[0] == {"dec": Decimal("5.000"), "dt": dt.date(2000, 1, 2), "bu": 2**64 - 2, "tm": None, "f": None, "bl": None}
    assert got[1] is not None
    assert got[1]["tm"] == dt.timedelta(seconds=-1)
    assert got[1]["f"] == 1.5
    assert got[1]["bl"] == b"x" * 60000 + b"y"


def test_engine_coerces_compatible_values(ndb: rndb.Ndb, types_table: str) -> None:
    # the engine converts between compatible kinds: int into DOUBLE/DECIMAL, text into DATE
    ndb.insert_many(
        types_table,
        [{"id": 5, "d": 2, "dec": 7, "dt": "2020-01-02", "dtm": "2020-01-02 03:04:05", "i": True, "vc": 42}],
    )
    (row,) = ndb.read_many(types_table, [5], columns=["d", "dec", "dt", "dtm", "i", "vc"])
    assert row == {
        "d": 2.0,
        "dec": Decimal("7.000"),
        "dt": dt.date(2020, 1, 2),
        "dtm": dt.datetime(2020, 1, 2, 3, 4, 5),
        "i": 1,
        "vc": "42",
    }


@pytest.mark.parametrize(
    ("column", "value", "code"),
    [
        ("ti", 128, 4209),
        ("tu", -1, 4209),
        ("bu", 2**64, 4209),
        ("bi", -(2**63) - 1, 4209),
        ("i", 2**200, 4209),
        ("dec", Decimal("1234567890.5"), 4209),
        ("dec", Decimal("NaN"), 4217),
        ("tm", dt.timedelta(hours=839), 4209),
        ("vc", "x" * 41, 4209),
        ("l1", "€", 4217),
        ("vb", b"x" * 21, 4209),
        ("dt", "not a date", 4217),
        ("i", "abc", 4217),
        ("dt", 3.5, 4217),
        ("i", [1], 4217),
        ("i", object(), 4217),
        ("vc", {"a": 1}, 4217),
        ("d", 1 + 2j, 4217),
    ],
)
def test_out_of_range_and_wrong_types(ndb: rndb.Ndb, types_table: str, column: str, value: Any, code: int) -> None:
    with pytest.raises(rndb.NdbError) as ei:
        ndb.insert_many(types_table, [{"id": 9, column: value}])
    assert ei.value.code == code, ei.value
    assert f"'{column}'" in ei.value.message
    with pytest.raises(rndb.NdbError) as ei2, ndb.transaction() as tx:
        tx.insert(types_table, {"id": 9, column: value})
    assert ei2.value.code == code
    assert ndb.read_many(types_table, [9]) == [None]


def test_integer_like_objects(ndb: rndb.Ndb, types_table: str) -> None:
    class Idx:
        def __init__(self, v: int) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    ndb.insert_many(types_table, [{"id": Idx(11), "bu": Idx(2**64 - 1)}])
    assert ndb.read_many(types_table, [Idx(11)], columns=["id", "bu"]) == [{"id": 11, "bu": 2**64 - 1}]
