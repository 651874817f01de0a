//! The control file of a fragment's LCPs: which LCP is the newest complete one, its max
//! GCI, and the chain of data files a restore reads (oldest first).
//!
//! Two copies, `ctl0` and `ctl1`, as NDB keeps two control files per fragment: a store
//! overwrites in place (a length prefix, then the encoding) the copy that does *not*
//! hold the newest valid control, and fdatasyncs it; a restart takes the valid copy
//! with the higher LCP id. A torn write can only damage the copy being written, the
//! other holds the newest complete LCP. (Not the copy `lcp_id % 2`: a fragment idle
//! for a round skips an LCP id, and the next store's parity may then be that of the
//! newest copy, whose torn overwrite would leave only an older chain whose files are
//! gone.) A copy that does not exist yet is created whole (write aside and rename),
//! so that a crash never leaves a torn copy without a valid twin. (One fdatasync,
//! where an atomic replace costs a file sync, a rename and a directory sync; an LCP
//! stores one control file per fragment.) Byte layout: `docs/lcp-files.md`.
//!
//! Chain rule: for each part, its base is the newest file whose ALL range contains it;
//! every file from the oldest base on is needed, older ones are not. The order of an
//! LCP: write the data file and `finish` it (fdatasync), compute
//! [`FragControl::after_lcp`], [`FragControl::store`] it, then remove the files it
//! dropped. A fragment with no change since its previous LCP writes no data file:
//! [`FragControl::after_idle_lcp`] then `store` (NDB does the same to move MaxGciCompleted
//! on, which lets the redo log be cut).

use std::io;
use std::path::{Path, PathBuf};

use super::{
    LCP_PARTS, LcpFileHeader, LcpFileSummary, PartRange, ctl_paths, data_file_path, put_u32,
    put_u64, u32_at, u64_at,
};
use crate::disk::io::FileSystem;
use crate::error::{Result, codes};

/// Most data files a chain may hold: a full LCP followed by 2048 LCPs of one part each
/// is the longest chain the rotation produces; the limit leaves room above it.
pub const MAX_CHAIN_FILES: usize = 4096;

const CTL_MAGIC: &[u8; 8] = b"RNDBLCTL";
const CTL_VERSION: u32 = 1;
const CTL_HEADER_BYTES: usize = 40;
const CTL_FILE_ENTRY_BYTES: usize = 32;

/// One data file of the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFileRef {
    pub lcp_id: u32,
    pub all_parts: PartRange,
    /// Records in the file (checked by the restore against the file's footer).
    pub records: u64,
    /// Length of the file.
    pub bytes: u64,
}

impl DataFileRef {
    /// The reference to a file just finished.
    pub fn new(header: &LcpFileHeader, summary: &LcpFileSummary) -> DataFileRef {
        DataFileRef {
            lcp_id: header.lcp_id,
            all_parts: header.all_parts,
            records: summary.records,
            bytes: summary.bytes,
        }
    }
}

/// A fragment's control file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragControl {
    pub table_id: u32,
    pub fragment_id: u32,
    /// The newest complete LCP of the fragment (0: none yet).
    pub lcp_id: u32,
    /// Highest GCI the newest complete LCP may hold (redo replay starts from it).
    pub max_gci: u32,
    /// The chain needed to restore, oldest first; each file's base parts cover all
    /// 2048 parts (unless empty: no LCP yet).
    pub files: Vec<DataFileRef>,
}

/// For each part, the index in `files` of its base (the newest file whose ALL range
/// contains it); None when some part has none.
pub(super) fn bases(files: &[DataFileRef]) -> Option<Vec<u32>> {
    let mut base = vec![u32::MAX; LCP_PARTS as usize];
    for (i, f) in files.iter().enumerate() {
        for p in f.all_parts.parts() {
            base[p as usize] = i as u32;
        }
    }
    base.iter().all(|&b| b != u32::MAX).then_some(base)
}

impl FragControl {
    /// The control of a fragment without any LCP yet.
    pub fn new(table_id: u32, fragment_id: u32) -> FragControl {
        FragControl {
            table_id,
            fragment_id,
            lcp_id: 0,
            max_gci: 0,
            files: Vec::new(),
        }
    }

    /// The ALL range of the newest data file (the next LCP's ALL range starts at its end).
    pub fn last_all_range(&self) -> Option<PartRange> {
        self.files.last().map(|f| f.all_parts)
    }

