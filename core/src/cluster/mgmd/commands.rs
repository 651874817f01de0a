//! The management commands `rndb_mgmd` answers with the data nodes' help, and the
//! ones about its own cluster log and configuration:
//!
//! - `REPORT MemoryUsage|DiskPageBuffer|Fragmentation` and `DUMP 1000`: each data node
//!   the command names gets a `NodeCommand` and answers with its own lines
//!   (`mgm::run_on_data_node` on its local engine); the client's request waits until
//!   every node asked has answered, or [`NODE_COMMAND_TIMEOUT_MS`] has passed, and the
//!   answer lists the nodes in id order: a node not connected, or one that did not
//!   answer in time, is named with the reason instead of its lines. `DUMP 1000` also
//!   writes each node's lines to the cluster log as that node's events, as ndb_mgmd does.
//! - `REPORT EventLog`, `CLUSTERLOG ...`: the management server's own cluster log.
//! - `SET <param>=<value>`: the configuration the server hands out changes (a data node
//!   that starts from now on, a new process or a `RESTART` inside one, fetches the new
//!   value); a parameter that takes effect at once (`DiskPageBufferMemory`, `TransactionDeadlockDetectionTimeout`) is
//!   also sent to every connected data node, which applies it in place.
//!
//! Bounds: at most [`MAX_PENDING`] requests wait for data nodes at a time (more are
//! refused with the reason); a request waits at most [`NODE_COMMAND_TIMEOUT_MS`], less
//! than a management client's read timeout (5 s), so every client gets its answer. A
//! node whose connection closes while it is asked counts as answered, with that reason.
//! Requests are kept in a `BTreeMap` by id, so expiry and answers run in a fixed order.

use super::{NodeEntry, Server};
use crate::error::Result;
use crate::mgm::log::Severity;
use crate::mgm::parse::Report;
use crate::mgm::{mgm_error, split_node};
use crate::transport::{Message, NodeId, Transport};
use std::collections::{BTreeMap, BTreeSet};

/// How long a request waits for the data nodes' answers.
pub const NODE_COMMAND_TIMEOUT_MS: u64 = 3_000;
/// How many requests may wait for data nodes at once.
pub const MAX_PENDING: usize = 64;

/// Requests waiting for data nodes (owned by the server's loop).
#[derive(Default)]
pub(super) struct NodeCommands {
    next_req: u64,
    pending: BTreeMap<u64, Pending>,
    /// Generation of the configuration, raised by every SET (ndb_mgmd's "New generation").
    generation: u32,
}

struct Pending {
    /// The management client that asked.
    client: NodeId,
    asked: BTreeSet<NodeId>,
    answers: BTreeMap<NodeId, std::result::Result<String, String>>,
    deadline_ms: u64,
    finish: Finish,
}

/// How the answer is put together.
enum Finish {
    /// `header`, then each target's lines in node id order; with `log`, each line of a
    /// node also goes to the cluster log as that node's event (DUMP).
    Lines {
        targets: Vec<NodeId>,
        header: Vec<String>,
        log: bool,
    },
    /// `text` once every target answered (a node that did not is named).
    Fixed(String),
    /// A SET that running nodes apply at once: `what` changed; which nodes have it.
    Set {
        what: String,
        /// `mgm::set_effect_now`'s words.
        effect: &'static str,
        targets: Vec<NodeId>,
    },
}

