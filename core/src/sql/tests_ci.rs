//! Case-insensitive comparison of the string columns of information_schema and ndbinfo
//! tables (MySQL's `_ci` collations): `=`, `<>`, IN, LIKE, BETWEEN, CASE, NULLIF and the
//! seed's `WHERE file_type='datafile'`; numeric comparisons on those tables and every
//! comparison on NDB tables unchanged (binary, whatever the character set).

use super::tests::{one, rows, run, session, strs};
use crate::api::Cluster;

fn disk_cluster() -> Cluster {
    Cluster::embedded(crate::config::small_disk_test_config(2, 2, "16M")).expect("start")
}

fn count(s: &mut super::Session, sql: &str) -> usize {
    rows(s, sql).len()
}

#[test]
fn the_seeds_files_query_matches_datafile_in_any_case() {
    let c = disk_cluster();
    let mut s = session(&c);
    run(
        &mut s,
        "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=1M ENGINE=NDB",
    );
    run(
        &mut s,
        "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=5M EXTENT_SIZE=1M ENGINE=NDB",
    );
    // as the seed writes it: one row per data node
    let r = rows(
        &mut s,
        "select free_extents, total_extents from information_schema.files where file_type='datafile'",
    );
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0], r[1]);
    let from = "FROM information_schema.FILES WHERE";
    for (cond, n) in [
        ("file_type = 'DATAFILE'", 2),
        ("file_type = 'DataFile'", 2),
        ("FILE_TYPE = 'datafile  '", 2), // trailing spaces ignored
        ("'datafile' = file_type", 2),
        ("file_type <> 'datafile'", 2), // the undo files
        ("file_type != 'Undo Log'", 2),
        ("file_type = 'undo log'", 2),
        ("file_type = 'datafil'", 0),
        ("file_type IN ('datafile')", 2),
        ("file_type IN ('x', 'undo log', 'DATAFILE')", 4),
        ("file_type NOT IN ('datafile', 'undo log')", 0),
        ("file_type LIKE 'data%'", 2),
        ("file_type LIKE 'UNDO_LOG'", 2),
        ("file_type NOT LIKE '%file'", 2),
        ("file_name LIKE 'DATA1.%'", 2),
        ("tablespace_name = 'TS_1'", 2),
        ("logfile_group_name = 'LG' AND file_type = 'undo log'", 2),
        ("file_type BETWEEN 'data' AND 'datafilz'", 2),
        ("file_type <=> 'datafile'", 2),
        ("NULLIF(file_type, 'datafile') IS NULL", 2),
        ("CASE file_type WHEN 'datafile' THEN 1 ELSE 0 END = 1", 2),
        ("CONCAT(file_type, '-x') = 'datafile-X'", 2),
        ("engine = 'NDBCLUSTER'", 4),
        // numeric columns compare as numbers, as before
        ("total_extents = '4'", 2),
        ("free_extents > 3 AND file_type = 'datafile'", 2),
    ] {
        assert_eq!(
            count(&mut s, &format!("SELECT file_name {from} {cond}")),
            n,
            "{cond}"
        );
    }
    // in the select list too; the values themselves are unchanged
    assert_eq!(
        rows(
            &mut s,
            "SELECT file_type, file_type = 'datafile', UPPER(file_type) = 'DATAFILE' FROM information_schema.files WHERE file_type LIKE 'd%'"
        ),
        strs(&[&["DATAFILE", "1", "1"], &["DATAFILE", "1", "1"]])
    );
}

#[test]
fn ndbinfo_string_columns_compare_case_insensitively() {
    let c = super::tests::cluster(2, 2, "16M");
    let mut s = session(&c);
    for (cond, n) in [
        ("memory_type = 'data memory'", 2),
        ("memory_type = 'DATA MEMORY'", 2),
        ("memory_type <> 'data memory'", 2),
        ("memory_type IN ('INDEX MEMORY')", 2),
        ("memory_type NOT IN ('index memory', 'data memory')", 0),
        ("memory_type LIKE 'data%'", 2),
        ("memory_type LIKE '%MEMORY'", 4),
        ("node_id = '2' AND memory_type = 'data memory'", 1),
    ] {
        assert_eq!(
            count(
                &mut s,
                &format!("SELECT node_id FROM ndbinfo.memoryusage WHERE {cond}")
            ),
            n,
            "{cond}"
        );
    }
    run(&mut s, "USE ndbinfo");
    assert_eq!(
        rows(
            &mut s,
            "SELECT node_id FROM nodes WHERE status = 'started' ORDER BY node_id"
        ),
        strs(&[&["2"], &["3"]])
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT COUNT(*) FROM memoryusage WHERE memory_type = 'Data memory' OR memory_type = 'index MEMORY'"
        ),
        "4"
    );
    // GROUP BY keeps the values as they are
    assert_eq!(
        rows(
            &mut s,
            "SELECT memory_type, COUNT(*) FROM memoryusage WHERE memory_type LIKE 'D%' GROUP BY memory_type"
        ),
        strs(&[&["Data memory", "2"]])
    );
}

#[test]
fn user_tables_keep_binary_comparison() {
    let c = super::tests::cluster(2, 2, "16M");
    let mut s = session(&c);
    run(
        &mut s,
        "CREATE TABLE tl (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=ndbcluster DEFAULT CHARSET=latin1",
    );
    run(
        &mut s,
        "CREATE TABLE tu (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4) ENGINE=ndbcluster",
    );
    for t in ["tl", "tu"] {
        run(
            &mut s,
            &format!("INSERT INTO {t} VALUES (1, 'DATAFILE'), (2, 'datafile'), (3, 'Undo Log')"),
        );
        for (cond, n) in [
            ("v = 'datafile'", 1),
            ("v = 'DATAFILE'", 1),
            ("v = 'DataFile'", 0),
            ("v = 'datafile '", 1), // trailing spaces still ignored
            ("v <> 'datafile'", 2),
            ("v IN ('datafile', 'undo log')", 1),
            ("v LIKE 'data%'", 1),
            ("v LIKE 'UNDO%'", 0),
            ("v BETWEEN 'a' AND 'z'", 1),
        ] {
            assert_eq!(
                count(&mut s, &format!("SELECT id FROM {t} WHERE {cond}")),
                n,
                "{t}: {cond}"
            );
        }
    }
    // no table: as before
    assert_eq!(one(&mut s, "SELECT 'a' = 'A'"), "0");
}
