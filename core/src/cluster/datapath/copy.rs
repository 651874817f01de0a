//! Node restart by copy over the transport (NDB's copy fragment phase): a data node
//! that joins a running cluster starts with empty replicas and gets every row from an
//! up-to-date node of its node group while transactions go on.
//!
//! Joining node S:
//! 1. at its first view (not the cluster's first), asks the live nodes which nodes are
//!    up to date (`ReadyQuery`, repeated until a `ReadySet` from an up-to-date node);
//! 2. asks the lowest up-to-date node L of its group to copy (`CopyReq`);
//! 3. applies what L sends in order on its copy thread ([`ApplyQueue`]): the schema
//!    (its disk objects and tables made anew), then rows; each row is inserted only if S has no row with
//!    that key and no delete of that key is committed at S (`tombstones`) — whatever
//!    the transactions already wrote to S is newer than the copy; a row whose key has
//!    a delete pending or is locked by a transaction waits (the queue stops there and
//!    goes on at a later tick) until that transaction ends;
//! 4. after `CopyDone`, tells every live node it is up to date (`NodeReady`); it then
//!    serves reads and, being the youngest, is primary only when older replicas fail.
//!
//! The rows S applies from the copy (and the deletes of a delta copy) are committed
//! without redo ([`Transaction::set_unlogged`](crate::api::Transaction)), as NDB's
//! copy fragment does not log at the starting node: an initial node restart of a
//! large node would otherwise fill its redo log with the copy (410 at 1 GB with the
//! default log) while the transactions' after-images need it. So S's files restore it
//! only from a local checkpoint that starts after the copy: at `CopyDone` S asks its
//! engine for one at once, and only when it has completed does S write its
//! complete-from mark (until then the mark says "not complete", and a system restart
//! takes S's rows from its peers). A new join before that clears the wait.
//!
//! A node that restored its own checkpoint first (a node restart with its files, the
//! start plan's choice) offers it in `CopyReq` and keeps the tables that did not
//! change shape; of those the source sends only the rows changed since, and the node
//! deletes at the end the rows the source no longer has (`copy_delta`). The offer
//! holds for one attempt: a copy that started over copies every row.
//!
//! Source L (a state machine per joining node on its copy thread, `copy_out`):
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
//! lost S ends the copy the same way, and so does a step that makes no progress for
//! [`COPY_STEP_TIMEOUT_MS`] of the node's clock.
//!
//! Lock order: `copy_apply` (the copy thread's), then what `DataPath` documents.

use super::copy_delta::{DeltaApply, Offer};
use super::{DataPath, Job, err_parts};
use crate::api::{AbortOption, ExecType, OpId, OpKind, OpOutcome};
use crate::error::{Result, codes};
use crate::mgm::log::Severity;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use crate::txn::lock::LockMode;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering;

/// Rows per `CopyRows` message.
pub const COPY_BATCH_ROWS: usize = 512;
/// Unacknowledged `CopyRows` batches, at most.
pub const COPY_WINDOW: usize = 4;
/// How long a copy step may go without progress (node clock).
pub const COPY_STEP_TIMEOUT_MS: u64 = 60_000;
/// Jobs waiting for the copy thread, at most (the protocol keeps far fewer in flight).
pub const COPY_QUEUE: usize = 1024;
/// Messages of one copy waiting at the joining node, at most: the window, the schema,
/// `CopyDone` (more is a broken source, and ends the copy).
pub const APPLY_QUEUE_MAX: usize = COPY_WINDOW + 2;
/// How often a joining node asks who is up to date.
pub const READY_QUERY_INTERVAL_MS: u64 = 200;

/// A pending or committed delete seen by a joining node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tomb {
    Pending(TxnKey),
    Committed,
}

/// What the joining node still has to apply, in order (the copy thread's).
#[derive(Default)]
pub(crate) struct ApplyQueue {
    msgs: VecDeque<(NodeId, DataMsg)>,
    /// Rows of the first `CopyRows` already applied.
    next_row: usize,
    /// Since when the first message waits for a transaction (node clock).
    blocked_since_ms: Option<u64>,
    /// The offer sent with the current attempt's `CopyReq`, until its schema comes.
    offer: Option<Offer>,
    /// A copy of changed rows only: what it kept and saw (`copy_delta`).
    delta: Option<DeltaApply>,
}

