//! Simulated-I/O crash test (issue 6): the embedded cluster on a [`MemFileSystem`] runs
//! a seeded workload through several lives, each ended by a power loss, and every
//! system restart is checked against a model of the committed transactions
//! (`sim_crash_model.rs`).
//!
//! One seed ([`run_seed`]): 2 data nodes, NoOfReplicas=2, two tables with an ordered
//! index, a unique index, a VARCHAR and a BLOB; 2 to 4 lives. A life runs random steps:
//! transactions of inserts, updates, writes and deletes (some rolled back, some failing
//! on a duplicate key or unique value), `wait_durable`, `force_gcp`, `run_lcp`,
//! TRUNCATE, DROP and CREATE. It ends by one of:
//! - **image**: [`MemFileSystem::crash_image`] at a random step (the life goes on, and
//!   nothing after that step counts);
//! - **cut**: [`MemFileSystem::crash_at`] armed just before a GCP, an LCP or a DDL, so
//!   the power goes at its n-th write or sync; the cluster must then stop (the next GCP
//!   fails) and refuse every later operation with an error;
//! - **faults**: a [`FaultPlan`] with seeded EIO on reads, writes and syncs and ENOSPC,
//!   from a random step on (a life reads little: its tables are in memory); a failed GCP or LCP stops the cluster, which must then refuse
//!   every later operation; the disk image at the end is the power loss.
//!
//! A restart is sometimes first tried with a power loss or faults armed in it (a crash
//! during recovery); a failed try is followed by a power loss and a clean restart.
//!
//! Checked after every restart: the restored GCI is at least every GCI `wait_durable`
//! or `force_gcp` confirmed; the tables hold exactly the model (every transaction with
//! GCI <= restored, none above; a row is all of one transaction); the indexes, BLOB
//! parts and fragment invariants agree (`sim_crash_model::read_db`). No panic anywhere.
//!
//! Determinism: the scenario runs on one thread, with global checkpoints only when it
//! asks for them (TimeBetweenGlobalCheckpoints at its maximum, epochs off) and local
//! checkpoints only when it runs them (TimeBetweenLocalCheckpoints 31, a redo log far
//! from half full). What remains concurrent is the redo log's background writer (woken
//! by full blocks and by every checkpoint that releases redo), which races with the
//! GCP's group commit, and the parallel fdatasync of redo files. A [`FaultPlan`]
//! decides per file, offset and occurrence (`disk/io/faults.rs`), so this interleaving
//! does not move the faults of other files; it can still change which write of a redo
//! block a fault hits (the writer's or the group commit's) and where a power loss armed
//! by count lands. A failing seed may therefore not fail again on replay: every failure
//! prints the seed's trace, with the injected faults (path, offset, thread) of each
//! life, and the soak should be rerun a few times on a failing seed (seed 2816 found
//! the writer / group-commit race of `log/redo/part.rs` about one run in two).
//!
//! Cost: ~0.1 s a seed in a debug build on the shared 2-core machine (150 seeds in the
//! suite, ~15 s; a soak of 250 seeds ~30 s). A seed starts the cluster 3 to 6 times: a
//! start on the simulated disk takes 4 to 6 ms once DiskPageBufferMemory is at its
//! minimum (the page cache is zero-filled at start: the default 64M took 20 to 70 ms,
//! most of the start), a system restart about 15 ms; stopping a cluster wakes its GCP
//! and LCP drivers (the test still stops old clusters on a background thread). The
//! rest is the workload and the checks in unoptimised code.
//!
//! Redo ring wrap: with `RNDB_SIM_SMALL_RING` set, one seed in four runs on a redo
//! ring of 36 KB per part, which the lives of a seed go round several times
//! ([`seed_config`]); opt-in until the storage panic it shows now and then is
//! understood (see [`small_ring`]). The soak prints how many seeds wrapped.
//!
//! Replay one seed: `RNDB_SIM_SEEDS=<seed>..<seed+1> cargo test -p rndb --lib sim_crash
//! -- --ignored --nocapture` (prints the steps of every life).

