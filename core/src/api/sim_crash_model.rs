//! The model of the simulated crash test (`sim_crash_tests.rs`): what the tables must
//! hold after a system restart, and the checks of a restarted cluster against it.
//!
//! A life of the scenario records [`Event`]s in order: committed transactions with
//! their GCI, and DDL (TRUNCATE, DROP, CREATE), which is durable when it returns (the
//! schema file is replaced atomically; TRUNCATE and DROP/CREATE give new table ids, so
//! old redo never applies to the new table). After a restart at GCI `restored`, the
//! expected database is the previous life's database, then every DDL made before the
//! power loss and every transaction with GCI <= `restored`, in order (GCIs never go
//! down within a life, so these transactions are a prefix of the life's commits). A
//! DDL that failed (the power went during it) may or may not have happened: both are
//! accepted, for that table only.
//!
//! The checks of a restarted cluster: every table equals the model (table scan, full
//! rows including the VARCHAR and the BLOB), the ordered index returns the same rows
//! in index order, the unique index's hidden table maps exactly the model's unique
//! values to their rows, the BLOB parts table holds exactly the parts of the rows,
//! both replicas of every fragment hold the same number of rows, and every fragment's
//! invariants hold (`Fragment::check`).

use super::*;
use crate::schema::{BlobKind, Charset, Column, ColumnType, IndexKind, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Tables the scenario uses: `t0`, `t1`.
pub(super) const SLOTS: usize = 2;
/// Primary keys are `0..KEYS`.
pub(super) const KEYS: u64 = 32;
/// Unique values are `u0 .. u<UNIQUE_VALUES - 1>` (collisions are frequent: 893).
pub(super) const UNIQUE_VALUES: u64 = 48;
const BLOB_INLINE_BYTES: usize = 256;
const BLOB_PART_BYTES: usize = 2000;

/// One row of the model: `val` is the number of the transaction that last wrote it,
/// `data_txn` of the one that last wrote `pad` and `body` (an update keeps them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub grp: i64,
    pub u: Option<u64>,
    pub val: i64,
    pub data_txn: i64,
    pub pad_len: usize,
    pub body_len: Option<usize>,
}

pub(super) type Table = BTreeMap<u64, Row>;
/// Per slot; `None`: the table does not exist.
pub(super) type Db = Vec<Option<Table>>;

#[derive(Debug, Clone)]
pub(super) enum Effect {
    Put(usize, u64, Row),
    Delete(usize, u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ddl {
    Create,
    Drop,
    Truncate,
}

#[derive(Debug, Clone)]
pub(super) enum Event {
    Txn { gci_hi: u32, effects: Vec<Effect> },
    Ddl { slot: usize, ddl: Ddl },
}

pub(super) fn table_name(slot: usize) -> String {
    format!("t{slot}")
}

pub(super) fn spec(slot: usize) -> TableSpec {
    TableSpec::new(
        &table_name(slot),
        vec![
            Column::new(
                "id",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: true,
                },
            )
            .primary_key(),
            Column::new(
                "grp",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: false,
                },
            ),
            Column::new(
                "u",
                ColumnType::Varchar {
                    len: 16,
                    charset: Charset::Latin1,
                },
            ),
            Column::new(
                "val",
                ColumnType::Int {
                    bytes: 8,
                    unsigned: false,
                },
            ),
            Column::new(
                "pad",
                ColumnType::Varchar {
                    len: 200,
                    charset: Charset::Latin1,
                },
            ),
            Column::new(
                "body",
                ColumnType::Blob {
                    kind: BlobKind::Regular,
                    charset: None,
                },
            ),
        ],
    )
    .index("ix_grp", IndexKind::OrderedIndex, &["grp"])
    .index("u_u", IndexKind::UniqueHashIndex, &["u"])
}

pub(super) fn unique_value(u: u64) -> String {
    format!("u{u}")
}

pub(super) fn pad_value(key: u64, val: i64, len: usize) -> String {
    let c = (b'a' + ((key + val as u64) % 26) as u8) as char;
    std::iter::repeat_n(c, len).collect()
}

pub(super) fn body_value(key: u64, val: i64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u64)
                .wrapping_mul(31)
                .wrapping_add(key * 7 + val as u64) as u8
        })
        .collect()
}

