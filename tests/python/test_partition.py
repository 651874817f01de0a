"""Partitions made by stopping a process's traffic (SIGSTOP), with real `rndb_mgmd` and
`rndbd` processes on loopback (issue 7).

A SIGSTOPped process keeps its TCP connections open but answers nothing: to the others
it is a hung node or the far side of a network partition, which heartbeats must catch
(a killed process, in `test_connect.py`, closes its connections instead). The tests
check what `docs/cluster.md` §3–4 promise:

- two data nodes of one node group, one stopped for longer than 3 heartbeats: the
  other asks the arbitrator (the management server), wins and continues; the stopped
  node, resumed, finds itself excluded and shuts down (rndbd has no angel: the
  process ends with status 1, and the test starts it again as an operator or NDB's
  angel would); it rejoins by copy;
- four data nodes in two node groups, one stopped: the others hold a whole node group
  and continue without asking the arbitrator;
- the arbitrator stopped together with one data node: the other data node cannot ask
  anyone, and shuts down after ArbitrationTimeout rather than risk a split.

Under every partition three writer threads (on disjoint keys, so that one waiting on
the stopped node does not hold up the others) keep committing small transactions of
idempotent writes (`v` = the transaction's round number) to keys the test knows, each
keeping a model of what was acknowledged. Temporary errors (4010 node failure, 4035 starting, ...) and
unknown outcomes (4012) are retried with the same writes until they succeed, so either
outcome of an unknown one ends with the same value; any other error fails the test.
Between transactions each writer reads its keys back and checks them against its model
(no stale read from a node that was cut off: a resumed node answered reads from its
stale replicas before the clients learned the views of the data nodes). The writes
may pause only until the survivors install their view (4 heartbeats, and the
arbitrator's answer), not until the stopped node resumes. At the end every key must
hold exactly the model's value on each node of the group (read once more after the
other node is killed). `RNDB_STOP_S` sets how long a node stays stopped (1.5 s)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Literal

import pytest

import rndb
from test_connect import binaries, connect_when_up, free_port, wait_for

# Codes a client may see while a node fails and restarts: node failure (4010), request
# time-out / outcome unknown (4012), starting (4035), cluster failure while reconnecting
# (4009), and NDB's 266 (time-out in a lock wait on a takeover).
RETRYABLE = {4009, 4010, 4012, 4035, 266}
# How long one client request may wait for its answer.
CLIENT_TIMEOUT_S = 2.0
HEARTBEAT_MS = 100
STOP_S = float(os.environ.get("RNDB_STOP_S", "1.5"))


class Cluster:
    """`rndb_mgmd` and `rndbd` processes of one test, each with its own output file."""

    def __init__(self, d: Path, data_nodes: list[int], extra: str = "") -> None:
        self.d = d
        self.port = free_port()
        self.mgmd_bin, self.ndbd_bin = binaries()
        # Node groups form in node id order, NoOfReplicas nodes each (NDB's rule).
        ndbd = "".join(f"[ndbd]\nNodeId={n}\nHostName=127.0.0.1\n" for n in data_nodes)
        cfg = (
            "[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\n"
            f"HeartbeatIntervalDbDb={HEARTBEAT_MS}\n{extra}DataDir={d}\n"
            f"[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nPortNumber={self.port}\nDataDir={d}\n"
            f"{ndbd}[mysqld]\n"
        )
        (d / "config.ini").write_text(cfg)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.lives: dict[str, int] = {}
        self.stopped: set[int] = set()
        self.loads: list[Load] = []

    def load(self, client: rndb.MgmClient, keys: int) -> Load:
        """A write load on `keys` keys, stopped when the cluster is closed."""
        load = Load(client, keys)
        self.loads.append(load)
        load.start()
        return load

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        life = self.lives.get(name, 0) + 1
        self.lives[name] = life
        with open(self.d / f"{name}-{life}.out", "wb") as out:
            p = subprocess.Popen(
                list(args), cwd=self.d, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        self.procs[name] = p
        return p

    def output(self, name: str) -> str:
        return (self.d / f"{name}-{self.lives[name]}.out").read_text(errors="replace")

    def start_mgmd(self) -> rndb.MgmClient:
        self.spawn("mgmd", str(self.mgmd_bin), "-f", str(self.d / "config.ini"))
        return connect_when_up(self.port)

    def start_node(self, n: int) -> subprocess.Popen[bytes]:
        return self.spawn(
            f"ndbd{n}", str(self.ndbd_bin), "-c", f"127.0.0.1:{self.port}", f"--ndb-nodeid={n}"
        )

    def pause(self, name: str) -> None:
        p = self.procs[name]
        os.kill(p.pid, signal.SIGSTOP)
        self.stopped.add(p.pid)

    def resume(self, name: str) -> None:
        p = self.procs[name]
        os.kill(p.pid, signal.SIGCONT)
        self.stopped.discard(p.pid)

    def cluster_log(self) -> str:
        path = self.d / "ndb_1_cluster.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        """Ends the load, then every process still running (SIGCONT first)."""
        for load in self.loads:
            load.abandon()
        for p in self.procs.values():
            if p.poll() is None:
                if p.pid in self.stopped:
                    os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait(timeout=10)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(data_nodes: list[int], extra: str = "") -> Cluster:
        c = Cluster(tmp_path, data_nodes, extra)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def started(c: rndb.MgmClient, *ids: int) -> Callable[[], bool]:
    return lambda: all(f"Node {i}: started" in c.mgm("ALL STATUS") for i in ids)


class GaveUp(Exception):
    """The writer was told to stop retrying."""


def is_retryable(e: rndb.NdbError) -> bool:
    return e.code in RETRYABLE or e.status in ("TemporaryError", "UnknownResult")


@dataclass
class Writer:
    """One thread committing transactions of a few idempotent writes to its own keys
    until stopped; see the module notes. `acked` is its model: key -> value of the
    last acknowledged write."""

    client: rndb.MgmClient
    keys: list[int]
    seed: int
    per_txn: int = 4
    retry_for_s: float = 25.0
    acked: dict[int, int] = field(default_factory=dict)
    # key -> (time acknowledged, value): what a failure message shows.
    history: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    commits: list[float] = field(default_factory=list)
    errors: list[tuple[float, int, str]] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    # Set when the cluster is known to be gone: the writer stops retrying and the
    # transaction it was retrying becomes `unknown` (key -> the value it would write).
    give_up: threading.Event = field(default_factory=threading.Event)
    unknown: dict[int, int] = field(default_factory=dict)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.acked = {k: 0 for k in self.keys}
        self.thread = threading.Thread(target=self.run, name=f"writer-{self.seed}", daemon=True)
        self.thread.start()

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(timeout=self.retry_for_s + 10)
        assert not self.thread.is_alive(), "the writer hangs"
        assert not self.failures, self.failures

    def retrying(self, what: str, call: Callable[[], object]) -> object:
        """`call` until it succeeds; temporary errors and unknown outcomes are noted and
        retried, anything else is raised."""
        deadline = time.monotonic() + self.retry_for_s
        while True:
            try:
                return call()
            except rndb.NdbError as e:
                if not is_retryable(e):
                    raise AssertionError(f"{what}: a permanent error: {e}") from e
                self.errors.append((time.monotonic(), e.code, str(e)))
                if self.give_up.is_set():
                    raise GaveUp() from e
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what}: still failing after {self.retry_for_s} s: {e}")
                time.sleep(0.02)

    def run(self) -> None:
        rng = random.Random(self.seed)
        r = 0
        try:
            while not self.stop.is_set():
                r += 1
                ks = rng.sample(self.keys, self.per_txn)
                ops: list[tuple[Literal["write"], str, dict[str, int | None]]] = [
                    ("write", "kv", {"id": k, "v": r}) for k in ks
                ]
                try:
                    self.retrying(f"transaction {r}", lambda: self.client.transaction(ops))
                except GaveUp:
                    self.unknown = {k: r for k in ks}
                    return
                now = time.monotonic()
                for k in ks:
                    self.acked[k] = r
                    self.history.setdefault(k, []).append((now, r))
                self.commits.append(now)
                if r % 3 == 0:
                    self.check_reads(rng.sample(self.keys, 16))
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            self.failures.append(e)

    def check_reads(self, ks: list[int]) -> None:
        """Reads of this writer's own keys must return what it last committed."""
        t0 = time.monotonic()
        try:
            got = self.retrying("read", lambda: self.client.read_many("kv", ks))
        except GaveUp:
            return
        t1 = time.monotonic()
        assert isinstance(got, list)
        for k, row in zip(ks, got):
            v = None if row is None else row["v"]
            if v != self.acked[k]:
                self.stale.append(
                    f"key {k}: read {v}, acknowledged {self.acked[k]}"
                    f" (read from {t0:.2f} to {t1:.2f})"
                )