use super::sim_crash_model::{self as model, Db, Ddl, Effect, Event, KEYS, Row, SLOTS};
use super::*;
use crate::config::ClusterConfig;
use crate::disk::io::{FaultPlan, IoOp, MemFileSystem};
use crate::log::gcp::gci_hi;
use crate::schema::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seeds that fail for a diagnosed bug not fixed yet (the fixed-range test skips them,
/// the soak test runs them). Empty: the bugs this test found are fixed (an LCP's
/// delete markers not covered by a durable GCI; redo replay re-encoding BLOB heads).
const KNOWN_FAILING: &[u64] = &[];

/// Seeds of the fixed-range test: about 15 s in a debug build on the 2-core machine
/// (~0.1 s a seed since stopping a cluster no longer waits for its drivers' naps).
const SEEDS: std::ops::Range<u64> = 0..150;

const WAIT: Duration = Duration::from_secs(20);

pub(super) fn config() -> ClusterConfig {
    let mut c = ClusterConfig::embedded(2, 2).expect("config");
    for (k, v) in [
        ("DataMemory", "4M"),
        // the page cache is zero-filled at start: its default (64M) dominated the
        // cost of a cluster start here
        ("DiskPageBufferMemory", "4M"),
        ("SharedGlobalMemory", "0"),
        ("NoOfFragmentLogParts", "4"),
        ("NoOfFragmentLogFiles", "3"),
        ("FragmentLogFileSize", "4M"),
        ("RedoBuffer", "1M"),
        ("TimeBetweenGlobalCheckpoints", "32000"),
        ("TimeBetweenEpochs", "0"),
        ("TimeBetweenLocalCheckpoints", "31"),
    ] {
        c.set_data_node_param(k, v).expect(k);
    }
    c
}

/// splitmix64.
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
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Image,
    Cut,
    Faults,
}

/// What a life leaves for the checks of the next start.
struct LifeEnd {
    image: MemFileSystem,
    events: Vec<Event>,
    /// Highest GCI confirmed durable before the power loss.
    confirmed_hi: u32,
    /// A DDL that failed as the life ended: it may or may not have happened.
    uncertain: Option<(usize, Ddl)>,
}

/// One life: the running cluster and what the scenario knows.
struct Life<'a> {
    c: Cluster,
    fs: MemFileSystem,
    rng: &'a mut Rng,
    trace: &'a mut Vec<String>,
    /// What the running cluster holds (every commit so far).
    live: Db,
    events: Vec<Event>,
    confirmed_hi: u32,
    last_gci: u64,
    txn_no: &'a mut i64,
    image: Option<MemFileSystem>,
    uncertain: Option<(usize, Ddl)>,
    /// The power went (image taken or cut): nothing later counts.
    crashed: bool,
    /// The cluster stopped itself (a failed GCP or LCP).
    stopped: bool,
    /// A DDL failed: end the life now.
    ended: bool,
    /// Set when a redo part went past its ring (its files were reused).
    wrapped: &'a mut bool,
}

type Res<T> = std::result::Result<T, String>;

