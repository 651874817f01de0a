//! Where the transporter's byte streams come from: the host's TCP stack, or an
//! in-process network.
//!
//! A [`Net`] listens and connects by `SocketAddr`. [`Net::Tcp`] is the operating
//! system's TCP. [`Net::Local`] is a [`LocalNet`]: a registry, inside this process, of
//! listening addresses; a connect to a registered address makes a connected pair of
//! Unix stream sockets (`socketpair(2)`: nothing on the file system, no port taken) and
//! hands one end to the listener. The management server, the data nodes and the API
//! nodes of an embedded distributed cluster (`cluster::local`) talk over one
//! `LocalNet`, with exactly the code they use over TCP: the same frames and checksums,
//! the same reader and writer threads, the same send buffers (a `Stream` has the file
//! descriptor the direct send writes to, for both kinds).
//!
//! An address on a `LocalNet` is only a name: `127.0.0.1:1186` on one `LocalNet` is
//! neither a TCP port nor the same address on another `LocalNet`. Port 0 asks for a
//! fresh port of that net (from [`LOCAL_FIRST_PORT`] up). Each `LocalNet` has a number
//! that names it in a connectstring (`local=N,host:port`: `client::ConnectString`), so
//! that any client in the process reaches it through the usual connect path; the
//! registry of numbers holds the nets weakly (a net ends with its last user).
//!
//! Limits: a listener's queue of connections not yet accepted holds at most
//! [`LOCAL_BACKLOG`]; beyond it a connect is refused, as a full TCP backlog would.
//!
//! Lock order: `LOCAL_NETS` before nothing; a `LocalNet`'s `listeners` is a leaf.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Connections a `LocalNet` listener holds before they are accepted, at most.
pub const LOCAL_BACKLOG: usize = 128;
/// The first port a `LocalNet` gives for port 0.
pub const LOCAL_FIRST_PORT: u16 = 20_000;

/// Every live `LocalNet` by its number (weak: the net's users own it).
static LOCAL_NETS: Mutex<BTreeMap<u64, Weak<LocalNet>>> = Mutex::new(BTreeMap::new());
static NEXT_LOCAL_NET: AtomicU64 = AtomicU64::new(1);

/// An in-process network (see the module notes).
#[derive(Debug)]
pub struct LocalNet {
    number: u64,
    listeners: Mutex<BTreeMap<SocketAddr, SyncSender<UnixStream>>>,
    next_port: AtomicU16,
}

impl LocalNet {
    /// A new, empty network, registered under a fresh number.
    pub fn new() -> Arc<LocalNet> {
        let number = NEXT_LOCAL_NET.fetch_add(1, Ordering::Relaxed);
        let net = Arc::new(LocalNet {
            number,
            listeners: Mutex::new(BTreeMap::new()),
            next_port: AtomicU16::new(LOCAL_FIRST_PORT),
        });
        let mut nets = LOCAL_NETS.lock();
        nets.retain(|_, w| w.strong_count() > 0);
        nets.insert(number, Arc::downgrade(&net));
        net
    }

    /// The live network numbered `number`.
    pub fn find(number: u64) -> Option<Arc<LocalNet>> {
        LOCAL_NETS.lock().get(&number).and_then(Weak::upgrade)
    }

    /// The number that names this network in a connectstring (`local=N`).
    pub fn number(&self) -> u64 {
        self.number
    }

    fn bind(self: &Arc<Self>, addr: SocketAddr) -> io::Result<LocalListener> {
        let mut listeners = self.listeners.lock();
        let mut addr = addr;
        if addr.port() == 0 {
            // A fresh port, skipping any a listener holds.
            loop {
                let p = self.next_port.fetch_add(1, Ordering::Relaxed);
                if p == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrNotAvailable,
                        "the in-process network has no free port left",
                    ));
                }
                addr.set_port(p);
                if !listeners.contains_key(&addr) {
                    break;
                }
            }
        } else if listeners.contains_key(&addr) {
            // An entry is removed by its listener's drop: present means in use.
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{addr} is in use on in-process network {}", self.number),
            ));
        }
        let (tx, rx) = sync_channel(LOCAL_BACKLOG);
        listeners.insert(addr, tx);
        Ok(LocalListener {
            net: self.clone(),
            addr,
            queue: rx,
        })
    }

    fn connect(&self, addr: SocketAddr) -> io::Result<UnixStream> {
        let refused = || {
            io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "nothing listens on {addr} on in-process network {}",
                    self.number
                ),
            )
        };
        let tx = self
            .listeners
            .lock()
            .get(&addr)
            .cloned()
            .ok_or_else(refused)?;
        let (mine, theirs) = UnixStream::pair()?;
        match tx.try_send(theirs) {
            Ok(()) => Ok(mine),
            Err(TrySendError::Full(_)) => Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("{addr}: {LOCAL_BACKLOG} connections wait to be accepted"),
            )),
            Err(TrySendError::Disconnected(_)) => Err(refused()),
        }
    }
}

/// Which network a node's streams go over.
#[derive(Debug, Clone, Default)]
pub enum Net {
    /// The host's TCP.
    #[default]
    Tcp,
    /// An in-process network.
    Local(Arc<LocalNet>),
}

impl Net {
    /// Listens on `addr` (port 0: any free port of this net).
    pub fn listen(&self, addr: SocketAddr) -> io::Result<Listener> {
        match self {
            Net::Tcp => {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok(Listener::Tcp(l))
            }
            Net::Local(net) => Ok(Listener::Local(net.bind(addr)?)),
        }
    }

    /// Connects to `addr`, waiting at most `timeout` for TCP.
    pub fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<Stream> {
        match self {
            Net::Tcp => Ok(Stream::Tcp(TcpStream::connect_timeout(&addr, timeout)?)),
            Net::Local(net) => Ok(Stream::Local(net.connect(addr)?)),
        }
    }

