//! How many parts an LCP writes in full (ALL), NDB's algorithm
//! (`Backup::calculate_number_of_parts`, `calculate_row_change_count` and
//! `calculate_min_parts` in storage/ndb/src/kernel/blocks/backup/Backup.cpp, 7.6.5+;
//! `calculate_lcp_sizes` in lcp_simulator.cc), and where the ALL range starts.
//!
//! The number of ALL parts is the largest of five rules:
//! 1. Overhead bound: with `y` = changed rows / rows, `z = y * fragment memory / LDM
//!    memory` (a prediction of changes during the LCP; LDM memory is the node's
//!    DataMemory in use divided by its LDM instances), `k = y + z/2` and
//!    `p = RecoveryWork/100`, writing a fraction `x` of the parts in full costs
//!    `(1-x)*k/x` of overhead per full cycle; `x > k/(k+p)` keeps it below `p`, so
//!    `parts = 1 + 2048*k/(k+p)` (truncated).
//! 2. More than 70% of the rows changed: a full LCP (2048), nothing to save.
//! 3. At least `2048 / pages` (a fragment of 1 page is always full), so that most LCPs
//!    write at least one page in full.
//! 4. The first LCP of a fragment is full.
//! 5. At least 1.
//!
//! The changed-row count is weighted as NDB does: the net growth of the fragment counts
//! as inserts weighted by InsertRecoveryWork (default 40%), the net shrink as deletes
//! weighted by [`DELETE_RECOVERY_WORK_PCT`] (120%), the rest of the changes at 100%.
//! Deviation: NDB rounds memory to whole MB before computing `z`; this uses bytes (no
//! 64-bit overflow to avoid in floating point), which differs only for fragments under
//! a few MB. A fragment with no change since its previous LCP writes no data file at
//! all ([`ChangeStats::has_changes`]); `all_parts` is for the other case.

use super::{LCP_PARTS, PartRange};

/// Deletes cost 1.2 updates (NDB's `DELETE_RECOVERY_WORK`, fixed).
pub const DELETE_RECOVERY_WORK_PCT: u32 = 120;

/// What changed in a fragment since its previous LCP (NDB's `get_lcp_frag_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChangeStats {
    /// Rows in the fragment now.
    pub row_count: u64,
    /// Row inserts committed since the previous LCP.
    pub rows_inserted: u64,
    /// Row updates committed since the previous LCP.
    pub rows_updated: u64,
    /// Row deletes committed since the previous LCP.
    pub rows_deleted: u64,
    /// DataMemory used by the fragment's rows.
    pub memory_used_bytes: u64,
    /// DataMemory the node uses divided by its LDM instances (NDB's
    /// `Backup::get_total_memory`; 0: taken as `memory_used_bytes`).
    pub ldm_memory_used_bytes: u64,
    /// Fixed pages of the fragment (NDB's `m_lcp_max_page_cnt`); 0 = unknown (rule 3
    /// not applied).
    pub page_count: u32,
    /// No complete LCP of the fragment exists yet (rule 4: full).
    pub first_lcp: bool,
}

impl ChangeStats {
    /// Any committed change since the previous LCP. Without one (and with a previous
    /// LCP) the LCP writes no data file, only a new control file
    /// ([`super::FragControl::after_idle_lcp`]).
    pub fn has_changes(&self) -> bool {
        self.rows_inserted + self.rows_updated + self.rows_deleted > 0
    }

    /// NDB's `calculate_row_change_count`: changes with the net growth weighted by
    /// InsertRecoveryWork and the net shrink by 120%.
    pub fn weighted_change_count(&self, insert_recovery_work_pct: u32) -> u64 {
        let total = self.rows_inserted + self.rows_updated + self.rows_deleted;
        let (net, weight) = if self.rows_inserted >= self.rows_deleted {
            (
                self.rows_inserted - self.rows_deleted,
                u64::from(insert_recovery_work_pct),
            )
        } else {
            (
                self.rows_deleted - self.rows_inserted,
                u64::from(DELETE_RECOVERY_WORK_PCT),
            )
        };
        (total - net).saturating_add(net.saturating_mul(weight) / 100)
    }
}

/// The partial-LCP settings of config.ini.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialLcpConfig {
    /// `EnablePartialLcp` (default true); false: every LCP is full.
    pub enable_partial_lcp: bool,
    /// `RecoveryWork` (default 60, 25..=100).
    pub recovery_work_pct: u32,
    /// `InsertRecoveryWork` (default 40, 0..=70).
    pub insert_recovery_work_pct: u32,
}

impl Default for PartialLcpConfig {
    fn default() -> Self {
        PartialLcpConfig {
            enable_partial_lcp: true,
            recovery_work_pct: 60,
            insert_recovery_work_pct: 40,
        }
    }
}

/// The number of ALL parts with `EnablePartialLcp` honoured.
pub fn choose_all_parts(stats: &ChangeStats, cfg: &PartialLcpConfig) -> u32 {
    if !cfg.enable_partial_lcp {
        return LCP_PARTS;
    }
    all_parts(stats, cfg.recovery_work_pct, cfg.insert_recovery_work_pct)
}

/// The number of parts this LCP writes in full, in `1..=2048` (module doc). The
/// percentages are clamped to NDB's ranges (RecoveryWork 25..=100, InsertRecoveryWork
/// 0..=70).
pub fn all_parts(
    stats: &ChangeStats,
    recovery_work_pct: u32,
    insert_recovery_work_pct: u32,
) -> u32 {
    // Rule 4, and an empty fragment (NDB: row_count == 0 => full).
    if stats.first_lcp || stats.row_count == 0 {
        return LCP_PARTS;
    }
    let recovery_work = recovery_work_pct.clamp(25, 100);
    let insert_work = insert_recovery_work_pct.min(70);
    let change_count = stats
        .weighted_change_count(insert_work)
        .min(stats.row_count);

    // Rule 1.
    let y = change_count as f64 / stats.row_count as f64;
    // NDB does not bound z by y: a fragment larger than its LDM's share of the
    // node's memory (the share is an average over LDMs) weighs more than 1.
    let ldm_memory = match stats.ldm_memory_used_bytes {
        0 => stats.memory_used_bytes,
        m => m,
    }
    .max(1);
    let z = y * (stats.memory_used_bytes as f64 / ldm_memory as f64);
    let k = y + z / 2.0;
    let p = f64::from(recovery_work) / 100.0;
    let rule1 = (1.0 + f64::from(LCP_PARTS) * k / (k + p)) as u32;
    // Rule 2.
    let rule2 = if 10 * change_count > 7 * stats.row_count {
        LCP_PARTS
    } else {
        0
    };
    // Rule 3.
    let rule3 = match stats.page_count {
        0 => 0, // unknown: the rule is not applied (a fragment with rows has a page)
        1 => LCP_PARTS,
        pages => LCP_PARTS / pages,
    };
    rule1.max(rule2).max(rule3).clamp(1, LCP_PARTS)
}

/// The ALL range of the next LCP: `count` parts starting where the previous LCP's ALL
/// range ended (at part 0 for the first LCP).
pub fn next_all_range(prev: Option<PartRange>, count: u32) -> PartRange {
    PartRange::new(prev.map_or(0, PartRange::end), count.clamp(1, LCP_PARTS))
}
