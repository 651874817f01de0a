//! SQL that changes rows over TCP in a cluster of several node groups. A data node
//! holds only its own group's partitions, so the API node captures the statement on
//! one node of every group at once (`SqlCaptureReq`), keeps what each group may
//! answer for (`sql::GroupCapture`), adds up the results and applies the union in one
//! transaction, as for one group (`remote_sql.rs`):
//!
//! - UPDATE, DELETE: each group changes the rows it holds; all are kept. Rows
//!   affected and the info line's counts are the groups' sums.
//! - INSERT, REPLACE (VALUES): every group runs the whole statement, rows of other
//!   groups landing in partitions that are empty there; a row is kept from the group
//!   owning its key, which saw the row it collides with (630) or replaces. Rows
//!   affected: each group's count less its rows of other groups (each a fresh insert
//!   there, counted 1); `Records` is the statement's; INSERT IGNORE's duplicates are
//!   the records not inserted.
//! - INSERT, REPLACE into a table without a primary key: its new rows have no key of
//!   their own until this node gives them one (`tuple_id.rs`), so no group owns them,
//!   and none collides with a row of another group: one group runs the statement and
//!   all its rows are kept.
//! - AUTO_INCREMENT: a statement takes its generated values as one consecutive block,
//!   so captures that start from the same value generate the same ones. Each capture
//!   answers its first value; when they differ (each group's counter has seen only its
//!   own rows), the attempt ends with a temporary error and the next one asks every
//!   group to start at least at the highest (`auto_increment_floor`).
//!
//! A statement whose keys are known before it runs — an UPDATE or DELETE whose WHERE
//! pins the primary key (`id = 5`, `id IN (...)`), an INSERT or REPLACE whose VALUES
//! give every key column as a literal — is captured only on the groups holding those
//! keys (`sql::pinned_keys`).
//!
//! UPDATE/DELETE ... LIMIT: the keys are chosen here first, over every group (a SELECT
//! of the primary key with the statement's WHERE, ORDER BY and LIMIT,
//! `remote_select.rs`), and each group is given its own (`SqlCaptureReq`'s keys), which
//! its capture reads again under lock and checks against the WHERE.
//!
//! INSERT ... SELECT of an NDB table: the SELECT runs here first, over every group, and
//! every group is given its rows (at most [`MAX_GIVEN_BYTES`]), then the rows are kept
//! by owner as for VALUES. An UPDATE that moves a row's key onto a key held
//! in another group is found at the apply (630), retried, and fails with 630 when the
//! retry budget ends.

use super::datapath::sql_err_from;
use super::layout::node_group_of;
use super::remote::RemoteCluster;
use super::remote_session::SessionRows;
use crate::error::{NdbError, Result, codes};
use crate::schema::{TableDef, Value};
use crate::sql::{GroupCapture, SessionVars, SqlResult};
use crate::transport::data::{DataMsg, RowChange};
use std::sync::Arc;

/// Rows an INSERT ... SELECT sends with its capture, at most (a frame is 16 MiB, and
/// the answer carries them back with their images).
pub const MAX_GIVEN_BYTES: usize = 4 << 20;

/// One group's capture.
struct GroupConf {
    group: usize,
    changes: Vec<RowChange>,
    affected: u64,
    info: String,
    last_insert_id: u64,
}

