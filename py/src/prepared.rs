//! Resolved column lists, cached per `Ndb` object: a table's runtime, the positions of
//! the requested columns and their interned names, keyed by (table name, column names).
//!
//! `read_many` and `reader` resolve their `columns=` here instead of looking each name
//! up and interning it on every call. An entry is used only while its table is live: a
//! dropped, truncated or re-created table (the engine marks the old runtime dropped and
//! installs a new one under the same name) is resolved again by name, so a cached entry
//! never reads a stale table. The lookup compares the caller's names in place (a list or
//! tuple of str) and allocates nothing on a hit.

use crate::convert::{column_positions, extract_columns, names};
use crate::errors::{R, err};
use crate::lock;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use rndb::api::TableRuntime;
use std::sync::{Arc, Mutex};

/// Entries kept per `Ndb`; when full, the cache starts over (a program uses a handful).
const MAX_ENTRIES: usize = 64;

/// A table with a resolved column list.
pub(crate) struct Prepared {
    pub table: Arc<TableRuntime>,
    /// Column positions, in the order asked for (every visible column when none given).
    pub cols: Vec<usize>,
    /// The columns' names as the table spells them, interned (result dict keys).
    pub names: Vec<Py<PyString>>,
    /// The primary-key columns' names (dict keys of keys given as dicts).
    pub pk_names: Vec<Py<PyString>>,
    /// Whether every column read is in memory and not BLOB/TEXT: a read of them does no
    /// I/O and no second lookup (`Reader.get` keeps the GIL for it).
    pub in_memory: bool,
}

impl Prepared {
    /// Resolves `columns` (None: every visible column) of `table` in `ndb`'s database.
    pub fn resolve(
        py: Python<'_>,
        ndb: &rndb::Ndb,
        table: &str,
        columns: Option<&[String]>,
    ) -> R<Prepared> {
        let table = ndb.table(table)?;
        let def = table.def.clone();
        let cols = column_positions(&def, columns)?;
        let names = names_of(py, &def, &cols);
        let pk_names = names_of(py, &def, &def.primary_key);
        let in_memory = cols
            .iter()
            .all(|&c| !def.layout.is_disk(c) && !def.columns[c].ty.is_blob());
        Ok(Prepared {
            table,
            cols,
            names,
            pk_names,
            in_memory,
        })
    }

    /// Whether the table is still the live one of its name.
    pub fn live(&self) -> bool {
        self.table.check_live().is_ok()
    }
}

fn names_of(py: Python<'_>, def: &rndb::schema::TableDef, cols: &[usize]) -> Vec<Py<PyString>> {
    names(py, def, cols)
        .into_iter()
        .map(Bound::unbind)
        .collect()
}

struct Entry {
    table: String,
    columns: Option<Vec<String>>,
    prepared: Arc<Prepared>,
}

/// The cache of one `Ndb` object.
#[derive(Default)]
pub(crate) struct ColumnCache {
    entries: Mutex<Vec<Entry>>,
}

/// Whether the Python `columns=` argument names exactly `want` (None: no argument).
/// `Err(())` when it cannot be compared in place (neither None, a list nor a tuple).
fn same_columns(columns: Option<&Bound<'_, PyAny>>, want: Option<&[String]>) -> Result<bool, ()> {
    let obj = match columns {
        Some(o) if !o.is_none() => o,
        _ => return Ok(want.is_none()),
    };
    let Some(want) = want else {
        return Ok(false);
    };
    let eq = |item: Bound<'_, PyAny>, w: &String| {
        item.cast::<PyString>()
            .ok()
            .and_then(|s| s.to_str().ok().map(|s| s == w))
            .unwrap_or(false)
    };
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.len() == want.len() && l.iter().zip(want).all(|(i, w)| eq(i, w)));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(t.len() == want.len() && t.iter().zip(want).all(|(i, w)| eq(i, w)));
    }
    Err(())
}

impl ColumnCache {
    /// The resolved columns of `table` for the Python `columns=` argument: from the
    /// cache when an entry for the same names is live, else resolved and kept.
    pub fn get(
        &self,
        py: Python<'_>,
        ndb: &rndb::Ndb,
        table: &str,
        columns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Arc<Prepared>> {
        let mut in_place = true;
        {
            let entries = lock(py, &self.entries);
            for e in entries.iter().filter(|e| e.table == table) {
                match same_columns(columns, e.columns.as_deref()) {
                    Ok(true) if e.prepared.live() => return Ok(e.prepared.clone()),
                    Ok(_) => {}
                    Err(()) => {
                        in_place = false;
                        break;
                    }
                }
            }
        }
        let wanted = extract_columns(columns).map_err(err)?;
        if !in_place {
            // An iterable other than a list or tuple: compare the extracted names.
            let entries = lock(py, &self.entries);
            if let Some(e) = entries.iter().find(|e| {
                e.table == table && e.columns.as_deref() == wanted.as_deref() && e.prepared.live()
            }) {
                return Ok(e.prepared.clone());
            }
        }
        let p = Arc::new(Prepared::resolve(py, ndb, table, wanted.as_deref()).map_err(err)?);
        let mut entries = lock(py, &self.entries);
        entries.retain(|e| e.prepared.live());
        entries.retain(|e| !(e.table == table && e.columns == wanted));
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.push(Entry {
            table: table.to_string(),
            columns: wanted,
            prepared: p.clone(),
        });
        Ok(p)
    }
}
