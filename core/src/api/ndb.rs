//! `Ndb`: a database handle, like `Ndb(&cluster_connection, "test")`, with the
//! dictionary calls, transactions, and batched primary-key reads and inserts.
//!
//! The batched paths ([`Ndb::read_batch`], [`Ndb::insert_batch`]) are what bulk loads and
//! key-value lookups use: keys are hashed and grouped by partition first, then each
//! fragment's mutex is taken once per batch and the lookups of the group run back to
//! back (with prefetch hints), so independent cache misses overlap and no thread hand-off
//! happens per row.
//!
//! Every `Ndb` holds an API node id ([`Ndb::node_id`], from the configuration's
//! `[mysqld]`/`[api]` slots, shared by its clones). In single user mode only the `Ndb`
//! objects of the chosen API node may start transactions, run batched reads or inserts,
//! or change the schema; the others get error 299.

use super::cluster::{ApiLease, ClusterInner};
use super::dict::{TableRuntime, TableSpec};
use super::transaction::{AbortOption, ExecType, OpKind, Transaction};
use crate::error::{Result, codes};
use crate::schema::layout::{StoredRow, index_hash, key_hash};
use crate::schema::value::coerce;
use crate::schema::{ColumnType, IndexKind, Value};
use crate::storage::RowId;
use crate::txn::fragment::{BatchKey, DirectInsert};
use std::sync::Arc;

/// Buffers of batched reads, reused per thread so a batch allocates nothing but its
/// result values.
#[derive(Default)]
struct ReadScratch {
    order: Vec<(u32, BatchKey)>,
    key_buf: Vec<u8>,
    buf: Vec<u8>,
    coerced: Vec<Value>,
    batch: Vec<BatchKey>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<ReadScratch> = std::cell::RefCell::new(ReadScratch::default());
}

/// Receives `(key index, stored row)` of each row a batched read finds (decode columns
/// with `table.def.layout.value(col, row)`).
pub type RowVisitor<'a> = dyn FnMut(usize, StoredRow<'_>) + 'a;

/// Rows per transaction in [`Ndb::insert_batch`].
pub const INSERT_BATCH_ROWS: usize = 1000;

#[derive(Clone)]
pub struct Ndb {
    pub(crate) cluster: Arc<ClusterInner>,
    database: String,
    api: Arc<ApiLease>,
}

impl Ndb {
    pub(crate) fn new(cluster: Arc<ClusterInner>, database: &str) -> Ndb {
        let api = Arc::new(cluster.lease_api_node());
        Ndb {
            cluster,
            database: database.to_string(),
            api,
        }
    }

    /// The API node id this `Ndb` acts as (0 when the configuration has no API slot).
    pub fn node_id(&self) -> u32 {
        self.api.node_id
    }

    /// Error 299 when single user mode is on for another API node.
    fn check_access(&self) -> Result<()> {
        self.cluster.check_api_access(self.api.node_id)
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    pub fn set_database(&mut self, database: &str) {
        self.database = database.to_string();
    }

    pub fn cluster(&self) -> &Arc<ClusterInner> {
        &self.cluster
    }

    pub fn table(&self, name: &str) -> Result<Arc<TableRuntime>> {
        self.cluster.table(&self.database, name)
    }

    pub fn tables(&self) -> Vec<Arc<TableRuntime>> {
        self.cluster.dict.read().list(&self.database)
    }

    pub fn start_transaction(&self) -> Result<Transaction> {
        self.cluster.check_open()?;
        self.check_access()?;
        Transaction::new(self.cluster.clone())
    }

    pub fn create_table(&self, spec: TableSpec) -> Result<Arc<TableRuntime>> {
        self.cluster.check_open()?;
        self.check_access()?;
        self.cluster.create_table(&self.database, spec)
    }

    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<bool> {
        self.cluster.check_open()?;
        self.check_access()?;
        self.cluster.drop_table(&self.database, name, if_exists)
    }

    pub fn truncate_table(&self, name: &str) -> Result<()> {
        self.cluster.check_open()?;
        self.check_access()?;
        self.cluster.truncate_table(&self.database, name)
    }

    pub fn create_index(
        &self,
        table: &str,
        name: &str,
        kind: IndexKind,
        cols: &[String],
    ) -> Result<()> {
        self.cluster.check_open()?;
        self.check_access()?;
        self.cluster
            .create_index(&self.database, table, name, kind, cols)
    }

    pub fn drop_index(&self, table: &str, name: &str) -> Result<()> {
        self.cluster.check_open()?;
        self.check_access()?;
        self.cluster.drop_index(&self.database, table, name)
    }

    /// Committed-read lookups of many primary keys. `keys[i]` holds the key values in
    /// primary-key order; `cols` the columns to return. One entry per key: the row, or
    /// None when no row has that key.
    pub fn read_batch(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Vec<Value>],
        cols: &[usize],
    ) -> Result<Vec<Option<Vec<Value>>>> {
        let npk = table.def.primary_key.len();
        let mut flat = Vec::with_capacity(keys.len() * npk);
        for (i, k) in keys.iter().enumerate() {
            if k.len() != npk {
                return Err(codes::key_not_complete(format!(
                    "key {i} has {} values, the primary key has {npk} columns",
                    k.len()
                )));
            }
            flat.extend(k.iter().cloned());
        }
        self.read_batch_flat(table, &flat, cols)
    }