impl Row {
    /// The row as a table scan returns it.
    pub(super) fn values(&self, key: u64) -> Vec<Value> {
        vec![
            Value::UInt(key),
            Value::Int(self.grp),
            self.u.map_or(Value::Null, |u| Value::Str(unique_value(u))),
            Value::Int(self.val),
            Value::Str(pad_value(key, self.data_txn, self.pad_len)),
            self.body_len.map_or(Value::Null, |n| {
                Value::Bytes(body_value(key, self.data_txn, n))
            }),
        ]
    }

    /// The `(name, value)` pairs a write of the whole row defines.
    pub(super) fn columns(&self, key: u64) -> Vec<(&'static str, Value)> {
        let v = self.values(key);
        ["grp", "u", "val", "pad", "body"]
            .into_iter()
            .zip(v.into_iter().skip(1))
            .collect()
    }
}

/// Rows of the parts table a BLOB value of `len` bytes has.
fn blob_parts(len: usize) -> u64 {
    len.saturating_sub(BLOB_INLINE_BYTES)
        .div_ceil(BLOB_PART_BYTES) as u64
}

/// Applies one event to `db`.
pub(super) fn apply(db: &mut Db, e: &Event) {
    match e {
        Event::Txn { effects, .. } => {
            for eff in effects {
                match eff {
                    Effect::Put(s, k, r) => {
                        if let Some(t) = &mut db[*s] {
                            t.insert(*k, r.clone());
                        }
                    }
                    Effect::Delete(s, k) => {
                        if let Some(t) = &mut db[*s] {
                            t.remove(k);
                        }
                    }
                }
            }
        }
        Event::Ddl { slot, ddl } => {
            db[*slot] = match ddl {
                Ddl::Drop => None,
                Ddl::Create | Ddl::Truncate => Some(Table::new()),
            };
        }
    }
}

/// The database a restart at `restored` must show: `base`, then the DDL and the
/// transactions of GCI <= `restored` of `events`.
pub(super) fn expected(base: &Db, events: &[Event], restored: u32) -> Db {
    let mut db = base.clone();
    for e in events {
        match e {
            Event::Txn { gci_hi, .. } if *gci_hi > restored => {}
            e => apply(&mut db, e),
        }
    }
    db
}

/// A table as rows of values (what a table scan returns), by key.
pub(super) type Rows = BTreeMap<u64, Vec<Value>>;

/// The rows the model says a table holds.
pub(super) fn render(t: &Option<Table>) -> Option<Rows> {
    t.as_ref()
        .map(|t| t.iter().map(|(k, r)| (*k, r.values(*k))).collect())
}

/// What one table holds, as read from the cluster, after checking its indexes, BLOB
/// parts and fragments against its rows.
fn read_table(c: &Cluster, slot: usize) -> Result<Option<Rows>, String> {
    let ndb = c.ndb("test");
    let Ok(t) = ndb.table(&table_name(slot)) else {
        return Ok(None);
    };
    let err = |what: &str, e: crate::error::NdbError| format!("{}: {what}: {e}", t.def.name);
    let mut tx = ndb.start_transaction().map_err(|e| err("tx", e))?;
    let mut s = tx
        .scan(ScanSpec::table(t.clone()))
        .map_err(|e| err("scan", e))?;
    let mut rows = Rows::new();
    while let Some(r) = tx.scan_next(&mut s).map_err(|e| err("scan next", e))? {
        let Some(Value::UInt(k)) = r.first() else {
            return Err(format!("{}: row without a key: {r:?}", t.def.name));
        };
        if rows.insert(*k, r.clone()).is_some() {
            return Err(format!("{}: key {k} twice in a table scan", t.def.name));
        }
    }
    check_indexes(&ndb, &t, &rows)?;
    Ok(Some(rows))
}

