//! ndbinfo queries over the transport: `ndbinfo.transporters` shows every live data
//! node's transporters, as NDB's does. The data node that runs such a query (on worker
//! 0, where SQL runs one statement at a time) asks every other live data node for its
//! rows (`TransportersReq`), and runs the query once each answered or left the view,
//! with its own rows and theirs (`ndbinfo::TransporterSource::with_gathered`).
//!
//! Queries that read only ndbinfo and information_schema tables are answered by the
//! node that gets them whatever the number of node groups (they read no replicas).
//!
//! Limits: at most [`MAX_GATHERS`] queries gathering at once; beyond that a query
//! shows this node's rows only.

use super::DataPath;
use crate::schema::Value;
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use std::collections::BTreeSet;

/// Queries gathering rows at once, at most.
pub const MAX_GATHERS: usize = 64;

pub(crate) struct Gather {
    api: NodeId,
    req: u64,
    database: String,
    sql: String,
    rows: Vec<Vec<Value>>,
    waiting: BTreeSet<NodeId>,
}

impl DataPath {
    /// Starts a query that reads ndbinfo.transporters: asks every other live data
    /// node (none: runs it now). Returns false when it cannot gather (too many at once).
    pub(super) fn gather_transporters(
        &self,
        api: NodeId,
        req: u64,
        database: &str,
        sql: &str,
    ) -> bool {
        let peers: BTreeSet<NodeId> = {
            let m = self.members.read();
            m.live.iter().copied().filter(|&n| n != self.me).collect()
        };
        let id = self.next_req();
        {
            let mut g = self.gathers.lock();
            if g.len() >= MAX_GATHERS {
                return false;
            }
            g.insert(
                id,
                Gather {
                    api,
                    req,
                    database: database.to_string(),
                    sql: sql.to_string(),
                    rows: self.engine.inner().transporters.own_rows(),
                    waiting: peers.clone(),
                },
            );
        }
        for &n in &peers {
            self.send_from(0, n, DataMsg::TransportersReq { req: id });
        }
        self.gather_check(id);
        true
    }

    /// A node's rows (or its loss: no rows) for gather `id` (on worker 0).
    pub(super) fn gather_answer(&self, from: NodeId, id: u64, rows: Vec<Vec<Value>>) {
        {
            let mut g = self.gathers.lock();
            let Some(q) = g.get_mut(&id) else { return };
            if !q.waiting.remove(&from) {
                return;
            }
            q.rows.extend(rows);
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
        let r = self
            .engine
            .inner()
            .transporters
            .with_gathered(q.rows, || self.run_sql(&q.database, &q.sql));
        self.send(q.api, Self::sql_reply(q.req, &r));
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
                        DataMsg::TransportersConf {
                            req: id,
                            rows: Vec::new(),
                        },
                    ),
                );
            }
        }
    }
}