    /// The `local=N` part a connectstring needs to reach this net (None for TCP).
    pub fn local_number(&self) -> Option<u64> {
        match self {
            Net::Tcp => None,
            Net::Local(n) => Some(n.number()),
        }
    }
}

/// A listening endpoint of a [`Net`]. Dropping it stops the listening.
pub enum Listener {
    Tcp(TcpListener),
    Local(LocalListener),
}

/// A `LocalNet` listener: its address is registered until it is dropped.
pub struct LocalListener {
    net: Arc<LocalNet>,
    addr: SocketAddr,
    queue: Receiver<UnixStream>,
}

impl Drop for LocalListener {
    fn drop(&mut self) {
        self.net.listeners.lock().remove(&self.addr);
    }
}

impl Listener {
    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Local(l) => Ok(l.addr),
        }
    }

    /// The next connection, waiting at most `poll` (Ok(None): none came).
    pub fn accept_within(&self, poll: Duration) -> io::Result<Option<Stream>> {
        match self {
            Listener::Tcp(l) => match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    Ok(Some(Stream::Tcp(s)))
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(poll);
                    Ok(None)
                }
                Err(e) => Err(e),
            },
            Listener::Local(l) => match l.queue.recv_timeout(poll) {
                Ok(s) => Ok(Some(Stream::Local(s))),
                Err(RecvTimeoutError::Timeout) => Ok(None),
                Err(RecvTimeoutError::Disconnected) => Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the in-process listener's queue is gone",
                )),
            },
        }
    }
}

/// A connected byte stream of a [`Net`].
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Local(UnixStream),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => Ok(Stream::Tcp(s.try_clone()?)),
            Stream::Local(s) => Ok(Stream::Local(s.try_clone()?)),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Local(s) => s.shutdown(how),
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Local(s) => s.set_read_timeout(t),
        }
    }

    /// `TCP_NODELAY` on TCP; a local stream has no delay to turn off.
    pub fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(true),
            Stream::Local(_) => Ok(()),
        }
    }

    /// The peer's address as ndbinfo shows it.
    pub fn peer_description(&self) -> String {
        match self {
            Stream::Tcp(s) => s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
            Stream::Local(_) => "in-process".into(),
        }
    }

    /// This end's host, as a management server sees a client's (a local stream is on
    /// this host: 127.0.0.1).
    pub fn local_host(&self) -> String {
        match self {
            Stream::Tcp(s) => s
                .local_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default(),
            Stream::Local(_) => "127.0.0.1".into(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Local(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Local(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Local(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Local(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn a_local_connect_reaches_the_listener_of_that_address_on_that_net_only() {
        let (a, b) = (Net::Local(LocalNet::new()), Net::Local(LocalNet::new()));
        let l = a.listen(addr("127.0.0.1:1186")).expect("listen");
        let mut c = a
            .connect(addr("127.0.0.1:1186"), Duration::from_secs(1))
            .expect("connect");
        let mut s = l
            .accept_within(Duration::from_secs(1))
            .expect("accept")
            .expect("a connection");
        c.write_all(b"ping").expect("write");
        let mut got = [0u8; 4];
        s.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"ping");
        // Another net has nothing on that address; neither has this one elsewhere.
        let e = b
            .connect(addr("127.0.0.1:1186"), Duration::from_secs(1))
            .expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        let e = a
            .connect(addr("127.0.0.1:1187"), Duration::from_secs(1))
            .expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        // A second listener on a taken address is refused; after the drop it is free.
        let e = a.listen(addr("127.0.0.1:1186")).err().expect("in use");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        drop(l);
        let e = a
            .connect(addr("127.0.0.1:1186"), Duration::from_secs(1))
            .expect_err("refused after the drop");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        assert!(a.listen(addr("127.0.0.1:1186")).is_ok());
    }

    #[test]
    fn port_zero_gives_distinct_ports_and_nets_are_found_by_number_while_alive() {
        let net = LocalNet::new();
        let n = Net::Local(net.clone());
        let l1 = n.listen(addr("127.0.0.1:0")).expect("listen");
        let l2 = n.listen(addr("127.0.0.1:0")).expect("listen");
        let (p1, p2) = (
            l1.local_addr().expect("addr").port(),
            l2.local_addr().expect("addr").port(),
        );
        assert!(p1 >= LOCAL_FIRST_PORT && p2 >= LOCAL_FIRST_PORT && p1 != p2);
        let number = net.number();
        assert!(LocalNet::find(number).is_some_and(|f| Arc::ptr_eq(&f, &net)));
        drop((n, l1, l2, net));
        assert!(
            LocalNet::find(number).is_none(),
            "the registry holds nets weakly"
        );
    }

    #[test]
    fn a_full_backlog_refuses_and_a_shutdown_is_seen_by_the_peer() {
        let n = Net::Local(LocalNet::new());
        let l = n.listen(addr("127.0.0.1:0")).expect("listen");
        let a = l.local_addr().expect("addr");
        let held: Vec<Stream> = (0..LOCAL_BACKLOG)
            .map(|_| n.connect(a, Duration::from_secs(1)).expect("connect"))
            .collect();
        let e = n
            .connect(a, Duration::from_secs(1))
            .expect_err("backlog full");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        let mut s = l
            .accept_within(Duration::from_secs(1))
            .expect("accept")
            .expect("one");
        held[0].shutdown(Shutdown::Both).expect("shutdown");
        let mut buf = [0u8; 1];
        assert_eq!(s.read(&mut buf).expect("eof"), 0, "the peer sees the end");
    }
}
