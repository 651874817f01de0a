//! The stream transporter: one connection per pair of nodes, frames over it. The
//! connections are TCP, or socket pairs of an in-process network (`net::LocalNet`, the
//! embedded distributed cluster's); everything below holds for both.
//!
//! A connection starts with a `Hello` each way (who is at each end; read within
//! [`HANDSHAKE_TIMEOUT`]). The side with the lower node id dials (a data node dials
//! the management server and the data nodes above it; the others dial it); a dialer
//! thread per peer keeps the connection up, retrying every [`REDIAL_INTERVAL`] while
//! the transport is open. A reader thread per connection decodes frames and queues them
//! in the node's inbox (bounded: a full inbox stops the reader, and TCP slows the
//! peer down), or hands them to the owner's handler on that thread
//! ([`TcpTransport::with_handler`]: an API client wakes the waiting caller directly,
//! one thread hand-off less per answer); a frame that fails its checksum or decoding
//! closes the connection.
//! `send` appends the frame to the connection's bounded send buffer (`send_buffer`:
//! never waits on the network, 1218 overload and the ceiling there) and a writer
//! thread per connection writes it out (`TCP_NODELAY`); a failed write closes the
//! connection. An API node's transport waits for room instead (up to
//! [`API_SEND_WAIT`]). Every close is reported to the inbox once as
//! [`Incoming::Disconnected`], with the reason (a full send buffer names itself). A
//! connection from a peer that already has one replaces it: the old one is reported
//! closed, after the last message it delivered and before the new one's `Connected`,
//! as if its end had been read first (a peer restarted in its process can dial again
//! before this side reads the old connection's end).
//! [`TcpTransport::shut`] gives the writers up to [`FLUSH_TIMEOUT`] to write what was
//! sent before it.
//!
//! Lock order: `conns` before a connection's `stream` lock is never needed (send takes
//! the `Arc<Conn>` out of the map, then uses its send buffer); `limits` is a leaf; a
//! connection's `delivering` is taken with no other lock held (its holder may wait for
//! room in the owner's inbox).

use super::frame::{FRAME_HEADER_BYTES, FrameHeader, verify_payload};
use super::net::{Listener, Net, Stream};
use super::send_buffer::{Queued, SendBuffer, SendLimits, SendStats};
use super::{Incoming, Message, NodeId, Role, Transport};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a new connection may take to say who it is.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts to reach a peer that is down.
pub const REDIAL_INTERVAL: Duration = Duration::from_millis(100);
/// How long [`TcpTransport::shut`] lets the writers finish what was sent.
pub const FLUSH_TIMEOUT: Duration = Duration::from_millis(500);
/// How long an API node's send waits for room in a full send buffer.
pub const API_SEND_WAIT: Duration = Duration::from_secs(30);
/// How often a listener looks at the transport's close flag.
const ACCEPT_POLL: Duration = Duration::from_millis(20);

/// A peer that says `Hello` with node id 0 (a configuration fetch, a management
/// client) is registered under an id from here up: ids of the configuration end at 255.
pub const ANONYMOUS_PEER_BASE: NodeId = 1 << 16;

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Writes one message as a frame (`buf` is scratch space, reused).
pub fn write_message(w: &mut impl Write, msg: &Message, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    msg.encode(buf).map_err(invalid)?;
    w.write_all(buf)
}

/// Reads one frame and decodes its message; a bad frame is `InvalidData`.
pub fn read_message(r: &mut impl Read) -> io::Result<Message> {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    r.read_exact(&mut h)?;
    let header = FrameHeader::parse(&h).map_err(invalid)?;
    let mut payload = vec![0u8; header.payload_len];
    r.read_exact(&mut payload)?;
    verify_payload(&h, &header, &payload).map_err(invalid)?;
    Message::decode(header.kind, &payload).map_err(invalid)
}

/// Sends our `Hello` and reads the peer's; returns who the peer is.
fn handshake(stream: &mut Stream, me: NodeId, role: Role) -> io::Result<(NodeId, Role)> {
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut buf = Vec::new();
    write_message(stream, &Message::Hello { node_id: me, role }, &mut buf)?;
    match read_message(stream)? {
        Message::Hello { node_id, role } if node_id != me => {
            stream.set_read_timeout(None)?;
            Ok((node_id, role))
        }
        Message::Hello { node_id, .. } => Err(invalid(format!(
            "the peer says it is node {node_id}, which is this node"
        ))),
        other => Err(invalid(format!(
            "expected Hello, got message kind {}",
            other.kind()
        ))),
    }
}