impl Server {
    /// `REPORT <what>` for `targets`: EventLog from the server's log, the rest from the
    /// data nodes. None: the answer follows when the nodes have answered.
    pub(super) fn report(
        &mut self,
        client: NodeId,
        targets: Vec<NodeId>,
        what: Report,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<Option<String>> {
        let text = match what {
            Report::EventLog => {
                let mut out = Vec::new();
                for id in targets {
                    out.extend(self.shared.log.lines(Some(id)));
                }
                return Ok(Some(out.join("\n")));
            }
            Report::MemoryUsage => "ALL REPORT MemoryUsage",
            Report::DiskPageBuffer => "ALL REPORT DiskPageBuffer",
            Report::Fragmentation => "ALL REPORT Fragmentation",
        };
        let finish = Finish::Lines {
            targets: targets.clone(),
            header: Vec::new(),
            log: false,
        };
        self.ask_nodes(client, text, &targets, nodes, finish)
    }

    /// `DUMP <codes>` (1000: memory usage, logged as each node's events).
    pub(super) fn dump(
        &mut self,
        client: NodeId,
        targets: Vec<NodeId>,
        codes: &[u32],
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<Option<String>> {
        let header = crate::mgm::dump_header(codes)?;
        let text = format!(
            "ALL DUMP {}",
            codes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let finish = Finish::Lines {
            targets: targets.clone(),
            header,
            log: true,
        };
        self.ask_nodes(client, &text, &targets, nodes, finish)
    }

    /// `SET <name>=<value>` (module notes).
    pub(super) fn set_param(
        &mut self,
        client: NodeId,
        name: &str,
        value: &str,
        nodes: &BTreeMap<NodeId, NodeEntry>,
    ) -> Result<Option<String>> {
        use crate::config::{ParamValue, Section, lookup_param_in};
        let spec = lookup_param_in(Section::Ndbd, name);
        let show = |v: Option<&ParamValue>| match (spec, v) {
            (Some(s), Some(v)) => s.format_value(v),
            _ => "(not set)".to_string(),
        };
        let old = show(self.cfg.data_nodes.first().and_then(|n| n.get(name)));
        let restart = self
            .cfg
            .set_data_node_param(name, value)
            .map_err(crate::error::codes::bad_config)?;
        let new = show(self.cfg.data_nodes.first().and_then(|n| n.get(name)));
        self.config_text = self.cfg.to_ini();
        let pname = spec.map_or(name, |s| s.name);
        let ids: Vec<NodeId> = nodes.keys().copied().collect();
        let what = format!(
            "{pname} changed from {old} to {new} for data nodes {}",
            super::super::qmgr::join(&ids)
        );
        self.commands.generation += 1;
        self.log(
            Severity::Info,
            self.me,
            &format!(
                "Config change completed! New generation: {} ({what}; {})",
                self.commands.generation,
                restart.describe()
            ),
        );
        if crate::mgm::applied_at_once(pname) {
            let finish = Finish::Set {
                what,
                effect: crate::mgm::set_effect_now(pname, restart),
                targets: ids.clone(),
            };
            return self.ask_nodes(client, &format!("SET {pname}={value}"), &ids, nodes, finish);
        }
        Ok(Some(format!(
            "{what}: each data node takes it when it next starts and fetches the \
             configuration from this management server: ROLLING RESTART applies it one node \
             of each node group at a time, as NDB does (<id> RESTART for one node). The \
             change lasts until this management server stops."
        )))
    }

    /// [`Server::ask_nodes`] answering `answer` once the nodes have.
    pub(super) fn ask_nodes_then(
        &mut self,
        client: NodeId,
        text: &str,
        targets: &[NodeId],
        nodes: &BTreeMap<NodeId, NodeEntry>,
        answer: String,
    ) -> Result<Option<String>> {
        self.ask_nodes(client, text, targets, nodes, Finish::Fixed(answer))
    }

    /// Sends `text` to every target that is connected and has reported a state, and
    /// keeps the request until they answer; answers at once when none is asked.
    fn ask_nodes(
        &mut self,
        client: NodeId,
        text: &str,
        targets: &[NodeId],
        nodes: &BTreeMap<NodeId, NodeEntry>,
        finish: Finish,
    ) -> Result<Option<String>> {
        let asked: BTreeSet<NodeId> = targets
            .iter()
            .copied()
            .filter(|n| {
                nodes
                    .get(n)
                    .is_some_and(|e| e.connected && e.state.is_some())
            })
            .collect();
        let pending = Pending {
            client,
            asked: asked.clone(),
            answers: BTreeMap::new(),
            deadline_ms: self.now_ms() + NODE_COMMAND_TIMEOUT_MS,
            finish,
        };
        if asked.is_empty() {
            return Ok(Some(self.assemble(pending)));
        }
        if self.commands.pending.len() >= MAX_PENDING {
            return Err(mgm_error(format!(
                "{MAX_PENDING} commands already wait for the data nodes' answers; try again in a moment"
            )));
        }
        self.commands.next_req += 1;
        let req = self.commands.next_req;
        for &n in &asked {
            self.transport.send(
                n,
                &Message::NodeCommand {
                    req,
                    text: text.to_string(),
                },
            );
        }
        self.commands.pending.insert(req, pending);
        Ok(None)
    }

    /// A data node's answer to request `req`.
    pub(super) fn on_node_reply(&mut self, from: NodeId, req: u64, ok: bool, text: String) {
        let Some(p) = self.commands.pending.get_mut(&req) else {
            return; // answered already (timed out)
        };
        if !p.asked.contains(&from) {
            return;
        }
        p.answers
            .insert(from, if ok { Ok(text) } else { Err(text) });
        if p.answers.len() == p.asked.len() {
            self.complete(req);
        }
    }

    /// Node `node`'s connection closed: it will not answer.
    pub(super) fn on_node_gone(&mut self, node: NodeId) {
        let done: Vec<u64> = self
            .commands
            .pending
            .iter_mut()
            .filter(|(_, p)| p.asked.contains(&node) && !p.answers.contains_key(&node))
            .map(|(&req, p)| {
                p.answers.insert(
                    node,
                    Err("the connection to it closed before it answered".into()),
                );
                (req, p.answers.len() == p.asked.len())
            })
            .filter(|&(_, done)| done)
            .map(|(req, _)| req)
            .collect();
        for req in done {
            self.complete(req);
        }
    }

    /// Answers the requests whose time is up.
    pub(super) fn expire_node_commands(&mut self) {
        let now = self.now_ms();
        let due: Vec<u64> = self
            .commands
            .pending
            .iter()
            .filter(|(_, p)| p.deadline_ms <= now)
            .map(|(&req, _)| req)
            .collect();
        for req in due {
            self.complete(req);
        }
    }

    fn complete(&mut self, req: u64) {
        let Some(p) = self.commands.pending.remove(&req) else {
            return;
        };
        let client = p.client;
        let text = self.assemble(p);
        self.transport
            .send(client, &Message::MgmReply { ok: true, text });
    }

    /// The answer's text (module notes).
    fn assemble(&self, p: Pending) -> String {
        let missing = |n: NodeId| {
            if p.asked.contains(&n) {
                format!("Node {n}: no answer within {NODE_COMMAND_TIMEOUT_MS} ms")
            } else {
                format!("Node {n}: not connected")
            }
        };
        match p.finish {
            Finish::Fixed(text) => {
                let mut out = vec![text];
                for &n in &p.asked {
                    match p.answers.get(&n) {
                        Some(Ok(_)) => {}
                        Some(Err(why)) => out.push(format!("Node {n}: {why}")),
                        None => out.push(missing(n)),
                    }
                }
                out.join("\n")
            }
            Finish::Lines {
                targets,
                header,
                log,
            } => {
                let mut out = header;
                for n in targets {
                    match p.answers.get(&n) {
                        Some(Ok(text)) => {
                            for line in text.lines() {
                                if log {
                                    let (node, t) = split_node(line);
                                    self.log(Severity::Info, if node == 0 { n } else { node }, t);
                                }
                                out.push(line.to_string());
                            }
                        }
                        Some(Err(why)) => out.push(format!("Node {n}: {why}")),
                        None => out.push(missing(n)),
                    }
                }
                out.join("\n")
            }
            Finish::Set {
                what,
                effect,
                targets,
            } => {
                let mut applied = Vec::new();
                let mut notes = Vec::new();
                for n in targets {
                    match p.answers.get(&n) {
                        Some(Ok(_)) => applied.push(n),
                        Some(Err(why)) => notes.push(format!("node {n} did not apply it: {why}")),
                        None if p.asked.contains(&n) => notes.push(format!(
                            "node {n} did not answer within {NODE_COMMAND_TIMEOUT_MS} ms"
                        )),
                        None => notes.push(format!(
                            "node {n} is not connected and takes it when it starts"
                        )),
                    }
                }
                let mut text = if applied.is_empty() {
                    format!("{what}: no running data node has applied it yet")
                } else if notes.is_empty() {
                    // Every data node took it: the embedded cluster's words.
                    format!("{what}: {effect}")
                } else {
                    format!(
                        "{what}: {effect} on data node(s) {}",
                        super::super::qmgr::join(&applied)
                    )
                };
                if !notes.is_empty() {
                    text.push_str("; ");
                    text.push_str(&notes.join("; "));
                }
                text
            }
        }
    }
}
