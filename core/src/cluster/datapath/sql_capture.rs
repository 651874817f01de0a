//! DML from API nodes (`SqlCaptureReq`): the statement runs on this node's replicas in
//! a transaction that is rolled back (`sql::capture`), and the rows it would change,
//! with their committed and new images, go back to the API node, which makes the
//! change through a TC (`cluster::remote_sql`): replicated to every replica and locked
//! on the primaries like any key operation.
//!
//! With one node group this node holds a replica of every partition, so the statement
//! sees every row. With several it sees its own group's rows only (the other groups'
//! partitions are empty here): the API node captures the statement on one node of each
//! group and keeps from each what that group owns (`remote_sql.rs`), so the answer
//! carries the result's counts and the first AUTO_INCREMENT value generated, and the
//! request a floor for those values. A statement runs on a capture thread, never on a
//! worker: it may wait for a row lock that a worker's transaction holds. A capture
//! thread, its statement done, waits [`CAPTURE_THREAD_IDLE`] for the next one before it
//! ends ([`CaptureThreads`]: a statement goes to a waiting thread, else to a new one),
//! so statements one after another do not pay a thread's creation each. At most
//! [`MAX_CAPTURES`] run at once (4006, temporary, beyond); an answer larger than a
//! frame is refused (233: fewer rows per statement).

use super::{DataPath, Threading, err_parts};
use crate::error::{Result, codes};
use crate::sql::{CaptureInputs, CapturedRow, OverlayRow, Session, SqlResult};
use crate::transport::NodeId;
use crate::transport::data::{DataMsg, RowChange};
use crate::transport::frame::MAX_PAYLOAD_BYTES;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Statements captured at once on one data node.
pub const MAX_CAPTURES: usize = 4;
/// How long a capture thread waits for another statement before it ends.
pub const CAPTURE_THREAD_IDLE: Duration = Duration::from_secs(2);

/// A statement for a capture thread.
struct CaptureJob {
    api: NodeId,
    req: u64,
    database: String,
    sql: String,
    inputs: CaptureRequest,
}

/// The hand-off to capture threads: a rendezvous channel, so a statement is given to
/// a thread only if one is waiting for it (one waits at a time, holding the receiver's
/// lock; the others of an idle moment wait for the lock). Threads hold the data path
/// weakly while they wait, and end when it is gone.
pub(super) struct CaptureThreads {
    tx: SyncSender<CaptureJob>,
    rx: Arc<Mutex<Receiver<CaptureJob>>>,
}

impl CaptureThreads {
    pub(super) fn new() -> CaptureThreads {
        let (tx, rx) = sync_channel(0);
        CaptureThreads {
            tx,
            rx: Arc::new(Mutex::new(rx)),
        }
    }
}

/// A capture thread: `first`, then each statement handed to it while it waits.
fn capture_thread(dp: Weak<DataPath>, rx: Arc<Mutex<Receiver<CaptureJob>>>, first: CaptureJob) {
    let mut job = first;
    loop {
        {
            let Some(me) = dp.upgrade() else { return };
            let _slot = CaptureSlot(&me);
            me.capture_and_answer(job.api, job.req, &job.database, &job.sql, job.inputs);
        }
        let next = rx.lock().recv_timeout(CAPTURE_THREAD_IDLE);
        job = match next {
            Ok(j) => j,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        };
    }
}

/// One of the [`MAX_CAPTURES`] slots, given back when dropped (also while unwinding).
struct CaptureSlot<'a>(&'a DataPath);

