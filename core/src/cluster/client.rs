//! Talking to a management server: NDB's connectstring, the configuration fetch of a
//! data node, and the management client (`rndb_mgm -c host:port`).
//!
//! Each of these is a plain request/response over its own TCP connection (`Hello`
//! with node id 0, so the server registers it as an anonymous peer), apart from the
//! node's transporter connections. Every wait is bounded (`timeout`).

use crate::error::{NdbError, Result, codes};
use crate::transport::net::{LocalNet, Net, Stream};
use crate::transport::tcp::{read_message, write_message};
use crate::transport::{Message, Role};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The management server's default port (`[ndb_mgmd] PortNumber`).
pub const DEFAULT_MGM_PORT: u16 = 1186;

/// A parsed connectstring: `[nodeid=N,]host[:port][,host[:port]...]` (NDB's form; a
/// `bind-address` part is not supported), and this engine's `local=N` part: the
/// hosts are on in-process network N of this process (`transport::net::LocalNet`,
/// the embedded distributed cluster's), not on TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    pub node_id: Option<u32>,
    pub hosts: Vec<(String, u16)>,
    pub local_net: Option<u64>,
}

impl ConnectString {
    pub fn parse(s: &str) -> Result<ConnectString> {
        let bad = |why: &str| {
            codes::bad_argument(format!(
                "connectstring '{s}': {why} (expected [nodeid=N,]host[:port][,host[:port]...])"
            ))
        };
        let mut node_id = None;
        let mut local_net = None;
        let mut hosts = Vec::new();
        for part in s.split([',', ';']).map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(v) = part
                .strip_prefix("nodeid=")
                .or_else(|| part.strip_prefix("NODEID="))
            {
                let id: u32 = v.parse().map_err(|_| bad("nodeid is not a number"))?;
                if !(1..=255).contains(&id) {
                    return Err(bad("nodeid out of range 1..255"));
                }
                node_id = Some(id);
                continue;
            }
            if let Some(v) = part.strip_prefix("local=") {
                local_net = Some(v.parse().map_err(|_| bad("local is not a number"))?);
                continue;
            }
            let part = part.strip_prefix("host=").unwrap_or(part);
            let (host, port) = match part.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse::<u16>().map_err(|_| bad("port is not a number"))?,
                ),
                None => (part.to_string(), DEFAULT_MGM_PORT),
            };
            if host.is_empty() {
                return Err(bad("empty host"));
            }
            hosts.push((host, port));
        }
        if hosts.is_empty() {
            return Err(bad("no management server named"));
        }
        Ok(ConnectString {
            node_id,
            hosts,
            local_net,
        })
    }

    /// The network the hosts are on: TCP, or the in-process network `local=N` names
    /// (4009 when no such network lives in this process).
    pub fn net(&self) -> Result<Net> {
        match self.local_net {
            None => Ok(Net::Tcp),
            Some(n) => LocalNet::find(n).map(Net::Local).ok_or_else(|| {
                NdbError::new(
                    4009,
                    crate::error::ErrorClassification::NodeRecoveryError,
                    format!(
                        "Unable to connect with connect string: {self} (no in-process network {n} in this process)"
                    ),
                )
            }),
        }
    }

    /// The first management server that accepts a connection within `timeout`.
    pub fn connect(&self, timeout: Duration) -> Result<Stream> {
        let net = self.net()?;
        let mut last = String::new();
        for (host, port) in &self.hosts {
            let addrs: Vec<SocketAddr> = match (host.as_str(), *port).to_socket_addrs() {
                Ok(a) => a.collect(),
                Err(e) => {
                    last = format!("{host}:{port}: {e}");
                    continue;
                }
            };
            for a in addrs {
                match net.connect(a, timeout) {
                    Ok(s) => return Ok(s),
                    Err(e) => last = format!("{host}:{port}: {e}"),
                }
            }
        }
        Err(NdbError::new(
            4009,
            crate::error::ErrorClassification::NodeRecoveryError,
            format!("Unable to connect with connect string: {} ({last})", self),
        ))
    }
}

impl std::fmt::Display for ConnectString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nodeid={}", self.node_id.unwrap_or(0))?;
        if let Some(n) = self.local_net {
            write!(f, ",local={n}")?;
        }
        for (h, p) in &self.hosts {
            write!(f, ",{h}:{p}")?;
        }
        Ok(())
    }
}

fn io_error(what: &str, e: std::io::Error) -> NdbError {
    NdbError::new(
        4009,
        crate::error::ErrorClassification::NodeRecoveryError,
        format!("management server connection: {what}: {e}"),
    )
}

/// The data nodes' states in an `ALL STATUS` answer, as the management server words
/// them (`Node 2: started (rndb-0.1.0)`: 2 → "started"; `Node 3: starting (Last
/// completed phase 4) (rndb-0.1.0)`: 3 → "starting"; `Node 4: not connected`).
pub fn node_states(all_status: &str) -> std::collections::BTreeMap<u32, String> {
    all_status
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Node ")?;
            let (id, state) = rest.split_once(": ")?;
            let state = state.split(" (").next().unwrap_or(state);
            Some((id.parse().ok()?, state.trim().to_string()))
        })
        .collect()
}

/// How long a client waits for the answer of ROLLING RESTART, which comes when every
/// data node restarted (the management server gives each node 10 minutes), or of
/// SHUTDOWN, which comes when they have ended.
pub const LONG_COMMAND_REPLY_TIMEOUT: Duration = Duration::from_secs(3600);

