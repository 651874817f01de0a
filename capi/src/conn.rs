//! Cluster connections (Ndb_cluster_connection): the connectstring, and the embedded
//! cluster it starts.
//!
//! Connectstrings: `embedded` starts NDB's default cluster (two data nodes,
//! NoOfReplicas=2) inside the process: the management server and data nodes of
//! `rndb_mgmd` and `rndbd` over an in-process network (`cluster::local`, ARCHITECTURE
//! decision 5), and the API's objects work over them as over TCP (the `remote`
//! module); freeing the connection shuts them down. `embedded;config=PATH` reads a
//! config.ini; `embedded;datadir=PATH` gives the data nodes a file-system path; any
//! other `;Name=value` sets a data node parameter by NDB's name
//! (`embedded;DataMemory=256M`). `local` is another name for `embedded`. `direct` (with
//! the same `;` parts) runs the data nodes' engines on the caller's threads instead,
//! with no transport between them: a transaction writes every replica itself
//! (`api::Cluster`), the fastest way for one process, without heartbeats or failover.
//! NULL or "" means the NDB_CONNECTSTRING environment variable, else `embedded`.
//! `host:port` (or `host`, port 1186; several hosts separated by commas, as NDB)
//! names a management server (`rndb_mgmd`): connect reaches it and every data node it
//! knows, and the API's objects then work over TCP (the `remote` module).

use crate::error::{ErrorStore, guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind, Registry};
use crate::{cstr, rndb_cluster_connection};
use rndb_core::api::Cluster;
use rndb_core::cluster::local::LocalCluster;
use rndb_core::cluster::remote::RemoteCluster;
use rndb_core::config::ClusterConfig;
use rndb_core::error::{NdbError, Result, codes};
use std::ffi::{c_char, c_int};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest `connect` tries for.
const MAX_CONNECT_S: i64 = 600;
/// Pause between two tries of `connect`.
const CONNECT_RETRY: Duration = Duration::from_millis(100);
/// A request's answer is awaited at least this long, whatever `connect`'s retries
/// (which are about reaching the management server, as in NDB API): a DDL statement
/// under load or valgrind takes seconds. A lost node fails its requests at once.
const REQUEST_TIMEOUT_MIN: Duration = Duration::from_secs(30);

/// A connection's request timeout for a connect `timeout`.
fn request_timeout(timeout: Duration) -> Duration {
    timeout.max(REQUEST_TIMEOUT_MIN)
}

pub(crate) struct ConnState {
    /// The engines on the caller's threads, once connected to a `direct` connectstring.
    pub cluster: Option<Cluster>,
    /// The data nodes over TCP, once connected to a management server (or over the
    /// in-process network, to the nodes of `embedded`).
    pub remote: Option<Arc<RemoteCluster>>,
    /// The nodes this connection started in the process (`embedded`).
    pub local: Option<LocalCluster>,
    pub error: ErrorStore,
}

/// What a connected connection runs on.
pub(crate) enum Engine {
    Direct(Cluster),
    Remote(Arc<RemoteCluster>),
}

/// What `connect` started.
enum Started {
    Direct(Cluster),
    Remote(Arc<RemoteCluster>),
    Local(Box<LocalCluster>, Arc<RemoteCluster>),
}

pub(crate) struct ConnObj {
    pub spec: String,
    pub state: Mutex<ConnState>,
}

pub(crate) static CONNS: Registry<ConnObj> = Registry::new(Kind::Connection);

pub(crate) fn release_registries() {
    CONNS.release_all_memory();
}

impl ConnObj {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The connection a handle names (shared: connections may be used from many threads).
pub(crate) fn conn_ref<'a>(p: *const rndb_cluster_connection) -> Result<(Handle, &'a ConnObj)> {
    let h =
        Handle::decode(p, &[Kind::Connection]).map_err(|e| handle_error(Kind::Connection, e))?;
    let o = CONNS
        .get(h)
        .map_err(|e| handle_error(Kind::Connection, e))?;
    // SAFETY: live slot; ConnObj is only used through shared references.
    Ok((h, unsafe { &*o }))
}

/// What a connected connection runs on (not connected: the error says so).
pub(crate) fn engine_of(h: Handle) -> Result<Engine> {
    let o = CONNS
        .get(h)
        .map_err(|e| handle_error(Kind::Connection, e))?;
    // SAFETY: as in conn_ref.
    let st = unsafe { &*o }.lock();
    if let Some(c) = &st.cluster {
        return Ok(Engine::Direct(c.clone()));
    }
    match &st.remote {
        Some(r) => Ok(Engine::Remote(r.clone())),
        None => Err(not_connected()),
    }
}

