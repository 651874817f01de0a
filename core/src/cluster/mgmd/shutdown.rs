//! `SHUTDOWN`: every connected data node is told to stop (`STOP CLUSTER`: a graceful
//! stop, each saving a last global checkpoint, in which the peers leaving are not
//! failures), and the client's answer waits until each has ended — its
//! connection closed — or [`SHUTDOWN_WAIT`] has passed, as ndb_mgm's does:
//!
//! ```text
//! Node 2: Cluster shutdown initiated
//! Node 3: Cluster shutdown initiated
//! Node 2: Node shutdown completed.
//! Node 3: Node shutdown completed.
//! 3 NDB Cluster node(s) have shutdown.
//! Disconnecting to allow management server to shutdown.
//! NDB Cluster has shutdown.
//! ```
//!
//! Only then does the server stop acting on its inbox (`Shared::shutdown`), so the
//! nodes' last events still reach the cluster log. A client waits up to
//! `client::LONG_COMMAND_REPLY_TIMEOUT` for the answer.

use super::{NodeEntry, Server};
use crate::error::Result;
use crate::mgm::log::Severity;
use crate::transport::{Message, NodeId, Transport};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long SHUTDOWN waits for the data nodes to end.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(120);

/// A SHUTDOWN waiting for its data nodes (owned by the server's loop).
pub(super) struct ShutdownWait {
    client: NodeId,
    nodes: Vec<NodeId>,
    deadline: Instant,
}

impl Server {
    /// SHUTDOWN from `client`: the data nodes are told; the answer follows
    /// ([`Server::shutdown_progress`]). A second SHUTDOWN meanwhile is refused (the
    /// first client's answer is the one that comes).
    pub(super) fn shutdown_start(
        &mut self,
        client: NodeId,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<()> {
        if self.shutting_down.is_some() {
            return Err(crate::mgm::mgm_error(
                "Shutdown is in progress already; its client gets the answer when the data nodes have ended",
            ));
        }
        let mut told = Vec::new();
        for (&id, e) in nodes {
            if e.connected {
                super::send_going_down(&self.shared, &self.transport, id, "STOP CLUSTER");
                self.log(Severity::Info, id, "Cluster shutdown initiated");
                told.push(id);
            }
        }
        self.shutting_down = Some(ShutdownWait {
            client,
            nodes: told,
            deadline: Instant::now() + SHUTDOWN_WAIT,
        });
        self.shutdown_progress();
        Ok(())
    }

    /// Answers a SHUTDOWN once its data nodes have ended (or the wait is over), then
    /// stops acting on the inbox.
    pub(super) fn shutdown_progress(&mut self) {
        let Some(w) = &self.shutting_down else {
            return;
        };
        let nodes = self.shared.nodes.lock().clone();
        let ended = |id: &NodeId| nodes.get(id).is_none_or(|e| !e.connected);
        if !w.nodes.iter().all(ended) && Instant::now() < w.deadline {
            return;
        }
        let mut lines: Vec<String> = w
            .nodes
            .iter()
            .map(|id| format!("Node {id}: Cluster shutdown initiated"))
            .collect();
        for id in &w.nodes {
            lines.push(if ended(id) {
                format!("Node {id}: Node shutdown completed.")
            } else {
                format!(
                    "Node {id}: Node shutdown not completed within {} s",
                    SHUTDOWN_WAIT.as_secs()
                )
            });
        }
        let down = w.nodes.iter().filter(|id| ended(id)).count();
        lines.push(format!("{} NDB Cluster node(s) have shutdown.", down + 1));
        lines.push("Disconnecting to allow management server to shutdown.".to_string());
        lines.push("NDB Cluster has shutdown.".to_string());
        let client = w.client;
        self.shutting_down = None;
        self.log(
            Severity::Info,
            self.me,
            "Management server shutdown completed.",
        );
        // Set before the answer goes: a client that has the answer finds the server
        // shutting down (the answer still goes out; only the inbox stops being read).
        self.shared.shutdown.store(true, Ordering::Release);
        self.transport.send(
            client,
            &Message::MgmReply {
                ok: true,
                text: lines.join("\n"),
            },
        );
    }
}
