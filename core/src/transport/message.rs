//! The messages nodes exchange, and their payloads (field by field in
//! `docs/wire-format.md`). One enum for every block, so that one transport and one
//! simulator carry them all; each variant is encoded by [`Message::encode`] and decoded
//! by [`Message::decode`], which rejects a payload with fields missing or left over.

use super::NodeId;
use super::frame::{Dec, Enc, WireError, encode_frame};

/// A membership view: the data nodes running the cluster, each with its dynamic id
/// (order of joining: the lowest is the oldest node, the president), sorted by node id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct View {
    pub id: u64,
    /// The arbitration ticket of the round this view opens, chosen by its president
    /// (random per proposal): what its members present to the arbitrator if they lose
    /// contact with each other.
    pub ticket: u64,
    /// (node id, dynamic id), sorted by node id, node ids unique.
    pub members: Vec<(NodeId, u32)>,
}

impl View {
    pub fn contains(&self, n: NodeId) -> bool {
        self.members.binary_search_by_key(&n, |m| m.0).is_ok()
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.members.iter().map(|m| m.0).collect()
    }

    /// The oldest member (lowest dynamic id): the president.
    pub fn president(&self) -> Option<NodeId> {
        self.members.iter().min_by_key(|m| (m.1, m.0)).map(|m| m.0)
    }

    pub fn dynamic_id(&self, n: NodeId) -> Option<u32> {
        self.members
            .binary_search_by_key(&n, |m| m.0)
            .ok()
            .map(|i| self.members[i].1)
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.id);
        e.u64(self.ticket);
        e.u32(self.members.len() as u32);
        for &(n, d) in &self.members {
            e.u32(n);
            e.u32(d);
        }
    }

    fn decode(d: &mut Dec<'_>) -> Result<View, WireError> {
        let id = d.u64("view id")?;
        let ticket = d.u64("ticket")?;
        let n = d.u32("member count")? as usize;
        if n > 255 {
            return Err(WireError::BadValue("member count"));
        }
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            members.push((d.u32("member")?, d.u32("dynamic id")?));
        }
        if !members.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err(WireError::BadValue("members (not sorted by node id)"));
        }
        Ok(View {
            id,
            ticket,
            members,
        })
    }
}

/// What a node is, told at `Hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    DataNode = 1,
    Management = 2,
    Api = 3,
}

impl Role {
    fn from_u8(v: u8) -> Result<Role, WireError> {
        Ok(match v {
            1 => Role::DataNode,
            2 => Role::Management,
            3 => Role::Api,
            _ => return Err(WireError::BadValue("role")),
        })
    }
}

/// Why a proposed view was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum NackReason {
    /// The receiver is at another view id than the proposal expects.
    WrongViewId = 1,
    /// The receiver's president is older than the proposer and alive to it.
    NotPresident = 2,
    /// The receiver holds a lock for this view id from another proposer (`other`).
    Locked = 3,
    /// The receiver is not a member the proposal may name.
    NotMember = 4,
}

impl NackReason {
    fn from_u8(v: u8) -> Result<NackReason, WireError> {
        Ok(match v {
            1 => NackReason::WrongViewId,
            2 => NackReason::NotPresident,
            3 => NackReason::Locked,
            4 => NackReason::NotMember,
            _ => return Err(WireError::BadValue("nack reason")),
        })
    }
}

/// A data node's state, as the management server shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum NodeState {
    /// Running its start phases (the last one completed is reported beside).
    Starting = 1,
    Started = 2,
    Stopping = 3,
    /// Stopped after a failure or an arbitration loss (the reason went to the log).
    Stopped = 4,
    /// Started with `--nostart` (or restarted with `-n`): waits for START.
    NotStarted = 5,
}

impl NodeState {
    pub fn from_u8(v: u8) -> Result<NodeState, WireError> {
        Ok(match v {
            1 => NodeState::Starting,
            2 => NodeState::Started,
            3 => NodeState::Stopping,
            4 => NodeState::Stopped,
            5 => NodeState::NotStarted,
            _ => return Err(WireError::BadValue("node state")),
        })
    }
}

