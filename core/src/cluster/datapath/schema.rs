//! SQL from API nodes: DDL (CREATE, DROP, ALTER, TRUNCATE) runs on the receiving node
//! and then on every other live data node (`SchemaReq`), answered once all did; so
//! does table maintenance (OPTIMIZE, ANALYZE: `maintenance.rs`), whose answer merges
//! every node's result;
//! read-only statements (SELECT, SHOW, DESCRIBE, EXPLAIN) run on the receiving node's
//! replicas (every partition when the cluster has one node group; with several, a
//! SELECT of a table is run by the API node over every group, `remote_select.rs`, and
//! refused here); SET runs on the receiving node. Statements that change rows come as
//! `SqlCaptureReq` (`sql_capture.rs`) and are refused here.
//!
//! Every statement runs in a fresh SQL session that starts from the client's variables
//! (`SqlReq.vars`: user variables and changed system variables, `sql::SessionVars`);
//! a SET's or a SELECT's answer carries the variables after it, which the client keeps
//! (`cluster::remote_session`). DDL sends the client's variables on to the other data
//! nodes (`ndb_table_no_logging` makes the same table everywhere).

use super::maintenance::{self, NodeRows};
use super::{DataPath, err_parts};
use crate::error::{NdbError, Result, codes};
use crate::sql::{SessionVars, SqlResult};
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use std::collections::{BTreeMap, BTreeSet};

/// A DDL waiting for the other data nodes.
pub(crate) struct SchemaWait {
    api: NodeId,
    api_req: u64,
    waiting: BTreeSet<NodeId>,
    /// This node's results, the API node's answer once every peer applied the DDL.
    results: Vec<SqlResult>,
    failures: Vec<String>,
    /// Table maintenance: each node's result rows (its own included).
    maintenance: Option<NodeRows>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ddl,
    /// OPTIMIZE, ANALYZE: on every data node, results merged (`maintenance.rs`).
    Maintenance,
    ReadOnly,
    /// SET: the session's variables.
    Session,
    /// Changes rows: sent as `SqlCaptureReq` (`sql_capture.rs`), not as SqlReq.
    Dml,
    Refused,
}

fn kind_of(sql: &str) -> Kind {
    let word = crate::sql::leading_keyword(sql);
    match word.as_str() {
        "CREATE" | "DROP" | "ALTER" | "TRUNCATE" | "RENAME" => Kind::Ddl,
        "SELECT" | "SHOW" | "DESCRIBE" | "DESC" | "EXPLAIN" | "USE" => Kind::ReadOnly,
        "SET" => Kind::Session,
        _ if maintenance::is_maintenance(sql) => Kind::Maintenance,
        _ if crate::sql::changes_rows(sql) => Kind::Dml,
        _ => Kind::Refused,
    }
}

/// `results` if they fit in one `SqlConf`; else MySQL's 1153 (a frame is 16 MiB, as a
/// mysqld answers a packet past max_allowed_packet), which names the ways to read
/// such a result. The session's variables are not sent then: the statement changed
/// none that matter (a SELECT's assignments are lost with its result).
fn fits_one_answer(results: Vec<SqlResult>) -> Result<Vec<SqlResult>> {
    use crate::transport::data_sql::{MAX_SQL_RESULTS_BYTES, sql_results_wire_bytes};
    match sql_results_wire_bytes(&results) {
        Some(_) => Ok(results),
        None => Err(crate::sql::too_big().detail(format!(
            "the statement's result is more than {} MiB, what one answer from a data node \
             carries: read it in parts (LIMIT, or WHERE ranges of the key) or scan the \
             table (Python's MgmClient.scan, NdbScanOperation in C)",
            MAX_SQL_RESULTS_BYTES >> 20
        ))),
    }
}

impl DataPath {
    /// Runs `sql` in a session that starts from `vars`: the statements' results and
    /// the session's variables after it.
    pub(super) fn run_sql(
        &self,
        database: &str,
        sql: &str,
        vars: &SessionVars,
    ) -> Result<(Vec<SqlResult>, SessionVars)> {
        let mut session = crate::sql::Session::new(self.engine.ndb(database));
        session.set_session_vars(vars);
        let results = session.execute(sql)?;
        Ok((results, session.checked_session_vars()?))
    }

    /// The answer to a statement that ran in a session of variables: they go back.
    fn sql_reply_with_vars(req: u64, r: Result<(Vec<SqlResult>, SessionVars)>) -> DataMsg {
        match r.and_then(|(results, vars)| Ok((fits_one_answer(results)?, vars))) {
            Ok((results, vars)) => DataMsg::SqlConf {
                req,
                code: 0,
                class: 0,
                text: String::new(),
                mysql_code: 0,
                vars: Some(vars),
                results,
            },
            Err(e) => Self::sql_reply(req, Err(e)),
        }
    }

