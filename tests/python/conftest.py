"""Fixtures of the rndb Python suite: an embedded cluster per test (in tmp_path): the
node code of rndb_mgmd and rndbd in this process (`rndb.Cluster.embedded`); and the
direct engines (`rndb.Cluster.direct`), for the semantics only they have so far and
for tests run on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rndb

T1_COLUMNS = {"id": "BIGINT UNSIGNED NOT NULL", "a": "INT", "b": "VARCHAR(32)"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[rndb.Cluster]:
    """The default embedded layout (2 data nodes, NoOfReplicas=2), 64M DataMemory each,
    lock waits of 200 ms."""
    with rndb.Cluster.embedded(
        data_dir=tmp_path / "data",
        DataMemory="64M",
        TransactionDeadlockDetectionTimeout="200",
    ) as c:
        yield c


@pytest.fixture
def ndb(cluster: rndb.Cluster) -> rndb.Ndb:
    return cluster.ndb("test")


@pytest.fixture
def direct_ndb(tmp_path: Path) -> Iterator[rndb.Ndb]:
    """`ndb` on the direct engines (same layout and parameters), with t1 created."""
    with rndb.Cluster.direct(
        data_dir=tmp_path / "direct",
        DataMemory="64M",
        TransactionDeadlockDetectionTimeout="200",
    ) as c:
        ndb = c.ndb("test")
        create_t1(ndb)
        yield ndb


def create_t1(ndb: rndb.Ndb, name: str = "t1") -> None:
    """The issue's table: BIGINT UNSIGNED key, INT, VARCHAR(32), ordered index ix_a."""
    ndb.create_table(name, T1_COLUMNS, primary_key="id", indexes={"ix_a": ["a"]})


@pytest.fixture
def t1(ndb: rndb.Ndb) -> str:
    create_t1(ndb)
    return "t1"

