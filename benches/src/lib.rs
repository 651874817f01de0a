//! Shared helpers of the benchmark programs: a seeded PRNG (no wall clock or OS
//! randomness in measured loops), the benchmark table, and ([`procs`]) the
//! processes of the scenario benchmarks.

use rndb::api::{Ndb, TableRuntime, TableSpec};
use rndb::schema::{Charset, Column, ColumnType, IndexKind};
use std::sync::Arc;

pub mod procs;

/// xorshift64*: deterministic, fast, good enough to shuffle keys.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// The table: BIGINT UNSIGNED key, INT, VARCHAR(32) (16 characters stored).
pub fn kv_table(ndb: &Ndb, name: &str, with_index: bool) -> rndb::Result<Arc<TableRuntime>> {
    let spec = kv_table_spec(name);
    ndb.create_table(if with_index {
        spec.index("ix_a", IndexKind::OrderedIndex, &["a"])
    } else {
        spec
    })
}

/// The definition of [`kv_table`], without an index (set `logging` for NoLogging).
pub fn kv_table_spec(name: &str) -> TableSpec {
    three_column_spec(name, 32, Charset::Utf8mb4)
}

/// BIGINT UNSIGNED key `id`, INT `a`, VARCHAR(`b_len`) `b`: the benchmarks' tables.
fn three_column_spec(name: &str, b_len: u32, charset: Charset) -> TableSpec {
    TableSpec::new(
        name,
        vec![
            Column::new(
                "id",
                ColumnType::Int {
                    bytes: 8,
                    unsigned: true,
                },
            )
            .primary_key(),
            Column::new(
                "a",
                ColumnType::Int {
                    bytes: 4,
                    unsigned: false,
                },
            ),
            Column::new(
                "b",
                ColumnType::Varchar {
                    len: b_len,
                    charset,
                },
            ),
        ],
    )
}

/// The 16-character value stored in column b for key `i`.
pub fn value_b(i: u64) -> String {
    format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Characters of [`restart_value`].
pub const RESTART_VALUE_CHARS: usize = 160;

/// The restart benchmarks' table (seeds 004's ~200-byte rows): BIGINT UNSIGNED key `id`,
/// INT `a`, VARCHAR(200) `b` holding [`restart_value`].
pub fn restart_table(ndb: &Ndb, name: &str) -> rndb::Result<Arc<TableRuntime>> {
    ndb.create_table(three_column_spec(name, 200, Charset::Latin1))
}

/// Column b of row `i` of [`restart_table`]: 160 pseudo-random hex characters (not
/// compressible by repeats).
pub fn restart_value(i: u64) -> String {
    let mut r = Rng::new(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut s = String::with_capacity(RESTART_VALUE_CHARS);
    while s.len() < RESTART_VALUE_CHARS {
        s.push_str(&format!("{:016x}", r.next_u64()));
    }
    s
}

/// Median of measurements.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
