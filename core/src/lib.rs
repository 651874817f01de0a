//! rndb: an NDB-style database engine — the data nodes of MySQL Cluster, in Rust.
//!
//! Layout follows NDB's blocks: [`storage`] (DBTUP pages and rows), [`index`] (DBACC hash
//! index, DBTUX ordered index), [`txn`] (DBTC/DBLQH: transactions, operations, row locks),
//! [`schema`] (DBDICT), [`config`] (config.ini), [`ndbinfo`] and [`mgm`] (monitoring and
//! management commands), [`sql`] (the SQL subset) and [`api`] (what the wrappers call:
//! Cluster, Ndb, Transaction).

pub mod error;
pub mod schema;
pub mod storage;

pub use error::{ErrorClassification, ErrorStatus, NdbError, Result};