/// Every message of every block.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// First frame on a connection, both ways: who is at this end.
    Hello {
        node_id: NodeId,
        role: Role,
    },
    /// A data node asks the management server for its configuration (`node_id` 0: the
    /// first free `[ndbd]` slot whose HostName is `host`). `token` (0: none) is the
    /// process's own random number: the node that holds `node_id` may ask again with
    /// it (a restart inside the process) while its connection is up.
    ConfigReq {
        node_id: NodeId,
        host: String,
        token: u64,
    },
    /// The whole config.ini and the node id it was given.
    ConfigConf {
        node_id: NodeId,
        config_text: String,
    },
    ConfigRef {
        code: u32,
        message: String,
    },
    /// Data node → management server, before it starts its local engine: what its
    /// file system holds (`docs/cluster.md` §6, system restart): the checkpoints its
    /// system file has saved, and the checkpoint from which its rows are complete
    /// (u32::MAX: a copy from a peer never finished).
    StartPlanReq {
        node_id: u32,
        saved: Vec<u32>,
        complete_from: u32,
    },
    /// The answer: `action` 0 = wait and ask again, 1 = fresh start (nothing on disk
    /// anywhere), 2 = system restart to `restore_gci` (with `ready`: the nodes that
    /// restore it; the others copy from them), 3 = node restart (the cluster runs:
    /// copy from a peer). `lineage`: for actions 1 and 2, the new id of the cluster's
    /// history that the nodes write into their complete-from marks (0 otherwise).
    StartPlanConf {
        action: u8,
        restore_gci: u32,
        ready: Vec<u32>,
        lineage: u64,
    },
    /// Membership heartbeat (`view_id` the sender's installed view, 0 before joining).
    Heartbeat {
        view_id: u64,
    },
    /// A starting node asks to be admitted (`incarnation` grows with every start of
    /// the node process, so a restarted node is not mistaken for its earlier life).
    JoinReq {
        incarnation: u64,
    },
    /// Phase 1 of a view change: `view` would replace view `view.id - 1`; `failed` are
    /// the members it leaves out because the proposer lost them. `attempt` grows with
    /// each proposal a proposer makes for the same view id (a newer one replaces its
    /// older one wherever it is locked).
    ViewPrepare {
        view: View,
        failed: Vec<NodeId>,
        attempt: u32,
    },
    ViewAck {
        view_id: u64,
        proposer: NodeId,
        attempt: u32,
    },
    /// Refusal; with `Locked`, `other` is the proposer whose proposal the receiver
    /// holds, and `locked` its view (which a successor of a dead proposer adopts).
    ViewNack {
        view_id: u64,
        proposer: NodeId,
        attempt: u32,
        reason: NackReason,
        other: NodeId,
        locked: View,
    },
    /// A node held by the lock of this proposal asks its proposer whether it still
    /// runs (the proposer answers `ViewAbort` when it does not: an abort that was lost).
    LockQuery {
        view_id: u64,
        attempt: u32,
    },
    /// The proposer gives up its proposal for `view_id`: locks on it are released.
    ViewAbort {
        view_id: u64,
        proposer: NodeId,
        attempt: u32,
    },
    /// Phase 2: every member of `view` acknowledged it; install it.
    ViewCommit {
        view: View,
    },
    /// To a node that is not a member of the sender's view `view_id` (a node declared
    /// dead that still beats): it must shut down.
    NotMember {
        view_id: u64,
    },
    /// A data node stopping gracefully (STOP, RESTART) tells the other members of its
    /// view `view_id`, before its connections close: its departure is planned, not a
    /// failure to arbitrate over (NDB's graceful stop, STOP_REQ). `cluster_stop`: it
    /// stops because the whole cluster does (SHUTDOWN, ALL STOP, ALL RESTART): the
    /// others are told to stop too, and take no departure for a failure meanwhile.
    Leaving {
        view_id: u64,
        cluster_stop: bool,
    },
    /// A data node tells an API node (a client) the view it installed, when it installs
    /// it (before anything commits in it) and when the API node connects: NDB's
    /// NODE_FAILREP to API nodes. The client stops sending to nodes a newer view left
    /// out (a node declared dead may still answer from stale replicas).
    ViewRep {
        view: View,
    },
    /// A president whose side may be one half of a split of the view with this
    /// ticket asks to continue with `members` as view `view_id`.
    ArbitReq {
        ticket: u64,
        view_id: u64,
        members: Vec<NodeId>,
    },
    /// The arbitrator's answer: this side continues.
    ArbitConf {
        ticket: u64,
        view_id: u64,
    },
    /// The arbitrator's answer: this side loses (NDB's arbitration code, e.g. 47
    /// LoseChoose: another side was chosen).
    ArbitRef {
        ticket: u64,
        view_id: u64,
        code: u32,
    },
    /// A data node's state for the management server; `listen` is where its
    /// transporter accepts connections (host:port).
    NodeStatus {
        state: NodeState,
        start_phase: u8,
        node_group: u32,
        listen: String,
        view: View,
    },
    /// The management server tells the data nodes where each of them listens.
    NodeAddresses {
        nodes: Vec<(NodeId, String)>,
    },
    /// A cluster log line from a node (`severity` as in `mgm::log::Severity`).
    Event {
        severity: u8,
        text: String,
    },
    /// A shell command for the management server, and its answer.
    MgmCommand {
        text: String,
    },
    MgmReply {
        ok: bool,
        text: String,
    },
    /// The management server asks a data node to run a management command on its own
    /// replicas (`REPORT ...`, `DUMP 1000`, `SET <param>=<value>`: `cluster::mgmd_node`),
    /// and the node's answer: its own output lines, or the error's text.
    NodeCommand {
        req: u64,
        text: String,
    },
    NodeCommandReply {
        req: u64,
        ok: bool,
        text: String,
    },
    /// An API client asks the management server for an API node id (`node_id` 0: the
    /// first free `[api]`/`[mysqld]` slot whose HostName matches `host`), held while
    /// this connection stays open; the answer's `node_id` 0 means no slot is free.
    ApiRegReq {
        node_id: u32,
        host: String,
    },
    ApiRegConf {
        node_id: u32,
    },
    /// The data path (frame kinds 100..=159, `transport::data`).
    Data(super::data::DataMsg),
    /// The data path between data nodes: `msg` sent by a node whose installed view was
    /// `view_id` (0: none). The receiver drops what was sent before the view that
    /// admitted its own life (it was meant for an earlier life of the receiver, sent
    /// by a peer that had not yet seen it restart) and holds what was sent in a view
    /// newer than its own until it installs that view (`cluster/datapath`).
    DataInView {
        view_id: u64,
        msg: super::data::DataMsg,
    },
}