impl Drop for CaptureSlot<'_> {
    fn drop(&mut self) {
        self.0.captures_running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Room left in a frame for everything but the row changes' bytes.
const FRAME_SLACK_BYTES: usize = 64 << 10;

impl DataPath {
    /// `SqlCaptureReq` from API node `api`: answered by `SqlCaptureConf`.
    pub(super) fn on_sql_capture(
        &self,
        api: NodeId,
        req: u64,
        database: String,
        sql: String,
        inputs: CaptureRequest,
    ) {
        if let Err(e) = self.check_api_access(api) {
            return self.send(api, capture_error(req, &e));
        }
        // A statement captured over replicas that are not up to date would change rows
        // from stale images (4035, temporary: the client asks again).
        if !self.is_ready() {
            return self.send(api, capture_error(req, &super::not_ready(self.me)));
        }
        if self.captures_running.fetch_add(1, Ordering::AcqRel) >= MAX_CAPTURES {
            self.captures_running.fetch_sub(1, Ordering::AcqRel);
            let e = codes::out_of_transactions(format!(
                "data node {} runs {MAX_CAPTURES} SQL statements that change rows already",
                self.me
            ));
            return self.send(api, capture_error(req, &e));
        }
        if self.threading == Threading::Inline || self.me_arc().is_none() {
            let _slot = CaptureSlot(self);
            return self.capture_and_answer(api, req, &database, &sql, inputs);
        }
        let job = CaptureJob {
            api,
            req,
            database,
            sql,
            inputs,
        };
        // A waiting thread takes it; else a new thread.
        let job = match self.capture_threads.tx.try_send(job) {
            Ok(()) => return,
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => job,
        };
        let (weak, rx) = (self.me_weak.lock().clone(), self.capture_threads.rx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("sql-capture-{}", self.me))
            .spawn(move || capture_thread(weak, rx, job));
        if let Err(e) = spawned {
            // The closure, and the slot it would have held, never ran.
            self.captures_running.fetch_sub(1, Ordering::AcqRel);
            let e = codes::internal(format!("SQL capture thread: {e}"));
            self.send(api, capture_error(req, &e));
        }
    }

    fn capture_and_answer(
        &self,
        api: NodeId,
        req: u64,
        database: &str,
        sql: &str,
        inputs: CaptureRequest,
    ) {
        let msg = match self.capture(req, database, sql, inputs) {
            Ok(m) => m,
            Err(e) => capture_error(req, &e),
        };
        self.send(api, msg);
    }

    fn capture(
        &self,
        req: u64,
        database: &str,
        sql: &str,
        inputs: CaptureRequest,
    ) -> Result<DataMsg> {
        let mut session = Session::new(self.engine.ndb(database));
        session.set_session_vars(&inputs.vars);
        let (result, rows) = session.capture(
            sql,
            CaptureInputs {
                auto_increment_floor: inputs.auto_increment_floor,
                overlay: &inputs.overlay,
                given_rows: inputs.given_rows,
            },
        )?;
        let (affected, info, last_insert_id) = match result {
            SqlResult::Affected {
                rows,
                info,
                last_insert_id,
            } => (rows, info.unwrap_or_default(), last_insert_id.unwrap_or(0)),
            SqlResult::Rows { .. } => (0, String::new(), 0),
        };
        let msg = DataMsg::SqlCaptureConf {
            req,
            code: 0,
            class: 0,
            text: String::new(),
            changes: rows.into_iter().map(row_change).collect(),
            affected,
            info,
            last_insert_id,
            mysql_code: 0,
        };
        if msg.encode_body().len() + FRAME_SLACK_BYTES > MAX_PAYLOAD_BYTES {
            return Err(codes::too_many_operations().detail(format!(
                "the rows this statement changes take more than one message ({} MiB); \
                 change fewer rows per statement",
                MAX_PAYLOAD_BYTES >> 20
            )));
        }
        Ok(msg)
    }
}

/// What an `SqlCaptureReq` gives the statement besides its text (`sql::CaptureInputs`).
pub(super) struct CaptureRequest {
    pub auto_increment_floor: u64,
    pub overlay: Vec<OverlayRow>,
    pub given_rows: Option<Vec<Vec<crate::schema::Value>>>,
    /// The client session's variables, which the statement reads.
    pub vars: crate::sql::SessionVars,
}

fn row_change(r: CapturedRow) -> RowChange {
    RowChange {
        database: r.table.database.clone(),
        table: r.table.def.name.clone(),
        key: r.key,
        before: r.before,
        after: r.after,
    }
}

fn capture_error(req: u64, e: &crate::error::NdbError) -> DataMsg {
    let (code, class, text) = err_parts(e);
    DataMsg::SqlCaptureConf {
        req,
        code,
        class,
        text,
        changes: Vec::new(),
        affected: 0,
        info: String::new(),
        last_insert_id: 0,
        mysql_code: e.mysql_code,
    }
}
