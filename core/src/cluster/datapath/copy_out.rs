//! The source side of a node-restart copy (the protocol is in `copy`) as a state
//! machine on the copy thread, moved on by `CopyMarked`, `CopyAck` and the node's tick;
//! and the copy marks every node answers once its transactions allow it (checked at
//! once and at every tick).
//!
//! A copy to joining node S: `Unmarking` (waiting for every live node's
//! `CopyMarked{false}`) → `Schema` (waiting for S's acknowledgement) → `Marking`
//! (every live node's `CopyMarked{true}`) → `Rows` (a committed-read scan per table,
//! at most [`COPY_WINDOW`] batches unacknowledged) → `CopyDone`. A node that leaves is
//! not waited for; S leaving, an error from S or a step without progress for
//! [`COPY_STEP_TIMEOUT_MS`] on the node's clock ends the copy with `CopyAbort`, and S
//! starts over. A newer attempt from S replaces the copy at once (messages carry the
//! attempt, so S never mixes the two).
//!
//! Changed rows only: when S offers a checkpoint `g` it restored of this node's own
//! lineage, the tables S keeps (the same SHOW CREATE TABLE text here and there) are
//! scanned with the ROW_GCI pseudo column; a row whose last change is after `g` goes
//! whole, the others (S has them as they are) are folded into the table's digest
//! (`copy_digest`), sent when the scan ends. The buckets where S's own rows differ
//! come back in a `CopyRecheck` (before the digest's acknowledgement); for those the
//! table is scanned again and the keys of its rows at or below `g` in them are sent,
//! after the tables still to scan. `CopyDone` follows once every recheck is sent and
//! acknowledged.
//!
//! Lock order: a copy's `state`, then what `DataPath` documents; the `copy_out` map is
//! a leaf (held only to find, insert or remove a slot); `copy_marks` is a leaf.

use super::copy::{COPY_BATCH_ROWS, COPY_STEP_TIMEOUT_MS, COPY_WINDOW};
use super::copy_digest::{Digest, KeyHasher, bucket_count, bucket_of};
use super::{DataPath, err_from};
use crate::api::{
    AbortOption, ExecType, OpId, OpKind, OpOutcome, Scan, ScanSpec, TableRuntime, Transaction,
};
use crate::error::{NdbError, Result, codes};
use crate::mgm::log::Severity;
use crate::schema::Value;
use crate::schema::layout::ROW_GCI_COLUMN;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, TxnKey};
use crate::txn::lock::LockMode;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// One copy to a joining node: its attempt and its state.
pub(crate) struct CopyOutSlot {
    attempt: u64,
    state: Mutex<CopyOut>,
}

struct CopyOut {
    step: Step,
    /// The current step's deadline (node clock).
    deadline_ms: u64,
    /// Rows sent whole.
    rows_sent: u64,
    /// Rows unchanged since the offer's checkpoint, folded into digests.
    rows_digested: u64,
    /// Keys sent for the buckets the joining node asked for again.
    keys_sent: u64,
    /// Buckets asked for again.
    buckets_rechecked: u64,
    /// The bucket count of each digest sent (database, table).
    digest_buckets: BTreeMap<(String, String), u32>,
    /// The joining node's offer, when this node takes it: the checkpoint S restored,
    /// the tables S holds (database, SHOW CREATE TABLE text).
    offer: Option<(u32, BTreeSet<(String, String)>)>,
    /// The tables sent as changes since the offer's checkpoint (database, table).
    delta_tables: BTreeSet<(String, String)>,
    /// When the copy began (node clock).
    started_ms: u64,
}

/// What a finished copy did, for its cluster log line.
struct CopyOutDone {
    /// Rows sent whole.
    whole: u64,
    /// Rows unchanged since the offer's checkpoint, compared by digest.
    digested: u64,
    /// Buckets the joining node asked for again, and the keys sent for them.
    rechecked: u64,
    keys: u64,
    /// The offer's checkpoint, if taken.
    since: Option<u32>,
    /// How long the copy took.
    ms: u64,
}

