//! The dictionary (NdbDictionary::Dictionary) and the table, column and index objects
//! (NdbDictionary::Table, Column, Index).
//!
//! Objects made by `rndb_X_create` belong to the caller (free them with `rndb_X_free`);
//! objects returned by the dictionary (`rndb_dict_get_table`, `rndb_dict_get_index`) and
//! the columns of a table belong to their owner, are freed with it, and refuse
//! `rndb_X_free`. Dictionary objects are read-only, and the dictionary caches them: two
//! `rndb_dict_get_table` calls return the same handle (refreshed when the table changed).

use crate::error::{ErrorStore, c_string, guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind, Registry};
use crate::ndb::{NdbObj, ndb_by_handle, ndb_mut};
use crate::remote::RemoteNdb;
use crate::types::{ColDef, rndb_column_type, size_in_bytes};
use crate::{cstr, rndb_column, rndb_dictionary, rndb_index, rndb_ndb, rndb_table};
use rndb_core::api::{TableRuntime, TableSpec};
use rndb_core::error::{NdbError, Result, codes};
use rndb_core::schema::IndexKind;
use std::collections::HashMap;
use std::ffi::{CString, c_char, c_int};
use std::sync::{Arc, Mutex};

/// NdbDictionary::Column::StorageType values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_storage_type {
    RNDB_STORAGE_MEMORY = 0,
    RNDB_STORAGE_DISK = 1,
}

/// NdbDictionary::Index::Type values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rndb_index_type {
    RNDB_INDEX_UNDEFINED = 0,
    RNDB_INDEX_UNIQUE_HASH = 3,
    RNDB_INDEX_ORDERED = 6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    User,
    Dict(Handle),
    Table(Handle),
    Index(Handle),
}

pub(crate) struct DictObj {
    pub ndb: Handle,
    pub tables: HashMap<String, Handle>,
    pub indexes: HashMap<(String, String), Handle>,
    pub records: Vec<Handle>,
    pub error: ErrorStore,
}

pub(crate) struct TableObj {
    pub name: CString,
    pub columns: Vec<Handle>,
    pub logging: bool,
    pub tablespace: Option<CString>,
    pub owner: Owner,
    pub runtime: Mutex<Option<Arc<TableRuntime>>>,
    pub id: u32,
}

pub(crate) struct ColumnObj {
    pub def: ColDef,
    pub name: CString,
    pub owner: Owner,
    pub col_no: i32,
}

pub(crate) struct IndexObj {
    pub name: CString,
    pub table: CString,
    pub kind: i32,
    pub columns: Vec<String>,
    pub column_objs: Vec<Handle>,
    pub logging: bool,
    pub owner: Owner,
}

pub(crate) static DICTS: Registry<DictObj> = Registry::new(Kind::Dictionary);
pub(crate) static TABLES: Registry<TableObj> = Registry::new(Kind::Table);
pub(crate) static COLUMNS: Registry<ColumnObj> = Registry::new(Kind::Column);
pub(crate) static INDEXES: Registry<IndexObj> = Registry::new(Kind::Index);

pub(crate) fn release_registries() {
    DICTS.release_all_memory();
    TABLES.release_all_memory();
    COLUMNS.release_all_memory();
    INDEXES.release_all_memory();
}

fn read_only(kind: Kind) -> NdbError {
    codes::bad_argument(format!(
        "this {} belongs to the dictionary and is read-only (make one with {}_create)",
        kind.c_name(),
        kind.c_name()
    ))
}

fn owned(kind: Kind) -> NdbError {
    codes::bad_argument(format!(
        "this {} belongs to its dictionary or table and is freed with it",
        kind.c_name()
    ))
}

macro_rules! accessor {
    ($fn:ident, $reg:ident, $ty:ty, $kind:expr) => {
        pub(crate) fn $fn<'a, P>(p: *const P) -> Result<(Handle, &'a mut $ty)> {
            let h = Handle::decode(p, &[$kind]).map_err(|e| handle_error($kind, e))?;
            let o = $reg.get(h).map_err(|e| handle_error($kind, e))?;
            // SAFETY: live slot, used by its Ndb's (or its creator's) thread only.
            Ok((h, unsafe { &mut *o }))
        }
    };
}

accessor!(dict_mut, DICTS, DictObj, Kind::Dictionary);
accessor!(table_mut, TABLES, TableObj, Kind::Table);
accessor!(column_mut, COLUMNS, ColumnObj, Kind::Column);
accessor!(index_mut, INDEXES, IndexObj, Kind::Index);

fn new_column(def: ColDef, owner: Owner, col_no: i32) -> Result<Handle> {
    let name = c_string(&def.name);
    COLUMNS
        .insert(ColumnObj {
            def,
            name,
            owner,
            col_no,
        })
        .map_err(|_| codes::bad_argument("too many column objects"))
}

fn free_table_obj(h: Handle) {
    if let Ok(t) = TABLES.remove(h) {
        for c in t.columns {
            let _ = COLUMNS.remove(c);
        }
    }
}

