//! Node restart by copy over the transport (NDB's copy fragment phase): a data node
//! that joins a running cluster starts with empty replicas and gets every row from an
//! up-to-date node of its node group while transactions go on.
//!
//! Joining node S:
//! 1. at its first view (not the cluster's first), asks the live nodes which nodes are
//!    up to date (`ReadyQuery`, repeated until a `ReadySet` from an up-to-date node);
//! 2. asks the lowest up-to-date node L of its group to copy (`CopyReq`);
//! 3. applies what L sends on one copy thread, in order: the schema (its tables made
//!    anew), then rows; each row is inserted only if S has no row with that key and
//!    no delete of that key is pending or committed at S (`tombstones`) — whatever the
//!    transactions already wrote to S is newer than the copy;
//! 4. after `CopyDone`, tells every live node it is up to date (`NodeReady`); it then
//!    serves reads and, being the youngest, is primary only when older replicas fail.
//!
//! Source L (one thread per joining node):
//! 1. `CopyMark{mark: false}` to every live node: stop sending after-images to S; each
//!    answers once none of its transactions still has S as a backup (a restarted copy
//!    starts clean);
//! 2. the schema (`CopySchema`), acknowledged;
//! 3. `CopyMark{mark: true}`: from now every primary sends S the after-images of its
//!    transactions; each node answers once every transaction it began before is over,
//!    so the rows L reads next hold every change S will not get as an after-image;
//! 4. scans every table (committed reads) and sends the rows of S's partitions in
//!    batches, at most [`COPY_WINDOW`] unacknowledged; then `CopyDone`.
//!
//! A joining backup's refusal (a primary's after-image failed at S) drops S from that
//! primary's chain and aborts the copy (`CopyAbort`): S starts over. A lost source or a
//! lost S ends the copy the same way.

use super::{DataPath, Job, err_from, err_parts};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome, ScanSpec};
use crate::error::{Result, codes};
use crate::mgm::log::Severity;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use crate::txn::lock::LockMode;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

/// Rows per `CopyRows` message.
pub const COPY_BATCH_ROWS: usize = 512;
/// Unacknowledged `CopyRows` batches, at most.
pub const COPY_WINDOW: usize = 4;
/// How long a copy step waits for an answer.
pub const COPY_STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a joining node asks who is up to date.
pub const READY_QUERY_INTERVAL_MS: u64 = 200;

/// A pending or committed delete seen by a joining node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tomb {
    Pending(TxnKey),
    Committed,
}

/// A copy thread of the source side.
pub(crate) struct CopyOut {
    attempt: u64,
    tx: SyncSender<(NodeId, DataMsg)>,
    /// Set when a newer attempt of the same joining node replaces this one.
    stop: Arc<AtomicBool>,
}

impl CopyOut {
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The joining side's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum CopyIn {
    /// Up to date (or not in a cluster).
    #[default]
    Idle,
    /// Waiting for a `ReadySet`; the next query at this loop time.
    Asking {
        next_query_ms: u64,
    },
    Copying {
        source: NodeId,
        attempt: u64,
    },
}

impl DataPath {
    /// The tombstone key of a row: database, table and the coerced key bytes.
    pub(crate) fn row_key(&self, database: &str, table: &str, key: &[Value]) -> Result<Vec<u8>> {
        let rt = self.engine.inner().table(database, table)?;
        let def = &rt.def;
        let coerced: Vec<Value> = key
            .iter()
            .zip(&def.primary_key)
            .map(|(v, &p)| {
                let c = &def.columns[p];
                crate::schema::value::coerce(v.clone(), &c.ty, &c.name)
            })
            .collect::<Result<_>>()?;
        let mut out = format!("{}\0{}\0", database.to_ascii_lowercase(), def.name).into_bytes();
        let mut kb = Vec::new();
        def.layout.key_from_values(&coerced, &mut kb);
        out.extend_from_slice(&kb);
        Ok(out)
    }

    /// This node joined a running cluster: ask who is up to date.
    pub(super) fn begin_join(&self) {
        *self.copy_in.lock() = CopyIn::Asking { next_query_ms: 0 };
    }

    /// The node loop's tick (`now_ms` of its clock).
    pub fn on_tick(&self, now_ms: u64) {
        let ask = {
            let mut c = self.copy_in.lock();
            match *c {
                CopyIn::Asking { next_query_ms } if now_ms >= next_query_ms => {
                    *c = CopyIn::Asking {
                        next_query_ms: now_ms + READY_QUERY_INTERVAL_MS,
                    };
                    true
                }
                _ => false,
            }
        };
        if ask {
            let peers: Vec<NodeId> = {
                let m = self.members.read();
                m.live.iter().copied().filter(|&n| n != self.me).collect()
            };
            for p in peers {
                self.send(p, DataMsg::ReadyQuery);
            }
        }
    }

