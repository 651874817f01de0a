//! OPTIMIZE TABLE (and ANALYZE TABLE) from an API node: table maintenance each data
//! node does on its own replicas, so the statement runs on every live data node, as
//! NDB's does. The receiving node runs it, sends it to every other live data node
//! (`SchemaReq`, as DDL travels: `schema.rs`), and answers once each answered or left
//! the view, with one result: per table, each node's note (`Node 2: 120 rows ...
//! moved ...`) and one status, OK when every node's was.
//!
//! Each node's rows travel in `SqlConf`'s text as lines of four tab-separated fields
//! (Table, Op, Msg_type, Msg_text; tabs and line ends inside a field become spaces).
//!
//! A statement runs on a thread of its own (inline in the simulator), not on the
//! worker that received it: moving a large table's rows takes a while, and that worker
//! coordinates transactions meanwhile. At most [`MAX_MAINTENANCE`] run at once on a
//! node; beyond, the statement gets 701 "System busy with other schema operation"
//! (temporary) at once.

use super::{DataPath, Threading};
use crate::error::{NdbError, Result, codes};
use crate::schema::Value;
use crate::sql::SqlResult;
use crate::transport::NodeId;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Table maintenance statements running at once on one data node, at most.
pub const MAX_MAINTENANCE: usize = 2;

/// One of the [`MAX_MAINTENANCE`] slots, given back when dropped (also unwinding).
struct MaintenanceSlot<'a>(&'a DataPath);

