//! Transporters: how messages travel between nodes (NDB's transporter layer).
//!
//! A [`Message`] is encoded as one checksummed frame (`frame`, byte layout in
//! `docs/wire-format.md`). Two carriers, one contract:
//! - [`tcp::TcpTransport`]: one TCP connection per pair of nodes (the lower node id
//!   connects to the higher one's listening address; the management server is always
//!   the listening side), a reader thread per connection that decodes frames into the
//!   node's bounded inbox, a writer thread per connection draining its bounded send buffer;
//!   (or, over [`net::LocalNet`], a pair of connected Unix sockets per pair of nodes
//!   of an in-process cluster: the same code, no port);
//! - the simulator's network (`cluster::sim`): the same messages, delivered by a seeded
//!   event loop that may drop, delay, duplicate and reorder them.
//!
//! The contract the protocol blocks are written against: a message sent may be lost
//! (a connection that is down drops it, and a broken connection loses what was in
//! flight), but is never corrupted (checksums) and never duplicated by TCP; messages
//! between two nodes over one connection arrive in order. Blocks repeat what they need
//! (heartbeats, proposals) rather than relying on delivery.
//!
//! Limits: a frame's payload is at most `frame::MAX_PAYLOAD_BYTES`; a node's inbox holds
//! at most [`INBOX_CAPACITY`] messages (a reader blocks when it is full: back-pressure
//! on the sending peer through TCP); a connection's unsent bytes are bounded by its
//! send buffer (`send_buffer`), so a node's loop never waits on a peer.

pub mod data;
pub mod data_scan;
pub(crate) mod data_sql;
pub mod frame;
pub mod message;
pub mod net;
pub mod send_buffer;
pub mod tcp;

pub use frame::WireError;
pub use message::{Message, NackReason, NodeState, Role, View};

/// A node id of the configuration (`[ndbd]`, `[ndb_mgmd]`, `[api]` sections: 1..255).
pub type NodeId = u32;

/// Messages waiting in a node's inbox, at most.
pub const INBOX_CAPACITY: usize = 4096;

/// What a node's loop receives from its transport.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message {
        from: NodeId,
        msg: Message,
    },
    /// A connection to `peer` is up (its `Hello` arrived).
    Connected {
        peer: NodeId,
        role: Role,
    },
    /// The connection to `peer` is gone (closed, broken, or a corrupt frame).
    Disconnected {
        peer: NodeId,
        reason: String,
    },
}

/// Sends messages to other nodes. `send` never blocks on the network for long and
/// reports whether the message was handed to a live connection (false: dropped).
pub trait Transport: Send + Sync {
    fn send(&self, to: NodeId, msg: &Message) -> bool;

    /// Whether the connection to `to` has so much unsent that new work answering or
    /// forwarding over it is refused (1218; `send_buffer`). Carriers without send
    /// buffers are never overloaded.
    fn overloaded(&self, _to: NodeId) -> bool {
        false
    }
}