pub(crate) fn not_connected() -> NdbError {
    codes::cluster_closed().detail("not connected: call rndb_cluster_connection_connect first")
}

/// What a connectstring asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Spec {
    Embedded {
        config: Option<PathBuf>,
        datadir: Option<PathBuf>,
        params: Vec<(String, String)>,
        /// `embedded`/`local`: as distributed nodes in this process; `direct`: the
        /// engines on the caller's threads.
        distributed: bool,
    },
    Remote(String),
}

pub(crate) fn parse_spec(s: &str) -> Result<Spec> {
    let s = s.trim();
    let mut parts = s.split(';').map(str::trim);
    let first = parts.next().unwrap_or("");
    let distributed = ["embedded", "local"]
        .iter()
        .any(|name| first.eq_ignore_ascii_case(name));
    if !first.eq_ignore_ascii_case("direct") && !distributed {
        return Ok(Spec::Remote(s.to_string()));
    }
    let (mut config, mut datadir, mut params) = (None, None, Vec::new());
    for p in parts.filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            codes::bad_config(format!(
                "connectstring '{s}': '{p}' is not NAME=VALUE ({first};config=PATH;datadir=PATH;Parameter=value)"
            ))
        })?;
        let (k, v) = (k.trim(), v.trim());
        match k.to_ascii_lowercase().as_str() {
            "config" => config = Some(PathBuf::from(v)),
            "datadir" => datadir = Some(PathBuf::from(v)),
            _ => params.push((k.to_string(), v.to_string())),
        }
    }
    Ok(Spec::Embedded {
        config,
        datadir,
        params,
        distributed,
    })
}

fn start(spec: &str, timeout: Duration) -> Result<Started> {
    match parse_spec(spec)? {
        Spec::Remote(s) => {
            // As NDB's connect retries: the management server may not be up yet, or
            // know no data node yet (4009 both).
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match RemoteCluster::connect(&s, left.max(Duration::from_millis(100))) {
                    Ok(mut r) => {
                        r.set_timeout(request_timeout(timeout));
                        return Ok(Started::Remote(Arc::new(r)));
                    }
                    Err(e) if e.code == 4009 && Instant::now() + CONNECT_RETRY < deadline => {
                        std::thread::sleep(CONNECT_RETRY);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Spec::Embedded {
            config,
            datadir,
            params,
            distributed,
        } => {
            let mut cfg = match &config {
                Some(path) => ClusterConfig::from_file(path).map_err(NdbError::from)?,
                None => ClusterConfig::embedded_default(),
            };
            for (k, v) in &params {
                cfg.set_data_node_param(k, v).map_err(NdbError::from)?;
            }
            if distributed {
                let local = LocalCluster::start(cfg, datadir.as_deref(), false)?;
                let mut remote = RemoteCluster::connect(&local.connectstring(), timeout)?;
                remote.set_timeout(request_timeout(timeout));
                return Ok(Started::Local(Box::new(local), Arc::new(remote)));
            }
            match datadir {
                Some(d) => Cluster::embedded_in(cfg, d),
                None => Cluster::embedded(cfg),
            }
            .map(Started::Direct)
        }
    }
}

/// Creates a cluster connection object, NDB's `Ndb_cluster_connection(connectstring)`.
/// Nothing is started until `rndb_cluster_connection_connect`. `connectstring`:
/// "embedded" or "embedded;config=PATH;datadir=PATH;Parameter=value..." (the cluster in
/// this process: rndb_mgmd's and rndbd's code over an in-process network; "local" is
/// the same), "direct" (with the same parts: the data nodes' engines on the caller's
/// threads, no transport, no failover), NULL or "" for the NDB_CONNECTSTRING
/// environment variable (else "embedded"); "host:port" names a management server. Free with `rndb_cluster_connection_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_cluster_connection_create(
    connectstring: *const c_char,
) -> *mut rndb_cluster_connection {
    guard("rndb_cluster_connection_create", || {
        let spec = if connectstring.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated string from the caller.
            unsafe { cstr(connectstring, "connectstring") }?.to_string()
        };
        let spec = if spec.trim().is_empty() {
            std::env::var("NDB_CONNECTSTRING").unwrap_or_else(|_| "embedded".into())
        } else {
            spec
        };
        parse_spec(&spec)?;
        let obj = ConnObj {
            spec,
            state: Mutex::new(ConnState {
                cluster: None,
                remote: None,
                local: None,
                error: ErrorStore::new(),
            }),
        };
        let h = CONNS
            .insert(obj)
            .map_err(|_| codes::bad_argument("too many connection objects"))?;
        Ok(h.ptr())
    })
}

/// Frees a connection: the connections to the data nodes are closed (open
/// transactions roll back); the nodes an `embedded` connectstring started in this
/// process are shut down gracefully (each saves a last global checkpoint), the engines
/// of `direct` too (every page freed). `rndb_ndb` objects still open fail afterwards with error
/// 4009. Returns 0, or -1 for a NULL or already freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_free(conn: *mut rndb_cluster_connection) -> c_int {
    guard("rndb_cluster_connection_free", || {
        let h = Handle::decode(conn, &[Kind::Connection])
            .map_err(|e| handle_error(Kind::Connection, e))?;
        let obj = CONNS
            .remove(h)
            .map_err(|e| handle_error(Kind::Connection, e))?;
        let mut st = obj.lock();
        if let Some(c) = st.cluster.take() {
            c.shutdown();
        }
        if let Some(r) = st.remote.take() {
            r.close();
        }
        if let Some(l) = st.local.take() {
            // A graceful stop: every node saves a last global checkpoint.
            let _ = l.shutdown();
        }
        Ok(0)
    })
}