    /// The control after LCP `new` completed (its data file finished), and the LCP ids
    /// of the data files no longer needed: remove them after this control is stored.
    /// Errors: an LCP id not above the current one, or a chain that leaves some part
    /// without a base (the first LCP of a fragment must be full).
    pub fn after_lcp(&self, new: DataFileRef, max_gci: u32) -> Result<(FragControl, Vec<u32>)> {
        if new.lcp_id <= self.lcp_id || !new.all_parts.is_valid() {
            return Err(codes::internal(format!(
                "LCP {} of T{}F{} after LCP {} (ALL {:?})",
                new.lcp_id, self.table_id, self.fragment_id, self.lcp_id, new.all_parts
            )));
        }
        let mut files = self.files.clone();
        files.push(new);
        let Some(base) = bases(&files) else {
            return Err(codes::internal(format!(
                "LCP {} of T{}F{}: some part has no full copy in the chain (first LCP must be full)",
                new.lcp_id, self.table_id, self.fragment_id
            )));
        };
        let oldest = base.iter().copied().min().unwrap_or(0) as usize;
        let dropped = files.drain(..oldest).map(|f| f.lcp_id).collect();
        if files.len() > MAX_CHAIN_FILES {
            return Err(codes::internal(format!(
                "LCP chain of T{}F{} would hold {} files, at most {MAX_CHAIN_FILES}",
                self.table_id,
                self.fragment_id,
                files.len()
            )));
        }
        let next = FragControl {
            table_id: self.table_id,
            fragment_id: self.fragment_id,
            lcp_id: new.lcp_id,
            max_gci,
            files,
        };
        Ok((next, dropped))
    }