/// A request/response connection to a management server.
#[derive(Debug)]
pub struct MgmConnection {
    stream: Stream,
    buf: Vec<u8>,
    /// The read timeout of an answer (longer for ROLLING RESTART).
    timeout: Duration,
    /// The management server's node id (from its `Hello`).
    pub server_node_id: u32,
}

impl MgmConnection {
    /// Connects and says `Hello` as an anonymous `role`.
    pub fn open(cs: &ConnectString, role: Role, timeout: Duration) -> Result<MgmConnection> {
        let mut stream = cs.connect(timeout)?;
        let _ = stream.set_nodelay();
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| io_error("set timeout", e))?;
        let mut buf = Vec::new();
        write_message(&mut stream, &Message::Hello { node_id: 0, role }, &mut buf)
            .map_err(|e| io_error("hello", e))?;
        let server_node_id = match read_message(&mut stream).map_err(|e| io_error("hello", e))? {
            Message::Hello {
                node_id,
                role: Role::Management,
            } => node_id,
            _ => {
                return Err(codes::bad_argument(format!(
                    "{cs}: the peer is not a management server"
                )));
            }
        };
        Ok(MgmConnection {
            stream,
            buf,
            timeout,
            server_node_id,
        })
    }

    /// The address this end of the connection has (what the management server sees as
    /// the client's host), without the port.
    pub fn local_host(&self) -> String {
        self.stream.local_host()
    }

    /// Sends `msg` and reads the one reply.
    pub fn request(&mut self, msg: &Message) -> Result<Message> {
        write_message(&mut self.stream, msg, &mut self.buf).map_err(|e| io_error("send", e))?;
        read_message(&mut self.stream).map_err(|e| io_error("reply", e))
    }

    /// Runs a management command (`SHOW`, `ALL STATUS`, ...) and returns its output;
    /// a command the server refuses is an error with its text. ROLLING RESTART is
    /// answered once every data node restarted, SHUTDOWN once they have ended: their
    /// answers may take up to [`LONG_COMMAND_REPLY_TIMEOUT`].
    pub fn command(&mut self, text: &str) -> Result<String> {
        use crate::mgm::parse::Command;
        let long = matches!(
            crate::mgm::parse::parse(text),
            Ok(Some(Command::RollingRestart | Command::Shutdown))
        );
        if long {
            self.stream
                .set_read_timeout(Some(LONG_COMMAND_REPLY_TIMEOUT))
                .map_err(|e| io_error("set timeout", e))?;
        }
        let reply = self.request(&Message::MgmCommand { text: text.into() });
        if long {
            self.stream
                .set_read_timeout(Some(self.timeout))
                .map_err(|e| io_error("set timeout", e))?;
        }
        match reply? {
            Message::MgmReply { ok: true, text } => Ok(text),
            Message::MgmReply { ok: false, text } => Err(crate::mgm::mgm_error(text)),
            _ => Err(codes::internal("management server: unexpected reply")),
        }
    }
}

/// A data node's configuration fetch: the node id it was given and the config.ini text.
pub fn fetch_config(
    cs: &ConnectString,
    node_id: Option<u32>,
    host: &str,
    timeout: Duration,
) -> Result<(u32, String)> {
    fetch_config_as(cs, node_id, host, timeout, 0)
}

/// [`fetch_config`] by a process that says who it is with `token` (its own random
/// number, 0 for none): the holder of a node id may fetch again while it is connected.
pub fn fetch_config_as(
    cs: &ConnectString,
    node_id: Option<u32>,
    host: &str,
    timeout: Duration,
    token: u64,
) -> Result<(u32, String)> {
    let mut c = MgmConnection::open(cs, Role::DataNode, timeout)?;
    match c.request(&Message::ConfigReq {
        node_id: node_id.or(cs.node_id).unwrap_or(0),
        host: host.into(),
        token,
    })? {
        Message::ConfigConf {
            node_id,
            config_text,
        } => Ok((node_id, config_text)),
        Message::ConfigRef { code, message } => Err(NdbError::new(
            code,
            crate::error::ErrorClassification::ApplicationError,
            message,
        )),
        _ => Err(codes::internal(
            "management server: unexpected reply to ConfigReq",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectstrings_parse_as_ndb_writes_them() {
        let c = ConnectString::parse("localhost:1186").expect("parse");
        assert_eq!(c.hosts, vec![("localhost".into(), 1186)]);
        assert_eq!(c.node_id, None);
        let c = ConnectString::parse("nodeid=3,10.0.0.1,10.0.0.2:2000").expect("parse");
        assert_eq!(c.node_id, Some(3));
        assert_eq!(
            c.hosts,
            vec![("10.0.0.1".into(), 1186), ("10.0.0.2".into(), 2000)]
        );
        assert_eq!(c.to_string(), "nodeid=3,10.0.0.1:1186,10.0.0.2:2000");
        for bad in [
            "",
            "nodeid=0,h",
            "nodeid=x,h",
            "h:notaport",
            ":1186",
            "nodeid=4",
        ] {
            assert!(ConnectString::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nobody_listening_is_error_4009_naming_the_connectstring() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        drop(l);
        let c = ConnectString::parse(&format!("127.0.0.1:{port}")).expect("parse");
        let e =
            MgmConnection::open(&c, Role::Api, Duration::from_millis(300)).expect_err("refused");
        assert_eq!(e.code, 4009);
        assert!(e.message.contains("Unable to connect"), "{}", e.message);
    }
}
