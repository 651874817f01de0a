//! `rndb_mgm --initial`: the embedded data nodes start as with ndbd --initial, removing
//! the data and undo files an earlier run created, and the shell lists them.

mod common;

use common::*;

const CREATE: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=1M ENGINE=NDB;\n\
CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=2M EXTENT_SIZE=1M ENGINE=NDB;\n";

fn args(extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "-f".to_string(),
        transcripts_dir()
            .join("small_disk.ini")
            .display()
            .to_string(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[test]
fn initial_start_removes_and_lists_the_files_of_an_earlier_run() {
    let dir = tempdir();
    let run = run_in(dir.path(), &args(&[]), CREATE.as_bytes());
    assert_eq!(run.status, 0, "{}", run.output);
    let fs2 = dir.path().join("data/ndb_2_fs");
    assert!(fs2.join("undo1.dat").is_file() && fs2.join("data1.dat").is_file());

    // Without --initial the files stay, and creating them again fails.
    let run = run_in(dir.path(), &args(&[]), CREATE.as_bytes());
    assert_eq!(run.status, 1, "{}", run.output);
    assert!(fs2.join("undo1.dat").is_file());

    let run = run_in(dir.path(), &args(&["--initial"]), b"ALL STATUS\n");
    assert_eq!(run.status, 0, "{}", run.output);
    assert_eq!(
        run.output,
        "Initial start: removed 4 files created by an earlier run (NDB leaves them behind):\n\
         \x20 $DIR/data/ndb_2_fs/data1.dat\n\
         \x20 $DIR/data/ndb_2_fs/undo1.dat\n\
         \x20 $DIR/data/ndb_3_fs/data1.dat\n\
         \x20 $DIR/data/ndb_3_fs/undo1.dat\n\
         Node 2: started (rndb-VERSION)\n\
         Node 3: started (rndb-VERSION)\n"
    );
    assert!(!fs2.join("undo1.dat").exists() && !fs2.join("data1.dat").exists());
    let log = std::fs::read_to_string(dir.path().join("data/ndb_1_cluster.log")).expect("log");
    assert!(
        log.contains("-- Node 2: Initial start: removed 2 files created by an earlier run: "),
        "{log}"
    );

    // The objects can be created again, and a second --initial finds nothing to say.
    let run = run_in(dir.path(), &args(&["--initial"]), CREATE.as_bytes());
    assert_eq!(run.status, 0, "{}", run.output);
    let run = run_in(dir.path(), &args(&["--initial"]), b"2 STATUS\n");
    assert!(
        run.output.starts_with("Initial start: removed 4 files"),
        "{}",
        run.output
    );
    let run = run_in(dir.path(), &args(&["--initial"]), b"2 STATUS\n");
    assert_eq!(run.output, "Node 2: started (rndb-VERSION)\n");
}

#[test]
fn a_relative_data_directory_is_recorded_absolute() {
    // Files created from one working directory are removed by --initial from another.
    let dir = tempdir();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let status = std::process::Command::new(BIN)
        .args(["--data-dir", "rel-data"])
        .args(args(&["-e", CREATE.trim_end()]))
        .current_dir(&work)
        .env("HOME", dir.path())
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(0));
    assert!(work.join("rel-data/ndb_2_fs/undo1.dat").is_file());
    let out = std::process::Command::new(BIN)
        .args(["--data-dir", "work/rel-data", "--initial"])
        .args(args(&["-e", "2 STATUS"]))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("Initial start: removed 4 files"), "{err}");
    assert!(!work.join("rel-data/ndb_2_fs/undo1.dat").exists());
}
