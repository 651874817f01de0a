//! Random LCP sequences against a model: a fragment (BTreeMap row id -> payload) gets
//! random inserts, updates, deletes and whole-page drops; each LCP writes a data file
//! as the lead's fragment scan would (ALL parts: every row; CHANGE parts: changed rows
//! and delete markers, a DeletePage for a dropped page), with random ALL counts; the
//! control file after every LCP must restore exactly the model at that LCP, the
//! previous control must still restore until the dropped files are removed, and a
//! power loss at any point of an LCP leaves the old or the new state restorable.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;
use crate::disk::io::{FileSystem, IoOp, MemFileSystem};
use crate::error::Result;
use crate::storage::row_id::ROW_ID_SLOT_BITS;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below(u64::from(hi - lo + 1)) as u32
    }
}

const PAGES: u64 = 3000; // wraps the 2048 parts: some parts hold two pages
const SLOTS: u64 = 6;
const TABLE: u32 = 4;
const FRAG: u32 = 2;

fn page_of(row_id: u32) -> u32 {
    row_id >> ROW_ID_SLOT_BITS
}

#[derive(Default)]
struct Frag {
    rows: BTreeMap<u32, Vec<u8>>,
    /// Row ids changed since the previous LCP.
    changed: BTreeSet<u32>,
    /// Pages whose rows were all dropped since the previous LCP.
    dropped_pages: BTreeSet<u32>,
    version: u32,
    /// Inserts, updates, deletes since the previous LCP.
    stats: ChangeStats,
}

impl Frag {
    fn mutate(&mut self, rng: &mut Rng, n: u32) {
        for _ in 0..n {
            self.version += 1;
            match rng.below(10) {
                0..=5 => {
                    let page = rng.below(PAGES) as u32;
                    let id = (page << ROW_ID_SLOT_BITS) | rng.below(SLOTS) as u32;
                    let len = rng.below(40) as usize;
                    let p = (0..len)
                        .map(|i| (self.version as usize + i) as u8)
                        .collect();
                    if self.rows.insert(id, p).is_some() {
                        self.stats.rows_updated += 1;
                    } else {
                        self.stats.rows_inserted += 1;
                    }
                    self.changed.insert(id);
                }
                6..=8 if !self.rows.is_empty() => {
                    let i = rng.below(self.rows.len() as u64) as usize;
                    let id = *self.rows.keys().nth(i).unwrap_or(&0);
                    self.rows.remove(&id);
                    self.stats.rows_deleted += 1;
                    self.changed.insert(id);
                }
                _ if !self.rows.is_empty() => {
                    let i = rng.below(self.rows.len() as u64) as usize;
                    let page = page_of(*self.rows.keys().nth(i).unwrap_or(&0));
                    let lo = page << ROW_ID_SLOT_BITS;
                    let hi = (page + 1) << ROW_ID_SLOT_BITS;
                    let ids: Vec<u32> = self.rows.range(lo..hi).map(|(k, _)| *k).collect();
                    for id in ids {
                        self.rows.remove(&id);
                        self.stats.rows_deleted += 1;
                        self.changed.insert(id);
                    }
                    self.dropped_pages.insert(page);
                }
                _ => {}
            }
        }
    }

    /// Write the data file of an LCP with ALL range `all` as the fragment scan would.
    fn write_lcp(&self, w: &mut LcpFileWriter, all: PartRange) -> Result<()> {
        let pages: BTreeSet<u32> = self
            .rows
            .keys()
            .chain(self.changed.iter())
            .map(|&id| page_of(id))
            .collect();
        for page in pages {
            let lo = page << ROW_ID_SLOT_BITS;
            let hi = (page + 1) << ROW_ID_SLOT_BITS;
            if all.contains(part_of_page(page)) {
                for (&id, p) in self.rows.range(lo..hi) {
                    w.put_row(id, p)?;
                }
            } else if self.dropped_pages.contains(&page)
                && (self.rows.range(lo..hi).next().is_none()
                    || (page ^ all.start).is_multiple_of(2))
            {
                // The page was dropped: delete it, then put every row it holds now.
                w.delete_page(page)?;
                for (&id, p) in self.rows.range(lo..hi) {
                    w.put_row(id, p)?;
                }
            } else {
                for &id in self.changed.range(lo..hi) {
                    match self.rows.get(&id) {
                        Some(p) => w.put_row(id, p)?,
                        None => w.delete_row(id)?,
                    }
                }
            }
        }
        Ok(())
    }

    /// NDB's choice of ALL parts for this fragment now.
    fn ndb_all_parts(&self, first_lcp: bool) -> u32 {
        let pages: BTreeSet<u32> = self.rows.keys().map(|&id| page_of(id)).collect();
        let stats = ChangeStats {
            row_count: self.rows.len() as u64,
            memory_used_bytes: self.rows.len() as u64 * 64,
            ldm_memory_used_bytes: self.rows.len() as u64 * 256,
            page_count: pages.len() as u32,
            first_lcp,
            ..self.stats
        };
        choose_all_parts(&stats, &PartialLcpConfig::default())
    }