@dataclass
class Load:
    """`writers` writer threads on disjoint keys (key % writers), so that one waiting
    for a stopped node does not hold up the others."""

    client: rndb.MgmClient
    keys: int
    writers: int = 3
    ws: list[Writer] = field(default_factory=list)
    # (time, what happened): the test's steps, for failure messages.
    marks: list[tuple[float, str]] = field(default_factory=list)

    def mark(self, what: str) -> None:
        self.marks.append((time.monotonic(), what))

    def timeline(self, keys: list[int]) -> str:
        """The test's steps and the acknowledged writes of `keys`, in time order."""
        events = list(self.marks)
        for w in self.ws:
            for k in keys:
                events += [(t, f"key {k} = {v} acknowledged") for t, v in w.history.get(k, [])]
        t0 = self.marks[0][0] if self.marks else 0.0
        return "; ".join(f"{t - t0:+.3f} {e}" for t, e in sorted(events)[-40:])

    def start(self) -> None:
        self.ws = [
            Writer(self.client, [k for k in range(self.keys) if k % self.writers == i], seed=i)
            for i in range(self.writers)
        ]
        for w in self.ws:
            w.start()

    def finish(self, give_up: bool = False) -> None:
        for w in self.ws:
            w.stop.set()
            if give_up:
                w.give_up.set()
        for w in self.ws:
            w.join()

    def abandon(self) -> None:
        """Stops the writers without judging them (a test that failed)."""
        for w in self.ws:
            w.stop.set()
            w.give_up.set()
        for w in self.ws:
            if w.thread is not None:
                w.thread.join(timeout=CLIENT_TIMEOUT_S + 2)

    def commits(self) -> list[float]:
        return sorted(t for w in self.ws for t in w.commits)

    def acked(self) -> dict[int, int]:
        return {k: v for w in self.ws for k, v in w.acked.items()}

    def errors(self) -> list[tuple[float, int, str]]:
        return sorted(e for w in self.ws for e in w.errors)

    def longest_pause(self, since: float, until: float) -> float:
        ts = [since, *[t for t in self.commits() if since <= t <= until], until]
        return max(b - a for a, b in zip(ts, ts[1:]))

    def summary(self, since: float, until: float) -> str:
        errs = self.errors()
        return (
            f"commits {len(self.commits())}, errors {sorted({e[1] for e in errs})} x{len(errs)},"
            f" longest pause {self.longest_pause(since, until):.2f} s"
        )

    def check_only_retryable(self) -> None:
        codes = sorted({code for _, code, _ in self.errors()})
        assert set(codes) <= RETRYABLE, codes
        stale = [s for w in self.ws for s in w.stale]
        assert not stale, f"stale reads: {stale[:10]}"

    def check_model(self, who: str) -> None:
        """Every key holds the model's value; a transaction a writer gave up on
        committed on all its keys or on none."""
        acked = self.acked()
        keys = list(range(self.keys))
        got = self.ws[0].retrying(f"reading every key ({who})", lambda: self.client.read_many("kv", keys))
        assert isinstance(got, list)
        unknown = {k: v for w in self.ws for k, v in w.unknown.items()}
        wrong = [
            f"key {k}: has {None if row is None else row['v']}, acknowledged {acked[k]}"
            for k, row in enumerate(got)
            if row is None or row["v"] not in (acked[k], unknown.get(k, acked[k]))
        ]
        bad = [k for k, row in enumerate(got) if row is None or row["v"] != acked[k]]
        assert not wrong, (
            f"{who}: {len(wrong)} keys differ from the model: {wrong[:10]}; "
            f"timeline: {self.timeline(bad[:2])}"
        )
        for w in self.ws:
            if w.unknown:
                outcomes = {got[k]["v"] == v for k, v in w.unknown.items()}
                assert len(outcomes) == 1, f"{who}: a transaction half committed: {w.unknown}"


