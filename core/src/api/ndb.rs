//! `Ndb`: a database handle, like `Ndb(&cluster_connection, "test")`, with the
//! dictionary calls, transactions, and batched primary-key reads and inserts.
//!
//! The batched paths ([`Ndb::read_batch`], [`Ndb::insert_batch`]) are what bulk loads and
//! key-value lookups use: keys are hashed and grouped by partition first, then each
//! fragment's mutex is taken once per batch and the lookups of the group run back to
//! back (with prefetch hints), so independent cache misses overlap and no thread hand-off
//! happens per row.

use super::cluster::ClusterInner;
use super::dict::{TableRuntime, TableSpec};
use super::transaction::{AbortOption, ExecType, OpKind, Transaction};
use crate::error::{Result, codes};
use crate::schema::layout::index_hash;
use crate::schema::value::coerce;
use crate::schema::{IndexKind, Value};
use crate::txn::fragment::Step;
use crate::txn::lock::LockMode;
use std::sync::Arc;

/// Rows per transaction in [`Ndb::insert_batch`].
pub const INSERT_BATCH_ROWS: usize = 1000;

#[derive(Clone)]
pub struct Ndb {
    pub(crate) cluster: Arc<ClusterInner>,
    database: String,
}

impl Ndb {
    pub(crate) fn new(cluster: Arc<ClusterInner>, database: &str) -> Ndb {
        Ndb {
            cluster,
            database: database.to_string(),
        }
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
        Transaction::new(self.cluster.clone())
    }

    pub fn create_table(&self, spec: TableSpec) -> Result<Arc<TableRuntime>> {
        self.cluster.check_open()?;
        self.cluster.create_table(&self.database, spec)
    }

    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<bool> {
        self.cluster.check_open()?;
        self.cluster.drop_table(&self.database, name, if_exists)
    }

    pub fn truncate_table(&self, name: &str) -> Result<()> {
        self.cluster.check_open()?;
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
        self.cluster
            .create_index(&self.database, table, name, kind, cols)
    }

    pub fn drop_index(&self, table: &str, name: &str) -> Result<()> {
        self.cluster.check_open()?;
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
        self.cluster.check_open()?;
        table.check_live()?;
        let def = &table.def;
        let npk = def.primary_key.len();
        // hash and group by partition
        let mut order: Vec<(u32, u32, u32)> = Vec::with_capacity(keys.len()); // (partition, key index, h32)
        let mut key_bytes: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        let mut buf = Vec::new();
        let mut coerced = Vec::with_capacity(npk);
        for (i, k) in keys.iter().enumerate() {
            if k.len() != npk {
                return Err(codes::key_not_complete(format!(
                    "key {i} has {} values, the primary key has {npk} columns",
                    k.len()
                )));
            }
            coerced.clear();
            for (v, &p) in k.iter().zip(&def.primary_key) {
                coerced.push(coerce(v.clone(), &def.columns[p].ty, &def.columns[p].name)?);
            }
            let h = table.key_hash_of(&coerced, &mut buf);
            order.push((table.partition_of(h) as u32, i as u32, index_hash(h)));
            key_bytes.push(buf.clone());
        }
        order.sort_unstable_by_key(|e| (e.0, e.1));
        let mut out: Vec<Option<Vec<Value>>> = vec![None; keys.len()];
        let has_blobs = cols.iter().any(|&c| def.columns[c].ty.is_blob());
        let mut i = 0;
        while i < order.len() {
            let part = order[i].0;
            let cell = &table.fragments[part as usize][0];
            let mut f = cell.state.lock();
            let mut j = i;
            while j < order.len() && order[j].0 == part {
                f.prefetch(order[j].2);
                j += 1;
            }
            for &(_, ki, h32) in &order[i..j] {
                let mut row = Vec::with_capacity(cols.len());
                match f.read(
                    0,
                    &key_bytes[ki as usize],
                    h32,
                    LockMode::CommittedRead,
                    cols,
                    &mut row,
                ) {
                    Ok(Step::Done(_)) => out[ki as usize] = Some(row),
                    Ok(Step::Blocked) => return Err(codes::internal("committed read blocked")),
                    Err(e) if e.code == 626 => {}
                    Err(e) => return Err(e),
                }
            }
            i = j;
        }
        if has_blobs {
            let mut tx = self.start_transaction()?;
            for (k, row) in keys.iter().zip(out.iter_mut()) {
                if let Some(row) = row {
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
        Ok(out)
    }

    /// Inserts many rows: `rows[i]` holds values for `cols` (positions). Commits every
    /// [`INSERT_BATCH_ROWS`] rows; returns the rows inserted. A failing row fails its
    /// batch (rolled back) and the call; earlier batches stay committed.
    pub fn insert_batch(
        &self,
        table: &Arc<TableRuntime>,
        cols: &[usize],
        rows: Vec<Vec<Value>>,
    ) -> Result<u64> {
        let mut done = 0u64;
        let mut it = rows.into_iter().peekable();
        while it.peek().is_some() {
            let mut tx = self.start_transaction()?;
            let mut n = 0;
            for row in it.by_ref().take(INSERT_BATCH_ROWS) {
                if row.len() != cols.len() {
                    return Err(codes::bad_argument(format!(
                        "row has {} values for {} columns",
                        row.len(),
                        cols.len()
                    )));
                }
                let values: Vec<(usize, Value)> = cols.iter().copied().zip(row).collect();
                tx.define_by_pos(table, OpKind::Insert, Vec::new(), values, None)?;
                n += 1;
            }
            tx.execute(ExecType::Commit, AbortOption::AbortOnError)?;
            done += n;
        }
        Ok(done)
    }
}