fn free_index_obj(h: Handle) {
    if let Ok(i) = INDEXES.remove(h) {
        for c in i.column_objs {
            let _ = COLUMNS.remove(c);
        }
    }
}

/// Frees a dictionary with every object it returned.
pub(crate) fn free_dict(h: Handle) {
    if let Ok(d) = DICTS.remove(h) {
        for (_, t) in d.tables {
            free_table_obj(t);
        }
        for (_, i) in d.indexes {
            free_index_obj(i);
        }
        crate::record::free_records(d.records);
    }
}

/// Runs `f` on the engine table behind a table object: the dictionary's, or, for a
/// table object the application built, the table of that name in `ndb`'s database.
pub(crate) fn with_table_runtime<R>(
    p: *const rndb_table,
    ndb: Option<&mut NdbObj>,
    f: impl FnOnce(&Arc<TableRuntime>) -> Result<R>,
) -> Result<R> {
    let (_, t) = table_mut(p)?;
    let guard = t.runtime.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(rt) => {
            rt.check_live()?;
            f(rt)
        }
        None => {
            drop(guard);
            match ndb {
                Some(n) => f(&n.table(t.name.to_str().unwrap_or(""))?),
                None => Err(codes::bad_argument(
                    "this rndb_table was not returned by the dictionary (use rndb_dict_get_table)",
                )),
            }
        }
    }
}

pub(crate) fn table_runtime(p: *const rndb_table) -> Result<Arc<TableRuntime>> {
    with_table_runtime(p, None, |rt| Ok(rt.clone()))
}

/// Fills a dictionary table object from the engine's definition.
fn load_table(th: Handle, t: &mut TableObj, rt: Arc<TableRuntime>) -> Result<()> {
    for c in std::mem::take(&mut t.columns) {
        let _ = COLUMNS.remove(c);
    }
    for (i, c) in rt.def.columns.iter().enumerate() {
        t.columns.push(new_column(
            ColDef::from_core(c),
            Owner::Table(th),
            i as c_int,
        )?);
    }
    t.name = c_string(&rt.def.name);
    t.logging = rt.def.logging;
    t.tablespace = rt.def.tablespace.as_deref().map(c_string);
    t.id = rt.def.id;
    *t.runtime.lock().unwrap_or_else(|e| e.into_inner()) = Some(rt);
    Ok(())
}

/// The Ndb object of a dictionary.
fn dict_ndb<'a>(d: &DictObj) -> Result<&'a mut NdbObj> {
    Ok(ndb_by_handle(d.ndb)?.1)
}

/// The dictionary of an Ndb object (NDB's getDictionary), owned by it. NULL on a bad
/// handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_get_dictionary(ndb: *mut rndb_ndb) -> *mut rndb_dictionary {
    guard("rndb_ndb_get_dictionary", || {
        let (h, n) = ndb_mut(ndb)?;
        if let Some(d) = n.dict
            && DICTS.get(d).is_ok()
        {
            return Ok(d.ptr());
        }
        let d = DICTS
            .insert(DictObj {
                ndb: h,
                tables: HashMap::new(),
                indexes: HashMap::new(),
                records: Vec::new(),
                error: ErrorStore::new(),
            })
            .map_err(|_| codes::bad_argument("too many dictionaries"))?;
        n.dict = Some(d);
        Ok(d.ptr())
    })
}

/// The dictionary's last error (NDB's Dictionary::getNdbError). Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_dict_get_error(dict: *const rndb_dictionary) -> *const rndb_error {
    match dict_mut(dict) {
        Ok((_, d)) => d.error.ptr(),
        Err(e) => {
            crate::error::set_last(&e);
            crate::error::last_ptr()
        }
    }
}

fn with_dict<R: crate::error::FfiDefault>(
    name: &str,
    dict: *const rndb_dictionary,
    f: impl FnOnce(Handle, &mut DictObj) -> Result<R>,
) -> R {
    guard(name, || {
        let (h, d) = dict_mut(dict)?;
        match f(h, d) {
            Ok(v) => Ok(v),
            Err(e) => {
                // The dictionary may have been freed by the callee only on success.
                if let Ok((_, d)) = dict_mut(dict) {
                    d.error.set(&e);
                }
                Err(e)
            }
        }
    })
}