/// How far a `CopyRows` got.
pub(crate) enum Applied {
    Done,
    /// Row `n` waits for a transaction on its key.
    Blocked(usize),
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

/// A finished copy waiting for the local checkpoint that makes this node's files
/// restorable again (see the module notes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilesPending {
    /// The checkpoint ticket (`ClusterInner::request_lcp`).
    pub lcp_ticket: u32,
}

/// The start of every row key of a table: its database (lower case) and name.
pub(crate) fn row_key_prefix(database: &str, table: &str) -> Vec<u8> {
    format!("{}\0{}\0", database.to_ascii_lowercase(), table).into_bytes()
}

/// [`DataPath::row_key`]'s bytes — the database in lower case, the table's name, each
/// NUL-terminated, then the coerced primary key as the table's layout encodes it — for
/// many keys of one table, reusing its buffers (no allocation per key).
pub(crate) struct RowKeyEncoder<'a> {
    rt: &'a crate::api::TableRuntime,
    coerced: Vec<Value>,
    key: Vec<u8>,
    bytes: Vec<u8>,
    prefix_len: usize,
}

impl<'a> RowKeyEncoder<'a> {
    pub(crate) fn new(rt: &'a crate::api::TableRuntime, database: &str) -> RowKeyEncoder<'a> {
        let bytes = row_key_prefix(database, &rt.def.name);
        RowKeyEncoder {
            rt,
            coerced: Vec::new(),
            key: Vec::new(),
            prefix_len: bytes.len(),
            bytes,
        }
    }

    /// The row key of `key` (its primary-key values in key order).
    pub(crate) fn encode(&mut self, key: &[Value]) -> Result<&[u8]> {
        let def = &self.rt.def;
        self.coerced.clear();
        for (v, &p) in key.iter().zip(&def.primary_key) {
            let c = &def.columns[p];
            self.coerced
                .push(crate::schema::value::coerce(v.clone(), &c.ty, &c.name)?);
        }
        def.layout.key_from_values(&self.coerced, &mut self.key);
        self.bytes.truncate(self.prefix_len);
        self.bytes.extend_from_slice(&self.key);
        Ok(&self.bytes)
    }
}

impl DataPath {
    /// The tombstone key of a row: database, table and the coerced key bytes.
    pub(crate) fn row_key(&self, database: &str, table: &str, key: &[Value]) -> Result<Vec<u8>> {
        let rt = self.engine.inner().table(database, table)?;
        Self::row_key_of(&rt, database, key)
    }

    /// [`DataPath::row_key`] of a table already looked up.
    pub(crate) fn row_key_of(
        rt: &crate::api::TableRuntime,
        database: &str,
        key: &[Value],
    ) -> Result<Vec<u8>> {
        RowKeyEncoder::new(rt, database)
            .encode(key)
            .map(<[u8]>::to_vec)
    }

    /// The lineage of the history this node's rows belong to (`cluster::start_plan`).
    pub fn lineage(&self) -> u64 {
        self.lineage.load(Ordering::Acquire)
    }

    /// This node's file-system directory (`DataDir/ndb_<id>_fs`; None: diskless).
    pub(crate) fn fs_dir(&self) -> Option<std::path::PathBuf> {
        let dir = self.start.data_dir.as_ref()?;
        Some(dir.join(format!("ndb_{}_fs", self.me)))
    }

    /// This node joined a running cluster: ask who is up to date.
    pub(super) fn begin_join(&self) {
        // From now until the copy ends this node's saved checkpoints hold a part of
        // the rows only (`cluster::start_plan`). An earlier copy's wait for its local
        // checkpoint ends here: that copy's rows are not this one's.
        let mut pending = self.files_pending.lock();
        *pending = None;
        self.mark_complete_from(crate::cluster::start_plan::NOT_COMPLETE);
        drop(pending);
        *self.copy_in.lock() = CopyIn::Asking { next_query_ms: 0 };
    }

    /// Writes this node's complete-from mark (nothing without a file system). A
    /// failure stops the node: a later system restart could otherwise take a partial
    /// copy for a complete one.
    pub(super) fn mark_complete_from(&self, gci: u32) {
        let Some(fs_dir) = self.fs_dir() else {
            return;
        };
        if let Err(e) = crate::cluster::start_plan::write_complete_from(
            &crate::disk::io::OsFileSystem,
            &fs_dir,
            gci,
            self.lineage.load(Ordering::Acquire),
        ) {
            let text = format!("Forced node shutdown: writing the complete-from mark: {e}");
            self.log(crate::mgm::log::Severity::Alert, &text);
            self.fatal.lock().get_or_insert(text);
        }
    }

