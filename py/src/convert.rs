//! Python objects to engine values and back.
//!
//! None ↔ NULL, int ↔ Int/UInt, float ↔ Double/Float, str ↔ Str, bytes/bytearray ↔
//! Bytes, decimal.Decimal ↔ Decimal, datetime.date ↔ Date, datetime.datetime ↔
//! Datetime, datetime.timedelta ↔ Time. Anything else is NDB error 4217 naming the
//! column; the engine then coerces to the column type and range-checks.

use crate::errors::R;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyByteArray, PyBytes, PyDate, PyDateAccess, PyDateTime, PyDelta, PyDeltaAccess, PyDict,
    PyFloat, PyInt, PyList, PyString, PyTimeAccess, PyTuple, PyType,
};
use pyo3::{IntoPyObjectExt, intern};
use rndb::Value;
use rndb::error::codes;
use rndb::schema::TableDef;
use rndb::schema::value::{Date, Datetime, Decimal};

/// TIME's range in MySQL: ±838:59:59.
const MAX_TIME_SECS: i64 = 838 * 3600 + 59 * 60 + 59;

static DECIMAL: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn decimal_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    DECIMAL.import(py, "decimal", "Decimal")
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_string())
}

fn wrong_type(obj: &Bound<'_, PyAny>, column: &str) -> rndb::NdbError {
    codes::wrong_type(format!(
        "column '{column}' cannot take a Python {} value",
        type_name(obj)
    ))
}

/// A Python object as an engine value for `column` (named in errors).
pub fn py_to_value(obj: &Bound<'_, PyAny>, column: &str) -> R<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            return Ok(Value::Int(v));
        }
        if let Ok(v) = i.extract::<u64>() {
            return Ok(Value::UInt(v));
        }
        return Err(codes::value_too_large(format!(
            "out of range value {} for column '{column}'",
            i.str().map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return match s.to_str() {
            Ok(s) => Ok(Value::Str(s.to_owned())),
            Err(_) => Err(codes::wrong_type(format!(
                "column '{column}': the string is not valid Unicode (lone surrogate)"
            ))),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Double(f.value()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    slow_value(obj, column)
}

/// Decimal and the datetime types (not on the hot path).
fn slow_value(obj: &Bound<'_, PyAny>, column: &str) -> R<Value> {
    let py = obj.py();
    let pyerr = |e: PyErr| codes::wrong_type(format!("column '{column}': {e}"));
    if let Ok(dt) = obj.cast::<PyDateTime>() {
        let date = date_of(dt.get_year(), dt.get_month(), dt.get_day(), column)?;
        return Ok(Value::Datetime(Datetime {
            date,
            hour: dt.get_hour(),
            minute: dt.get_minute(),
            second: dt.get_second(),
        }));
    }
    if let Ok(d) = obj.cast::<PyDate>() {
        return Ok(Value::Date(date_of(
            d.get_year(),
            d.get_month(),
            d.get_day(),
            column,
        )?));
    }
    if let Ok(td) = obj.cast::<PyDelta>() {
        let secs = td.get_days() as i64 * 86400 + td.get_seconds() as i64;
        if secs.abs() > MAX_TIME_SECS {
            return Err(codes::value_too_large(format!(
                "out of range value {secs} seconds for TIME column '{column}'"
            )));
        }
        return Ok(Value::Time(secs as i32));
    }
    let dec = decimal_type(py).map_err(pyerr)?;
    if obj.is_instance(dec).map_err(pyerr)? {
        let finite: bool = obj
            .call_method0(intern!(py, "is_finite"))
            .and_then(|v| v.extract())
            .map_err(pyerr)?;
        if !finite {
            return Err(codes::wrong_type(format!(
                "column '{column}' cannot take a non-finite Decimal"
            )));
        }
        let text: String = py
            .get_type::<PyString>()
            .call_method1(intern!(py, "format"), ("{:f}", obj))
            .and_then(|s| s.extract())
            .map_err(pyerr)?;
        return Decimal::parse(&text).map(Value::Decimal).ok_or_else(|| {
            codes::value_too_large(format!(
                "out of range value {text} for column '{column}' (at most 38 digits)"
            ))
        });
    }
    // integers of other libraries (numpy.int64...): anything with __index__
    if obj.hasattr(intern!(py, "__index__")).unwrap_or(false) {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::Int(v));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::UInt(v));
        }
    }
    Err(wrong_type(obj, column))
}

fn date_of(year: i32, month: u8, day: u8, column: &str) -> R<Date> {
    u16::try_from(year)
        .ok()
        .and_then(|y| Date::new(y, month, day))
        .ok_or_else(|| {
            codes::value_too_large(format!(
                "out of range date {year:04}-{month:02}-{day:02} for column '{column}'"
            ))
        })
}

/// Shortest float that reads back as the same f32 (so FLOAT 0.1 comes back as 0.1).
fn f32_to_f64(f: f32) -> f64 {
    if f.is_finite() {
        format!("{f}").parse().unwrap_or(f as f64)
    } else {
        f as f64
    }
}

/// An engine value as a Python object.
pub fn value_to_py<'py>(py: Python<'py>, v: Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Int(i) => i.into_bound_py_any(py)?,
        Value::UInt(u) => u.into_bound_py_any(py)?,
        Value::Double(d) => PyFloat::new(py, d).into_any(),
        Value::Float(f) => PyFloat::new(py, f32_to_f64(f)).into_any(),
        Value::Str(s) => PyString::new(py, &s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Value::Decimal(d) => decimal_type(py)?.call1((d.to_string(),))?,
        Value::Date(d) => match PyDate::new(py, d.year as i32, d.month, d.day) {
            Ok(v) => v.into_any(),
            // MySQL's zero dates have no Python equivalent: the text
            Err(_) => PyString::new(py, &d.to_string()).into_any(),
        },
        Value::Datetime(t) => match PyDateTime::new(
            py,
            t.date.year as i32,
            t.date.month,
            t.date.day,
            t.hour,
            t.minute,
            t.second,
            0,
            None,
        ) {
            Ok(v) => v.into_any(),
            Err(_) => PyString::new(py, &t.to_string()).into_any(),
        },
        Value::Time(s) => PyDelta::new(py, 0, s, 0, true)?.into_any(),
    })
}