/// Message kinds on the wire.
mod kind {
    pub const HELLO: u16 = 1;
    pub const CONFIG_REQ: u16 = 10;
    pub const CONFIG_CONF: u16 = 11;
    pub const CONFIG_REF: u16 = 12;
    pub const START_PLAN_REQ: u16 = 13;
    pub const START_PLAN_CONF: u16 = 14;
    pub const API_REG_REQ: u16 = 15;
    pub const API_REG_CONF: u16 = 16;
    pub const HEARTBEAT: u16 = 20;
    pub const JOIN_REQ: u16 = 21;
    pub const VIEW_PREPARE: u16 = 22;
    pub const VIEW_ACK: u16 = 23;
    pub const VIEW_NACK: u16 = 24;
    pub const VIEW_ABORT: u16 = 25;
    pub const VIEW_COMMIT: u16 = 26;
    pub const NOT_MEMBER: u16 = 27;
    pub const LOCK_QUERY: u16 = 28;
    pub const VIEW_REP: u16 = 29;
    pub const LEAVING: u16 = 30;
    pub const ARBIT_REQ: u16 = 31;
    pub const ARBIT_CONF: u16 = 32;
    pub const ARBIT_REF: u16 = 33;
    pub const NODE_STATUS: u16 = 40;
    pub const EVENT: u16 = 41;
    pub const NODE_ADDRESSES: u16 = 42;
    pub const MGM_COMMAND: u16 = 50;
    pub const MGM_REPLY: u16 = 51;
    pub const NODE_COMMAND: u16 = 52;
    pub const NODE_COMMAND_REPLY: u16 = 53;
    pub const DATA_IN_VIEW: u16 = 60;
}