    /// The control after an LCP that found no change since the previous one: no data
    /// file, the same chain, a new LCP id and max GCI.
    pub fn after_idle_lcp(&self, lcp_id: u32, max_gci: u32) -> Result<FragControl> {
        if self.files.is_empty() || lcp_id <= self.lcp_id {
            return Err(codes::internal(format!(
                "idle LCP {lcp_id} of T{}F{} after LCP {} with {} files (the first LCP writes a file)",
                self.table_id,
                self.fragment_id,
                self.lcp_id,
                self.files.len()
            )));
        }
        Ok(FragControl {
            lcp_id,
            max_gci: max_gci.max(self.max_gci),
            ..self.clone()
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let n = self.files.len();
        let len = CTL_HEADER_BYTES + n * CTL_FILE_ENTRY_BYTES + 4;
        let mut b = vec![0u8; len];
        b[0..8].copy_from_slice(CTL_MAGIC);
        put_u32(&mut b, 8, CTL_VERSION);
        put_u32(&mut b, 12, len as u32);
        put_u32(&mut b, 16, self.table_id);
        put_u32(&mut b, 20, self.fragment_id);
        put_u32(&mut b, 24, self.lcp_id);
        put_u32(&mut b, 28, self.max_gci);
        put_u32(&mut b, 32, n as u32);
        for (i, f) in self.files.iter().enumerate() {
            let o = CTL_HEADER_BYTES + i * CTL_FILE_ENTRY_BYTES;
            put_u32(&mut b, o, f.lcp_id);
            put_u32(&mut b, o + 4, f.all_parts.start);
            put_u32(&mut b, o + 8, f.all_parts.count);
            put_u64(&mut b, o + 16, f.records);
            put_u64(&mut b, o + 24, f.bytes);
        }
        let crc = crc32c::crc32c(&b[..len - 4]);
        put_u32(&mut b, len - 4, crc);
        b
    }

    /// Decode and verify (checksum, lengths, part ranges, increasing LCP ids, every part
    /// covered); `what` names the file in errors.
    pub fn decode(b: &[u8], what: &str) -> Result<FragControl> {
        let bad = |why: &str| codes::corrupt_page(format!("LCP control file {what}: {why}"));
        if b.len() < CTL_HEADER_BYTES + 4 || &b[0..8] != CTL_MAGIC {
            return Err(bad("magic or length"));
        }
        let len = u32_at(b, 12) as usize;
        if len != b.len() {
            return Err(bad("length differs from the file's"));
        }
        if crc32c::crc32c(&b[..len - 4]) != u32_at(b, len - 4) {
            return Err(bad("checksum mismatch"));
        }
        if u32_at(b, 8) != CTL_VERSION {
            return Err(bad("format version"));
        }
        let n = u32_at(b, 32) as usize;
        if n > MAX_CHAIN_FILES || len != CTL_HEADER_BYTES + n * CTL_FILE_ENTRY_BYTES + 4 {
            return Err(bad("file count"));
        }
        let mut files = Vec::with_capacity(n);
        for i in 0..n {
            let o = CTL_HEADER_BYTES + i * CTL_FILE_ENTRY_BYTES;
            let all_parts = PartRange {
                start: u32_at(b, o + 4),
                count: u32_at(b, o + 8),
            };
            if !all_parts.is_valid() {
                return Err(bad("ALL part range"));
            }
            files.push(DataFileRef {
                lcp_id: u32_at(b, o),
                all_parts,
                records: u64_at(b, o + 16),
                bytes: u64_at(b, o + 24),
            });
        }
        let ctl = FragControl {
            table_id: u32_at(b, 16),
            fragment_id: u32_at(b, 20),
            lcp_id: u32_at(b, 24),
            max_gci: u32_at(b, 28),
            files,
        };
        let increasing = ctl.files.windows(2).all(|w| w[0].lcp_id < w[1].lcp_id)
            && ctl.files.last().is_none_or(|f| f.lcp_id <= ctl.lcp_id);
        if !increasing {
            return Err(bad("LCP ids of the chain not increasing"));
        }
        if !ctl.files.is_empty() && bases(&ctl.files).is_none() {
            return Err(bad("chain leaves a part without a full copy"));
        }
        Ok(ctl)
    }

    /// Write the control file of `dir` (the fragment's LCP directory): the copy that
    /// does not hold the newest valid control (copy `lcp_id % 2` when neither copy is
    /// valid), in place, fdatasynced.
    pub fn store(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let copy = match Self::load_copies(fs, dir)? {
            [Ok(Some(a)), Ok(Some(b))] => usize::from(a.lcp_id > b.lcp_id),
            [Ok(Some(_)), _] => 1,
            [_, Ok(Some(_))] => 0,
            _ => (self.lcp_id % 2) as usize,
        };
        let path = &ctl_paths(dir)[copy];
        let err = |e: io::Error| {
            codes::file_system_error(format!("LCP control file {}: {e}", path.display()))
        };
        let body = self.encode();
        let mut bytes = Vec::with_capacity(4 + body.len());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        if !fs.exists(path) {
            // A copy appears whole (write aside, rename): a crash before it is durable
            // leaves no copy, never a torn one that could not be told from a damaged
            // copy of a completed LCP. Only a copy whose twin holds the previous LCP is
            // overwritten in place.
            return fs
                .create_dir_all(dir)
                .and_then(|()| fs.write_atomic(path, &bytes))
                .map_err(err);
        }
        let file = fs.open(path).map_err(err)?;
        file.write_at(&bytes, 0).map_err(err)?;
        file.sync_data().map_err(err)
    }

    /// The control file of `dir`: the valid copy with the higher LCP id; None when there
    /// is none (no complete LCP); an error when copies exist and none verifies.
    pub fn load(fs: &dyn FileSystem, dir: &Path) -> Result<Option<FragControl>> {
        let mut best: Option<FragControl> = None;
        let mut damage = None;
        for parsed in Self::load_copies(fs, dir)? {
            match parsed {
                Ok(Some(c)) if best.as_ref().is_none_or(|b| c.lcp_id > b.lcp_id) => best = Some(c),
                Ok(_) => {}
                Err(e) => damage = Some(e),
            }
        }
        match (best, damage) {
            (Some(c), _) => Ok(Some(c)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        }
    }

    /// Each copy of `dir`'s control file: Ok(None) when it does not exist, an error
    /// when it does not verify. Err only when a copy cannot be read.
    fn load_copies(fs: &dyn FileSystem, dir: &Path) -> Result<[Result<Option<FragControl>>; 2]> {
        let read = |path: &Path| -> Result<Result<Option<FragControl>>> {
            let bytes = fs.read_all(path).map_err(|e| {
                codes::file_read_error(format!("LCP control file {}: {e}", path.display()))
            })?;
            let Some(bytes) = bytes else {
                return Ok(Ok(None));
            };
            let what = path.display().to_string();
            Ok(
                if bytes.len() >= 4 && 4 + u32_at(&bytes, 0) as usize <= bytes.len() {
                    let n = u32_at(&bytes, 0) as usize;
                    FragControl::decode(&bytes[4..4 + n], &what).map(Some)
                } else {
                    Err(codes::corrupt_page(format!(
                        "LCP control file {what}: bad length"
                    )))
                },
            )
        };
        let [p0, p1] = ctl_paths(dir);
        Ok([read(&p0)?, read(&p1)?])
    }

    /// Paths of the chain's data files in `dir`, oldest first.
    pub fn data_files(&self, dir: &Path) -> Vec<PathBuf> {
        self.files
            .iter()
            .map(|f| data_file_path(dir, f.lcp_id))
            .collect()
    }
}

/// Remove the data files of `dir` that `ctl`'s chain does not name (files of LCPs that
/// never completed, or dropped files whose removal a crash interrupted). Call at
/// restart, before the first LCP of the fragment. Returns the removed paths; a missing
/// directory removes nothing. Files not named `{n}.data` are left alone.
pub fn remove_orphans(
    fs: &dyn FileSystem,
    dir: &Path,
    ctl: Option<&FragControl>,
) -> Result<Vec<PathBuf>> {
    let listed = match fs.list_dir(dir) {
        Ok(v) => v,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(codes::file_read_error(format!(
                "LCP directory {}: {e}",
                dir.display()
            )));
        }
    };
    let mut removed = Vec::new();
    for path in listed {
        let Some(id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".data"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if ctl.is_some_and(|c| c.files.iter().any(|f| f.lcp_id == id)) {
            continue;
        }
        fs.remove(&path).map_err(|e| {
            codes::file_system_error(format!("remove LCP file {}: {e}", path.display()))
        })?;
        removed.push(path);
    }
    Ok(removed)
}

impl FragControl {
    /// Remove the data files `dropped` by [`FragControl::after_lcp`] from `dir`, only
    /// after the control that no longer names them was stored; files already gone are
    /// fine.
    pub fn remove_dropped(fs: &dyn FileSystem, dir: &Path, dropped: &[u32]) -> Result<()> {
        for &id in dropped {
            let path = data_file_path(dir, id);
            match fs.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(codes::file_system_error(format!(
                        "remove LCP file {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Ok(())
    }
}
