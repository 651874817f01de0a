//! Ndb objects: the database they work in, their transactions (started, closed,
//! prepared for asynchronous execution, polled) and their dictionary.
//!
//! An Ndb runs on the engine of its connection, found at its first use: the embedded
//! cluster's `Ndb` (`core`) or a remote cluster (`remote`, see the `remote` module);
//! never both.

use crate::batch::{Scratch, run_fast_reads, run_record_batch};
use crate::conn::{Engine, conn_ref, engine_of, not_connected};
use crate::error::{ErrorStore, c_string, guard, handle_error, rndb_error};
use crate::handle::{Handle, Kind, LiveSlot, Registry};
use crate::remote::{RemoteNdb, execute_prepared_remote};
use crate::txn::{Completion, NdbPtr, TXS, TxObj, TxStatus};
use crate::{cstr, rndb_cluster_connection, rndb_ndb, rndb_table, rndb_transaction};
use rndb_core::api::Ndb;
use rndb_core::error::{ErrorClassification, NdbError, Result, codes};
use rndb_core::sql::Session;
use std::ffi::{CString, c_char, c_int};

pub(crate) struct NdbObj {
    pub conn: Handle,
    pub database: CString,
    pub core: Option<Ndb>,
    /// The remote cluster, for a connection to a management server.
    pub remote: Option<RemoteNdb>,
    pub dict: Option<Handle>,
    pub error: ErrorStore,
    /// Retired transaction slots of this Ndb, reused by startTransaction.
    pub tx_free: Vec<u32>,
    /// The first slots of this Ndb's runs of `TX_RUN` transaction slots, open or
    /// retired (rndb_ndb_free closes those still open and releases the runs).
    pub tx_runs: Vec<u32>,
    /// How many transactions are open.
    pub n_open: usize,
    pub max_transactions: usize,
    /// Prepared by executeAsynchPrepare, not yet sent.
    pub prepared: Vec<Handle>,
    /// Executed, callbacks not yet run.
    pub completed: Vec<Completion>,
    pub scratch: Scratch,
    /// The transactions of the batch `execute_prepared` is running (no allocation per
    /// batch; only valid during that call).
    pub batch_txs: TxBatch,
    /// Spare buffers of `prepared` and `completed` (no allocation per batch).
    pub spare_prepared: Vec<Handle>,
    pub spare_completed: Vec<Completion>,
    pub session: Option<Session>,
    pub next_tx: u64,
}

/// Pointers to the transactions of one batch (see `NdbObj::batch_txs`).
pub(crate) struct TxBatch(Vec<*mut TxObj>);

// Only dereferenced inside `execute_prepared`, by the thread using the Ndb.
unsafe impl Send for TxBatch {}

pub(crate) static NDBS: Registry<NdbObj> = Registry::new(Kind::Ndb);

/// Transaction objects are allocated per Ndb in runs of this many adjacent slots (see
/// the `handle` module notes).
const TX_RUN: u32 = 32;

pub(crate) fn release_registries() {
    NDBS.release_all_memory();
}

impl NdbObj {
    /// The engine's Ndb, made when the connection is up.
    #[inline(always)]
    pub fn core(&mut self) -> Result<&Ndb> {
        if self.core.is_none() {
            return self.make_core();
        }
        self.core.as_ref().ok_or_else(not_connected)
    }

    #[cold]
    #[inline(never)]
    fn make_core(&mut self) -> Result<&Ndb> {
        self.remote_engine()?;
        self.core.as_ref().ok_or_else(|| {
            codes::internal("an Ndb of a management server connection has no embedded engine")
        })
    }

    /// Finds the engine at the first use: Some for a remote cluster, None for the
    /// embedded one (then `core` is set).
    pub fn remote_engine(&mut self) -> Result<Option<&mut RemoteNdb>> {
        if self.core.is_some() {
            return Ok(None);
        }
        if self.remote.is_none() {
            match engine_of(self.conn).map_err(|_| not_connected())? {
                Engine::Direct(cluster) => {
                    let db = self.database.to_str().unwrap_or("def");
                    self.core = Some(cluster.ndb(db));
                    return Ok(None);
                }
                Engine::Remote(r) => self.remote = Some(RemoteNdb::new(r)),
            }
        }
        Ok(self.remote.as_mut())
    }

    /// The database name.
    pub fn db(&self) -> &str {
        self.database.to_str().unwrap_or("def")
    }

    /// A table of the Ndb's database, on either engine.
    pub fn table(&mut self, name: &str) -> Result<std::sync::Arc<rndb_core::api::TableRuntime>> {
        let db = self.db().to_string();
        match self.remote_engine()? {
            Some(r) => r.table(&db, name),
            None => self.core()?.table(name),
        }
    }