enum Step {
    /// `CopyMark{mark: false}` sent; these nodes have not answered.
    Unmarking(BTreeSet<NodeId>),
    /// `CopySchema` sent, not acknowledged.
    Schema,
    /// `CopyMark{mark: true}` sent; these nodes have not answered.
    Marking(BTreeSet<NodeId>),
    /// The tables still to scan, the open scan, messages ready to go (a digest's
    /// parts), the rechecks asked for, unacknowledged messages.
    Rows {
        tables: VecDeque<Arc<TableRuntime>>,
        scan: Option<Box<OpenScan>>,
        ready: VecDeque<DataMsg>,
        rechecks: VecDeque<(Arc<TableRuntime>, Vec<bool>)>,
        in_flight: usize,
    },
}

/// A table's committed-read scan, open between batches.
struct OpenScan {
    table: Arc<TableRuntime>,
    tx: Transaction,
    scan: Scan,
    pass: Pass,
}

/// What a scan sends.
enum Pass {
    /// Every row whole (a table the joining node did not keep, or no offer).
    Whole,
    /// The rows changed after GCI `since` whole; the others folded into `digest`
    /// (the scan reads the key and ROW_GCI).
    Changed { since: u32, digest: Digest },
    /// The keys of the rows at or below `since` in the flagged buckets.
    Recheck { since: u32, differing: Vec<bool> },
}

/// What the next step of the row phase sends.
enum Outgoing {
    /// Rows of a table: the first `full` whole, the rest keys.
    Rows {
        table: Arc<TableRuntime>,
        rows: Vec<Vec<Value>>,
        full: u32,
    },
    /// A kept table's scan ended: its digest.
    Digest {
        table: Arc<TableRuntime>,
        digest: Digest,
    },
}

/// A `CopyMark` this node has applied and not yet answered.
pub(crate) struct PendingMark {
    from: NodeId,
    node: NodeId,
    mark: bool,
    /// Marking: the primary records that existed at the mark (they must end first).
    before: BTreeSet<(TxnKey, bool)>,
    /// Those whose TC was asked to end them (open and idle past the grace).
    asked: BTreeSet<TxnKey>,
    since_ms: u64,
    deadline_ms: u64,
}

/// How long a mark waits for an open transaction from before it (its client between
/// rounds) before asking its TC to end it (4010 at the client's next round).
pub const MARK_OPEN_GRACE_MS: u64 = 1000;