impl Drop for MaintenanceSlot<'_> {
    fn drop(&mut self) {
        self.0.maintenance_running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What each node answered: its rows, or why it failed.
pub(super) type NodeRows = BTreeMap<NodeId, std::result::Result<Vec<Vec<String>>, String>>;

/// Whether `sql` is table maintenance run on every data node.
pub(super) fn is_maintenance(sql: &str) -> bool {
    matches!(
        crate::sql::leading_keyword(sql).as_str(),
        "OPTIMIZE" | "ANALYZE"
    )
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// Rows as `SqlConf` text.
pub(super) fn encode_rows(rows: &[Vec<String>]) -> String {
    rows.iter()
        .map(|r| r.iter().map(|f| clean(f)).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `SqlConf` text as rows (a line without four fields is left out).
pub(super) fn decode_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split('\t').map(str::to_string).collect::<Vec<_>>())
        .filter(|r| r.len() == 4)
        .collect()
}

/// One result from every node's rows (see the module notes).
pub(super) fn merge(per_node: &NodeRows) -> SqlResult {
    // Tables in the order the statement named them (the first answer's order).
    let mut tables: Vec<(String, String)> = Vec::new();
    for rows in per_node.values().flatten() {
        for r in rows {
            let key = (r[0].clone(), r[1].clone());
            if !tables.contains(&key) {
                tables.push(key);
            }
        }
    }
    let st = |x: &str| Value::Str(x.to_string());
    let mut out = Vec::new();
    for (table, op) in &tables {
        let mut all_ok = true;
        for (node, answer) in per_node {
            match answer {
                Ok(rows) => {
                    let mine: Vec<&Vec<String>> = rows
                        .iter()
                        .filter(|r| &r[0] == table && &r[1] == op)
                        .collect();
                    for r in &mine {
                        if r[2] == "status" {
                            all_ok &= r[3] == "OK";
                        } else {
                            out.push(vec![
                                st(table),
                                st(op),
                                st(&r[2]),
                                st(&format!("Node {node}: {}", r[3])),
                            ]);
                        }
                    }
                    all_ok &= !mine.is_empty();
                }
                Err(why) => {
                    all_ok = false;
                    out.push(vec![
                        st(table),
                        st(op),
                        st("Error"),
                        st(&format!("Node {node}: {why}")),
                    ]);
                }
            }
        }
        out.push(vec![
            st(table),
            st(op),
            st("status"),
            st(if all_ok { "OK" } else { "Operation failed" }),
        ]);
    }
    SqlResult::Rows {
        columns: ["Table", "Op", "Msg_type", "Msg_text"]
            .map(String::from)
            .to_vec(),
        rows: out,
    }
}

impl DataPath {
    /// Runs `job` on a maintenance thread holding a slot (inline in the simulator);
    /// `busy` gets the error when every slot is taken or no thread starts.
    pub(super) fn in_maintenance_thread(
        &self,
        busy: impl FnOnce(&DataPath, NdbError),
        job: impl FnOnce(&DataPath) + Send + 'static,
    ) {
        if self.maintenance_running.fetch_add(1, Ordering::AcqRel) >= MAX_MAINTENANCE {
            self.maintenance_running.fetch_sub(1, Ordering::AcqRel);
            let e = NdbError::new(
                701,
                crate::error::ErrorClassification::TemporaryResourceError,
                "System busy with other schema operation",
            )
            .detail(format!(
                "data node {} runs {MAX_MAINTENANCE} table maintenance statements already",
                self.me
            ));
            return busy(self, e);
        }
        let me = match self.threading {
            Threading::Threads => self.me_arc(),
            Threading::Inline => None,
        };
        let Some(me) = me else {
            let _slot = MaintenanceSlot(self);
            return job(self);
        };
        let spawned = std::thread::Builder::new()
            .name(format!("rndb-optimize-{}", self.me))
            .spawn(move || {
                let _slot = MaintenanceSlot(&me);
                job(&me);
            });
        if let Err(e) = spawned {
            // The closure, and the slot it would have held, never ran.
            self.maintenance_running.fetch_sub(1, Ordering::AcqRel);
            busy(
                self,
                codes::internal(format!("table maintenance thread: {e}")),
            );
        }
    }

    /// Runs the maintenance statement on this node's replicas: its result rows.
    pub(super) fn maintenance_rows(&self, database: &str, sql: &str) -> Result<Vec<Vec<String>>> {
        let mut session = crate::sql::Session::new(self.engine.ndb(database));
        let mut out = Vec::new();
        for r in session.execute(sql)? {
            let SqlResult::Rows { rows, .. } = r else {
                return Err(codes::internal("table maintenance gave no result rows"));
            };
            for row in rows {
                out.push(
                    row.iter()
                        .map(|v| match v {
                            Value::Str(s) => s.clone(),
                            other => format!("{other:?}"),
                        })
                        .collect(),
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::mem_harness::{API, DB, Harness};
    use super::*;
    use crate::transport::data::DataMsg;

    fn optimize(h: &Harness) -> DataMsg {
        h.node(2).on_message(
            API,
            DataMsg::SqlReq {
                req: 7,
                database: DB.into(),
                sql: "OPTIMIZE TABLE kv".into(),
                vars: Default::default(),
            },
        );
        h.answer()
    }

    /// Over two node groups every data node optimizes its replicas and answers its
    /// note; with every maintenance slot of the receiving node taken, 701 at once.
    #[test]
    fn every_node_optimizes_and_a_busy_node_answers_701() {
        let h = Harness::new();
        h.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=NDB");
        let node2 = h.node(2);
        node2
            .maintenance_running
            .store(MAX_MAINTENANCE, Ordering::Release);
        match optimize(&h) {
            DataMsg::SqlConf { code, text, .. } => {
                assert_eq!(code, 701, "{text}");
                assert!(
                    text.contains("table maintenance statements already"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        node2.maintenance_running.store(0, Ordering::Release);
        match optimize(&h) {
            DataMsg::SqlConf {
                code: 0, results, ..
            } => {
                let text = crate::sql::render_all(&results, std::time::Duration::ZERO);
                for n in [2, 3, 4, 5] {
                    assert!(text.contains(&format!("Node {n}: ")), "{text}");
                }
                assert!(text.contains("| OK "), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(node2.maintenance_running.load(Ordering::Acquire), 0);
        h.stop();
    }

    fn row(t: &str, ty: &str, text: &str) -> Vec<String> {
        [t, "optimize", ty, text].map(String::from).to_vec()
    }

    #[test]
    fn every_nodes_note_and_one_status_per_table() {
        let a = vec![
            row("test.t", "note", "5 rows moved"),
            row("test.t", "status", "OK"),
            row("test.u", "note", "0 rows moved"),
            row("test.u", "status", "OK"),
        ];
        let text = encode_rows(&a);
        assert_eq!(decode_rows(&text), a);
        let b = vec![
            row("test.t", "note", "7 rows\tmoved"),
            row("test.t", "status", "OK"),
            row("test.u", "Error", "Got error 4009"),
            row("test.u", "status", "Operation failed"),
        ];
        let per_node: NodeRows = BTreeMap::from([
            (2, Ok(a)),
            (3, Ok(decode_rows(&encode_rows(&b)))),
            (4, Err("left the cluster".to_string())),
        ]);
        let SqlResult::Rows { rows, .. } = merge(&per_node) else {
            panic!("rows")
        };
        let text: Vec<String> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| match v {
                        Value::Str(s) => s.clone(),
                        _ => String::new(),
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect();
        assert_eq!(
            text,
            vec![
                "test.t|optimize|note|Node 2: 5 rows moved",
                "test.t|optimize|note|Node 3: 7 rows moved",
                "test.t|optimize|Error|Node 4: left the cluster",
                "test.t|optimize|status|Operation failed",
                "test.u|optimize|note|Node 2: 0 rows moved",
                "test.u|optimize|Error|Node 3: Got error 4009",
                "test.u|optimize|Error|Node 4: left the cluster",
                "test.u|optimize|status|Operation failed",
            ]
        );
        let ok: NodeRows = BTreeMap::from([(2, Ok(vec![row("test.t", "status", "OK")]))]);
        let SqlResult::Rows { rows, .. } = merge(&ok) else {
            panic!("rows")
        };
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][3], Value::Str("OK".into()));
    }
}