/// A table by name, NDB's `getTable(name)`: owned by the dictionary (freed with the
/// rndb_ndb), read-only. NULL with error 723 when there is no such table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_dict_get_table(
    dict: *mut rndb_dictionary,
    name: *const c_char,
) -> *const rndb_table {
    with_dict("rndb_dict_get_table", dict, |dh, d| {
        // SAFETY: a NUL-terminated string from the caller.
        let name = unsafe { cstr(name, "table name") }?;
        let rt = dict_ndb(d)?.table(name)?;
        let key = name.to_ascii_lowercase();
        if let Some(&th) = d.tables.get(&key)
            && let Ok(t) = TABLES.get(th)
        {
            // SAFETY: live table object of this dictionary.
            let t = unsafe { &mut *t };
            let same = t
                .runtime
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|old| Arc::ptr_eq(old, &rt));
            if !same {
                load_table(th, t, rt)?;
            }
            return Ok(th.ptr::<rndb_table>() as *const rndb_table);
        }
        let th = TABLES
            .insert(TableObj {
                name: c_string(name),
                columns: Vec::new(),
                logging: true,
                tablespace: None,
                owner: Owner::Dict(dh),
                runtime: Mutex::new(None),
                id: 0,
            })
            .map_err(|_| codes::bad_argument("too many table objects"))?;
        let (_, t) = table_mut(th.ptr::<rndb_table>())?;
        load_table(th, t, rt)?;
        d.tables.insert(key, th);
        Ok(th.ptr::<rndb_table>() as *const rndb_table)
    })
}

/// An index of a table, NDB's `getIndex(indexName, tableName)`: owned by the
/// dictionary, read-only. NULL with error 4243 when there is no such index.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_dict_get_index(
    dict: *mut rndb_dictionary,
    index_name: *const c_char,
    table_name: *const c_char,
) -> *const rndb_index {
    with_dict("rndb_dict_get_index", dict, |dh, d| {
        // SAFETY: NUL-terminated strings from the caller.
        let (iname, tname) = unsafe {
            (
                cstr(index_name, "index name")?,
                cstr(table_name, "table name")?,
            )
        };
        let rt = dict_ndb(d)?.table(tname)?;
        let idx = RemoteNdb::index_of(&rt, iname)
            .map(|i| &rt.def.indexes[i])
            .ok_or_else(|| codes::no_such_index(iname))?;
        let key = (tname.to_ascii_lowercase(), iname.to_ascii_lowercase());
        let columns: Vec<String> = idx
            .columns
            .iter()
            .map(|&c| rt.def.columns[c].name.clone())
            .collect();
        if let Some(&old) = d.indexes.get(&key) {
            if let Ok(o) = INDEXES.get(old) {
                // SAFETY: live index object of this dictionary.
                if unsafe { &*o }.columns == columns {
                    return Ok(old.ptr::<rndb_index>() as *const rndb_index);
                }
            }
            d.indexes.remove(&key);
            free_index_obj(old);
        }
        let ih = INDEXES
            .insert(IndexObj {
                name: c_string(&idx.name),
                table: c_string(&rt.def.name),
                kind: match idx.kind {
                    IndexKind::OrderedIndex => rndb_index_type::RNDB_INDEX_ORDERED as i32,
                    IndexKind::UniqueHashIndex => rndb_index_type::RNDB_INDEX_UNIQUE_HASH as i32,
                },
                columns,
                column_objs: Vec::new(),
                logging: false,
                owner: Owner::Dict(dh),
            })
            .map_err(|_| codes::bad_argument("too many index objects"))?;
        let mut objs = Vec::new();
        for &c in &idx.columns {
            objs.push(new_column(
                ColDef::from_core(&rt.def.columns[c]),
                Owner::Index(ih),
                c as c_int,
            )?);
        }
        let (_, io) = index_mut(ih.ptr::<rndb_index>())?;
        io.column_objs = objs;
        d.indexes.insert(key, ih);
        Ok(ih.ptr::<rndb_index>() as *const rndb_index)
    })
}

/// Creates a table from a definition, NDB's `createTable(table)`: columns in order,
/// the primary key from the columns marked primary key (none: NDB's hidden `$PK`).
/// Returns 0, or -1 (721 exists, 4401 duplicate column, unsupported type...).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_dict_create_table(
    dict: *mut rndb_dictionary,
    table: *const rndb_table,
) -> c_int {
    with_dict("rndb_dict_create_table", dict, |_, d| {
        let (_, t) = table_mut(table)?;
        let mut columns = Vec::with_capacity(t.columns.len());
        for &c in &t.columns {
            let (_, co) = column_mut(c.ptr::<rndb_column>())?;
            columns.push(co.def.to_core()?);
        }
        let spec = TableSpec {
            name: t.name.to_str().unwrap_or("").to_string(),
            columns,
            primary_key: vec![],
            indexes: vec![],
            logging: t.logging,
            if_not_exists: false,
            tablespace: t
                .tablespace
                .as_ref()
                .map(|ts| ts.to_string_lossy().into_owned()),
        };
        let n = dict_ndb(d)?;
        let db = n.db().to_string();
        match n.remote_engine()? {
            Some(r) => r.create_table(&db, &spec)?,
            None => {
                n.core()?.create_table(spec)?;
            }
        }
        Ok(0)
    })
}