impl DataPath {
    /// `CopyMark` from a copy source: change the joining set, then answer once the
    /// transactions that could miss (or still reach) the joining node are over.
    pub(super) fn on_copy_mark(&self, from: NodeId, node: NodeId, mark: bool) {
        let before = {
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
        self.copy_marks.lock().push(PendingMark {
            from,
            node,
            mark,
            before,
            asked: BTreeSet::new(),
            since_ms: self.now_ms(),
            deadline_ms: self.now_ms() + COPY_STEP_TIMEOUT_MS,
        });
        self.check_marks();
    }

    fn ask_end_open(&self, txn: TxnKey) {
        self.dispatch(Self::worker_of(&txn), super::Job::EndOpen(txn));
    }

    /// Answers the copy marks whose transactions are over (or that waited too long);
    /// past [`MARK_OPEN_GRACE_MS`] asks the TCs of those still there to end them if
    /// they are open between rounds.
    pub(super) fn check_marks(&self) {
        let pending = std::mem::take(&mut *self.copy_marks.lock());
        if pending.is_empty() {
            return;
        }
        let now = self.now_ms();
        let records = self.primary_records();
        let mut pending = pending;
        for pm in pending.iter_mut().filter(|pm| pm.mark) {
            if now < pm.since_ms + MARK_OPEN_GRACE_MS {
                continue;
            }
            let left: Vec<TxnKey> = records
                .intersection(&pm.before)
                .map(|(t, _)| *t)
                .filter(|t| !pm.asked.contains(t))
                .collect();
            for txn in left {
                pm.asked.insert(txn);
                self.ask_end_open(txn);
            }
        }
        let (answer, wait): (Vec<PendingMark>, Vec<PendingMark>) =
            pending.into_iter().partition(|pm| {
                let busy = if pm.mark {
                    records.intersection(&pm.before).next().is_some()
                } else {
                    self.has_backup_in_chain(pm.node)
                };
                !busy || now >= pm.deadline_ms
            });
        self.copy_marks.lock().extend(wait);
        for pm in answer {
            self.send(
                pm.from,
                DataMsg::CopyMarked {
                    node: pm.node,
                    mark: pm.mark,
                },
            );
        }
    }

    /// `CopyReq` from a joining node: a copy to it (replacing an older attempt). Its
    /// offer (`since_gci`, `keep`) is taken when its lineage is this node's.
    pub(super) fn out_begin(
        &self,
        joiner: NodeId,
        attempt: u64,
        since_gci: u32,
        lineage: u64,
        keep: Vec<(String, String)>,
    ) {
        if !self.is_ready() {
            return self.send(
                joiner,
                DataMsg::CopyAbort {
                    attempt,
                    reason: format!("node {} is not up to date itself", self.me),
                },
            );
        }
        if self
            .copy_out
            .lock()
            .get(&joiner)
            .is_some_and(|s| s.attempt >= attempt)
        {
            return;
        }
        let own = self.lineage.load(std::sync::atomic::Ordering::Acquire);
        let same_history = lineage == own
            || self
                .start
                .prior_lineage
                .is_some_and(|(prior, restored)| lineage == prior && since_gci <= restored);
        let offer = (since_gci > 0 && lineage != 0 && same_history)
            .then(|| (since_gci, keep.into_iter().collect()));
        if since_gci > 0 && offer.is_none() {
            self.log(
                Severity::Info,
                &format!(
                    "Node {joiner} restored GCI {since_gci} of another cluster history \
                     (a system restart or initial start happened since): copying every row"
                ),
            );
        }
        let live = self.members.read().live.clone();
        let slot = Arc::new(CopyOutSlot {
            attempt,
            state: Mutex::new(CopyOut {
                step: Step::Unmarking(live.clone()),
                deadline_ms: self.now_ms() + COPY_STEP_TIMEOUT_MS,
                rows_sent: 0,
                rows_digested: 0,
                keys_sent: 0,
                buckets_rechecked: 0,
                digest_buckets: BTreeMap::new(),
                offer,
                delta_tables: BTreeSet::new(),
                started_ms: self.now_ms(),
            }),
        });
        self.copy_out.lock().insert(joiner, slot.clone());
        for n in live {
            self.send(
                n,
                DataMsg::CopyMark {
                    node: joiner,
                    mark: false,
                },
            );
        }
        self.out_advance(joiner, &slot);
    }

    fn out_slot(&self, joiner: NodeId) -> Option<Arc<CopyOutSlot>> {
        self.copy_out.lock().get(&joiner).cloned()
    }

    /// `CopyMarked` from `from` for the copy to `node`.
    pub(super) fn out_marked(&self, from: NodeId, node: NodeId, mark: bool) {
        let Some(slot) = self.out_slot(node) else {
            return;
        };
        {
            let mut st = slot.state.lock();
            match &mut st.step {
                Step::Unmarking(w) if !mark => w.remove(&from),
                Step::Marking(w) if mark => w.remove(&from),
                _ => return,
            };
        }
        self.out_advance(node, &slot);
    }

    /// `CopyAck` from the joining node.
    pub(super) fn out_ack(&self, joiner: NodeId, attempt: u64, error: Option<NdbError>) {
        let Some(slot) = self.out_slot(joiner) else {
            return;
        };
        if slot.attempt != attempt {
            return;
        }
        if let Some(e) = error {
            return self.out_fail(joiner, &slot, e);
        }
        {
            let mut st = slot.state.lock();
            match &mut st.step {
                Step::Schema => {
                    let live = self.members.read().live.clone();
                    for &n in &live {
                        self.send(
                            n,
                            DataMsg::CopyMark {
                                node: joiner,
                                mark: true,
                            },
                        );
                    }
                    st.step = Step::Marking(live);
                }
                Step::Rows { in_flight, .. } => *in_flight = in_flight.saturating_sub(1),
                _ => return,
            }
            st.deadline_ms = self.now_ms() + COPY_STEP_TIMEOUT_MS;
        }
        self.out_advance(joiner, &slot);
    }

    /// The copy thread's tick: lost nodes, deadlines.
    pub(super) fn out_tick(&self) {
        let slots: Vec<(NodeId, Arc<CopyOutSlot>)> = self
            .copy_out
            .lock()
            .iter()
            .map(|(&n, s)| (n, s.clone()))
            .collect();
        let now = self.now_ms();
        for (joiner, slot) in slots {
            let failure = {
                let mut st = slot.state.lock();
                if !self.is_live(joiner) {
                    Some(codes::node_failure_abort().detail(format!("node {joiner} left")))
                } else if now >= st.deadline_ms {
                    Some(codes::request_timeout(format!(
                        "copy to node {joiner}: no progress for {COPY_STEP_TIMEOUT_MS} ms"
                    )))
                } else {
                    if let Step::Unmarking(w) | Step::Marking(w) = &mut st.step {
                        w.retain(|&n| self.is_live(n));
                    }
                    None
                }
            };
            match failure {
                Some(e) => self.out_fail(joiner, &slot, e),
                None => self.out_advance(joiner, &slot),
            }
        }
    }

    fn out_advance(&self, joiner: NodeId, slot: &Arc<CopyOutSlot>) {
        let r = {
            let mut st = slot.state.lock();
            self.out_step(joiner, slot.attempt, &mut st)
        };
        match r {
            Ok(None) => {}
            Ok(Some(CopyOutDone {
                whole,
                digested,
                rechecked,
                keys,
                since,
                ms,
            })) => {
                self.out_forget(joiner, slot);
                let text = match since {
                    Some(g) => format!(
                        "Copied {} rows to node {joiner} for its restart: {whole} changed \
                         since GCI {g} whole, {digested} unchanged compared by digest \
                         ({rechecked} buckets asked for again, {keys} keys sent) ({ms} ms)",
                        whole + digested
                    ),
                    None => {
                        format!("Copied {whole} rows to node {joiner} for its restart ({ms} ms)")
                    }
                };
                self.log(Severity::Info, &text);
            }
            Err(e) => self.out_fail(joiner, slot, e),
        }
    }

    /// Removes the copy to `joiner` if it is still this one.
    fn out_forget(&self, joiner: NodeId, slot: &Arc<CopyOutSlot>) {
        let mut outs = self.copy_out.lock();
        if outs.get(&joiner).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            outs.remove(&joiner);
        }
    }

