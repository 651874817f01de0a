//! The copy and sweep of a node restart from the node's own files, on the replicas of
//! a running embedded cluster (`replica.rs`).

use super::{CopyProgress, REDO_DELETE, index_hash, key_hash, var_of};
use crate::api::Cluster;
use crate::config::ClusterConfig;
use crate::sql::Session;
use crate::storage::RowId;

fn cluster_with_rows(n: u32) -> Cluster {
    let c = Cluster::embedded(ClusterConfig::embedded(2, 2).expect("config")).expect("start");
    let mut s = Session::new(c.ndb("test"));
    // A var part too: its in-memory reference is not part of a row's image.
    s.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(40)) ENGINE=ndbcluster")
        .expect("create");
    let values: Vec<String> = (0..n).map(|k| format!("({k}, {k}, 'row {k}')")).collect();
    s.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
        .expect("insert");
    c
}

/// A replica row whose key the source no longer holds is deleted by the sweep, even
/// when it was written after the GCI the replica was restored to (a checkpoint chain
/// may hold such a row); every other row stays.
#[test]
fn the_sweep_deletes_rows_gone_at_the_source_whatever_their_gci() {
    let c = cluster_with_rows(300);
    let t = c.ndb("test").table("t").expect("t");
    let reps = &t.fragments[0];
    let mut src = reps[0].state.lock();
    let mut dst = reps[1].state.lock();
    let row = dst.fixed.next_row(RowId(0)).expect("a row");
    let fixed = dst.fixed.get(row);
    let gci = super::replica::row_gci_hi(fixed);
    assert!(gci > 0);
    let mut key = Vec::new();
    let layout = dst.table.layout.clone();
    layout.row_key(fixed, var_of(&layout, &dst.var, fixed), &mut key);
    // Deleted at the source while the replica's node was down.
    src.apply_redo(REDO_DELETE, &key, u64::from(gci + 1) << 32)
        .expect("delete at the source");
    let before = dst.rows();
    assert_eq!(src.rows() + 1, before);
    // Restored to a GCI below the row's: the row is newer than the restore point.
    let mut progress = CopyProgress {
        since_gci: gci - 1,
        done: true,
        ..CopyProgress::default()
    };
    while !progress.swept {
        dst.sweep_rows_gone_from(&mut src, &mut progress, 4, gci + 1)
            .expect("sweep");
    }
    assert_eq!(progress.rows_swept, 1);
    assert_eq!(dst.rows(), src.rows());
    let h32 = index_hash(key_hash(&key));
    assert!(dst.find(&key, h32).is_none());
    drop((src, dst));
    c.shutdown();
}

/// The copy skips the source rows last changed at or below the restore point and
/// copies the others.
#[test]
fn the_copy_skips_rows_unchanged_since_the_restore_point() {
    let c = cluster_with_rows(200);
    let t = c.ndb("test").table("t").expect("t");
    let gci_before = {
        let f = t.fragments[0][0].state.lock();
        let row = f.fixed.next_row(RowId(0)).expect("a row");
        super::replica::row_gci_hi(f.fixed.get(row))
    };
    // Later changes: rows with a higher GCI.
    c.inner().force_gcp().expect("gcp");
    let mut s = Session::new(c.ndb("test"));
    s.execute("UPDATE t SET v = v + 1 WHERE id < 50")
        .expect("update");
    let reps = &t.fragments[0];
    let src = reps[0].state.lock();
    let mut dst = reps[1].state.lock();
    let changed = {
        let mut n = 0;
        let mut cur = RowId(0);
        while let Some(r) = src.fixed.next_row(cur) {
            if super::replica::row_gci_hi(src.fixed.get(r)) > gci_before {
                n += 1;
            }
            cur = RowId(r.0 + 1);
        }
        n
    };
    assert!(changed > 0 && changed < src.rows(), "{changed}");
    let mut progress = CopyProgress {
        since_gci: gci_before,
        ..CopyProgress::default()
    };
    while !progress.done {
        src.copy_rows_to(&mut dst, &mut progress, 8).expect("copy");
    }
    assert_eq!(progress.rows_copied, changed);
    assert_eq!(progress.rows_unchanged, src.rows() - changed);
    assert!(
        !progress.swept,
        "a restored replica is swept after its copy"
    );
    drop((src, dst));
    c.shutdown();
}

/// A redo record (or a copied row) that is the image a row already holds changes
/// nothing: the page's change map stays clear, so the next LCP does not write the row
/// again. A record with another GCI or other values is a change.
#[test]
fn an_image_the_row_already_holds_leaves_the_change_map_clear() {
    let c = cluster_with_rows(100);
    let t = c.ndb("test").table("t").expect("t");
    let mut f = t.fragments[0][0].state.lock();
    let row = f.fixed.next_row(RowId(0)).expect("a row");
    let lp = row.page();
    let gci = super::replica::row_gci_hi(f.fixed.get(row));
    let mut image = Vec::new();
    f.committed_image(row, &mut image).expect("image");
    f.fixed.take_change_map(lp).expect("held");
    assert!(!f.fixed.page_changed(lp));
    f.apply_redo(super::REDO_WRITE, &image, u64::from(gci) << 32)
        .expect("same image");
    assert!(!f.fixed.page_changed(lp), "an unchanged row marked changed");
    f.apply_redo(super::REDO_WRITE, &image, u64::from(gci + 1) << 32)
        .expect("a later GCI");
    assert!(f.fixed.page_changed(lp), "a change not marked");
    assert_eq!(super::replica::row_gci_hi(f.fixed.get(row)), gci + 1);
    drop(f);
    c.shutdown();
}
