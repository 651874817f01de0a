//! ndbinfo queries over the transport: every ndbinfo table (and
//! information_schema.FILES) shows every live data node's rows, as NDB's do. The data
//! node that runs such a query (on worker 0, where SQL runs one statement at a time)
//! asks every other live data node for its rows of the tables the query names
//! (`NdbinfoReq`, `ndbinfo::tables_named_in`), and runs the query once each answered
//! or left the view, with every node's rows in node-id order installed
//! (`ndbinfo::GatheredRows::with`).
//!
//! Queries that read only ndbinfo and information_schema tables are answered by the
//! node that gets them whatever the number of node groups (they read no replicas).
//!
//! Limits: at most [`MAX_GATHERS`] queries gathering at once (beyond that a query
//! shows this node's rows only); a node answers at most
//! `ndbinfo::MAX_GATHERED_ROWS` rows per query, and a query whose rows were cut fails
//! with 4011 rather than showing part of a node's rows.

use super::DataPath;
use crate::error::{ErrorClassification, NdbError};
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use std::collections::{BTreeMap, BTreeSet};

/// Queries gathering rows at once, at most.
pub const MAX_GATHERS: usize = 64;

/// Per table (gather key), its rows.
type TableRows = Vec<(String, Vec<Vec<Value>>)>;

pub(crate) struct Gather {
    api: NodeId,
    req: u64,
    database: String,
    sql: String,
    /// Each node's rows, this node's included.
    rows: BTreeMap<NodeId, TableRows>,
    /// Nodes whose rows were cut at the limit.
    truncated: BTreeSet<NodeId>,
    waiting: BTreeSet<NodeId>,
}

impl DataPath {
    /// This node's rows of `tables` (gather keys), at most
    /// `ndbinfo::MAX_GATHERED_ROWS` in all; true when some were left out.
    pub(super) fn own_ndbinfo_rows(&self, tables: &[String]) -> (TableRows, bool) {
        let cluster = self.engine.inner();
        let mut left = crate::ndbinfo::MAX_GATHERED_ROWS;
        let mut truncated = false;
        let mut out = Vec::with_capacity(tables.len());
        for key in tables {
            // A table that fails or does not exist contributes no rows here; the
            // query itself reports it when it runs.
            let mut rows = match crate::ndbinfo::own_rows(cluster, key) {
                Some(Ok(rows)) => rows,
                _ => Vec::new(),
            };
            if rows.len() > left {
                rows.truncate(left);
                truncated = true;
            }
            left -= rows.len();
            out.push((key.clone(), rows));
        }
        (out, truncated)
    }

    /// Starts a query that reads the per-node tables `tables`: asks every other live
    /// data node (none: runs it now). Returns false when it cannot gather (too many at
    /// once).
    pub(super) fn gather_ndbinfo(
        &self,
        api: NodeId,
        req: u64,
        database: &str,
        sql: &str,
        tables: Vec<String>,
    ) -> bool {
        let peers = self.other_live_nodes();
        let id = self.next_req();
        {
            let mut g = self.gathers.lock();
            if g.len() >= MAX_GATHERS {
                return false;
            }
            let (own, cut) = self.own_ndbinfo_rows(&tables);
            g.insert(
                id,
                Gather {
                    api,
                    req,
                    database: database.to_string(),
                    sql: sql.to_string(),
                    rows: BTreeMap::from([(self.me, own)]),
                    truncated: if cut {
                        BTreeSet::from([self.me])
                    } else {
                        BTreeSet::new()
                    },
                    waiting: peers.clone(),
                },
            );
        }
        for &n in &peers {
            self.send_from(
                0,
                n,
                DataMsg::NdbinfoReq {
                    req: id,
                    tables: tables.clone(),
                },
            );
        }
        self.gather_check(id);
        true
    }

    /// A node's rows (or its loss: no rows) for gather `id` (on worker 0).
    pub(super) fn gather_answer(&self, from: NodeId, id: u64, rows: TableRows, truncated: bool) {
        {
            let mut g = self.gathers.lock();
            let Some(q) = g.get_mut(&id) else { return };
            if !q.waiting.remove(&from) {
                return;
            }
            if truncated {
                q.truncated.insert(from);
            }
            q.rows.insert(from, rows);
        }
        self.gather_check(id);
    }

    fn gather_check(&self, id: u64) {
        let done = {
            let mut g = self.gathers.lock();
            match g.get(&id) {
                Some(q) if q.waiting.is_empty() => g.remove(&id),
                _ => None,
            }
        };
        let Some(q) = done else { return };
        if !q.truncated.is_empty() {
            let e = NdbError::new(
                4011,
                ErrorClassification::InternalError,
                format!(
                    "ndbinfo: data node(s) {:?} hold more than {} rows of the tables this query reads; add a WHERE on node_id to read fewer at once",
                    q.truncated,
                    crate::ndbinfo::MAX_GATHERED_ROWS
                ),
            );
            return self.send(q.api, Self::error_reply(q.req, &e));
        }
        let mut by_table: BTreeMap<String, Vec<Vec<Value>>> = BTreeMap::new();
        // Node-id order (the map's), so rows come as NDB lists them.
        for (_, tables) in q.rows {
            for (key, rows) in tables {
                by_table.entry(key).or_default().extend(rows);
            }
        }
        let r = self.engine.inner().ndbinfo_gathered.with(by_table, || {
            self.run_sql(&q.database, &q.sql, &crate::sql::SessionVars::default())
                .map(|(results, _)| results)
        });
        self.send(q.api, Self::sql_reply(q.req, r));
    }

    /// These nodes left the view: their answers will not come (worker 0 completes).
    pub(super) fn gather_nodes_failed(&self, nodes: &[NodeId]) {
        let ids: Vec<u64> = self.gathers.lock().keys().copied().collect();
        for id in ids {
            for &n in nodes {
                self.dispatch(
                    0,
                    super::Job::Msg(
                        n,
                        DataMsg::NdbinfoConf {
                            req: id,
                            tables: Vec::new(),
                            truncated: false,
                        },
                    ),
                );
            }
        }
    }
}