    fn out_fail(&self, joiner: NodeId, slot: &Arc<CopyOutSlot>, e: NdbError) {
        self.out_forget(joiner, slot);
        self.log(
            Severity::Warning,
            &format!("Copy to node {joiner} stopped: {e}"),
        );
        self.send(
            joiner,
            DataMsg::CopyAbort {
                attempt: slot.attempt,
                reason: e.message.clone(),
            },
        );
    }

    /// Moves the copy on as far as it can; Some once it is done.
    fn out_step(
        &self,
        joiner: NodeId,
        attempt: u64,
        st: &mut CopyOut,
    ) -> Result<Option<CopyOutDone>> {
        let CopyOut {
            step,
            deadline_ms,
            rows_sent,
            rows_digested,
            keys_sent,
            buckets_rechecked,
            digest_buckets,
            offer,
            delta_tables,
            started_ms,
        } = st;
        loop {
            match step {
                Step::Unmarking(w) if w.is_empty() => {
                    if let Some((_, keep)) = offer {
                        *delta_tables = self
                            .table_statements()?
                            .into_iter()
                            .filter(|(db, _, sql)| keep.contains(&(db.clone(), sql.clone())))
                            .map(|(db, name, _)| (db, name))
                            .collect();
                    }
                    self.send(
                        joiner,
                        DataMsg::CopySchema {
                            attempt,
                            statements: self.schema_statements()?,
                        },
                    );
                    *step = Step::Schema;
                    *deadline_ms = self.now_ms() + COPY_STEP_TIMEOUT_MS;
                }
                Step::Marking(w) if w.is_empty() => {
                    let tables = self.engine.inner().dict.read().all();
                    *step = Step::Rows {
                        tables: tables.into_iter().filter(|t| !t.hidden).collect(),
                        scan: None,
                        ready: VecDeque::new(),
                        rechecks: VecDeque::new(),
                        in_flight: 0,
                    };
                }
                Step::Rows {
                    tables,
                    scan,
                    ready,
                    rechecks,
                    in_flight,
                } => {
                    while *in_flight < COPY_WINDOW {
                        if !self.members.read().joining.contains(&joiner) {
                            return Err(codes::node_failure_abort()
                                .detail(format!("node {joiner} left the copy")));
                        }
                        if let Some(m) = ready.pop_front() {
                            *in_flight += 1;
                            self.send(joiner, m);
                            continue;
                        }
                        let since = offer.as_ref().map(|(g, _)| *g);
                        let next = self.next_copy_batch(
                            joiner,
                            tables,
                            scan,
                            rechecks,
                            since,
                            delta_tables,
                        )?;
                        match next {
                            None => break,
                            Some(Outgoing::Rows { table, rows, full }) => {
                                *rows_sent += u64::from(full);
                                *keys_sent += (rows.len() - full as usize) as u64;
                                *in_flight += 1;
                                self.send(
                                    joiner,
                                    DataMsg::CopyRows {
                                        attempt,
                                        database: table.database.clone(),
                                        table: table.def.name.clone(),
                                        full_rows: full,
                                        rows,
                                    },
                                );
                            }
                            Some(Outgoing::Digest { table, digest }) => {
                                *rows_digested += digest.rows();
                                digest_buckets.insert(
                                    (table.database.clone(), table.def.name.clone()),
                                    digest.buckets(),
                                );
                                ready.extend(digest.chunks().map(|(first, entries)| {
                                    DataMsg::CopyDigest {
                                        attempt,
                                        database: table.database.clone(),
                                        table: table.def.name.clone(),
                                        buckets: digest.buckets(),
                                        first,
                                        entries,
                                    }
                                }));
                            }
                        }
                    }
                    // A recheck comes before the acknowledgement of its digest's last
                    // part: with nothing in flight, none is still to come.
                    if scan.is_none()
                        && tables.is_empty()
                        && ready.is_empty()
                        && rechecks.is_empty()
                        && *in_flight == 0
                    {
                        let seq = self
                            .members
                            .read()
                            .ready
                            .values()
                            .copied()
                            .max()
                            .unwrap_or(0)
                            + 1;
                        let lineage = self.lineage.load(std::sync::atomic::Ordering::Acquire);
                        self.send(
                            joiner,
                            DataMsg::CopyDone {
                                attempt,
                                seq,
                                lineage,
                            },
                        );
                        let since = offer.as_ref().map(|(g, _)| *g);
                        let ms = self.now_ms().saturating_sub(*started_ms);
                        return Ok(Some(CopyOutDone {
                            whole: *rows_sent,
                            digested: *rows_digested,
                            rechecked: *buckets_rechecked,
                            keys: *keys_sent,
                            since,
                            ms,
                        }));
                    }
                    return Ok(None);
                }
                _ => return Ok(None),
            }
        }
    }