impl Life<'_> {
    fn note(&mut self, s: String) {
        self.trace.push(s);
    }

    /// One transaction of 1..=4 operations on the existing tables.
    fn txn(&mut self) -> Res<()> {
        let ndb = self.c.ndb("test");
        let slots: Vec<usize> = (0..SLOTS).filter(|s| self.live[*s].is_some()).collect();
        if slots.is_empty() {
            return Ok(());
        }
        *self.txn_no += 1;
        let no = *self.txn_no;
        let mut view = self.live.clone();
        let mut effects = Vec::new();
        let mut fails = false;
        let mut tx = match ndb.start_transaction() {
            Ok(tx) => tx,
            Err(e) => return self.refused("start transaction", e),
        };
        let mut ops = Vec::new();
        for _ in 0..1 + self.rng.below(4) {
            let s = slots[self.rng.below(slots.len() as u64) as usize];
            let t = ndb
                .table(&model::table_name(s))
                .map_err(|e| format!("table t{s}: {e}"))?;
            let k = self.rng.below(KEYS);
            let table = view[s].as_mut().ok_or("slot without table")?;
            let old = table.get(&k).cloned();
            let r = self.rng.below(100);
            let kind = match (&old, r) {
                (Some(_), 0..40) => OpKind::Update,
                (Some(_), 40..70) => OpKind::Write,
                (Some(_), 70..95) => OpKind::Delete,
                (Some(_), _) => OpKind::Insert,
                (None, 0..80) => OpKind::Insert,
                (None, 80..90) => OpKind::Write,
                (None, 90..95) => OpKind::Update,
                (None, _) => OpKind::Delete,
            };
            let u = self
                .rng
                .chance(70)
                .then(|| self.rng.below(model::UNIQUE_VALUES));
            let body_len = match self.rng.below(5) {
                0 => None,
                1 => Some(self.rng.below(200) as usize),
                2 => Some(200 + self.rng.below(2400) as usize),
                3 => Some(2600 + self.rng.below(5000) as usize),
                _ => Some(0),
            };
            let fresh = Row {
                grp: self.rng.below(8) as i64 - 3,
                u,
                val: no,
                data_txn: no,
                pad_len: self.rng.below(201) as usize,
                body_len,
            };
            let new = match (kind, &old) {
                (OpKind::Update, Some(o)) => Some(Row {
                    grp: fresh.grp,
                    u: fresh.u,
                    val: no,
                    ..o.clone()
                }),
                (OpKind::Delete, _) => None,
                _ => Some(fresh.clone()),
            };
            // Does the operation fail (and abort the transaction)?
            let clash = new
                .as_ref()
                .and_then(|n| n.u)
                .is_some_and(|nu| table.iter().any(|(ok, or)| *ok != k && or.u == Some(nu)));
            let op_fails = match kind {
                OpKind::Insert => old.is_some() || clash,
                OpKind::Update | OpKind::Delete => old.is_none() || clash,
                _ => clash,
            };
            ops.push(format!(
                "{kind:?} t{s}.{k}{}{}",
                match (kind, &new) {
                    (OpKind::Delete, _) | (_, None) => String::new(),
                    (_, Some(n)) => n.u.map_or(" u=NULL".into(), |u| format!(" u={u}")),
                },
                if op_fails { "!" } else { "" }
            ));
            let key = [("id", Value::UInt(k))];
            let r = match kind {
                OpKind::Update => tx.define(
                    &t,
                    kind,
                    &key,
                    &fresh.columns(k)[..2]
                        .iter()
                        .cloned()
                        .chain([("val", Value::Int(no))])
                        .collect::<Vec<_>>(),
                    None,
                ),
                OpKind::Delete => tx.define(&t, kind, &key, &[], None),
                _ => tx.define(&t, kind, &key, &fresh.columns(k), None),
            };
            if let Err(e) = r {
                return self.refused("define", e);
            }
            if op_fails {
                fails = true;
                break;
            }
            match new {
                Some(n) => {
                    table.insert(k, n.clone());
                    effects.push(Effect::Put(s, k, n));
                }
                None => {
                    table.remove(&k);
                    effects.push(Effect::Delete(s, k));
                }
            }
        }
        let how = self.rng.below(100);
        let rollback = how < 15;
        let result = if how < 25 {
            let first = tx.execute(ExecType::NoCommit, AbortOption::AbortOnError);
            let exec = if rollback {
                ExecType::Rollback
            } else {
                ExecType::Commit
            };
            let second = tx.execute(exec, AbortOption::AbortOnError);
            first.and(second)
        } else {
            tx.execute(ExecType::Commit, AbortOption::AbortOnError)
        };
        let what = format!(
            "txn {no} [{}]{}",
            ops.join(", "),
            if rollback { " rollback" } else { "" }
        );
        match result {
            Ok(()) if rollback => self.note(format!("{what}: rolled back")),
            Ok(()) if fails => {
                return Err(format!("{what}: committed, but an operation must fail"));
            }
            Ok(()) => {
                let gci = tx.gci().ok_or_else(|| format!("{what}: no GCI"))?;
                self.note(format!("{what}: gci {}/{}", gci_hi(gci), gci as u32));
                self.last_gci = gci;
                self.live = view;
                self.events.push(Event::Txn {
                    gci_hi: gci_hi(gci),
                    effects,
                });
            }
            Err(e) if fails && matches!(e.code, 626 | 630 | 893) => {
                self.note(format!("{what}: failed as expected ({})", e.code));
            }
            // A small redo ring (seed_config) fills up between checkpoints, and
            // RedoOverCommitLimit=0 gives up at once, or cannot hold a big transaction
            // at all (1220): the transaction did not commit.
            Err(e) if matches!(e.code, 410 | 1220 | 1221) => {
                self.note(format!("{what}: refused, redo log full ({})", e.code));
            }
            Err(e) => return self.refused(&what, e),
        }
        Ok(())
    }

    /// An operation failed: fine once the cluster stopped or the power went (the
    /// life then ends), an error of the test otherwise.
    fn refused(&mut self, what: &str, e: crate::error::NdbError) -> Res<()> {
        if self.c.is_closed() || self.c.inner().gcp.failure().is_some() || self.fs.powered_off() {
            self.note(format!("{what}: refused: {e}"));
            self.stopped = true;
            return Ok(());
        }
        Err(format!("{what}: unexpected error {e}"))
    }

    fn wait_durable(&mut self) {
        let gci = if self.last_gci == 0 || self.rng.chance(20) {
            self.c.inner().gcp.current()
        } else {
            self.last_gci
        };
        match self.c.wait_durable(gci, WAIT) {
            Ok(()) => {
                self.note(format!("wait_durable {}: ok", gci_hi(gci)));
                self.confirm(gci_hi(gci));
            }
            Err(e) => {
                self.note(format!("wait_durable {}: {e}", gci_hi(gci)));
                self.stopped = true;
            }
        }
    }

    /// A GCI confirmed durable: counts unless the power loss was taken before (an
    /// image); a cut cannot come before a checkpoint that succeeded (its I/O would fail).
    fn confirm(&mut self, hi: u32) {
        if !self.crashed {
            self.confirmed_hi = self.confirmed_hi.max(hi);
        }
    }

    fn force_gcp(&mut self) {
        match self.c.inner().force_gcp() {
            Ok(hi) => {
                self.note(format!("force_gcp: {hi}"));
                self.confirm(hi);
            }
            Err(e) => {
                self.note(format!("force_gcp: {e}"));
                self.stopped = true;
            }
        }
    }

    fn lcp(&mut self) {
        match self.c.inner().run_lcp() {
            Ok(s) => self.note(format!(
                "lcp {}: {} fragments, {} rows, {} idle",
                s.lcp_id, s.fragments, s.rows, s.fragments_idle
            )),
            Err(e) => {
                // What the LCP driver does with a failed local checkpoint.
                self.note(format!("lcp: {e}"));
                self.c.inner().stop_on(&e);
                self.stopped = true;
            }
        }
    }

    /// TRUNCATE, DROP or CREATE of a random slot. A failure ends the life.
    fn ddl(&mut self) -> Res<()> {
        let slot = self.rng.below(SLOTS as u64) as usize;
        let ndb = self.c.ndb("test");
        let name = model::table_name(slot);
        let ddl = match (&self.live[slot], self.rng.chance(50)) {
            (None, _) => Ddl::Create,
            (Some(_), true) => Ddl::Truncate,
            (Some(_), false) => Ddl::Drop,
        };
        let r = match ddl {
            Ddl::Create => ndb.create_table(model::spec(slot)).map(|_| ()),
            Ddl::Truncate => ndb.truncate_table(&name),
            Ddl::Drop => ndb.drop_table(&name, false).map(|_| ()),
        };
        match r {
            Ok(()) => {
                self.note(format!("{ddl:?} {name}: ok"));
                let e = Event::Ddl { slot, ddl };
                model::apply(&mut self.live, &e);
                if !self.crashed {
                    self.events.push(e);
                }
                Ok(())
            }
            Err(e) => {
                self.note(format!("{ddl:?} {name}: {e}"));
                if !self.fs.powered_off() && self.fs.fault_plan().is_none() {
                    return Err(format!("{ddl:?} {name}: unexpected error {e}"));
                }
                if !self.crashed {
                    self.uncertain = Some((slot, ddl));
                }
                // A failed DDL is the client's error, not a node failure: the life
                // ends here (the power goes), whether the cluster stopped or not.
                self.ended = true;
                Ok(())
            }
        }
    }

    /// After the cluster stopped or lost its disk: a checkpoint must fail, then the
    /// cluster must be closed and refuse every operation with an error.
    fn check_refusals(&mut self) -> Res<()> {
        if !self.c.is_closed() {
            if self.c.inner().force_gcp().is_ok() {
                return Err("a global checkpoint succeeded after the disk failed".into());
            }
            let t0 = Instant::now();
            while !self.c.is_closed() {
                if t0.elapsed() > WAIT {
                    return Err("the cluster did not stop after a failed checkpoint".into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let ndb = self.c.ndb("test");
        if let Some(s) = (0..SLOTS).find(|s| self.live[*s].is_some())
            && let Ok(t) = ndb.table(&model::table_name(s))
            && let Ok(mut tx) = ndb.start_transaction()
        {
            let row = Row {
                grp: 0,
                u: None,
                val: 0,
                data_txn: 0,
                pad_len: 0,
                body_len: None,
            };
            let _ = tx.define(
                &t,
                OpKind::Write,
                &[("id", Value::UInt(0))],
                &row.columns(0),
                None,
            );
            if tx
                .execute(ExecType::Commit, AbortOption::AbortOnError)
                .is_ok()
            {
                return Err("a commit succeeded on a stopped cluster".into());
            }
        }
        if self
            .c
            .wait_durable(self.c.inner().gcp.current(), WAIT)
            .is_ok()
        {
            return Err("wait_durable succeeded on a stopped cluster".into());
        }
        if self.c.inner().run_lcp().is_ok() {
            return Err("an LCP succeeded on a stopped cluster".into());
        }
        self.note("stopped cluster refuses commits, wait_durable, LCP".into());
        Ok(())
    }
}

/// Runs one life on `fs` (the cluster already started on it) and ends it with a power
/// loss.
fn run_life(
    c: Cluster,
    fs: MemFileSystem,
    live: Db,
    rng: &mut Rng,
    txn_no: &mut i64,
    trace: &mut Vec<String>,
    wrapped: &mut bool,
) -> Res<LifeEnd> {
    let steps = 8 + rng.below(40);
    let ending = match rng.below(10) {
        0..4 => Ending::Image,
        4..8 => Ending::Cut,
        _ => Ending::Faults,
    };
    let at = rng.below(steps);
    trace.push(format!("life: {steps} steps, {ending:?} at step {at}"));
    let mut life = Life {
        c,
        fs,
        rng,
        trace,
        live,
        events: Vec::new(),
        confirmed_hi: 0,
        last_gci: 0,
        txn_no,
        image: None,
        uncertain: None,
        crashed: false,
        stopped: false,
        ended: false,
        wrapped,
    };
    for step in 0..steps {
        let mut action = life.rng.below(100);
        if step == at {
            match ending {
                Ending::Image => {
                    let seed = life.rng.next();
                    life.image = Some(life.fs.crash_image(seed));
                    life.crashed = true;
                    life.note(format!("step {step}: crash image {seed}"));
                }
                Ending::Cut => {
                    let (op, n) = if life.rng.chance(65) {
                        (IoOp::Write, 1 + life.rng.below(24))
                    } else {
                        (IoOp::Sync, 1 + life.rng.below(6))
                    };
                    let seed = life.rng.next();
                    life.fs.crash_at(op, n, seed);
                    // land the cut in a GCP, an LCP or a DDL
                    action = [62, 75, 85, 97][life.rng.below(4) as usize];
                    life.note(format!("step {step}: power loss at {op:?} #{n}"));
                }
                Ending::Faults => {
                    let seed = life.rng.next();
                    let mut rate = || [0, 2_000, 20_000, 100_000][life.rng.below(4) as usize];
                    let plan = FaultPlan {
                        seed,
                        read_eio_per_million: rate(),
                        write_eio_per_million: rate(),
                        sync_eio_per_million: rate(),
                        enospc_per_million: rate(),
                    };
                    life.note(format!("step {step}: {plan:?}"));
                    life.fs.set_fault_plan(Some(plan));
                }
            }
        }
        match action {
            0..60 => life.txn()?,
            60..70 => life.wait_durable(),
            70..75 => life.force_gcp(),
            75..85 => life.lcp(),
            85..90 => {
                // a burst of transactions: more redo, BLOB parts, LCP work
                for _ in 0..5 + life.rng.below(20) {
                    life.txn()?;
                    if life.stopped {
                        break;
                    }
                }
            }
            _ => life.ddl()?,
        }
        if !life.crashed && life.fs.powered_off() {
            life.crashed = true;
            life.image = life.fs.take_crash_image();
            life.note("power lost".into());
        }
        if life.stopped || life.fs.powered_off() {
            life.check_refusals()?;
            break;
        }
        if life.ended {
            break;
        }
    }
    for l in life.fs.fault_log() {
        life.note(format!("  injected: {l}"));
    }
    let mut notes = Vec::new();
    for n in &life.c.inner().data_nodes {
        if let Some(l) = &n.log {
            let (head, tail) = (l.redo.head(), l.redo.tail());
            let ring = l
                .redo
                .usage()
                .first()
                .map_or(u64::MAX, |u| u.total_file_bytes);
            if head.iter().any(|h| *h > ring) {
                *life.wrapped = true;
            }
            notes.push(format!(
                "redo of node {}: head {head:?} tail {tail:?}",
                n.node_id
            ));
        }
    }
    for n in notes {
        life.note(n);
    }
    let image = match life.image.take() {
        Some(i) => i,
        None => {
            let seed = life.rng.next();
            life.note(format!("end: crash image {seed}"));
            life.fs.crash_image(seed)
        }
    };
    stop_in_background(life.c);
    Ok(LifeEnd {
        image,
        events: life.events,
        confirmed_hi: life.confirmed_hi,
        uncertain: life.uncertain,
    })
}

/// Starts the cluster on `image` (a system restart), sometimes first with a power loss
/// or faults armed during the recovery. Returns the running cluster and its disk.
fn restart(
    image: MemFileSystem,
    cfg: &ClusterConfig,
    rng: &mut Rng,
    trace: &mut Vec<String>,
) -> Res<(Cluster, MemFileSystem)> {
    let mut fs = image;
    match rng.below(8) {
        0 => {
            let n = 1 + rng.below(12);
            let seed = rng.next();
            trace.push(format!("restart with a power loss at write #{n}"));
            fs.crash_at(IoOp::Write, n, seed);
            let r = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone()));
            if let Ok(c) = &r {
                stop_in_background(c.clone());
            }
            match fs.take_crash_image() {
                Some(img) => {
                    trace.push(format!(
                        "  power lost during the restart ({})",
                        r.err().map_or("it succeeded".into(), |e| e.to_string())
                    ));
                    fs = img;
                }
                None => {
                    trace.push("  restart completed before the power loss".into());
                    fs.crash_at(IoOp::Write, 0, 0);
                    let seed = rng.next();
                    fs = fs.crash_image(seed);
                }
            }
        }
        1 => {
            let plan = FaultPlan {
                seed: rng.next(),
                read_eio_per_million: 20_000,
                write_eio_per_million: 50_000,
                sync_eio_per_million: 50_000,
                enospc_per_million: 20_000,
            };
            trace.push(format!("restart with {plan:?}"));
            fs.set_fault_plan(Some(plan));
            let r = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone()));
            fs.set_fault_plan(None);
            if let Ok(c) = &r {
                // A local checkpoint the LCP driver started meanwhile (at once when a
                // redo part is half full: the small ring) may still be running into
                // the faults: wait for it.
                drop(c.inner().lcp_lock.lock());
            }
            let log = fs.fault_log();
            for l in &log {
                trace.push(format!("  injected: {l}"));
            }
            // A fault on another thread than this one hit background work of the
            // started cluster, which stops (or stopped) it: a failed restart.
            let here = std::thread::current().name().unwrap_or("?").to_string();
            let background = log
                .iter()
                .any(|l| !l.ends_with(&format!("on thread {here}")));
            match r {
                Ok(c) if background => {
                    trace.push("  restart succeeded, a background checkpoint failed".into());
                    stop_in_background(c);
                    fs = fs.crash_image(rng.next());
                }
                Ok(c) => {
                    trace.push("  restart succeeded despite the faults".into());
                    return Ok((c, fs));
                }
                Err(e) => {
                    trace.push(format!("  restart failed: {e}"));
                    fs = fs.crash_image(rng.next());
                }
            }
        }
        _ => {}
    }
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone()))
        .map_err(|e| format!("restart: {e}"))?;
    Ok((c, fs))
}

