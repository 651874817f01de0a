//! The cluster protocols (NDB's QMGR and the arbitrator, with DIH, TC/LQH over the
//! network and node-restart copy to follow; `docs/cluster.md`).
//!
//! Every block here is a state machine driven by `on_message` / `on_tick` with the
//! time passed in; what it wants done goes into an [`Outbox`]. The runtimes — the
//! deterministic simulator ([`sim`]) and the `rndbd`/`rndb_mgmd` processes over the
//! TCP transport — deliver the messages and act on the [`Event`]s.

pub mod arbit;
pub mod client;
pub mod datapath;
#[cfg(test)]
mod datapath_scan_tests;
#[cfg(test)]
mod datapath_sql_groups_tests;
#[cfg(test)]
mod datapath_sql_tests;
#[cfg(test)]
mod datapath_tests;
#[cfg(test)]
mod datapath_unique_tests;
pub mod layout;
pub mod local;
#[cfg(test)]
mod local_tests;
pub mod mgmd;
#[cfg(test)]
mod mgmd_commands_tests;
pub mod ndbd;
pub mod node_commands;
#[cfg(test)]
mod process_tests;
pub mod qmgr;
pub mod remote;
pub mod remote_scan;
mod remote_select;
pub mod remote_session;
#[cfg(test)]
mod remote_session_tests;
pub mod remote_sql;
mod remote_sql_groups;
pub mod remote_txn;
pub mod sim;
pub mod sim_data;
#[cfg(test)]
mod sim_data_tests;
#[cfg(test)]
mod sim_tests;
pub mod start_plan;
#[cfg(test)]
mod system_restart_tests;
pub mod tuple_id;

use crate::mgm::log::Severity;
use crate::transport::{Message, NodeId, View};

/// What happened in a block, for its runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A cluster log line of `node`.
    Log {
        node: NodeId,
        severity: Severity,
        text: String,
    },
    /// This node installed `view` (it is a member).
    ViewInstalled(View),
    /// This node must stop (declared dead, arbitration lost): NDB's error code and why.
    Shutdown { code: u32, reason: String },
}

/// Messages to send and events, collected by a block's step.
#[derive(Debug, Default)]
pub struct Outbox {
    pub sends: Vec<(NodeId, Message)>,
    pub events: Vec<Event>,
}

impl Outbox {
    pub fn send(&mut self, to: NodeId, msg: Message) {
        self.sends.push((to, msg));
    }

    pub fn is_empty(&self) -> bool {
        self.sends.is_empty() && self.events.is_empty()
    }
}
