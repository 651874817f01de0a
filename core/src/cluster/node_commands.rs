//! Node commands as a client of a management server runs them (`rndb_mgm -c`, the
//! cluster `rndb_mgm` starts in its own process, Python's embedded `Cluster.mgm`).
//! The management server answers a node command once it has told the data nodes; the
//! client then waits for the command's effect, so that the next command finds the
//! nodes as the command left them (as ndb_mgm's STOP prints "Node 3 has shutdown."
//! when it has): STOP until the nodes are gone, START and RESTART until they are
//! started, RESTART -n until they wait for START. It asks `ALL STATUS` every [`POLL`],
//! at most the timeout given.
//!
//! A client's own data connection, if it has one, is waited for too once its nodes are
//! started: the next statement then finds them connected instead of meeting 4009 "no
//! data node is connected" while the connection has not redialed them yet.
//!
//! With the cluster in this process ([`LocalCluster`]), the client is also the nodes'
//! angel: START of a node whose process ended (STOP, ALL STOP) starts it again — a node
//! restart from its own files, or, for every node at once, a system restart.

use super::client::node_states;
use super::local::LocalCluster;
use super::remote::RemoteCluster;
use crate::error::{NdbError, Result};
use crate::mgm::parse::{Command, Target};
use std::time::{Duration, Instant};

/// How often the nodes' states are asked for while waiting.
pub const POLL: Duration = Duration::from_millis(50);
/// How long START waits for the process of a node shown gone to end.
const PROCESS_END_WAIT: Duration = Duration::from_secs(10);
/// How long the client's data connection is given to reach the started nodes.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// The state a node command leaves its nodes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Started,
    WaitingForStart,
    Gone,
}

impl Want {
    fn words(self) -> &'static str {
        match self {
            Want::Started => "started",
            Want::WaitingForStart => "waiting for START",
            Want::Gone => "stopped",
        }
    }

    /// Whether a node whose `ALL STATUS` state is `state` is there.
    pub fn met_by(self, state: &str) -> bool {
        match self {
            Want::Started => state == "started" || state == "single user mode",
            Want::WaitingForStart => state == "not started",
            Want::Gone => state == "not connected" || state == "stopped",
        }
    }
}

/// What to wait for after `cmd` succeeded: its nodes (None: every data node) and the
/// state they end in.
pub fn effect_of(cmd: &Command) -> Option<(Option<u32>, Want)> {
    let node = |t: &Target| match t {
        Target::All => None,
        Target::Node(id) => Some(*id),
    };
    match cmd {
        Command::Stop(t, _) => Some((node(t), Want::Gone)),
        Command::Start(t) => Some((node(t), Want::Started)),
        Command::Restart(t, f) if f.nostart => Some((node(t), Want::WaitingForStart)),
        Command::Restart(t, _) => Some((node(t), Want::Started)),
        _ => None,
    }
}

/// Runs management command `text` through `send` (which returns the server's output),
/// then waits for its effect (module notes), at most `timeout`. START of nodes whose
/// process ended starts them in `local` instead of sending it. `out` gets the output
/// as it comes (the server's answer before the wait). `data`: the client's data
/// connection, waited for once the nodes are started.
pub fn run(
    text: &str,
    local: Option<&mut LocalCluster>,
    data: Option<&RemoteCluster>,
    timeout: Duration,
    send: &mut dyn FnMut(&str) -> Result<String>,
    out: &mut dyn FnMut(&str),
) -> Result<()> {
    let cmd = crate::mgm::parse::parse(text).ok().flatten();
    let effect = cmd.as_ref().and_then(effect_of);
    if let (Some(Command::Start(target)), Some(local)) = (&cmd, local)
        && let Some(started) = start_in_process(local, *target, send)?
    {
        out(&started);
        let node = match target {
            Target::All => None,
            Target::Node(id) => Some(*id),
        };
        let ids = wait_for(node, Want::Started, timeout, send)?;
        connected(data, &ids);
        return Ok(());
    }
    out(&send(text)?);
    match effect {
        Some((node, want)) => {
            let ids = wait_for(node, want, timeout, send)?;
            if want == Want::Started {
                connected(data, &ids);
            }
            Ok(())
        }
        None => Ok(()),
    }
}

/// Gives `data` time to reach the started nodes `ids` (module notes); a connection
/// that does not is left to its own redial: the command's effect is there.
fn connected(data: Option<&RemoteCluster>, ids: &[u32]) {
    if let Some(d) = data {
        d.wait_connected(ids, CONNECT_WAIT);
    }
}