/// An engine value as a Python object, leaving the value in place (its allocation is
/// reused by the next decode into it): the common types without a copy of the value.
pub fn value_ref_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Int(i) => i.into_bound_py_any(py)?,
        Value::UInt(u) => u.into_bound_py_any(py)?,
        Value::Double(d) => PyFloat::new(py, *d).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        other => value_to_py(py, other.clone())?,
    })
}

/// Interned column names (dictionary keys of result rows).
pub fn names<'py>(py: Python<'py>, def: &TableDef, cols: &[usize]) -> Vec<Bound<'py, PyString>> {
    cols.iter()
        .map(|&c| PyString::intern(py, &def.columns[c].name))
        .collect()
}

/// What `execute` returns for a statement's outcome: its rows as a list of dicts, the
/// number of rows affected, or None.
pub fn outcome_to_py<'py>(
    py: Python<'py>,
    outcome: crate::sqlglue::SqlOutcome,
) -> PyResult<Bound<'py, PyAny>> {
    use crate::sqlglue::SqlOutcome;
    match outcome {
        SqlOutcome::Rows { columns, rows } => {
            let names: Vec<Bound<'py, PyString>> =
                columns.iter().map(|c| PyString::intern(py, c)).collect();
            let out: Vec<Bound<'py, PyDict>> = rows
                .into_iter()
                .map(|r| row_to_dict(py, &names, r))
                .collect::<PyResult<_>>()?;
            Ok(pyo3::types::PyList::new(py, out)?.into_any())
        }
        SqlOutcome::Affected(n) => value_to_py(py, Value::UInt(n)),
        SqlOutcome::Nothing => Ok(py.None().into_bound(py)),
    }
}

/// A row as a dict keyed by the interned column names.
pub fn row_to_dict<'py>(
    py: Python<'py>,
    names: &[Bound<'py, PyString>],
    row: Vec<Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (n, v) in names.iter().zip(row) {
        d.set_item(n, value_to_py(py, v)?)?;
    }
    Ok(d)
}

