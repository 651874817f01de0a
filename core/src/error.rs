//! NDB errors: one error type for the whole engine.
//!
//! Every error carries NDB's numeric code, its status (temporary, permanent, unknown
//! result), its classification and its message, exactly as `ndberror.cpp` defines them,
//! so that an application written for the NDB API can branch on the same values
//! (`code == 626`, `status == TemporaryError` => retry). Errors that NDB does not have
//! (SQL syntax, bad arguments from Python or C) use codes in NDB's own ranges
//! (4000+ API errors) and keep NDB's classification scheme.
//!
//! Invariant: the status is a function of the classification (NDB's
//! `StatusClassificationMapping`); [`NdbError::new`] derives it so the two cannot drift.

use std::fmt;

/// NDB's `NdbError::Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum ErrorStatus {
    Success = 0,
    TemporaryError = 1,
    PermanentError = 2,
    UnknownResult = 3,
}

/// NDB's `NdbError::Classification` (values as in NdbError.hpp).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum ErrorClassification {
    NoError = 0,
    ApplicationError = 1,
    NoDataFound = 2,
    ConstraintViolation = 3,
    SchemaError = 4,
    UserDefinedError = 5,
    InsufficientSpace = 6,
    TemporaryResourceError = 7,
    NodeRecoveryError = 8,
    OverloadError = 9,
    TimeoutExpired = 10,
    UnknownResultError = 11,
    InternalError = 12,
    FunctionNotImplemented = 13,
    UnknownErrorCode = 14,
    NodeShutdown = 15,
    SchemaObjectExists = 17,
    InternalTemporary = 18,
}

impl ErrorClassification {
    /// The classification with NdbError.hpp's value `v` (UnknownErrorCode otherwise).
    pub fn from_u8(v: u8) -> ErrorClassification {
        use ErrorClassification::*;
        [
            NoError,
            ApplicationError,
            NoDataFound,
            ConstraintViolation,
            SchemaError,
            UserDefinedError,
            InsufficientSpace,
            TemporaryResourceError,
            NodeRecoveryError,
            OverloadError,
            TimeoutExpired,
            UnknownResultError,
            InternalError,
            FunctionNotImplemented,
            UnknownErrorCode,
            NodeShutdown,
        ]
        .into_iter()
        .chain([SchemaObjectExists, InternalTemporary])
        .find(|c| *c as u8 == v)
        .unwrap_or(UnknownErrorCode)
    }

    /// The status NDB derives from a classification.
    pub fn status(self) -> ErrorStatus {
        use ErrorClassification::*;
        match self {
            NoError => ErrorStatus::Success,
            TemporaryResourceError
            | NodeRecoveryError
            | OverloadError
            | TimeoutExpired
            | NodeShutdown
            | InternalTemporary => ErrorStatus::TemporaryError,
            UnknownResultError | UnknownErrorCode => ErrorStatus::UnknownResult,
            _ => ErrorStatus::PermanentError,
        }
    }

    /// NDB's description of the classification, as `ndb_error_classification_string`.
    pub fn as_str(self) -> &'static str {
        use ErrorClassification::*;
        match self {
            NoError => "No error",
            ApplicationError => "Application error",
            NoDataFound => "No data found",
            ConstraintViolation => "Constraint violation",
            SchemaError => "Schema error",
            UserDefinedError => "User defined error",
            InsufficientSpace => "Insufficient space",
            TemporaryResourceError => "Temporary Resource error",
            NodeRecoveryError => "Node Recovery error",
            OverloadError => "Overload error",
            TimeoutExpired => "Timeout expired",
            UnknownResultError => "Unknown result error",
            InternalError => "Internal error",
            FunctionNotImplemented => "Function not implemented",
            UnknownErrorCode => "Unknown error code",
            NodeShutdown => "Node shutdown",
            SchemaObjectExists => "Schema object already exists",
            InternalTemporary => "Internal temporary",
        }
    }
}

impl ErrorStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorStatus::Success => "Success",
            ErrorStatus::TemporaryError => "Temporary error",
            ErrorStatus::PermanentError => "Permanent error",
            ErrorStatus::UnknownResult => "Unknown result",
        }
    }
}

