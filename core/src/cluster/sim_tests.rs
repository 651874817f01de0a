//! Scripted membership scenarios and the seed sweep of the simulator.

use super::qmgr::Phase;
use super::sim::{Sim, SimConfig};
use crate::transport::NodeId;

fn quiet(seed: u64, groups: u32, replicas: u32) -> SimConfig {
    let mut c = SimConfig::new(seed, groups, replicas);
    c.drop_per_mille = 0;
    c.duplicate_per_mille = 0;
    c
}

fn members(sim: &Sim, node: NodeId) -> Vec<NodeId> {
    let (phase, view, _) = sim.node(node).expect("node");
    assert_eq!(phase, Phase::Member, "node {node} is not a member");
    view.node_ids()
}

fn phase(sim: &Sim, node: NodeId) -> Phase {
    sim.node(node).expect("node").0
}

fn run(sim: &mut Sim, ms: u64) {
    if let Err(e) = sim.run_for(ms, false) {
        panic!("{e}\n--- trace ---\n{}", sim.trace_text());
    }
}

#[test]
fn a_full_cluster_forms_one_view_with_the_lowest_node_as_president() {
    let mut sim = Sim::new(quiet(1, 2, 2));
    run(&mut sim, 1_000);
    let v = sim.check_converged().expect("converged");
    assert_eq!(v.id, 1);
    assert_eq!(v.node_ids(), vec![2, 3, 4, 5]);
    assert_eq!(v.president(), Some(2));
}

#[test]
fn a_crashed_node_is_declared_dead_and_rejoins_as_the_youngest() {
    let mut sim = Sim::new(quiet(2, 2, 2));
    run(&mut sim, 1_000);
    sim.crash(3, Some(2_000));
    run(&mut sim, 800);
    assert_eq!(members(&sim, 2), vec![2, 4, 5]);
    assert_eq!(members(&sim, 5), vec![2, 4, 5]);
    run(&mut sim, 3_000);
    let v = sim.check_converged().expect("rejoined");
    assert_eq!(v.node_ids(), vec![2, 3, 4, 5]);
    assert_eq!(v.dynamic_id(3), Some(5), "joins after the others");
}

#[test]
fn the_president_crashing_hands_over_to_the_next_oldest() {
    let mut sim = Sim::new(quiet(3, 2, 2));
    run(&mut sim, 1_000);
    sim.crash(2, None);
    run(&mut sim, 1_000);
    let (_, v, _) = sim.node(3).expect("node 3");
    assert_eq!(v.node_ids(), vec![3, 4, 5]);
    assert_eq!(v.president(), Some(3));
}

#[test]
fn a_partition_into_two_halves_is_decided_by_the_arbitrator() {
    // Node groups {2, 3} and {4, 5}; each half holds one node of each.
    let mut sim = Sim::new(quiet(4, 2, 2));
    sim.angel = false;
    run(&mut sim, 1_000);
    sim.partition(&[2, 4], &[3, 5], true, 60_000);
    run(&mut sim, 3_000);
    let left = [2, 4].map(|n| phase(&sim, n));
    let right = [3, 5].map(|n| phase(&sim, n));
    let running = |p: [Phase; 2]| p.iter().all(|&x| x == Phase::Member);
    let stopped = |p: [Phase; 2]| p.iter().all(|&x| x == Phase::Stopped);
    assert!(
        (running(left) && stopped(right)) || (running(right) && stopped(left)),
        "left {left:?} right {right:?}\n{}",
        sim.trace_text()
    );
}

#[test]
fn without_an_arbitrator_both_halves_stop_rather_than_split() {
    let mut sim = Sim::new(quiet(5, 2, 2));
    sim.angel = false;
    run(&mut sim, 1_000);
    sim.set_arbitrator_up(false);
    sim.partition(&[2, 4], &[3, 5], true, 60_000);
    run(&mut sim, 3_000);
    for n in [2, 3, 4, 5] {
        assert_eq!(phase(&sim, n), Phase::Stopped, "node {n}");
    }
}

