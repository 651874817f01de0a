//! rndb: an NDB-style database engine — the data nodes of MySQL Cluster, in Rust.
//!
//! Layout follows NDB's blocks: [`storage`] (DBTUP pages and rows), [`index`] (DBACC hash
//! index, DBTUX ordered index), [`txn`] (DBLQH: fragments, row locks, pending changes),
//! [`api`] (DBTC transactions and what the wrappers call: Cluster, Ndb, Transaction),
//! [`schema`] (DBDICT), [`config`] (config.ini), [`mgm`] and [`ndbinfo`] (management
//! commands and monitoring tables) and [`sql`] (the SQL subset).

pub mod api;
pub mod checkpoint;
pub mod config;
pub mod disk;
pub mod error;
pub mod index;
pub mod log;
pub mod mgm;
pub mod ndbinfo;
pub mod schema;
pub mod sql;
pub mod storage;
pub mod txn;

pub use api::{AbortOption, Cluster, ExecType, Ndb, OpId, OpKind, OpOutcome, Transaction};
pub use error::{ErrorClassification, ErrorStatus, NdbError, Result};
pub use schema::Value;
pub use txn::LockMode;
