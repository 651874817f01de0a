//! The data path in the deterministic simulator: scripted failures, then a sweep of
//! seeds with random crashes, partitions and arbitrator loss under a workload, each
//! checked against the model (`sim_data`).
//!
//! `RNDB_DATA_SIM_SEEDS=A..B cargo test --release -p rndb --lib sim_data_tests::seed_sweep`
//! runs other seeds; a failure prints its seed and the command that replays it.

use super::sim::{Sim, SimConfig};
use super::sim_data::{DataStats, Workload};
use crate::transport::NodeId;

/// `groups` node groups of two, a network that drops and duplicates membership
/// messages (data messages travel as over TCP), faults for `faulty_ms`.
fn data_config(seed: u64, groups: u32, faulty_ms: u64) -> SimConfig {
    data_config_r(seed, groups, 2, faulty_ms)
}

fn data_config_r(seed: u64, groups: u32, replicas: u32, faulty_ms: u64) -> SimConfig {
    let mut c = SimConfig::new(seed, groups, replicas);
    c.faulty_ms = faulty_ms;
    c.quiet_ms = 8_000;
    c.crash_per_10k = 6;
    c.partition_per_10k = 3;
    c.arbitrator_flip_per_10k = 1;
    c.disconnect_on_crash = true;
    c
}

fn run_seed(seed: u64, groups: u32, faulty_ms: u64) -> Result<DataStats, String> {
    run_seed_r(seed, groups, 2, faulty_ms)
}

fn run_seed_r(seed: u64, groups: u32, replicas: u32, faulty_ms: u64) -> Result<DataStats, String> {
    let cfg = data_config_r(seed, groups, replicas, faulty_ms);
    let mut sim = Sim::with_data(cfg, replicas, Workload::default())?;
    let r = sim.run();
    let stats = sim
        .data
        .as_ref()
        .map(|d| d.stats.clone())
        .unwrap_or_default();
    match r {
        Ok(_) => Ok(stats),
        Err(e) => Err(format!(
            "{e}\n--- stats: {stats:?}\n--- trace ---\n{}",
            sim.trace_text()
        )),
    }
}

/// Seeds `A..B` from the environment variable `var`, else `default`.
fn seed_range(var: &str, default: (u64, u64)) -> (u64, u64) {
    std::env::var(var)
        .ok()
        .and_then(|r| {
            let (a, b) = r.split_once("..")?;
            Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
        })
        .unwrap_or(default)
}