def setup_table(c: rndb.MgmClient, keys: int) -> None:
    assert "Query OK" in c.sql("CREATE TABLE kv (id INT PRIMARY KEY, v INT) ENGINE=NDB")
    assert c.insert_many("kv", ({"id": k, "v": 0} for k in range(keys))) == keys


def kill_and_check_alone(cl: Cluster, c: rndb.MgmClient, load: Load, kill: int, alone: int) -> None:
    """Kills data node `kill` and reads every key with `alone` serving its group."""
    p = cl.procs[f"ndbd{kill}"]
    p.kill()
    p.wait(timeout=10)
    wait_for(f"node {kill} seen gone", 20, lambda: f"Node {kill}: not connected" in c.mgm("ALL STATUS"))
    wait_for(f"the client sees node {kill} gone", 10, lambda: kill not in c.data_nodes())
    load.check_model(f"node {alone} alone")


def start_under_load(cl: Cluster, nodes: list[int], keys: int) -> tuple[rndb.MgmClient, Load]:
    """Starts the management server and `nodes`, creates the table of `keys` rows and
    starts the writers; returns once they have committed."""
    c = cl.start_mgmd()
    for n in nodes:
        cl.start_node(n)
    wait_for(f"data nodes {nodes} started", 30, started(c, *nodes))
    c.close()
    c = rndb.connect(f"127.0.0.1:{cl.port}", timeout=CLIENT_TIMEOUT_S)
    setup_table(c, keys)
    load = cl.load(c, keys)
    time.sleep(1.0)
    assert len(load.commits()) > 5, "the writers commit before the partition"
    return c, load