/// The ordered index, the unique index and the BLOB parts against the table's rows,
/// then the fragments' invariants and replica agreement.
fn check_indexes(ndb: &Ndb, t: &Arc<TableRuntime>, rows: &Rows) -> Result<(), String> {
    let name = &t.def.name;
    let err = |what: &str, e: crate::error::NdbError| format!("{name}: {what}: {e}");
    let mut tx = ndb.start_transaction().map_err(|e| err("tx", e))?;
    // ordered index scan == table scan
    let mut spec = ScanSpec::table(t.clone());
    spec.index = t.def.index("ix_grp").map(|(i, _)| i);
    spec.sorted = true;
    let mut s = tx.scan(spec).map_err(|e| err("index scan", e))?;
    let mut by_index = Vec::new();
    while let Some(r) = tx.scan_next(&mut s).map_err(|e| err("index next", e))? {
        match (&r[0], &r[1]) {
            (Value::UInt(k), Value::Int(g)) => by_index.push((*g, *k)),
            _ => return Err(format!("{name}: index scan row {r:?}")),
        }
    }
    if by_index.windows(2).any(|w| w[0].0 > w[1].0) {
        return Err(format!(
            "{name}: ordered index scan out of order: {by_index:?}"
        ));
    }
    by_index.sort();
    let mut by_table = Vec::new();
    for (k, r) in rows {
        match r.get(1) {
            Some(Value::Int(g)) => by_table.push((*g, *k)),
            other => return Err(format!("{name}: key {k}: grp {other:?}")),
        }
    }
    by_table.sort();
    if by_index != by_table {
        return Err(format!(
            "{name}: ordered index {by_index:?} != table scan {by_table:?}"
        ));
    }
    // unique index: exactly the non-NULL values, each naming its row
    let (ui, _) = t.def.index("u_u").ok_or("no u_u")?;
    let ut = t.unique_tables[ui].clone().ok_or("no unique table")?;
    let mut s = tx
        .scan(ScanSpec::table(ut.clone()))
        .map_err(|e| err("unique scan", e))?;
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(r) = tx.scan_next(&mut s).map_err(|e| err("unique next", e))? {
        match &r[..] {
            [Value::Str(u), Value::UInt(k)] => {
                got.insert(u.clone(), *k);
            }
            other => return Err(format!("{name}: unique index row {other:?}")),
        }
    }
    let want: BTreeMap<String, u64> = rows
        .iter()
        .filter_map(|(k, r)| match r.get(2) {
            Some(Value::Str(u)) => Some((u.clone(), *k)),
            _ => None,
        })
        .collect();
    if got != want {
        return Err(format!(
            "{name}: unique index {got:?} != the table's values {want:?}"
        ));
    }
    // BLOB parts: exactly those of the rows (the scan above assembled the values)
    let (bi, _) = t.def.column("body").map_err(|e| err("body", e))?;
    let bt = t.blob_tables[bi].clone().ok_or("no blob table")?;
    let parts: u64 = rows
        .values()
        .map(|r| match r.get(5) {
            Some(Value::Bytes(b)) => blob_parts(b.len()),
            _ => 0,
        })
        .sum();
    if bt.row_count() != parts {
        return Err(format!(
            "{name}: {} BLOB parts stored, the rows have {parts}",
            bt.row_count()
        ));
    }
    for rt in [t, &ut, &bt] {
        for (p, reps) in rt.fragments.iter().enumerate() {
            let mut counts = Vec::new();
            for cell in reps {
                let mut f = cell.state.lock();
                f.check().map_err(|e| {
                    format!("{}: fragment {p} node {}: {e}", rt.def.name, cell.node_id)
                })?;
                counts.push(f.rows());
            }
            if counts.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!(
                    "{}: fragment {p}: replicas hold {counts:?} rows",
                    rt.def.name
                ));
            }
        }
    }
    Ok(())
}

/// Reads every slot's table from the cluster.
pub(super) fn read_db(c: &Cluster) -> Result<Vec<Option<Rows>>, String> {
    (0..SLOTS).map(|s| read_table(c, s)).collect()
}

/// A readable difference between two tables.
pub(super) fn diff(got: &Option<Rows>, want: &Option<Rows>) -> String {
    match (got, want) {
        (None, None) => "equal".into(),
        (None, Some(w)) => format!("table missing (want {} rows)", w.len()),
        (Some(g), None) => format!("table present with {} rows, want none", g.len()),
        (Some(g), Some(w)) => {
            let mut out = Vec::new();
            for (k, r) in w {
                match g.get(k) {
                    None => out.push(format!("missing {k}: {r:?}")),
                    Some(x) if x != r => out.push(format!("{k}: got {x:?} want {r:?}")),
                    _ => {}
                }
            }
            for (k, r) in g {
                if !w.contains_key(k) {
                    out.push(format!("extra {k}: {r:?}"));
                }
            }
            out.truncate(6);
            out.join("; ")
        }
    }
}