/// Checks a restarted cluster against the model of the life that ended; returns the
/// database it holds.
fn check_restart(c: &Cluster, base: &Db, end: &LifeEnd, trace: &mut Vec<String>) -> Res<Db> {
    let restored = c
        .inner()
        .restart
        .lock()
        .as_ref()
        .map(|s| s.restored_gci)
        .ok_or("not a system restart")?;
    trace.push(format!(
        "restart: restored GCI {restored}, confirmed {}",
        end.confirmed_hi
    ));
    if restored < end.confirmed_hi {
        return Err(format!(
            "restored GCI {restored} < GCI {} confirmed durable",
            end.confirmed_hi
        ));
    }
    let got = model::read_db(c)?;
    let want = model::expected(base, &end.events, restored);
    let mut alt = want.clone();
    if let Some((slot, ddl)) = end.uncertain {
        model::apply(&mut alt, &Event::Ddl { slot, ddl });
    }
    let mut db = Db::new();
    for s in 0..SLOTS {
        let g = &got[s];
        if *g == model::render(&want[s]) {
            db.push(want[s].clone());
        } else if *g == model::render(&alt[s]) {
            db.push(alt[s].clone());
        } else {
            return Err(format!(
                "t{s} after restart at GCI {restored}: {}",
                model::diff(g, &model::render(&want[s]))
            ));
        }
    }
    Ok(db)
}

