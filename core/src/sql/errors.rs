//! Errors of the SQL layer: constructors that give NDB errors the MySQL server's text, and
//! [`render_error`], the mysql client's `ERROR <code> (<sqlstate>): <text>` line.
//!
//! Convention (the invariant `render_error` relies on): an error made for SQL carries the
//! MySQL server's message as the *last* detail of its NDB message, i.e. the message is
//! `"<NDB text>: <MySQL text>"`, and `mysql_code` says which MySQL error it is. The NDB
//! code, status and classification stay NDB's, so API users can still branch on them.
//! `render_error` finds the MySQL text by the fixed start of its template; errors made
//! by the engine without SQL detail fall back to the template filled with the engine's
//! last detail. Errors without a MySQL mapping (`mysql_code == 0`) are shown as mysqld
//! shows them: `ERROR 1296 (HY000): Got error <code> '<message>' from NDBCLUSTER`.

use crate::error::{ErrorClassification, NdbError, codes};

/// (MySQL error number, SQLSTATE, message template with `%s` placeholders).
const MYSQL_ERRORS: &[(u32, &str, &str)] = &[
    (1007, "HY000", "Can't create database '%s'; database exists"),
    (
        1008,
        "HY000",
        "Can't drop database '%s'; database doesn't exist",
    ),
    (1032, "HY000", "Can't find record in '%s'"),
    (1036, "HY000", "Table '%s' is read only"),
    (
        1044,
        "42000",
        "Access denied for user 'root'@'localhost' to database '%s'",
    ),
    (1046, "3D000", "No database selected"),
    (1048, "23000", "Column '%s' cannot be null"),
    (1049, "42000", "Unknown database '%s'"),
    (1050, "42S01", "Table '%s' already exists"),
    (1051, "42S02", "Unknown table '%s'"),
    (1054, "42S22", "Unknown column '%s' in '%s'"),
    (1060, "42S21", "Duplicate column name '%s'"),
    (1061, "42000", "Duplicate key name '%s'"),
    (1062, "23000", "Duplicate entry '%s' for key '%s'"),
    (1064, "42000", "You have an error in your SQL syntax; %s"),
    (1065, "42000", "Query was empty"),
    (1067, "42000", "Invalid default value for '%s'"),
    (1068, "42000", "Multiple primary key defined"),
    (1072, "42000", "Key column '%s' doesn't exist in table"),
    (
        1074,
        "42000",
        "Column length too big for column '%s' (max = %s); use BLOB or TEXT instead",
    ),
    (
        1075,
        "42000",
        "Incorrect table definition; there can be only one auto column and it must be defined as a key",
    ),
    (
        1091,
        "42000",
        "Can't DROP '%s'; check that column/key exists",
    ),
    (
        1101,
        "42000",
        "BLOB, TEXT, GEOMETRY or JSON column '%s' can't have a default value",
    ),
    (1109, "42S02", "Unknown table '%s' in %s"),
    (1110, "42000", "Column '%s' specified twice"),
    (1111, "HY000", "Invalid use of group function"),
    (1113, "42000", "A table must have at least 1 column"),
    (1114, "HY000", "The table '%s' is full"),
    (1115, "42000", "Unknown character set: '%s'"),
    (
        1118,
        "42000",
        "Row size too large. The maximum row size for the used table type, not counting BLOBs, is 8052. You have to change some columns to TEXT or BLOBs",
    ),
    (
        1136,
        "21S01",
        "Column count doesn't match value count at row %s",
    ),
    (1146, "42S02", "Table '%s' doesn't exist"),
    (
        1153,
        "08S01",
        "Got a packet bigger than 'max_allowed_packet' bytes",
    ),
    (1166, "42000", "Incorrect column name '%s'"),
    (
        1170,
        "42000",
        "BLOB/TEXT column '%s' used in key specification without a key length",
    ),
    (1176, "42000", "Key '%s' doesn't exist in table '%s'"),
    (1193, "HY000", "Unknown system variable '%s'"),
    (
        1205,
        "HY000",
        "Lock wait timeout exceeded; try restarting transaction",
    ),
    (1210, "HY000", "Incorrect arguments to %s"),
    (
        1231,
        "42000",
        "Variable '%s' can't be set to the value of '%s'",
    ),
    (
        1235,
        "42000",
        "This version of MySQL doesn't yet support '%s'",
    ),
    (
        1264,
        "22003",
        "Out of range value for column '%s' at row %s",
    ),
    (1265, "01000", "Data truncated for column '%s' at row %s"),
    (1273, "HY000", "Unknown collation: '%s'"),
    (1280, "42000", "Incorrect index name '%s'"),
    (1286, "42000", "Unknown storage engine '%s'"),
    (
        1292,
        "22007",
        "Incorrect %s value: '%s' for column '%s' at row %s",
    ),
    (1305, "42000", "FUNCTION %s does not exist"),
    (1364, "HY000", "Field '%s' doesn't have a default value"),
    (
        1366,
        "HY000",
        "Incorrect %s value: '%s' for column '%s' at row %s",
    ),
    (1406, "22001", "Data too long for column '%s' at row %s"),
    (
        1426,
        "42000",
        "Too-big precision %s specified for '%s'. Maximum is 65.",
    ),
    (
        1427,
        "42000",
        "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '%s').",
    ),
    (
        1436,
        "HY000",
        "Thread stack overrun: the statement is too deeply nested",
    ),
    (
        1478,
        "HY000",
        "Table storage engine 'ndbcluster' does not support the create option '%s'",
    ),
    (
        1582,
        "42000",
        "Incorrect parameter count in the call to native function '%s'",
    ),
    (1690, "22003", "%s value is out of range in '%s'"),
];