    pub fn fail(&mut self, e: NdbError) -> NdbError {
        self.error.set(&e);
        e
    }
}

/// The Ndb object a handle names.
#[inline(always)]
pub(crate) fn ndb_mut<'a>(p: *const rndb_ndb) -> Result<(Handle, &'a mut NdbObj)> {
    let h = Handle::decode(p, &[Kind::Ndb]).map_err(|e| handle_error(Kind::Ndb, e))?;
    ndb_by_handle(h)
}

#[inline(always)]
pub(crate) fn ndb_by_handle<'a>(h: Handle) -> Result<(Handle, &'a mut NdbObj)> {
    let o = NDBS.get(h).map_err(|e| handle_error(Kind::Ndb, e))?;
    // SAFETY: live slot; an Ndb is used by one thread at a time, and no other reference
    // to it is held across this call.
    Ok((h, unsafe { &mut *o }))
}

/// The transaction a handle names, with a compact single read turned into operation 0
/// (see the `single` module): what every call but the hot path's few uses.
#[inline(always)]
pub(crate) fn tx_by_handle<'a>(h: Handle) -> Result<&'a mut TxObj> {
    let t = tx_by_handle_raw(h)?;
    if t.single_active {
        t.materialize_single();
    }
    t.dirty = true;
    Ok(t)
}

/// The transaction a handle names, as it is: a compact single read stays one. Only for
/// the calls the `single` module lists.
#[inline(always)]
pub(crate) fn tx_by_handle_raw<'a>(h: Handle) -> Result<&'a mut TxObj> {
    let o = TXS
        .get(h.with(Kind::Transaction, 0))
        .map_err(|e| handle_error(h.kind, e))?;
    // SAFETY: as for ndb_by_handle (a transaction belongs to its Ndb's thread).
    Ok(unsafe { &mut *o })
}

/// Starts a transaction of Ndb `nh`. Inlined (as the other helpers of the hot path):
/// a `Result` returned from a call goes through memory, and reading it back right after
/// the callee wrote it stalls on store forwarding.
#[inline(always)]
pub(crate) fn start_tx(nh: Handle, n: &mut NdbObj) -> Result<Handle> {
    if n.core.is_none() {
        n.remote_engine()?;
    }
    if let Some(core) = &n.core
        && core.cluster().is_closed()
    {
        return Err(codes::cluster_closed());
    }
    if n.n_open >= n.max_transactions {
        return Err(NdbError::new(
            4006,
            ErrorClassification::TemporaryResourceError,
            "Connect failure - out of connection objects (increase MaxNoOfConcurrentTransactions)",
        )
        .detail(format!(
            "{} transactions are open, Ndb::init allowed {}",
            n.n_open, n.max_transactions
        )));
    }
    n.next_tx += 1;
    let id = ((nh.slot as u64) << 40) | n.next_tx;
    if n.tx_free.is_empty() {
        new_tx_run(n)?;
    }
    let revived = n.tx_free.pop().and_then(|i| TXS.revive(i));
    let Some((h, p)) = revived else {
        return Err(codes::internal(
            "a free transaction slot of this Ndb is live",
        ));
    };
    // SAFETY: just revived by this Ndb's thread.
    let tx = unsafe { &mut *p };
    tx.reset(nh, NdbPtr(n as *mut NdbObj), id);
    n.n_open += 1;
    Ok(h)
}

/// Gives Ndb `n` a new run of free transaction objects (taken lowest first).
#[cold]
#[inline(never)]
fn new_tx_run(n: &mut NdbObj) -> Result<()> {
    let first = TXS
        .insert_run(TX_RUN, TxObj::new)
        .ok_or_else(|| codes::bad_argument("too many transaction objects"))?;
    n.tx_runs.push(first);
    n.tx_free.extend((first..first + TX_RUN).rev());
    Ok(())
}

/// Closes transaction `th` of Ndb `nh` (rolled back if still open).
#[inline(always)]
pub(crate) fn close_tx(nh: Handle, n: &mut NdbObj, th: Handle) -> Result<()> {
    let (p, live) = TXS
        .get_live(th.with(Kind::Transaction, 0))
        .map_err(|e| handle_error(th.kind, e))?;
    // SAFETY: as for `tx_by_handle_raw`.
    let tx = unsafe { &mut *p };
    if tx.ndb != nh {
        return Err(codes::bad_argument(
            "the transaction belongs to another rndb_ndb: close it with the Ndb that started it",
        ));
    }
    close_tx_obj(n, th, tx, live);
    Ok(())
}