impl Message {
    pub fn kind(&self) -> u16 {
        use kind::*;
        match self {
            Message::Hello { .. } => HELLO,
            Message::ConfigReq { .. } => CONFIG_REQ,
            Message::ConfigConf { .. } => CONFIG_CONF,
            Message::ConfigRef { .. } => CONFIG_REF,
            Message::StartPlanReq { .. } => START_PLAN_REQ,
            Message::StartPlanConf { .. } => START_PLAN_CONF,
            Message::Heartbeat { .. } => HEARTBEAT,
            Message::JoinReq { .. } => JOIN_REQ,
            Message::ViewPrepare { .. } => VIEW_PREPARE,
            Message::ViewAck { .. } => VIEW_ACK,
            Message::ViewNack { .. } => VIEW_NACK,
            Message::ViewAbort { .. } => VIEW_ABORT,
            Message::LockQuery { .. } => LOCK_QUERY,
            Message::ViewCommit { .. } => VIEW_COMMIT,
            Message::NotMember { .. } => NOT_MEMBER,
            Message::ViewRep { .. } => VIEW_REP,
            Message::Leaving { .. } => LEAVING,
            Message::ArbitReq { .. } => ARBIT_REQ,
            Message::ArbitConf { .. } => ARBIT_CONF,
            Message::ArbitRef { .. } => ARBIT_REF,
            Message::NodeStatus { .. } => NODE_STATUS,
            Message::NodeAddresses { .. } => NODE_ADDRESSES,
            Message::Event { .. } => EVENT,
            Message::MgmCommand { .. } => MGM_COMMAND,
            Message::MgmReply { .. } => MGM_REPLY,
            Message::NodeCommand { .. } => NODE_COMMAND,
            Message::NodeCommandReply { .. } => NODE_COMMAND_REPLY,
            Message::ApiRegReq { .. } => API_REG_REQ,
            Message::ApiRegConf { .. } => API_REG_CONF,
            Message::Data(d) => d.kind(),
            Message::DataInView { .. } => DATA_IN_VIEW,
        }
    }

