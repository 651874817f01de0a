//! Row locks and pending changes of one fragment (DBACC lock queues, DBTUP copy tuples).
//!
//! A row that some transaction has locked or changed has an entry in the fragment's
//! [`LockTable`] and the `ROW_LOCKED` bit in its header, so reads of unlocked rows never
//! look here. An entry holds the exclusive owner or the shared owners, and the owner's
//! uncommitted change ([`Pending`]): rows in pages always hold committed data, except a
//! row inserted by an uncommitted transaction (`ROW_ALLOC`), which only its inserter sees.
//!
//! Compatibility: shared with shared; exclusive with nothing held by another
//! transaction; a sole shared holder may upgrade to exclusive. A request that conflicts
//! is answered `Blocked` and the caller waits on the fragment's condition variable until
//! a lock is released or TransactionDeadlockDetectionTimeout passes (error 266).

use crate::disk::node::DiskReservation;
use crate::storage::RowId;
use hashbrown::HashMap;

/// Transaction id, unique within a cluster run.
pub type TxnId = u64;

/// NdbOperation::LockMode, with NDB's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum LockMode {
    /// Shared lock held until the transaction ends.
    Read = 0,
    /// Exclusive lock held until the transaction ends.
    Exclusive = 1,
    /// No lock: the latest committed value (LM_Dirty).
    CommittedRead = 2,
    /// Shared lock released as soon as the row is read.
    SimpleRead = 3,
}

/// The disk part of a pending insert: the disk image, written at commit into room
/// reserved on a disk page at prepare (with its undo space).
#[derive(Debug)]
pub struct DiskInsert {
    pub image: Vec<u8>,
    pub res: DiskReservation,
}

/// The disk part of a pending update (only when a disk column changes).
#[derive(Debug)]
pub enum DiskChange {
    /// The new image is not longer than the record: rewritten in place at commit.
    InPlace { image: Vec<u8>, undo_bytes: u64 },
    /// Longer: written at commit into room reserved at prepare, the old record freed.
    Move {
        image: Vec<u8>,
        res: DiskReservation,
        free_undo_bytes: u64,
    },
}

impl DiskChange {
    pub fn image(&self) -> &[u8] {
        match self {
            DiskChange::InPlace { image, .. } | DiskChange::Move { image, .. } => image,
        }
    }
}

/// The uncommitted change of a row's exclusive owner.
#[derive(Debug)]
pub enum Pending {
    /// The row was inserted (it carries ROW_ALLOC until commit). `reserved` is the
    /// bitmask of ordered indexes with a reserved insert; `disk` the disk part of a
    /// table with disk columns.
    Insert {
        reserved: u64,
        disk: Option<Box<DiskInsert>>,
    },
    /// After-image of the row. `new_var` is a var entry allocated at prepare when the
    /// after-image's var part is larger than the row's (so commit never allocates);
    /// `disk` the new disk image when a disk column changes.
    Update {
        fixed: Vec<u8>,
        var: Vec<u8>,
        new_var: Option<u32>,
        reserved: u64,
        disk: Option<Box<DiskChange>>,
    },
    /// The row is deleted at commit; `disk_undo_bytes` is the undo space reserved for
    /// freeing its disk record (0 without disk columns).
    Delete { disk_undo_bytes: u64 },
}

#[derive(Debug, Default)]
pub struct RowLock {
    pub exclusive: Option<TxnId>,
    pub shared: Vec<TxnId>,
    pub pending: Option<Pending>,
}

impl RowLock {
    /// Whether `txn` may take the lock in `mode` now.
    pub fn compatible(&self, txn: TxnId, exclusive: bool) -> bool {
        if let Some(owner) = self.exclusive {
            return owner == txn;
        }
        if exclusive {
            self.shared.iter().all(|&t| t == txn)
        } else {
            true
        }
    }

    /// Takes the lock (caller checked `compatible`).
    pub fn grant(&mut self, txn: TxnId, exclusive: bool) {
        assert!(
            self.compatible(txn, exclusive),
            "granting an incompatible lock"
        );
        if exclusive {
            self.exclusive = Some(txn);
            self.shared.retain(|&t| t != txn);
        } else if self.exclusive != Some(txn) && !self.shared.contains(&txn) {
            self.shared.push(txn);
        }
    }

    /// Releases every hold of `txn`; returns true when nobody holds the row any more.
    pub fn release(&mut self, txn: TxnId) -> bool {
        if self.exclusive == Some(txn) {
            self.exclusive = None;
            assert!(
                self.pending.is_none(),
                "releasing an exclusive lock with a pending change"
            );
        }
        self.shared.retain(|&t| t != txn);
        self.exclusive.is_none() && self.shared.is_empty()
    }

    pub fn holds(&self, txn: TxnId) -> bool {
        self.exclusive == Some(txn) || self.shared.contains(&txn)
    }

    /// The pending change if `txn` owns it.
    pub fn pending_of(&self, txn: TxnId) -> Option<&Pending> {
        if self.exclusive == Some(txn) {
            self.pending.as_ref()
        } else {
            None
        }
    }
}

/// Lock entries of one fragment, by row.
#[derive(Default)]
pub struct LockTable {
    rows: HashMap<RowId, RowLock, foldhash::fast::FixedState>,
}

impl LockTable {
    /// Whether some row is held exclusively by a transaction for which `f` is true.
    pub fn any_owner(&self, mut f: impl FnMut(TxnId) -> bool) -> bool {
        self.rows.values().any(|l| l.exclusive.is_some_and(&mut f))
    }

    pub fn get(&self, row: RowId) -> Option<&RowLock> {
        self.rows.get(&row)
    }
    pub fn get_mut(&mut self, row: RowId) -> Option<&mut RowLock> {
        self.rows.get_mut(&row)
    }
    pub fn entry(&mut self, row: RowId) -> &mut RowLock {
        self.rows.entry(row).or_default()
    }
    pub fn remove(&mut self, row: RowId) -> Option<RowLock> {
        self.rows.remove(&row)
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// (row, exclusive owner, shared owners) for ndbinfo-style views, in row order.
    pub fn snapshot(&self) -> Vec<(RowId, Option<TxnId>, Vec<TxnId>)> {
        let mut v: Vec<_> = self
            .rows
            .iter()
            .map(|(r, l)| (*r, l.exclusive, l.shared.clone()))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_matrix() {
        let mut l = RowLock::default();
        assert!(l.compatible(1, false));
        l.grant(1, false);
        assert!(l.compatible(2, false), "shared with shared");
        assert!(
            !l.compatible(2, true),
            "exclusive blocked by another's shared"
        );
        assert!(l.compatible(1, true), "sole shared holder upgrades");
        l.grant(2, false);
        assert!(!l.compatible(1, true), "upgrade blocked by a second reader");
        assert!(!l.release(1));
        assert!(l.release(2));
        l.grant(3, true);
        assert!(!l.compatible(4, false));
        assert!(l.compatible(3, false));
        assert!(l.release(3));
    }
}