    pub(super) fn ready_map(&self) -> Vec<(NodeId, u64)> {
        self.members
            .read()
            .ready
            .iter()
            .map(|(&n, &s)| (n, s))
            .collect()
    }

    /// A `ReadySet` from `from`: when it is up to date itself, take its map and ask
    /// the first up-to-date node of this node's group to copy.
    pub(super) fn on_ready_set(&self, from: NodeId, ready: Vec<(NodeId, u64)>) {
        if !matches!(*self.copy_in.lock(), CopyIn::Asking { .. }) {
            return;
        }
        if !ready.iter().any(|&(n, _)| n == from) {
            return;
        }
        let my_group: Vec<NodeId> = self
            .groups
            .iter()
            .find(|g| g.contains(&self.me))
            .cloned()
            .unwrap_or_default();
        let source = {
            let mut m = self.members.write();
            m.ready = ready
                .into_iter()
                .filter(|&(n, _)| n != self.me && m.live.contains(&n))
                .collect();
            m.ready_known = true;
            my_group.iter().copied().find(|n| m.ready.contains_key(n))
        };
        let Some(source) = source else {
            self.log(
                Severity::Warning,
                "No up-to-date replica of this node's group is running; waiting for one",
            );
            return;
        };
        let attempt = self
            .join_attempt
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        *self.copy_in.lock() = CopyIn::Copying { source, attempt };
        self.log(
            Severity::Info,
            &format!("Node restart: copying every row from node {source} (attempt {attempt})"),
        );
        self.send(source, DataMsg::CopyReq { attempt });
    }

    /// The copy of this node failed or its source left: start over (`attempt`: the
    /// attempt that failed; None: whatever runs).
    pub(super) fn restart_join(&self, reason: &str, attempt: Option<u64>) {
        let was = *self.copy_in.lock();
        match was {
            CopyIn::Idle => return,
            CopyIn::Copying { attempt: a, .. } if attempt.is_some_and(|x| x != a) => return,
            CopyIn::Asking { .. } if attempt.is_some() => return,
            _ => {}
        }
        self.log(
            Severity::Warning,
            &format!("Node restart copy stopped ({reason}); starting it again"),
        );
        *self.copy_in.lock() = CopyIn::Asking { next_query_ms: 0 };
    }

    /// `NodeReady`: `node` is up to date.
    pub(super) fn on_node_ready(&self, node: NodeId, seq: u64) {
        {
            let mut m = self.members.write();
            if !m.live.contains(&node) {
                return;
            }
            m.ready.insert(node, seq);
            m.joining.remove(&node);
        }
        if node == self.me {
            *self.copy_in.lock() = CopyIn::Idle;
            self.tombstones.lock().clear();
            self.log(
                Severity::Info,
                "Node restart completed: replicas up to date",
            );
        }
    }

    /// `CopyMark` from a copy source: change the joining set, then answer once the
    /// transactions that could miss (or still reach) the joining node are over.
    pub(super) fn on_copy_mark(self: &Arc<Self>, from: NodeId, node: NodeId, mark: bool) {
        let snapshot: BTreeSet<(TxnKey, bool)> = {
            // Lock order: the chain gate, then the membership, then the records.
            let _gate = self.chain_gate.write();
            {
                let mut m = self.members.write();
                if mark {
                    m.joining.insert(node);
                } else {
                    m.joining.remove(&node);
                }
            }
            self.primary_records()
        };
        let dp = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("rndbd-{}-mark", self.me))
            .spawn(move || {
                let deadline = Instant::now() + COPY_STEP_TIMEOUT;
                loop {
                    let busy = if mark {
                        dp.primary_records()
                            .intersection(&snapshot)
                            .next()
                            .is_some()
                    } else {
                        dp.has_backup_in_chain(node)
                    };
                    if !busy || Instant::now() >= deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                dp.send(from, DataMsg::CopyMarked { node, mark });
            });
        if spawned.is_err() {
            self.send(from, DataMsg::CopyMarked { node, mark });
        }
    }

