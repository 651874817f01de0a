//! A data node's durable log state: its redo log and its system file, and its part of
//! a global checkpoint ([`GcpSaver`]).
//!
//! Saving checkpoint `g` on a node: seal and fdatasync every redo part (every record of
//! GCIs up to `g` was appended before the checkpoint cut, so it is in what is synced),
//! then record `g` with the parts' end LSNs in the system file (written atomically).
//! Only then has the node saved `g`. A failure stops the node: it is remembered, and
//! every later save fails with it without touching the disk again.
//!
//! Lock order: `sysfile` is taken after the redo log's own locks are released.

use super::gcp::GcpSaver;
use super::redo::{Lsn, RedoLog};
use super::sysfile::Sysfile;
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
    stopped: Mutex<Option<NdbError>>,
}

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
            stopped: Mutex::new(None),
        }
    }

    pub fn fs_dir(&self) -> &Path {
        &self.fs_dir
    }

    /// The newest checkpoint this node saved.
    pub fn last_saved_gci(&self) -> Option<u32> {
        self.sysfile.lock().last_saved().map(|s| s.gci_hi)
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

impl GcpSaver for NodeLog {
    fn save(&self, gci_hi: u32) -> Result<()> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let keep = self.pending_keep.lock().take();
        let end = self.redo.seal_and_sync().map_err(|e| self.stop(e))?;
        let mut sf = self.sysfile.lock();
        let mut next = sf.clone();
        next.push(gci_hi, end);
        if let Some(keep) = &keep {
            next.set_keep(keep);
        }
        next.store(&*self.fs, &self.fs_dir)
            .map_err(|e| self.stop(e))?;
        *sf = next;
        drop(sf);
        if let Some(keep) = keep {
            for (part, lsn) in keep.into_iter().enumerate() {
                self.redo.release_before(part as u32, lsn);
            }
        }
        Ok(())
    }
}
