//! The schema file after every DDL kind, a failed write failing the DDL cleanly, a
//! recreate giving the same tables (ids, SHOW CREATE TABLE), ids never reused, damaged
//! files rejected, and real files through `OsFileSystem`.

use super::*;
use crate::api::Cluster;
use crate::disk::io::{Faults, FileSystem, MemFileSystem, OsFileSystem};
use crate::schema::Value;
use crate::sql::{Session, SqlResult, render_error};

const LG: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=1M ENGINE=NDB";
const TS: &str = "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=4M EXTENT_SIZE=256K ENGINE=NDB";

struct Setup {
    cluster: Cluster,
    fs: MemFileSystem,
    _dir: tempfile::TempDir,
}

fn mem_cluster() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = MemFileSystem::new();
    let cfg = crate::config::small_disk_test_config(2, 2, "32M");
    let cluster =
        Cluster::embedded_on(cfg, dir.path().to_path_buf(), Arc::new(fs.clone())).expect("start");
    Setup {
        cluster,
        fs,
        _dir: dir,
    }
}

fn try_run(s: &mut Session, sql: &str) -> Result<SqlResult> {
    s.execute(sql).map(|mut v| v.pop().expect("a result"))
}

fn run(s: &mut Session, sql: &str) {
    if let Err(e) = try_run(s, sql) {
        panic!("{sql}: {}", render_error(&e));
    }
}

fn show_create(s: &mut Session, table: &str) -> String {
    match try_run(s, &format!("show create table {table}")).expect("show create") {
        SqlResult::Rows { rows, .. } => match &rows[0][1] {
            Value::Str(t) => t.clone(),
            v => panic!("{v:?}"),
        },
        r => panic!("{r:?}"),
    }
}

/// The schema file of every node: identical on all, and equal to the dictionary's
/// image now.
fn file_image(setup: &Setup) -> SchemaImage {
    file_image_of(&setup.cluster, &setup.fs)
}

fn file_image_of(cluster: &Cluster, fs: &MemFileSystem) -> SchemaImage {
    let inner = cluster.inner();
    let mut first: Option<Vec<u8>> = None;
    for n in &inner.data_nodes {
        let path = n.disk.fs_dir().join(SCHEMA_FILE);
        let bytes = fs
            .read_all(&path)
            .expect("read")
            .expect("schema file exists");
        match &first {
            Some(b) => assert_eq!(&bytes, b, "node {} differs", n.node_id),
            None => first = Some(bytes),
        }
    }
    let bytes = first.expect("a data node");
    assert_eq!(
        bytes,
        inner.schema_image().expect("image").encode(),
        "schema file is not the dictionary"
    );
    let dir = inner.data_nodes[0].disk.fs_dir().to_path_buf();
    load_schema(fs, &dir).expect("load").expect("present")
}

fn id_of(image: &SchemaImage, name: &str) -> u32 {
    image
        .tables
        .iter()
        .find(|t| t.def.name == name)
        .unwrap_or_else(|| panic!("{name} not in the image"))
        .def
        .id
}

fn names(image: &SchemaImage) -> Vec<String> {
    image.tables.iter().map(|t| t.def.name.clone()).collect()
}