def partition_and_rejoin(
    cl: Cluster,
    c: rndb.MgmClient,
    load: Load,
    stopped: int,
    decided: str,
    survivors: list[int],
) -> tuple[str, str]:
    """SIGSTOPs data node `stopped` for STOP_S under the load: the survivors must
    decide (`decided` appears in the cluster log), the client must learn that the
    node is out while it is still stopped, and writes must go on before it resumes.
    Resumed, the node must shut down without installing a view; started again, it
    rejoins by copy. Returns a summary of the load and the cluster log as it was just
    before the node resumed."""
    name = f"ndbd{stopped}"
    load.mark(f"SIGSTOP node {stopped}")
    cl.pause(name)
    t_stop = time.monotonic()
    wait_for("the survivors decide", 3, lambda: decided in cl.cluster_log())
    t_won = time.monotonic()
    # Every survivor reports its new view to the client before it commits in it.
    wait_for("the client learns the node is out", 1, lambda: c.data_nodes() == survivors)
    n = len(load.commits())
    wait_for("writes go on while the node is stopped", 1, lambda: len(load.commits()) > n + 10)
    assert time.monotonic() - t_stop < STOP_S, "the survivors took longer than the stop"
    time.sleep(max(0.0, STOP_S - (time.monotonic() - t_stop)))
    log = cl.cluster_log()
    assert f"Node {stopped} declared dead due to missed heartbeats" in log, log
    members = ", ".join(map(str, survivors))
    assert f"Cluster membership: nodes {members} (president {survivors[0]})" in log, log
    status = c.mgm("ALL STATUS")
    assert all(f"Node {n}: started" in status for n in survivors), status
    log_before = cl.cluster_log()
    load.mark(f"SIGCONT node {stopped}")
    cl.resume(name)
    t_cont = time.monotonic()

    # Resumed, the node learns it was excluded and shuts down (rndbd has no angel).
    rc = cl.procs[name].wait(timeout=10)
    t_exit = time.monotonic()
    out = cl.output(name)
    assert rc == 1, (rc, out)
    assert "Forced node shutdown completed" in out, out
    # Whatever it tried before it learned it is out (it may count messages queued
    # while it was stopped as signs of life, and ask the arbitrator), it never
    # installed a view after its first.
    assert out.count("Cluster membership:") == 1, out
    wait_for(
        f"node {stopped} seen gone",
        10,
        lambda: f"Node {stopped}: not connected" in c.mgm("ALL STATUS"),
    )
    n = len(load.commits())
    wait_for("writes go on without the node", 10, lambda: len(load.commits()) > n + 5)
    t_alone = time.monotonic()

    load.mark(f"starting node {stopped} again")
    cl.start_node(stopped)
    every = sorted([*survivors, stopped])
    wait_for(f"node {stopped} started again after its copy", 30, started(c, *every))
    load.mark(f"node {stopped} seen started")
    wait_for("the client reaches every node", 10, lambda: c.data_nodes() == every)
    n = len(load.commits())
    wait_for("writes go on with every node", 10, lambda: len(load.commits()) > n + 5)
    load.finish()
    load.mark("writers stopped")
    load.check_only_retryable()
    pause = load.longest_pause(t_stop, t_alone)
    # The pause lasts until the survivors install their view (4 heartbeats, and the
    # arbitrator's answer), not until the stopped node resumes.
    assert pause < STOP_S, pause
    during = len([t for t in load.commits() if t_won < t < t_cont])
    summary = (
        f"{load.summary(t_stop, t_alone)}, {during} commits while node {stopped} was"
        f" stopped, its exit {t_exit - t_cont:.2f} s after SIGCONT"
    )
    return summary, log_before