    fn lcp_done(&mut self) {
        self.stats = ChangeStats::default();
        self.changed.clear();
        self.dropped_pages.clear();
    }
}

#[derive(Default)]
struct Model(BTreeMap<u32, Vec<u8>>);

impl RestoreTarget for Model {
    fn put_row(&mut self, row_id: u32, payload: &[u8]) -> Result<()> {
        self.0.insert(row_id, payload.to_vec());
        Ok(())
    }
    fn delete_row(&mut self, row_id: u32) -> Result<()> {
        self.0.remove(&row_id);
        Ok(())
    }
    fn delete_page(&mut self, page_no: u32) -> Result<()> {
        let lo = page_no << ROW_ID_SLOT_BITS;
        let hi = (page_no + 1) << ROW_ID_SLOT_BITS;
        let ids: Vec<u32> = self.0.range(lo..hi).map(|(k, _)| *k).collect();
        for id in ids {
            self.0.remove(&id);
        }
        Ok(())
    }
}

fn restore(fs: &dyn FileSystem, node: &Path, ctl: &FragControl) -> Result<BTreeMap<u32, Vec<u8>>> {
    let mut m = Model::default();
    let stats = restore_fragment(fs, node, ctl, &mut m)?;
    assert_eq!(stats.files, ctl.files.len() as u64);
    Ok(m.0)
}

fn all_count(rng: &mut Rng, style: u64) -> u32 {
    match style {
        0 => rng.range(1, 16),
        1 => rng.range(100, 700),
        _ => rng.range(1, 2048),
    }
}

/// One LCP: data file (or none when idle), control, removal of dropped files. Returns
/// the new control.
fn run_lcp(
    fs: &dyn FileSystem,
    node: &Path,
    ctl: &FragControl,
    frag: &Frag,
    lcp_id: u32,
    count: u32,
) -> Result<(FragControl, Vec<u32>)> {
    let dir = lcp_dir(node, TABLE, FRAG);
    if !ctl.files.is_empty() && frag.changed.is_empty() {
        let next = ctl.after_idle_lcp(lcp_id, lcp_id * 10)?;
        next.store(fs, &dir)?;
        return Ok((next, Vec::new()));
    }
    let count = if ctl.files.is_empty() {
        LCP_PARTS
    } else {
        count
    };
    let header = LcpFileHeader {
        table_id: TABLE,
        fragment_id: FRAG,
        lcp_id,
        all_parts: next_all_range(ctl.last_all_range(), count),
        max_gci: lcp_id * 10,
        schema_version: 1,
    };
    let mut w = LcpFileWriter::create(fs, &data_file_path(&dir, lcp_id), &header)?;
    frag.write_lcp(&mut w, header.all_parts)?;
    let summary = w.finish()?;
    let (next, dropped) = ctl.after_lcp(DataFileRef::new(&header, &summary), header.max_gci)?;
    next.store(fs, &dir)?;
    Ok((next, dropped))
}

#[test]
fn random_lcp_chains_restore_the_model() {
    let node = PathBuf::from("/data/ndb_2_fs");
    let dir = lcp_dir(&node, TABLE, FRAG);
    let mut longest_chain = 0;
    let mut pruned = 0;
    let mut totals = RestoreStats::default();
    for seed in 0..48u64 {
        let mut rng = Rng(seed);
        let style = seed % 4; // 3: NDB's choice (parts.rs)
        let fs = MemFileSystem::new();
        let mut frag = Frag::default();
        let mut ctl = FragControl::new(TABLE, FRAG);
        for lcp_id in 1..=24u32 {
            let prev = frag.rows.clone();
            let n = if rng.below(6) == 0 {
                0
            } else {
                rng.range(1, 80)
            };
            frag.mutate(&mut rng, n);
            let count = if style == 3 {
                frag.ndb_all_parts(ctl.files.is_empty())
            } else {
                all_count(&mut rng, style)
            };
            assert!((1..=LCP_PARTS).contains(&count));
            let before = frag.rows.clone();
            let (next, dropped) = run_lcp(&fs, &node, &ctl, &frag, lcp_id, count).unwrap();
            // Crash window: the new control is durable, the dropped files still exist;
            // the previous control still restores the previous LCP's state.
            if !ctl.files.is_empty() && rng.below(4) == 0 {
                assert_eq!(restore(&fs, &node, &ctl).unwrap(), prev, "seed {seed}");
            }
            FragControl::remove_dropped(&fs, &dir, &dropped).unwrap();
            pruned += dropped.len();
            for id in &dropped {
                assert!(next.files.iter().all(|f| f.lcp_id != *id));
            }
            // Minimal chain: the oldest kept file is some part's base.
            let modes = part_modes(&next, 0).unwrap();
            assert!(
                modes.contains(&PartMode::All),
                "seed {seed}: a file kept for nothing"
            );
            assert_eq!(FragControl::load(&fs, &dir).unwrap(), Some(next.clone()));
            let mut got = Model::default();
            let st = restore_fragment(&fs, &node, &next, &mut got).unwrap();
            assert_eq!(
                got.0, before,
                "seed {seed} LCP {lcp_id}: restore differs from the model"
            );
            assert_eq!(st.files, next.files.len() as u64);
            totals.deletes += st.deletes;
            totals.skipped += st.skipped;
            // Only the chain's files remain (and the control file's copies).
            let ctl_copies = if lcp_id >= 2 { 2 } else { 1 };
            assert_eq!(
                fs.list_dir(&dir).unwrap().len(),
                next.files.len() + ctl_copies
            );
            longest_chain = longest_chain.max(next.files.len());
            frag.lcp_done();
            ctl = next;
        }
    }
    assert!(longest_chain >= 20, "chains never grew: {longest_chain}");
    assert!(pruned > 100, "pruning never happened: {pruned}");
    // CHANGE deletes and IGNOREd records were exercised.
    assert!(totals.deletes > 1000 && totals.skipped > 1000, "{totals:?}");
}