#[test]
fn every_ddl_rewrites_the_schema_file_on_every_node() {
    let setup = mem_cluster();
    let inner = setup.cluster.inner().clone();
    let dir0 = inner.data_nodes[0].disk.fs_dir().to_path_buf();
    assert!(load_schema(&setup.fs, &dir0).unwrap().is_none());
    let mut s = Session::new(setup.cluster.ndb("test"));

    run(&mut s, LG);
    let img = file_image(&setup);
    let DiskObject::LogfileGroup(g) = &img.disk_objects()[0] else {
        panic!("{:?}", img.disk_objects())
    };
    assert_eq!((g.name.as_str(), g.undo_buffer_size_bytes), ("lg", 1 << 20));
    assert_eq!(g.undo_files[0].file_name, "undo1.dat");
    assert_eq!(g.undo_files[0].size_bytes, 2 << 20);
    let paths: Vec<(u32, PathBuf)> = inner
        .data_nodes
        .iter()
        .map(|n| (n.node_id, n.disk.fs_dir().join("undo1.dat")))
        .collect();
    assert_eq!(g.undo_files[0].node_paths, paths);

    run(&mut s, TS);
    run(
        &mut s,
        "ALTER LOGFILE GROUP lg ADD UNDOFILE 'undo2.dat' INITIAL_SIZE=2M ENGINE=NDB",
    );
    let img = file_image(&setup);
    let DiskObject::LogfileGroup(g) = &img.disk_objects()[0] else {
        panic!()
    };
    assert_eq!(g.undo_files.len(), 2);
    let DiskObject::Tablespace(t) = &img.disk_objects()[1] else {
        panic!("{:?}", img.disk_objects())
    };
    assert_eq!(
        (
            t.name.as_str(),
            t.logfile_group.as_str(),
            t.extent_size_bytes
        ),
        ("ts_1", "lg", 256 << 10)
    );
    assert_eq!(t.data_files[0].size_bytes, 4 << 20);

    run(
        &mut s,
        "create table t1 (id int primary key, b text, u int, unique key (u), d varchar(100) storage disk) tablespace ts_1 engine=ndb",
    );
    let img = file_image(&setup);
    let t1 = id_of(&img, "t1");
    let blob = img
        .tables
        .iter()
        .find(|t| {
            t.owner
                == Some(HiddenOwner::BlobParts {
                    table_id: t1,
                    column: 1,
                })
        })
        .expect("blob parts table");
    assert_eq!(blob.def.name, format!("NDB$BLOB_{t1}_1"));
    let uniq = img
        .tables
        .iter()
        .find(|t| matches!(t.owner, Some(HiddenOwner::UniqueIndex { table_id, .. }) if table_id == t1))
        .expect("unique index table");
    assert!(uniq.def.name.ends_with("$unique"));
    assert_eq!(
        img.table(t1).unwrap().def.tablespace.as_deref(),
        Some("ts_1")
    );
    assert_eq!(
        img.next_table_id,
        img.tables.iter().map(|t| t.def.id).max().unwrap()
    );

    run(&mut s, "create table t2 (a int, b int)");
    let img = file_image(&setup);
    assert!(img.table(id_of(&img, "t2")).unwrap().def.has_hidden_pk());
    run(&mut s, "create index ia on t2 (a)");
    run(&mut s, "create unique index ub on t2 (b)");
    let img = file_image(&setup);
    let t2 = img.table(id_of(&img, "t2")).unwrap();
    assert_eq!(t2.def.indexes.len(), 3, "{:?}", t2.def.indexes);
    let hidden_of_t2 = |img: &SchemaImage| {
        img.tables
            .iter()
            .filter(|t| t.owner.is_some_and(|o| o.table_id() == id_of(img, "t2")))
            .count()
    };
    assert_eq!(hidden_of_t2(&img), 1);
    run(&mut s, "drop index ub on t2");
    let img = file_image(&setup);
    assert_eq!(hidden_of_t2(&img), 0);

    // TRUNCATE: new ids for the table and its hidden tables, nothing reused.
    inner
        .set_extra_metadata("test", "t1", b"sdi of t1")
        .unwrap();
    assert_eq!(
        &*file_image(&setup).table(t1).unwrap().extra_metadata,
        b"sdi of t1"
    );
    let before = file_image(&setup);
    run(&mut s, "insert into t1 values (1, 'x', 1, 'y')");
    // (through the NDB API: SQL's TRUNCATE sets its own metadata again)
    setup.cluster.ndb("test").truncate_table("t1").unwrap();
    let img = file_image(&setup);
    let new_t1 = id_of(&img, "t1");
    assert_eq!(&*img.table(new_t1).unwrap().extra_metadata, b"sdi of t1");
    assert!(new_t1 > before.next_table_id);
    assert_eq!(img.next_table_id, before.next_table_id + 3);
    assert!(names(&img).contains(&format!("NDB$BLOB_{new_t1}_1")));
    assert!(!names(&img).contains(&format!("NDB$BLOB_{t1}_1")));
    assert_eq!(img.tables.len(), before.tables.len());

    run(
        &mut s,
        "ALTER TABLESPACE ts_1 ADD DATAFILE 'data2.dat' INITIAL_SIZE 4M ENGINE NDB",
    );
    let img = file_image(&setup);
    let DiskObject::Tablespace(t) = &img.disk_objects()[1] else {
        panic!()
    };
    assert_eq!(t.data_files.len(), 2);
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 DROP DATAFILE 'data2.dat' ENGINE NDB",
    );
    let img = file_image(&setup);
    let DiskObject::Tablespace(t) = &img.disk_objects()[1] else {
        panic!()
    };
    assert_eq!(t.data_files.len(), 1);

    run(&mut s, "drop table t1");
    run(&mut s, "drop table t2");
    // Refused drops (in use) leave the file as it was.
    assert!(try_run(&mut s, "DROP TABLESPACE ts_1 ENGINE NDB").is_err());
    assert!(try_run(&mut s, "DROP LOGFILE GROUP lg ENGINE NDB").is_err());
    assert_eq!(file_image(&setup).disk_objects().len(), 2);
    run(
        &mut s,
        "ALTER TABLESPACE ts_1 DROP DATAFILE 'data1.dat' ENGINE NDB",
    );
    run(&mut s, "DROP TABLESPACE ts_1 ENGINE NDB");
    run(&mut s, "DROP LOGFILE GROUP lg ENGINE NDB");
    let img = file_image(&setup);
    assert!(img.tables.is_empty());
    assert!(img.disk_objects().is_empty());
    assert_eq!(img.next_table_id, before.next_table_id + 3);
    assert_eq!(img.last_disk_object_id, 2);
}