    /// `CopyRecheck` from the joining node: the keys of the unchanged rows in these
    /// buckets of a table's digest are sent once the tables still to scan are.
    pub(super) fn out_recheck(
        &self,
        joiner: NodeId,
        attempt: u64,
        database: String,
        table: String,
        buckets: Vec<u32>,
    ) {
        let Some(slot) = self.out_slot(joiner) else {
            return;
        };
        if slot.attempt != attempt {
            return;
        }
        let r = (|| -> Result<()> {
            let mut st = slot.state.lock();
            let st = &mut *st;
            let Some(&n) = st.digest_buckets.get(&(database.clone(), table.clone())) else {
                return Err(codes::internal(format!(
                    "copy: a recheck of {database}.{table}, whose digest was not sent"
                )));
            };
            let mut differing = vec![false; n as usize];
            for &b in &buckets {
                let Some(flag) = differing.get_mut(b as usize) else {
                    return Err(codes::internal(format!(
                        "copy: a recheck of bucket {b} of {database}.{table}'s {n}"
                    )));
                };
                *flag = true;
            }
            let rt = self.engine.inner().table(&database, &table)?;
            let Step::Rows { rechecks, .. } = &mut st.step else {
                return Err(codes::internal("copy: a recheck outside the row phase"));
            };
            st.buckets_rechecked += buckets.len() as u64;
            rechecks.push_back((rt, differing));
            Ok(())
        })();
        match r {
            Ok(()) => self.out_advance(joiner, &slot),
            Err(e) => self.out_fail(joiner, &slot, e),
        }
    }

