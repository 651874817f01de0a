//! Unique hash indexes over several node groups.
//!
//! Each data node's local engine keeps a unique index's hidden table for the rows its
//! node group holds, and checks a new value against them (893) within the local
//! transaction that writes the row. With several node groups that is not enough: two
//! groups could each accept the same value. So a primary whose part of a round wrote
//! a unique value (an insert or a write of the row, or an update setting one of the
//! index's columns; a value with a NULL has no entry, as in MySQL) names the values in
//! its answer to the TC (`LqhPrepared`'s checks). Once every participant prepared the
//! round, the TC asks every up-to-date node of every other group
//! (`UniqueCheckReq`). Each looks the values up in its own hidden table with simple
//! reads (a shared lock released once read), waiting at most
//! [`UNIQUE_CHECK_LOCK_WAIT_MS`] for a transaction writing one — in the checked
//! transaction's own local transaction when it has one there (it wrote rows of that
//! group too), so that it sees its own changes — and answers the TC
//! (`UniqueCheckConf`): none, 893, or why it could not tell (the wait ran out: 266; no
//! read lease or still copying: 4035; the node failed: the TC aborts with 4010 — all
//! temporary, the transaction aborts and the client retries). Then the round ends as
//! before: the API hears it (NoCommit), or the commit starts.
//!
//! Why it is enough: a primary's local transaction holds the row lock on its own
//! node's entry for the value from its prepare until the transaction ends, and the
//! checks start only after that. Of two transactions writing the same value in two
//! groups, whichever checks second finds the first one's entry at the first one's
//! primary — committed (893) or locked (it waits, then 893 if the first committed, or
//! 266 if the wait ran out): both cannot check before the other locked. Every
//! up-to-date node of the other group is asked because the partitions of a group have
//! different primaries. No lock is kept at the checked nodes: they take no part in
//! the commit. The checks wait for the whole round's prepare so that a transaction
//! that frees a value in one group (a delete, an update, a REPLACE's delete) and
//! takes it in another within one round finds its own change at every node of the
//! first group, backups included.
//!
//! NDB keeps a unique index as a table of its own, partitioned by the index's value
//! and written by DBTC's triggers; here the entries stay with their rows' group and
//! the check goes to the other groups instead, so a node restart copies no index rows
//! and a one-group cluster pays nothing.