/// An NDB error: code, status, classification, message, and the MySQL error the SQL
/// layer shows for it.
#[derive(Clone, PartialEq, Eq)]
pub struct NdbError {
    pub code: u32,
    pub status: ErrorStatus,
    pub classification: ErrorClassification,
    pub message: String,
    /// The MySQL server error number the SQL layer reports (1114 table full, 1062 dup key...),
    /// 0 when the SQL layer shows the NDB error itself.
    pub mysql_code: u32,
}

impl NdbError {
    pub fn new(code: u32, classification: ErrorClassification, message: impl Into<String>) -> Self {
        NdbError {
            code,
            status: classification.status(),
            classification,
            message: message.into(),
            mysql_code: 0,
        }
    }

    pub fn with_mysql_code(mut self, mysql_code: u32) -> Self {
        self.mysql_code = mysql_code;
        self
    }

    /// Appends detail (the column, table or value concerned) to NDB's message.
    pub fn detail(mut self, detail: impl fmt::Display) -> Self {
        self.message = format!("{}: {}", self.message, detail);
        self
    }

    pub fn is_temporary(&self) -> bool {
        self.status == ErrorStatus::TemporaryError
    }
}

impl fmt::Debug for NdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NdbError({}, {:?}, {:?}: {})",
            self.code, self.status, self.classification, self.message
        )
    }
}

impl fmt::Display for NdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (NDB error {}, {}, {})",
            self.message,
            self.code,
            self.status.as_str(),
            self.classification.as_str()
        )
    }
}

impl std::error::Error for NdbError {}

pub type Result<T, E = NdbError> = std::result::Result<T, E>;

/// The MySQL error number mysqld reports for an NDB error code (its `ndb_to_mysql_error`
/// map), 0 for codes it shows as NDB's own. What a client gives an error that came
/// over the wire with its NDB code only; the constructors below set the same numbers
/// (a test holds them to it).
pub fn mysql_code_of(ndb_code: u32) -> u32 {
    match ndb_code {
        626 => 1032,
        630 | 893 => 1062,
        266 => 1205,
        625 | 827 | 902 | 1601 => 1114,
        723 => 1146,
        4243 => 1176,
        721 => 1050,
        4244 => 1061,
        4004 => 1054,
        4209 => 1406,
        4217 => 1366,
        839 => 1048,
        4003 => 1235,
        851 => 1118,
        _ => 0,
    }
}

/// Constructors for the NDB errors the engine raises, with NDB's codes and texts.
pub mod codes {
    use super::ErrorClassification::*;
    use super::NdbError;