/// Connects, NDB's `connect(no_retries, retry_delay_in_seconds, verbose)`: for an
/// embedded connectstring, starts the cluster in this process; for a management
/// server, reaches it and the data nodes it knows, trying for up to
/// `(no_retries + 1) * retry_delay_in_seconds` seconds (at least one). Returns 0 on
/// success (also when already connected), -1 on failure (bad config.ini, 4009 no
/// management server or data node answered...) with the error in
/// `rndb_cluster_connection_get_error`. `verbose` prints the failure to stderr.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_connect(
    conn: *mut rndb_cluster_connection,
    no_retries: c_int,
    retry_delay_in_seconds: c_int,
    verbose: c_int,
) -> c_int {
    guard("rndb_cluster_connection_connect", || {
        let (_, o) = conn_ref(conn)?;
        let mut st = o.lock();
        if st.cluster.is_some() || st.remote.is_some() {
            return Ok(0);
        }
        let tries = i64::from(no_retries.max(0)) + 1;
        let delay_s = i64::from(retry_delay_in_seconds.max(1));
        let timeout = Duration::from_secs((tries * delay_s).clamp(1, MAX_CONNECT_S) as u64);
        match start(&o.spec, timeout) {
            Ok(e) => {
                match e {
                    Started::Direct(c) => st.cluster = Some(c),
                    Started::Remote(r) => st.remote = Some(r),
                    Started::Local(l, r) => {
                        st.local = Some(*l);
                        st.remote = Some(r);
                    }
                }
                st.error.clear();
                Ok(0)
            }
            Err(e) => {
                if verbose != 0 {
                    eprintln!("Unable to connect with connect string: {}: {e}", o.spec);
                }
                st.error.set(&e);
                Err(e)
            }
        }
    })
}