#[test]
fn a_failed_write_fails_the_ddl_and_changes_nothing() {
    let setup = mem_cluster();
    let ndb = setup.cluster.ndb("test");
    let mut s = Session::new(ndb.clone());
    run(
        &mut s,
        "create table t (id int primary key, b text, u int, unique key (u))",
    );
    run(&mut s, "create index iu2 on t (u, id)");
    run(&mut s, "insert into t values (1, 'one', 10)");
    let good = file_image(&setup).encode();
    let t_id = ndb.table("t").unwrap().def.id;
    let ids = |n: &crate::api::Ndb| {
        n.cluster()
            .dict
            .read()
            .all()
            .iter()
            .map(|t| t.def.id)
            .collect::<BTreeSet<_>>()
    };
    let ids_before = ids(&ndb);
    let next_before = ndb.cluster().dict.read().next_table_id();
    let all = [
        "create table t2 (a int primary key)",
        "drop table t",
        "truncate table t",
        "create index ia on t (id, u)",
        "create unique index ub on t (id, u)",
        "drop index iu2 on t",
    ];
    let inner = setup.cluster.inner();
    // EIO on every write, then a full disk (only a larger image needs more room).
    for (faults, statements) in [
        (
            Faults {
                fail_writes: true,
                ..Faults::default()
            },
            &all[..],
        ),
        (
            Faults {
                capacity_bytes: Some(setup.fs.used_bytes()),
                ..Faults::default()
            },
            &[all[0], all[3], all[4]][..],
        ),
    ] {
        setup.fs.set_faults(faults);
        for &sql in statements {
            let e = try_run(&mut s, sql).expect_err(sql);
            assert_eq!(e.code, 1509, "{sql}: {e}");
        }
        let kept = ndb.table("t").unwrap().extra_metadata.clone();
        let e = inner
            .set_extra_metadata("test", "t", &[7; 4000])
            .unwrap_err();
        assert_eq!(e.code, 1509);
        assert_eq!(ndb.table("t").unwrap().extra_metadata, kept);
        setup.fs.set_faults(Faults::default());
        // The files are as before, and so is the next table id.
        for n in &setup.cluster.inner().data_nodes {
            let path = n.disk.fs_dir().join(SCHEMA_FILE);
            assert_eq!(setup.fs.read_all(&path).unwrap().unwrap(), good);
        }
        assert_eq!(ids(&ndb), ids_before);
        assert_eq!(ndb.cluster().dict.read().next_table_id(), next_before);
        let t = ndb.table("t").expect("t is still there");
        assert_eq!(t.def.indexes.len(), 4, "{:?}", t.def.indexes);
        assert!(ndb.table("t2").is_err());
        run(&mut s, "select * from t where u = 10");
        assert_eq!(t.row_count(), 1, "truncate did not happen");
    }
    // The same statements work once the disk does.
    run(&mut s, "truncate table t");
    assert!(ndb.table("t").unwrap().def.id > t_id);
    run(&mut s, "drop table t");
    assert!(file_image(&setup).tables.is_empty());
}