/// Drops a table by name, NDB's `dropTable(name)`: every row and page freed, its
/// indexes too. Returns 0, or -1 (723 no such table...).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_dict_drop_table(
    dict: *mut rndb_dictionary,
    name: *const c_char,
) -> c_int {
    with_dict("rndb_dict_drop_table", dict, |_, d| {
        // SAFETY: a NUL-terminated string from the caller.
        let name = unsafe { cstr(name, "table name") }?;
        let n = dict_ndb(d)?;
        let db = n.db().to_string();
        match n.remote_engine()? {
            Some(r) => r.drop_table(&db, name)?,
            None => {
                n.core()?.drop_table(name, false)?;
            }
        }
        Ok(0)
    })
}

/// Creates an index from a definition, NDB's `createIndex(index)`: an ordered index
/// (range scans) or a unique hash index on the named columns of its table, built from
/// the rows present. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_dict_create_index(
    dict: *mut rndb_dictionary,
    index: *const rndb_index,
) -> c_int {
    with_dict("rndb_dict_create_index", dict, |_, d| {
        let (_, i) = index_mut(index)?;
        let kind = match i.kind {
            6 => IndexKind::OrderedIndex,
            3 => IndexKind::UniqueHashIndex,
            k => {
                return Err(codes::bad_argument(format!(
                    "index type {k}: use OrderedIndex (6) or UniqueHashIndex (3)"
                )));
            }
        };
        let table = i.table.to_str().unwrap_or("");
        if table.is_empty() {
            return Err(codes::bad_argument("the index has no table (setTable)"));
        }
        let iname = i.name.to_str().unwrap_or("");
        let n = dict_ndb(d)?;
        let db = n.db().to_string();
        match n.remote_engine()? {
            Some(r) => r.create_index(&db, table, iname, kind, &i.columns)?,
            None => n.core()?.create_index(table, iname, kind, &i.columns)?,
        }
        Ok(0)
    })
}

/// Drops an index, NDB's `dropIndex(indexName, tableName)`. Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_dict_drop_index(
    dict: *mut rndb_dictionary,
    index_name: *const c_char,
    table_name: *const c_char,
) -> c_int {
    with_dict("rndb_dict_drop_index", dict, |_, d| {
        // SAFETY: NUL-terminated strings from the caller.
        let (iname, tname) = unsafe {
            (
                cstr(index_name, "index name")?,
                cstr(table_name, "table name")?,
            )
        };
        let n = dict_ndb(d)?;
        let db = n.db().to_string();
        match n.remote_engine()? {
            Some(r) => r.drop_index(&db, tname, iname)?,
            None => n.core()?.drop_index(tname, iname)?,
        }
        Ok(0)
    })
}

// ---------------------------------------------------------------- tables

/// Creates a table definition, NDB's `NdbDictionary::Table(name)`; add columns, then
/// `rndb_dict_create_table`. Free with `rndb_table_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_table_create(name: *const c_char) -> *mut rndb_table {
    guard("rndb_table_create", || {
        let name = if name.is_null() {
            ""
        } else {
            // SAFETY: a NUL-terminated string from the caller.
            unsafe { cstr(name, "table name") }?
        };
        let h = TABLES
            .insert(TableObj {
                name: c_string(name),
                columns: Vec::new(),
                logging: true,
                tablespace: None,
                owner: Owner::User,
                runtime: Mutex::new(None),
                id: 0,
            })
            .map_err(|_| codes::bad_argument("too many table objects"))?;
        Ok(h.ptr())
    })
}

/// Copies a table definition (NDB's copy constructor): the copy belongs to the caller.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_copy(table: *const rndb_table) -> *mut rndb_table {
    guard("rndb_table_copy", || {
        let (_, t) = table_mut(table)?;
        let mut defs = Vec::new();
        for &c in &t.columns {
            let (_, co) = column_mut(c.ptr::<rndb_column>())?;
            defs.push(co.def.clone());
        }
        let (name, logging, ts) = (t.name.clone(), t.logging, t.tablespace.clone());
        let h = TABLES
            .insert(TableObj {
                name,
                columns: Vec::new(),
                logging,
                tablespace: ts,
                owner: Owner::User,
                runtime: Mutex::new(None),
                id: 0,
            })
            .map_err(|_| codes::bad_argument("too many table objects"))?;
        let (_, nt) = table_mut(h.ptr::<rndb_table>())?;
        for (i, d) in defs.into_iter().enumerate() {
            nt.columns.push(new_column(d, Owner::Table(h), i as c_int)?);
        }
        Ok(h.ptr())
    })
}

/// Frees a table definition made by `rndb_table_create` or `rndb_table_copy` (with its
/// columns). Dictionary tables refuse (-1). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_free(table: *mut rndb_table) -> c_int {
    guard("rndb_table_free", || {
        let (h, t) = table_mut(table)?;
        if t.owner != Owner::User {
            return Err(owned(Kind::Table));
        }
        free_table_obj(h);
        Ok(0)
    })
}

fn user_table<'a>(p: *const rndb_table) -> Result<(Handle, &'a mut TableObj)> {
    let (h, t) = table_mut(p)?;
    if t.owner != Owner::User {
        return Err(read_only(Kind::Table));
    }
    Ok((h, t))
}

