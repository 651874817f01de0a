"""rndb: an NDB-style (MySQL Cluster data node) database engine, embedded in Python.

    import rndb
    with rndb.Cluster.embedded(DataMemory="256M") as cluster:
        ndb = cluster.ndb("test")
        ndb.execute("CREATE TABLE t1 (id BIGINT UNSIGNED PRIMARY KEY, a INT) ENGINE=ndbcluster")
        with ndb.transaction() as tx:
            tx.insert("t1", {"id": 1, "a": 10})
        print(ndb.read_many("t1", [1, 2]))

``Cluster.embedded`` runs the management server and the data nodes of ``rndb_mgmd`` and
``rndbd`` in this process (over an in-process network); ``Cluster.direct`` runs the data
nodes' engines on the caller's threads (no transport, no failover).

Objects follow the NDB API: ``Cluster`` (Ndb_cluster_connection with its data nodes),
``Ndb``, ``Transaction`` (NdbTransaction), ``Operation``, ``ScanIterator``, ``Reader``
(``ndb.reader("kv", columns=["v"]).get(key)``: a prepared primary-key read). Errors are
``NdbError`` with NDB's ``code``, ``status``, ``classification`` and ``message``;
``TemporaryError``, ``PermanentError`` and ``UnknownResultError`` subclass it by status.

``rndb.connect("host:1186")`` is a management client of a distributed cluster
(``rndb_mgmd``): ``client.mgm("ALL STATUS")``, as ``ndb_mgm -c host:1186``; the same
client reaches the data nodes (``sql``, ``read_many``, ``transaction``, ``insert_many``,
``scan``, ``index_scan``).

``rndb.LocalCluster.start()`` runs that distributed cluster inside this process: the
management server and the data nodes of ``rndb_mgmd``/``rndbd`` (NDB's default layout,
or ``config_file=``), with heartbeats, failover and node restarts, over an in-process
network; ``cluster.connect()`` gives the same ``MgmClient``, ``cluster.kill_node(3)`` and
``cluster.start_node(3)`` crash and restart a node.
"""

from ._rndb import (
    AO_IgnoreError,
    AbortOnError,
    Cluster,
    Commit,
    LM_CommittedRead,
    LM_Exclusive,
    LM_Read,
    LM_SimpleRead,
    LocalCluster,
    MgmClient,
    Ndb,
    NdbError,
    NoCommit,
    Operation,
    PermanentError,
    Reader,
    RemoteScanIterator,
    RemoteTransaction,
    Rollback,
    ScanIterator,
    TemporaryError,
    Transaction,
    UnknownResultError,
    __version__,
    connect,
)

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