    /// A transaction of the copy's apply: committed without redo (module notes).
    pub(super) fn copy_transaction(&self, database: &str) -> Result<crate::api::Transaction> {
        let mut tx = self.engine.ndb(database).start_transaction()?;
        tx.set_unlogged();
        Ok(tx)
    }

    /// The copy's rows are in memory only: ask the engine for a local checkpoint, and
    /// write the complete-from mark when it has completed (`files_tick`).
    fn await_files(&self) {
        if self.start.data_dir.is_none() {
            return;
        }
        let lcp_ticket = self.engine.inner().request_lcp();
        *self.files_pending.lock() = Some(FilesPending { lcp_ticket });
    }

    /// Once the local checkpoint after a copy has completed: every row copied is in
    /// it, and every later change in the redo after its keep, so the checkpoints from
    /// the current one on restore this node.
    fn files_tick(&self) {
        let mut pending = self.files_pending.lock();
        let Some(p) = *pending else { return };
        if !self.engine.inner().lcp_completed_since(p.lcp_ticket) {
            return;
        }
        *pending = None;
        let from = self.gcp_current_hi();
        self.mark_complete_from(from);
        drop(pending);
        self.log(
            Severity::Info,
            &format!(
                "Node {}: the local checkpoint after the copy completed; this node's files \
                 restore it from GCI {from}",
                self.me
            ),
        );
    }