    /// The answer to an API node's `SqlReq`: the results, or the error (1153 for
    /// results larger than one answer carries).
    pub(super) fn sql_reply(req: u64, r: Result<Vec<SqlResult>>) -> DataMsg {
        match r.and_then(fits_one_answer) {
            Ok(results) => DataMsg::SqlConf {
                req,
                code: 0,
                class: 0,
                text: String::new(),
                mysql_code: 0,
                vars: None,
                results,
            },
            Err(e) => Self::error_reply(req, &e),
        }
    }

    /// The answer to another data node's `SchemaReq`: `text` (table maintenance's
    /// rows, `maintenance::encode_rows`), or the error.
    fn schema_reply(req: u64, r: Result<String>) -> DataMsg {
        match r {
            Ok(text) => DataMsg::SqlConf {
                req,
                code: 0,
                class: 0,
                text,
                mysql_code: 0,
                vars: None,
                results: Vec::new(),
            },
            Err(e) => Self::error_reply(req, &e),
        }
    }

    pub(super) fn error_reply(req: u64, e: &NdbError) -> DataMsg {
        let (code, class, text) = err_parts(e);
        DataMsg::SqlConf {
            req,
            code,
            class,
            text,
            mysql_code: e.mysql_code,
            vars: None,
            results: Vec::new(),
        }
    }

    /// SQL from an API node (on worker 0: DDL is serialized).
    pub(super) fn sql(&self, api: NodeId, req: u64, database: &str, sql: &str, vars: &SessionVars) {
        let kind = kind_of(sql);
        // Monitoring (ndbinfo, information_schema) stays open to every API node in
        // single user mode, as in the embedded cluster: it reads no table's rows.
        let named = if kind == Kind::ReadOnly {
            crate::ndbinfo::tables_named_in(database, sql)
        } else {
            Vec::new()
        };
        let monitoring = !named.is_empty() && !crate::sql::selects_ndb_table(sql, database);
        if !monitoring && let Err(e) = self.check_api_access(api) {
            return self.send(api, Self::error_reply(req, &e));
        }
        // Only a node whose replicas are up to date answers from them or changes the
        // schema (a node waiting for START, or starting, would answer stale: 4035, and
        // the client asks another).
        let ready = match kind {
            Kind::Session => Ok(()),
            Kind::ReadOnly => {
                if self.is_ready() {
                    self.check_serving()
                } else {
                    Err(super::not_ready(self.me))
                }
            }
            _ if self.is_ready() => Ok(()),
            _ => Err(super::not_ready(self.me)),
        };
        if let Err(e) = ready {
            return self.send(api, Self::error_reply(req, &e));
        }
        if kind == Kind::ReadOnly
            && self.groups.len() > 1
            && crate::sql::selects_ndb_table(sql, database)
        {
            let e = codes::unsupported(
                "a SELECT of a table at one data node would read one node group's replicas; with several node groups the API node runs it over every group (a client of this version does)",
            );
            return self.send(api, Self::error_reply(req, &e));
        }
        let head = || sql.trim().chars().take(40).collect::<String>();
        if kind == Kind::Dml {
            let e = codes::unsupported(format!(
                "'{}' as SqlReq: statements that change rows are sent as SqlCaptureReq (a client of this version does), or as key operations",
                head()
            ));
            return self.send(api, Self::error_reply(req, &e));
        }
        if kind == Kind::Refused {
            if let Err(e) = crate::sql::check_syntax(sql) {
                return self.send(api, Self::error_reply(req, &e));
            }
            let e = codes::unsupported(format!(
                "'{}' at a data node: each statement runs on its own (a transaction of \
                 several statements is kept by the client's SQL session — rndb_mgm -c, \
                 Python's MgmClient.sql, the C API's rndb_execute_sql — or is a \
                 transaction of key operations in rounds)",
                head()
            ));
            return self.send(api, Self::error_reply(req, &e));
        }
        if kind == Kind::Ddl && self.restart_in_progress() {
            let e = NdbError::new(
                711,
                crate::error::ErrorClassification::TemporaryResourceError,
                "System busy with node restart, schema operations not allowed",
            );
            return self.send(api, Self::error_reply(req, &e));
        }
        if kind == Kind::Maintenance {
            return self.maintenance_start(api, req, database, sql);
        }
        if !named.is_empty() && self.gather_ndbinfo(api, req, database, sql, named) {
            return;
        }
        let r = self.run_sql(database, sql, vars);
        if kind != Kind::Ddl {
            return self.send(api, Self::sql_reply_with_vars(req, r));
        }
        let r = r.map(|(results, _)| results);
        let peers = self.other_live_nodes();
        let (Ok(results), false) = (&r, peers.is_empty()) else {
            return self.send(api, Self::sql_reply(req, r));
        };
        let results = results.clone();
        self.schema_to_peers(peers, api, req, database, sql, vars, results, None);
    }