/// NDB's `wait_until_ready(timeout_for_first_alive, timeout_after_first_alive)`
/// (seconds): 0 when every data node is up, 1 when some are once the second timeout
/// passed, -1 when none came up within the first (or not connected). The embedded
/// cluster is ready as soon as connect returned.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_wait_until_ready(
    conn: *mut rndb_cluster_connection,
    timeout_for_first_alive: c_int,
    timeout_after_first_alive: c_int,
) -> c_int {
    guard("rndb_cluster_connection_wait_until_ready", || {
        let (h, o) = conn_ref(conn)?;
        let r = match engine_of(h) {
            Ok(Engine::Direct(c)) if !c.is_closed() => Ok(0),
            Ok(Engine::Direct(_)) => Err(codes::cluster_closed()),
            Ok(Engine::Remote(r)) => {
                wait_remote_ready(&r, timeout_for_first_alive, timeout_after_first_alive)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &r {
            o.lock().error.set(e);
        }
        r
    })
}

/// `wait_until_ready` of a remote cluster (see `rndb_cluster_connection_wait_until_ready`).
fn wait_remote_ready(r: &RemoteCluster, first_s: c_int, after_s: c_int) -> Result<c_int> {
    let all: usize = r.node_groups().iter().map(Vec::len).sum();
    let poll = Duration::from_millis(50);
    let ask = Duration::from_secs(2);
    let started = || r.started_nodes(ask).map(|s| s.len()).unwrap_or(0);
    let first = Instant::now() + Duration::from_secs(first_s.max(0) as u64);
    while started() == 0 {
        if Instant::now() >= first {
            return Err(codes::cluster_closed()
                .detail(format!("no data node is started after {first_s} s")));
        }
        std::thread::sleep(poll);
    }
    let after = Instant::now() + Duration::from_secs(after_s.max(0) as u64);
    while started() < all {
        if Instant::now() >= after {
            return Ok(1);
        }
        std::thread::sleep(poll);
    }
    Ok(0)
}

/// Waits until the commit with GCI `gci` (from `rndb_transaction_get_gci`) is on disk on
/// every data node, at most `timeout_ms` milliseconds. NDB API has no such call (a
/// commit there becomes durable at some later global checkpoint). Returns 0 when
/// durable; -1 with error 4008 (unknown result) after the timeout, or when not connected.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_wait_durable(
    conn: *mut rndb_cluster_connection,
    gci: u64,
    timeout_ms: u32,
) -> c_int {
    guard("rndb_cluster_connection_wait_durable", || {
        let (h, o) = conn_ref(conn)?;
        let r = match engine_of(h) {
            Ok(Engine::Direct(c)) => {
                c.wait_durable(gci, Duration::from_millis(u64::from(timeout_ms)))
            }
            Ok(Engine::Remote(r)) => {
                r.wait_durable(gci, Duration::from_millis(u64::from(timeout_ms)))
            }
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => Ok(0),
            Err(e) => {
                o.lock().error.set(&e);
                Err(e)
            }
        }
    })
}

/// The connection's last error (NDB's get_latest_error / get_latest_error_msg). Never
/// NULL: for a bad handle, the thread's last error.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_get_error(
    conn: *const rndb_cluster_connection,
) -> *const rndb_error {
    match conn_ref(conn) {
        Ok((_, o)) => o.lock().error.ptr(),
        Err(e) => {
            crate::error::set_last(&e);
            crate::error::last_ptr()
        }
    }
}

/// Number of data nodes of the connected cluster (NDB's no_db_nodes), -1 when not
/// connected.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_no_db_nodes(
    conn: *const rndb_cluster_connection,
) -> c_int {
    guard("rndb_cluster_connection_no_db_nodes", || {
        let (h, _) = conn_ref(conn)?;
        Ok(match engine_of(h)? {
            Engine::Direct(c) => c.data_node_ids().len(),
            Engine::Remote(r) => r.node_groups().iter().map(Vec::len).sum(),
        } as c_int)
    })
}

/// NDB's `set_name`: accepted and ignored (rndb_mgmd does not list API names).
/// Returns 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_cluster_connection_set_name(
    conn: *mut rndb_cluster_connection,
    name: *const c_char,
) -> c_int {
    guard("rndb_cluster_connection_set_name", || {
        conn_ref(conn)?;
        // SAFETY: a NUL-terminated string from the caller.
        unsafe { cstr(name, "name") }?;
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectstrings() {
        assert_eq!(
            parse_spec("embedded").ok(),
            Some(Spec::Embedded {
                config: None,
                datadir: None,
                params: vec![],
                distributed: true,
            })
        );
        assert_eq!(
            parse_spec("LOCAL;DataMemory=32M").ok(),
            Some(Spec::Embedded {
                config: None,
                datadir: None,
                params: vec![("DataMemory".into(), "32M".into())],
                distributed: true,
            })
        );
        // A network of this process named by number is a management server's address.
        assert_eq!(
            parse_spec("local=3,127.0.0.1:1186").ok(),
            Some(Spec::Remote("local=3,127.0.0.1:1186".into()))
        );
        assert_eq!(
            parse_spec(" Direct;datadir=/tmp/x; config = a.ini ;DataMemory=64M").ok(),
            Some(Spec::Embedded {
                config: Some("a.ini".into()),
                datadir: Some("/tmp/x".into()),
                params: vec![("DataMemory".into(), "64M".into())],
                distributed: false,
            })
        );
        assert_eq!(
            parse_spec("mgm1:1186").ok(),
            Some(Spec::Remote("mgm1:1186".into()))
        );
        assert!(parse_spec("embedded;junk").is_err());
        assert!(parse_spec("direct;junk").is_err());
        // Nobody listens on port 1 of loopback.
        let e = start("127.0.0.1:1", Duration::from_millis(300))
            .err()
            .map(|e| e.code);
        assert_eq!(e, Some(4009));
    }
}