#[test]
fn recreate_gives_the_same_tables_ids_and_show_create() {
    let a = mem_cluster();
    let mut s = Session::new(a.cluster.ndb("test"));
    run(&mut s, LG);
    run(&mut s, TS);
    let tables = [
        (
            "t_blob",
            "create table t_blob (id int primary key, b blob, t mediumtext)",
        ),
        (
            "t_uniq",
            "create table t_uniq (id bigint unsigned auto_increment primary key, e varchar(40) not null, unique key (e)) engine=ndb",
        ),
        (
            "t_disk",
            "create table t_disk (id int primary key, d1 varchar(200), d2 int) tablespace ts_1 storage disk engine=ndb",
        ),
        (
            "t_nokey",
            "create table t_nokey (a int, b char(3) default 'abc')",
        ),
        (
            "t_comp",
            "create table t_comp (a int not null, b varchar(10) not null, c decimal(10,2) default 1.50, d datetime, primary key (a, b), key kc (c))",
        ),
    ];
    for (_, sql) in tables {
        run(&mut s, sql);
    }
    run(&mut s, "create table t_gone (a int primary key)");
    run(&mut s, "drop table t_gone");
    run(&mut s, "insert into t_uniq (e) values ('a'), ('b'), ('c')");
    // A DDL: the auto-increment counter is in the file now.
    a.cluster
        .inner()
        .set_extra_metadata("test", "t_blob", &[0, 1, 2, 255])
        .unwrap();
    let shown: Vec<String> = tables.iter().map(|(t, _)| show_create(&mut s, t)).collect();
    let image = file_image(&a);
    let all_a: Vec<(String, u32)> = {
        let d = a.cluster.inner().dict.read();
        d.all()
            .iter()
            .map(|t| (t.def.name.clone(), t.def.id))
            .collect()
    };

    // A new cluster with the same disk objects, then the dictionary from the image.
    let b = mem_cluster();
    let mut s2 = Session::new(b.cluster.ndb("test"));
    run(&mut s2, LG);
    run(&mut s2, TS);
    let dir = a.cluster.inner().data_nodes[1].disk.fs_dir().to_path_buf();
    let loaded = load_schema(&a.fs, &dir).unwrap().unwrap();
    b.cluster
        .inner()
        .recreate_dictionary(&loaded)
        .expect("recreate");
    let all_b: Vec<(String, u32)> = {
        let d = b.cluster.inner().dict.read();
        d.all()
            .iter()
            .map(|t| (t.def.name.clone(), t.def.id))
            .collect()
    };
    assert_eq!(all_b, all_a);
    for ((t, _), before) in tables.iter().zip(&shown) {
        assert_eq!(&show_create(&mut s2, t), before, "{t}");
    }
    // The same tables, counters and next id (the disk objects' paths differ).
    let tables_only = |mut i: SchemaImage| {
        i.disk_objects.clear();
        i.last_disk_object_id = 0;
        i.encode()
    };
    assert_eq!(
        tables_only(b.cluster.inner().schema_image().unwrap()),
        tables_only(image.clone())
    );
    // The tables work: blob parts, unique index, disk columns, auto-increment.
    run(
        &mut s2,
        "insert into t_blob values (1, repeat('x', 5000), 'tt')",
    );
    run(&mut s2, "insert into t_disk values (1, 'disk', 2)");
    run(&mut s2, "insert into t_uniq (e) values ('d')");
    let e = try_run(&mut s2, "insert into t_uniq (e) values ('d')").expect_err("duplicate");
    assert_eq!(e.code, 893, "{e}");
    let max_id = match try_run(&mut s2, "select max(id) from t_uniq").unwrap() {
        SqlResult::Rows { rows, .. } => rows[0][0].clone(),
        r => panic!("{r:?}"),
    };
    assert!(
        matches!(max_id, Value::UInt(4) | Value::Int(4)),
        "auto-increment continues at 4: {max_id:?}"
    );
    // Ids are never reused: not t_gone's, not any other.
    run(&mut s2, "create table t_new (a int primary key)");
    let new_id = b.cluster.ndb("test").table("t_new").unwrap().def.id;
    assert_eq!(new_id, image.next_table_id + 1);
    assert_eq!(
        &*b.cluster
            .ndb("test")
            .table("t_blob")
            .unwrap()
            .extra_metadata,
        &[0, 1, 2, 255]
    );
    assert!(b.cluster.inner().recreate_dictionary(&loaded).is_err());
}