use super::DataPath;
use crate::api::{AbortOption, ExecType, OpKind, OpOutcome, Transaction};
use crate::error::{Result, codes};
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, KeyOp, OpType, TxnKey, UniqueCheck};
use crate::txn::lock::LockMode;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a checked node waits for a transaction holding one of the values (a
/// worker thread is held meanwhile).
pub const UNIQUE_CHECK_LOCK_WAIT_MS: u64 = 20;

/// Values one `UniqueCheckReq` carries at most: the TC sends a node more in several
/// (this bounds a message and the receiver's work per message). The unit tests use 64,
/// so that their rounds of a few hundred rows take several messages.
pub const MAX_UNIQUE_CHECKS: usize = if cfg!(test) { 64 } else { 32_768 };

impl DataPath {
    /// The unique values the rows of `written` (each the operation and the row's
    /// after-image, a Write of every column or a Delete) put in place, for the TC to
    /// check in the other node groups. Empty with one node group.
    pub(super) fn unique_checks_of(&self, written: &[(KeyOp, KeyOp)]) -> Result<Vec<UniqueCheck>> {
        if self.groups.len() < 2 {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut seen: BTreeSet<(String, String, u32, Vec<u8>)> = BTreeSet::new();
        for (op, image) in written {
            if image.op != OpType::Write || op.op.is_read() || op.op == OpType::Delete {
                continue;
            }
            let rt = self.engine.inner().table(&op.database, &op.table)?;
            for (i, idx) in rt.def.indexes.iter().enumerate() {
                if rt.unique_tables.get(i).is_none_or(|t| t.is_none()) {
                    continue;
                }
                // An update that sets none of the index's columns leaves its value.
                if op.op == OpType::Update
                    && !op
                        .values
                        .iter()
                        .any(|(c, _)| idx.columns.contains(&(*c as usize)))
                {
                    continue;
                }
                let mut values = Vec::with_capacity(idx.columns.len());
                for &c in &idx.columns {
                    match image.values.get(c).map(|(_, v)| v) {
                        Some(Value::Null) | None => break,
                        Some(v) => values.push(v.clone()),
                    }
                }
                if values.len() != idx.columns.len() {
                    continue;
                }
                let mut e = crate::schema::codec::Encoder::new();
                for v in &values {
                    crate::schema::codec::encode_value(&mut e, v);
                }
                let k = (
                    op.database.clone(),
                    op.table.clone(),
                    i as u32,
                    e.into_bytes(),
                );
                if seen.insert(k) {
                    out.push(UniqueCheck {
                        database: op.database.clone(),
                        table: op.table.clone(),
                        index: i as u32,
                        values,
                    });
                }
            }
        }
        Ok(out)
    }

    /// What the TC asks whom: each value is checked at every live up-to-date node of
    /// every node group other than the one of the participant that wrote it.
    pub(super) fn unique_check_requests(
        &self,
        checks: &[(NodeId, UniqueCheck)],
    ) -> BTreeMap<NodeId, Vec<UniqueCheck>> {
        let m = self.members.read();
        let mut out: BTreeMap<NodeId, Vec<UniqueCheck>> = BTreeMap::new();
        for (writer, c) in checks {
            for group in self.groups.iter().filter(|g| !g.contains(writer)) {
                for n in group
                    .iter()
                    .filter(|n| m.live.contains(n) && m.ready.contains_key(n))
                {
                    // (A value two participants both wrote is looked up twice.)
                    out.entry(*n).or_default().push(c.clone());
                }
            }
        }
        out
    }

    /// A `UniqueCheckReq` from a TC: see the module notes.
    pub(super) fn unique_check(
        &self,
        worker: usize,
        from: NodeId,
        txn: TxnKey,
        round: u32,
        checks: &[UniqueCheck],
    ) {
        // The transaction may be written here too (its rows of this group: this node
        // is their primary or backup): then the values are looked up in its own local
        // transaction, which sees its own entries (893, as within one group) instead
        // of waiting for itself. The record is on this worker (`worker_of(txn)`).
        // A node still copying holds only part of its group's rows.
        let serving = || {
            if self.is_ready() {
                self.check_serving()
            } else {
                Err(super::not_ready(self.me))
            }
        };
        let own = [false, true]
            .into_iter()
            .find_map(|b| self.lqh.lock().remove(&(txn, b)).map(|r| (b, r)));
        let r = match own {
            Some((backup, rec)) => {
                let r =
                    serving().and_then(|()| self.look_up_unique(&mut rec.tx.lock(), checks, false));
                self.lqh.lock().insert((txn, backup), rec);
                r
            }
            None => serving().and_then(|()| {
                let mut tx = self.engine.ndb("rndb").start_transaction()?;
                let r = self.look_up_unique(&mut tx, checks, true);
                let _ = tx.execute(ExecType::Rollback, AbortOption::AbortOnError);
                r
            }),
        };
        let (code, class, message) = match r {
            Ok(()) => (0, 0, String::new()),
            Err(e) => super::err_parts(&e),
        };
        self.send_from(
            worker,
            from,
            DataMsg::UniqueCheckConf {
                txn,
                round,
                code,
                class,
                message,
            },
        );
    }

    /// Looks every value up in this node's hidden tables with simple reads (they wait
    /// for a writer holding the row, at most [`UNIQUE_CHECK_LOCK_WAIT_MS`], and keep no
    /// lock) in `tx`: a fresh local transaction, or the checked transaction's own.
    fn look_up_unique(
        &self,
        tx: &mut Transaction,
        checks: &[UniqueCheck],
        fresh: bool,
    ) -> Result<()> {
        if checks.len() > MAX_UNIQUE_CHECKS {
            return Err(codes::too_many_operations());
        }
        let kept = tx.lock_timeout();
        tx.set_lock_timeout(Duration::from_millis(UNIQUE_CHECK_LOCK_WAIT_MS).min(kept));
        let r = self.look_up_unique_in(tx, checks);
        if !fresh {
            tx.set_lock_timeout(kept);
        }
        r
    }

    fn look_up_unique_in(&self, tx: &mut Transaction, checks: &[UniqueCheck]) -> Result<()> {
        let first = tx.op_count();
        let mut names = Vec::with_capacity(checks.len());
        for c in checks {
            let rt = self.engine.inner().table(&c.database, &c.table)?;
            let idx = rt.def.indexes.get(c.index as usize);
            let hidden = rt.unique_tables.get(c.index as usize).cloned().flatten();
            let (Some(idx), Some(hidden)) = (idx, hidden) else {
                return Err(codes::internal(format!(
                    "index {} of table {}.{} is not a unique hash index here",
                    c.index, c.database, c.table
                )));
            };
            if c.values.len() != idx.columns.len() {
                return Err(codes::internal(
                    "a unique check's values do not fit its index",
                ));
            }
            let key: Vec<(usize, Value)> = c.values.iter().cloned().enumerate().collect();
            tx.define_by_pos(
                &hidden,
                OpKind::Read(LockMode::SimpleRead),
                key,
                Vec::new(),
                Some(vec![0]),
            )?;
            names.push(idx.name.clone());
        }
        let run = tx.execute(ExecType::NoCommit, AbortOption::IgnoreError);
        let mut found = None;
        let mut failed = run.err();
        for (k, name) in names.iter().enumerate() {
            match tx.outcome(crate::api::OpId(first + k)) {
                Some(OpOutcome::Row(_)) => {
                    found.get_or_insert_with(|| name.clone());
                }
                Some(OpOutcome::Failed(e)) if e.code == 626 => {}
                Some(OpOutcome::Failed(e)) => {
                    failed.get_or_insert_with(|| e.clone());
                }
                _ => {}
            }
        }
        if let Some(name) = found {
            return Err(codes::unique_violation().detail(format!(
                "the value of unique index '{name}' is held in another node group (data node {})",
                self.me
            )));
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