    /// What the row phase sends next (None: every table scanned and every recheck
    /// sent). A scan is a committed read: it holds no locks between batches. For a
    /// table in `delta_tables` (with the offer's checkpoint `since`), the rows changed
    /// after it come whole and the others go into the table's digest, sent when its
    /// scan ends; a recheck sends the keys of the unchanged rows in its buckets.
    fn next_copy_batch(
        &self,
        joiner: NodeId,
        tables: &mut VecDeque<Arc<TableRuntime>>,
        scan: &mut Option<Box<OpenScan>>,
        rechecks: &mut VecDeque<(Arc<TableRuntime>, Vec<bool>)>,
        since: Option<u32>,
        delta_tables: &BTreeSet<(String, String)>,
    ) -> Result<Option<Outgoing>> {
        loop {
            if scan.is_none() {
                let (t, pass) = if let Some(t) = tables.pop_front() {
                    let kept = delta_tables.contains(&(t.database.clone(), t.def.name.clone()));
                    let pass = match since.filter(|_| kept) {
                        Some(since) => {
                            // This node's engine holds its own replicas only.
                            Pass::Changed {
                                since,
                                digest: Digest::new(bucket_count(t.row_count()))?,
                            }
                        }
                        None => Pass::Whole,
                    };
                    (t, pass)
                } else if let Some((t, differing)) = rechecks.pop_front() {
                    let Some(since) = since else {
                        return Err(codes::internal("copy: a recheck without an offer"));
                    };
                    (t, Pass::Recheck { since, differing })
                } else {
                    return Ok(None);
                };
                let mut tx = self.engine.ndb(&t.database).start_transaction()?;
                let mut spec = ScanSpec::table(t.clone());
                // Changes only: the keys and ROW_GCI (the changed rows are read whole
                // afterwards, by key); else every column.
                spec.columns = Some(match pass {
                    Pass::Whole => (0..t.def.columns.len()).collect(),
                    Pass::Changed { .. } | Pass::Recheck { .. } => {
                        let mut cols = t.def.primary_key.clone();
                        cols.push(ROW_GCI_COLUMN);
                        cols
                    }
                });
                spec.batch_size = COPY_BATCH_ROWS;
                let s = tx.scan(spec)?;
                *scan = Some(Box::new(OpenScan {
                    table: t,
                    tx,
                    scan: s,
                    pass,
                }));
            }
            let Some(open) = scan.as_mut() else {
                continue;
            };
            let mut rows = if open.scan.is_closed() {
                Vec::new()
            } else {
                open.tx.scan_next_batch(&mut open.scan, COPY_BATCH_ROWS)?
            };
            if rows.is_empty() {
                if let Some(open) = scan.take() {
                    let OpenScan {
                        table,
                        mut tx,
                        pass,
                        ..
                    } = *open;
                    tx.close();
                    if let Pass::Changed { digest, .. } = pass {
                        return Ok(Some(Outgoing::Digest { table, digest }));
                    }
                }
                continue;
            }
            let t = open.table.clone();
            let pk = t.def.primary_key.clone();
            if self.groups.len() > 1 {
                let keyed = !matches!(open.pass, Pass::Whole);
                rows.retain(|r| {
                    let key: Vec<Value> = if keyed {
                        r[..pk.len()].to_vec()
                    } else {
                        pk.iter().map(|&p| r[p].clone()).collect()
                    };
                    super::super::remote::RemoteCluster::partition_of(&t.def, &key)
                        .map(|p| {
                            super::super::layout::replica_nodes(p, &self.groups).contains(&joiner)
                        })
                        .unwrap_or(false)
                });
                if rows.is_empty() {
                    continue;
                }
            }
            let row_gci = |r: &mut Vec<Value>| match r.pop() {
                Some(Value::UInt(g)) => Ok(g),
                other => Err(codes::internal(format!("copy: ROW_GCI read as {other:?}"))),
            };
            match &mut open.pass {
                Pass::Whole => {
                    let full = rows.len() as u32;
                    return Ok(Some(Outgoing::Rows {
                        table: t,
                        rows,
                        full,
                    }));
                }
                Pass::Changed { since, digest } => {
                    let mut changed = Vec::new();
                    let mut hasher = KeyHasher::new(&t, &t.database);
                    for mut r in rows {
                        if row_gci(&mut r)? > u64::from(*since) {
                            changed.push(r);
                        } else {
                            digest.add(hasher.hash(&r)?);
                        }
                    }
                    let whole = self.read_whole(&t, &changed)?;
                    if whole.is_empty() {
                        continue;
                    }
                    let full = whole.len() as u32;
                    return Ok(Some(Outgoing::Rows {
                        table: t,
                        rows: whole,
                        full,
                    }));
                }
                Pass::Recheck { since, differing } => {
                    let buckets = differing.len() as u32;
                    let mut hasher = KeyHasher::new(&t, &t.database);
                    let mut keys = Vec::new();
                    for mut r in rows {
                        if row_gci(&mut r)? <= u64::from(*since)
                            && differing[bucket_of(hasher.hash(&r)?, buckets) as usize]
                        {
                            keys.push(r);
                        }
                    }
                    if keys.is_empty() {
                        continue;
                    }
                    return Ok(Some(Outgoing::Rows {
                        table: t,
                        rows: keys,
                        full: 0,
                    }));
                }
            }
        }
    }