#[test]
fn damaged_and_inconsistent_files_are_refused() {
    let setup = mem_cluster();
    let mut s = Session::new(setup.cluster.ndb("test"));
    run(&mut s, LG);
    run(&mut s, TS);
    run(
        &mut s,
        "create table t (id int primary key, b text, u int, unique key (u), d int storage disk) tablespace ts_1",
    );
    let good = file_image(&setup);
    let bytes = good.encode();
    for i in (0..bytes.len()).step_by(7) {
        let mut b = bytes.clone();
        b[i] ^= 0x21;
        assert_eq!(
            SchemaImage::decode(&b).unwrap_err().code,
            2316,
            "flip at {i}"
        );
        assert_eq!(SchemaImage::decode(&bytes[..i]).unwrap_err().code, 2316);
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for len in [0usize, 3, 20, 21, 100, 1000] {
        let b: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(SchemaImage::decode(&b).unwrap_err().code, 2316);
    }
    // Well-framed but inconsistent images.
    let mut orphan = good.clone();
    orphan.tables.retain(|t| t.owner.is_some());
    assert_eq!(
        SchemaImage::decode(&orphan.encode()).unwrap_err().code,
        2316
    );
    let mut lost = good.clone();
    lost.tables
        .retain(|t| !matches!(t.owner, Some(HiddenOwner::UniqueIndex { .. })));
    assert_eq!(SchemaImage::decode(&lost.encode()).unwrap_err().code, 2316);
    let mut reused = good.clone();
    reused.next_table_id = 1;
    assert_eq!(
        SchemaImage::decode(&reused.encode()).unwrap_err().code,
        2316
    );
    let mut no_group = good.clone();
    no_group.disk_objects.remove(0);
    assert_eq!(
        SchemaImage::decode(&no_group.encode()).unwrap_err().code,
        2316
    );
    // A damaged file on disk: load_schema names it.
    let path = setup.cluster.inner().data_nodes[0]
        .disk
        .fs_dir()
        .join(SCHEMA_FILE);
    assert!(setup.fs.corrupt_byte(&path, 40));
    let e = load_schema(&setup.fs, setup.cluster.inner().data_nodes[0].disk.fs_dir()).unwrap_err();
    assert_eq!(e.code, 2316);
    assert!(e.message.contains("P0.SchemaLog"), "{e}");
}

#[test]
fn real_files_in_the_data_directory_and_none_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::config::ClusterConfig::embedded(1, 1).unwrap();
    let c = Cluster::embedded_in(cfg.clone(), dir.path().to_path_buf()).unwrap();
    let mut s = Session::new(c.ndb("test"));
    run(&mut s, "create table t (a int primary key, b varchar(20))");
    let fs_dir = c.inner().data_nodes[0].disk.fs_dir().to_path_buf();
    assert!(fs_dir.join("D1/DBDICT/P0.SchemaLog").is_file());
    let img = load_schema(&OsFileSystem, &fs_dir).unwrap().unwrap();
    assert_eq!(names(&img), vec!["t".to_string()]);
    c.shutdown();
    drop(s);
    drop(c);
    // A restart on the same directory (a system restart) recreates the table from it.
    let c2 = Cluster::embedded_in(cfg.clone(), dir.path().to_path_buf()).unwrap();
    assert!(c2.inner().restart.lock().is_some(), "a system restart");
    assert_eq!(
        c2.ndb("test").table("t").unwrap().def.id,
        img.tables[0].def.id
    );
    // An initial start removes it.
    assert!(remove_schema_file(&OsFileSystem, &fs_dir).unwrap());
    assert!(load_schema(&OsFileSystem, &fs_dir).unwrap().is_none());
    assert!(!remove_schema_file(&OsFileSystem, &fs_dir).unwrap());
    // A cluster without a data directory writes no schema file.
    let scratch = Cluster::embedded(cfg).unwrap();
    let mut s = Session::new(scratch.ndb("test"));
    run(&mut s, "create table t (a int primary key)");
    let sdir = scratch.inner().data_nodes[0].disk.fs_dir().to_path_buf();
    assert!(!sdir.join(SCHEMA_FILE).exists());
}

