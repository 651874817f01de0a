//! The mysql client's rendering of results: a bordered table with "N rows in set
//! (0.01 sec)" (or "Empty set"), and "Query OK, N rows affected (0.00 sec)" with MySQL's
//! info line after DML.
//!
//! Invariants: column widths count characters, not bytes; numeric columns (every
//! non-NULL value a number) are right-aligned, others left-aligned, as the client aligns
//! by field type; NULL prints as `NULL`; the output has no trailing newline.

use super::SqlResult;
use super::eval;
use crate::schema::Value;
use std::time::Duration;

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "NULL".to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => eval::to_text(other).unwrap_or_default(),
    }
}

fn is_number(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) | Value::Decimal(_)
    )
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Renders the results of statements run together (`elapsed` for all of them), one
/// after the other.
pub fn render_all(results: &[SqlResult], elapsed: Duration) -> String {
    results
        .iter()
        .map(|r| render(r, elapsed))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Renders a result as the mysql client prints it.
pub fn render(result: &SqlResult, elapsed: Duration) -> String {
    let secs = format!("({:.2} sec)", elapsed.as_secs_f64());
    match result {
        SqlResult::Affected { rows, info, .. } => {
            let mut s = format!("Query OK, {} affected {secs}", plural(*rows, "row", "rows"));
            if let Some(i) = info {
                s.push('\n');
                s.push_str(i);
            }
            s
        }
        SqlResult::Rows { columns, rows } => {
            if rows.is_empty() {
                return format!("Empty set {secs}");
            }
            let texts: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    (0..columns.len())
                        .map(|i| cell(r.get(i).unwrap_or(&Value::Null)))
                        .collect()
                })
                .collect();
            let numeric: Vec<bool> = (0..columns.len())
                .map(|i| {
                    let mut any = false;
                    for r in rows {
                        match r.get(i) {
                            Some(Value::Null) | None => {}
                            Some(v) if is_number(v) => any = true,
                            Some(_) => return false,
                        }
                    }
                    any
                })
                .collect();
            let widths: Vec<usize> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    texts
                        .iter()
                        .map(|r| width(&r[i]))
                        .chain(std::iter::once(width(c)))
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let border: String = {
                let mut b = String::from("+");
                for w in &widths {
                    b.push_str(&"-".repeat(w + 2));
                    b.push('+');
                }
                b
            };
            let line = |cells: &[String], right: &[bool]| {
                let mut l = String::from("|");
                for (i, c) in cells.iter().enumerate() {
                    let pad = widths[i] - width(c);
                    if right[i] {
                        l.push_str(&format!(" {}{} |", " ".repeat(pad), c));
                    } else {
                        l.push_str(&format!(" {}{} |", c, " ".repeat(pad)));
                    }
                }
                l
            };
            let mut out = vec![border.clone()];
            out.push(line(columns, &vec![false; columns.len()]));
            out.push(border.clone());
            for r in &texts {
                out.push(line(r, &numeric));
            }
            out.push(border);
            out.push(format!(
                "{} in set {secs}",
                plural(rows.len() as u64, "row", "rows")
            ));
            out.join("\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Decimal;

    #[test]
    fn renders_like_the_mysql_client() {
        let r = SqlResult::Rows {
            columns: vec!["node_id".into(), "hit_ratio_pct".into()],
            rows: vec![
                vec![
                    Value::UInt(3),
                    Value::Decimal(Decimal {
                        mantissa: 933577,
                        scale: 4,
                    }),
                ],
                vec![Value::UInt(4), Value::Null],
            ],
        };
        assert_eq!(
            render(&r, Duration::from_millis(10)),
            "+---------+---------------+\n\
             | node_id | hit_ratio_pct |\n\
             +---------+---------------+\n\
             |       3 |       93.3577 |\n\
             |       4 |          NULL |\n\
             +---------+---------------+\n\
             2 rows in set (0.01 sec)"
        );
        let ok = SqlResult::Affected {
            rows: 4096,
            last_insert_id: None,
            info: Some("Records: 4096  Duplicates: 0  Warnings: 0".into()),
        };
        assert_eq!(
            render(&ok, Duration::from_millis(170)),
            "Query OK, 4096 rows affected (0.17 sec)\nRecords: 4096  Duplicates: 0  Warnings: 0"
        );
        assert_eq!(
            render(&SqlResult::ok(1), Duration::ZERO),
            "Query OK, 1 row affected (0.00 sec)"
        );
        let empty = SqlResult::Rows {
            columns: vec!["a".into()],
            rows: vec![],
        };
        assert_eq!(render(&empty, Duration::ZERO), "Empty set (0.00 sec)");
        let text = SqlResult::Rows {
            columns: vec!["a".into()],
            rows: vec![vec![Value::Str("äb".into())]],
        };
        assert_eq!(
            render(&text, Duration::ZERO),
            "+----+\n| a  |\n+----+\n| äb |\n+----+\n1 row in set (0.00 sec)"
        );
    }
}