    /// Same as [`Ndb::read_batch`] with the keys' values flattened: key i is
    /// `keys[i*n..(i+1)*n]` for an n-column primary key (no allocation per key).
    pub fn read_batch_flat(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Value],
        cols: &[usize],
    ) -> Result<Vec<Option<Vec<Value>>>> {
        let (mut flat, mut found) = (Vec::new(), Vec::new());
        self.read_batch_into(table, keys, cols, &mut flat, &mut found)?;
        let ncols = cols.len();
        let mut it = flat.into_iter();
        Ok(found
            .iter()
            .map(|&f| {
                let row: Vec<Value> = it.by_ref().take(ncols).collect();
                f.then_some(row)
            })
            .collect())
    }

    /// The allocation-free form: row i's columns land in `out[i*c..(i+1)*c]` for `c =
    /// cols.len()` and `found[i]` tells whether key i exists (its values are NULL when
    /// not). `out` and `found` are cleared first and can be reused across batches.
    pub fn read_batch_into(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Value],
        cols: &[usize],
        out: &mut Vec<Value>,
        found: &mut Vec<bool>,
    ) -> Result<()> {
        self.cluster.check_open()?;
        self.check_access()?;
        table.check_live()?;
        let def = &table.def;
        let npk = def.primary_key.len();
        if !keys.len().is_multiple_of(npk) {
            return Err(codes::key_not_complete(format!(
                "{} key values do not divide into keys of {npk} columns",
                keys.len()
            )));
        }
        if let Some(&c) = cols.iter().find(|&&c| c >= def.columns.len()) {
            return Err(codes::no_such_column(&format!("#{c}")));
        }
        let n = keys.len() / npk;
        // Keep the values of the previous batch in place: strings are decoded into their
        // allocations. Slots of keys not found are set to NULL below.
        out.truncate(n * cols.len());
        out.resize(n * cols.len(), Value::Null);
        found.clear();
        found.resize(n, false);
        let ncols = cols.len();
        let layout = &def.layout;
        let with_disk = cols.iter().any(|&c| layout.is_disk(c));
        self.read_batch_visit_inner(table, keys, with_disk, &mut |slot, row| {
            for (o, &c) in out[slot * ncols..(slot + 1) * ncols].iter_mut().zip(cols) {
                layout.value_into(c, row, o);
            }
            found[slot] = true;
        })?;
        if ncols > 0 {
            for (row, f) in out.chunks_mut(ncols).zip(found.iter()) {
                if !*f {
                    row.fill(Value::Null);
                }
            }
        }
        if cols.iter().any(|&c| def.columns[c].ty.is_blob()) && ncols > 0 {
            let mut tx = self.start_transaction()?;
            for ((k, row), f) in keys
                .chunks_exact(npk)
                .zip(out.chunks_mut(ncols))
                .zip(found.iter())
            {
                if *f {
                    let key: Vec<Value> = k
                        .iter()
                        .zip(&def.primary_key)
                        .map(|(v, &p)| coerce(v.clone(), &def.columns[p].ty, &def.columns[p].name))
                        .collect::<Result<_>>()?;
                    tx.finish_blobs(table, &key, cols, row)?;
                }
            }
            tx.close();
        }
        Ok(())
    }

    /// Committed-read lookups of many keys (flattened as in [`Ndb::read_batch_flat`]),
    /// handing each row found to `visit(key index, stored row)` in its stored form,
    /// under the fragment's mutex (decode with `table.def.layout`). Keys without a row
    /// are not visited. BLOB/TEXT columns appear as their stored head; rows of a table
    /// with disk columns come with their disk images.
    pub fn read_batch_visit(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Value],
        visit: &mut RowVisitor<'_>,
    ) -> Result<()> {
        self.read_batch_visit_inner(table, keys, table.def.layout.has_disk(), visit)
    }

    fn read_batch_visit_inner(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Value],
        with_disk: bool,
        visit: &mut RowVisitor<'_>,
    ) -> Result<()> {
        self.cluster.check_open()?;
        self.check_access()?;
        table.check_live()?;
        let npk = table.def.primary_key.len();
        if !keys.len().is_multiple_of(npk) {
            return Err(codes::key_not_complete(format!(
                "{} key values do not divide into keys of {npk} columns",
                keys.len()
            )));
        }
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let ReadScratch {
                order,
                key_buf,
                buf,
                coerced,
                batch,
            } = &mut *s;
            order.clear();
            key_buf.clear();
            batch.clear();
            self.read_batch_grouped(
                table, keys, order, key_buf, buf, coerced, batch, with_disk, visit,
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn read_batch_grouped(
        &self,
        table: &Arc<TableRuntime>,
        keys: &[Value],
        order: &mut Vec<(u32, BatchKey)>,
        key_buf: &mut Vec<u8>,
        buf: &mut Vec<u8>,
        coerced: &mut Vec<Value>,
        batch: &mut Vec<BatchKey>,
        with_disk: bool,
        visit: &mut RowVisitor<'_>,
    ) -> Result<()> {
        let def = &table.def;
        let npk = def.primary_key.len();
        // A single integer key column: its key bytes are the value's little-endian bytes
        // in the column's width (what coerce + key_from_values give), without the detour.
        let int_key = match (npk, def.columns[def.primary_key[0]].ty) {
            (1, ty @ ColumnType::Int { bytes, .. }) if bytes != 3 => {
                ty.int_range().map(|r| (r, bytes as usize))
            }
            _ => None,
        };
        for (i, k) in keys.chunks_exact(npk).enumerate() {
            let key_start = key_buf.len() as u32;
            let fast = match (int_key, &k[0]) {
                (Some(((lo, hi), width)), Value::Int(_) | Value::UInt(_)) => {
                    let n = k[0].as_i128().unwrap_or(i128::MIN);
                    if n < lo || n > hi {
                        None
                    } else {
                        key_buf.extend_from_slice(&(n as i64).to_le_bytes()[..width]);
                        Some(key_hash(&key_buf[key_start as usize..]))
                    }
                }
                _ => None,
            };
            let h = match fast {
                Some(h) => h,
                None => {
                    coerced.clear();
                    for (v, &p) in k.iter().zip(&def.primary_key) {
                        coerced.push(coerce(v.clone(), &def.columns[p].ty, &def.columns[p].name)?);
                    }
                    let h = table.key_hash_of(coerced, buf);
                    key_buf.extend_from_slice(buf);
                    h
                }
            };
            let buf_len = key_buf.len() as u32 - key_start;
            order.push((
                table.partition_of(h) as u32,
                BatchKey {
                    h32: index_hash(h),
                    key_start,
                    key_len: buf_len,
                    slot: i as u32,
                },
            ));
        }
        // Counting sort by partition: stable, linear.
        let parts = table.fragments.len();
        let mut starts = vec![0usize; parts + 1];
        for e in order.iter() {
            starts[e.0 as usize + 1] += 1;
        }
        for p in 0..parts {
            starts[p + 1] += starts[p];
        }
        batch.resize(
            order.len(),
            BatchKey {
                h32: 0,
                key_start: 0,
                key_len: 0,
                slot: 0,
            },
        );
        let mut next = starts.clone();
        for e in order.iter() {
            batch[next[e.0 as usize]] = e.1;
            next[e.0 as usize] += 1;
        }
        for p in 0..parts {
            let (i, j) = (starts[p], starts[p + 1]);
            if i < j {
                table
                    .primary_or_err(p)?
                    .state
                    .lock()
                    .visit_committed_batch(&batch[i..j], key_buf, with_disk, &mut |slot, row| {
                        visit(slot as usize, row)
                    })?;
            }
        }
        Ok(())
    }

    /// Inserts many rows: `rows[i]` holds values for `cols` (positions). Each batch of
    /// [`INSERT_BATCH_ROWS`] rows is one atomic transaction; returns the rows inserted. A
    /// failing row fails its batch (rolled back) and the call; earlier batches stay
    /// committed.
    ///
    /// A batch takes the mutexes of the fragments it writes, in (partition, replica)
    /// order — the order every transaction uses, so no deadlock — inserts the rows as
    /// committed and releases them: nobody can see a partial batch, and no row lock or
    /// pending change is needed. Tables with BLOB/TEXT parts or unique indexes, and a
    /// batch that meets a row locked by another transaction, take the ordinary path.
    pub fn insert_batch(
        &self,
        table: &Arc<TableRuntime>,
        cols: &[usize],
        rows: Vec<Vec<Value>>,
    ) -> Result<u64> {
        let mut done = 0u64;
        let mut it = rows.into_iter().peekable();
        while it.peek().is_some() {
            let batch: Vec<Vec<Value>> = it.by_ref().take(INSERT_BATCH_ROWS).collect();
            for row in &batch {
                if row.len() != cols.len() {
                    return Err(codes::bad_argument(format!(
                        "row has {} values for {} columns",
                        row.len(),
                        cols.len()
                    )));
                }
            }
            let n = batch.len() as u64;
            if table.has_follow_ups() || !self.insert_direct(table, cols, &batch)? {
                let mut tx = self.start_transaction()?;
                for row in batch {
                    let values: Vec<(usize, Value)> = cols.iter().copied().zip(row).collect();
                    tx.define_by_pos(table, OpKind::Insert, Vec::new(), values, None)?;
                }
                tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
            }
            done += n;
        }
        Ok(done)
    }

    /// The latched bulk path of [`Ndb::insert_batch`]: Ok(false) when a locked row was
    /// met (nothing was changed; the caller uses a transaction instead).
    fn insert_direct(
        &self,
        table: &Arc<TableRuntime>,
        cols: &[usize],
        batch: &[Vec<Value>],
    ) -> Result<bool> {
        self.cluster.check_open()?;
        table.check_live()?;
        let mut tx = self.start_transaction()?;
        // Coerce, complete and hash every row first, outside the latches.
        let mut prepared = Vec::with_capacity(batch.len());
        for row in batch {
            let values: Vec<(usize, Value)> =
                cols.iter().copied().zip(row.iter().cloned()).collect();
            prepared.push(tx.prepare_insert(table, values)?);
        }
        tx.discard();
        let parts = table.fragments.len();
        let mut order: Vec<usize> = (0..prepared.len()).collect();
        order.sort_by_key(|&i| prepared[i].partition);
        let mut used = vec![false; parts];
        for p in &prepared {
            used[p.partition] = true;
        }
        // Redo back-pressure first, then the commit gate, then the fragments.
        super::transaction::wait_for_redo_room(
            prepared
                .iter()
                .flat_map(|p| table.fragments[p.partition].iter().map(|c| &**c)),
        )?;
        let ticket = self.cluster.gcp.enter_commit();
        let gci = ticket.gci;
        let mut guards = Vec::new();
        let mut guard_of = vec![usize::MAX; parts];
        for (p, reps) in table.fragments.iter().enumerate() {
            if used[p] {
                guard_of[p] = guards.len();
                guards.push(reps.iter().map(|c| c.state.lock()).collect::<Vec<_>>());
            }
        }
        let mut inserted: Vec<(usize, usize, RowId)> = Vec::new(); // (partition, replica, row)
        let mut outcome: Result<bool> = Ok(true);
        'rows: for &i in &order {
            let p = &prepared[i];
            let g = &mut guards[guard_of[p.partition]];
            let cells = &table.fragments[p.partition];
            if !cells.iter().any(|c| c.is_live()) {
                outcome = Err(codes::node_group_down(format!(
                    "partition {} of table {} has no live replica (its node group is down)",
                    p.partition, table.def.name
                )));
                break 'rows;
            }
            for (r, f) in g.iter_mut().enumerate() {
                // A stopped node's replica is skipped; a restarting one takes the row
                // as committed (as a commit would feed it).
                if cells[r].role() == crate::txn::fragment::ReplicaRole::Dead {
                    continue;
                }
                match f.insert_committed(&p.key_bytes, p.h32, &p.full, crate::log::gcp::gci_hi(gci))
                {
                    Ok(DirectInsert::Inserted(row)) => inserted.push((p.partition, r, row)),
                    Ok(DirectInsert::Conflict) => {
                        outcome = Ok(false);
                        break 'rows;
                    }
                    Err(e) => {
                        outcome = Err(e);
                        break 'rows;
                    }
                }
            }
        }
        if !matches!(outcome, Ok(true)) {
            for &(part, r, row) in inserted.iter().rev() {
                let f = &mut guards[guard_of[part]][r];
                let h = f.row_hash(row);
                f.undo_insert_committed(row, h);
            }
        } else {
            // The batch is in: log it, per fragment, before anyone else sees the rows.
            inserted.sort_by_key(|&(part, r, _)| (part, r));
            let mut records = crate::log::redo::EncodedRecords::new();
            let mut k = 0;
            while k < inserted.len() {
                let (part, r, _) = inserted[k];
                let f = &mut guards[guard_of[part]][r];
                while k < inserted.len() && (inserted[k].0, inserted[k].1) == (part, r) {
                    f.log_committed_insert(inserted[k].2, gci, &mut records);
                    k += 1;
                }
                if let Some(redo) = &table.fragments[part][r].redo
                    && !records.is_empty()
                {
                    redo.log.append(redo.part, &records);
                }
                records.clear();
            }
        }
        drop(guards);
        drop(ticket);
        if let Ok(true) = outcome {
            self.cluster
                .transactions_committed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        outcome
    }
}
