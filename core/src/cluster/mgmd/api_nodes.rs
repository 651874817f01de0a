//! API nodes at the management server: node ids for API clients, and single user mode.
//!
//! - An API client (`RemoteCluster::connect`: Python's `rndb.connect`, the C API's
//!   `Ndb_cluster_connection`) asks for a node id (`ApiRegReq`) on its management
//!   connection and keeps that connection open while it runs: the id is the first free
//!   `[api]`/`[mysqld]` slot whose HostName is empty or names the client's host (or
//!   the slot the connectstring's `nodeid=` names), as ndb_mgmd allocates; it is free
//!   again when the connection closes. `SHOW` lists the API nodes connected. When every
//!   slot is taken the client gets id 0 and goes on without one (ndb_mgmd refuses it
//!   with "No free node id found for mysqld(API)"; here the old clients without an id
//!   keep working), and such a client is refused by the data nodes in single user mode.
//! - `ENTER SINGLE USER MODE <id>` (an `[api]`/`[mysqld]` id of the configuration) and
//!   `EXIT SINGLE USER MODE`: every connected data node is told (`SINGLE USER <id>` /
//!   `SINGLE USER OFF`, a `NodeCommand` each answers once it applied it: the client's
//!   answer comes after every node's, so its next statement finds the mode in force),
//!   and so is every data node at each state it reports later (its first after it
//!   connects, and each of a restart inside its process), so that a node that restarts
//!   meanwhile refuses the other API nodes too; the data nodes
//!   refuse new transactions, reads, scans and SQL from any other API node with 299
//!   "Operation not allowed due to single user mode". `ALL STATUS` and `SHOW` say
//!   "single user mode" for the started data nodes while it is on.
//!
//! Invariants: an API node id is held by at most one connection; the sessions are kept
//! in a `BTreeMap` by connection, so their order never depends on hashing.

use super::{NodeEntry, Server, host_matches};
use crate::error::Result;
use crate::mgm::log::Severity;
use crate::mgm::mgm_error;
use crate::mgm::single_user_text as text;
use crate::transport::{Message, NodeId, Transport};
use std::collections::BTreeMap;

/// The API nodes connected, by their management connection (an anonymous peer id).
#[derive(Default)]
pub(super) struct ApiSessions {
    by_conn: BTreeMap<NodeId, (NodeId, String)>,
    /// The API node that has exclusive access (single user mode), if any.
    pub(super) single_user: Option<NodeId>,
}

impl ApiSessions {
    /// The connected API nodes: (id, host), by id.
    pub(super) fn connected(&self) -> BTreeMap<NodeId, String> {
        self.by_conn.values().cloned().collect()
    }
}

impl Server {
    /// `ApiRegReq` from the management connection `conn`.
    pub(super) fn on_api_reg(&mut self, conn: NodeId, wanted: NodeId, host: &str) {
        let id = self.allocate_api_id(conn, wanted, host);
        match id {
            Some(id) => {
                self.api.by_conn.insert(conn, (id, host.to_string()));
                self.log(
                    Severity::Info,
                    self.me,
                    &format!(
                        "Node {id}: API node connected from {}",
                        if host.is_empty() {
                            "an unnamed host"
                        } else {
                            host
                        }
                    ),
                );
            }
            None => self.log(
                Severity::Warning,
                self.me,
                &format!(
                    "An API client at {} connected without a node id: {}",
                    if host.is_empty() {
                        "an unnamed host"
                    } else {
                        host
                    },
                    if wanted != 0 {
                        format!("API node {wanted} is taken or not in the configuration")
                    } else {
                        "every [api]/[mysqld] slot is taken".to_string()
                    }
                ),
            ),
        }
        self.transport.send(
            conn,
            &Message::ApiRegConf {
                node_id: id.unwrap_or(0),
            },
        );
    }

    fn allocate_api_id(&self, conn: NodeId, wanted: NodeId, host: &str) -> Option<NodeId> {
        if let Some((id, _)) = self.api.by_conn.get(&conn) {
            return Some(*id);
        }
        let taken: Vec<NodeId> = self.api.by_conn.values().map(|(id, _)| *id).collect();
        self.cfg
            .api_nodes
            .iter()
            .filter(|a| wanted == 0 || a.node_id == wanted)
            .find(|a| !taken.contains(&a.node_id) && host_matches(&a.host_name, host))
            .map(|a| a.node_id)
    }

    /// The management connection `conn` closed: its API node id is free again.
    pub(super) fn on_api_conn_gone(&mut self, conn: NodeId) {
        if let Some((id, _)) = self.api.by_conn.remove(&conn) {
            self.log(
                Severity::Info,
                self.me,
                &format!("Node {id}: API node disconnected"),
            );
        }
    }

    /// `ENTER SINGLE USER MODE <id>`.
    pub(super) fn enter_single_user(
        &mut self,
        client: NodeId,
        id: NodeId,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<Option<String>> {
        let fail = |why: String| Err(mgm_error(text::enter_failed(id, &why)));
        if !self.cfg.api_nodes.iter().any(|a| a.node_id == id) {
            return fail(text::not_api(id));
        }
        match self.api.single_user {
            Some(current) if current != id => return fail(text::already(current)),
            _ => {}
        }
        self.api.single_user = Some(id);
        let connected = super::connected_ids(nodes);
        for &n in &connected {
            self.log(Severity::Info, n, text::ENTERING_EVENT);
            self.log(Severity::Info, n, &text::entered_event(id));
        }
        self.tell_single_user(client, &connected, nodes, text::entered(id))
    }

    /// `EXIT SINGLE USER MODE`.
    pub(super) fn exit_single_user(
        &mut self,
        client: NodeId,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<Option<String>> {
        let Some(was) = self.api.single_user.take() else {
            return Err(mgm_error(text::NOT_IN_MODE));
        };
        let connected = super::connected_ids(nodes);
        for &n in &connected {
            self.log(Severity::Info, n, &text::exiting_event(was));
        }
        self.tell_single_user(client, &connected, nodes, text::EXITING.to_string())
    }

    /// Tells `targets` the current mode and answers `client` with `answer` once each
    /// has applied it (a node that has reported no state yet hears it with its first
    /// report, `send_single_user`).
    fn tell_single_user(
        &mut self,
        client: NodeId,
        targets: &[NodeId],
        nodes: &BTreeMap<NodeId, NodeEntry>,
        answer: String,
    ) -> Result<Option<String>> {
        let text = match self.api.single_user {
            Some(id) => format!("SINGLE USER {id}"),
            None => "SINGLE USER OFF".to_string(),
        };
        for &n in targets {
            if nodes.get(&n).is_some_and(|e| e.state.is_none()) {
                self.send_single_user(n);
            }
        }
        self.ask_nodes_then(client, &text, targets, nodes, answer)
    }

    /// Tells data node `n` the current mode (at the command, and at each state change
    /// it reports).
    pub(super) fn send_single_user(&self, n: NodeId) {
        let text = match self.api.single_user {
            Some(id) => format!("SINGLE USER {id}"),
            None => "SINGLE USER OFF".to_string(),
        };
        self.transport.send(n, &Message::MgmCommand { text });
    }
}