#[test]
fn a_side_holding_a_whole_node_group_continues_without_the_arbitrator() {
    let mut sim = Sim::new(quiet(6, 2, 2));
    sim.angel = false;
    run(&mut sim, 1_000);
    sim.set_arbitrator_up(false);
    sim.partition(&[2, 3, 4], &[5], true, 60_000);
    run(&mut sim, 3_000);
    assert_eq!(members(&sim, 2), vec![2, 3, 4]);
    assert_eq!(phase(&sim, 5), Phase::Stopped);
}

#[test]
fn losing_a_whole_node_group_stops_every_node() {
    let mut sim = Sim::new(quiet(7, 2, 2));
    sim.angel = false;
    run(&mut sim, 1_000);
    // Each side holds one node group completely and nothing of the other.
    sim.partition(&[2, 3], &[4, 5], true, 60_000);
    run(&mut sim, 3_000);
    for n in [2, 3, 4, 5] {
        assert_eq!(phase(&sim, n), Phase::Stopped, "node {n}");
    }
}

#[test]
fn a_one_way_cut_removes_one_node_and_the_rest_agree() {
    let mut sim = Sim::new(quiet(8, 2, 2));
    sim.angel = false;
    run(&mut sim, 1_000);
    // 3 no longer hears 2; 2 still hears 3.
    sim.partition(&[2], &[3], false, 60_000);
    run(&mut sim, 3_000);
    let alive: Vec<NodeId> = [2, 3, 4, 5]
        .into_iter()
        .filter(|&n| phase(&sim, n) == Phase::Member)
        .collect();
    assert_eq!(alive.len(), 3, "{alive:?}\n{}", sim.trace_text());
    for &n in &alive {
        assert_eq!(members(&sim, n), alive);
    }
}

#[test]
fn a_partial_start_waits_and_needs_a_whole_node_group() {
    let mut cfg = quiet(9, 2, 2);
    cfg.start_partial_timeout_ms = 2_000;
    let mut sim = Sim::new(cfg);
    sim.crash(5, None);
    run(&mut sim, 1_500);
    assert_eq!(phase(&sim, 2), Phase::Starting, "waits for node 5");
    run(&mut sim, 1_500);
    assert_eq!(members(&sim, 2), vec![2, 3, 4]);
    // One node of each group is not enough: it could be half of a partition.
    let mut cfg = quiet(10, 2, 2);
    cfg.start_partial_timeout_ms = 1_000;
    let mut sim = Sim::new(cfg);
    sim.crash(3, None);
    sim.crash(5, None);
    run(&mut sim, 5_000);
    assert_eq!(phase(&sim, 2), Phase::Starting);
    assert_eq!(phase(&sim, 4), Phase::Starting);
}

/// Seeds of the sweep: `RNDB_QMGR_SEEDS=a..b` (default 0..200).
fn seeds() -> std::ops::Range<u64> {
    std::env::var("RNDB_QMGR_SEEDS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some(a.trim().parse().ok()?..b.trim().parse().ok()?)
        })
        .unwrap_or(0..200)
}

fn sweep(range: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    for seed in range {
        // Shapes: 2 node groups of 2, 3 groups of 2, 1 group of 2, 2 groups of 3.
        let (groups, replicas) = [(2, 2), (3, 2), (1, 2), (2, 3)][(seed % 4) as usize];
        let mut sim = Sim::new(SimConfig::new(seed, groups, replicas));
        if let Err(e) = sim.run() {
            failures.push(format!(
                "seed {seed} ({groups} node groups of {replicas}): {e}\n--- last trace ---\n{}\n\
                 replay: RNDB_QMGR_SEEDS={seed}..{} cargo test -p rndb --lib cluster::sim_tests::seed_sweep -- --nocapture",
                sim.trace_text(),
                seed + 1
            ));
            if failures.len() >= 3 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn seed_sweep() {
    sweep(seeds());
}