/// Renames a table definition (NDB's setName). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_table_set_name(table: *mut rndb_table, name: *const c_char) -> c_int {
    guard("rndb_table_set_name", || {
        let (_, t) = user_table(table)?;
        // SAFETY: a NUL-terminated string from the caller.
        t.name = c_string(unsafe { cstr(name, "table name") }?);
        Ok(0)
    })
}

/// The table's name (NDB's getName); NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_name(table: *const rndb_table) -> *const c_char {
    guard("rndb_table_get_name", || {
        Ok(table_mut(table)?.1.name.as_ptr())
    })
}

/// The table's id in the dictionary (NDB's getTableId); -1 for a definition not
/// created yet or a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_table_id(table: *const rndb_table) -> c_int {
    guard("rndb_table_get_table_id", || {
        let (_, t) = table_mut(table)?;
        if t.owner == Owner::User {
            return Ok(-1);
        }
        Ok(t.id as c_int)
    })
}

/// Appends a copy of a column to a table definition (NDB's addColumn). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_add_column(
    table: *mut rndb_table,
    column: *const rndb_column,
) -> c_int {
    guard("rndb_table_add_column", || {
        let (h, t) = user_table(table)?;
        let (_, c) = column_mut(column)?;
        let def = c.def.clone();
        let n = t.columns.len() as c_int;
        t.columns.push(new_column(def, Owner::Table(h), n)?);
        Ok(0)
    })
}

/// Number of columns (NDB's getNoOfColumns), including NDB's hidden `$PK` of a table
/// created without a primary key; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_no_of_columns(table: *const rndb_table) -> c_int {
    guard("rndb_table_get_no_of_columns", || {
        Ok(table_mut(table)?.1.columns.len() as c_int)
    })
}

/// Column `i` (its attribute id) of a table (NDB's getColumn(int)), owned by the
/// table; NULL when out of range. Columns of dictionary tables are read-only.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_column(table: *const rndb_table, i: c_int) -> *mut rndb_column {
    guard("rndb_table_get_column", || {
        let (_, t) = table_mut(table)?;
        let h = usize::try_from(i)
            .ok()
            .and_then(|i| t.columns.get(i))
            .ok_or_else(|| {
                codes::no_such_column(&format!("#{i} (the table has {} columns)", t.columns.len()))
            })?;
        Ok(h.ptr())
    })
}

/// The column of a table by name (NDB's getColumn(const char*), case-insensitive);
/// NULL with error 4004 when there is none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_table_get_column_by_name(
    table: *const rndb_table,
    name: *const c_char,
) -> *mut rndb_column {
    guard("rndb_table_get_column_by_name", || {
        let (_, t) = table_mut(table)?;
        // SAFETY: a NUL-terminated string from the caller.
        let name = unsafe { cstr(name, "column name") }?;
        for &c in &t.columns {
            let (_, co) = column_mut(c.ptr::<rndb_column>())?;
            if co.def.name.eq_ignore_ascii_case(name) {
                return Ok(c.ptr());
            }
        }
        Err(codes::no_such_column(name))
    })
}

/// Number of primary-key columns (NDB's getNoOfPrimaryKeys); -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_no_of_primary_keys(table: *const rndb_table) -> c_int {
    guard("rndb_table_get_no_of_primary_keys", || {
        let (_, t) = table_mut(table)?;
        let mut n = 0;
        for &c in &t.columns {
            n += column_mut(c.ptr::<rndb_column>())?.1.def.primary_key as c_int;
        }
        Ok(n)
    })
}

/// Name of the `i`-th primary-key column (NDB's getPrimaryKey(i)); NULL when out of
/// range.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_primary_key(table: *const rndb_table, i: c_int) -> *const c_char {
    guard("rndb_table_get_primary_key", || {
        let (_, t) = table_mut(table)?;
        let mut k = 0;
        for &c in &t.columns {
            let (_, co) = column_mut(c.ptr::<rndb_column>())?;
            if co.def.primary_key {
                if k == i {
                    return Ok(co.name.as_ptr());
                }
                k += 1;
            }
        }
        Err(codes::bad_argument(format!(
            "primary key column #{i} (the key has {k} columns)"
        )))
    })
}

/// NDB's setLogging: false makes a NoLogging (temporary) table. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_set_logging(table: *mut rndb_table, logging: c_int) -> c_int {
    guard("rndb_table_set_logging", || {
        user_table(table)?.1.logging = logging != 0;
        Ok(0)
    })
}

/// NDB's getLogging: 1 or 0; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_logging(table: *const rndb_table) -> c_int {
    guard("rndb_table_get_logging", || {
        Ok(table_mut(table)?.1.logging as c_int)
    })
}