fn lookup(mysql_code: u32) -> Option<(&'static str, &'static str)> {
    MYSQL_ERRORS
        .iter()
        .find(|(c, _, _)| *c == mysql_code)
        .map(|(_, s, t)| (*s, *t))
}

/// The mysql client's error line for an error.
pub fn render_error(e: &NdbError) -> String {
    if e.mysql_code == 0 {
        return format!(
            "ERROR 1296 (HY000): Got error {} '{}' from NDBCLUSTER",
            e.code, e.message
        );
    }
    let Some((state, template)) = lookup(e.mysql_code) else {
        return format!("ERROR {} (HY000): {}", e.mysql_code, e.message);
    };
    format!(
        "ERROR {} ({state}): {}",
        e.mysql_code,
        mysql_text(e, template)
    )
}

/// The MySQL message inside an error's NDB message (see the module invariant).
fn mysql_text(e: &NdbError, template: &str) -> String {
    let fragments: Vec<&str> = template.split("%s").collect();
    if let Some((k, frag)) = fragments.iter().enumerate().find(|(_, f)| !f.is_empty()) {
        if k == 0 {
            if let Some(i) = e.message.find(&format!(": {frag}")) {
                return e.message[i + 2..].to_string();
            }
            if e.message.starts_with(frag) {
                return e.message.clone();
            }
        } else if let Some(p) = e.message.find(frag) {
            // the text starts with a placeholder: it begins after the ": " before it
            if let Some(i) = e.message[..p].rfind(": ") {
                return e.message[i + 2..].to_string();
            }
        }
    }
    let holes = fragments.len() - 1;
    match holes {
        0 => template.to_string(),
        1 => {
            let detail = e.message.rsplit(": ").next().unwrap_or("");
            let detail = if detail == e.message { "" } else { detail };
            template.replacen("%s", detail, 1)
        }
        _ => e.message.clone(),
    }
}

/// Builds an error: NDB code/classification/text, the MySQL number and the MySQL text.
pub(crate) fn sql_error(
    code: u32,
    class: ErrorClassification,
    ndb_text: &str,
    mysql_code: u32,
    mysql_text: impl std::fmt::Display,
) -> NdbError {
    NdbError::new(code, class, ndb_text)
        .detail(mysql_text)
        .with_mysql_code(mysql_code)
}

/// A syntax error at a position of the statement (1-based line and column), near `near`.
pub(crate) fn syntax(line: usize, col: usize, near: &str) -> NdbError {
    let near: String = near.chars().take(80).collect();
    codes::sql_syntax(format!(
        "check the manual that corresponds to your MySQL server version for the right syntax to use near '{near}' at line {line} column {col}"
    ))
}

pub(crate) fn empty_query() -> NdbError {
    codes::sql_syntax("Query was empty").with_mysql_code(1065)
}

pub(crate) fn no_such_table(db: &str, table: &str) -> NdbError {
    codes::no_such_table(&format!("{db}.{table}"))
        .detail(format!("Table '{db}.{table}' doesn't exist"))
}

pub(crate) fn unknown_column(name: &str, clause: &str) -> NdbError {
    sql_error(
        4004,
        ErrorClassification::ApplicationError,
        "Attribute name or id not found in the table",
        1054,
        format!("Unknown column '{name}' in '{clause}'"),
    )
}

pub(crate) fn duplicate_entry(base: NdbError, entry: &str, key: &str) -> NdbError {
    base.detail(format!("Duplicate entry '{entry}' for key '{key}'"))
        .with_mysql_code(1062)
}

pub(crate) fn table_full(base: NdbError, table: &str) -> NdbError {
    base.detail(format!("The table '{table}' is full"))
        .with_mysql_code(1114)
}

pub(crate) fn data_too_long(column: &str, row: u64) -> NdbError {
    codes::value_too_large(format!("Data too long for column '{column}' at row {row}"))
}

pub(crate) fn out_of_range(column: &str, row: u64) -> NdbError {
    codes::value_too_large(format!(
        "Out of range value for column '{column}' at row {row}"
    ))
    .with_mysql_code(1264)
}

pub(crate) fn truncated(column: &str, row: u64) -> NdbError {
    codes::wrong_type(format!("Data truncated for column '{column}' at row {row}"))
        .with_mysql_code(1265)
}