/// Closes live transaction `tx` (handle `th`, slot `live`) of Ndb `n`. A compact single
/// read needs no materializing: it is dropped with the transaction.
#[inline(always)]
fn close_tx_obj(n: &mut NdbObj, th: Handle, tx: &mut TxObj, live: LiveSlot<'_>) {
    tx.single_active = false;
    tx.close_core();
    tx.status = TxStatus::Aborted;
    if tx.asynch.take().is_some() {
        // Prepared but never sent: it will not run.
        n.prepared.retain(|h| *h != th);
    }
    n.n_open = n.n_open.saturating_sub(1);
    n.tx_free.push(live.retire());
}

/// Executes prepared transactions in order; their completions go to `n.completed`.
pub(crate) fn execute_prepared(n: &mut NdbObj, list: &[Handle]) {
    if n.core.is_none() && matches!(n.remote_engine(), Ok(Some(_))) {
        execute_prepared_remote(n, list);
        return;
    }
    if n.core().is_err() {
        let done = &mut n.completed;
        for &h in list {
            if let Ok(tx) = tx_by_handle(h) {
                let a = tx.asynch.take();
                tx.fail(None, not_connected());
                if let Some(a) = a {
                    done.push(Completion {
                        tx: h,
                        result: -1,
                        cb: a.cb,
                        arg: a.arg,
                    });
                }
            }
        }
        return;
    }
    let NdbObj {
        core,
        scratch,
        completed: done,
        batch_txs: TxBatch(batch_txs),
        ..
    } = n;
    let Some(core) = core.as_ref() else {
        return;
    };
    if run_record_batch(core, list, batch_txs, scratch, done) {
        return;
    }
    let mut i = 0;
    while i < list.len() {
        let h = list[i];
        let Ok(tx) = tx_by_handle(h) else {
            i += 1;
            continue;
        };
        if !tx
            .asynch
            .as_ref()
            .is_some_and(|a| tx.fast_reads_eligible(a.exec))
        {
            // Executed on its own (writes, scans, locking reads), its handle resolved
            // once.
            i += 1;
            let Some(a) = tx.asynch.take() else { continue };
            let r = tx.execute_slow(core, a.exec, a.abort);
            done.push(Completion {
                tx: h,
                result: if r.is_ok() { 0 } else { -1 },
                cb: a.cb,
                arg: a.arg,
            });
            continue;
        }
        // A run of transactions that only do committed key reads, in one batch; each
        // handle is resolved once.
        batch_txs.clear();
        batch_txs.push(tx as *mut TxObj);
        let mut j = i + 1;
        while j < list.len() {
            match tx_by_handle(list[j]) {
                Ok(tx)
                    if tx
                        .asynch
                        .as_ref()
                        .is_some_and(|a| tx.fast_reads_eligible(a.exec)) =>
                {
                    batch_txs.push(tx as *mut TxObj);
                    j += 1
                }
                _ => break,
            }
        }
        // SAFETY: distinct live transactions of this Ndb (a handle is prepared at most
        // once), used by this thread only; `&mut T` and `*mut T` have the same layout.
        let txs: &mut [&mut TxObj] = unsafe {
            std::slice::from_raw_parts_mut(
                batch_txs.as_mut_ptr().cast::<&mut TxObj>(),
                batch_txs.len(),
            )
        };
        run_fast_reads(core, txs, scratch);
        for (k, (tx, &h)) in txs.iter_mut().zip(&list[i..j]).enumerate() {
            let Some(a) = tx.asynch.take() else { continue };
            let ok = if scratch.served[k] {
                tx.finish_fast(a.exec, a.abort)
            } else {
                tx.execute_slow(core, a.exec, a.abort).is_ok()
            };
            done.push(Completion {
                tx: h,
                result: if ok { 0 } else { -1 },
                cb: a.cb,
                arg: a.arg,
            });
        }
        i = j;
    }
}

/// Executes every prepared transaction (callbacks due at the next poll).
pub(crate) fn send_prepared(n: &mut NdbObj) {
    let spare = std::mem::take(&mut n.spare_prepared);
    let mut list = std::mem::replace(&mut n.prepared, spare);
    execute_prepared(n, &list);
    list.clear();
    n.spare_prepared = list;
}