    /// Appends this message as one frame.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        encode_frame(out, self.kind(), |e| self.encode_body(e))
    }

    fn encode_body(&self, e: &mut Enc<'_>) {
        match self {
            Message::Hello { node_id, role } => {
                e.u32(*node_id);
                e.u8(*role as u8);
            }
            Message::ConfigReq {
                node_id,
                host,
                token,
            } => {
                e.u32(*node_id);
                e.str(host);
                e.u64(*token);
            }
            Message::ConfigConf {
                node_id,
                config_text,
            } => {
                e.u32(*node_id);
                e.str(config_text);
            }
            Message::ConfigRef { code, message } => {
                e.u32(*code);
                e.str(message);
            }
            Message::StartPlanReq {
                node_id,
                saved,
                complete_from,
            } => {
                e.u32(*node_id);
                e.u32s(saved);
                e.u32(*complete_from);
            }
            Message::StartPlanConf {
                action,
                restore_gci,
                ready,
                lineage,
            } => {
                e.u8(*action);
                e.u32(*restore_gci);
                e.u64(*lineage);
                e.u32s(ready);
            }
            Message::Heartbeat { view_id } => e.u64(*view_id),
            Message::JoinReq { incarnation } => e.u64(*incarnation),
            Message::ViewPrepare {
                view,
                failed,
                attempt,
            } => {
                view.encode(e);
                e.u32s(failed);
                e.u32(*attempt);
            }
            Message::ViewAck {
                view_id,
                proposer,
                attempt,
            }
            | Message::ViewAbort {
                view_id,
                proposer,
                attempt,
            } => {
                e.u64(*view_id);
                e.u32(*proposer);
                e.u32(*attempt);
            }
            Message::ViewNack {
                view_id,
                proposer,
                attempt,
                reason,
                other,
                locked,
            } => {
                e.u64(*view_id);
                e.u32(*proposer);
                e.u32(*attempt);
                e.u8(*reason as u8);
                e.u32(*other);
                locked.encode(e);
            }
            Message::ViewCommit { view } => view.encode(e),
            Message::LockQuery { view_id, attempt } => {
                e.u64(*view_id);
                e.u32(*attempt);
            }
            Message::NotMember { view_id } => e.u64(*view_id),
            Message::Leaving {
                view_id,
                cluster_stop,
            } => {
                e.u64(*view_id);
                e.u8(u8::from(*cluster_stop));
            }
            Message::ViewRep { view } => view.encode(e),
            Message::ArbitReq {
                ticket,
                view_id,
                members,
            } => {
                e.u64(*ticket);
                e.u64(*view_id);
                e.u32s(members);
            }
            Message::ArbitConf { ticket, view_id } => {
                e.u64(*ticket);
                e.u64(*view_id);
            }
            Message::ArbitRef {
                ticket,
                view_id,
                code,
            } => {
                e.u64(*ticket);
                e.u64(*view_id);
                e.u32(*code);
            }
            Message::NodeStatus {
                state,
                start_phase,
                node_group,
                listen,
                view,
            } => {
                e.u8(*state as u8);
                e.u8(*start_phase);
                e.u32(*node_group);
                e.str(listen);
                view.encode(e);
            }
            Message::NodeAddresses { nodes } => {
                e.u32(nodes.len() as u32);
                for (n, a) in nodes {
                    e.u32(*n);
                    e.str(a);
                }
            }
            Message::Event { severity, text } => {
                e.u8(*severity);
                e.str(text);
            }
            Message::MgmCommand { text } => e.str(text),
            Message::MgmReply { ok, text } => {
                e.bool(*ok);
                e.str(text);
            }
            Message::NodeCommand { req, text } => {
                e.u64(*req);
                e.str(text);
            }
            Message::NodeCommandReply { req, ok, text } => {
                e.u64(*req);
                e.bool(*ok);
                e.str(text);
            }
            Message::ApiRegReq { node_id, host } => {
                e.u32(*node_id);
                e.str(host);
            }
            Message::ApiRegConf { node_id } => e.u32(*node_id),
            Message::Data(d) => e.raw(&d.encode_body()),
            Message::DataInView { view_id, msg } => {
                e.u64(*view_id);
                e.u16(msg.kind());
                e.raw(&msg.encode_body());
            }
        }
    }

    /// Decodes the payload of a frame of `kind` (its checksum already verified).
    pub fn decode(kind: u16, payload: &[u8]) -> Result<Message, WireError> {
        use kind::*;
        if super::data::KINDS.contains(&kind) {
            return super::data::DataMsg::decode(kind, payload).map(Message::Data);
        }
        if kind == DATA_IN_VIEW {
            let mut d = Dec::new(payload);
            let view_id = d.u64("view id")?;
            let inner = d.u16("data kind")?;
            if !super::data::KINDS.contains(&inner) {
                return Err(WireError::BadValue("data kind"));
            }
            let msg = super::data::DataMsg::decode(inner, d.rest())?;
            return Ok(Message::DataInView { view_id, msg });
        }
        let mut d = Dec::new(payload);
        let m = match kind {
            HELLO => Message::Hello {
                node_id: d.u32("node id")?,
                role: Role::from_u8(d.u8("role")?)?,
            },
            CONFIG_REQ => Message::ConfigReq {
                node_id: d.u32("node id")?,
                host: d.str("host")?,
                token: d.u64("token")?,
            },
            CONFIG_CONF => Message::ConfigConf {
                node_id: d.u32("node id")?,
                config_text: d.str("configuration")?,
            },
            CONFIG_REF => Message::ConfigRef {
                code: d.u32("code")?,
                message: d.str("message")?,
            },
            START_PLAN_REQ => Message::StartPlanReq {
                node_id: d.u32("node id")?,
                saved: d.u32s("saved checkpoints")?,
                complete_from: d.u32("complete from")?,
            },
            START_PLAN_CONF => Message::StartPlanConf {
                action: d.u8("start action")?,
                restore_gci: d.u32("restore GCI")?,
                lineage: d.u64("lineage")?,
                ready: d.u32s("ready nodes")?,
            },
            HEARTBEAT => Message::Heartbeat {
                view_id: d.u64("view id")?,
            },
            JOIN_REQ => Message::JoinReq {
                incarnation: d.u64("incarnation")?,
            },
            VIEW_PREPARE => Message::ViewPrepare {
                view: View::decode(&mut d)?,
                failed: d.u32s("failed nodes")?,
                attempt: d.u32("attempt")?,
            },
            VIEW_ACK => Message::ViewAck {
                view_id: d.u64("view id")?,
                proposer: d.u32("proposer")?,
                attempt: d.u32("attempt")?,
            },
            VIEW_NACK => Message::ViewNack {
                view_id: d.u64("view id")?,
                proposer: d.u32("proposer")?,
                attempt: d.u32("attempt")?,
                reason: NackReason::from_u8(d.u8("reason")?)?,
                other: d.u32("other proposer")?,
                locked: View::decode(&mut d)?,
            },
            VIEW_ABORT => Message::ViewAbort {
                view_id: d.u64("view id")?,
                proposer: d.u32("proposer")?,
                attempt: d.u32("attempt")?,
            },
            VIEW_COMMIT => Message::ViewCommit {
                view: View::decode(&mut d)?,
            },
            LOCK_QUERY => Message::LockQuery {
                view_id: d.u64("view id")?,
                attempt: d.u32("attempt")?,
            },
            NOT_MEMBER => Message::NotMember {
                view_id: d.u64("view id")?,
            },
            LEAVING => Message::Leaving {
                view_id: d.u64("view id")?,
                cluster_stop: match d.u8("cluster stop")? {
                    0 => false,
                    1 => true,
                    _ => return Err(WireError::BadValue("cluster stop")),
                },
            },
            VIEW_REP => Message::ViewRep {
                view: View::decode(&mut d)?,
            },
            ARBIT_REQ => Message::ArbitReq {
                ticket: d.u64("ticket")?,
                view_id: d.u64("view id")?,
                members: d.u32s("members")?,
            },
            ARBIT_CONF => Message::ArbitConf {
                ticket: d.u64("ticket")?,
                view_id: d.u64("view id")?,
            },
            ARBIT_REF => Message::ArbitRef {
                ticket: d.u64("ticket")?,
                view_id: d.u64("view id")?,
                code: d.u32("code")?,
            },
            NODE_STATUS => Message::NodeStatus {
                state: NodeState::from_u8(d.u8("state")?)?,
                start_phase: d.u8("start phase")?,
                node_group: d.u32("node group")?,
                listen: d.str("listen address")?,
                view: View::decode(&mut d)?,
            },
            NODE_ADDRESSES => {
                let n = d.u32("node count")? as usize;
                if n > 255 {
                    return Err(WireError::BadValue("node count"));
                }
                let mut nodes = Vec::with_capacity(n);
                for _ in 0..n {
                    nodes.push((d.u32("node id")?, d.str("address")?));
                }
                Message::NodeAddresses { nodes }
            }
            EVENT => Message::Event {
                severity: d.u8("severity")?,
                text: d.str("text")?,
            },
            MGM_COMMAND => Message::MgmCommand {
                text: d.str("command")?,
            },
            MGM_REPLY => Message::MgmReply {
                ok: d.bool("ok")?,
                text: d.str("reply")?,
            },
            NODE_COMMAND => Message::NodeCommand {
                req: d.u64("request id")?,
                text: d.str("command")?,
            },
            NODE_COMMAND_REPLY => Message::NodeCommandReply {
                req: d.u64("request id")?,
                ok: d.bool("ok")?,
                text: d.str("reply")?,
            },
            API_REG_REQ => Message::ApiRegReq {
                node_id: d.u32("node id")?,
                host: d.str("host")?,
            },
            API_REG_CONF => Message::ApiRegConf {
                node_id: d.u32("node id")?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        d.finish()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::frame::{FRAME_HEADER_BYTES, FrameHeader, verify_payload};

    fn view() -> View {
        View {
            id: 7,
            ticket: 0x1234_5678_9abc,
            members: vec![(2, 1), (3, 2), (5, 4)],
        }
    }

    fn every_message() -> Vec<Message> {
        vec![
            Message::Hello {
                node_id: 2,
                role: Role::DataNode,
            },
            Message::ConfigReq {
                node_id: 0,
                host: "127.0.0.1".into(),
                token: 0x1234_5678_9abc_def0,
            },
            Message::ConfigConf {
                node_id: 3,
                config_text: "[ndbd default]\nNoOfReplicas=2\n".into(),
            },
            Message::ConfigRef {
                code: 1025,
                message: "no free node id".into(),
            },
            Message::StartPlanReq {
                node_id: 2,
                saved: vec![7, 8, 9],
                complete_from: 3,
            },
            Message::StartPlanConf {
                action: 2,
                restore_gci: 9,
                ready: vec![2, 3],
                lineage: 0x1234_5678_9abc_def0,
            },
            Message::Heartbeat { view_id: 9 },
            Message::JoinReq { incarnation: 3 },
            Message::ViewPrepare {
                view: view(),
                failed: vec![4],
                attempt: 2,
            },
            Message::ViewAck {
                view_id: 7,
                proposer: 2,
                attempt: 1,
            },
            Message::ViewNack {
                view_id: 7,
                proposer: 3,
                attempt: 1,
                reason: NackReason::Locked,
                other: 2,
                locked: view(),
            },
            Message::ViewAbort {
                view_id: 7,
                proposer: 3,
                attempt: 4,
            },
            Message::ViewCommit { view: view() },
            Message::LockQuery {
                view_id: 7,
                attempt: 3,
            },
            Message::NotMember { view_id: 8 },
            Message::Leaving {
                view_id: 9,
                cluster_stop: false,
            },
            Message::Leaving {
                view_id: 9,
                cluster_stop: true,
            },
            Message::ViewRep { view: view() },
            Message::ArbitReq {
                ticket: 1,
                view_id: 8,
                members: vec![2, 4],
            },
            Message::ArbitConf {
                ticket: 1,
                view_id: 8,
            },
            Message::ArbitRef {
                ticket: 1,
                view_id: 8,
                code: 47,
            },
            Message::NodeStatus {
                state: NodeState::Starting,
                start_phase: 4,
                node_group: 1,
                listen: "127.0.0.1:41001".into(),
                view: view(),
            },
            Message::NodeAddresses {
                nodes: vec![(2, "127.0.0.1:41001".into()), (3, "h:2".into())],
            },
            Message::Event {
                severity: 2,
                text: "Node 3: Node 2 Connected".into(),
            },
            Message::MgmCommand {
                text: "ALL STATUS".into(),
            },
            Message::MgmReply {
                ok: true,
                text: "Node 2: started".into(),
            },
            Message::NodeCommand {
                req: 7,
                text: "ALL REPORT MemoryUsage".into(),
            },
            Message::NodeCommandReply {
                req: 7,
                ok: true,
                text: "Node 2: Data usage is 1%(3 32K pages of total 256)".into(),
            },
            Message::ApiRegReq {
                node_id: 0,
                host: "127.0.0.1".into(),
            },
            Message::ApiRegConf { node_id: 4 },
            Message::DataInView {
                view_id: 7,
                msg: crate::transport::data::DataMsg::NodeReady { node: 3, seq: 5 },
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in every_message() {
            let mut out = Vec::new();
            m.encode(&mut out).expect("encode");
            let mut h = [0u8; FRAME_HEADER_BYTES];
            h.copy_from_slice(&out[..FRAME_HEADER_BYTES]);
            let hdr = FrameHeader::parse(&h).expect("header");
            let payload = &out[FRAME_HEADER_BYTES..];
            verify_payload(&h, &hdr, payload).expect("crc");
            assert_eq!(Message::decode(hdr.kind, payload).expect("decode"), m);
        }
    }

    #[test]
    fn truncated_and_padded_payloads_are_rejected() {
        for m in every_message() {
            let mut out = Vec::new();
            m.encode(&mut out).expect("encode");
            let payload = &out[FRAME_HEADER_BYTES..];
            for cut in 0..payload.len() {
                assert!(
                    Message::decode(m.kind(), &payload[..cut]).is_err(),
                    "{m:?} cut at {cut} decoded"
                );
            }
            let mut longer = payload.to_vec();
            longer.push(0);
            assert_eq!(
                Message::decode(m.kind(), &longer),
                Err(WireError::Trailing(1))
            );
        }
        assert_eq!(Message::decode(999, &[]), Err(WireError::UnknownKind(999)));
    }

    #[test]
    fn views_must_be_sorted_and_bounded() {
        let mut out = Vec::new();
        Message::ViewCommit {
            view: View {
                id: 1,
                ticket: 0,
                members: vec![(3, 1), (2, 2)],
            },
        }
        .encode(&mut out)
        .expect("encode");
        assert!(Message::decode(kind::VIEW_COMMIT, &out[FRAME_HEADER_BYTES..]).is_err());
        let v = view();
        assert_eq!(v.president(), Some(2));
        assert!(v.contains(5) && !v.contains(4));
        assert_eq!(v.dynamic_id(3), Some(2));
    }
}
