//! The disk objects of a [`DiskDict`] as the SQL that makes them anew — the logfile
//! group with its undo files, then each tablespace with its data files, in creation
//! order — for a node-restart copy, whose joining node makes the source's schema from
//! statements (`cluster::datapath::copy`).
//!
//! Every statement names its object as a backquoted identifier right after the
//! object's kind, which [`object_of`] reads back; sizes are written in bytes.

use super::disk::DiskDict;

use crate::sql::quote_ident as ident;

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl DiskDict {
    /// (object name, its statements), the logfile group first.
    pub fn create_statements(&self) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        if let Some(g) = &self.logfile_group {
            let mut stmts = Vec::new();
            for (i, f) in g.undo_files.iter().enumerate() {
                stmts.push(if i == 0 {
                    format!(
                        "CREATE LOGFILE GROUP {} ADD UNDOFILE {} INITIAL_SIZE {} UNDO_BUFFER_SIZE {} ENGINE NDB",
                        ident(&g.name),
                        literal(&f.file_name),
                        f.size_bytes,
                        g.undo_buffer_size
                    )
                } else {
                    format!(
                        "ALTER LOGFILE GROUP {} ADD UNDOFILE {} INITIAL_SIZE {} ENGINE NDB",
                        ident(&g.name),
                        literal(&f.file_name),
                        f.size_bytes
                    )
                });
            }
            out.push((g.name.clone(), stmts));
        }
        let mut spaces: Vec<_> = self.tablespaces.values().collect();
        spaces.sort_by_key(|t| t.id);
        for t in spaces {
            let mut stmts = Vec::new();
            for (i, f) in t.data_files.iter().enumerate() {
                let grow = if t.autoextend_size_bytes > 0 {
                    let max = if t.max_size_bytes > 0 {
                        format!(" MAX_SIZE {}", t.max_size_bytes)
                    } else {
                        String::new()
                    };
                    format!(" AUTOEXTEND_SIZE {}{max}", t.autoextend_size_bytes)
                } else {
                    String::new()
                };
                stmts.push(if i == 0 {
                    format!(
                        "CREATE TABLESPACE {} ADD DATAFILE {} USE LOGFILE GROUP {} EXTENT_SIZE {} INITIAL_SIZE {}{grow} ENGINE NDB",
                        ident(&t.name),
                        literal(&f.file_name),
                        ident(&t.logfile_group),
                        t.extent_size_bytes,
                        f.size_bytes
                    )
                } else {
                    format!(
                        "ALTER TABLESPACE {} ADD DATAFILE {} INITIAL_SIZE {}{grow} ENGINE NDB",
                        ident(&t.name),
                        literal(&f.file_name),
                        f.size_bytes
                    )
                });
            }
            out.push((t.name.clone(), stmts));
        }
        out
    }
}

/// The object a statement of [`DiskDict::create_statements`] makes or extends (its
/// first backquoted identifier), None for any other statement.
pub fn object_of(sql: &str) -> Option<String> {
    let upper = sql.trim_start().to_ascii_uppercase();
    let disk = [
        "CREATE LOGFILE GROUP ",
        "ALTER LOGFILE GROUP ",
        "CREATE TABLESPACE ",
        "ALTER TABLESPACE ",
    ];
    if !disk.iter().any(|p| upper.starts_with(p)) {
        return None;
    }
    let start = sql.find('`')? + 1;
    let mut name = String::new();
    let mut chars = sql[start..].chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            if chars.peek() == Some(&'`') {
                chars.next();
                name.push('`');
                continue;
            }
            return Some(name);
        }
        name.push(c);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::object_of;
    use crate::api::Cluster;
    use crate::config::ClusterConfig;
    use crate::sql::Session;

    fn cluster() -> Cluster {
        let mut cfg = ClusterConfig::embedded(1, 1).expect("config");
        cfg.set_data_node_param("DiskPageBufferMemory", "8M")
            .expect("DiskPageBufferMemory");
        Cluster::embedded(cfg).expect("start")
    }

    #[test]
    fn the_statements_make_the_same_disk_objects_on_another_cluster() {
        let a = cluster();
        let mut s = Session::new(a.ndb("test"));
        for sql in [
            "CREATE LOGFILE GROUP `lg 1` ADD UNDOFILE 'undo''1.log' INITIAL_SIZE 4M UNDO_BUFFER_SIZE 2M ENGINE NDB",
            "ALTER LOGFILE GROUP `lg 1` ADD UNDOFILE 'undo2.log' INITIAL_SIZE 2M ENGINE NDB",
            "CREATE TABLESPACE ts1 ADD DATAFILE 'ts1a.dat' USE LOGFILE GROUP `lg 1` EXTENT_SIZE 256K INITIAL_SIZE 4M ENGINE NDB",
            "ALTER TABLESPACE ts1 ADD DATAFILE 'ts1b.dat' INITIAL_SIZE 2M ENGINE NDB",
            "CREATE TABLESPACE ts2 ADD DATAFILE 'ts2.dat' USE LOGFILE GROUP `lg 1` EXTENT_SIZE 1M INITIAL_SIZE 4M AUTOEXTEND_SIZE 1M MAX_SIZE 8M ENGINE NDB",
        ] {
            s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let made = a.inner().disk_dict.lock().create_statements();
        let names: Vec<&str> = made.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lg 1", "ts1", "ts2"]);
        let b = cluster();
        let mut t = Session::new(b.ndb("test"));
        for (name, stmts) in &made {
            for sql in stmts {
                assert_eq!(object_of(sql).as_deref(), Some(name.as_str()), "{sql}");
                t.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
        assert_eq!(b.inner().disk_dict.lock().create_statements(), made);
        // A disk table on the copy's tablespace takes rows.
        t.execute("CREATE TABLE d (id INT PRIMARY KEY, v VARCHAR(20)) TABLESPACE ts1 STORAGE DISK ENGINE=NDB")
            .expect("disk table");
        t.execute("INSERT INTO d VALUES (1, 'x')").expect("insert");
        assert_eq!(object_of("CREATE TABLE d (id INT) ENGINE=NDB"), None);
        assert_eq!(object_of("CREATE DATABASE IF NOT EXISTS `x`"), None);
    }
}