    /// `CopyReq` from a joining node: start its copy thread (one per joining node).
    pub(super) fn on_copy_req(self: &Arc<Self>, joiner: NodeId, attempt: u64) {
        if !self.is_ready() {
            return self.send(
                joiner,
                DataMsg::CopyAbort {
                    attempt,
                    reason: format!("node {} is not up to date itself", self.me),
                },
            );
        }
        let (tx, rx) = sync_channel::<(NodeId, DataMsg)>(COPY_WINDOW * 4 + 256);
        let stop = Arc::new(AtomicBool::new(false));
        {
            let outs = self.copy_out.lock();
            match outs.get(&joiner) {
                Some(o) if o.attempt >= attempt => return,
                // A newer attempt: the running copy stops, this one waits for it.
                Some(o) => o.stop.store(true, Ordering::Release),
                None => {}
            }
        }
        let dp = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("rndbd-{}-copy-{joiner}", self.me))
            .spawn(move || {
                let deadline = Instant::now() + COPY_STEP_TIMEOUT;
                loop {
                    if let std::collections::btree_map::Entry::Vacant(v) =
                        dp.copy_out.lock().entry(joiner)
                    {
                        v.insert(CopyOut {
                            attempt,
                            tx,
                            stop: stop.clone(),
                        });
                        break;
                    }
                    if Instant::now() >= deadline {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let r = dp.copy_to(joiner, attempt, &stop, &rx);
                dp.copy_out.lock().remove(&joiner);
                match r {
                    Ok(rows) => dp.log(
                        Severity::Info,
                        &format!("Copied {rows} rows to node {joiner} for its restart"),
                    ),
                    Err(e) => {
                        dp.log(
                            Severity::Warning,
                            &format!("Copy to node {joiner} stopped: {e}"),
                        );
                        dp.send(
                            joiner,
                            DataMsg::CopyAbort {
                                attempt,
                                reason: e.message.clone(),
                            },
                        );
                    }
                }
            });
        if let Err(e) = spawned {
            self.log(Severity::Warning, &format!("copy thread: {e}"));
        }
    }

    /// An answer from `from` for the copy thread of `joiner` (`CopyMarked`, `CopyAck`).
    pub(super) fn to_copy_thread(&self, joiner: NodeId, from: NodeId, msg: DataMsg) {
        if let Some(o) = self.copy_out.lock().get(&joiner) {
            let _ = o.tx.try_send((from, msg));
        }
    }

    /// Marks (or unmarks) `joiner` on every live node and waits for their answers.
    fn copy_mark_all(
        &self,
        joiner: NodeId,
        mark: bool,
        rx: &Receiver<(NodeId, DataMsg)>,
    ) -> Result<()> {
        let mut waiting: BTreeSet<NodeId> = self.members.read().live.clone();
        for &n in &waiting {
            self.send(n, DataMsg::CopyMark { node: joiner, mark });
        }
        let deadline = Instant::now() + COPY_STEP_TIMEOUT;
        while !waiting.is_empty() {
            waiting.retain(|n| self.is_live(*n));
            if !self.is_live(joiner) {
                return Err(codes::node_failure_abort().detail(format!("node {joiner} left")));
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((from, DataMsg::CopyMarked { node, mark: m }))
                    if node == joiner && m == mark =>
                {
                    waiting.remove(&from);
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(codes::internal("copy channel closed"));
                }
            }
            if Instant::now() >= deadline {
                return Err(codes::request_timeout(
                    "copy: nodes did not answer CopyMark",
                ));
            }
        }
        Ok(())
    }

    fn wait_ack(
        &self,
        joiner: NodeId,
        attempt: u64,
        rx: &Receiver<(NodeId, DataMsg)>,
    ) -> Result<()> {
        let deadline = Instant::now() + COPY_STEP_TIMEOUT;
        loop {
            if !self.is_live(joiner) {
                return Err(codes::node_failure_abort().detail(format!("node {joiner} left")));
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((
                    _,
                    DataMsg::CopyAck {
                        attempt: a,
                        code,
                        class,
                        message,
                    },
                )) if a == attempt => {
                    return if code == 0 {
                        Ok(())
                    } else {
                        Err(err_from(code, class, &message))
                    };
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(codes::internal("copy channel closed"));
                }
            }
            if Instant::now() >= deadline {
                return Err(codes::request_timeout(format!(
                    "copy: node {joiner} did not acknowledge"
                )));
            }
        }
    }

    /// The schema as SQL: every database, then every table's SHOW CREATE TABLE.
    fn schema_statements(&self) -> Result<Vec<(String, String)>> {
        let tables = self.engine.inner().dict.read().all();
        let mut dbs = BTreeSet::new();
        let mut creates = Vec::new();
        for t in tables.iter().filter(|t| !t.hidden) {
            dbs.insert(t.database.clone());
            let mut s = crate::sql::Session::new(self.engine.ndb(&t.database));
            let shown = s.execute(&format!("SHOW CREATE TABLE `{}`", t.def.name))?;
            let text = match shown.first() {
                Some(crate::sql::SqlResult::Rows { rows, .. }) => {
                    match rows.first().and_then(|r| r.get(1)) {
                        Some(Value::Str(s)) => s.clone(),
                        _ => return Err(codes::internal("SHOW CREATE TABLE gave no text")),
                    }
                }
                _ => return Err(codes::internal("SHOW CREATE TABLE gave no rows")),
            };
            creates.push((t.database.clone(), text));
        }
        let mut out: Vec<(String, String)> = dbs
            .into_iter()
            .map(|d| (d.clone(), format!("CREATE DATABASE IF NOT EXISTS `{d}`")))
            .collect();
        out.extend(creates);
        Ok(out)
    }

    /// The source's side of a copy (see the module notes); the rows sent.
    fn copy_to(
        &self,
        joiner: NodeId,
        attempt: u64,
        stop: &AtomicBool,
        rx: &Receiver<(NodeId, DataMsg)>,
    ) -> Result<u64> {
        self.copy_mark_all(joiner, false, rx)?;
        self.send(
            joiner,
            DataMsg::CopySchema {
                attempt,
                statements: self.schema_statements()?,
            },
        );
        self.wait_ack(joiner, attempt, rx)?;
        self.copy_mark_all(joiner, true, rx)?;
        let several_groups = self.groups.len() > 1;
        let mut sent = 0u64;
        let mut in_flight = 0usize;
        let tables = self.engine.inner().dict.read().all();
        for t in tables.iter().filter(|t| !t.hidden) {
            let ndb = self.engine.ndb(&t.database);
            let mut tx = ndb.start_transaction()?;
            let mut spec = ScanSpec::table(t.clone());
            spec.columns = Some((0..t.def.columns.len()).collect());
            spec.batch_size = COPY_BATCH_ROWS;
            let mut scan = tx.scan(spec)?;
            while !scan.is_closed() {
                let mut rows = tx.scan_next_batch(&mut scan, COPY_BATCH_ROWS)?;
                if rows.is_empty() {
                    break;
                }
                if several_groups {
                    let pk = t.def.primary_key.clone();
                    rows.retain(|r| {
                        let key: Vec<Value> = pk.iter().map(|&p| r[p].clone()).collect();
                        super::super::remote::RemoteCluster::partition_of(&t.def, &key)
                            .map(|p| {
                                super::super::layout::replica_nodes(p, &self.groups)
                                    .contains(&joiner)
                            })
                            .unwrap_or(false)
                    });
                }
                if stop.load(Ordering::Acquire) {
                    return Err(codes::node_failure_abort().detail(format!(
                        "a newer copy attempt of node {joiner} replaced this one"
                    )));
                }
                if !self.members.read().joining.contains(&joiner) {
                    return Err(
                        codes::node_failure_abort().detail(format!("node {joiner} left the copy"))
                    );
                }
                sent += rows.len() as u64;
                self.send(
                    joiner,
                    DataMsg::CopyRows {
                        attempt,
                        database: t.database.clone(),
                        table: t.def.name.clone(),
                        rows,
                    },
                );
                in_flight += 1;
                if in_flight >= COPY_WINDOW {
                    self.wait_ack(joiner, attempt, rx)?;
                    in_flight -= 1;
                }
            }
            tx.close();
        }
        while in_flight > 0 {
            self.wait_ack(joiner, attempt, rx)?;
            in_flight -= 1;
        }
        let seq = self
            .members
            .read()
            .ready
            .values()
            .copied()
            .max()
            .unwrap_or(0)
            + 1;
        self.send(joiner, DataMsg::CopyDone { attempt, seq });
        Ok(sent)
    }

    /// The joining node's copy thread: schema, rows, done (in the order sent).
    pub(super) fn copy_apply(&self, from: NodeId, msg: DataMsg) {
        let attempt = match &msg {
            DataMsg::CopySchema { attempt, .. }
            | DataMsg::CopyRows { attempt, .. }
            | DataMsg::CopyDone { attempt, .. } => *attempt,
            _ => return,
        };
        // Messages of an earlier attempt (still queued here) are not this copy's.
        if !matches!(*self.copy_in.lock(), CopyIn::Copying { source, attempt: a } if source == from && a == attempt)
        {
            return;
        }
        let ack = |r: Result<()>| {
            let (code, class, message) = match r {
                Ok(()) => (0, 0, String::new()),
                Err(e) => err_parts(&e),
            };
            self.send(
                from,
                DataMsg::CopyAck {
                    attempt,
                    code,
                    class,
                    message,
                },
            );
        };
        match msg {
            DataMsg::CopySchema { statements, .. } => ack(self.apply_schema(&statements)),
            DataMsg::CopyRows {
                database,
                table,
                rows,
                ..
            } => ack(self.apply_rows(&database, &table, rows)),
            DataMsg::CopyDone { seq, .. } => {
                let live: Vec<NodeId> = self.members.read().live.iter().copied().collect();
                for n in live {
                    self.send(n, DataMsg::NodeReady { node: self.me, seq });
                }
            }
            _ => {}
        }
    }

    /// Drops every table of the local engine and makes the source's schema.
    fn apply_schema(&self, statements: &[(String, String)]) -> Result<()> {
        self.tombstones.lock().clear();
        let tables = self.engine.inner().dict.read().all();
        for t in tables.iter().filter(|t| !t.hidden) {
            self.engine.ndb(&t.database).drop_table(&t.def.name, true)?;
        }
        for (db, sql) in statements {
            let mut s = crate::sql::Session::new(self.engine.ndb(db));
            s.execute(sql)?;
        }
        Ok(())
    }

    /// Inserts each row that this node has not got and whose key no delete reached.
    fn apply_rows(&self, database: &str, table: &str, rows: Vec<Vec<Value>>) -> Result<()> {
        let rt = self.engine.inner().table(database, table)?;
        let pk = rt.def.primary_key.clone();
        let ndb = self.engine.ndb(database);
        for row in rows {
            if row.len() != rt.def.columns.len() {
                return Err(codes::internal("copied row has the wrong column count"));
            }
            let key: Vec<Value> = pk.iter().map(|&p| row[p].clone()).collect();
            let k = self.row_key(database, table, &key)?;
            // A delete still in flight here decides: wait for it.
            let deadline = Instant::now() + COPY_STEP_TIMEOUT;
            loop {
                match self.tombstones.lock().get(&k) {
                    Some(Tomb::Pending(_)) if Instant::now() < deadline => {}
                    Some(Tomb::Pending(_)) => {
                        return Err(codes::request_timeout("copy: a delete stayed pending"));
                    }
                    Some(Tomb::Committed) => break,
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if self.tombstones.lock().get(&k) == Some(&Tomb::Committed) {
                continue;
            }
            let key_pos: Vec<(usize, Value)> = pk.iter().copied().zip(key).collect();
            let mut attempt = 0;
            loop {
                let mut tx = ndb.start_transaction()?;
                tx.define_by_pos(
                    &rt,
                    OpKind::Read(LockMode::Exclusive),
                    key_pos.clone(),
                    Vec::new(),
                    Some(vec![pk[0]]),
                )?;
                let r = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
                let found = matches!(tx.outcome(OpId(0)), Some(OpOutcome::Row(_)));
                let lock_timeout = matches!(tx.outcome(OpId(0)), Some(OpOutcome::Failed(e)) if e.code == 266)
                    || r.as_ref().is_err_and(|e| e.code == 266);
                if lock_timeout && attempt < 5 {
                    attempt += 1;
                    tx.close();
                    continue;
                }
                if found {
                    tx.close();
                    break;
                }
                let values: Vec<(usize, Value)> = row.iter().cloned().enumerate().collect();
                tx.define_by_pos(&rt, OpKind::Insert, Vec::new(), values, None)?;
                tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
                break;
            }
        }
        Ok(())
    }

    /// Records the deletes a joining backup prepares (their keys must not come back
    /// from the copy).
    pub(super) fn note_tombstones(&self, txn: TxnKey, keys: &[Vec<u8>]) {
        let mut t = self.tombstones.lock();
        for k in keys {
            t.insert(k.clone(), Tomb::Pending(txn));
        }
    }

    /// The transaction of those deletes ended.
    pub(super) fn settle_tombstones(&self, keys: &[Vec<u8>], committed: bool) {
        let mut t = self.tombstones.lock();
        for k in keys {
            if committed {
                t.insert(k.clone(), Tomb::Committed);
            } else if matches!(t.get(k), Some(Tomb::Pending(_))) {
                t.remove(k);
            }
        }
    }

    /// Queues a copy message for the joining node's copy thread.
    pub(super) fn to_copy_worker(&self, from: NodeId, msg: DataMsg) {
        let _ = self.copy_worker.send(Job::Msg(from, msg));
    }
}