#[test]
fn truncate_keeps_what_show_create_table_prints() {
    // The SQL layer's metadata (comment, DEFAULT CURRENT_TIMESTAMP) is keyed by table
    // id; TRUNCATE's new id must carry it.
    let setup = mem_cluster();
    let mut s = Session::new(setup.cluster.ndb("test"));
    run(
        &mut s,
        "create table tm (id int primary key, f datetime default current_timestamp) comment='hello'",
    );
    let before = show_create(&mut s, "tm");
    let id = setup.cluster.ndb("test").table("tm").unwrap().def.id;
    run(&mut s, "truncate table tm");
    assert_ne!(setup.cluster.ndb("test").table("tm").unwrap().def.id, id);
    assert_eq!(show_create(&mut s, "tm"), before);
}

#[test]
fn a_failed_write_undoes_disk_ddl_on_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let mem = MemFileSystem::new();
    let cfg = crate::config::small_disk_test_config(2, 2, "32M");
    let c = Cluster::embedded_on(cfg, dir.path().to_path_buf(), Arc::new(mem.clone())).unwrap();
    let inner = c.inner().clone();
    let mut s = Session::new(c.ndb("test"));
    let has_file = |name: &str| mem.paths().iter().any(|p| p.ends_with(name));
    // Schema-file writes fail on demand; every other file works.
    let fail = |on: bool| {
        mem.set_faults(Faults {
            fail_writes: on,
            only_paths_containing: Some(SCHEMA_FILE.into()),
            ..Faults::default()
        })
    };

    fail(true);
    assert_eq!(try_run(&mut s, LG).unwrap_err().code, 1509);
    assert!(inner.disk_dict.lock().logfile_group.is_none());
    assert!(
        inner
            .data_nodes
            .iter()
            .all(|n| n.disk.logfile_group().is_none())
    );
    assert!(!has_file("undo1.dat"));
    fail(false);
    run(&mut s, LG);

    fail(true);
    assert_eq!(try_run(&mut s, TS).unwrap_err().code, 1509);
    assert!(inner.disk_dict.lock().tablespace("ts_1").is_none());
    assert!(
        inner
            .data_nodes
            .iter()
            .all(|n| n.disk.tsman.lookup("ts_1").is_none())
    );
    assert!(!has_file("data1.dat"));
    fail(false);
    run(&mut s, TS);

    let add = "ALTER TABLESPACE ts_1 ADD DATAFILE 'data2.dat' INITIAL_SIZE 4M ENGINE NDB";
    fail(true);
    assert_eq!(try_run(&mut s, add).unwrap_err().code, 1509);
    assert!(!has_file("data2.dat"));
    assert_eq!(
        inner
            .disk_dict
            .lock()
            .tablespace("ts_1")
            .unwrap()
            .data_files
            .len(),
        1
    );
    // A drop writes first: a failed write drops nothing.
    let drop_file = "ALTER TABLESPACE ts_1 DROP DATAFILE 'data1.dat' ENGINE NDB";
    assert_eq!(try_run(&mut s, drop_file).unwrap_err().code, 1509);
    assert!(has_file("data1.dat"));
    fail(false);
    let img = file_image_of(&c, &mem);
    assert_eq!(img.disk_objects().len(), 2);
    run(&mut s, add);
    run(&mut s, drop_file);
    assert!(!has_file("data1.dat"));
}

#[test]
fn sql_metadata_survives_a_system_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::config::ClusterConfig::embedded(1, 1).unwrap();
    let ddl = "create table tm (id int primary key using hash, \
               at timestamp default current_timestamp on update current_timestamp, \
               note varchar(20) comment 'a note') \
               default charset=latin1 comment='metadata table' auto_increment=50";
    let before = {
        let c = Cluster::embedded_in(cfg.clone(), dir.path().to_path_buf()).unwrap();
        let mut s = Session::new(c.ndb("test"));
        run(&mut s, ddl);
        let before = show_create(&mut s, "tm");
        c.shutdown();
        before
    };
    assert!(before.contains("COMMENT='metadata table'"), "{before}");
    let c = Cluster::embedded_in(cfg, dir.path().to_path_buf()).unwrap();
    assert!(c.inner().restart.lock().is_some());
    let mut s = Session::new(c.ndb("test"));
    assert_eq!(show_create(&mut s, "tm"), before);
    // DEFAULT CURRENT_TIMESTAMP still fills the column
    run(&mut s, "insert into tm (id, note) values (1, 'x')");
    match try_run(&mut s, "select at from tm where id = 1").unwrap() {
        SqlResult::Rows { rows, .. } => assert!(!rows[0][0].is_null(), "{rows:?}"),
        r => panic!("{r:?}"),
    }
}