    /// The node loop's tick (`now_ms` of its clock).
    pub fn on_tick(&self, now_ms: u64) {
        self.clock_ms.fetch_max(now_ms, Ordering::AcqRel);
        self.files_tick();
        self.lease_tick(now_ms);
        self.scan_expire(now_ms);
        self.check_marks();
        self.gcp_tick(now_ms);
        let copying = matches!(*self.copy_in.lock(), CopyIn::Copying { .. })
            || !self.copy_out.lock().is_empty();
        if copying {
            match &self.copy_worker {
                Some(w) => {
                    if !self.copy_tick_queued.swap(true, Ordering::AcqRel)
                        && w.try_send(Job::CopyTick).is_err()
                    {
                        self.copy_tick_queued.store(false, Ordering::Release);
                    }
                }
                None => self.run_copy_job(Job::CopyTick),
            }
        }
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
            let peers = self.other_live_nodes();
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
        // The node's own checkpoint, while its tables are still as restored.
        let since_gci = (*self.delta_offer.lock()).unwrap_or(0);
        let keep: Vec<(String, String)> = if since_gci > 0 {
            match self.table_statements() {
                Ok(t) => t.into_iter().map(|(db, _, sql)| (db, sql)).collect(),
                Err(e) => {
                    self.log(
                        Severity::Warning,
                        &format!("Node restart: listing the restored tables failed ({e}); copying every row"),
                    );
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let since_gci = if keep.is_empty() { 0 } else { since_gci };
        self.copy_apply.lock().offer = (since_gci > 0).then(|| Offer {
            attempt,
            since_gci,
            keep: keep.clone(),
        });
        *self.copy_in.lock() = CopyIn::Copying { source, attempt };
        let text = if since_gci > 0 {
            format!(
                "Node restart: copying from node {source} the rows changed since GCI {since_gci} \
                 (attempt {attempt})"
            )
        } else {
            format!("Node restart: copying every row from node {source} (attempt {attempt})")
        };
        self.log(Severity::Info, &text);
        let lineage = self.lineage.load(Ordering::Acquire);
        self.send(
            source,
            DataMsg::CopyReq {
                attempt,
                since_gci,
                lineage,
                keep,
            },
        );
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

    /// A job of the copy thread (or inline): both sides' messages and the tick.
    pub(super) fn run_copy_job(&self, job: Job) {
        match job {
            Job::CopyTick => {
                self.copy_tick_queued.store(false, Ordering::Release);
                self.out_tick();
                self.in_drain();
            }
            Job::Msg(
                from,
                DataMsg::CopyReq {
                    attempt,
                    since_gci,
                    lineage,
                    keep,
                },
            ) => self.out_begin(from, attempt, since_gci, lineage, keep),
            Job::Msg(from, DataMsg::CopyMarked { node, mark }) => self.out_marked(from, node, mark),
            Job::Msg(
                from,
                DataMsg::CopyAck {
                    attempt,
                    code,
                    class,
                    message,
                },
            ) => self.out_ack(from, attempt, Self::ack_error(code, class, &message)),
            Job::Msg(
                from,
                DataMsg::CopyRecheck {
                    attempt,
                    database,
                    table,
                    buckets,
                },
            ) => self.out_recheck(from, attempt, database, table, buckets),
            Job::Msg(from, m) => self.in_copy_msg(from, m),
            _ => {}
        }
    }

    /// Every visible table as (database, table name, SHOW CREATE TABLE text).
    pub(super) fn table_statements(&self) -> Result<Vec<(String, String, String)>> {
        let tables = self.engine.inner().dict.read().all();
        let mut out = Vec::new();
        for t in tables.iter().filter(|t| !t.hidden) {
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
            out.push((t.database.clone(), t.def.name.clone(), text));
        }
        Ok(out)
    }

    /// The schema as SQL: the disk objects (database ""), every database, then every
    /// table's SHOW CREATE TABLE.
    pub(super) fn schema_statements(&self) -> Result<Vec<(String, String)>> {
        let disk = self.engine.inner().disk_dict.lock().create_statements();
        let tables = self.table_statements()?;
        let dbs: BTreeSet<String> = tables.iter().map(|(db, _, _)| db.clone()).collect();
        let mut out: Vec<(String, String)> = disk
            .into_iter()
            .flat_map(|(_, stmts)| stmts)
            .map(|sql| (String::new(), sql))
            .collect();
        out.extend(
            dbs.into_iter()
                .map(|d| (d.clone(), format!("CREATE DATABASE IF NOT EXISTS `{d}`"))),
        );
        out.extend(tables.into_iter().map(|(db, _, sql)| (db, sql)));
        Ok(out)
    }

    /// A copy message for this node (`CopySchema`, `CopyRows`, `CopyDigest`,
    /// `CopyDone`): queued in the order sent, then applied as far as possible.
    fn in_copy_msg(&self, from: NodeId, msg: DataMsg) {
        let Some(attempt) = Self::copy_attempt(&msg) else {
            return;
        };
        if !self.copying_from(from, attempt) {
            return;
        }
        let overflow = {
            let mut q = self.copy_apply.lock();
            q.msgs.push_back((from, msg));
            q.msgs.len() > APPLY_QUEUE_MAX
        };
        if overflow {
            self.copy_apply.lock().msgs.clear();
            self.ack(
                from,
                attempt,
                Err(codes::internal(format!(
                    "copy: more than {APPLY_QUEUE_MAX} messages unacknowledged"
                ))),
            );
            return;
        }
        self.in_drain();
    }

    fn copy_attempt(msg: &DataMsg) -> Option<u64> {
        match msg {
            DataMsg::CopySchema { attempt, .. }
            | DataMsg::CopyRows { attempt, .. }
            | DataMsg::CopyDigest { attempt, .. }
            | DataMsg::CopyDone { attempt, .. } => Some(*attempt),
            _ => None,
        }
    }

    /// Whether this node's current copy is attempt `attempt` from `source`.
    fn copying_from(&self, source: NodeId, attempt: u64) -> bool {
        matches!(*self.copy_in.lock(), CopyIn::Copying { source: s, attempt: a } if s == source && a == attempt)
    }

    fn ack(&self, to: NodeId, attempt: u64, r: Result<()>) {
        let (code, class, message) = match r {
            Ok(()) => (0, 0, String::new()),
            Err(e) => err_parts(&e),
        };
        self.send(
            to,
            DataMsg::CopyAck {
                attempt,
                code,
                class,
                message,
            },
        );
    }

    /// Applies the queued copy messages in order until one must wait.
    fn in_drain(&self) {
        let mut guard = self.copy_apply.lock();
        let q = &mut *guard;
        while let Some((from, msg)) = q.msgs.front() {
            let (from, attempt) = (*from, Self::copy_attempt(msg).unwrap_or(0));
            // Messages of an earlier attempt (the copy started over) are not this copy's.
            if !self.copying_from(from, attempt) {
                q.msgs.pop_front();
                q.next_row = 0;
                q.blocked_since_ms = None;
                continue;
            }
            if q.delta.as_ref().is_some_and(|d| d.attempt != attempt) {
                q.delta = None;
            }
            let r = match msg {
                DataMsg::CopySchema { statements, .. } => {
                    let offer = q.offer.take().filter(|o| o.attempt == attempt);
                    let r = self.apply_schema(statements, offer).map(|d| q.delta = d);
                    q.msgs.pop_front();
                    self.ack(from, attempt, r);
                    continue;
                }
                DataMsg::CopyRows {
                    database,
                    table,
                    full_rows,
                    rows,
                    ..
                } => match q.delta.as_mut().filter(|d| d.kept(database, table)) {
                    Some(d) => self.apply_delta_rows(
                        d,
                        database,
                        table,
                        *full_rows as usize,
                        rows,
                        q.next_row,
                    ),
                    None if (*full_rows as usize) < rows.len() => Err(codes::internal(format!(
                        "copy: keys without rows for {database}.{table}, which this node \
                         does not keep"
                    ))),
                    None => self.apply_rows_from(database, table, rows, q.next_row),
                },
                DataMsg::CopyDigest {
                    database,
                    table,
                    buckets,
                    first,
                    entries,
                    ..
                } => match q.delta.as_mut() {
                    Some(d) => {
                        self.apply_digest(d, from, database, table, *buckets, *first, entries)
                    }
                    None => Err(codes::internal(format!(
                        "copy: a digest of {database}.{table}, which this node does not keep"
                    ))),
                },
                DataMsg::CopyDone { .. } => match q.delta.as_mut() {
                    Some(d) => self.sweep_delta(d),
                    None => Ok(Applied::Done),
                },
                _ => {
                    q.msgs.pop_front();
                    continue;
                }
            };
            match r {
                Ok(Applied::Done) => {
                    q.next_row = 0;
                    q.blocked_since_ms = None;
                    if let Some((_, DataMsg::CopyDone { seq, lineage, .. })) = q.msgs.pop_front() {
                        let delta = q.delta.take();
                        self.copy_done(seq, lineage, delta);
                    } else {
                        self.ack(from, attempt, Ok(()));
                    }
                }
                Ok(Applied::Blocked(n)) => {
                    let now = self.now_ms();
                    q.next_row = n;
                    let since = *q.blocked_since_ms.get_or_insert(now);
                    if now.saturating_sub(since) < COPY_STEP_TIMEOUT_MS {
                        return;
                    }
                    q.msgs.clear();
                    self.ack(
                        from,
                        attempt,
                        Err(codes::request_timeout(
                            "copy: a row stayed locked by a transaction",
                        )),
                    );
                }
                Err(e) => {
                    let done = matches!(q.msgs.front(), Some((_, DataMsg::CopyDone { .. })));
                    q.msgs.clear();
                    q.delta = None;
                    if done {
                        // The source has finished: this side starts over.
                        let reason = format!("finishing the copy failed: {e}");
                        self.restart_join(&reason, Some(attempt));
                    } else {
                        self.ack(from, attempt, Err(e));
                    }
                }
            }
        }
    }

    /// Every row is in: take the source's lineage, write the complete-from mark and
    /// tell every live node this node is up to date.
    fn copy_done(&self, seq: u64, lineage: u64, delta: Option<DeltaApply>) {
        *self.delta_touched.lock() = None;
        if let Some(d) = delta {
            self.log(
                Severity::Info,
                &format!(
                    "Node restart copy: {} of {} tables kept from GCI {}; {} rows changed since \
                     applied, {} unchanged rows kept, {} rows gone at the source deleted; \
                     {} of {} digest buckets differed, {} keys compared ({} ms)",
                    d.kept_tables(),
                    self.engine
                        .inner()
                        .dict
                        .read()
                        .all()
                        .iter()
                        .filter(|t| !t.hidden)
                        .count(),
                    d.since_gci,
                    d.rows_whole,
                    d.rows_kept,
                    d.rows_deleted,
                    d.buckets_differing,
                    d.buckets_compared,
                    d.keys_received,
                    self.now_ms().saturating_sub(d.started_ms)
                ),
            );
        }
        self.lineage.store(lineage, Ordering::Release);
        // The rows copied are not in the redo log: the files count again after the
        // next local checkpoint.
        self.await_files();
        let live: Vec<NodeId> = self.members.read().live.iter().copied().collect();
        for n in live {
            self.send(n, DataMsg::NodeReady { node: self.me, seq });
        }
    }

    /// Makes the source's schema. With an offer for this attempt, a table offered
    /// whose SHOW CREATE TABLE text the source has too is kept with its rows (the
    /// returned [`DeltaApply`] names them); every other table is dropped and made
    /// anew. The offer holds once: a later attempt copies every row. Disk objects this
    /// node already has (it restarted in place, keeping its engine: they came from the
    /// same DDL) are kept; the others are made, files and all, in this node's own
    /// file-system directory.
    fn apply_schema(
        &self,
        statements: &[(String, String)],
        offer: Option<Offer>,
    ) -> Result<Option<DeltaApply>> {
        self.tombstones.lock().clear();
        *self.delta_offer.lock() = None;
        *self.delta_touched.lock() = None;
        let source: BTreeSet<(String, String)> = statements.iter().cloned().collect();
        let offered: BTreeSet<(String, String)> = offer
            .as_ref()
            .map(|o| o.keep.iter().cloned().collect())
            .unwrap_or_default();
        let now_ms = self.now_ms();
        let mut delta = offer.map(|o| DeltaApply::new(o.attempt, o.since_gci, now_ms));
        let mut kept_sql = BTreeSet::new();
        let here = if delta.is_some() {
            self.table_statements()?
        } else {
            let tables = self.engine.inner().dict.read().all();
            tables
                .iter()
                .filter(|t| !t.hidden)
                .map(|t| (t.database.clone(), t.def.name.clone(), String::new()))
                .collect()
        };
        for (db, name, sql) in here {
            let pair = (db.clone(), sql);
            if let Some(d) = delta.as_mut()
                && offered.contains(&pair)
                && source.contains(&pair)
            {
                d.keep_table(&db, &name);
                kept_sql.insert(pair);
                continue;
            }
            self.engine.ndb(&db).drop_table(&name, true)?;
        }
        let have: BTreeSet<String> = {
            let d = self.engine.inner().disk_dict.lock();
            d.logfile_group
                .iter()
                .map(|g| g.name.to_ascii_lowercase())
                .chain(d.tablespaces.keys().cloned())
                .collect()
        };
        for (db, sql) in statements {
            if crate::api::disk_sql::object_of(sql)
                .is_some_and(|o| have.contains(&o.to_ascii_lowercase()))
                || kept_sql.contains(&(db.clone(), sql.clone()))
            {
                continue;
            }
            let mut s = crate::sql::Session::new(self.engine.ndb(db));
            s.execute(sql)?;
        }
        let mut delta = delta.filter(|d| d.kept_tables() > 0);
        if let Some(d) = delta.as_mut() {
            self.fold_restored(d)?;
        }
        // Before the copy mark: the after-images to note come after it.
        *self.delta_touched.lock() = delta.as_ref().map(DeltaApply::touched);
        Ok(delta)
    }

    /// Inserts, from row `start` on, each row that this node has not got and whose
    /// key no committed delete reached; stops at a row whose key a transaction holds.
    fn apply_rows_from(
        &self,
        database: &str,
        table: &str,
        rows: &[Vec<Value>],
        start: usize,
    ) -> Result<Applied> {
        let rt = self.engine.inner().table(database, table)?;
        let pk = rt.def.primary_key.clone();
        for (n, row) in rows.iter().enumerate().skip(start) {
            if row.len() != rt.def.columns.len() {
                return Err(codes::internal("copied row has the wrong column count"));
            }
            let key: Vec<Value> = pk.iter().map(|&p| row[p].clone()).collect();
            let k = self.row_key(database, table, &key)?;
            match self.tombstones.lock().get(&k) {
                Some(Tomb::Pending(_)) => return Ok(Applied::Blocked(n)),
                Some(Tomb::Committed) => continue,
                None => {}
            }
            let key_pos: Vec<(usize, Value)> = pk.iter().copied().zip(key).collect();
            let mut tx = self.copy_transaction(database)?;
            tx.define_by_pos(
                &rt,
                OpKind::Read(LockMode::Exclusive),
                key_pos,
                Vec::new(),
                Some(vec![pk[0]]),
            )?;
            let r = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
            let locked = matches!(tx.outcome(OpId(0)), Some(OpOutcome::Failed(e)) if e.code == 266)
                || r.as_ref().is_err_and(|e| e.code == 266);
            if locked {
                tx.close();
                return Ok(Applied::Blocked(n));
            }
            if matches!(tx.outcome(OpId(0)), Some(OpOutcome::Row(_))) {
                tx.close();
                continue;
            }
            let values: Vec<(usize, Value)> = row.iter().cloned().enumerate().collect();
            tx.define_by_pos(&rt, OpKind::Insert, Vec::new(), values, None)?;
            match tx.execute(ExecType::Commit, AbortOption::AbortOnError) {
                Ok(_) => {}
                // A transaction wrote the key meanwhile: its row is newer.
                Err(e) if e.code == 630 => {}
                Err(e) if e.code == 266 => return Ok(Applied::Blocked(n)),
                Err(e) => return Err(e),
            }
        }
        Ok(Applied::Done)
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
}
