//! Node commands of the shell against a management server (`rndb_mgm -c`, and the
//! cluster `rndb_mgm` starts in its own process). The management server answers a
//! node command once it has told the data nodes; the shell then waits for the
//! command's effect, so that the next command of a script finds the nodes as the
//! command left them, as the embedded shell's commands do: STOP until the nodes are
//! gone, START and RESTART until they are started, RESTART -n until they wait for
//! START. It asks `ALL STATUS` every [`POLL`], at most [`NODE_WAIT_TIMEOUT`].
//!
//! With the cluster in this process, the shell is also the nodes' angel: START of a
//! node whose process ended (STOP, ALL STOP) starts it again — a node restart from its
//! own files, or, for every node at once, a system restart — as the embedded shell's
//! START does; and after an initial start it lists the disk-data files the nodes
//! removed (the cluster log has them).

use crate::remote::RemoteShell;
use crate::shell::{Outcome, print_err, print_out};
use rndb::cluster::client::node_states as states;
use rndb::mgm::parse::{Command, Target};
use std::time::{Duration, Instant};

/// How long the shell waits for a node command's effect.
pub const NODE_WAIT_TIMEOUT: Duration = Duration::from_secs(600);
/// How often it asks for the nodes' states meanwhile.
const POLL: Duration = Duration::from_millis(50);
/// How long START waits for the process of a node shown gone to end.
const PROCESS_END_WAIT: Duration = Duration::from_secs(10);

/// The state a node command leaves its nodes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
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
    fn met_by(self, state: &str) -> bool {
        match self {
            Want::Started => state == "started" || state == "single user mode",
            Want::WaitingForStart => state == "not started",
            Want::Gone => state == "not connected" || state == "stopped",
        }
    }
}