impl RemoteCluster {
    /// Captures `sql` on one node of each node group and merges the answers (module
    /// notes): the statement's result and the rows to change. `floor` is the
    /// AUTO_INCREMENT floor to ask for, raised when the groups' values differed.
    pub(super) fn capture_groups(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        how: GroupCapture,
        floor: &mut u64,
        own: Option<&SessionRows>,
        vars: &SessionVars,
    ) -> Result<(SqlResult, Vec<RowChange>)> {
        let overlay = own.map_or(&[][..], |o| o.overlay());
        // A group is given the session's rows it owns: a row of another group written
        // there too would be changed by the statement twice.
        let groups = self.node_groups().len();
        let mut overlays: Vec<Vec<RowChange>> = vec![Vec::new(); groups];
        for r in overlay {
            let def = self.table(&r.database, &r.table)?;
            overlays[node_group_of(Self::partition_of(&def, &r.key)?, groups)].push(r.clone());
        }
        // UPDATE/DELETE ... LIMIT: the keys are chosen here, over every group, and each
        // group is given its own. INSERT ... SELECT: the SELECT runs here, over every
        // group, and every group is given all its rows.
        let mut given: Vec<Option<Vec<Vec<Value>>>> = vec![None; groups];
        let mut asked = match how {
            GroupCapture::RowsByOwner {
                select_first: true, ..
            } => {
                let rows = self.insert_rows_first(database, sql, own, vars)?;
                given = vec![rows; groups];
                vec![true; groups]
            }
            GroupCapture::KeysFirst => {
                let (def, chosen) = self.keys_first(database, sql, own, vars)?;
                let mut asked = vec![false; groups];
                for k in chosen {
                    let g = node_group_of(Self::partition_of(&def, &k)?, groups);
                    asked[g] = true;
                    given[g].get_or_insert_with(Vec::new).push(k);
                }
                if !asked.contains(&true) {
                    asked[0] = true;
                    given[0] = Some(Vec::new());
                }
                asked
            }
            _ => self.groups_to_ask(database, sql, vars)?,
        };
        let hidden_key_insert = matches!(how, GroupCapture::RowsByOwner { .. })
            && self.changes_hidden_key_table(database, sql);
        if hidden_key_insert {
            asked = (0..groups).map(|g| g == 0).collect();
        }
        let mut pending = Vec::with_capacity(groups);
        for (g, nodes) in self.node_groups().iter().enumerate() {
            if !asked[g] {
                continue;
            }
            let node = self.first_usable(nodes).ok_or_else(|| {
                codes::node_group_down(format!("no data node of node group {g} is connected"))
            })?;
            let p = self.submit(node, false, |req| DataMsg::SqlCaptureReq {
                req,
                database: database.into(),
                sql: sql.into(),
                auto_increment_floor: *floor,
                overlay: std::mem::take(&mut overlays[g]),
                given_rows: given[g].take(),
                vars: vars.clone(),
            })?;
            pending.push((g, p));
        }
        // Every answer is awaited; the statement's own error (permanent) wins over a
        // temporary one, so that it is not retried.
        let mut confs = Vec::with_capacity(pending.len());
        let mut error: Option<NdbError> = None;
        for (g, p) in pending {
            match p.wait().and_then(|m| group_conf(g, m)) {
                Ok(c) => confs.push(c),
                Err(e) => {
                    // A starting node: the retry asks another of its group.
                    if e.code == 4035 {
                        self.note_not_ready(&e);
                    }
                    if error
                        .as_ref()
                        .is_none_or(|old| old.is_temporary() && !e.is_temporary())
                    {
                        error = Some(e);
                    }
                }
            }
        }
        if let Some(e) = error {
            return Err(e);
        }
        let first_ids: Vec<u64> = confs.iter().map(|c| c.last_insert_id).collect();
        if first_ids.iter().any(|&id| id != first_ids[0]) {
            *floor = first_ids.iter().copied().max().unwrap_or(0);
            return Err(codes::deadlock_timeout().detail(format!(
                "the node groups' captures generated different AUTO_INCREMENT values \
                 (first {first_ids:?}); capturing again from {floor}"
            )));
        }
        let (affected, changes, inserted) = match how {
            GroupCapture::RowsByOwner { .. } if !hidden_key_insert => {
                self.keep_owned(&mut confs)?
            }
            _ => {
                let affected = confs.iter().map(|c| c.affected).sum();
                let changes: Vec<RowChange> = confs
                    .iter_mut()
                    .flat_map(|c| std::mem::take(&mut c.changes))
                    .collect();
                let inserted = changes.iter().filter(|c| c.before.is_none()).count() as u64;
                (affected, changes, inserted)
            }
        };
        let dups = match how {
            GroupCapture::RowsByOwner { ignore: true, .. } => Some(inserted),
            _ => None,
        };
        let infos: Vec<&str> = confs.iter().map(|c| c.info.as_str()).collect();
        let result = SqlResult::Affected {
            rows: affected,
            last_insert_id: (first_ids[0] != 0).then_some(first_ids[0]),
            info: merge_info(&infos, dups),
        };
        Ok((result, changes))
    }