/// NDB's setTablespaceName: recorded (disk columns are kept like memory columns by the
/// embedded cluster). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_table_set_tablespace_name(
    table: *mut rndb_table,
    name: *const c_char,
) -> c_int {
    guard("rndb_table_set_tablespace_name", || {
        let (_, t) = user_table(table)?;
        // SAFETY: a NUL-terminated string from the caller.
        t.tablespace = Some(c_string(unsafe { cstr(name, "tablespace name") }?));
        Ok(0)
    })
}

/// NDB's getTablespaceName: the name set, or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_table_get_tablespace_name(table: *const rndb_table) -> *const c_char {
    guard("rndb_table_get_tablespace_name", || {
        let (_, t) = table_mut(table)?;
        Ok(t.tablespace
            .as_ref()
            .map_or(std::ptr::null(), |s| s.as_ptr()))
    })
}

// ---------------------------------------------------------------- columns

/// Creates a column definition, NDB's `NdbDictionary::Column(name)`: type Unsigned,
/// length 1, not nullable, not part of the key, in memory. Free with
/// `rndb_column_free` (a table keeps its own copy: `rndb_table_add_column`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_column_create(name: *const c_char) -> *mut rndb_column {
    guard("rndb_column_create", || {
        let name = if name.is_null() {
            ""
        } else {
            // SAFETY: a NUL-terminated string from the caller.
            unsafe { cstr(name, "column name") }?
        };
        Ok(new_column(ColDef::new(name), Owner::User, -1)?.ptr())
    })
}

/// Copies a column definition (NDB's copy constructor); the copy belongs to the caller.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_copy(column: *const rndb_column) -> *mut rndb_column {
    guard("rndb_column_copy", || {
        let def = column_mut(column)?.1.def.clone();
        Ok(new_column(def, Owner::User, -1)?.ptr())
    })
}

/// Frees a column made by `rndb_column_create`/`rndb_column_copy`; columns of tables
/// and indexes refuse (-1). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_free(column: *mut rndb_column) -> c_int {
    guard("rndb_column_free", || {
        let (h, c) = column_mut(column)?;
        if c.owner != Owner::User {
            return Err(owned(Kind::Column));
        }
        COLUMNS
            .remove(h)
            .map_err(|e| handle_error(Kind::Column, e))?;
        Ok(0)
    })
}

fn writable_column<'a>(p: *const rndb_column) -> Result<&'a mut ColumnObj> {
    let (_, c) = column_mut(p)?;
    match c.owner {
        Owner::User => Ok(c),
        Owner::Table(t) => match TABLES.get(t) {
            // SAFETY: live table object.
            Ok(to) if unsafe { &*to }.owner == Owner::User => Ok(c),
            _ => Err(read_only(Kind::Column)),
        },
        _ => Err(read_only(Kind::Column)),
    }
}

fn set_col(name: &str, p: *mut rndb_column, f: impl FnOnce(&mut ColDef) -> Result<()>) -> c_int {
    guard(name, || {
        let c = writable_column(p)?;
        f(&mut c.def)?;
        c.name = c_string(&c.def.name);
        Ok(0)
    })
}

fn get_col<R: crate::error::FfiDefault>(
    name: &str,
    p: *const rndb_column,
    f: impl FnOnce(&ColumnObj) -> R,
) -> R {
    guard(name, || Ok(f(column_mut(p)?.1)))
}

/// Renames a column definition (NDB's setName). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_column_set_name(
    column: *mut rndb_column,
    name: *const c_char,
) -> c_int {
    // SAFETY: a NUL-terminated string from the caller (checked inside the guard).
    let n = unsafe { cstr(name, "column name") }.map(str::to_string);
    set_col("rndb_column_set_name", column, |d| {
        d.name = n?;
        Ok(())
    })
}

/// The column's name (NDB's getName); NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_name(column: *const rndb_column) -> *const c_char {
    guard("rndb_column_get_name", || {
        Ok(column_mut(column)?.1.name.as_ptr())
    })
}

/// Sets the type (an `rndb_column_type` value, NDB's Column::Type). Types rndb does not
/// store (Olddecimal, Bit, Year) are refused by `rndb_dict_create_table`. Returns 0 or
/// -1 (not a type value).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_type(column: *mut rndb_column, ty: c_int) -> c_int {
    set_col("rndb_column_set_type", column, |d| {
        if !(0..=30).contains(&ty) {
            return Err(codes::bad_argument(format!("column type {ty} (0..30)")));
        }
        d.ty = ty;
        Ok(())
    })
}

/// The type (an `rndb_column_type` value); -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_type(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_type", column, |c| c.def.ty)
}

/// Sets the length: bytes of a Char/Varchar/Binary/Varbinary column (NDB's setLength).
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_length(column: *mut rndb_column, length: c_int) -> c_int {
    set_col("rndb_column_set_length", column, |d| {
        d.length = u32::try_from(length)
            .map_err(|_| codes::bad_argument(format!("column length {length}")))?;
        Ok(())
    })
}

/// The length (NDB's getLength); -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_length(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_length", column, |c| c.def.length as c_int)
}