/// One seed: a fresh cluster, 2..=4 lives each ended by a power loss, a check after
/// every restart. Deterministic in `seed` (see the module doc).
pub(super) fn run_seed(seed: u64) -> Res<()> {
    let mut trace = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_seed_traced(seed, &mut trace)
    }))
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panic: {msg}"))
    });
    // A failure may not reproduce (see the module doc): its trace is always printed
    // (for the first few failing seeds of a run).
    let print = std::env::var("RNDB_SIM_TRACE").is_ok()
        || r.is_err() && TRACED_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 3;
    if print {
        eprintln!("seed {seed}:");
        for l in &trace {
            eprintln!("  {l}");
        }
    }
    r
}

/// Failing seeds whose trace was printed.
static TRACED_FAILURES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn run_seed_traced(seed: u64, trace: &mut Vec<String>) -> Res<()> {
    let mut rng = Rng(seed ^ 0x5EED_0FC1_A5A5);
    let cfg = seed_config(seed);
    if small_ring(seed) {
        trace.push("small redo ring: 3 files of 16K per part, RedoOverCommitLimit=0".into());
    }
    let fs = MemFileSystem::new();
    let c = Cluster::embedded_on(cfg.clone(), "/data".into(), Arc::new(fs.clone()))
        .map_err(|e| format!("start: {e}"))?;
    let ndb = c.ndb("test");
    let mut db: Db = vec![None; SLOTS];
    for (s, slot) in db.iter_mut().enumerate() {
        ndb.create_table(model::spec(s))
            .map_err(|e| format!("create t{s}: {e}"))?;
        *slot = Some(model::Table::new());
    }
    let lives = 2 + rng.below(3);
    let mut txn_no = 0i64;
    let mut wrapped = false;
    let (mut c, mut fs) = (c, fs);
    for life in 0..lives {
        trace.push(format!("== life {life}"));
        let end = run_life(
            c,
            fs,
            db.clone(),
            &mut rng,
            &mut txn_no,
            trace,
            &mut wrapped,
        )
        .map_err(|e| format!("life {life}: {e}"))?;
        let (c2, fs2) = restart(end.image.clone(), &cfg, &mut rng, trace)
            .map_err(|e| format!("life {life}: {e}"))?;
        db = check_restart(&c2, &db, &end, trace).map_err(|e| {
            stop_in_background(c2.clone());
            format!("after life {life}: {e}")
        })?;
        c = c2;
        fs = fs2;
    }
    c.inner().shutdown_now();
    if wrapped {
        WRAPPED_SEEDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(())
}

/// With `RNDB_SIM_SMALL_RING` set, one seed in four runs on a small redo ring
/// ([`seed_config`]). Not by default yet, for two problems it shows that are not
/// fixed: a panic in the row storage ("free slot 0 on page 0 is not marked free",
/// seed 7 one run in several, after transactions refused with 410), and a deadlock
/// when the LCP driver's checkpoint waits for `lcp_lock` while the scenario's
/// `run_lcp` holds it and stops the cluster (its forced GCP failed): `shutdown_now`
/// joins the driver.
fn small_ring(seed: u64) -> bool {
    seed % 4 == 3 && std::env::var("RNDB_SIM_SMALL_RING").is_ok()
}

/// Seeds whose redo went past a ring (counted for the soak's summary).
static WRAPPED_SEEDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// [`config`], and for one seed in four a redo ring of 3 files of 16K per part (9
/// log blocks, 36 KB; below NDB's 4M minimum, so set on the parsed configuration):
/// the lives of a seed write more than a ring, so the files are reused once local
/// checkpoints move the keep point, and the ring fills up between checkpoints (410
/// at once with RedoOverCommitLimit=0; the LCP driver starts a checkpoint at half
/// full, concurrently with the scenario).
fn seed_config(seed: u64) -> ClusterConfig {
    let mut c = config();
    if small_ring(seed) {
        c.set_data_node_param("RedoOverCommitLimit", "0")
            .expect("RedoOverCommitLimit");
        for n in &mut c.data_nodes {
            n.fragment_log_file_size = 16 << 10;
        }
    }
    c
}

/// Stops a cluster whose disk no longer matters. Its shutdown waits for the LCP
/// driver's poll (up to 50 ms of sleep), which would otherwise dominate a seed.
fn stop_in_background(c: Cluster) {
    let spawned = std::thread::Builder::new().name("sim-stop".into()).spawn({
        let c = c.clone();
        move || c.inner().shutdown_now()
    });
    if spawned.is_err() {
        c.inner().shutdown_now();
    }
}

fn replay_command(seed: u64) -> String {
    format!(
        "RNDB_SIM_SEEDS={seed}..{} cargo test -p rndb --lib sim_crash -- --ignored --nocapture",
        seed + 1
    )
}

fn run_range(seeds: impl Iterator<Item = u64>, skip_known: bool) -> (u64, Vec<String>) {
    let mut failures = Vec::new();
    let mut n = 0;
    for seed in seeds {
        if skip_known && KNOWN_FAILING.contains(&seed) {
            continue;
        }
        n += 1;
        if let Err(e) = run_seed(seed) {
            failures.push(format!(
                "seed {seed}: {e}\n  replay: {}",
                replay_command(seed)
            ));
        }
    }
    (n, failures)
}

#[test]
fn sim_crash_fixed_seeds() {
    let t0 = Instant::now();
    let (n, failures) = run_range(SEEDS, true);
    eprintln!(
        "sim_crash: {n} seeds in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `RNDB_SIM_SEEDS=a..b`: a longer soak, or the replay of one seed.
#[test]
#[ignore]
fn sim_crash_soak() {
    let spec = std::env::var("RNDB_SIM_SEEDS").unwrap_or_else(|_| "0..1000".into());
    let (a, b) = spec
        .split_once("..")
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .expect("RNDB_SIM_SEEDS=a..b");
    let t0 = Instant::now();
    let (n, failures) = run_range(a..b, false);
    eprintln!(
        "sim_crash: {n} seeds in {:.1} s, {} wrapped a redo ring",
        t0.elapsed().as_secs_f64(),
        WRAPPED_SEEDS.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
