//! A data node's durable log state: its redo log and its system file, and its part of
//! a global checkpoint ([`GcpSaver`]).
//!
//! Saving checkpoint `g` on a node: seal and fdatasync every redo part (every record of
//! GCIs up to `g` was appended before the checkpoint cut, so it is in what is synced),
//! then record `g` with the parts' end LSNs in the system file (written atomically).
//! Only then has the node saved `g`. A local checkpoint's keep position moves with it,
//! but never past the end of `g - 1`: until every node saved `g`, a restart recovers
//! to `g - 1`, so every node must still be able to replay up to it. A failure stops the node: it is remembered, and
//! every later save fails with it without touching the disk again.
//!
//! Lock order: `sysfile` is taken after the redo log's own locks are released.

use super::gcp::GcpSaver;
use super::redo::{Lsn, RedoLog};
use super::sysfile::{NodeBitmask, Sysfile};
use crate::disk::io::FileSystem;
use crate::error::{NdbError, Result, codes};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct NodeLog {
    pub node_id: u32,
    fs: Arc<dyn FileSystem>,
    fs_dir: PathBuf,
    pub redo: Arc<RedoLog>,
    sysfile: Mutex<Sysfile>,
    /// A local checkpoint's keep position, saved with the next checkpoint.
    pending_keep: Mutex<Option<Vec<Lsn>>>,
    /// A local checkpoint's undo keep LSN (disk data), saved with the next checkpoint.
    pending_undo_keep: Mutex<Option<u64>>,
    /// Told the undo keep LSN each time a system file holding it is on disk (the undo
    /// log before it may then be reused).
    undo_keep_hook: Mutex<Option<UndoKeepHook>>,
    stopped: Mutex<Option<NdbError>>,
}

/// See [`NodeLog::set_undo_keep_hook`].
pub type UndoKeepHook = Box<dyn Fn(u64) + Send + Sync>;

impl NodeLog {
    /// The node's log over an open redo log and the system file to continue.
    pub fn new(
        node_id: u32,
        fs: Arc<dyn FileSystem>,
        fs_dir: &Path,
        redo: Arc<RedoLog>,
        sysfile: Sysfile,
    ) -> NodeLog {
        assert_eq!(sysfile.parts(), redo.parts() as usize);
        NodeLog {
            node_id,
            fs,
            fs_dir: fs_dir.to_path_buf(),
            redo,
            sysfile: Mutex::new(sysfile),
            pending_keep: Mutex::new(None),
            pending_undo_keep: Mutex::new(None),
            undo_keep_hook: Mutex::new(None),
            stopped: Mutex::new(None),
        }
    }

    /// The undo keep LSN of the system file on disk.
    pub fn undo_keep_lsn(&self) -> u64 {
        self.sysfile.lock().undo_keep_lsn
    }

    /// A local checkpoint (or a restart's undo pass) moved the point a restart rolls
    /// the disk pages back to: saved with the next checkpoint.
    pub fn set_undo_keep(&self, lsn: u64) {
        *self.pending_undo_keep.lock() = Some(lsn);
    }

    /// Called with the undo keep LSN after each system file store that holds it.
    pub fn set_undo_keep_hook(&self, hook: UndoKeepHook) {
        *self.undo_keep_hook.lock() = Some(hook);
    }

    pub fn fs_dir(&self) -> &Path {
        &self.fs_dir
    }

    /// The newest checkpoint this node saved.
    pub fn last_saved_gci(&self) -> Option<u32> {
        self.sysfile.lock().last_saved().map(|s| s.gci_hi)
    }

    /// The newest checkpoint this node saved that names it as restoring it: (its GCI,
    /// where replay starts, where its redo ends), per part. Only meaningful for a node
    /// whose files were restorable when it stopped (later entries, which leave it
    /// out, are checkpoints under way at its stop); None when no entry names it.
    pub fn own_restore_point(&self) -> Option<(u32, Vec<Lsn>, Vec<Lsn>)> {
        let sf = self.sysfile.lock();
        let last = sf
            .saved
            .iter()
            .rev()
            .find(|s| s.nodes.contains(self.node_id))?;
        // The keep was applied up to the end of the entry before each save: it never
        // passes the end of a saved checkpoint older than the newest.
        if sf.keep.iter().zip(&last.end).any(|(k, e)| k > e) {
            return None;
        }
        Some((last.gci_hi, sf.keep.clone(), last.end.clone()))
    }

    /// Where replay would start (per part).
    pub fn keep(&self) -> Vec<Lsn> {
        self.sysfile.lock().keep.clone()
    }

    /// A local checkpoint completed on this node: a restart needs the redo from `keep`
    /// on only. Recorded by the next saved checkpoint, which then releases the redo
    /// before it.
    pub fn set_keep(&self, keep: Vec<Lsn>) {
        assert_eq!(keep.len(), self.redo.parts() as usize);
        *self.pending_keep.lock() = Some(keep);
    }

    /// How full the fullest redo part is, in percent.
    pub fn redo_fill_percent(&self) -> u32 {
        self.redo
            .usage()
            .iter()
            .map(|u| (u.used_file_bytes * 100 / u.total_file_bytes.max(1)) as u32)
            .max()
            .unwrap_or(0)
    }

    /// Why the node stopped, if it did.
    pub fn stopped(&self) -> Option<NdbError> {
        self.stopped.lock().clone()
    }

    fn stop(&self, e: NdbError) -> NdbError {
        let mut s = self.stopped.lock();
        let e = s
            .get_or_insert_with(|| codes::node_stopped(self.node_id, &e))
            .clone();
        drop(s);
        self.redo.shutdown();
        e
    }
}