/// Same with names kept across GIL releases.
pub fn row_to_dict_unbound<'py>(
    py: Python<'py>,
    names: &[Py<PyString>],
    row: Vec<Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (n, v) in names.iter().zip(row) {
        d.set_item(n.bind(py), value_to_py(py, v)?)?;
    }
    Ok(d)
}

/// Column positions for an optional list of names (None: every visible column).
pub fn column_positions(def: &TableDef, columns: Option<&[String]>) -> R<Vec<usize>> {
    match columns {
        None => Ok(def.visible_columns().map(|(i, _)| i).collect()),
        Some(names) => names
            .iter()
            .map(|n| def.column(n).map(|(p, _)| p))
            .collect(),
    }
}

/// A row given as a sequence (tuple, list) rather than a dict: its values, in the order
/// of `cols` (the `columns=` given; None: refused, a sequence needs them).
pub fn sequence_row(
    def: &TableDef,
    cols: Option<&[usize]>,
    row: &Bound<'_, PyAny>,
) -> R<Vec<Value>> {
    let Some(cols) = cols else {
        let kind = row
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(codes::bad_argument(format!(
            "a row that is not a dict ({kind}) needs columns=[...]"
        )));
    };
    let n = row.len().map_err(|_| {
        codes::bad_argument("rows must be dicts or sequences (tuple, list) of values")
    })?;
    if n != cols.len() {
        return Err(codes::bad_argument(format!(
            "row has {n} values for {} columns",
            cols.len()
        )));
    }
    let mut out = Vec::with_capacity(n);
    for (i, &c) in cols.iter().enumerate() {
        let v = row
            .get_item(i)
            .map_err(|e| codes::bad_argument(e.to_string()))?;
        out.push(py_to_value(&v, &def.columns[c].name)?);
    }
    Ok(out)
}

/// The optional `columns=` argument: a sequence of str (a bare str is refused).
pub fn extract_columns(obj: Option<&Bound<'_, PyAny>>) -> R<Option<Vec<String>>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    if obj.cast::<PyString>().is_ok() {
        return Err(codes::bad_argument(
            "columns must be a sequence of column names, not a str",
        ));
    }
    let mut out = Vec::new();
    let it = obj
        .try_iter()
        .map_err(|_| codes::bad_argument("columns must be a sequence of column names"))?;
    for item in it {
        let item = item.map_err(|e| codes::bad_argument(e.to_string()))?;
        let s = item
            .cast::<PyString>()
            .map_err(|_| codes::bad_argument("column names must be str"))?;
        out.push(
            s.to_str()
                .map_err(|e| codes::bad_argument(e.to_string()))?
                .to_owned(),
        );
    }
    Ok(Some(out))
}