/// Creates an Ndb object for a database, NDB's `Ndb(&cluster_connection, database)`.
/// The connection need not be connected yet (`rndb_ndb_init` needs it). `database`
/// NULL or "" means "def". Free with `rndb_ndb_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_ndb_create(
    conn: *mut rndb_cluster_connection,
    database: *const c_char,
) -> *mut rndb_ndb {
    guard("rndb_ndb_create", || {
        let (ch, _) = conn_ref(conn)?;
        let db = if database.is_null() {
            "def"
        } else {
            // SAFETY: a NUL-terminated string from the caller.
            let d = unsafe { cstr(database, "database name") }?;
            if d.is_empty() { "def" } else { d }
        };
        let obj = NdbObj {
            conn: ch,
            database: c_string(db),
            core: None,
            remote: None,
            dict: None,
            error: ErrorStore::new(),
            tx_free: Vec::new(),
            tx_runs: Vec::new(),
            n_open: 0,
            max_transactions: 1024,
            prepared: Vec::new(),
            completed: Vec::new(),
            scratch: Scratch::default(),
            batch_txs: TxBatch(Vec::new()),
            spare_prepared: Vec::new(),
            spare_completed: Vec::new(),
            session: None,
            next_tx: 0,
        };
        let h = NDBS
            .insert(obj)
            .map_err(|_| codes::bad_argument("too many rndb_ndb objects"))?;
        Ok(h.ptr())
    })
}

/// Frees an Ndb object: its open transactions are closed (rolled back), its dictionary
/// and the table/index objects it returned are freed. Returns 0, -1 for a bad handle.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_free(ndb: *mut rndb_ndb) -> c_int {
    guard("rndb_ndb_free", || {
        let (h, n) = ndb_mut(ndb)?;
        let runs = std::mem::take(&mut n.tx_runs);
        for &first in &runs {
            for idx in first..first + TX_RUN {
                if let Some(th) = TXS.live(idx) {
                    let _ = close_tx(h, n, th);
                }
            }
        }
        n.tx_free.clear();
        for first in runs {
            // Every transaction of the run was closed above (a run's slots are all this
            // Ndb's); a live one would be kept, not freed under its handle.
            TXS.release_run(first, TX_RUN);
        }
        if let Some(d) = n.dict.take() {
            crate::dict::free_dict(d);
        }
        NDBS.remove(h).map_err(|e| handle_error(Kind::Ndb, e))?;
        Ok(0)
    })
}

/// NDB's `Ndb::init(maxNoOfTransactions)`: checks that the connection is up and sets
/// how many transactions may be open at once (default 1024; beyond, startTransaction
/// fails with error 4006). Returns 0, or -1 (not connected...).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_init(ndb: *mut rndb_ndb, max_no_of_transactions: c_int) -> c_int {
    guard("rndb_ndb_init", || {
        let (_, n) = ndb_mut(ndb)?;
        if let Err(e) = n.remote_engine() {
            return Err(n.fail(e));
        }
        if max_no_of_transactions > 0 {
            n.max_transactions = max_no_of_transactions as usize;
        }
        Ok(0)
    })
}

/// The database the Ndb object works in (NDB's getDatabaseName).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_get_database_name(ndb: *const rndb_ndb) -> *const c_char {
    guard("rndb_ndb_get_database_name", || {
        let (_, n) = ndb_mut(ndb)?;
        Ok(n.database.as_ptr())
    })
}

/// Changes the database (NDB's setDatabaseName). Returns 0 or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rndb_ndb_set_database_name(
    ndb: *mut rndb_ndb,
    name: *const c_char,
) -> c_int {
    guard("rndb_ndb_set_database_name", || {
        let (_, n) = ndb_mut(ndb)?;
        // SAFETY: a NUL-terminated string from the caller.
        let db = unsafe { cstr(name, "database name") }?;
        n.database = c_string(db);
        if let Some(c) = &mut n.core {
            c.set_database(db);
        }
        n.session = None;
        Ok(0)
    })
}

/// Starts a transaction, NDB's `startTransaction()`. NULL on failure (not connected,
/// too many open transactions: error 4006). Close it with
/// `rndb_ndb_close_transaction`.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_start_transaction(ndb: *mut rndb_ndb) -> *mut rndb_transaction {
    guard("rndb_ndb_start_transaction", || {
        let (h, n) = ndb_mut(ndb)?;
        match start_tx(h, n) {
            Ok(t) => Ok(t.ptr()),
            Err(e) => Err(n.fail(e)),
        }
    })
}

/// NDB's `startTransaction(table, keyData, keyLen)`: the hint (which data node should
/// coordinate) has no effect in the embedded cluster; the table is checked. NULL on
/// failure.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_start_transaction_hint(
    ndb: *mut rndb_ndb,
    table: *const rndb_table,
    key_data: *const c_char,
    key_len: u32,
) -> *mut rndb_transaction {
    let _ = (key_data, key_len);
    guard("rndb_ndb_start_transaction_hint", || {
        if !table.is_null() {
            crate::dict::table_runtime(table)?;
        }
        let (h, n) = ndb_mut(ndb)?;
        match start_tx(h, n) {
            Ok(t) => Ok(t.ptr()),
            Err(e) => Err(n.fail(e)),
        }
    })
}