/// A node's part of one global checkpoint. `decide(node_id)` says, once per checkpoint
/// and the same for every node, whether this node saves it (None: not, e.g. it is
/// stopped) and the data nodes whose files restore it.
pub struct NodeSave<'a> {
    pub log: &'a NodeLog,
    pub decide: &'a (dyn Fn(u32) -> Option<NodeBitmask> + Sync),
}

impl GcpSaver for NodeSave<'_> {
    fn save(&self, gci_hi: u32) -> Result<()> {
        match (self.decide)(self.log.node_id) {
            Some(nodes) => self.log.save_with(gci_hi, nodes),
            None => Ok(()),
        }
    }
}

impl NodeLog {
    /// Saves checkpoint `gci_hi` on this node (see the module doc), naming `nodes` as
    /// the ones whose files restore it.
    pub fn save_with(&self, gci_hi: u32, nodes: NodeBitmask) -> Result<()> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let keep = self.pending_keep.lock().take();
        let undo_keep = self.pending_undo_keep.lock().take();
        let end = self.redo.seal_and_sync().map_err(|e| self.stop(e))?;
        let mut sf = self.sysfile.lock();
        let mut next = sf.clone();
        // The previous checkpoint must stay restorable from this node: another node
        // may fail to save this one, and a restart then recovers to the previous one.
        // The keep position is applied up to that checkpoint's end only; the rest
        // waits for the next checkpoint (replaying more redo than needed is harmless).
        let applied = keep.as_ref().map(|k| match sf.last_saved() {
            Some(prev) => k.iter().zip(&prev.end).map(|(a, b)| *a.min(b)).collect(),
            None => k.clone(),
        });
        next.push(gci_hi, end, nodes);
        if let Some(applied) = &applied {
            next.set_keep(applied);
        }
        // The undo keep needs no clamp like the redo keep: every commit whose undo
        // follows it has its redo after the LCP's keep, so after any applied keep.
        // (It goes back to 0 when a logfile group is created: a new log's LSNs start
        // again.)
        if let Some(u) = undo_keep {
            next.undo_keep_lsn = u;
        }
        if let Err(e) = next.store(&*self.fs, &self.fs_dir) {
            if let Some(u) = undo_keep {
                self.pending_undo_keep.lock().get_or_insert(u);
            }
            return Err(self.stop(e));
        }
        let undo_keep_now = next.undo_keep_lsn;
        *sf = next;
        drop(sf);
        if undo_keep.is_some()
            && let Some(hook) = &*self.undo_keep_hook.lock()
        {
            hook(undo_keep_now);
        }
        if let (Some(keep), Some(applied)) = (keep, applied) {
            for (part, lsn) in applied.iter().enumerate() {
                self.redo.release_before(part as u32, *lsn);
            }
            if applied != keep {
                // A later local checkpoint's keep (set meanwhile) supersedes this one.
                self.pending_keep.lock().get_or_insert(keep);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::io::MemFileSystem;
    use crate::log::gcp::make_gci;
    use crate::log::redo::{EncodedRecords, RecordHeader, RedoConfig};

    fn save(node: &NodeLog, gci_hi: u32) -> Result<()> {
        node.save_with(gci_hi, NodeBitmask::from_ids([node.node_id]))
    }

    fn record(log: &RedoLog, gci_hi: u32) {
        let mut r = EncodedRecords::new();
        let h = RecordHeader {
            gci: make_gci(gci_hi, 0),
            table_id: 1,
            fragment_id: 0,
            kind: 1,
        };
        r.push(&h, &[7; 100]);
        log.append(0, &r);
    }

    /// Found by the simulated crash test (seed 61): a local checkpoint whose keep lies
    /// past the end of checkpoint 4 (the redo head after a restart), saved with
    /// checkpoint 5 on node A, dropped 4 from A's system file; node B then failed to
    /// save 5, and no restart was possible ("GCI 4 is restorable on every other node
    /// but not in this node's system file").
    #[test]
    fn a_keep_never_drops_the_previous_checkpoint() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/n");
        let cfg = RedoConfig {
            parts: 1,
            files_per_part: 3,
            file_size_bytes: 1 << 20,
            buffer_bytes: 1 << 20,
            init_full: false,
            overload_limit_ms: 1000,
        };
        let redo = RedoLog::create(fs.clone(), dir, cfg).expect("redo");
        let node = NodeLog::new(2, fs.clone(), dir, redo.clone(), Sysfile::new(2, 1));
        record(&redo, 4);
        save(&node, 4).expect("save 4");
        let end4 = node.sysfile.lock().saved_gci(4).expect("4").end.clone();
        record(&redo, 5);
        // an LCP: keep = the head, past the end of checkpoint 4
        let keep = redo.head();
        assert!(keep[0] > end4[0]);
        node.set_keep(keep.clone());
        record(&redo, 5);
        save(&node, 5).expect("save 5");
        let sf = Sysfile::load(&*fs, dir).expect("load").expect("sysfile");
        assert!(sf.saved_gci(4).is_some(), "{sf:?}");
        assert_eq!(sf.keep, end4, "keep moved up to the end of 4 only");
        // the rest of the keep is applied with the next checkpoint
        save(&node, 6).expect("save 6");
        let sf = Sysfile::load(&*fs, dir).expect("load").expect("sysfile");
        assert_eq!(sf.keep, keep);
        assert!(
            sf.saved_gci(5).is_some() && sf.saved_gci(4).is_none(),
            "{sf:?}"
        );
        redo.shutdown();
    }
}