/// Looks a column name up in a dict: the exact key first, then case-insensitively as
/// NDB column names are.
fn dict_get<'py>(
    d: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
    name: &str,
) -> R<Option<Bound<'py, PyAny>>> {
    if let Some(v) = d
        .get_item(key)
        .map_err(|e| codes::bad_argument(e.to_string()))?
    {
        return Ok(Some(v));
    }
    for (k, v) in d.iter() {
        if let Ok(ks) = k.cast::<PyString>()
            && ks.to_str().is_ok_and(|s| s.eq_ignore_ascii_case(name))
        {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// The primary-key values (key order) of a key given as a dict, a tuple/list in key
/// order, or a bare value for a one-column key. Non-key columns in a dict are ignored;
/// unknown ones are error 4004.
pub fn key_values(
    def: &TableDef,
    pk_names: &[Bound<'_, PyString>],
    key: &Bound<'_, PyAny>,
) -> R<Vec<Value>> {
    let mut out = Vec::with_capacity(def.primary_key.len());
    key_values_into(def, pk_names, key, &mut out)?;
    Ok(out)
}

/// Same, appending the values to `out` (the flat key list of a batch).
pub fn key_values_into(
    def: &TableDef,
    pk_names: &[Bound<'_, PyString>],
    key: &Bound<'_, PyAny>,
    out: &mut Vec<Value>,
) -> R<()> {
    let npk = def.primary_key.len();
    if npk == 1 && (key.cast::<PyInt>().is_ok() || key.cast::<PyString>().is_ok()) {
        out.push(py_to_value(key, &def.columns[def.primary_key[0]].name)?);
        return Ok(());
    }
    if let Ok(d) = key.cast::<PyDict>() {
        for (k, &p) in def.primary_key.iter().enumerate() {
            let name = &def.columns[p].name;
            match dict_get(d, &pk_names[k], name)? {
                Some(v) => out.push(py_to_value(&v, name)?),
                None => {
                    return Err(codes::key_not_complete(format!(
                        "no value for key column '{name}'"
                    )));
                }
            }
        }
        if d.len() != npk {
            for (k, _) in d.iter() {
                check_column_name(def, &k)?;
            }
        }
        return Ok(());
    }
    if let Ok(t) = key.cast::<PyTuple>() {
        return seq_key(def, t.len(), |i| t.get_item(i), out);
    }
    if let Ok(l) = key.cast::<PyList>() {
        return seq_key(def, l.len(), |i| l.get_item(i), out);
    }
    if npk != 1 {
        return Err(codes::key_not_complete(format!(
            "the primary key has {npk} columns: give a tuple or a dict"
        )));
    }
    out.push(py_to_value(key, &def.columns[def.primary_key[0]].name)?);
    Ok(())
}

fn seq_key<'py>(
    def: &TableDef,
    len: usize,
    get: impl Fn(usize) -> PyResult<Bound<'py, PyAny>>,
    out: &mut Vec<Value>,
) -> R<()> {
    let npk = def.primary_key.len();
    if len != npk {
        return Err(codes::key_not_complete(format!(
            "key has {len} values, the primary key has {npk} columns"
        )));
    }
    for (i, &p) in def.primary_key.iter().enumerate() {
        let v = get(i).map_err(|e| codes::bad_argument(e.to_string()))?;
        out.push(py_to_value(&v, &def.columns[p].name)?);
    }
    Ok(())
}

/// A dict key as a column position (4004 when the table has no such column).
pub fn check_column_name(def: &TableDef, k: &Bound<'_, PyAny>) -> R<usize> {
    let s = k.cast::<PyString>().map_err(|_| {
        codes::bad_argument(format!("column names must be str, not {}", type_name(k)))
    })?;
    let name = s.to_str().map_err(|e| codes::bad_argument(e.to_string()))?;
    def.column(name).map(|(p, _)| p)
}

/// Splits a row dict into (key, values) by column position: primary-key columns go to
/// the key, the others to the values.
pub type KeyValues = (Vec<(usize, Value)>, Vec<(usize, Value)>);

pub fn split_row(def: &TableDef, row: &Bound<'_, PyAny>) -> R<KeyValues> {
    let d = row.cast::<PyDict>().map_err(|_| {
        codes::bad_argument(format!("a row must be a dict, not {}", type_name(row)))
    })?;
    let mut key = Vec::new();
    let mut values = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let p = check_column_name(def, &k)?;
        let col = &def.columns[p];
        let v = py_to_value(&v, &col.name)?;
        if col.primary_key {
            key.push((p, v));
        } else {
            values.push((p, v));
        }
    }
    Ok((key, values))
}

/// Bound of an index scan: None, a value, or a tuple/list of values (index prefix).
pub fn bound_values(
    def: &TableDef,
    index_cols: &[usize],
    bound: Option<&Bound<'_, PyAny>>,
) -> R<Option<Vec<Value>>> {
    let Some(b) = bound else { return Ok(None) };
    if b.is_none() {
        return Ok(None);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = b.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = b.cast::<PyList>() {
        l.iter().collect()
    } else {
        vec![b.clone()]
    };
    if items.len() > index_cols.len() {
        return Err(codes::bad_argument(format!(
            "bound has {} values, the index has {} columns",
            items.len(),
            index_cols.len()
        )));
    }
    items
        .iter()
        .zip(index_cols)
        .map(|(v, &c)| py_to_value(v, &def.columns[c].name))
        .collect::<R<Vec<_>>>()
        .map(Some)
}