/// Closes a transaction, NDB's `closeTransaction(tx)`: an open transaction is rolled
/// back; its operations, scans and rec attrs become invalid (using them afterwards is
/// an error, 4604). Returns 0, or -1 (bad or already closed handle).
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_close_transaction(
    ndb: *mut rndb_ndb,
    tx: *mut rndb_transaction,
) -> c_int {
    guard("rndb_ndb_close_transaction", || {
        // The usual case: a live transaction of this Ndb. Its Ndb is then live too (see
        // `NdbPtr`), so the Ndb is reached through the transaction, without a lookup.
        if let (Ok(nh), Ok(th)) = (
            Handle::decode(ndb, &[Kind::Ndb]),
            Handle::decode(tx, &[Kind::Transaction]),
        ) && let Ok((p, live)) = TXS.get_live(th.with(Kind::Transaction, 0))
        {
            // SAFETY: as for `tx_by_handle_raw`.
            let t = unsafe { &mut *p };
            if t.ndb == nh && !t.ndb_obj.0.is_null() {
                // SAFETY: see `NdbPtr`; the Ndb and the transaction are distinct objects.
                let n = unsafe { &mut *t.ndb_obj.0 };
                close_tx_obj(n, th, t, live);
                return Ok(0);
            }
        }
        let (h, n) = ndb_mut(ndb)?;
        let th = Handle::decode(tx, &[Kind::Transaction])
            .map_err(|e| handle_error(Kind::Transaction, e))?;
        match close_tx(h, n, th) {
            Ok(()) => Ok(0),
            Err(e) => Err(n.fail(e)),
        }
    })
}

/// The Ndb object's last error (NDB's getNdbError). Never NULL: for a bad handle, the
/// thread's last error.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_get_error(ndb: *const rndb_ndb) -> *const rndb_error {
    match ndb_mut(ndb) {
        Ok((_, n)) => n.error.ptr(),
        Err(e) => {
            crate::error::set_last(&e);
            crate::error::last_ptr()
        }
    }
}

/// NDB's `sendPreparedTransactions(forceSend)`: executes every transaction prepared
/// with `rndb_transaction_execute_asynch_prepare` (in order); their callbacks run at
/// the next `rndb_ndb_poll`. Returns 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_send_prepared_transactions(
    ndb: *mut rndb_ndb,
    force_send: c_int,
) -> c_int {
    let _ = force_send;
    guard("rndb_ndb_send_prepared_transactions", || {
        let (_, n) = ndb_mut(ndb)?;
        send_prepared(n);
        Ok(0)
    })
}

/// NDB's `pollNdb(ms, minNoOfEventsToWakeup)`: runs the callbacks of executed
/// transactions; returns how many completed (0 when none is outstanding), -1 on error.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_poll(ndb: *mut rndb_ndb, timeout_ms: c_int, min_events: c_int) -> c_int {
    let _ = (timeout_ms, min_events);
    guard("rndb_ndb_poll", || {
        let mut done = {
            let (_, n) = ndb_mut(ndb)?;
            let spare = std::mem::take(&mut n.spare_completed);
            std::mem::replace(&mut n.completed, spare)
        };
        // No registry borrow is held here: callbacks may use the API freely.
        for c in &done {
            c.call();
        }
        let count = done.len() as c_int;
        done.clear();
        // Give the buffer back (unless a callback freed the Ndb).
        if let Ok((_, n)) = ndb_mut(ndb) {
            n.spare_completed = done;
        }
        Ok(count)
    })
}

/// NDB's `sendPollNdb(ms, minNoOfEventsToWakeup, forceSend)`: executes every prepared
/// transaction and runs their callbacks (result 0 ok, -1 failed). Transactions that
/// only do committed primary-key reads are executed together through the engine's
/// batched read path. Returns the number of transactions completed, -1 on error.
#[unsafe(no_mangle)]
pub extern "C" fn rndb_ndb_send_poll(
    ndb: *mut rndb_ndb,
    timeout_ms: c_int,
    min_events: c_int,
    force_send: c_int,
) -> c_int {
    if rndb_ndb_send_prepared_transactions(ndb, force_send) != 0 {
        return -1;
    }
    rndb_ndb_poll(ndb, timeout_ms, min_events)
}
