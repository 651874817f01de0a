//! `sendPollNdb` against a remote cluster (the `remote` module's notes): one-round
//! transactions sent together, committed key reads in one request per table and data
//! node, and the order that keeps each transaction seeing the ones before it.

use crate::ndb::NdbObj;
use crate::remote::RemoteNdb;
use crate::remote_exec::Submitted;
use crate::txn::TxObj;
use rndb_core::api::TableRuntime;
use rndb_core::error::NdbError;
use rndb_core::schema::Value;
use rndb_core::{AbortOption, ExecType};
use std::sync::Arc;

/// with their abort option and exec type), all at once: the reads of one table and
/// columns go in one request per data node (`RemoteCluster::read_submit`), no TC
/// involved, every request sent before the first answer is waited for.
fn run_committed_reads(
    rn: &RemoteNdb,
    db: &str,
    reads: &mut Vec<(usize, AbortOption, ExecType)>,
    list: &[crate::handle::Handle],
    results: &mut [Option<bool>],
) {
    if reads.is_empty() {
        return;
    }
    struct Group {
        table: Arc<TableRuntime>,
        columns: Vec<u32>,
        keys: Vec<Vec<Value>>,
        /// (position in `reads`, operation) of each key.
        at: Vec<(usize, usize)>,
    }
    let mut groups: Vec<Group> = Vec::new();
    for (r, &(k, _, _)) in reads.iter().enumerate() {
        let Ok(tx) = crate::ndb::tx_by_handle(list[k]) else {
            continue;
        };
        for (i, op) in tx.ops[..tx.n_ops].iter().enumerate() {
            let Some(table) = &op.table else { continue };
            let columns: Vec<u32> = op.read_cols().iter().map(|&c| c as u32).collect();
            let key: Vec<Value> = table
                .def
                .primary_key
                .iter()
                .filter_map(|p| op.key.iter().find(|(c, _)| c == p).map(|(_, v)| v.clone()))
                .collect();
            let g = match groups
                .iter_mut()
                .position(|g| Arc::ptr_eq(&g.table, table) && g.columns == columns)
            {
                Some(g) => &mut groups[g],
                None => {
                    groups.push(Group {
                        table: table.clone(),
                        columns,
                        keys: Vec::new(),
                        at: Vec::new(),
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            g.keys.push(key);
            g.at.push((r, i));
        }
    }
    let sent: Vec<_> = groups
        .iter()
        .map(|g| {
            rn.cluster
                .read_submit(db, &g.table.def.name, &g.keys, &g.columns)
        })
        .collect();
    // (rows, error) per read transaction, by operation.
    let mut rows: Vec<Vec<Option<Vec<Value>>>> = reads
        .iter()
        .map(|&(k, _, _)| {
            let n = crate::ndb::tx_by_handle(list[k]).map_or(0, |t| t.n_ops);
            vec![None; n]
        })
        .collect();
    let mut failed: Vec<Option<NdbError>> = vec![None; reads.len()];
    for (g, s) in groups.iter().zip(sent) {
        let answer = match s.and_then(|p| p.wait()) {
            // A node that is starting: read from another replica, one request at a time.
            Err(e) if e.code == 4035 => {
                rn.cluster
                    .read_batch(db, &g.table.def.name, &g.keys, &g.columns)
            }
            other => other,
        };
        match answer {
            Ok(found) => {
                for (&(r, i), row) in g.at.iter().zip(found) {
                    rows[r][i] = row;
                }
            }
            Err(e) => {
                for &(r, _) in &g.at {
                    failed[r].get_or_insert_with(|| e.clone());
                }
            }
        }
    }
    for (((k, abort, exec), got), err) in reads.drain(..).zip(rows).zip(failed) {
        let Ok(tx) = crate::ndb::tx_by_handle(list[k]) else {
            continue;
        };
        results[k] = Some(tx.finish_committed_reads(got, err, abort, exec).is_ok());
    }
}

/// Hashes of the rows a prepared transaction's operations name (table and key): two
/// transactions whose sets meet may touch the same row.
fn row_hashes(tx: &TxObj) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    tx.ops[..tx.n_ops]
        .iter()
        .filter_map(|o| {
            let t = o.table.as_ref()?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            t.def.name.hash(&mut h);
            for (c, v) in &o.key {
                c.hash(&mut h);
                // A key given as signed or unsigned names the same row; values with
                // floats (no Hash) hash their debug text. A collision only costs a wait.
                match v {
                    Value::Int(i) => i128::from(*i).hash(&mut h),
                    Value::UInt(u) => i128::from(*u).hash(&mut h),
                    Value::Str(s) => s.hash(&mut h),
                    Value::Bytes(b) => b.hash(&mut h),
                    other => format!("{other:?}").hash(&mut h),
                }
            }
            Some(h.finish())
        })
        .collect()
}

/// `sendPollNdb` against a remote cluster (see the module notes): one-round
/// transactions are sent together and their answers read afterwards, committed reads
/// together at the next drain, except that a transaction naming a row that one in
/// flight names waits for those in flight to end first (a write waits for the reads
/// gathered before it), and the others run alone, in turn: each transaction sees what
/// the ones prepared before it did, as on the embedded cluster. Completions go to
/// `n.completed` in `list` order.
pub(crate) fn execute_prepared_remote(n: &mut NdbObj, list: &[crate::handle::Handle]) {
    let NdbObj {
        remote,
        database,
        completed: done,
        ..
    } = n;
    let db = database.to_str().unwrap_or("def").to_string();
    let Some(rn) = remote.as_mut() else {
        return;
    };
    struct InFlight {
        at: usize,
        sent: Submitted,
        abort: AbortOption,
    }
    fn drain(
        rn: &RemoteNdb,
        db: &str,
        inflight: &mut Vec<InFlight>,
        reads: &mut Vec<(usize, AbortOption, ExecType)>,
        rows: &mut std::collections::HashSet<u64>,
        list: &[crate::handle::Handle],
        results: &mut [Option<bool>],
    ) {
        run_committed_reads(rn, db, reads, list, results);
        for f in inflight.drain(..) {
            if let Ok(tx) = crate::ndb::tx_by_handle(list[f.at]) {
                results[f.at] = Some(tx.finish_submitted(f.sent, f.abort).is_ok());
            }
        }
        rows.clear();
    }
    let mut results: Vec<Option<bool>> = vec![None; list.len()];
    let mut asynchs = Vec::with_capacity(list.len());
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut reads: Vec<(usize, AbortOption, ExecType)> = Vec::new();
    let mut rows = std::collections::HashSet::new();
    for (k, &h) in list.iter().enumerate() {
        let Ok(tx) = crate::ndb::tx_by_handle(h) else {
            asynchs.push(None);
            continue;
        };
        let Some(a) = tx.asynch.take() else {
            asynchs.push(None);
            continue;
        };
        if tx.fast_reads_eligible(a.exec) {
            // Committed key reads: sent with the others of the batch (`run_committed_reads`),
            // after the writes in flight to the rows they read.
            if !rows.is_empty() && row_hashes(tx).iter().any(|r| rows.contains(r)) {
                drain(
                    rn,
                    &db,
                    &mut inflight,
                    &mut reads,
                    &mut rows,
                    list,
                    &mut results,
                );
            }
            reads.push((k, a.abort, a.exec));
        } else if tx.one_round(a.exec, a.abort) {
            let mine = row_hashes(tx);
            if !reads.is_empty() || mine.iter().any(|r| rows.contains(r)) {
                drain(
                    rn,
                    &db,
                    &mut inflight,
                    &mut reads,
                    &mut rows,
                    list,
                    &mut results,
                );
            }
            let tx = match crate::ndb::tx_by_handle(h) {
                Ok(tx) => tx,
                Err(_) => {
                    asynchs.push(Some(a));
                    continue;
                }
            };
            match tx.submit_remote(rn, &db, a.abort) {
                Ok(sent) => {
                    rows.extend(mine);
                    inflight.push(InFlight {
                        at: k,
                        sent,
                        abort: a.abort,
                    });
                }
                Err(_) => results[k] = Some(false),
            }
        } else {
            drain(
                rn,
                &db,
                &mut inflight,
                &mut reads,
                &mut rows,
                list,
                &mut results,
            );
            if let Ok(tx) = crate::ndb::tx_by_handle(h) {
                results[k] = Some(tx.execute_remote(rn, &db, a.exec, a.abort).is_ok());
            }
        }
        asynchs.push(Some(a));
    }
    drain(
        rn,
        &db,
        &mut inflight,
        &mut reads,
        &mut rows,
        list,
        &mut results,
    );
    for ((&h, a), ok) in list.iter().zip(asynchs).zip(results) {
        let Some(a) = a else { continue };
        done.push(crate::txn::Completion {
            tx: h,
            result: if ok == Some(true) { 0 } else { -1 },
            cb: a.cb,
            arg: a.arg,
        });
    }
}
