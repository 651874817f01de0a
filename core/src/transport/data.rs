//! Messages of the data path (NDB's TCKEYREQ/LQHKEYREQ family, DICT and the schema
//! broadcast), carried as [`super::Message::Data`]: frame kinds 100..=149, bodies in
//! the schema codec's little-endian encoding (`crate::schema::codec`: values bit for
//! bit, table definitions whole). Byte layout: `docs/wire-format.md` "Data path".
//!
//! Limits: every list is at most [`MAX_LIST`] entries (an op batch is further bounded
//! by the frame's 16 MiB); a length that points past the payload is an error, never an
//! allocation of that size. Decoding never panics.

pub use super::data_scan::{ScanConf, ScanReq};
use super::data_sql::{dec_sql_results, enc_sql_results};
use super::frame::WireError;
use crate::schema::codec::{self, Decoder, Encoder};
use crate::schema::{TableDef, Value};
use crate::sql::SessionVars;

/// Largest count of any list in a data message.
pub const MAX_LIST: usize = 1 << 20;

/// A transaction id across the cluster: the coordinating data node and its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnKey {
    pub tc: u32,
    pub id: u64,
}

/// What a key operation does (NDB's operation types; reads carry their lock mode as in
/// `txn::LockMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpType {
    ReadCommitted = 0,
    ReadShared = 1,
    ReadExclusive = 2,
    Insert = 3,
    Update = 4,
    Write = 5,
    Delete = 6,
}

impl OpType {
    fn from_u8(v: u8) -> Result<OpType, WireError> {
        Ok(match v {
            0 => OpType::ReadCommitted,
            1 => OpType::ReadShared,
            2 => OpType::ReadExclusive,
            3 => OpType::Insert,
            4 => OpType::Update,
            5 => OpType::Write,
            6 => OpType::Delete,
            _ => return Err(WireError::BadValue("operation type")),
        })
    }

    pub fn is_read(self) -> bool {
        (self as u8) <= 2
    }
}

/// One key operation of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyOp {
    pub op: OpType,
    pub database: String,
    pub table: String,
    /// Primary-key values, in primary-key order.
    pub key: Vec<Value>,
    /// (column position, value) to set (writes).
    pub values: Vec<(u32, Value)>,
    /// Columns to return (reads; empty: every column).
    pub columns: Vec<u32>,
}

/// What one operation returned: a read's row (None: no row with that key).
pub type OpResult = Option<Vec<Value>>;

/// An operation of a round run with AO_IgnoreError that failed on its row (626 no such
/// row, 630 duplicate key, ...): it changed nothing, the round's other operations went
/// on. `op` is its index in the round.
#[derive(Debug, Clone, PartialEq)]
pub struct OpFailure {
    pub op: u32,
    pub code: u32,
    /// The error's `ErrorClassification`.
    pub class: u8,
    pub message: String,
}

fn enc_failures(e: &mut Encoder, failed: &[OpFailure]) {
    e.u32(failed.len() as u32);
    for f in failed {
        e.u32(f.op);
        e.u32(f.code);
        e.u8(f.class);
        e.str(&f.message);
    }
}

fn dec_failures(d: &mut Decoder<'_>) -> Result<Vec<OpFailure>, WireError> {
    let n = count(d, "failed operations")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(OpFailure {
            op: d.u32().map_err(bad)?,
            code: d.u32().map_err(bad)?,
            class: d.u8().map_err(bad)?,
            message: d.str().map_err(bad)?,
        });
    }
    Ok(out)
}

/// One value of a unique hash index a transaction wrote, for a primary's check of
/// the other node groups (`UniqueCheckReq`).
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueCheck {
    pub database: String,
    pub table: String,
    /// The index's position in the table's indexes.
    pub index: u32,
    /// The index's columns' values, in index order (none NULL).
    pub values: Vec<Value>,
}

/// What a `TcKeyReq` asks of its transaction once this round's operations ran
/// (NDB API's `ExecType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TcExec {
    /// Run the operations and keep the transaction open (its locks held) for more.
    NoCommit = 0,
    /// Run the operations, then commit everything the transaction did.
    Commit = 1,
    /// Abort everything the transaction did (the round carries no operations).
    Rollback = 2,
}

impl TcExec {
    fn from_u8(v: u8) -> Result<TcExec, WireError> {
        Ok(match v {
            0 => TcExec::NoCommit,
            1 => TcExec::Commit,
            2 => TcExec::Rollback,
            _ => return Err(WireError::BadValue("execute type")),
        })
    }
}

/// Where a transaction's state is, for a takeover query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TxnState {
    /// The node never saw it (or aborted and forgot it).
    Unknown = 0,
    Prepared = 1,
    Committed = 2,
}

/// A table definition on the wire (compared by its encoding: `TableDef` itself has
/// no equality).
#[derive(Debug, Clone)]
pub struct WireTableDef(pub Box<TableDef>);