/// 1366 (or 1292 for temporal kinds): `Incorrect <kind> value: '<v>' for column ...`.
pub(crate) fn incorrect_value(kind: &str, value: &str, column: &str, row: u64) -> NdbError {
    let value: String = value.chars().take(64).collect();
    let e = codes::wrong_type(format!(
        "Incorrect {kind} value: '{value}' for column '{column}' at row {row}"
    ));
    if matches!(kind, "date" | "datetime" | "time" | "timestamp") {
        e.with_mysql_code(1292)
    } else {
        e
    }
}

pub(crate) fn cannot_be_null(column: &str) -> NdbError {
    codes::null_in_not_null(column).detail(format!("Column '{column}' cannot be null"))
}

pub(crate) fn no_default(column: &str) -> NdbError {
    codes::null_in_not_null(column)
        .detail(format!("Field '{column}' doesn't have a default value"))
        .with_mysql_code(1364)
}

pub(crate) fn column_count(row: u64) -> NdbError {
    app(
        1136,
        format!("Column count doesn't match value count at row {row}"),
    )
}

/// An application error of the SQL layer (NDB's "Parameter error in API call", 4118)
/// shown as MySQL error `mysql_code`.
pub(crate) fn app(mysql_code: u32, text: impl std::fmt::Display) -> NdbError {
    sql_error(
        4118,
        ErrorClassification::ApplicationError,
        "Parameter error in API call",
        mysql_code,
        text,
    )
}

pub(crate) fn schema(mysql_code: u32, text: impl std::fmt::Display) -> NdbError {
    sql_error(
        4118,
        ErrorClassification::SchemaError,
        "Parameter error in API call",
        mysql_code,
        text,
    )
}

pub(crate) fn unsupported(what: impl std::fmt::Display) -> NdbError {
    codes::unsupported(format!(
        "This version of MySQL doesn't yet support '{what}'"
    ))
}

pub(crate) fn unknown_database(db: &str) -> NdbError {
    schema(1049, format!("Unknown database '{db}'"))
}

pub(crate) fn no_database() -> NdbError {
    app(1046, "No database selected")
}

pub(crate) fn unknown_variable(name: &str) -> NdbError {
    app(1193, format!("Unknown system variable '{name}'"))
}

pub(crate) fn bad_variable_value(name: &str, value: &str) -> NdbError {
    app(
        1231,
        format!("Variable '{name}' can't be set to the value of '{value}'"),
    )
}

/// NDB error 755 for a tablespace that does not exist (disk data comes later).
pub(crate) fn invalid_tablespace(name: &str) -> NdbError {
    NdbError::new(755, ErrorClassification::SchemaError, "Invalid tablespace").detail(name)
}

pub(crate) fn too_deep() -> NdbError {
    app(
        1436,
        "Thread stack overrun: the statement is too deeply nested",
    )
}

pub(crate) fn too_big() -> NdbError {
    app(1153, "Got a packet bigger than 'max_allowed_packet' bytes")
}

pub(crate) fn read_only(table: &str) -> NdbError {
    app(1036, format!("Table '{table}' is read only"))
}

pub(crate) fn group_function() -> NdbError {
    app(1111, "Invalid use of group function")
}

pub(crate) fn value_out_of_range(kind: &str, expr: &str) -> NdbError {
    app(1690, format!("{kind} value is out of range in '{expr}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_mysql_lines() {
        assert_eq!(
            render_error(&no_such_table("test", "t9")),
            "ERROR 1146 (42S02): Table 'test.t9' doesn't exist"
        );
        // an engine error without SQL detail falls back to the template
        assert_eq!(
            render_error(&codes::no_such_table("t9")),
            "ERROR 1146 (42S02): Table 't9' doesn't exist"
        );
        assert_eq!(
            render_error(&duplicate_entry(
                codes::tuple_already_exists(),
                "1",
                "PRIMARY"
            )),
            "ERROR 1062 (23000): Duplicate entry '1' for key 'PRIMARY'"
        );
        assert_eq!(
            render_error(&table_full(codes::out_of_data_memory(), "t1")),
            "ERROR 1114 (HY000): The table 't1' is full"
        );
        assert_eq!(
            render_error(&unknown_column("x", "field list")),
            "ERROR 1054 (42S22): Unknown column 'x' in 'field list'"
        );
        let mut e = codes::deadlock_timeout();
        e.mysql_code = 0;
        assert_eq!(
            render_error(&e),
            "ERROR 1296 (HY000): Got error 266 'Time-out in NDB, probably caused by deadlock' from NDBCLUSTER"
        );
        assert_eq!(
            render_error(&codes::deadlock_timeout()),
            "ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"
        );
        assert_eq!(
            render_error(&syntax(1, 8, "frm t")),
            "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'frm t' at line 1 column 8"
        );
        assert_eq!(
            render_error(&invalid_tablespace("ts_1")),
            "ERROR 1296 (HY000): Got error 755 'Invalid tablespace: ts_1' from NDBCLUSTER"
        );
        assert_eq!(
            render_error(&data_too_long("b", 2)),
            "ERROR 1406 (22001): Data too long for column 'b' at row 2"
        );
        assert_eq!(
            render_error(&incorrect_value("integer", "abc", "a", 1)),
            "ERROR 1366 (HY000): Incorrect integer value: 'abc' for column 'a' at row 1"
        );
    }
}