struct Conn {
    id: u64,
    peer: NodeId,
    /// The peer's address, as the socket has it.
    remote_address: String,
    /// Bytes read from the socket.
    bytes_received: Arc<AtomicU64>,
    /// Used to shut the socket down (the writer thread writes through a clone).
    stream: Mutex<Stream>,
    /// The socket of `stream`, for direct sends (see `send_buffer`).
    fd: std::os::fd::RawFd,
    out: SendBuffer,
    /// Why the connection was closed from this side, if it was.
    close_reason: Mutex<Option<String>>,
    /// A newer connection from the same peer took this one's place (the peer's new
    /// life dialed before this side read the old connection's end).
    replaced: AtomicBool,
    /// Held by the reader while it hands a message to the owner: the new connection's
    /// reader takes it once, after setting `replaced`, so the owner gets every message
    /// of the old connection before the old connection's close and the new one's
    /// `Connected`.
    delivering: Mutex<()>,
}

impl Conn {
    /// Closes the connection from this side for `reason` (the reader reports it).
    fn fail(&self, reason: String) {
        self.close_reason.lock().get_or_insert(reason);
        self.out.close();
        let _ = self.stream.lock().shutdown(Shutdown::Both);
    }
}

/// Send-buffer limits per peer (set once the configuration is known).
type LimitsOf = Box<dyn Fn(NodeId) -> SendLimits + Send + Sync>;

/// Where a transport's events go.
enum Inbox {
    /// Queued for the owner's loop.
    Channel(SyncSender<Incoming>),
    /// Handled on the thread that read them (a connection's reader, or its thread at
    /// its close); the handler must not wait on the owner.
    Handler(Box<dyn Fn(Incoming) + Send + Sync>),
}

impl Inbox {
    /// Delivers `ev`; Err when the owner is gone (its channel dropped).
    fn send(&self, ev: Incoming) -> Result<(), ()> {
        match self {
            Inbox::Channel(tx) => tx.send(ev).map_err(|_| ()),
            Inbox::Handler(f) => {
                f(ev);
                Ok(())
            }
        }
    }
}

struct Inner {
    me: NodeId,
    /// Where the connections are made.
    net: Net,
    role: Role,
    inbox: Inbox,
    conns: Mutex<BTreeMap<NodeId, Arc<Conn>>>,
    dialing: Mutex<BTreeMap<NodeId, SocketAddr>>,
    closed: AtomicBool,
    next_conn: AtomicU64,
    next_anonymous: std::sync::atomic::AtomicU32,
    threads: Mutex<Vec<JoinHandle<()>>>,
    limits: Mutex<Option<LimitsOf>>,
    /// Per peer: connections so far, and the bytes of those that ended.
    history: Mutex<BTreeMap<NodeId, PeerHistory>>,
}

#[derive(Default, Clone, Copy)]
struct PeerHistory {
    connect_count: u64,
    bytes_sent: u64,
    bytes_received: u64,
    overload_count: u64,
}

/// This node's transporter to one peer (ndbinfo.transporters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransporterStat {
    pub peer: NodeId,
    pub connected: bool,
    /// The peer's address while connected (else empty).
    pub remote_address: String,
    /// Over every connection to the peer so far.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connect_count: u64,
    pub overloaded: bool,
    pub overload_count: u64,
}

/// Counts the bytes read through it.
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: io::Read> io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Inner {
    fn limits_of(&self, peer: NodeId) -> SendLimits {
        self.limits
            .lock()
            .as_ref()
            .map_or_else(SendLimits::default, |f| f(peer))
    }
}

/// The TCP transporter of one node (see the module notes).
#[derive(Clone)]
pub struct TcpTransport {
    inner: Arc<Inner>,
}

impl TcpTransport {
    /// A transport for node `me`; what arrives goes to `inbox`.
    pub fn new(me: NodeId, role: Role, inbox: SyncSender<Incoming>) -> TcpTransport {
        TcpTransport::on(Net::Tcp, me, role, inbox)
    }

    /// [`TcpTransport::new`] over `net`.
    pub fn on(net: Net, me: NodeId, role: Role, inbox: SyncSender<Incoming>) -> TcpTransport {
        TcpTransport::with_inbox(net, me, role, Inbox::Channel(inbox))
    }

    /// A transport for node `me` whose events are handled by `handler` on the thread
    /// that read them (see the module notes). Each connection's events come in order
    /// (`Connected`, its messages, `Disconnected`); events of different connections
    /// may be handled at the same time.
    pub fn with_handler(
        net: Net,
        me: NodeId,
        role: Role,
        handler: Box<dyn Fn(Incoming) + Send + Sync>,
    ) -> TcpTransport {
        TcpTransport::with_inbox(net, me, role, Inbox::Handler(handler))
    }

