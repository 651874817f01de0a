//! NDB's tuple-id service over the node code: the values of the hidden key of a table
//! created without a primary key (`$PK`), handed out by the data nodes through the
//! system table `sys.SYSTAB_0` (NDB: `sys/def/SYSTAB_0`, read and advanced by
//! `Ndb::getAutoIncrementValue` for hidden keys and AUTO_INCREMENT alike).
//!
//! `SYSTAB_0` has one row per table, keyed by the table's id (`SYSKEY_0`), holding the
//! next value to give (`NEXTID`, 1 when the row is absent). An API connection takes a
//! block of values at a time in one transaction through a TC — an exclusive read of the
//! row, then a write of `NEXTID` + block, committed — so the row is replicated as any
//! row is, and a block once committed is never handed out again, whichever node fails
//! (an outcome unknown, 4012, is retried: the retry reads the row as it now is, so at
//! worst a block is skipped). Two connections creating the row at once: one gets 630
//! and reads it again. Hidden-key values are unique, not dense: gaps are fine, and a
//! connection asks for larger blocks as it uses them up ([`MIN_BLOCK`] doubling to
//! [`MAX_BLOCK`]). The table is created by the first connection that needs it (NDB
//! creates it at the initial start).
//!
//! A data node capturing an INSERT into such a table (`sql::capture`) gives the new
//! rows stand-in keys from [`CAPTURE_HIDDEN_KEY_BASE`] up, a range the service never
//! reaches; the API node replaces each by a value from here before it applies the rows
//! ([`RemoteCluster::assign_hidden_keys`]).
//!
//! Lock order: `tuple_ids` (a leaf; never held across a request) — the fetch runs under
//! `tuple_id_fetch`, which only serializes fetches of this connection.

use super::remote::RemoteCluster;
use super::remote_sql::{RETRY_BUDGET, backoff};
use crate::error::{NdbError, Result, codes};
use crate::schema::{TableDef, Value};
use crate::transport::data::{KeyOp, OpType, RowChange, TcExec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub use crate::sql::CAPTURE_HIDDEN_KEY_BASE;

/// The system table's database and name.
pub const SYSTAB_DATABASE: &str = "sys";
pub const SYSTAB_TABLE: &str = "SYSTAB_0";

/// Values a connection takes from `SYSTAB_0` at its first fetch for a table, and at
/// most per fetch as it doubles.
pub const MIN_BLOCK: u64 = 1024;
pub const MAX_BLOCK: u64 = 1 << 20;

/// The values of one table this connection holds: `next..end`, and the size of its
/// next fetch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdBlock {
    next: u64,
    end: u64,
    next_fetch: u64,
}

/// Per table id, the block this connection holds.
pub(crate) type TupleIds = BTreeMap<u32, IdBlock>;

impl RemoteCluster {
    /// A new value of the hidden key of `def` (a table without a primary key), unique
    /// in the table however many connections insert into it.
    pub fn next_hidden_key(self: &Arc<Self>, def: &TableDef) -> Result<Value> {
        if !def.has_hidden_pk() {
            return Err(codes::bad_argument(format!(
                "table '{}' has a primary key of its own: no hidden key to give",
                def.name
            )));
        }
        Ok(Value::UInt(self.next_tuple_id(def.id)?))
    }

    /// The next tuple id of table `table_id` (see the module notes).
    pub(crate) fn next_tuple_id(self: &Arc<Self>, table_id: u32) -> Result<u64> {
        if let Some(id) = self.take_cached_id(table_id) {
            return Ok(id);
        }
        let _fetching = self.tuple_id_fetch.lock();
        // Another thread of this connection may have fetched meanwhile.
        if let Some(id) = self.take_cached_id(table_id) {
            return Ok(id);
        }
        let size = self
            .tuple_ids
            .lock()
            .get(&table_id)
            .map_or(MIN_BLOCK, |b| b.next_fetch);
        let first = self.fetch_block(table_id, size)?;
        let mut ids = self.tuple_ids.lock();
        ids.insert(
            table_id,
            IdBlock {
                next: first + 1,
                end: first + size,
                next_fetch: (size * 2).min(MAX_BLOCK),
            },
        );
        Ok(first)
    }