impl PartialEq for WireTableDef {
    fn eq(&self, other: &Self) -> bool {
        let enc = |t: &TableDef| {
            let mut e = Encoder::new();
            codec::encode_table_def(&mut e, t);
            e.into_bytes()
        };
        enc(&self.0) == enc(&other.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum DataMsg {
    /// API → management server: the configuration and where the data nodes listen.
    ClusterReq,
    ClusterConf {
        config_text: String,
        nodes: Vec<(u32, String)>,
    },
    /// API → data node: SQL (DDL is applied on every live data node), run in a session
    /// that starts from the client's variables.
    SqlReq {
        req: u64,
        database: String,
        sql: String,
        vars: SessionVars,
    },
    /// Answer to `SqlReq` / `SchemaReq`: code 0 and the results (an API node's
    /// `SqlReq`: `results`; a data node's `SchemaReq`: `text`), or NDB's error.
    SqlConf {
        req: u64,
        code: u32,
        /// The error's `ErrorClassification` (0 with code 0).
        class: u8,
        text: String,
        /// The MySQL error number the SQL layer shows for the error (0: NDB's own).
        mysql_code: u32,
        /// The session's variables after the statement (None: it did not run in a
        /// session of variables, so they are unchanged).
        vars: Option<SessionVars>,
        /// Each statement's result, with its values (`data_sql`).
        results: Vec<crate::sql::SqlResult>,
    },
    /// Data node → data node: apply this DDL locally (in a session of the client's
    /// variables: `ndb_table_no_logging` makes the table on every node alike).
    SchemaReq {
        req: u64,
        database: String,
        sql: String,
        vars: SessionVars,
    },
    /// API → data node: a table's definition (as the dictionary has it).
    TableReq {
        req: u64,
        database: String,
        table: String,
    },
    TableConf {
        req: u64,
        code: u32,
        /// The error's `ErrorClassification` (0 with code 0).
        class: u8,
        message: String,
        def: Option<WireTableDef>,
    },
    /// API → a data node's TC: one round of a transaction. `txn` 0 begins a new one;
    /// otherwise it is the id the TC gave in its first `TcKeyConf` (the same node).
    TcKeyReq {
        req: u64,
        txn: u64,
        exec: TcExec,
        ops: Vec<KeyOp>,
        /// NDB API's AO_IgnoreError: an operation that fails on its row (no such row,
        /// duplicate key) fails alone, reported in `TcKeyConf::failed`; the others go on.
        ignore_errors: bool,
    },
    /// The round ran (NoCommit: the transaction stays open as `txn`), committed at
    /// every live replica (Commit: `gci`), or was rolled back; one result per op of
    /// the round.
    TcKeyConf {
        req: u64,
        txn: u64,
        gci: u64,
        results: Vec<OpResult>,
        /// The round's operations that failed alone (`TcKeyReq::ignore_errors`).
        failed: Vec<OpFailure>,
    },
    TcKeyRef {
        req: u64,
        code: u32,
        /// The error's `ErrorClassification` (0 with code 0).
        class: u8,
        message: String,
    },
    /// API → the primary's node: committed reads of many keys of one table.
    ReadReq {
        req: u64,
        database: String,
        table: String,
        columns: Vec<u32>,
        /// Keys flattened (primary-key columns per key).
        keys: Vec<Value>,
    },
    ReadConf {
        req: u64,
        code: u32,
        /// The error's `ErrorClassification` (0 with code 0).
        class: u8,
        message: String,
        found: Vec<bool>,
        /// `columns.len()` values per key (NULLs for keys not found).
        values: Vec<Value>,
    },
    /// API → a data node of each node group: open a committed-read scan
    /// (`transport::data_scan`); answered with its first batch.
    ScanReq(Box<ScanReq>),
    /// API → the scan's data node: the next batch.
    ScanNextReq {
        req: u64,
        scan: u64,
    },
    /// A batch (or the scan's error).
    ScanConf(Box<ScanConf>),
    /// API → the scan's data node: close it (no answer).
    ScanCloseReq {
        scan: u64,
    },
    /// TC → primary (`backup` false), primary → backup (`backup` true): prepare these
    /// operations (op index, op). A backup gets after-images only (Write or Delete).
    /// `round` counts the transaction's rounds from 1 (the TC's, which the primary
    /// passes on): a round at or below one already run is a duplicate.
    LqhPrepare {
        txn: TxnKey,
        backup: bool,
        round: u32,
        ops: Vec<(u32, KeyOp)>,
        /// The TC's round was sent with AO_IgnoreError (a primary's operations that
        /// fail on their row fail alone: `LqhPrepared::failed`); never for a backup.
        ignore_errors: bool,
    },
    /// Prepared (code 0, with the reads' results by op index) or refused; `backup`:
    /// a backup answers its primary (else a primary answers the TC).
    LqhPrepared {
        txn: TxnKey,
        backup: bool,
        round: u32,
        code: u32,
        /// The error's `ErrorClassification` (0 with code 0).
        class: u8,
        message: String,
        reads: Vec<(u32, OpResult)>,
        /// A primary's answer with several node groups: the unique values its part of
        /// the round wrote, for the TC to check in the other groups
        /// (`datapath::unique_check`).
        checks: Vec<UniqueCheck>,
        /// A primary's operations that failed alone (`LqhPrepare::ignore_errors`).
        failed: Vec<OpFailure>,
    },
    /// Commit (`backup`: a primary to its backup; else from the TC). The answer
    /// carries the same `backup`.
    /// `gci_hi`: the checkpoint number the TC committed in (0: none); a receiver
    /// behind it moves its own on first, so that no commit straddles a global cut.
    LqhCommit {
        txn: TxnKey,
        backup: bool,
        gci_hi: u32,
    },
    LqhCommitted {
        txn: TxnKey,
        backup: bool,
        gci: u64,
    },
    LqhAbort {
        txn: TxnKey,
    },
    /// With several node groups: a primary asks every up-to-date node of each other
    /// group whether its group holds any of the unique values `txn` wrote, committed
    /// or being written by another transaction (waited for briefly).
    UniqueCheckReq {
        txn: TxnKey,
        round: u32,
        checks: Vec<UniqueCheck>,
    },
    /// None of them (code 0), or 893 naming the index, or why it could not tell.
    UniqueCheckConf {
        txn: TxnKey,
        round: u32,
        code: u32,
        class: u8,
        message: String,
    },
    /// Takeover after a TC's failure: what does the receiver know of `txn`?
    TxnStateReq {
        txn: TxnKey,
    },
    TxnStateConf {
        txn: TxnKey,
        state: TxnState,
    },
    /// A node that joined a running cluster asks which nodes are up to date.
    ReadyQuery,
    /// The sender's up-to-date nodes, each with the order it became so.
    ReadySet {
        ready: Vec<(u32, u64)>,
    },
    /// Node restart (`cluster::datapath::copy`): the joining node asks an up-to-date
    /// node of its group for every row. A node that restored checkpoint `since_gci`
    /// of lineage `lineage` from its own files offers the tables it holds (`keep`,
    /// database and SHOW CREATE TABLE text each): of those the source sends in full
    /// only the rows changed after `since_gci` (0: no offer, every row in full).
    CopyReq {
        /// Grows with each attempt of the joining node; every copy message carries
        /// it, and messages of an older attempt are ignored.
        attempt: u64,
        since_gci: u32,
        lineage: u64,
        keep: Vec<(String, String)>,
    },
    /// Source to every live node: stop (`mark` false) or start (true) sending
    /// after-images to `node`; answered once no transaction from before is left.
    CopyMark {
        node: u32,
        mark: bool,
    },
    CopyMarked {
        node: u32,
        mark: bool,
    },
    /// Source to the joining node: the databases and tables, as SQL, to make anew.
    CopySchema {
        attempt: u64,
        statements: Vec<(String, String)>,
    },
    /// The joining node's answer to `CopySchema` and to each `CopyRows` (the source
    /// keeps a few batches in flight, so a slow joiner slows the copy, not the
    /// heartbeats).
    CopyAck {
        attempt: u64,
        code: u32,
        class: u8,
        message: String,
    },
    /// Source to the joining node: rows of one table, the first `full_rows` whole
    /// (every column), the rest their primary key only (unchanged since the offer's
    /// checkpoint: the joining node has them as they are).
    CopyRows {
        attempt: u64,
        database: String,
        table: String,
        full_rows: u32,
        rows: Vec<Vec<Value>>,
    },
    /// Source to the joining node, after a kept table's scan: buckets `first..` of the
    /// digest (of `buckets` in all) of the table's rows unchanged since the offer's
    /// checkpoint, each (row count, XOR of the rows' 128-bit key hashes)
    /// (`cluster::datapath::copy_digest`). The joining node compares each with its own
    /// and asks for the keys of the buckets that differ (`CopyRecheck`).
    CopyDigest {
        attempt: u64,
        database: String,
        table: String,
        buckets: u32,
        first: u32,
        entries: Vec<(u32, u128)>,
    },
    /// Joining node to the source: send the keys of the rows unchanged since the
    /// offer's checkpoint in these buckets of the table's digest (sent before the
    /// `CopyAck` of the digest's last part).
    CopyRecheck {
        attempt: u64,
        database: String,
        table: String,
        buckets: Vec<u32>,
    },
    /// API → data node: run this DML statement (INSERT, REPLACE, UPDATE, DELETE) on the
    /// node's replicas in a transaction, answer what it would change, and roll it back;
    /// the API node then makes the change through a TC (`cluster::remote_sql`).
    SqlCaptureReq {
        req: u64,
        database: String,
        sql: String,
        /// The INSERT's table hands out AUTO_INCREMENT values from at least this one
        /// (0: as it stands); with several node groups the API node makes every
        /// group's capture generate the same values.
        auto_increment_floor: u64,
        /// Rows the API node's session transaction wrote and has not committed, written
        /// first so that the statement sees them (`after` only; `before` is None).
        overlay: Vec<RowChange>,
        /// Rows the statement is given by the API node (several node groups): the keys
        /// an UPDATE or DELETE considers (its ORDER BY ... LIMIT; each read again under
        /// lock and checked against its WHERE), or the rows an INSERT ... SELECT
        /// inserts. None: it finds them itself.
        given_rows: Option<Vec<Vec<Value>>>,
        /// The client session's variables (the statement reads them; what it assigns
        /// is not sent back).
        vars: SessionVars,
    },
    /// Answer to `SqlCaptureReq`: code 0, the statement's rendered result and the rows
    /// it changed (in the order it first changed them), or NDB's error.
    SqlCaptureConf {
        req: u64,
        code: u32,
        class: u8,
        text: String,
        changes: Vec<RowChange>,
        /// The statement's result, for the API node to add up several captures:
        /// rows affected, MySQL's info line ("" when none), the first AUTO_INCREMENT
        /// value it generated (0: none).
        affected: u64,
        info: String,
        last_insert_id: u64,
        /// The MySQL error number the SQL layer shows for the error (0: NDB's own).
        mysql_code: u32,
    },
    /// Source to the joining node: every row was sent; `seq` orders the node among the
    /// up-to-date ones; `lineage` is the source's (the joining node takes it).
    CopyDone {
        attempt: u64,
        seq: u64,
        lineage: u64,
    },
    /// The copy cannot go on (the joining node starts it again).
    CopyAbort {
        attempt: u64,
        reason: String,
    },
    /// The joining node is up to date (to every live node).
    NodeReady {
        node: u32,
        seq: u64,
    },
    /// Data node → a node of its group: renew my read lease (`docs/cluster.md` §6).
    LeasePing {
        seq: u64,
    },
    /// The answer: the sender still holds the pinging node in its view.
    LeasePong {
        seq: u64,
    },
    /// Data node → data node: your rows of these per-node ndbinfo tables
    /// (`ndbinfo.memoryusage`, `information_schema.files`, ...) for a query.
    NdbinfoReq {
        req: u64,
        tables: Vec<String>,
    },
    /// The rows of each table asked for, in the order asked; `truncated` when they
    /// would have passed `ndbinfo::MAX_GATHERED_ROWS` (then some are left out).
    NdbinfoConf {
        req: u64,
        tables: Vec<(String, Vec<Vec<Value>>)>,
        truncated: bool,
    },
    /// Global checkpoint (`datapath/gcp.rs`), master → every live data node: hold new
    /// commit decisions, answer once this node's commits under way are done.
    GcpPrepare {
        round: u64,
    },
    /// The answer, with the node's current checkpoint number.
    GcpPrepared {
        round: u64,
        current_hi: u32,
    },
    /// Master → every node: move on to checkpoint `new_hi`, release held commits.
    GcpCommit {
        round: u64,
        new_hi: u32,
    },
    GcpCommitted {
        round: u64,
    },
    /// Master → every node: make checkpoint `gci_hi` durable here.
    GcpSave {
        round: u64,
        gci_hi: u32,
    },
    GcpSaved {
        round: u64,
        gci_hi: u32,
    },
    /// Master → every node: `gci_hi` is saved on every node of the round.
    GcpDurable {
        gci_hi: u32,
    },
    /// A node → the master: a client waits for durability, run a checkpoint now.
    GcpAsk,
    /// API → data node: answer once the commit with GCI `gci` is durable on every
    /// data node (NDB API has none; `docs/cluster.md` §6). GCI 0 asks for the
    /// checkpoint open at the node when it reads the request (a checkpoint now).
    DurableReq {
        req: u64,
        gci: u64,
    },
    DurableConf {
        req: u64,
        code: u32,
        class: u8,
        message: String,
        /// The highest checkpoint saved on every data node when answered (0 with an
        /// error).
        durable_hi: u32,
    },
}

mod kind {
    pub const CLUSTER_REQ: u16 = 100;
    pub const CLUSTER_CONF: u16 = 101;
    pub const SQL_REQ: u16 = 102;
    pub const SQL_CONF: u16 = 103;
    pub const SCHEMA_REQ: u16 = 104;
    pub const TABLE_REQ: u16 = 105;
    pub const TABLE_CONF: u16 = 106;
    pub const TC_KEY_REQ: u16 = 110;
    pub const TC_KEY_CONF: u16 = 111;
    pub const TC_KEY_REF: u16 = 112;
    pub const READ_REQ: u16 = 113;
    pub const READ_CONF: u16 = 114;
    pub const SCAN_REQ: u16 = 115;
    pub const SCAN_NEXT_REQ: u16 = 116;
    pub const SCAN_CONF: u16 = 117;
    pub const SCAN_CLOSE_REQ: u16 = 118;
    pub const LQH_PREPARE: u16 = 120;
    pub const LQH_PREPARED: u16 = 121;
    pub const LQH_COMMIT: u16 = 122;
    pub const LQH_COMMITTED: u16 = 123;
    pub const LQH_ABORT: u16 = 124;
    pub const TXN_STATE_REQ: u16 = 125;
    pub const TXN_STATE_CONF: u16 = 126;
    pub const UNIQUE_CHECK_REQ: u16 = 127;
    pub const UNIQUE_CHECK_CONF: u16 = 128;
    pub const READY_QUERY: u16 = 130;
    pub const READY_SET: u16 = 131;
    pub const COPY_REQ: u16 = 132;
    pub const COPY_MARK: u16 = 133;
    pub const COPY_MARKED: u16 = 134;
    pub const COPY_SCHEMA: u16 = 135;
    pub const COPY_ACK: u16 = 136;
    pub const COPY_ROWS: u16 = 137;
    pub const COPY_DONE: u16 = 138;
    pub const COPY_ABORT: u16 = 139;
    pub const NODE_READY: u16 = 140;
    pub const LEASE_PING: u16 = 141;
    pub const LEASE_PONG: u16 = 142;
    pub const NDBINFO_REQ: u16 = 143;
    pub const NDBINFO_CONF: u16 = 144;
    pub const GCP_PREPARE: u16 = 145;
    pub const GCP_PREPARED: u16 = 146;
    pub const GCP_COMMIT: u16 = 147;
    pub const GCP_COMMITTED: u16 = 148;
    pub const GCP_SAVE: u16 = 149;
    pub const GCP_SAVED: u16 = 150;
    pub const GCP_DURABLE: u16 = 151;
    pub const GCP_ASK: u16 = 152;
    pub const DURABLE_REQ: u16 = 153;
    pub const DURABLE_CONF: u16 = 154;
    pub const COPY_DIGEST: u16 = 155;
    pub const COPY_RECHECK: u16 = 156;
    pub const SQL_CAPTURE_REQ: u16 = 157;
    pub const SQL_CAPTURE_CONF: u16 = 158;
}

/// One row a captured DML statement changed (`SqlCaptureConf`): its key, and every
/// column's value before (committed) and after the statement (None: no row).
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    pub database: String,
    pub table: String,
    /// Primary-key values, in primary-key order.
    pub key: Vec<Value>,
    pub before: OpResult,
    pub after: OpResult,
}

/// Frame kinds of data messages.
pub const KINDS: std::ops::RangeInclusive<u16> = 100..=159;

pub(super) fn bad(_: crate::error::NdbError) -> WireError {
    WireError::BadValue("data message field")
}

pub(super) fn count(d: &mut Decoder<'_>, what: &'static str) -> Result<usize, WireError> {
    let n = d.u32().map_err(|_| WireError::Truncated(what))? as usize;
    // Every entry takes at least one byte.
    if n > MAX_LIST || n > d.remaining() {
        return Err(WireError::BadValue(what));
    }
    Ok(n)
}

pub(super) fn enc_values(e: &mut Encoder, vs: &[Value]) {
    e.u32(vs.len() as u32);
    for v in vs {
        codec::encode_value(e, v);
    }
}

pub(super) fn dec_values(d: &mut Decoder<'_>) -> Result<Vec<Value>, WireError> {
    let n = count(d, "values")?;
    (0..n)
        .map(|_| codec::decode_value(d).map_err(bad))
        .collect()
}

/// A session's variables: u32 count, then each name (str) and value.
fn enc_vars(e: &mut Encoder, vars: &SessionVars) {
    let pairs: Vec<(&str, &Value)> = vars.pairs().collect();
    e.u32(pairs.len() as u32);
    for (name, value) in pairs {
        e.str(name);
        codec::encode_value(e, value);
    }
}

fn dec_vars(d: &mut Decoder<'_>) -> Result<SessionVars, WireError> {
    let n = count(d, "session variables")?;
    let mut pairs = Vec::with_capacity(n);
    for _ in 0..n {
        let name = d.str().map_err(bad)?;
        pairs.push((name, codec::decode_value(d).map_err(bad)?));
    }
    SessionVars::from_pairs(pairs).map_err(|_| WireError::BadValue("session variables"))
}

pub(super) fn enc_u32s(e: &mut Encoder, vs: &[u32]) {
    e.u32(vs.len() as u32);
    for &v in vs {
        e.u32(v);
    }
}

pub(super) fn dec_u32s(d: &mut Decoder<'_>) -> Result<Vec<u32>, WireError> {
    let n = count(d, "u32 list")?;
    (0..n).map(|_| d.u32().map_err(bad)).collect()
}

fn enc_unique_checks(e: &mut Encoder, checks: &[UniqueCheck]) {
    e.u32(checks.len() as u32);
    for c in checks {
        e.str(&c.database);
        e.str(&c.table);
        e.u32(c.index);
        enc_values(e, &c.values);
    }
}

fn dec_unique_checks(d: &mut Decoder<'_>) -> Result<Vec<UniqueCheck>, WireError> {
    let n = count(d, "unique checks")?;
    let mut checks = Vec::with_capacity(n);
    for _ in 0..n {
        let database = d.str().map_err(bad)?;
        let table = d.str().map_err(bad)?;
        let index = d.u32().map_err(bad)?;
        checks.push(UniqueCheck {
            database,
            table,
            index,
            values: dec_values(d)?,
        });
    }
    Ok(checks)
}

pub(super) fn enc_txn(e: &mut Encoder, t: &TxnKey) {
    e.u32(t.tc);
    e.u64(t.id);
}

pub(super) fn dec_txn(d: &mut Decoder<'_>) -> Result<TxnKey, WireError> {
    Ok(TxnKey {
        tc: d.u32().map_err(bad)?,
        id: d.u64().map_err(bad)?,
    })
}

fn enc_op(e: &mut Encoder, op: &KeyOp) {
    e.u8(op.op as u8);
    e.str(&op.database);
    e.str(&op.table);
    enc_values(e, &op.key);
    e.u32(op.values.len() as u32);
    for (c, v) in &op.values {
        e.u32(*c);
        codec::encode_value(e, v);
    }
    enc_u32s(e, &op.columns);
}

fn dec_op(d: &mut Decoder<'_>) -> Result<KeyOp, WireError> {
    let op = OpType::from_u8(d.u8().map_err(bad)?)?;
    let database = d.str().map_err(bad)?;
    let table = d.str().map_err(bad)?;
    let key = dec_values(d)?;
    let n = count(d, "set values")?;
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        let c = d.u32().map_err(bad)?;
        values.push((c, codec::decode_value(d).map_err(bad)?));
    }
    Ok(KeyOp {
        op,
        database,
        table,
        key,
        values,
        columns: dec_u32s(d)?,
    })
}

fn enc_result(e: &mut Encoder, r: &OpResult) {
    match r {
        None => e.u8(0),
        Some(vs) => {
            e.u8(1);
            enc_values(e, vs);
        }
    }
}

fn dec_result(d: &mut Decoder<'_>) -> Result<OpResult, WireError> {
    match d.u8().map_err(bad)? {
        0 => Ok(None),
        1 => Ok(Some(dec_values(d)?)),
        _ => Err(WireError::BadValue("result tag")),
    }
}

impl DataMsg {
    pub fn kind(&self) -> u16 {
        use kind::*;
        match self {
            DataMsg::ClusterReq => CLUSTER_REQ,
            DataMsg::ClusterConf { .. } => CLUSTER_CONF,
            DataMsg::SqlReq { .. } => SQL_REQ,
            DataMsg::SqlConf { .. } => SQL_CONF,
            DataMsg::SchemaReq { .. } => SCHEMA_REQ,
            DataMsg::TableReq { .. } => TABLE_REQ,
            DataMsg::TableConf { .. } => TABLE_CONF,
            DataMsg::TcKeyReq { .. } => TC_KEY_REQ,
            DataMsg::TcKeyConf { .. } => TC_KEY_CONF,
            DataMsg::TcKeyRef { .. } => TC_KEY_REF,
            DataMsg::ReadReq { .. } => READ_REQ,
            DataMsg::ReadConf { .. } => READ_CONF,
            DataMsg::ScanReq(_) => SCAN_REQ,
            DataMsg::ScanNextReq { .. } => SCAN_NEXT_REQ,
            DataMsg::ScanConf(_) => SCAN_CONF,
            DataMsg::ScanCloseReq { .. } => SCAN_CLOSE_REQ,
            DataMsg::LqhPrepare { .. } => LQH_PREPARE,
            DataMsg::LqhPrepared { .. } => LQH_PREPARED,
            DataMsg::LqhCommit { .. } => LQH_COMMIT,
            DataMsg::LqhCommitted { .. } => LQH_COMMITTED,
            DataMsg::LqhAbort { .. } => LQH_ABORT,
            DataMsg::TxnStateReq { .. } => TXN_STATE_REQ,
            DataMsg::TxnStateConf { .. } => TXN_STATE_CONF,
            DataMsg::UniqueCheckReq { .. } => UNIQUE_CHECK_REQ,
            DataMsg::UniqueCheckConf { .. } => UNIQUE_CHECK_CONF,
            DataMsg::ReadyQuery => READY_QUERY,
            DataMsg::ReadySet { .. } => READY_SET,
            DataMsg::CopyReq { .. } => COPY_REQ,
            DataMsg::CopyMark { .. } => COPY_MARK,
            DataMsg::CopyMarked { .. } => COPY_MARKED,
            DataMsg::CopySchema { .. } => COPY_SCHEMA,
            DataMsg::CopyAck { .. } => COPY_ACK,
            DataMsg::CopyRows { .. } => COPY_ROWS,
            DataMsg::CopyDigest { .. } => COPY_DIGEST,
            DataMsg::CopyRecheck { .. } => COPY_RECHECK,
            DataMsg::SqlCaptureReq { .. } => SQL_CAPTURE_REQ,
            DataMsg::SqlCaptureConf { .. } => SQL_CAPTURE_CONF,
            DataMsg::CopyDone { .. } => COPY_DONE,
            DataMsg::CopyAbort { .. } => COPY_ABORT,
            DataMsg::NodeReady { .. } => NODE_READY,
            DataMsg::LeasePing { .. } => LEASE_PING,
            DataMsg::LeasePong { .. } => LEASE_PONG,
            DataMsg::NdbinfoReq { .. } => NDBINFO_REQ,
            DataMsg::NdbinfoConf { .. } => NDBINFO_CONF,
            DataMsg::GcpPrepare { .. } => GCP_PREPARE,
            DataMsg::GcpPrepared { .. } => GCP_PREPARED,
            DataMsg::GcpCommit { .. } => GCP_COMMIT,
            DataMsg::GcpCommitted { .. } => GCP_COMMITTED,
            DataMsg::GcpSave { .. } => GCP_SAVE,
            DataMsg::GcpSaved { .. } => GCP_SAVED,
            DataMsg::GcpDurable { .. } => GCP_DURABLE,
            DataMsg::GcpAsk => GCP_ASK,
            DataMsg::DurableReq { .. } => DURABLE_REQ,
            DataMsg::DurableConf { .. } => DURABLE_CONF,
        }
    }