/// What to wait for after `cmd` succeeded: its nodes (None: every data node) and the
/// state they end in.
fn effect_of(cmd: &Command) -> Option<(Option<u32>, Want)> {
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

/// The files named by the cluster log's "Initial start: removed N files created by an
/// earlier run: a, b" lines among `lines`.
fn removed_files(lines: &[String]) -> Vec<std::path::PathBuf> {
    const MARK: &str = "created by an earlier run: ";
    lines
        .iter()
        .filter_map(|l| l.split_once(MARK).map(|(_, files)| files))
        .flat_map(|files| files.split(", ").map(std::path::PathBuf::from))
        .collect()
}

impl RemoteShell {
    /// A management command (not HELP): sent to the management server, printed, and
    /// waited for (module notes).
    pub(crate) fn node_command(&mut self, text: &str) -> Outcome {
        let cmd = rndb::mgm::parse::parse(text).ok().flatten();
        if let Some(Command::Start(t)) = &cmd
            && let Some(outcome) = self.start_in_process(*t)
        {
            return outcome;
        }
        let log_before = self.local.as_ref().map_or(0, |l| l.log_lines().len());
        match self.command(text) {
            Ok(out) => {
                print_out(&out);
                if cmd == Some(Command::Shutdown) {
                    return Outcome::Quit;
                }
                let Some((node, want)) = cmd.as_ref().and_then(effect_of) else {
                    return Outcome::Ok;
                };
                let outcome = self.wait_for(node, want);
                self.list_removed_files(log_before);
                outcome
            }
            Err(e) => {
                print_err(&e);
                Outcome::Failed
            }
        }
    }

    /// Waits until `node` (None: every data node) is in the state `want`.
    fn wait_for(&mut self, node: Option<u32>, want: Want) -> Outcome {
        let deadline = Instant::now() + NODE_WAIT_TIMEOUT;
        loop {
            let status = match self.command("ALL STATUS") {
                Ok(s) => states(&s),
                Err(e) => {
                    print_err(&e);
                    return Outcome::Failed;
                }
            };
            let waiting: Vec<u32> = status
                .iter()
                .filter(|(id, state)| node.is_none_or(|n| n == **id) && !want.met_by(state))
                .map(|(&id, _)| id)
                .collect();
            if waiting.is_empty() {
                return Outcome::Ok;
            }
            if Instant::now() >= deadline {
                print_err(&format!(
                    "Node(s) {} not {} within {} s: ALL STATUS shows where they are",
                    join(&waiting),
                    want.words(),
                    NODE_WAIT_TIMEOUT.as_secs()
                ));
                return Outcome::Failed;
            }
            std::thread::sleep(POLL);
        }
    }

    /// START with the cluster in this process, of nodes whose process ended: started
    /// here again (module notes); None when the management server answers it.
    fn start_in_process(&mut self, target: Target) -> Option<Outcome> {
        self.local.as_ref()?;
        // The nodes the management server shows gone have ended, or are about to: their
        // processes are waited for, so that ALL START sees every stopped node.
        let gone: Vec<u32> = match self.command("ALL STATUS") {
            Ok(s) => states(&s)
                .into_iter()
                .filter(|(_, state)| Want::Gone.met_by(state))
                .map(|(id, _)| id)
                .collect(),
            Err(_) => Vec::new(),
        };
        let local = self.local.as_mut()?;
        local.wait_ended(&gone, PROCESS_END_WAIT);
        let stopped = local.stopped_nodes();
        if stopped.is_empty() {
            return None;
        }
        let every = stopped.len() == local.config().data_nodes.len();
        let ids = match target {
            Target::Node(id) if every => {
                print_err(&format!(
                    "Start of node {id} alone refused: every data node is stopped, and they start together (a system restart): ALL START"
                ));
                return Some(Outcome::Failed);
            }
            Target::Node(id) if !stopped.contains(&id) => return None,
            Target::Node(id) => vec![id],
            Target::All => stopped,
        };
        for &id in &ids {
            if let Err(e) = local.start_node(id, false) {
                print_err(&format!("Start failed: node {id}: {}", e.message));
                return Some(Outcome::Failed);
            }
        }
        print_out(&if every {
            "NDB Cluster is being started.".to_string()
        } else {
            ids.iter()
                .map(|id| format!("Database node {id} is being started."))
                .collect::<Vec<_>>()
                .join("\n")
        });
        let node = match target {
            Target::All => None,
            Target::Node(id) => Some(id),
        };
        Some(self.wait_for(node, Want::Started))
    }

    /// After a start with the cluster in this process: the disk-data files the nodes'
    /// initial start removed, as the embedded shell lists them (the cluster log lines
    /// after the first `log_before`).
    fn list_removed_files(&self, log_before: usize) {
        let Some(local) = &self.local else { return };
        let lines = local.log_lines();
        let text = initial_removed_lines(lines.get(log_before..).unwrap_or(&[])).join("\n");
        if !text.is_empty() {
            print_out(&text);
        }
    }
}

/// The embedded shell's lines for the disk-data files an initial start removed, from
/// the cluster log `lines` (nothing when it removed none).
pub fn initial_removed_lines(lines: &[String]) -> Vec<String> {
    let mut removed = removed_files(lines);
    removed.sort();
    rndb::mgm::initial_start_lines(&removed)
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
        let s = states(
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
    fn removed_files_come_from_the_cluster_log_lines() {
        let lines = vec![
            "2026-12-07 10:00:00 [MgmtSrvr] INFO     -- Node 2: Start initiated (rndb)".to_string(),
            "2026-12-07 10:00:00 [MgmtSrvr] INFO     -- Node 2: Initial start: removed 2 files created by an earlier run: /d/ndb_2_fs/a.dat, /d/ndb_2_fs/u.dat".to_string(),
            "2026-12-07 10:00:00 [MgmtSrvr] INFO     -- Node 3: Initial start: removed 1 file created by an earlier run: /d/ndb_3_fs/a.dat".to_string(),
        ];
        let got = removed_files(&lines);
        assert_eq!(
            got,
            [
                "/d/ndb_2_fs/a.dat",
                "/d/ndb_2_fs/u.dat",
                "/d/ndb_3_fs/a.dat"
            ]
            .map(std::path::PathBuf::from)
        );
        assert!(effect_of(&Command::Show).is_none());
    }
}
