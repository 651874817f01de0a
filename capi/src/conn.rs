//! Cluster connections (Ndb_cluster_connection): the connectstring, and the embedded
//! cluster it starts.
//!
//! Connectstrings: `embedded` starts NDB's default cluster (two data nodes,
//! NoOfReplicas=2) inside the process; `embedded;config=PATH` reads a config.ini;
//! `embedded;datadir=PATH` gives the data nodes a file-system path; any other
//! `;Name=value` sets a data node parameter by NDB's name (`embedded;DataMemory=256M`).
//! NULL or "" means the NDB_CONNECTSTRING environment variable, else `embedded`.
//! `host:port` (a management server) is refused for now with the reason: the data path
//! over TCP exists (`rndb_core::cluster::remote`, used by Python's `rndb.connect`), but
//! this API's operations run on the embedded engine only.

use crate::error::{ErrorStore, guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind, Registry};
use crate::{cstr, rndb_cluster_connection};
use rndb_core::api::Cluster;
use rndb_core::config::ClusterConfig;
use rndb_core::error::{NdbError, Result, codes};
use std::ffi::{c_char, c_int};
use std::path::PathBuf;
use std::sync::Mutex;

pub(crate) struct ConnState {
    pub cluster: Option<Cluster>,
    pub error: ErrorStore,
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

/// The running cluster of a connection.
pub(crate) fn cluster_of(h: Handle) -> Result<Cluster> {
    let o = CONNS
        .get(h)
        .map_err(|e| handle_error(Kind::Connection, e))?;
    // SAFETY: as in conn_ref.
    let o = unsafe { &*o };
    o.lock().cluster.clone().ok_or_else(not_connected)
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
    },
    Remote(String),
}

pub(crate) fn parse_spec(s: &str) -> Result<Spec> {
    let s = s.trim();
    let mut parts = s.split(';').map(str::trim);
    let first = parts.next().unwrap_or("");
    if !first.eq_ignore_ascii_case("embedded") {
        return Ok(Spec::Remote(s.to_string()));
    }
    let (mut config, mut datadir, mut params) = (None, None, Vec::new());
    for p in parts.filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            codes::bad_config(format!(
                "connectstring '{s}': '{p}' is not NAME=VALUE (embedded;config=PATH;datadir=PATH;Parameter=value)"
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
    })
}

fn start(spec: &str) -> Result<Cluster> {
    match parse_spec(spec)? {
        Spec::Remote(s) => Err(codes::unsupported(format!(
            "connectstring '{s}' names a management server: the C/C++ API does not reach \
             rndbd data nodes yet (Python's rndb.connect does); use 'embedded' (optionally \
             'embedded;datadir=PATH;config=PATH') to run the cluster inside this process"
        ))),
        Spec::Embedded {
            config,
            datadir,
            params,
        } => {
            let mut cfg = match &config {
                Some(path) => ClusterConfig::from_file(path).map_err(NdbError::from)?,
                None => ClusterConfig::embedded_default(),
            };
            for (k, v) in &params {
                cfg.set_data_node_param(k, v).map_err(NdbError::from)?;
            }
            match datadir {
                Some(d) => Cluster::embedded_in(cfg, d),
                None => Cluster::embedded(cfg),
            }
        }
    }
}

/// Creates a cluster connection object, NDB's `Ndb_cluster_connection(connectstring)`.
/// Nothing is started until `rndb_cluster_connection_connect`. `connectstring`:
/// "embedded", "embedded;config=PATH;datadir=PATH;Parameter=value...", NULL or "" for
/// the NDB_CONNECTSTRING environment variable (else "embedded"); "host:port" is
/// accepted here and refused by connect (not available yet). Free with
/// `rndb_cluster_connection_free`.
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
                error: ErrorStore::new(),
            }),
        };
        let h = CONNS
            .insert(obj)
            .map_err(|_| codes::bad_argument("too many connection objects"))?;
        Ok(h.ptr())
    })
}

/// Frees a connection; the embedded cluster it started is shut down (every page
/// freed). `rndb_ndb` objects still open fail afterwards with error 4009. Returns 0, or
/// -1 for a NULL or already freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_free(conn: *mut rndb_cluster_connection) -> c_int {
    guard("rndb_cluster_connection_free", || {
        let h = Handle::decode(conn, &[Kind::Connection])
            .map_err(|e| handle_error(Kind::Connection, e))?;
        let obj = CONNS
            .remove(h)
            .map_err(|e| handle_error(Kind::Connection, e))?;
        if let Some(c) = obj.lock().cluster.take() {
            c.shutdown();
        }
        Ok(0)
    })
}

/// Connects, NDB's `connect(no_retries, retry_delay_in_seconds, verbose)`: for an
/// embedded connectstring, starts the cluster in this process. Returns 0 on success
/// (also when already connected), -1 on failure (bad config.ini, a management server
/// connectstring...) with the error in `rndb_cluster_connection_get_error`. `verbose`
/// prints the failure to stderr.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_connect(
    conn: *mut rndb_cluster_connection,
    no_retries: c_int,
    retry_delay_in_seconds: c_int,
    verbose: c_int,
) -> c_int {
    let _ = (no_retries, retry_delay_in_seconds);
    guard("rndb_cluster_connection_connect", || {
        let (_, o) = conn_ref(conn)?;
        let mut st = o.lock();
        if st.cluster.is_some() {
            return Ok(0);
        }
        match start(&o.spec) {
            Ok(c) => {
                st.cluster = Some(c);
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

/// NDB's `wait_until_ready(timeout_for_first_alive, timeout_after_first_alive)`: 0 when
/// the data nodes are up (the embedded cluster is ready as soon as connect returned),
/// -1 when not connected.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_cluster_connection_wait_until_ready(
    conn: *mut rndb_cluster_connection,
    timeout_for_first_alive: c_int,
    timeout_after_first_alive: c_int,
) -> c_int {
    let _ = (timeout_for_first_alive, timeout_after_first_alive);
    guard("rndb_cluster_connection_wait_until_ready", || {
        let (h, o) = conn_ref(conn)?;
        match cluster_of(h) {
            Ok(c) if !c.is_closed() => Ok(0),
            Ok(_) => Err(codes::cluster_closed()),
            Err(e) => {
                o.lock().error.set(&e);
                Err(e)
            }
        }
    })
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
        let r = cluster_of(h).and_then(|c| {
            c.wait_durable(gci, std::time::Duration::from_millis(u64::from(timeout_ms)))
        });
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
        Ok(cluster_of(h)?.data_node_ids().len() as c_int)
    })
}

/// NDB's `set_name`: accepted and ignored (there is no management server to show it).
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
                params: vec![]
            })
        );
        assert_eq!(
            parse_spec(" Embedded;datadir=/tmp/x; config = a.ini ;DataMemory=64M").ok(),
            Some(Spec::Embedded {
                config: Some("a.ini".into()),
                datadir: Some("/tmp/x".into()),
                params: vec![("DataMemory".into(), "64M".into())]
            })
        );
        assert_eq!(
            parse_spec("mgm1:1186").ok(),
            Some(Spec::Remote("mgm1:1186".into()))
        );
        assert!(parse_spec("embedded;junk").is_err());
        let e = start("localhost:1186").err().map(|e| e.code);
        assert_eq!(e, Some(4003));
    }
}