    fn take_cached_id(&self, table_id: u32) -> Option<u64> {
        let mut ids = self.tuple_ids.lock();
        let b = ids.get_mut(&table_id)?;
        (b.next < b.end).then(|| {
            b.next += 1;
            b.next - 1
        })
    }

    /// Takes `size` values of `table_id` from `SYSTAB_0`: the first of them.
    fn fetch_block(self: &Arc<Self>, table_id: u32, size: u64) -> Result<u64> {
        self.ensure_systab()?;
        let began = Instant::now();
        let salt = self.next_id();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.fetch_block_once(table_id, size) {
                Ok(first) => return Ok(first),
                Err(e) if retryable(&e) && began.elapsed() < RETRY_BUDGET => {
                    std::thread::sleep(backoff(attempt, salt));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn fetch_block_once(self: &Arc<Self>, table_id: u32, size: u64) -> Result<u64> {
        let key = vec![Value::UInt(u64::from(table_id))];
        let op = |op, values| KeyOp {
            op,
            database: SYSTAB_DATABASE.into(),
            table: SYSTAB_TABLE.into(),
            key: key.clone(),
            values,
            columns: if op == OpType::ReadExclusive {
                vec![1]
            } else {
                Vec::new()
            },
        };
        let mut tx = self.transaction();
        let read = tx.execute(
            vec![op(OpType::ReadExclusive, Vec::new())],
            TcExec::NoCommit,
        )?;
        let (first, kind) = match read.results.first() {
            Some(Some(row)) => {
                let next = row.first().and_then(Value::as_i128).ok_or_else(|| {
                    codes::internal(format!(
                        "{SYSTAB_TABLE}: NEXTID of table {table_id} is not a number"
                    ))
                })?;
                (next as u64, OpType::Update)
            }
            Some(None) => (1, OpType::Insert),
            None => return Err(codes::internal("no answer to the read of SYSTAB_0")),
        };
        let end = first
            .checked_add(size)
            .filter(|&e| e < CAPTURE_HIDDEN_KEY_BASE)
            .ok_or_else(|| {
                codes::bad_argument(format!(
                    "the hidden-key values of table {table_id} are used up"
                ))
                .with_mysql_code(1467)
            })?;
        tx.execute(vec![op(kind, vec![(1, Value::UInt(end))])], TcExec::Commit)?;
        Ok(first)
    }

    /// Creates `sys.SYSTAB_0` unless this connection knows it is there.
    fn ensure_systab(self: &Arc<Self>) -> Result<()> {
        if self.systab_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.table(SYSTAB_DATABASE, SYSTAB_TABLE).is_err() {
            self.sql(
                "",
                &format!("CREATE DATABASE IF NOT EXISTS {SYSTAB_DATABASE}"),
            )?;
            self.sql(
                SYSTAB_DATABASE,
                &format!(
                    "CREATE TABLE IF NOT EXISTS {SYSTAB_TABLE} (SYSKEY_0 INT UNSIGNED NOT NULL \
                     PRIMARY KEY, NEXTID BIGINT UNSIGNED NOT NULL) ENGINE=NDB"
                ),
            )?;
        }
        self.systab_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Gives every row a captured INSERT added to a table without a primary key its
    /// hidden key from the service, in place of the capture's stand-in (module notes).
    /// Rows already there, or added earlier in a session's transaction, keep theirs.
    pub(super) fn assign_hidden_keys(self: &Arc<Self>, changes: &mut [RowChange]) -> Result<()> {
        for c in changes.iter_mut() {
            let stand_in = c.before.is_none()
                && c.key.len() == 1
                && c.key[0]
                    .as_i128()
                    .is_some_and(|k| k >= i128::from(CAPTURE_HIDDEN_KEY_BASE));
            if !stand_in {
                continue;
            }
            let def = self.table(&c.database, &c.table)?;
            if !def.has_hidden_pk() {
                continue;
            }
            let key = self.next_hidden_key(&def)?;
            if let Some(after) = c.after.as_mut()
                && let Some(v) = after.get_mut(def.primary_key[0])
            {
                *v = key.clone();
            }
            c.key[0] = key;
        }
        Ok(())
    }
}

/// A failure of a fetch that another attempt may not meet: a temporary error, the row
/// created by another connection meanwhile (630), or an outcome unknown (4012: the
/// retry reads the row as it is).
fn retryable(e: &NdbError) -> bool {
    e.is_temporary() || matches!(e.code, 630 | 4012)
}
