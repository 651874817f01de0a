//! Node commands of the shell against a management server (`rndb_mgm -c`, and the
//! cluster `rndb_mgm` starts in its own process): run by `cluster::node_commands`,
//! which waits for each command's effect (at most [`NODE_WAIT_TIMEOUT`]) and, with the
//! cluster in this process, starts the nodes whose process ended again. After an
//! initial start the shell lists the disk-data files the nodes removed (the cluster
//! log has them).

use crate::remote::RemoteShell;
use crate::shell::{Outcome, print_err, print_out};
use rndb::cluster::node_commands;
use std::time::Duration;

/// How long the shell waits for a node command's effect.
pub const NODE_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

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
    /// waited for (`cluster::node_commands`).
    pub(crate) fn node_command(&mut self, text: &str) -> Outcome {
        let shutdown = matches!(
            rndb::mgm::parse::parse(text),
            Ok(Some(rndb::mgm::parse::Command::Shutdown))
        );
        let log_before = self.local.as_ref().map_or(0, |l| l.log_lines().len());
        let mut local = self.local.take();
        let data = self.data.as_ref().map(|d| d.cluster().clone());
        let r = node_commands::run(
            text,
            local.as_mut(),
            data.as_deref(),
            NODE_WAIT_TIMEOUT,
            &mut |c| self.command(c).map_err(rndb::mgm::mgm_error),
            &mut |out| print_out(out),
        );
        self.local = local;
        match r {
            Ok(()) if shutdown => Outcome::Quit,
            Ok(()) => {
                self.list_removed_files(log_before);
                Outcome::Ok
            }
            Err(e) => {
                print_err(&e.message);
                Outcome::Failed
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