    /// Every column of the rows with these keys (committed reads, one round); a row
    /// deleted since the scan is left out (its delete reaches the joining node as an
    /// after-image: the copy mark is set).
    fn read_whole(&self, t: &Arc<TableRuntime>, keys: &[Vec<Value>]) -> Result<Vec<Vec<Value>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let pk = &t.def.primary_key;
        let mut tx = self.engine.ndb(&t.database).start_transaction()?;
        for key in keys {
            tx.define_by_pos(
                t,
                OpKind::Read(LockMode::CommittedRead),
                pk.iter().copied().zip(key.iter().cloned()).collect(),
                Vec::new(),
                Some((0..t.def.columns.len()).collect()),
            )?;
        }
        tx.execute(ExecType::NoCommit, AbortOption::IgnoreError)?;
        let mut out = Vec::with_capacity(keys.len());
        for i in 0..keys.len() {
            match tx.take_row(OpId(i)) {
                Some(row) => out.push(row),
                None => match tx.outcome(OpId(i)) {
                    Some(OpOutcome::Failed(e)) if e.code == 626 => {}
                    Some(OpOutcome::Failed(e)) => return Err(e.clone()),
                    _ => return Err(codes::internal("copy: a changed row's read did not run")),
                },
            }
        }
        tx.close();
        Ok(out)
    }

    /// A `CopyAck`'s error, if it carries one.
    pub(super) fn ack_error(code: u32, class: u8, message: &str) -> Option<NdbError> {
        (code != 0).then(|| err_from(code, class, message))
    }
}
