//! SQL from C and C++: there is no mysqld in front of the embedded cluster, so DDL (and
//! any other statement of rndb's SQL subset) runs through the Ndb object's SQL session.

use crate::error::{c_string, guard};
use crate::ndb::ndb_mut;
use crate::{cstr, rndb_ndb};
use rndb_core::sql::{Session, SqlResult, render, render_error};
use std::ffi::{c_char, c_int};
use std::time::Duration;

/// Runs `;`-separated SQL statements in the Ndb object's database, e.g. `CREATE TABLE
/// t1 (id INT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(32)) ENGINE=ndbcluster` (not an
/// NDB API function: there is no mysqld here). Each Ndb object has one SQL session
/// (current database, BEGIN ... COMMIT). Returns the rows affected (or returned) by the
/// last statement, or -1 with the error in `rndb_ndb_get_error` (the statements before
/// the failing one have run). If `output` is not NULL it receives what the mysql client
/// would print (result tables, "Query OK, 1 row affected", or the error line); free it
/// with `rndb_string_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_execute_sql(
    ndb: *mut rndb_ndb,
    sql: *const c_char,
    output: *mut *mut c_char,
) -> c_int {
    if !output.is_null() {
        // SAFETY: a writable pointer from the caller.
        unsafe { *output = std::ptr::null_mut() };
    }
    guard("rndb_execute_sql", || {
        let (_, n) = ndb_mut(ndb)?;
        // SAFETY: a NUL-terminated string from the caller.
        let text = unsafe { cstr(sql, "SQL text") }?;
        let db = n.db().to_string();
        let remote = match n.remote_engine() {
            Ok(r) => r.is_some(),
            Err(e) => return Err(n.fail(e)),
        };
        let result = match (remote, n.remote.as_mut()) {
            (true, Some(r)) => r.sql(&db, text),
            _ => match n.core() {
                Ok(c) => {
                    let core = c.clone();
                    n.session
                        .get_or_insert_with(|| Session::new(core))
                        .execute(text)
                }
                Err(e) => return Err(n.fail(e)),
            },
        };
        let (rendered, r) = match result {
            Ok(results) => {
                let shown: Vec<String> =
                    results.iter().map(|r| render(r, Duration::ZERO)).collect();
                let count = match results.last() {
                    Some(SqlResult::Rows { rows, .. }) => rows.len() as c_int,
                    Some(SqlResult::Affected { rows, .. }) => *rows as c_int,
                    None => 0,
                };
                n.error.clear();
                (shown.join("\n"), Ok(count))
            }
            Err(e) => (render_error(&e), Err(n.fail(e))),
        };
        if !output.is_null() {
            // SAFETY: a writable pointer from the caller (checked not NULL); the string
            // is freed by rndb_string_free.
            unsafe { *output = c_string(&rendered).into_raw() };
        }
        r
    })
}