#[test]
fn power_loss_during_an_lcp_keeps_old_or_new() {
    let node = PathBuf::from("/data/ndb_1_fs");
    let dir = lcp_dir(&node, TABLE, FRAG);
    let mut saw = [0u32; 2];
    for seed in 0..72u64 {
        let mut rng = Rng(seed * 7 + 1);
        let fs = MemFileSystem::new();
        let mut frag = Frag::default();
        let mut ctl = FragControl::new(TABLE, FRAG);
        let lcps = rng.range(1, 6);
        for lcp_id in 1..=lcps {
            let n = rng.range(1, 400);
            frag.mutate(&mut rng, n);
            let count = all_count(&mut rng, seed % 3);
            let (next, dropped) = run_lcp(&fs, &node, &ctl, &frag, lcp_id, count).unwrap();
            FragControl::remove_dropped(&fs, &dir, &dropped).unwrap();
            frag.lcp_done();
            ctl = next;
        }
        let old_rows = frag.rows.clone();
        let n = rng.range(1, 1500);
        frag.mutate(&mut rng, n);
        let new_id = lcps + 1;
        let (op, n) = match rng.below(3) {
            0 => (IoOp::Sync, 1),
            _ => (IoOp::Write, 1 + rng.below(8)),
        };
        fs.crash_at(op, n, seed);
        let count = all_count(&mut rng, seed % 3);
        let result = if !frag.changed.is_empty() {
            begin_lcp(&fs, &node, &ctl, new_id, count, 0, 1).and_then(|mut w| {
                let all = w.header().all_parts;
                frag.write_lcp(&mut w, all)?;
                w.set_max_gci(new_id * 10);
                complete_lcp(&fs, &node, &ctl, w).map(|(next, _)| next)
            })
        } else {
            complete_idle_lcp(&fs, &node, &ctl, new_id, new_id * 10)
        };
        let img = match fs.take_crash_image() {
            Some(img) => {
                assert!(
                    result.is_err(),
                    "seed {seed}: the LCP went on after the power loss"
                );
                img
            }
            None => fs.crash_image(seed),
        };
        let loaded = FragControl::load(&img, &dir)
            .unwrap()
            .expect("a control file");
        let want = if loaded.lcp_id == new_id {
            assert_eq!(loaded.max_gci, new_id * 10);
            if let Ok(next) = &result {
                assert_eq!(next, &loaded);
            }
            saw[1] += 1;
            &frag.rows
        } else {
            assert_eq!(
                loaded, ctl,
                "seed {seed}: neither the old nor the new control"
            );
            saw[0] += 1;
            &old_rows
        };
        remove_orphans(&img, &dir, Some(&loaded)).unwrap();
        let got = restore(&img, &node, &loaded).unwrap();
        assert_eq!(
            &got, want,
            "seed {seed}: restore after the power loss differs"
        );
    }
    assert!(saw[0] > 10 && saw[1] > 0, "old/new outcomes: {saw:?}");
}

#[test]
fn restore_refuses_a_file_the_control_does_not_describe() {
    let node = PathBuf::from("/n");
    let dir = lcp_dir(&node, TABLE, FRAG);
    let fs = MemFileSystem::new();
    let mut rng = Rng(5);
    let mut frag = Frag::default();
    frag.mutate(&mut rng, 200);
    let (ctl, _) = run_lcp(&fs, &node, &FragControl::new(TABLE, FRAG), &frag, 1, 2048).unwrap();
    assert_eq!(restore(&fs, &node, &ctl).unwrap(), frag.rows);
    let mut wrong = ctl.clone();
    wrong.files[0].records += 1;
    assert!(restore(&fs, &node, &wrong).is_err());
    let mut wrong = ctl.clone();
    wrong.files[0].all_parts = PartRange::new(1, 2048);
    assert!(restore(&fs, &node, &wrong).is_err());
    fs.remove(&data_file_path(&dir, 1)).unwrap();
    assert!(restore(&fs, &node, &ctl).is_err());
}