def test_sigstop_one_of_two_nodes_arbitrator_decides_and_the_node_rejoins_by_copy(
    make_cluster: Callable[..., Cluster],
) -> None:
    """One node group {2, 3}: node 3 stopped; node 2 holds no whole group, asks the
    arbitrator, wins, and goes on alone."""
    cl = make_cluster([2, 3])
    c, load = start_under_load(cl, [2, 3], keys=400)

    summary, log = partition_and_rejoin(
        cl, c, load, stopped=3, decided="Arbitrator (node 1) decided: this side wins", survivors=[2]
    )
    print(summary)
    assert "Lost contact with node 3; the other side may be running too; asking the arbitrator (node 1)" in log, log
    assert "Arbitration: nodes 2 (president 2) continue" in log, log
    load.check_model("the cluster")
    kill_and_check_alone(cl, c, load, kill=2, alone=3)
    c.close()


def test_sigstop_the_president_of_four_nodes_the_side_with_a_whole_group_continues(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Groups {2, 3} and {4, 5}: node 2 (the president) stopped; 3, 4 and 5 hold group 1
    completely and continue without the arbitrator, node 3 taking over as president."""
    cl = make_cluster([2, 3, 4, 5])
    c, load = start_under_load(cl, [2, 3, 4, 5], keys=400)

    summary, log = partition_and_rejoin(
        cl,
        c,
        load,
        stopped=2,
        decided="Lost contact with node 2; this side holds node group 1 completely; continuing",
        survivors=[3, 4, 5],
    )
    print(summary)
    assert "asking the arbitrator" not in log, log
    load.check_model("the cluster")
    # The restarted node 2 must hold group 0's rows alone.
    kill_and_check_alone(cl, c, load, kill=3, alone=2)
    c.close()


def test_sigstop_the_arbitrator_with_a_data_node_the_other_shuts_down_rather_than_split(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Two data nodes, one group: the management server (the arbitrator) and node 3
    stopped together. Node 2 holds no whole group and nobody answers its arbitration
    request: after ArbitrationTimeout it shuts down (arbitration code 48). Resumed,
    node 3 asks the arbitrator with the same ticket: at most one side may go on, and if
    node 3 does, it holds every acknowledged row."""
    cl = make_cluster([2, 3], extra="ArbitrationTimeout=1000\n")
    c, load = start_under_load(cl, [2, 3], keys=200)

    cl.pause("mgmd")
    cl.pause("ndbd3")
    t_stop = time.monotonic()
    rc2 = cl.procs["ndbd2"].wait(timeout=6)
    t_down = time.monotonic() - t_stop
    out2 = cl.output("ndbd2")
    assert rc2 == 1, (rc2, out2)
    assert "Node 3 declared dead due to missed heartbeats" in out2, out2
    assert "Arbitrator (node 1) did not answer within 1000 ms; shutting down" in out2, out2
    assert "arbitration code 48" in out2, out2
    # 4 heartbeats to declare node 3 dead, then ArbitrationTimeout (and the debug
    # build's slack).
    assert 1.3 < t_down < 4.0, t_down
    assert "Cluster membership: nodes 2 (president 2)" not in out2, out2
    # Nothing can commit without node 3 while node 2 has not left it out of a view.
    late = [t - t_stop for t in load.commits() if t > t_stop + 0.2]
    assert not late, f"commits acknowledged {late[:5]} s after the stop"

    # The arbitrator first (it reads node 2's request, queued while it was stopped),
    # then node 3.
    cl.resume("mgmd")
    time.sleep(0.3)
    cl.resume("ndbd3")
    p3 = cl.procs["ndbd3"]
    try:
        rc3: int | None = p3.wait(timeout=3)
    except subprocess.TimeoutExpired:
        rc3 = None
    out3 = cl.output("ndbd3")
    log = cl.cluster_log()
    print(f"node 2 down {t_down:.2f} s after the stop; node 3: exit {rc3}")
    if rc3 is None:
        # Node 3 won: it must be the only member, and hold every acknowledged row.
        assert "Arbitrator (node 1) decided: this side wins; continuing with nodes 3" in out3, out3
        assert "Arbitration: nodes 3 (president 3) continue" in log, log
        load.finish()
        load.check_only_retryable()
        load.check_model("node 3 alone")
    else:
        assert rc3 == 1, (rc3, out3)
        assert "Forced node shutdown completed" in out3, out3
        # The arbitrator granted the round to node 2's request, which it read first.
        assert "arbitration code 47" in out3, out3
        assert "Arbitration: nodes 3 (president 3) continue" not in log, log
        load.finish(give_up=True)
        load.check_only_retryable()
    c.close()