    /// Whether `sql` changes a table without a primary key.
    fn changes_hidden_key_table(&self, database: &str, sql: &str) -> bool {
        crate::sql::changed_table(sql, database)
            .and_then(|(db, table)| self.table(&db, &table).ok())
            .is_some_and(|def| def.has_hidden_pk())
    }

    /// The node groups that capture `sql`: every one, but when the keys it can change
    /// are known before it runs (`sql::pinned_keys`) only those holding them (at least
    /// one, for the statement's result when no key is left).
    fn groups_to_ask(&self, database: &str, sql: &str, vars: &SessionVars) -> Result<Vec<bool>> {
        let groups = self.node_groups().len();
        let every = vec![true; groups];
        let Some((db, table)) = crate::sql::changed_table(sql, database) else {
            return Ok(every);
        };
        // A table that is not there: every group answers for itself.
        let Ok(def) = self.table(&db, &table) else {
            return Ok(every);
        };
        let Some(keys) = crate::sql::pinned_keys(sql, database, &def, vars) else {
            return Ok(every);
        };
        let mut asked = vec![false; groups];
        for k in &keys {
            // A key value the column cannot take: the capture reports it.
            let Ok(p) = Self::partition_of(&def, k) else {
                return Ok(every);
            };
            asked[node_group_of(p, groups)] = true;
        }
        if !asked.contains(&true) {
            asked[0] = true;
        }
        Ok(asked)
    }

    /// The rows of an INSERT ... SELECT: its SELECT run here over every group (with a
    /// session's own rows in place); None when it reads no NDB table (a data node runs
    /// it). At most [`MAX_GIVEN_BYTES`] of them (233 beyond: they go with the capture).
    fn insert_rows_first(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        own: Option<&SessionRows>,
        vars: &SessionVars,
    ) -> Result<Option<Vec<Vec<Value>>>> {
        let Some(q) = crate::sql::insert_select(sql, database) else {
            return Ok(None);
        };
        let q = q.with_vars(vars);
        let rows = match self.select_result(&q, own, None)? {
            SqlResult::Rows { rows, .. } => rows,
            SqlResult::Affected { .. } => return Err(codes::internal("a SELECT without rows")),
        };
        let bytes: usize = rows
            .iter()
            .flatten()
            .map(crate::transport::data_scan::value_bytes)
            .sum();
        if bytes > MAX_GIVEN_BYTES {
            return Err(codes::too_many_operations().detail(format!(
                "INSERT ... SELECT over several node groups sends the SELECT's rows with the \
                 statement, at most {} MiB; this one selects {} rows ({bytes} bytes): insert \
                 them in smaller ranges",
                MAX_GIVEN_BYTES >> 20,
                rows.len()
            )));
        }
        Ok(Some(rows))
    }

    /// The table of an UPDATE or DELETE ... LIMIT and the keys it changes at most: its
    /// WHERE, ORDER BY and LIMIT run here over every group (with a session's own rows
    /// in place).
    fn keys_first(
        self: &Arc<Self>,
        database: &str,
        sql: &str,
        own: Option<&SessionRows>,
        vars: &SessionVars,
    ) -> Result<(Arc<TableDef>, Vec<Vec<Value>>)> {
        let (db, table) =
            crate::sql::changed_table(sql, database).ok_or_else(crate::sql::no_database)?;
        let def = self.table(&db, &table)?;
        let q = crate::sql::keys_select(sql, database, &def)
            .ok_or_else(|| codes::internal("no key SELECT for a LIMIT statement"))?
            .with_vars(vars);
        match self.select_result(&q, own, None)? {
            SqlResult::Rows { rows, .. } => Ok((def, rows)),
            SqlResult::Affected { .. } => Err(codes::internal("a key SELECT without rows")),
        }
    }