/// Waits until `node` (None: every data node) is in the state `want`; the nodes it
/// waited for.
pub fn wait_for(
    node: Option<u32>,
    want: Want,
    timeout: Duration,
    send: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<Vec<u32>> {
    let deadline = Instant::now() + timeout;
    loop {
        let status = node_states(&send("ALL STATUS")?);
        let waiting: Vec<u32> = status
            .iter()
            .filter(|(id, state)| node.is_none_or(|n| n == **id) && !want.met_by(state))
            .map(|(&id, _)| id)
            .collect();
        if waiting.is_empty() {
            return Ok(status
                .keys()
                .copied()
                .filter(|&id| node.is_none_or(|n| n == id))
                .collect());
        }
        if Instant::now() >= deadline {
            return Err(refused(format!(
                "Node(s) {} not {} within {} s: ALL STATUS shows where they are",
                join(&waiting),
                want.words(),
                timeout.as_secs()
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// START of nodes whose process ended, in `local`: the lines printed for it, or None
/// when the management server answers the command (no such node stopped).
fn start_in_process(
    local: &mut LocalCluster,
    target: Target,
    send: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<Option<String>> {
    // The nodes the management server shows gone have ended, or are about to: their
    // processes are waited for, so that ALL START sees every stopped node.
    let gone: Vec<u32> = match send("ALL STATUS") {
        Ok(s) => node_states(&s)
            .into_iter()
            .filter(|(_, state)| Want::Gone.met_by(state))
            .map(|(id, _)| id)
            .collect(),
        Err(_) => Vec::new(),
    };
    local.wait_ended(&gone, PROCESS_END_WAIT);
    let stopped = local.stopped_nodes();
    if stopped.is_empty() {
        return Ok(None);
    }
    let every = stopped.len() == local.config().data_nodes.len();
    let ids = match target {
        Target::Node(id) if every => {
            return Err(refused(format!(
                "Start of node {id} alone refused: every data node is stopped, and they start together (a system restart): ALL START"
            )));
        }
        Target::Node(id) if !stopped.contains(&id) => return Ok(None),
        Target::Node(id) => vec![id],
        Target::All => stopped,
    };
    for &id in &ids {
        local
            .start_node(id, false)
            .map_err(|e| refused(format!("Start failed: node {id}: {}", e.message)))?;
    }
    Ok(Some(if every {
        "NDB Cluster is being started.".to_string()
    } else {
        ids.iter()
            .map(|id| format!("Database node {id} is being started."))
            .collect::<Vec<_>>()
            .join("\n")
    }))
}

/// A refusal of the client's own, as the management server's own refusals are.
fn refused(text: String) -> NdbError {
    crate::mgm::mgm_error(text)
}

fn join(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_give_each_nodes_state() {
        let s = node_states(
            "Node 2: started (rndb-0.1.0)\nNode 3: starting (Last completed phase 4) (rndb-0.1.0)\n\
             Node 4: not connected\nNode 5: not started (rndb-0.1.0)\nNode 6: single user mode (rndb-0.1.0)",
        );
        let got: Vec<(u32, &str)> = s.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(
            got,
            [
                (2, "started"),
                (3, "starting"),
                (4, "not connected"),
                (5, "not started"),
                (6, "single user mode")
            ]
        );
        assert!(Want::Started.met_by("single user mode"));
        assert!(!Want::Started.met_by("starting"));
        assert!(Want::Gone.met_by("not connected"));
        assert!(!Want::Gone.met_by("stopping"));
        assert!(Want::WaitingForStart.met_by("not started"));
    }

    #[test]
    fn node_commands_wait_for_their_effect_and_others_do_not() {
        let effect = |t: &str| effect_of(&crate::mgm::parse::parse(t).ok().flatten().expect(t));
        assert_eq!(effect("3 STOP"), Some((Some(3), Want::Gone)));
        assert_eq!(effect("ALL START"), Some((None, Want::Started)));
        assert_eq!(
            effect("2 RESTART -n"),
            Some((Some(2), Want::WaitingForStart))
        );
        assert_eq!(effect("2 RESTART"), Some((Some(2), Want::Started)));
        assert_eq!(effect("SHOW"), None);
    }

    #[test]
    fn a_wait_polls_until_every_node_is_there_and_gives_up_at_its_timeout() {
        let mut polls = 0;
        let mut send = |c: &str| -> Result<String> {
            assert_eq!(c, "ALL STATUS");
            polls += 1;
            Ok(if polls < 3 {
                "Node 2: started (rndb)\nNode 3: stopping (rndb)".into()
            } else {
                "Node 2: started (rndb)\nNode 3: not connected".into()
            })
        };
        let ids = wait_for(Some(3), Want::Gone, Duration::from_secs(5), &mut send).expect("gone");
        assert_eq!(ids, [3]);
        assert_eq!(polls, 3);
        let mut never = |_: &str| -> Result<String> { Ok("Node 3: stopping (rndb)".into()) };
        let e = wait_for(None, Want::Gone, Duration::ZERO, &mut never).expect_err("timeout");
        assert_eq!(
            e.message,
            "Node(s) 3 not stopped within 0 s: ALL STATUS shows where they are"
        );
    }

    #[test]
    fn run_prints_the_answer_before_waiting() {
        let mut sent = Vec::new();
        let mut out = Vec::new();
        run(
            "3 STOP",
            None,
            None,
            Duration::from_secs(5),
            &mut |c| {
                sent.push(c.to_string());
                Ok(if c == "3 STOP" {
                    "Node 3: Node shutdown initiated".into()
                } else {
                    "Node 2: started (rndb)\nNode 3: not connected".into()
                })
            },
            &mut |o| out.push(o.to_string()),
        )
        .expect("stop");
        assert_eq!(sent, ["3 STOP", "ALL STATUS"]);
        assert_eq!(out, ["Node 3: Node shutdown initiated"]);
    }
}