    /// The payload bytes.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        match self {
            DataMsg::ClusterReq => {}
            DataMsg::ClusterConf { config_text, nodes } => {
                e.str(config_text);
                e.u32(nodes.len() as u32);
                for (n, a) in nodes {
                    e.u32(*n);
                    e.str(a);
                }
            }
            DataMsg::SqlReq {
                req,
                database,
                sql,
                vars,
            }
            | DataMsg::SchemaReq {
                req,
                database,
                sql,
                vars,
            } => {
                e.u64(*req);
                e.str(database);
                e.str(sql);
                enc_vars(&mut e, vars);
            }
            DataMsg::SqlCaptureReq {
                req,
                database,
                sql,
                auto_increment_floor,
                overlay,
                given_rows,
                vars,
            } => {
                e.u64(*req);
                e.str(database);
                e.str(sql);
                e.u64(*auto_increment_floor);
                e.u32(overlay.len() as u32);
                for r in overlay {
                    e.str(&r.database);
                    e.str(&r.table);
                    enc_values(&mut e, &r.key);
                    enc_result(&mut e, &r.after);
                }
                match given_rows {
                    None => e.u8(0),
                    Some(rows) => {
                        e.u8(1);
                        e.u32(rows.len() as u32);
                        for r in rows {
                            enc_values(&mut e, r);
                        }
                    }
                }
                enc_vars(&mut e, vars);
            }
            DataMsg::SqlConf {
                req,
                code,
                class,
                text,
                mysql_code,
                vars,
                results,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(text);
                e.u32(*mysql_code);
                match vars {
                    None => e.u8(0),
                    Some(v) => {
                        e.u8(1);
                        enc_vars(&mut e, v);
                    }
                }
                enc_sql_results(&mut e, results);
            }
            DataMsg::SqlCaptureConf {
                req,
                code,
                class,
                text,
                changes,
                affected,
                info,
                last_insert_id,
                mysql_code,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(text);
                e.u32(changes.len() as u32);
                for c in changes {
                    e.str(&c.database);
                    e.str(&c.table);
                    enc_values(&mut e, &c.key);
                    enc_result(&mut e, &c.before);
                    enc_result(&mut e, &c.after);
                }
                e.u64(*affected);
                e.str(info);
                e.u64(*last_insert_id);
                e.u32(*mysql_code);
            }
            DataMsg::TableReq {
                req,
                database,
                table,
            } => {
                e.u64(*req);
                e.str(database);
                e.str(table);
            }
            DataMsg::TableConf {
                req,
                code,
                class,
                message,
                def,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
                match def {
                    None => e.u8(0),
                    Some(d) => {
                        e.u8(1);
                        codec::encode_table_def(&mut e, &d.0);
                    }
                }
            }
            DataMsg::TcKeyReq {
                req,
                txn,
                exec,
                ops,
                ignore_errors,
            } => {
                e.u64(*req);
                e.u64(*txn);
                e.u8(*exec as u8);
                e.u32(ops.len() as u32);
                for op in ops {
                    enc_op(&mut e, op);
                }
                e.bool(*ignore_errors);
            }
            DataMsg::TcKeyConf {
                req,
                txn,
                gci,
                results,
                failed,
            } => {
                e.u64(*req);
                e.u64(*txn);
                e.u64(*gci);
                e.u32(results.len() as u32);
                for r in results {
                    enc_result(&mut e, r);
                }
                enc_failures(&mut e, failed);
            }
            DataMsg::TcKeyRef {
                req,
                code,
                class,
                message,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
            }
            DataMsg::ReadReq {
                req,
                database,
                table,
                columns,
                keys,
            } => {
                e.u64(*req);
                e.str(database);
                e.str(table);
                enc_u32s(&mut e, columns);
                enc_values(&mut e, keys);
            }
            DataMsg::ReadConf {
                req,
                code,
                class,
                message,
                found,
                values,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
                e.u32(found.len() as u32);
                for &f in found {
                    e.bool(f);
                }
                enc_values(&mut e, values);
            }
            DataMsg::ScanReq(r) => r.encode(&mut e),
            DataMsg::ScanNextReq { req, scan } => {
                e.u64(*req);
                e.u64(*scan);
            }
            DataMsg::ScanConf(c) => c.encode(&mut e),
            DataMsg::ScanCloseReq { scan } => e.u64(*scan),
            DataMsg::LqhPrepare {
                txn,
                backup,
                round,
                ops,
                ignore_errors,
            } => {
                enc_txn(&mut e, txn);
                e.bool(*backup);
                e.u32(*round);
                e.u32(ops.len() as u32);
                for (i, op) in ops {
                    e.u32(*i);
                    enc_op(&mut e, op);
                }
                e.bool(*ignore_errors);
            }
            DataMsg::LqhPrepared {
                txn,
                backup,
                round,
                code,
                class,
                message,
                reads,
                checks,
                failed,
            } => {
                enc_txn(&mut e, txn);
                e.bool(*backup);
                e.u32(*round);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
                e.u32(reads.len() as u32);
                for (i, r) in reads {
                    e.u32(*i);
                    enc_result(&mut e, r);
                }
                enc_unique_checks(&mut e, checks);
                enc_failures(&mut e, failed);
            }
            DataMsg::LqhCommit {
                txn,
                backup,
                gci_hi,
            } => {
                enc_txn(&mut e, txn);
                e.bool(*backup);
                e.u32(*gci_hi);
            }
            DataMsg::LqhAbort { txn } => enc_txn(&mut e, txn),
            DataMsg::TxnStateReq { txn } => enc_txn(&mut e, txn),
            DataMsg::LqhCommitted { txn, backup, gci } => {
                enc_txn(&mut e, txn);
                e.bool(*backup);
                e.u64(*gci);
            }
            DataMsg::TxnStateConf { txn, state } => {
                enc_txn(&mut e, txn);
                e.u8(*state as u8);
            }
            DataMsg::UniqueCheckReq { txn, round, checks } => {
                enc_txn(&mut e, txn);
                e.u32(*round);
                enc_unique_checks(&mut e, checks);
            }
            DataMsg::UniqueCheckConf {
                txn,
                round,
                code,
                class,
                message,
            } => {
                enc_txn(&mut e, txn);
                e.u32(*round);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
            }
            DataMsg::ReadyQuery => {}
            DataMsg::CopyReq {
                attempt,
                since_gci,
                lineage,
                keep,
            } => {
                e.u64(*attempt);
                e.u32(*since_gci);
                e.u64(*lineage);
                e.u32(keep.len() as u32);
                for (db, sql) in keep {
                    e.str(db);
                    e.str(sql);
                }
            }
            DataMsg::ReadySet { ready } => {
                e.u32(ready.len() as u32);
                for (n, seq) in ready {
                    e.u32(*n);
                    e.u64(*seq);
                }
            }
            DataMsg::CopyMark { node, mark } | DataMsg::CopyMarked { node, mark } => {
                e.u32(*node);
                e.bool(*mark);
            }
            DataMsg::CopySchema {
                attempt,
                statements,
            } => {
                e.u64(*attempt);
                e.u32(statements.len() as u32);
                for (db, sql) in statements {
                    e.str(db);
                    e.str(sql);
                }
            }
            DataMsg::CopyAck {
                attempt,
                code,
                class,
                message,
            } => {
                e.u64(*attempt);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
            }
            DataMsg::CopyRows {
                attempt,
                database,
                table,
                full_rows,
                rows,
            } => {
                e.u64(*attempt);
                e.str(database);
                e.str(table);
                e.u32(*full_rows);
                e.u32(rows.len() as u32);
                for r in rows {
                    enc_values(&mut e, r);
                }
            }
            DataMsg::CopyDigest {
                attempt,
                database,
                table,
                buckets,
                first,
                entries,
            } => {
                e.u64(*attempt);
                e.str(database);
                e.str(table);
                e.u32(*buckets);
                e.u32(*first);
                e.u32(entries.len() as u32);
                for (rows, xor) in entries {
                    e.u32(*rows);
                    e.u64(*xor as u64);
                    e.u64((*xor >> 64) as u64);
                }
            }
            DataMsg::CopyRecheck {
                attempt,
                database,
                table,
                buckets,
            } => {
                e.u64(*attempt);
                e.str(database);
                e.str(table);
                e.u32(buckets.len() as u32);
                for b in buckets {
                    e.u32(*b);
                }
            }
            DataMsg::CopyDone {
                attempt,
                seq,
                lineage,
            } => {
                e.u64(*attempt);
                e.u64(*seq);
                e.u64(*lineage);
            }
            DataMsg::CopyAbort { attempt, reason } => {
                e.u64(*attempt);
                e.str(reason);
            }
            DataMsg::NodeReady { node, seq } => {
                e.u32(*node);
                e.u64(*seq);
            }
            DataMsg::LeasePing { seq } | DataMsg::LeasePong { seq } => e.u64(*seq),
            DataMsg::NdbinfoReq { req, tables } => {
                e.u64(*req);
                e.u32(tables.len() as u32);
                for t in tables {
                    e.str(t);
                }
            }
            DataMsg::NdbinfoConf {
                req,
                tables,
                truncated,
            } => {
                e.u64(*req);
                e.u32(tables.len() as u32);
                for (name, rows) in tables {
                    e.str(name);
                    e.u32(rows.len() as u32);
                    for r in rows {
                        enc_values(&mut e, r);
                    }
                }
                e.u8(u8::from(*truncated));
            }
            DataMsg::GcpPrepare { round } | DataMsg::GcpCommitted { round } => e.u64(*round),
            DataMsg::GcpPrepared {
                round,
                current_hi: hi,
            }
            | DataMsg::GcpCommit { round, new_hi: hi }
            | DataMsg::GcpSave { round, gci_hi: hi }
            | DataMsg::GcpSaved { round, gci_hi: hi } => {
                e.u64(*round);
                e.u32(*hi);
            }
            DataMsg::GcpDurable { gci_hi } => e.u32(*gci_hi),
            DataMsg::GcpAsk => {}
            DataMsg::DurableReq { req, gci } => {
                e.u64(*req);
                e.u64(*gci);
            }
            DataMsg::DurableConf {
                req,
                code,
                class,
                message,
                durable_hi,
            } => {
                e.u64(*req);
                e.u32(*code);
                e.u8(*class);
                e.str(message);
                e.u32(*durable_hi);
            }
        }
        e.into_bytes()
    }

    /// Decodes the payload of a frame of `kind` (checksum verified).
    pub fn decode(kind: u16, payload: &[u8]) -> Result<DataMsg, WireError> {
        use kind::*;
        let mut d = Decoder::new(payload);
        let d = &mut d;
        let s = |d: &mut Decoder<'_>| d.str().map_err(bad);
        let u64_ = |d: &mut Decoder<'_>| d.u64().map_err(bad);
        let u32_ = |d: &mut Decoder<'_>| d.u32().map_err(bad);
        let m = match kind {
            CLUSTER_REQ => DataMsg::ClusterReq,
            CLUSTER_CONF => {
                let config_text = s(d)?;
                let n = count(d, "node count")?;
                if n > 255 {
                    return Err(WireError::BadValue("node count"));
                }
                let mut nodes = Vec::with_capacity(n);
                for _ in 0..n {
                    nodes.push((u32_(d)?, s(d)?));
                }
                DataMsg::ClusterConf { config_text, nodes }
            }
            SQL_REQ => DataMsg::SqlReq {
                req: u64_(d)?,
                database: s(d)?,
                sql: s(d)?,
                vars: dec_vars(d)?,
            },
            SCHEMA_REQ => DataMsg::SchemaReq {
                req: u64_(d)?,
                database: s(d)?,
                sql: s(d)?,
                vars: dec_vars(d)?,
            },
            SQL_CONF => DataMsg::SqlConf {
                req: u64_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                text: s(d)?,
                mysql_code: u32_(d)?,
                vars: match d.u8().map_err(bad)? {
                    0 => None,
                    1 => Some(dec_vars(d)?),
                    _ => return Err(WireError::BadValue("session variables flag")),
                },
                results: dec_sql_results(d)?,
            },
            SQL_CAPTURE_REQ => {
                let (req, database, sql, auto_increment_floor) = (u64_(d)?, s(d)?, s(d)?, u64_(d)?);
                let n = count(d, "session rows")?;
                let mut overlay = Vec::with_capacity(n);
                for _ in 0..n {
                    overlay.push(RowChange {
                        database: s(d)?,
                        table: s(d)?,
                        key: dec_values(d)?,
                        before: None,
                        after: dec_result(d)?,
                    });
                }
                let given_rows = match d.u8().map_err(bad)? {
                    0 => None,
                    1 => {
                        let n = count(d, "given rows")?;
                        let mut rows = Vec::with_capacity(n);
                        for _ in 0..n {
                            rows.push(dec_values(d)?);
                        }
                        Some(rows)
                    }
                    _ => return Err(WireError::BadValue("given rows flag")),
                };
                DataMsg::SqlCaptureReq {
                    req,
                    database,
                    sql,
                    auto_increment_floor,
                    overlay,
                    given_rows,
                    vars: dec_vars(d)?,
                }
            }
            SQL_CAPTURE_CONF => {
                let (req, code) = (u64_(d)?, u32_(d)?);
                let class = d.u8().map_err(bad)?;
                let text = s(d)?;
                let n = count(d, "row changes")?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    changes.push(RowChange {
                        database: s(d)?,
                        table: s(d)?,
                        key: dec_values(d)?,
                        before: dec_result(d)?,
                        after: dec_result(d)?,
                    });
                }
                DataMsg::SqlCaptureConf {
                    req,
                    code,
                    class,
                    text,
                    changes,
                    affected: u64_(d)?,
                    info: s(d)?,
                    last_insert_id: u64_(d)?,
                    mysql_code: u32_(d)?,
                }
            }
            TABLE_REQ => DataMsg::TableReq {
                req: u64_(d)?,
                database: s(d)?,
                table: s(d)?,
            },
            TABLE_CONF => DataMsg::TableConf {
                req: u64_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                message: s(d)?,
                def: match d.u8().map_err(bad)? {
                    0 => None,
                    1 => Some(WireTableDef(Box::new(
                        codec::decode_table_def(d).map_err(bad)?,
                    ))),
                    _ => return Err(WireError::BadValue("definition tag")),
                },
            },
            TC_KEY_REQ => {
                let (req, txn) = (u64_(d)?, u64_(d)?);
                let exec = TcExec::from_u8(d.u8().map_err(bad)?)?;
                let n = count(d, "operations")?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(dec_op(d)?);
                }
                DataMsg::TcKeyReq {
                    req,
                    txn,
                    exec,
                    ops,
                    ignore_errors: d.bool().map_err(bad)?,
                }
            }
            TC_KEY_CONF => {
                let (req, txn, gci) = (u64_(d)?, u64_(d)?, u64_(d)?);
                let n = count(d, "results")?;
                let mut results = Vec::with_capacity(n);
                for _ in 0..n {
                    results.push(dec_result(d)?);
                }
                DataMsg::TcKeyConf {
                    req,
                    txn,
                    gci,
                    results,
                    failed: dec_failures(d)?,
                }
            }
            TC_KEY_REF => DataMsg::TcKeyRef {
                req: u64_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                message: s(d)?,
            },
            READ_REQ => DataMsg::ReadReq {
                req: u64_(d)?,
                database: s(d)?,
                table: s(d)?,
                columns: dec_u32s(d)?,
                keys: dec_values(d)?,
            },
            READ_CONF => {
                let (req, code, class, message) = (u64_(d)?, u32_(d)?, d.u8().map_err(bad)?, s(d)?);
                let n = count(d, "found")?;
                let mut found = Vec::with_capacity(n);
                for _ in 0..n {
                    found.push(d.bool().map_err(bad)?);
                }
                DataMsg::ReadConf {
                    req,
                    code,
                    class,
                    message,
                    found,
                    values: dec_values(d)?,
                }
            }
            SCAN_REQ => DataMsg::ScanReq(Box::new(ScanReq::decode(d)?)),
            SCAN_NEXT_REQ => DataMsg::ScanNextReq {
                req: u64_(d)?,
                scan: u64_(d)?,
            },
            SCAN_CONF => DataMsg::ScanConf(Box::new(ScanConf::decode(d)?)),
            SCAN_CLOSE_REQ => DataMsg::ScanCloseReq { scan: u64_(d)? },
            LQH_PREPARE => {
                let txn = dec_txn(d)?;
                let backup = d.bool().map_err(bad)?;
                let round = u32_(d)?;
                let n = count(d, "operations")?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = u32_(d)?;
                    ops.push((i, dec_op(d)?));
                }
                DataMsg::LqhPrepare {
                    txn,
                    backup,
                    round,
                    ops,
                    ignore_errors: d.bool().map_err(bad)?,
                }
            }
            LQH_PREPARED => {
                let txn = dec_txn(d)?;
                let backup = d.bool().map_err(bad)?;
                let round = u32_(d)?;
                let (code, class, message) = (u32_(d)?, d.u8().map_err(bad)?, s(d)?);
                let n = count(d, "reads")?;
                let mut reads = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = u32_(d)?;
                    reads.push((i, dec_result(d)?));
                }
                DataMsg::LqhPrepared {
                    txn,
                    backup,
                    round,
                    code,
                    class,
                    message,
                    reads,
                    checks: dec_unique_checks(d)?,
                    failed: dec_failures(d)?,
                }
            }
            LQH_COMMIT => DataMsg::LqhCommit {
                txn: dec_txn(d)?,
                backup: d.bool().map_err(bad)?,
                gci_hi: u32_(d)?,
            },
            LQH_ABORT => DataMsg::LqhAbort { txn: dec_txn(d)? },
            TXN_STATE_REQ => DataMsg::TxnStateReq { txn: dec_txn(d)? },
            LQH_COMMITTED => DataMsg::LqhCommitted {
                txn: dec_txn(d)?,
                backup: d.bool().map_err(bad)?,
                gci: u64_(d)?,
            },
            UNIQUE_CHECK_REQ => DataMsg::UniqueCheckReq {
                txn: dec_txn(d)?,
                round: u32_(d)?,
                checks: dec_unique_checks(d)?,
            },
            UNIQUE_CHECK_CONF => DataMsg::UniqueCheckConf {
                txn: dec_txn(d)?,
                round: u32_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                message: s(d)?,
            },
            TXN_STATE_CONF => DataMsg::TxnStateConf {
                txn: dec_txn(d)?,
                state: match d.u8().map_err(bad)? {
                    0 => TxnState::Unknown,
                    1 => TxnState::Prepared,
                    2 => TxnState::Committed,
                    _ => return Err(WireError::BadValue("transaction state")),
                },
            },
            READY_QUERY => DataMsg::ReadyQuery,
            COPY_REQ => {
                let (attempt, since_gci, lineage) = (u64_(d)?, u32_(d)?, u64_(d)?);
                let n = count(d, "kept tables")?;
                let mut keep = Vec::with_capacity(n);
                for _ in 0..n {
                    keep.push((s(d)?, s(d)?));
                }
                DataMsg::CopyReq {
                    attempt,
                    since_gci,
                    lineage,
                    keep,
                }
            }
            READY_SET => {
                let n = count(d, "ready nodes")?;
                if n > 255 {
                    return Err(WireError::BadValue("ready nodes"));
                }
                let mut ready = Vec::with_capacity(n);
                for _ in 0..n {
                    ready.push((u32_(d)?, u64_(d)?));
                }
                DataMsg::ReadySet { ready }
            }
            COPY_MARK => DataMsg::CopyMark {
                node: u32_(d)?,
                mark: d.bool().map_err(bad)?,
            },
            COPY_MARKED => DataMsg::CopyMarked {
                node: u32_(d)?,
                mark: d.bool().map_err(bad)?,
            },
            COPY_SCHEMA => {
                let attempt = u64_(d)?;
                let n = count(d, "statements")?;
                let mut statements = Vec::with_capacity(n);
                for _ in 0..n {
                    statements.push((s(d)?, s(d)?));
                }
                DataMsg::CopySchema {
                    attempt,
                    statements,
                }
            }
            COPY_ACK => DataMsg::CopyAck {
                attempt: u64_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                message: s(d)?,
            },
            COPY_ROWS => {
                let attempt = u64_(d)?;
                let (database, table) = (s(d)?, s(d)?);
                let full_rows = u32_(d)?;
                let n = count(d, "rows")?;
                if full_rows as usize > n {
                    return Err(WireError::BadValue("full rows"));
                }
                let mut rows = Vec::with_capacity(n);
                for _ in 0..n {
                    rows.push(dec_values(d)?);
                }
                DataMsg::CopyRows {
                    attempt,
                    database,
                    table,
                    full_rows,
                    rows,
                }
            }
            COPY_DIGEST => {
                let attempt = u64_(d)?;
                let database = s(d)?;
                let table = s(d)?;
                let buckets = u32_(d)?;
                let first = u32_(d)?;
                let n = count(d, "digest entries")?;
                if u64::from(first) + n as u64 > u64::from(buckets) {
                    return Err(WireError::BadValue("digest entries past its buckets"));
                }
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let rows = u32_(d)?;
                    let lo = u64_(d)?;
                    let hi = u64_(d)?;
                    entries.push((rows, u128::from(lo) | (u128::from(hi) << 64)));
                }
                DataMsg::CopyDigest {
                    attempt,
                    database,
                    table,
                    buckets,
                    first,
                    entries,
                }
            }
            COPY_RECHECK => {
                let attempt = u64_(d)?;
                let database = s(d)?;
                let table = s(d)?;
                let n = count(d, "recheck buckets")?;
                let mut buckets = Vec::with_capacity(n);
                for _ in 0..n {
                    buckets.push(u32_(d)?);
                }
                DataMsg::CopyRecheck {
                    attempt,
                    database,
                    table,
                    buckets,
                }
            }
            COPY_DONE => DataMsg::CopyDone {
                attempt: u64_(d)?,
                seq: u64_(d)?,
                lineage: u64_(d)?,
            },
            COPY_ABORT => DataMsg::CopyAbort {
                attempt: u64_(d)?,
                reason: s(d)?,
            },
            NODE_READY => DataMsg::NodeReady {
                node: u32_(d)?,
                seq: u64_(d)?,
            },
            LEASE_PING => DataMsg::LeasePing { seq: u64_(d)? },
            LEASE_PONG => DataMsg::LeasePong { seq: u64_(d)? },
            NDBINFO_REQ => {
                let req = u64_(d)?;
                let n = count(d, "tables")?;
                let mut tables = Vec::with_capacity(n);
                for _ in 0..n {
                    tables.push(s(d)?);
                }
                DataMsg::NdbinfoReq { req, tables }
            }
            NDBINFO_CONF => {
                let req = u64_(d)?;
                let n = count(d, "tables")?;
                let mut tables = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = s(d)?;
                    let m = count(d, "rows")?;
                    let mut rows = Vec::with_capacity(m);
                    for _ in 0..m {
                        rows.push(dec_values(d)?);
                    }
                    tables.push((name, rows));
                }
                let truncated = d.u8().map_err(bad)? != 0;
                DataMsg::NdbinfoConf {
                    req,
                    tables,
                    truncated,
                }
            }
            GCP_PREPARE => DataMsg::GcpPrepare { round: u64_(d)? },
            GCP_PREPARED => DataMsg::GcpPrepared {
                round: u64_(d)?,
                current_hi: u32_(d)?,
            },
            GCP_COMMIT => DataMsg::GcpCommit {
                round: u64_(d)?,
                new_hi: u32_(d)?,
            },
            GCP_COMMITTED => DataMsg::GcpCommitted { round: u64_(d)? },
            GCP_SAVE => DataMsg::GcpSave {
                round: u64_(d)?,
                gci_hi: u32_(d)?,
            },
            GCP_SAVED => DataMsg::GcpSaved {
                round: u64_(d)?,
                gci_hi: u32_(d)?,
            },
            GCP_DURABLE => DataMsg::GcpDurable { gci_hi: u32_(d)? },
            GCP_ASK => DataMsg::GcpAsk,
            DURABLE_REQ => DataMsg::DurableReq {
                req: u64_(d)?,
                gci: u64_(d)?,
            },
            DURABLE_CONF => DataMsg::DurableConf {
                req: u64_(d)?,
                code: u32_(d)?,
                class: d.u8().map_err(bad)?,
                message: s(d)?,
                durable_hi: u32_(d)?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        if d.remaining() != 0 {
            return Err(WireError::Trailing(d.remaining()));
        }
        Ok(m)
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