    /// Each group's rows of its own partitions: (rows affected, the rows, how many
    /// of them are inserted rows).
    fn keep_owned(&self, confs: &mut [GroupConf]) -> Result<(u64, Vec<RowChange>, u64)> {
        let groups = self.node_groups().len();
        let mut affected = 0u64;
        let mut kept = Vec::new();
        for conf in confs.iter_mut() {
            let g = conf.group;
            let mut foreign = 0u64;
            for c in std::mem::take(&mut conf.changes) {
                let def = self.table(&c.database, &c.table)?;
                let owner = node_group_of(Self::partition_of(&def, &c.key)?, groups);
                if owner == g {
                    kept.push(c);
                } else {
                    foreign += 1;
                }
            }
            affected += conf.affected.saturating_sub(foreign);
        }
        let inserted = kept.iter().filter(|c| c.before.is_none()).count() as u64;
        Ok((affected, kept, inserted))
    }
}

fn group_conf(group: usize, m: DataMsg) -> Result<GroupConf> {
    match m {
        DataMsg::SqlCaptureConf {
            code: 0,
            changes,
            affected,
            info,
            last_insert_id,
            ..
        } => Ok(GroupConf {
            group,
            changes,
            affected,
            info,
            last_insert_id,
        }),
        DataMsg::SqlCaptureConf {
            code,
            class,
            text,
            mysql_code,
            ..
        } => Err(sql_err_from(code, class, &text, mysql_code)),
        _ => Err(codes::internal("unexpected answer to a captured statement")),
    }
}

/// The groups' info lines ("Label: n" pairs, two spaces apart) as one: `Records`
/// from the first (every group ran the whole statement), the other counts summed;
/// with `inserted` (INSERT IGNORE), `Duplicates` and `Warnings` are the records not
/// inserted. None when no group had one.
fn merge_info(infos: &[&str], inserted: Option<u64>) -> Option<String> {
    let parse = |s: &str| -> Vec<(String, u64)> {
        s.split("  ")
            .filter_map(|part| {
                let (label, n) = part.split_once(": ")?;
                Some((label.trim().to_string(), n.trim().parse().ok()?))
            })
            .collect()
    };
    let parsed: Vec<Vec<(String, u64)>> = infos
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| parse(s))
        .collect();
    let first = parsed.first()?;
    let records = first
        .iter()
        .find(|(l, _)| l == "Records")
        .map_or(0, |(_, n)| *n);
    let parts: Vec<String> = first
        .iter()
        .enumerate()
        .map(|(i, (label, n))| {
            let value = match (label.as_str(), inserted) {
                ("Records", _) => *n,
                ("Duplicates" | "Warnings", Some(ins)) => records.saturating_sub(ins),
                _ => parsed.iter().filter_map(|p| p.get(i)).map(|(_, n)| n).sum(),
            };
            format!("{label}: {value}")
        })
        .collect();
    Some(parts.join("  "))
}

#[cfg(test)]
mod tests {
    use super::merge_info;

    #[test]
    fn info_lines_add_up_as_the_statement_would_report() {
        assert_eq!(
            merge_info(
                &[
                    "Rows matched: 3  Changed: 2  Warnings: 0",
                    "Rows matched: 4  Changed: 4  Warnings: 0"
                ],
                None
            )
            .as_deref(),
            Some("Rows matched: 7  Changed: 6  Warnings: 0")
        );
        assert_eq!(
            merge_info(
                &[
                    "Records: 5  Duplicates: 0  Warnings: 0",
                    "Records: 5  Duplicates: 1  Warnings: 0"
                ],
                None
            )
            .as_deref(),
            Some("Records: 5  Duplicates: 1  Warnings: 0")
        );
        assert_eq!(
            merge_info(
                &[
                    "Records: 5  Duplicates: 1  Warnings: 1",
                    "Records: 5  Duplicates: 2  Warnings: 2"
                ],
                Some(3)
            )
            .as_deref(),
            Some("Records: 5  Duplicates: 2  Warnings: 2")
        );
        assert_eq!(merge_info(&["", ""], None), None);
    }
}