/// DECIMAL precision (NDB's setPrecision, 1..38). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_precision(column: *mut rndb_column, precision: c_int) -> c_int {
    set_col("rndb_column_set_precision", column, |d| {
        d.precision = precision.max(0) as u32;
        Ok(())
    })
}

/// DECIMAL precision; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_precision(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_precision", column, |c| {
        c.def.precision as c_int
    })
}

/// DECIMAL scale (NDB's setScale). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_scale(column: *mut rndb_column, scale: c_int) -> c_int {
    set_col("rndb_column_set_scale", column, |d| {
        d.scale = scale.max(0) as u32;
        Ok(())
    })
}

/// DECIMAL scale; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_scale(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_scale", column, |c| c.def.scale as c_int)
}

/// Makes the column part of the primary key (NDB's setPrimaryKey; key columns are NOT
/// NULL). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_primary_key(column: *mut rndb_column, pk: c_int) -> c_int {
    set_col("rndb_column_set_primary_key", column, |d| {
        d.primary_key = pk != 0;
        d.partition_key = pk != 0;
        Ok(())
    })
}

/// 1 when the column is part of the primary key, 0 otherwise; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_primary_key(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_primary_key", column, |c| {
        c.def.primary_key as c_int
    })
}

/// NDB's setNullable. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_nullable(column: *mut rndb_column, nullable: c_int) -> c_int {
    set_col("rndb_column_set_nullable", column, |d| {
        d.nullable = nullable != 0;
        Ok(())
    })
}

/// 1 when the column accepts NULL; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_nullable(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_nullable", column, |c| {
        c.def.nullable as c_int
    })
}

/// NDB's setPartitionKey: accepted (tables are partitioned by their whole primary key).
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_partition_key(column: *mut rndb_column, on: c_int) -> c_int {
    set_col("rndb_column_set_partition_key", column, |d| {
        d.partition_key = on != 0;
        Ok(())
    })
}

/// 1 when the column is part of the partition key; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_partition_key(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_partition_key", column, |c| {
        c.def.partition_key as c_int
    })
}

/// NDB's setAutoIncrement: the column takes the next counter value when an insert
/// gives none. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_auto_increment(column: *mut rndb_column, on: c_int) -> c_int {
    set_col("rndb_column_set_auto_increment", column, |d| {
        d.auto_increment = on != 0;
        Ok(())
    })
}

/// 1 for an AUTO_INCREMENT column; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_auto_increment(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_auto_increment", column, |c| {
        c.def.auto_increment as c_int
    })
}

/// NDB's setStorageType (an `rndb_storage_type` value). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_set_storage_type(column: *mut rndb_column, storage: c_int) -> c_int {
    set_col("rndb_column_set_storage_type", column, |d| {
        d.disk = match storage {
            0 => false,
            1 => true,
            s => {
                return Err(codes::bad_argument(format!(
                    "storage type {s} (0 memory, 1 disk)"
                )));
            }
        };
        Ok(())
    })
}

/// The storage type (0 memory, 1 disk); -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_storage_type(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_storage_type", column, |c| {
        c.def.disk as c_int
    })
}

/// The column's attribute id in its table (NDB's getColumnNo); -1 for a free column
/// or a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_column_no(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_column_no", column, |c| c.col_no)
}

/// Bytes of the largest value in NDB's format (NDB's getSizeInBytes; VARCHAR includes
/// its length prefix); 0 for an unsupported type, -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_column_get_size_in_bytes(column: *const rndb_column) -> c_int {
    get_col("rndb_column_get_size_in_bytes", column, |c| {
        c.def
            .to_core()
            .map_or(0, |col| size_in_bytes(&col.ty) as c_int)
    })
}

// ---------------------------------------------------------------- indexes

/// Creates an index definition, NDB's `NdbDictionary::Index(name)`: set its table,
/// type and columns, then `rndb_dict_create_index`. Free with `rndb_index_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_index_create(name: *const c_char) -> *mut rndb_index {
    guard("rndb_index_create", || {
        let name = if name.is_null() {
            ""
        } else {
            // SAFETY: a NUL-terminated string from the caller.
            unsafe { cstr(name, "index name") }?
        };
        let h = INDEXES
            .insert(IndexObj {
                name: c_string(name),
                table: CString::default(),
                kind: rndb_index_type::RNDB_INDEX_ORDERED as i32,
                columns: Vec::new(),
                column_objs: Vec::new(),
                logging: false,
                owner: Owner::User,
            })
            .map_err(|_| codes::bad_argument("too many index objects"))?;
        Ok(h.ptr())
    })
}

/// Frees an index definition made by `rndb_index_create`; dictionary indexes refuse
/// (-1). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_free(index: *mut rndb_index) -> c_int {
    guard("rndb_index_free", || {
        let (h, i) = index_mut(index)?;
        if i.owner != Owner::User {
            return Err(owned(Kind::Index));
        }
        free_index_obj(h);
        Ok(0)
    })
}