    pub fn tuple_not_found() -> NdbError {
        NdbError::new(626, NoDataFound, "Tuple did not exist").with_mysql_code(1032)
    }
    pub fn tuple_already_exists() -> NdbError {
        NdbError::new(
            630,
            ConstraintViolation,
            "Tuple already existed when attempting to insert",
        )
        .with_mysql_code(1062)
    }
    pub fn unique_violation() -> NdbError {
        NdbError::new(
            893,
            ConstraintViolation,
            "Constraint violation e.g. duplicate value in unique index",
        )
        .with_mysql_code(1062)
    }
    pub fn deadlock_timeout() -> NdbError {
        NdbError::new(
            266,
            TimeoutExpired,
            "Time-out in NDB, probably caused by deadlock",
        )
        .with_mysql_code(1205)
    }
    pub fn out_of_data_memory() -> NdbError {
        NdbError::new(
            827,
            InsufficientSpace,
            "Out of memory in Ndb Kernel, table data (increase DataMemory)",
        )
        .with_mysql_code(1114)
    }
    pub fn out_of_hash_index_memory() -> NdbError {
        NdbError::new(
            625,
            InsufficientSpace,
            "Out of memory in Ndb Kernel, hash index part (increase DataMemory)",
        )
        .with_mysql_code(1114)
    }
    pub fn out_of_ordered_index_memory() -> NdbError {
        NdbError::new(
            902,
            InsufficientSpace,
            "Out of memory in Ndb Kernel, ordered index data (increase DataMemory)",
        )
        .with_mysql_code(1114)
    }
    pub fn no_such_table(name: &str) -> NdbError {
        NdbError::new(723, SchemaError, "No such table existed")
            .detail(name)
            .with_mysql_code(1146)
    }
    pub fn no_such_index(name: &str) -> NdbError {
        NdbError::new(4243, ApplicationError, "Index not found")
            .detail(name)
            .with_mysql_code(1176)
    }
    pub fn table_exists(name: &str) -> NdbError {
        NdbError::new(
            721,
            SchemaObjectExists,
            "Schema object with given name already exists",
        )
        .detail(name)
        .with_mysql_code(1050)
    }
    pub fn index_exists(name: &str) -> NdbError {
        NdbError::new(
            4244,
            SchemaObjectExists,
            "Index or table with given name already exists",
        )
        .detail(name)
        .with_mysql_code(1061)
    }
    pub fn no_such_column(name: &str) -> NdbError {
        NdbError::new(
            4004,
            ApplicationError,
            "Attribute name or id not found in the table",
        )
        .detail(name)
        .with_mysql_code(1054)
    }
    pub fn too_many_tables() -> NdbError {
        NdbError::new(
            707,
            InsufficientSpace,
            "No more table metadata records (increase MaxNoOfTables)",
        )
    }
    /// Value does not fit the column (VARCHAR too long, integer out of range).
    pub fn value_too_large(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4209,
            ApplicationError,
            "Length parameter in equal/setValue is incorrect",
        )
        .detail(detail)
        .with_mysql_code(1406)
    }
    /// A value of the wrong type for the column.
    pub fn wrong_type(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(4217, ApplicationError, "Wrong type of value for attribute")
            .detail(detail)
            .with_mysql_code(1366)
    }
    pub fn null_in_not_null(column: &str) -> NdbError {
        NdbError::new(839, ApplicationError, "Illegal null attribute")
            .detail(column)
            .with_mysql_code(1048)
    }
    pub fn key_not_complete(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4264,
            ApplicationError,
            "Invalid usage of blob attribute or incomplete primary key",
        )
        .detail(detail)
    }
    pub fn pk_update() -> NdbError {
        NdbError::new(
            4202,
            ApplicationError,
            "Set value on tuple key attribute is not allowed",
        )
    }
    pub fn transaction_closed() -> NdbError {
        NdbError::new(
            4604,
            ApplicationError,
            "Transaction is already closed or committed, it can not be used",
        )
    }
    pub fn transaction_aborted() -> NdbError {
        NdbError::new(4350, ApplicationError, "Transaction already aborted")
    }
    pub fn sql_syntax(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4000,
            ApplicationError,
            "You have an error in your SQL syntax",
        )
        .detail(detail)
        .with_mysql_code(1064)
    }
    pub fn unsupported(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(4003, FunctionNotImplemented, "Function not implemented yet")
            .detail(detail)
            .with_mysql_code(1235)
    }
    pub fn bad_argument(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(4118, ApplicationError, "Parameter error in API call").detail(detail)
    }
    pub fn bad_config(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(5000, ApplicationError, "Configuration error").detail(detail)
    }
    pub fn cluster_closed() -> NdbError {
        NdbError::new(4009, UnknownResultError, "Cluster Failure")
            .detail("the cluster has been shut down")
    }
    /// A request on a cluster connection the client closed.
    pub fn connection_closed() -> NdbError {
        NdbError::new(4009, UnknownResultError, "Cluster Failure")
            .detail("the connection to the cluster was closed")
    }
    /// 4006: a data node's TC holds MaxNoOfConcurrentTransactions transactions.
    pub fn out_of_transactions(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4006,
            TemporaryResourceError,
            "Connect failure - out of connection objects (increase MaxNoOfConcurrentTransactions)",
        )
        .detail(detail)
    }
    /// 4010: a data node stopped under a running transaction (temporary: retry).
    pub fn node_failure_abort() -> NdbError {
        NdbError::new(
            4010,
            NodeRecoveryError,
            "Node failure caused abort of transaction",
        )
    }
    /// 4012: a request sent to a data node got no answer in time, or its node was lost
    /// after the commit was sent (the outcome is unknown: read back before retrying).
    pub fn request_timeout(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4012,
            UnknownResultError,
            "Request ndbd time-out, maybe due to high load or communication problems",
        )
        .detail(detail)
    }
    /// 4009 for a partition none of whose replicas' nodes runs.
    pub fn node_group_down(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(4009, UnknownResultError, "Cluster Failure").detail(detail)
    }
    /// 488: a data node holds MaxNoOfConcurrentScans open scans already.
    pub fn too_many_scans(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(488, TemporaryResourceError, "Too many active scans").detail(detail)
    }
    /// 296 (DBTC's ZSCANTIME_OUT_ERROR): the data node closed a scan the API left
    /// unfetched too long, or does not know it.
    pub fn scan_timed_out(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            296,
            TimeoutExpired,
            "Time-out in NDB, probably caused by deadlock",
        )
        .detail(detail)
    }
    pub fn scan_closed() -> NdbError {
        NdbError::new(4120, ApplicationError, "Scan already complete")
    }
    pub fn too_many_operations() -> NdbError {
        NdbError::new(
            233,
            TemporaryResourceError,
            "Out of operation records in transaction coordinator (increase MaxNoOfConcurrentOperations)",
        )
    }
    pub fn max_key_size() -> NdbError {
        NdbError::new(4207, ApplicationError, "Key size is limited to 4092 bytes")
    }
    pub fn row_too_big(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            851,
            ApplicationError,
            "Maximum 8052 bytes of FIXED columns supported, use varchar or COLUMN_FORMAT DYNAMIC",
        )
        .detail(detail)
        .with_mysql_code(1118)
    }
    pub fn internal(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(4000, InternalError, "Internal error").detail(detail)
    }

    // ---- Disk data (DICT 7xx, LGMAN 15xx, TSMAN 16xx) ----

    pub fn out_of_extents(table: &str) -> NdbError {
        NdbError::new(1601, InsufficientSpace, "Out of extents, tablespace full")
            .detail(table)
            .with_mysql_code(1114)
    }
    pub fn no_datafile_in_tablespace(tablespace: &str) -> NdbError {
        NdbError::new(1602, InsufficientSpace, "No datafile in tablespace").detail(tablespace)
    }
    pub fn out_of_undo_space() -> NdbError {
        NdbError::new(1501, TemporaryResourceError, "Out of undo space")
    }
    pub fn out_of_logbuffer_memory(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            1504,
            SchemaError,
            "Out of logbuffer memory(specify smaller undo_buffer_size or increase SharedGlobalMemory)",
        )
        .detail(detail)
    }
    pub fn filegroup_exists(name: &str) -> NdbError {
        NdbError::new(
            721,
            SchemaObjectExists,
            "Schema object with given name already exists",
        )
        .detail(name)
        .with_mysql_code(1050)
    }
    pub fn one_logfile_group_only() -> NdbError {
        NdbError::new(
            1514,
            SchemaError,
            "Currently there is a limit of one logfile group",
        )
    }
    pub fn logfile_group_not_found(name: &str) -> NdbError {
        NdbError::new(789, ApplicationError, "Logfile group not found").detail(name)
    }
    pub fn invalid_tablespace(name: &str) -> NdbError {
        NdbError::new(755, SchemaError, "Invalid tablespace").detail(name)
    }
    pub fn index_on_disk_column(column: &str) -> NdbError {
        NdbError::new(756, SchemaError, "Index on disk column is not supported").detail(column)
    }
    pub fn file_exists(path: impl std::fmt::Display) -> NdbError {
        NdbError::new(760, SchemaError, "File already exists").detail(path)
    }
    pub fn invalid_extent_size(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(764, SchemaError, "Invalid extent size").detail(detail)
    }
    pub fn no_such_file(name: &str) -> NdbError {
        NdbError::new(766, SchemaError, "Cant drop file, no such file").detail(name)
    }
    pub fn no_such_filegroup(name: &str) -> NdbError {
        NdbError::new(767, SchemaError, "Cant drop filegroup, no such filegroup").detail(name)
    }
    pub fn filegroup_in_use(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(768, SchemaError, "Cant drop filegroup, filegroup is used").detail(detail)
    }
    pub fn file_in_use(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(770, SchemaError, "Cant drop file, file is used").detail(detail)
    }
    pub fn invalid_undo_buffer_size(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(779, SchemaError, "Invalid undo buffer size").detail(detail)
    }
    pub fn disk_table_no_logging() -> NdbError {
        NdbError::new(
            798,
            ApplicationError,
            "A disk table must not be specified as no logging",
        )
    }
    /// Creating, extending or writing a file failed (path, permissions, ENOSPC, EIO).
    pub fn file_system_error(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            1509,
            SchemaError,
            "File system error, check if path,permissions etc",
        )
        .detail(detail)
    }
    pub fn file_read_error(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(1512, SchemaError, "File read error").detail(detail)
    }
    pub fn file_too_small(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(1516, SchemaError, "File too small").detail(detail)
    }
    /// A disk page or log record whose checksum, page id or LSN does not verify.
    pub fn corrupt_page(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            896,
            InternalError,
            "Tuple corrupted - wrong checksum or column data in invalid format",
        )
        .detail(detail)
    }

    /// 1218 (ZTRANSPORTER_OVERLOADED_ERROR): the send buffer of a connection the new
    /// work would answer or forward over holds more than OverloadLimit unsent bytes.
    pub fn send_buffers_overloaded(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(1218, OverloadError, "Send Buffers overloaded in NDB kernel").detail(detail)
    }

    // ---- REDO log (DBLQH fragment log) ----

    /// The REDO buffer of a log part did not drain within RedoOverCommitLimit.
    pub fn redo_buffers_overloaded(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            1221,
            OverloadError,
            "REDO buffers overloaded (increase RedoBuffer)",
        )
        .detail(detail)
    }
    /// The REDO log files of a log part stayed full within RedoOverCommitLimit.
    pub fn redo_log_files_overloaded(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            410,
            OverloadError,
            "REDO log files overloaded (decrease TimeBetweenLocalCheckpoints or increase NoOfFragmentLogFiles)",
        )
        .detail(detail)
    }
    /// A single write is larger than a log part can ever hold.
    pub fn redo_log_files_too_small(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            1220,
            TemporaryResourceError,
            "REDO log files overloaded (increase FragmentLogFileSize)",
        )
        .detail(detail)
    }
    /// The dictionary's schema file does not verify (NDBD_EXIT_SR_SCHEMAFILE): bad
    /// magic, unknown format version, checksum mismatch, truncated or inconsistent.
    pub fn corrupt_schema_file(detail: impl std::fmt::Display) -> NdbError {
        NdbError::new(2316, InternalError, "Error while reading the schema file").detail(detail)
    }
    /// `wait_durable` gave up: the commit happened, whether it is on disk yet is unknown.
    pub fn durable_wait_timeout(gci: u64, waited: std::time::Duration) -> NdbError {
        NdbError::new(4008, UnknownResultError, "Receive from NDB failed").detail(format!(
            "GCI {}/{} not durable after {} ms",
            gci >> 32,
            gci as u32,
            waited.as_millis()
        ))
    }
    /// A data node stopped itself (an fsync of its redo or checkpoint failed).
    pub fn node_stopped(node_id: u32, reason: impl std::fmt::Display) -> NdbError {
        NdbError::new(
            4025,
            NodeRecoveryError,
            "Node failure caused abort of transaction",
        )
        .detail(format!("data node {node_id} stopped: {reason}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_constructors_give_the_mysql_code_of_their_ndb_code() {
        use super::codes::*;
        for e in [
            tuple_not_found(),
            tuple_already_exists(),
            unique_violation(),
            deadlock_timeout(),
            out_of_data_memory(),
            out_of_hash_index_memory(),
            out_of_ordered_index_memory(),
            no_such_table("t"),
            no_such_index("i"),
            table_exists("t"),
            index_exists("i"),
            no_such_column("c"),
            value_too_large("v"),
            wrong_type("v"),
            null_in_not_null("c"),
            unsupported("x"),
            row_too_big("r"),
            out_of_extents("t"),
        ] {
            assert_eq!(e.mysql_code, super::mysql_code_of(e.code), "{e}");
            assert_ne!(e.mysql_code, 0, "{e}");
        }
        assert_eq!(super::mysql_code_of(4010), 0);
    }

    use super::*;

    #[test]
    fn status_follows_classification() {
        assert_eq!(
            codes::deadlock_timeout().status,
            ErrorStatus::TemporaryError
        );
        assert_eq!(codes::tuple_not_found().status, ErrorStatus::PermanentError);
        assert_eq!(codes::out_of_data_memory().code, 827);
        assert_eq!(codes::cluster_closed().status, ErrorStatus::UnknownResult);
        assert!(codes::deadlock_timeout().is_temporary());
    }

    #[test]
    fn display_names_code_and_message() {
        let e = codes::no_such_table("t9");
        assert_eq!(
            e.to_string(),
            "No such table existed: t9 (NDB error 723, Permanent error, Schema error)"
        );
    }
}