fn quiet_sim(seed: u64, groups: u32) -> Sim {
    let mut c = data_config(seed, groups, 0);
    c.drop_per_mille = 0;
    c.duplicate_per_mille = 0;
    match Sim::with_data(c, 2, Workload::default()) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn run(sim: &mut Sim, ms: u64) {
    if let Err(e) = sim.run_for(ms, false) {
        panic!("{e}\n--- trace ---\n{}", sim.trace_text());
    }
}

fn stats(sim: &Sim) -> DataStats {
    sim.data
        .as_ref()
        .map(|d| d.stats.clone())
        .unwrap_or_default()
}

#[test]
fn a_quiet_cluster_commits_and_every_read_matches_the_model() {
    let mut sim = quiet_sim(11, 2);
    run(&mut sim, 5_000);
    let s = stats(&sim);
    assert!(s.committed > 100, "committed {s:?}\n{}", sim.trace_text());
    assert!(s.reads_checked > 100, "reads {s:?}");
    assert_eq!(s.unknown, 0, "no failures, no unknown outcomes: {s:?}");
    if let Err(e) = sim.run() {
        panic!("{e}\n{}", sim.trace_text());
    }
}

#[test]
fn a_crashed_node_restarts_by_copy_under_load_and_its_replicas_match() {
    let mut sim = quiet_sim(12, 2);
    run(&mut sim, 2_000);
    let before = stats(&sim).committed;
    sim.crash(3 as NodeId, Some(1_500));
    run(&mut sim, 6_000);
    let s = stats(&sim);
    assert!(s.committed > before + 50, "writes go on: {s:?}");
    let d = sim.data.as_ref().expect("data");
    assert!(
        d.all_ready(),
        "node 3 copied and up to date:\n{}",
        sim.trace_text()
    );
    if let Err(e) = sim.run() {
        panic!("{e}\n{}", sim.trace_text());
    }
}

#[test]
fn seed_sweep() {
    let (a, b) = seed_range("RNDB_DATA_SIM_SEEDS", (0, 200));
    let mut total = DataStats::default();
    for seed in a..b {
        // Seeds cycle through two node groups of two, one of two, one of three.
        let (groups, replicas) = match seed % 4 {
            1 | 3 => (2, 2),
            0 => (1, 2),
            _ => (1, 3),
        };
        match run_seed_r(seed, groups, replicas, 12_000) {
            Ok(s) => total.add(&s),
            Err(e) => panic!(
                "data simulator seed {seed} failed: {e}\nreplay: RNDB_DATA_SIM_SEEDS={seed}..{} \
                 cargo test --release -p rndb --lib cluster::sim_data_tests::seed_sweep -- --nocapture",
                seed + 1
            ),
        }
    }
    eprintln!("data simulator seeds {a}..{b}: {total:?}");
    assert!(total.committed > 0);
    if b - a >= 100 {
        // The sweep exercises what it claims to.
        assert!(
            total.copies_done > (b - a) / 2,
            "node restarts by copy: {total:?}"
        );
        assert!(
            total.unknown > 0 && total.refused > 0,
            "failures seen: {total:?}"
        );
    }
}

#[test]
fn a_primary_cut_off_from_its_group_serves_no_stale_rows() {
    // Node 2 is cut off from every other data node and the management server, but
    // the client still reaches it: without read leases it would answer reads from
    // rows the other side has changed since (seed 39 of the sweep found that).
    let mut sim = quiet_sim(39, 2);
    sim.angel = true;
    run(&mut sim, 2_000);
    sim.partition(&[2], &[1, 3, 4, 5], true, 3_000);
    run(&mut sim, 5_000);
    let s = stats(&sim);
    assert!(
        s.errors.get(&4035).copied().unwrap_or(0) > 0,
        "node 2 refused to serve without a lease: {s:?}"
    );
    if let Err(e) = sim.run() {
        panic!("{e}\n{}", sim.trace_text());
    }
}

#[test]
fn a_takeover_commit_that_reaches_a_backup_before_its_view_change_commits_it() {
    // Seed 671: the TC saw the primary of a committing transaction fail and asked the
    // backup to commit before the backup had installed that view; the backup used to
    // wait for its (live, to it) primary forever, holding the row's lock, while the
    // client had been told the write committed.
    if let Err(e) = run_seed(671, 2, 12_000) {
        panic!("{e}");
    }
}

#[test]
fn a_backup_of_partitions_with_two_primaries_takes_both_after_images() {
    // Seed 18, one node group of three: the TC's node was backup of two partitions
    // of the transaction whose primaries differ; the second primary's after-images
    // were refused as "prepared twice" and the transaction never answered.
    if let Err(e) = run_seed_r(18, 1, 3, 12_000) {
        panic!("{e}");
    }
}

#[test]
fn a_rolling_restart_of_two_node_groups_under_load_keeps_every_row() {
    // Each node in turn stops and comes back, the next only once every node is up
    // to date again (as ROLLING RESTART does), while the client writes and reads.
    let mut sim = quiet_sim(21, 2);
    run(&mut sim, 1_500);
    for node in 2..=5 as NodeId {
        sim.crash(node, Some(300));
        run(&mut sim, 500);
        let mut waited_ms = 0;
        while !sim.data.as_ref().is_some_and(|d| d.all_ready()) {
            assert!(
                waited_ms < 10_000,
                "node {node} never caught up:\n{}",
                sim.trace_text()
            );
            run(&mut sim, 100);
            waited_ms += 100;
        }
    }
    let s = stats(&sim);
    assert!(s.copies_done >= 4, "every node restarted by copy: {s:?}");
    assert_eq!(s.generations, 1, "the cluster never went down: {s:?}");
    if let Err(e) = sim.run() {
        panic!("{e}\n{}", sim.trace_text());
    }
}

#[test]
fn optimize_table_amid_crashes_and_copies_keeps_every_replica_right() {
    // OPTIMIZE TABLE now and then on a random ready node while nodes crash and restart
    // by copy (a copy's scan keeps the source's rows in place) and the client writes
    // and deletes over enough keys that pages thin out: every read still matches the
    // model and, at the end, the replicas of every partition are identical.
    let mut total = DataStats::default();
    for seed in 300..303u64 {
        let cfg = data_config(seed, 1 + (seed % 2) as u32, 12_000);
        let workload = Workload {
            keys: 3_000,
            max_in_flight: 24,
            start_per_mille: 1_000,
            optimize_per_10k: 20,
            scan_per_mille: 0,
            rounds_per_mille: 0,
            contested_per_mille: 0,
            ignore_errors_per_mille: 0,
        };
        let mut sim = match Sim::with_data(cfg, 2, workload) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let r = sim.run();
        let s = stats(&sim);
        if let Err(e) = r {
            panic!("seed {seed}: {e}\n--- stats: {s:?}\n{}", sim.trace_text());
        }
        total.add(&s);
    }
    eprintln!("OPTIMIZE in the data simulator: {total:?}");
    assert!(
        total.optimizes > 10 && total.optimize_moves > 0 && total.copies_done > 0,
        "{total:?}"
    );
}

/// Runs seeds `a..b` with the workload, each on the topology `(groups, replicas)` the
/// seed picks; a failing seed panics with its trace and the command that replays it
/// (`var` names the seed range, `test` the test to filter on). The seeds' stats
/// summed.
fn sweep(
    (a, b): (u64, u64),
    topology: impl Fn(u64) -> (u32, u32),
    workload: Workload,
    var: &str,
    test: &str,
) -> DataStats {
    let mut total = DataStats::default();
    for seed in a..b {
        let (groups, replicas) = topology(seed);
        let cfg = data_config_r(seed, groups, replicas, 12_000);
        let mut sim = match Sim::with_data(cfg, replicas, workload.clone()) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let r = sim.run();
        let s = stats(&sim);
        if let Err(e) = r {
            panic!(
                "seed {seed}: {e}\n--- stats: {s:?}\n{}\nreplay: {var}={seed}..{} \
                 cargo test --release -p rndb --lib cluster::sim_data_tests::{test} -- --nocapture",
                sim.trace_text(),
                seed + 1
            );
        }
        total.add(&s);
    }
    total
}

#[test]
fn scans_amid_crashes_copies_and_partitions_return_exactly_the_models_rows() {
    // Table scans of one node group at one of its nodes (batches of 1-8 rows) while
    // nodes crash, restart by copy and are cut off: a finished scan returned every key
    // of its group once, with the value the model holds (a cut-off node refuses by its
    // read lease), and nothing of another group.
    let (a, b) = seed_range("RNDB_DATA_SIM_SCAN_SEEDS", (600, 630));
    let total = sweep(
        (a, b),
        |seed| match seed % 3 {
            0 => (2, 2),
            1 => (1, 2),
            _ => (1, 3),
        },
        Workload {
            scan_per_mille: 300,
            ..Workload::default()
        },
        "RNDB_DATA_SIM_SCAN_SEEDS",
        "scans_amid",
    );
    eprintln!("scans in the data simulator, seeds {a}..{b}: {total:?}");
    if b - a >= 20 {
        assert!(
            total.scans > 3 * (b - a) && total.scan_rows > total.scans,
            "{total:?}"
        );
        assert!(total.copies_done > 0 && total.committed > 0, "{total:?}");
    }
}

#[test]
fn transactions_in_rounds_amid_crashes_copies_and_partitions_keep_the_model() {
    // Half the transactions run in two rounds (NoCommit, then Commit or a rollback
    // some ticks later, the keys locked meanwhile) while nodes crash, restart by copy
    // (whose marks end open transactions from before them) and are cut off: every
    // read matches the model, nothing of a rolled-back or aborted transaction shows,
    // and at the end every partition's replicas are identical.
    let (a, b) = seed_range("RNDB_DATA_SIM_ROUNDS_SEEDS", (1000, 1030));
    let total = sweep(
        (a, b),
        |seed| match seed % 3 {
            0 => (2, 2),
            1 => (1, 2),
            _ => (1, 3),
        },
        Workload {
            rounds_per_mille: 500,
            ..Workload::default()
        },
        "RNDB_DATA_SIM_ROUNDS_SEEDS",
        "transactions_in_rounds",
    );
    eprintln!("transactions in rounds in the data simulator, seeds {a}..{b}: {total:?}");
    if b - a >= 20 {
        assert!(
            total.rounds_committed > 10 * (b - a) && total.rounds_rolled_back > b - a,
            "{total:?}"
        );
        assert!(
            total.copies_done > 0 && total.reads_checked > 0,
            "{total:?}"
        );
    }
}

#[test]
fn contested_unique_values_amid_crashes_copies_and_partitions_stay_unique() {
    // A third of the writes set one of four contested values of a unique index while
    // nodes crash, restart by copy and are cut off, over two node groups (the unique
    // checks between groups) and one (the local index alone, with three replicas): a
    // write of a value commits only while no other key holds it for certain, and at
    // the end no two keys hold one value; every read matches the model.
    let (a, b) = seed_range("RNDB_DATA_SIM_UNIQUE_SEEDS", (1500, 1530));
    let total = sweep(
        (a, b),
        |seed| match seed % 3 {
            0 | 1 => (2, 2),
            _ => (1, 3),
        },
        Workload {
            contested_per_mille: 330,
            ..Workload::default()
        },
        "RNDB_DATA_SIM_UNIQUE_SEEDS",
        "contested_unique",
    );
    eprintln!("contested unique values in the data simulator, seeds {a}..{b}: {total:?}");
    if b - a >= 20 {
        let refused_893 = total.errors.get(&893).copied().unwrap_or(0);
        assert!(
            refused_893 > b - a && total.committed > 10 * (b - a),
            "{total:?}"
        );
        assert!(
            total.copies_done > 0 && total.reads_checked > 0,
            "{total:?}"
        );
    }
}

#[test]
fn ignore_errors_transactions_amid_crashes_fail_only_their_failing_operations() {
    // Half the transactions run with AO_IgnoreError: their deletes may name keys
    // without a row and a third of the writes set contested values of a unique index,
    // so operations fail alone (626, 893) while the others commit, as nodes crash,
    // restart by copy and are cut off: every read matches the model (which keeps
    // nothing of an operation that failed alone), no value is held twice, and at the
    // end every partition's replicas are identical.
    let (a, b) = seed_range("RNDB_DATA_SIM_IGNORE_SEEDS", (1800, 1830));
    let total = sweep(
        (a, b),
        |seed| match seed % 3 {
            0 | 1 => (2, 2),
            _ => (1, 3),
        },
        Workload {
            contested_per_mille: 330,
            ignore_errors_per_mille: 500,
            ..Workload::default()
        },
        "RNDB_DATA_SIM_IGNORE_SEEDS",
        "ignore_errors",
    );
    eprintln!("AO_IgnoreError transactions in the data simulator, seeds {a}..{b}: {total:?}");
    if b - a >= 20 {
        assert!(
            total.failed_alone > b - a && total.committed > 10 * (b - a),
            "{total:?}"
        );
        assert!(
            total.copies_done > 0 && total.reads_checked > 0,
            "{total:?}"
        );
    }
}