fn user_index<'a>(p: *const rndb_index) -> Result<&'a mut IndexObj> {
    let (_, i) = index_mut(p)?;
    if i.owner != Owner::User {
        return Err(read_only(Kind::Index));
    }
    Ok(i)
}

/// Renames an index definition (NDB's setName). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_index_set_name(index: *mut rndb_index, name: *const c_char) -> c_int {
    guard("rndb_index_set_name", || {
        let i = user_index(index)?;
        // SAFETY: a NUL-terminated string from the caller.
        i.name = c_string(unsafe { cstr(name, "index name") }?);
        Ok(0)
    })
}

/// The index's name; NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_get_name(index: *const rndb_index) -> *const c_char {
    guard("rndb_index_get_name", || {
        Ok(index_mut(index)?.1.name.as_ptr())
    })
}

/// Sets the table the index is on (NDB's setTable). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_index_set_table(
    index: *mut rndb_index,
    table: *const c_char,
) -> c_int {
    guard("rndb_index_set_table", || {
        let i = user_index(index)?;
        // SAFETY: a NUL-terminated string from the caller.
        i.table = c_string(unsafe { cstr(table, "table name") }?);
        Ok(0)
    })
}

/// The table's name (NDB's getTable); NULL on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_get_table(index: *const rndb_index) -> *const c_char {
    guard("rndb_index_get_table", || {
        Ok(index_mut(index)?.1.table.as_ptr())
    })
}

/// Sets the type: an `rndb_index_type` value (OrderedIndex 6, UniqueHashIndex 3).
/// Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_set_type(index: *mut rndb_index, ty: c_int) -> c_int {
    guard("rndb_index_set_type", || {
        let i = user_index(index)?;
        if ty != 3 && ty != 6 {
            return Err(codes::bad_argument(format!(
                "index type {ty}: use OrderedIndex (6) or UniqueHashIndex (3)"
            )));
        }
        i.kind = ty;
        Ok(0)
    })
}

/// The type (an `rndb_index_type` value); -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_get_type(index: *const rndb_index) -> c_int {
    guard("rndb_index_get_type", || Ok(index_mut(index)?.1.kind))
}

/// Appends a column by name (NDB's addColumnName). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_index_add_column_name(
    index: *mut rndb_index,
    name: *const c_char,
) -> c_int {
    guard("rndb_index_add_column_name", || {
        let i = user_index(index)?;
        // SAFETY: a NUL-terminated string from the caller.
        i.columns
            .push(unsafe { cstr(name, "column name") }?.to_string());
        Ok(0)
    })
}

/// Appends a column (NDB's addColumn(const Column&)): its name is used. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_add_column(
    index: *mut rndb_index,
    column: *const rndb_column,
) -> c_int {
    guard("rndb_index_add_column", || {
        let name = column_mut(column)?.1.def.name.clone();
        user_index(index)?.columns.push(name);
        Ok(0)
    })
}

/// Number of columns of the index; -1 on a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_get_no_of_columns(index: *const rndb_index) -> c_int {
    guard("rndb_index_get_no_of_columns", || {
        Ok(index_mut(index)?.1.columns.len() as c_int)
    })
}

/// Column `i` of a dictionary index (NDB's getColumn(i)), owned by the index; NULL
/// when out of range or for an index definition not from the dictionary.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_get_column(index: *const rndb_index, i: c_int) -> *const rndb_column {
    guard("rndb_index_get_column", || {
        let (_, ix) = index_mut(index)?;
        let h = usize::try_from(i)
            .ok()
            .and_then(|i| ix.column_objs.get(i))
            .ok_or_else(|| codes::no_such_column(&format!("#{i} of the index")))?;
        Ok(h.ptr::<rndb_column>() as *const rndb_column)
    })
}

/// NDB's setLogging on an index: recorded (ordered indexes are rebuilt at restart, as
/// in NDB). Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_index_set_logging(index: *mut rndb_index, logging: c_int) -> c_int {
    guard("rndb_index_set_logging", || {
        user_index(index)?.logging = logging != 0;
        Ok(0)
    })
}

/// Index position and column count of an index object in its table (for scans).
pub(crate) fn index_target(
    p: *const rndb_index,
    ndb: &mut NdbObj,
) -> Result<(Arc<TableRuntime>, usize, String)> {
    let (_, ix) = index_mut(p)?;
    let tname = ix.table.to_str().unwrap_or("");
    let iname = ix.name.to_str().unwrap_or("");
    let rt = ndb.table(tname)?;
    let pos = RemoteNdb::index_of(&rt, iname).ok_or_else(|| codes::no_such_index(iname))?;
    let idx = &rt.def.indexes[pos];
    if idx.kind != IndexKind::OrderedIndex {
        return Err(codes::bad_argument(format!(
            "index '{iname}' is a unique hash index: index scans need an ordered index"
        )));
    }
    Ok((rt, pos, iname.to_string()))
}

#[allow(dead_code)]
fn _type_enum_is_exported(_: rndb_column_type, _: rndb_storage_type, _: rndb_index_type) {}