    fn with_inbox(net: Net, me: NodeId, role: Role, inbox: Inbox) -> TcpTransport {
        TcpTransport {
            inner: Arc::new(Inner {
                me,
                net,
                role,
                inbox,
                conns: Mutex::new(BTreeMap::new()),
                dialing: Mutex::new(BTreeMap::new()),
                closed: AtomicBool::new(false),
                next_conn: AtomicU64::new(1),
                next_anonymous: std::sync::atomic::AtomicU32::new(ANONYMOUS_PEER_BASE),
                threads: Mutex::new(Vec::new()),
                limits: Mutex::new(None),
                history: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    pub fn node_id(&self) -> NodeId {
        self.inner.me
    }

    /// Sets each peer's send-buffer limits (from the configuration's `[tcp]`
    /// sections: `ClusterConfig::send_buffer_of`); connections already up take them
    /// at once. Until then every connection has NDB's defaults.
    pub fn set_send_limits(
        &self,
        limits_of: impl Fn(NodeId) -> SendLimits + Send + Sync + 'static,
    ) {
        let conns: Vec<Arc<Conn>> = self.inner.conns.lock().values().cloned().collect();
        for c in &conns {
            c.out.set_limits(limits_of(c.peer));
        }
        *self.inner.limits.lock() = Some(Box::new(limits_of));
    }

    /// The send buffer's counters of the connection to `peer` (None: not connected).
    /// Every peer this transport connected to or dials, with its counters (the
    /// connection's and those of the connections before it).
    pub fn transporters(&self) -> Vec<TransporterStat> {
        let conns = self.inner.conns.lock().clone();
        let history = self.inner.history.lock().clone();
        let dialing: Vec<NodeId> = self.inner.dialing.lock().keys().copied().collect();
        let peers: BTreeSet<NodeId> = conns
            .keys()
            .chain(history.keys())
            .chain(dialing.iter())
            .copied()
            .collect();
        peers
            .into_iter()
            .map(|peer| {
                let h = history.get(&peer).copied().unwrap_or_default();
                let c = conns.get(&peer);
                let st = c.map(|c| c.out.stats()).unwrap_or_default();
                TransporterStat {
                    peer,
                    connected: c.is_some(),
                    remote_address: c.map(|c| c.remote_address.clone()).unwrap_or_default(),
                    bytes_sent: h.bytes_sent + st.bytes_sent,
                    bytes_received: h.bytes_received
                        + c.map_or(0, |c| c.bytes_received.load(Ordering::Relaxed)),
                    connect_count: h.connect_count,
                    overloaded: st.overloaded,
                    overload_count: h.overload_count + st.overload_count,
                }
            })
            .collect()
    }

    pub fn send_stats(&self, peer: NodeId) -> Option<SendStats> {
        let c = self.inner.conns.lock().get(&peer).cloned();
        c.map(|c| c.out.stats())
    }

    /// Accepts connections on `addr` (port 0: any free port); returns the address
    /// bound.
    pub fn listen(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let listener = self.inner.net.listen(addr)?;
        let local = listener.local_addr()?;
        let inner = self.inner.clone();
        let h = std::thread::Builder::new()
            .name(format!("rndb-accept-{}", inner.me))
            .spawn(move || accept_loop(&inner, listener))?;
        self.inner.threads.lock().push(h);
        Ok(local)
    }

    /// Keeps a connection to `peer` at `addr` up from now on (a dialer thread; a new
    /// address for a peer already dialed replaces the old one).
    pub fn dial(&self, peer: NodeId, addr: SocketAddr) -> io::Result<()> {
        let first = self.inner.dialing.lock().insert(peer, addr).is_none();
        if !first {
            return Ok(());
        }
        let inner = self.inner.clone();
        let h = std::thread::Builder::new()
            .name(format!("rndb-dial-{}-{peer}", inner.me))
            .spawn(move || dial_loop(&inner, peer))?;
        self.inner.threads.lock().push(h);
        Ok(())
    }

    /// Whether a connection to `peer` is up.
    pub fn connected(&self, peer: NodeId) -> bool {
        self.inner.conns.lock().contains_key(&peer)
    }

    /// Closes every connection and stops every thread (joined before returning).
    pub fn close(&self) {
        self.shut();
        let threads = std::mem::take(&mut *self.inner.threads.lock());
        for t in threads {
            let _ = t.join();
        }
    }

    /// The first half of [`TcpTransport::close`], which joins nothing: from now no
    /// dialer or listener makes a connection, and every connection is shut down. For
    /// an owner that must empty its inbox (a reader may wait for room in it) before
    /// the threads can be joined.
    pub fn shut(&self) {
        self.inner.closed.store(true, Ordering::Release);
        let conns: Vec<Arc<Conn>> = std::mem::take(&mut *self.inner.conns.lock())
            .into_values()
            .collect();
        // What was sent before the shut goes out first (a leaving node's last words),
        // for at most FLUSH_TIMEOUT in all.
        let deadline = Instant::now() + FLUSH_TIMEOUT;
        for c in &conns {
            c.out.wait_drained(deadline);
        }
        for c in conns {
            c.fail("transport closed".into());
        }
    }

    /// Drops every connection but the one to `keep` (a data node restarting inside its
    /// process: its peers see its earlier life end as they would a process's, and
    /// nothing sent to that life reaches the next; the dialers reconnect).
    pub fn disconnect_all_but(&self, keep: NodeId) {
        let conns: Vec<Arc<Conn>> = self
            .inner
            .conns
            .lock()
            .iter()
            .filter(|(p, _)| **p != keep)
            .map(|(_, c)| c.clone())
            .collect();
        for c in conns {
            c.fail("the node restarts".into());
        }
    }

    /// Drops the connection to `peer` (a test's way to cut a link; the dialer, if
    /// any, reconnects).
    pub fn disconnect(&self, peer: NodeId) {
        let c = self.inner.conns.lock().get(&peer).cloned();
        if let Some(c) = c {
            c.fail("disconnected by this node".into());
        }
    }
}

impl Transport for TcpTransport {
    fn send(&self, to: NodeId, msg: &Message) -> bool {
        let Some(conn) = self.inner.conns.lock().get(&to).cloned() else {
            return false;
        };
        if self.inner.role == Role::Api && !conn.out.wait_for_room(Instant::now() + API_SEND_WAIT) {
            conn.fail(format!(
                "node {to} read nothing for {} s with the send buffer full",
                API_SEND_WAIT.as_secs()
            ));
            return false;
        }
        // A refusal closes the connection; the reader thread sees the shutdown,
        // removes the connection and reports it (never from here: this may be the
        // node's own thread, and the report goes to its inbox).
        let fd = conn.fd;
        let mut write_now = |bytes: &[u8]| -> io::Result<usize> {
            // SAFETY: `fd` is the socket `conn.stream` owns, open while `conn` lives
            // (a shutdown does not close it); `bytes` is a live slice. MSG_DONTWAIT:
            // never waits (see `send_buffer`); MSG_NOSIGNAL: a closed peer is an
            // error, not SIGPIPE.
            let n = unsafe {
                libc::send(
                    fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            }
        };
        match conn.out.push_direct(msg, &mut write_now) {
            Queued::Yes => true,
            Queued::Closed => false,
            Queued::WriteFailed(e) => {
                conn.fail(format!("write failed: {e}"));
                false
            }
            Queued::Full { unsent_bytes } => {
                conn.fail(format!(
                    "send buffer to node {to} full: {unsent_bytes} bytes unsent \
                     (SendBufferMemory={}): the peer is not reading",
                    conn.out.limits().buffer_bytes
                ));
                false
            }
            Queued::Unencodable(e) => {
                conn.fail(format!("a message to node {to} could not be encoded: {e}"));
                false
            }
        }
    }

    fn overloaded(&self, to: NodeId) -> bool {
        let c = self.inner.conns.lock().get(&to).cloned();
        c.is_some_and(|c| c.out.overloaded())
    }
}

/// The writer thread of a connection: writes what `send` queued, batch by batch.
fn write_loop(conn: &Conn, mut w: Stream) {
    let mut batch = Vec::new();
    while conn.out.take(&mut batch) {
        let r = w.write_all(&batch);
        conn.out.written(batch.len());
        if let Err(e) = r {
            conn.fail(format!("write failed: {e}"));
            return;
        }
    }
}

fn accept_loop(inner: &Arc<Inner>, listener: Listener) {
    while !inner.closed.load(Ordering::Acquire) {
        match listener.accept_within(ACCEPT_POLL) {
            Ok(Some(stream)) => {
                let inner2 = inner.clone();
                // The handshake runs on the connection's own thread: a silent client
                // cannot hold up the listener.
                let spawned = std::thread::Builder::new()
                    .name(format!("rndb-conn-{}", inner.me))
                    .spawn(move || run_connection(&inner2, stream));
                if let Ok(h) = spawned {
                    let mut threads = inner.threads.lock();
                    threads.retain(|t| !t.is_finished());
                    threads.push(h);
                }
            }
            Ok(None) => {}
            Err(_) => std::thread::sleep(ACCEPT_POLL),
        }
    }
}

fn dial_loop(inner: &Arc<Inner>, peer: NodeId) {
    while !inner.closed.load(Ordering::Acquire) {
        if !inner.conns.lock().contains_key(&peer) {
            let addr = inner.dialing.lock().get(&peer).copied();
            if let Some(addr) = addr
                && let Ok(stream) = inner.net.connect(addr, HANDSHAKE_TIMEOUT)
            {
                // Runs until the connection ends, then this loop dials again.
                run_connection(inner, stream);
                continue;
            }
        }
        std::thread::sleep(REDIAL_INTERVAL);
    }
}

/// Handshake, register, then read until the connection ends.
fn run_connection(inner: &Arc<Inner>, mut stream: Stream) {
    let _ = stream.set_nodelay();
    let Ok((mut peer, role)) = handshake(&mut stream, inner.me, inner.role) else {
        return;
    };
    if peer == 0 {
        peer = inner.next_anonymous.fetch_add(1, Ordering::Relaxed);
    }
    let (Ok(read_half), Ok(write_half)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let remote_address = stream.peer_description();
    let conn = Arc::new(Conn {
        id: inner.next_conn.fetch_add(1, Ordering::Relaxed),
        peer,
        remote_address,
        bytes_received: Arc::new(AtomicU64::new(0)),
        fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
        stream: Mutex::new(stream),
        out: SendBuffer::new(inner.limits_of(peer)),
        close_reason: Mutex::new(None),
        replaced: AtomicBool::new(false),
        delivering: Mutex::new(()),
    });
    let writer = {
        let conn = conn.clone();
        std::thread::Builder::new()
            .name(format!("rndb-send-{}-{peer}", inner.me))
            .spawn(move || write_loop(&conn, write_half))
    };
    let Ok(writer) = writer else {
        return;
    };
    let reason = read_connection(inner, &conn, role, read_half);
    conn.out.close();
    let _ = conn.stream.lock().shutdown(Shutdown::Both);
    let _ = writer.join();
    let reason = conn.close_reason.lock().take().unwrap_or(reason);
    drop_conn(inner, &conn, reason);
}

/// Registers `conn`, reports it, then reads frames into the inbox until the
/// connection ends; returns why it ended.
fn read_connection(inner: &Arc<Inner>, conn: &Arc<Conn>, role: Role, read_half: Stream) -> String {
    let peer = conn.peer;
    let replaced = inner.conns.lock().insert(peer, conn.clone());
    if let Some(old) = &replaced {
        old.replaced.store(true, Ordering::Release);
        old.fail("replaced by a new connection".into());
        // Whatever the old reader is handing over goes first; it hands over nothing
        // after this (it sees `replaced`), and its own end is not reported (the map
        // holds this connection).
        drop(old.delivering.lock());
    }
    inner.history.lock().entry(peer).or_default().connect_count += 1;
    if inner.closed.load(Ordering::Acquire) {
        return "transport closed".into();
    }
    // The old connection ended as surely as if its end had been read first: the owner
    // hears it (a peer that restarted is a node failure, not a member whose heartbeats
    // must be missed).
    if replaced.is_some()
        && inner
            .inbox
            .send(Incoming::Disconnected {
                peer,
                reason: "replaced by a new connection".into(),
            })
            .is_err()
    {
        return owner_gone(conn);
    }
    if inner
        .inbox
        .send(Incoming::Connected { peer, role })
        .is_err()
    {
        return owner_gone(conn);
    }
    let counting = CountingReader {
        inner: read_half,
        count: conn.bytes_received.clone(),
    };
    let mut reader = io::BufReader::with_capacity(64 << 10, counting);
    loop {
        match read_message(&mut reader) {
            Ok(msg) => {
                let _delivering = conn.delivering.lock();
                if conn.replaced.load(Ordering::Acquire) {
                    break "replaced by a new connection".to_string();
                }
                if inner
                    .inbox
                    .send(Incoming::Message { from: peer, msg })
                    .is_err()
                {
                    break owner_gone(conn);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break "closed".to_string(),
            Err(e) => break e.to_string(),
        }
    }
}

/// The owner dropped its inbox (its loop ended): what it sent before still goes out,
/// for up to [`FLUSH_TIMEOUT`], before the connection closes (a management server's
/// last STOP queued behind a message it will never read).
fn owner_gone(conn: &Conn) -> String {
    conn.out.wait_drained(Instant::now() + FLUSH_TIMEOUT);
    "node stopped".into()
}

/// Removes `conn` if it is still the peer's connection, and reports it once. Called
/// only from the connection's own thread (the report may wait for room in the inbox).
fn drop_conn(inner: &Inner, conn: &Arc<Conn>, reason: String) {
    {
        let mut h = inner.history.lock();
        let e = h.entry(conn.peer).or_default();
        let st = conn.out.stats();
        e.bytes_sent += st.bytes_sent;
        e.overload_count += st.overload_count;
        e.bytes_received += conn.bytes_received.swap(0, Ordering::Relaxed);
    }
    let removed = {
        let mut conns = inner.conns.lock();
        match conns.get(&conn.peer) {
            Some(c) if c.id == conn.id => conns.remove(&conn.peer).is_some(),
            _ => false,
        }
    };
    if removed {
        let _ = inner.inbox.send(Incoming::Disconnected {
            peer: conn.peer,
            reason,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::sync::mpsc::{Receiver, sync_channel};
    use std::time::Instant;

    fn node(id: NodeId) -> (TcpTransport, Receiver<Incoming>) {
        let (tx, rx) = sync_channel(64);
        (TcpTransport::new(id, Role::DataNode, tx), rx)
    }

    type Node = (TcpTransport, Receiver<Incoming>);

    /// Node 2 dials node `b_id`; returns both once each saw the other connect.
    fn connected_pair(b_id: NodeId) -> (Node, Node) {
        let (a, arx) = node(2);
        let (b, brx) = node(b_id);
        let addr = b.listen(loopback()).expect("listen");
        a.dial(b_id, addr).expect("dial");
        assert!(matches!(next(&arx), Incoming::Connected { peer, .. } if peer == b_id));
        assert!(matches!(next(&brx), Incoming::Connected { peer: 2, .. }));
        ((a, arx), (b, brx))
    }

    fn next(rx: &Receiver<Incoming>) -> Incoming {
        rx.recv_timeout(Duration::from_secs(10)).expect("an event")
    }

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().expect("addr")
    }

    #[test]
    fn two_nodes_connect_exchange_and_see_a_disconnect() {
        let (a, arx) = node(2);
        let (b, brx) = node(3);
        let addr = b.listen(loopback()).expect("listen");
        a.dial(3, addr).expect("dial");
        assert_eq!(
            next(&arx),
            Incoming::Connected {
                peer: 3,
                role: Role::DataNode
            }
        );
        assert_eq!(
            next(&brx),
            Incoming::Connected {
                peer: 2,
                role: Role::DataNode
            }
        );
        assert!(a.send(3, &Message::Heartbeat { view_id: 5 }));
        assert_eq!(
            next(&brx),
            Incoming::Message {
                from: 2,
                msg: Message::Heartbeat { view_id: 5 }
            }
        );
        assert!(b.send(2, &Message::JoinReq { incarnation: 1 }));
        assert_eq!(
            next(&arx),
            Incoming::Message {
                from: 3,
                msg: Message::JoinReq { incarnation: 1 }
            }
        );
        assert!(
            !a.send(9, &Message::Heartbeat { view_id: 1 }),
            "no such peer"
        );
        // b goes away for good: a sees it.
        b.close();
        loop {
            if let Incoming::Disconnected { peer, .. } = next(&arx) {
                assert_eq!(peer, 3);
                break;
            }
        }
        a.close();
    }

    #[test]
    fn a_new_life_dialing_before_the_old_connection_ends_is_reported_as_its_end() {
        let (b, brx) = node(3);
        let addr = b.listen(loopback()).expect("listen");
        // Node 2's old life: a bare connection that keeps sending while its new life
        // dials (as a node restarted in its process can, before its old sockets close).
        let mut old_life = Stream::Tcp(TcpStream::connect(addr).expect("connect"));
        handshake(&mut old_life, 2, Role::DataNode).expect("handshake");
        assert_eq!(
            next(&brx),
            Incoming::Connected {
                peer: 2,
                role: Role::DataNode
            }
        );
        // It sends until its connection is shut (by the replacement).
        let sender = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut view_id = 0;
            while Instant::now() < deadline {
                let beat = Message::Heartbeat { view_id };
                if write_message(&mut old_life, &beat, &mut buf).is_err() {
                    return;
                }
                view_id += 1;
            }
            panic!("the old life's connection was never shut");
        });
        std::thread::sleep(Duration::from_millis(1));
        let (new_life, new_rx) = node(2);
        new_life.dial(3, addr).expect("dial");
        let mut last_view = None;
        let reason = loop {
            match next(&brx) {
                Incoming::Message {
                    from: 2,
                    msg: Message::Heartbeat { view_id },
                } => {
                    assert!(last_view < Some(view_id), "out of order: {view_id}");
                    last_view = Some(view_id);
                }
                Incoming::Disconnected { peer: 2, reason } => break reason,
                other => panic!("before the old connection's end: {other:?}"),
            }
        };
        assert_eq!(reason, "replaced by a new connection");
        assert_eq!(
            next(&brx),
            Incoming::Connected {
                peer: 2,
                role: Role::DataNode
            }
        );
        assert!(matches!(next(&new_rx), Incoming::Connected { peer: 3, .. }));
        assert!(new_life.send(3, &Message::JoinReq { incarnation: 2 }));
        // Nothing of the old life after its end: the new life's request comes next.
        assert_eq!(
            next(&brx),
            Incoming::Message {
                from: 2,
                msg: Message::JoinReq { incarnation: 2 }
            }
        );
        sender.join().expect("sender");
        new_life.close();
        b.close();
    }

    #[test]
    fn a_dialer_reconnects_after_the_link_is_cut() {
        let ((a, arx), (b, brx)) = connected_pair(4);
        a.disconnect(4);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut saw_down = false;
        loop {
            match next(&arx) {
                Incoming::Disconnected { peer: 4, .. } => saw_down = true,
                Incoming::Connected { peer: 4, .. } if saw_down => break,
                _ => {}
            }
            assert!(Instant::now() < deadline, "no reconnect");
        }
        assert!(a.send(4, &Message::Heartbeat { view_id: 2 }));
        loop {
            if let Incoming::Message { from: 2, msg } = next(&brx) {
                assert_eq!(msg, Message::Heartbeat { view_id: 2 });
                break;
            }
        }
        a.close();
        b.close();
    }

    #[test]
    fn a_shut_transport_does_not_reconnect_even_with_its_inbox_gone() {
        let ((a, arx), (b, brx)) = connected_pair(7);
        // As a data node's loop ends: shut, drop the inbox, then close.
        a.shut();
        drop(arx);
        a.close();
        assert!(matches!(next(&brx), Incoming::Disconnected { peer: 2, .. }));
        std::thread::sleep(REDIAL_INTERVAL * 3);
        assert!(
            !b.connected(2),
            "the dialer of a shut transport reconnected"
        );
        assert!(brx.try_recv().is_err(), "nothing after the disconnect");
        b.close();
    }

    #[test]
    fn garbage_on_a_connection_closes_it_without_a_message() {
        let (b, brx) = node(5);
        let addr = b.listen(loopback()).expect("listen");
        let mut s = TcpStream::connect(addr).expect("connect");
        let mut buf = Vec::new();
        write_message(
            &mut s,
            &Message::Hello {
                node_id: 7,
                role: Role::Api,
            },
            &mut buf,
        )
        .expect("hello");
        assert!(matches!(
            read_message(&mut s),
            Ok(Message::Hello { node_id: 5, .. })
        ));
        assert!(matches!(next(&brx), Incoming::Connected { peer: 7, .. }));
        // A frame with a flipped payload bit.
        buf.clear();
        Message::Heartbeat { view_id: 1 }
            .encode(&mut buf)
            .expect("encode");
        let last = buf.len() - 1;
        buf[last] ^= 0x40;
        s.write_all(&buf).expect("write");
        match next(&brx) {
            Incoming::Disconnected { peer, reason } => {
                assert_eq!(peer, 7);
                assert!(reason.contains("checksum"), "{reason}");
            }
            other => panic!("expected a disconnect, got {other:?}"),
        }
        b.close();
    }

    #[test]
    fn a_peer_that_stops_reading_overloads_then_loses_its_connection_without_blocking_the_sender() {
        let (b, brx) = node(5);
        b.set_send_limits(|_| SendLimits {
            buffer_bytes: 256 << 10,
            overload_bytes: 128 << 10,
        });
        let addr = b.listen(loopback()).expect("listen");
        // A peer that says Hello and then never reads.
        let mut s = TcpStream::connect(addr).expect("connect");
        let mut buf = Vec::new();
        write_message(
            &mut s,
            &Message::Hello {
                node_id: 9,
                role: Role::DataNode,
            },
            &mut buf,
        )
        .expect("hello");
        assert!(matches!(next(&brx), Incoming::Connected { peer: 9, .. }));
        assert!(!b.overloaded(9));
        let big = Message::ConfigConf {
            node_id: 9,
            config_text: "x".repeat(1 << 20),
        };
        let started = Instant::now();
        let mut sent = 0u64;
        let mut saw_overload = false;
        while b.send(9, &big) {
            sent += 1;
            saw_overload |= b.overloaded(9);
            assert!(sent < 1000, "the ceiling never closed the connection");
        }
        // The ceiling is SendBufferMemory plus one largest frame (16 MiB): at least
        // that much was queued, and no send waited for the peer.
        assert!(sent >= 16, "{sent} MiB sent");
        assert!(saw_overload, "the connection was overloaded on the way");
        assert!(started.elapsed() < Duration::from_secs(5), "a send waited");
        match next(&brx) {
            Incoming::Disconnected { peer, reason } => {
                assert_eq!(peer, 9);
                assert!(reason.contains("send buffer to node 9 full"), "{reason}");
                assert!(reason.contains("SendBufferMemory=262144"), "{reason}");
            }
            other => panic!("expected a disconnect, got {other:?}"),
        }
        assert!(!b.overloaded(9), "no connection: not overloaded");
        b.close();
    }

    #[test]
    fn shut_writes_what_was_sent_before_it_and_counts_bytes() {
        let ((a, arx), (b, brx)) = connected_pair(3);
        for v in 0..200 {
            assert!(a.send(3, &Message::Heartbeat { view_id: v }));
        }
        a.shut();
        for v in 0..200 {
            match next(&brx) {
                Incoming::Message { from: 2, msg } => {
                    assert_eq!(msg, Message::Heartbeat { view_id: v }, "in order");
                }
                other => panic!("message {v} lost before {other:?}"),
            }
        }
        drop(arx);
        a.close();
        b.close();
    }

    #[test]
    fn send_stats_count_what_was_written() {
        let ((a, _arx), (b, brx)) = connected_pair(4);
        let msg = Message::Heartbeat { view_id: 1 };
        let mut frame = Vec::new();
        msg.encode(&mut frame).expect("encode");
        for _ in 0..10 {
            assert!(a.send(4, &msg));
        }
        for _ in 0..10 {
            assert!(matches!(next(&brx), Incoming::Message { from: 2, .. }));
        }
        // The writer counts a frame once its write returned, which may be just after
        // the peer read it.
        let want = 10 * frame.len() as u64;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut st = a.send_stats(4).expect("connected");
        while st.bytes_sent < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            st = a.send_stats(4).expect("connected");
        }
        assert_eq!(st.bytes_sent, want);
        assert_eq!((st.unsent_bytes, st.overloaded), (0, false));
        assert_eq!(a.send_stats(9), None);
        a.close();
        b.close();
    }

    #[test]
    fn transporters_count_both_ways_and_keep_their_totals_past_a_disconnect() {
        let ((a, arx), (b, brx)) = connected_pair(5);
        let msg = Message::Heartbeat { view_id: 1 };
        let mut frame = Vec::new();
        msg.encode(&mut frame).expect("encode");
        for _ in 0..10 {
            assert!(a.send(5, &msg));
        }
        for _ in 0..10 {
            assert!(matches!(next(&brx), Incoming::Message { from: 2, .. }));
        }
        // The writer counts a frame once its write returned, which may be after the
        // peer already read it.
        let t0 = std::time::Instant::now();
        let ta = loop {
            let ta = a.transporters();
            if ta
                .first()
                .is_some_and(|t| t.bytes_sent >= 10 * frame.len() as u64)
                || t0.elapsed() > Duration::from_secs(5)
            {
                break ta;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(ta.len(), 1, "{ta:?}");
        assert_eq!(
            (ta[0].peer, ta[0].connected, ta[0].connect_count),
            (5, true, 1)
        );
        assert_eq!(ta[0].bytes_sent, 10 * frame.len() as u64);
        assert!(ta[0].remote_address.starts_with("127.0.0.1:"), "{ta:?}");
        let tb = b.transporters();
        assert_eq!((tb[0].peer, tb[0].connected), (2, true));
        // The handshake came first on the same socket.
        assert!(tb[0].bytes_received >= 10 * frame.len() as u64, "{tb:?}");
        b.close();
        assert!(matches!(next(&arx), Incoming::Disconnected { peer: 5, .. }));
        let after = a.transporters();
        let row = after
            .iter()
            .find(|t| t.peer == 5)
            .expect("a row for node 5");
        assert!(!row.connected && row.remote_address.is_empty(), "{row:?}");
        assert_eq!(
            row.bytes_sent,
            10 * frame.len() as u64,
            "kept past the disconnect"
        );
        assert_eq!(row.connect_count, 1);
        a.close();
    }

    #[test]
    fn a_peer_that_claims_our_own_node_id_is_refused() {
        let (b, brx) = node(6);
        let addr = b.listen(loopback()).expect("listen");
        let mut s = TcpStream::connect(addr).expect("connect");
        let mut buf = Vec::new();
        write_message(
            &mut s,
            &Message::Hello {
                node_id: 6,
                role: Role::DataNode,
            },
            &mut buf,
        )
        .expect("hello");
        std::thread::sleep(Duration::from_millis(200));
        assert!(brx.try_recv().is_err(), "no connection registered");
        assert!(!b.connected(6));
        b.close();
    }
}