    /// Sends `sql` to `peers` (`SchemaReq`) and keeps the wait that answers `api` once
    /// each answered (`results`: this node's DDL answer; `maintenance`: this node's
    /// maintenance rows).
    #[allow(clippy::too_many_arguments)]
    fn schema_to_peers(
        &self,
        peers: BTreeSet<NodeId>,
        api: NodeId,
        req: u64,
        database: &str,
        sql: &str,
        vars: &SessionVars,
        results: Vec<SqlResult>,
        maintenance: Option<NodeRows>,
    ) {
        let id = self.next_req();
        self.schema_waits.lock().insert(
            id,
            SchemaWait {
                api,
                api_req: req,
                waiting: peers.clone(),
                results,
                failures: Vec::new(),
                maintenance,
            },
        );
        for p in peers {
            self.send(
                p,
                DataMsg::SchemaReq {
                    req: id,
                    database: database.to_string(),
                    sql: sql.to_string(),
                    vars: vars.clone(),
                },
            );
        }
    }

    /// Table maintenance from an API node: here (on a maintenance thread), then on
    /// every other live data node.
    fn maintenance_start(&self, api: NodeId, req: u64, database: &str, sql: &str) {
        let (database, sql) = (database.to_string(), sql.to_string());
        self.in_maintenance_thread(
            move |dp, e| dp.send(api, Self::error_reply(req, &e)),
            move |dp| dp.maintenance_here_then_peers(api, req, &database, &sql),
        );
    }

    fn maintenance_here_then_peers(&self, api: NodeId, req: u64, database: &str, sql: &str) {
        let own = self
            .maintenance_rows(database, sql)
            .map_err(|e| e.to_string());
        let per_node: NodeRows = BTreeMap::from([(self.me, own)]);
        let peers = self.other_live_nodes();
        if peers.is_empty() {
            return self.maintenance_reply(api, req, &per_node);
        }
        self.schema_to_peers(
            peers,
            api,
            req,
            database,
            sql,
            &SessionVars::default(),
            Vec::new(),
            Some(per_node),
        );
    }

    fn maintenance_reply(&self, api: NodeId, req: u64, per_node: &NodeRows) {
        let result = maintenance::merge(per_node);
        self.send(api, Self::sql_reply(req, Ok(vec![result])));
    }

    /// DDL or table maintenance from another data node.
    pub(super) fn schema_apply(
        &self,
        from: NodeId,
        req: u64,
        database: &str,
        sql: &str,
        vars: &SessionVars,
    ) {
        let kind = kind_of(sql);
        if kind == Kind::Maintenance {
            let (database, sql) = (database.to_string(), sql.to_string());
            return self.in_maintenance_thread(
                move |dp, e| dp.send(from, Self::error_reply(req, &e)),
                move |dp| {
                    let r = dp
                        .maintenance_rows(&database, &sql)
                        .map(|rows| maintenance::encode_rows(&rows));
                    dp.send(from, Self::schema_reply(req, r));
                },
            );
        }
        // The peer reads only whether the DDL was applied.
        let r = if kind == Kind::Ddl {
            self.run_sql(database, sql, vars).map(|_| String::new())
        } else {
            Err(codes::bad_argument(
                "only DDL is applied from another data node",
            ))
        };
        self.send(from, Self::schema_reply(req, r));
    }

    /// A data node's answer to our `SchemaReq` (or its loss, with `failed`).
    pub(super) fn schema_answer(&self, from: NodeId, req: u64, code: u32, class: u8, text: String) {
        let done = {
            let mut waits = self.schema_waits.lock();
            let Some(w) = waits.get_mut(&req) else { return };
            if !w.waiting.remove(&from) {
                return;
            }
            if let Some(per_node) = &mut w.maintenance {
                // A node that left (code 0, no text) held no replicas any more.
                if code != 0 {
                    per_node.insert(from, Err(super::err_from(code, class, &text).to_string()));
                } else if !text.is_empty() {
                    per_node.insert(from, Ok(maintenance::decode_rows(&text)));
                }
            } else if code != 0 {
                w.failures.push(format!(
                    "node {from}: {}",
                    super::err_from(code, class, &text)
                ));
            }
            if !w.waiting.is_empty() {
                return;
            }
            waits.remove(&req)
        };
        if let Some(w) = done {
            if let Some(per_node) = &w.maintenance {
                return self.maintenance_reply(w.api, w.api_req, per_node);
            }
            let r = if w.failures.is_empty() {
                Ok(w.results)
            } else {
                Err(NdbError::new(
                    4009,
                    crate::error::ErrorClassification::InternalError,
                    "Schema change applied on some data nodes only",
                )
                .detail(w.failures.join("; ")))
            };
            self.send(w.api, Self::sql_reply(w.api_req, r));
        }
    }

    pub(super) fn schema_nodes_failed(&self, nodes: &[NodeId]) {
        let reqs: Vec<u64> = self.schema_waits.lock().keys().copied().collect();
        for req in reqs {
            for &n in nodes {
                self.schema_answer(n, req, 0, 0, String::new());
            }
        }
    }
}
