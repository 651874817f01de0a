//! Disk-data DDL: CREATE/ALTER/DROP LOGFILE GROUP and TABLESPACE, with NDB's syntax
//! (MySQL 8.0's grammar for the NDB engine: `ADD UNDOFILE`, `ADD DATAFILE`,
//! `USE LOGFILE GROUP`, `INITIAL_SIZE [=] 16M`, `UNDO_BUFFER_SIZE`, `EXTENT_SIZE`,
//! `AUTOEXTEND_SIZE`, `MAX_SIZE`, `NODEGROUP`, `WAIT`, `COMMENT`, `ENGINE [=] NDB`).
//!
//! Sizes are numbers with an optional K/M/G/T suffix (`20G`, `128M`, `1048576`). Options
//! NDB accepts and ignores (`REDO_BUFFER_SIZE`, `NODEGROUP`, `WAIT`, `COMMENT`) are
//! accepted and ignored here too. Defaults are applied by the dictionary, not here
//! (`None` = not given).

use super::{Command, P};
use crate::api::disk::DiskOp;
use crate::error::Result;
use crate::sql::errors;
use crate::sql::lexer::Tok;

/// Options of the statements, as written.
#[derive(Default)]
struct Opts {
    initial_size: Option<u64>,
    undo_buffer_size: Option<u64>,
    extent_size: Option<u64>,
    autoextend_size: Option<u64>,
    max_size: Option<u64>,
}

/// `16M` -> 16 * 2^20. Suffixes K, M, G, T (case-insensitive), as MySQL's size option.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1u64 << 20),
        'G' => (&t[..t.len() - 1], 1u64 << 30),
        'T' => (&t[..t.len() - 1], 1u64 << 40),
        _ => (t, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

impl P<'_> {
    /// A size: a number, a number with a suffix (lexed as a word), or a quoted string.
    fn size(&mut self) -> Result<u64> {
        self.opt_eq();
        let v = match self.peek().map(|t| &t.tok) {
            Some(Tok::Num(n)) | Some(Tok::Word(n)) | Some(Tok::Str(n)) => parse_size(n),
            _ => None,
        };
        match v {
            Some(v) => {
                self.i += 1;
                Ok(v)
            }
            None => Err(self.err()),
        }
    }

    /// The options after the file name, up to the end of the statement.
    fn disk_options(&mut self, allowed: &[&str]) -> Result<Opts> {
        let mut o = Opts::default();
        while self.peek().is_some() {
            let Some(kw) = self.peek().and_then(|t| t.kw()) else {
                return Err(self.err());
            };
            if !allowed.contains(&kw.as_str())
                && !matches!(kw.as_str(), "ENGINE" | "STORAGE" | "WAIT" | "COMMENT")
            {
                return Err(self.err());
            }
            self.i += 1;
            match kw.as_str() {
                "INITIAL_SIZE" => o.initial_size = Some(self.size()?),
                "UNDO_BUFFER_SIZE" => o.undo_buffer_size = Some(self.size()?),
                "EXTENT_SIZE" => o.extent_size = Some(self.size()?),
                "AUTOEXTEND_SIZE" => o.autoextend_size = Some(self.size()?),
                "MAX_SIZE" => o.max_size = Some(self.size()?),
                "REDO_BUFFER_SIZE" => {
                    self.size()?;
                }
                "NODEGROUP" => {
                    self.opt_eq();
                    self.number()?;
                }
                "WAIT" => {}
                "COMMENT" => {
                    self.opt_eq();
                    self.string()?;
                }
                "STORAGE" | "ENGINE" => {
                    if kw == "STORAGE" {
                        self.expect_kw("ENGINE")?;
                    }
                    self.opt_eq();
                    let engine = self.name_or_string()?;
                    if !matches!(engine.to_ascii_uppercase().as_str(), "NDB" | "NDBCLUSTER") {
                        return Err(errors::app(
                            1478,
                            format!(
                                "Table storage engine '{engine}' does not support the create option 'TABLESPACE or LOGFILE GROUP'"
                            ),
                        ));
                    }
                }
                _ => return Err(self.err_at(self.i - 1)),
            }
        }
        Ok(o)
    }

    /// After CREATE: `LOGFILE GROUP ...` or `TABLESPACE ...`.
    pub(super) fn create_disk(&mut self) -> Result<Command> {
        if self.eat_kw("LOGFILE") {
            self.expect_kw("GROUP")?;
            let name = self.ident()?;
            self.expect_kw("ADD")?;
            self.expect_kw("UNDOFILE")?;
            let undo_file = self.string()?;
            let o = self.disk_options(&[
                "INITIAL_SIZE",
                "UNDO_BUFFER_SIZE",
                "REDO_BUFFER_SIZE",
                "NODEGROUP",
            ])?;
            return Ok(Command::Disk(DiskOp::CreateLogfileGroup {
                name,
                undo_file,
                initial_size: o.initial_size,
                undo_buffer_size: o.undo_buffer_size,
            }));
        }
        if self.peek_kw("UNDO") {
            return Err(errors::unsupported("UNDO TABLESPACE (an InnoDB object)"));
        }
        self.expect_kw("TABLESPACE")?;
        let name = self.ident()?;
        self.expect_kw("ADD")?;
        self.expect_kw("DATAFILE")?;
        let data_file = self.string()?;
        self.expect_kw("USE")?;
        self.expect_kw("LOGFILE")?;
        self.expect_kw("GROUP")?;
        let logfile_group = self.ident()?;
        let o = self.disk_options(&[
            "INITIAL_SIZE",
            "EXTENT_SIZE",
            "AUTOEXTEND_SIZE",
            "MAX_SIZE",
            "NODEGROUP",
        ])?;
        Ok(Command::Disk(DiskOp::CreateTablespace {
            name,
            data_file,
            logfile_group,
            initial_size: o.initial_size,
            extent_size: o.extent_size,
            autoextend_size: o.autoextend_size,
            max_size: o.max_size,
        }))
    }

    /// After ALTER: `LOGFILE GROUP lg ADD UNDOFILE ...` or `TABLESPACE ts ADD|DROP
    /// DATAFILE ...`.
    pub(super) fn alter_disk(&mut self) -> Result<Command> {
        if self.eat_kw("LOGFILE") {
            self.expect_kw("GROUP")?;
            let group = self.ident()?;
            self.expect_kw("ADD")?;
            self.expect_kw("UNDOFILE")?;
            let undo_file = self.string()?;
            let o = self.disk_options(&["INITIAL_SIZE"])?;
            return Ok(Command::Disk(DiskOp::AddUndofile {
                group,
                undo_file,
                initial_size: o.initial_size,
            }));
        }
        if self.peek_kw("UNDO") {
            return Err(errors::unsupported("UNDO TABLESPACE (an InnoDB object)"));
        }
        self.expect_kw("TABLESPACE")?;
        let tablespace = self.ident()?;
        if self.eat_kw("DROP") {
            self.expect_kw("DATAFILE")?;
            let data_file = self.string()?;
            self.disk_options(&[])?;
            return Ok(Command::Disk(DiskOp::DropDatafile {
                tablespace,
                data_file,
            }));
        }
        self.expect_kw("ADD")?;
        self.expect_kw("DATAFILE")?;
        let data_file = self.string()?;
        let o = self.disk_options(&["INITIAL_SIZE"])?;
        Ok(Command::Disk(DiskOp::AddDatafile {
            tablespace,
            data_file,
            initial_size: o.initial_size,
        }))
    }

    /// After DROP: `LOGFILE GROUP lg` or `TABLESPACE ts`.
    pub(super) fn drop_disk(&mut self) -> Result<Command> {
        if self.eat_kw("LOGFILE") {
            self.expect_kw("GROUP")?;
            let name = self.ident()?;
            self.disk_options(&[])?;
            return Ok(Command::Disk(DiskOp::DropLogfileGroup { name }));
        }
        if self.peek_kw("UNDO") {
            return Err(errors::unsupported("UNDO TABLESPACE (an InnoDB object)"));
        }
        self.expect_kw("TABLESPACE")?;
        let name = self.ident()?;
        self.disk_options(&[])?;
        Ok(Command::Disk(DiskOp::DropTablespace { name }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer;

    fn cmd(sql: &str) -> Result<Command> {
        let st = lexer::statements(sql).into_iter().next().unwrap()?;
        super::super::parse(&st).map(|c| c.unwrap())
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("20G"), Some(20 << 30));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn the_seed_statements_parse() {
        assert_eq!(
            cmd("CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=20G UNDO_BUFFER_SIZE=128M ENGINE=NDB").unwrap(),
            Command::Disk(DiskOp::CreateLogfileGroup {
                name: "lg".into(),
                undo_file: "undo1.dat".into(),
                initial_size: Some(20 << 30),
                undo_buffer_size: Some(128 << 20),
            })
        );
        assert_eq!(
            cmd("ALTER LOGFILE GROUP lg ADD UNDOFILE 'undo_2.dat' INITIAL_SIZE 256M ENGINE NDB")
                .unwrap(),
            Command::Disk(DiskOp::AddUndofile {
                group: "lg".into(),
                undo_file: "undo_2.dat".into(),
                initial_size: Some(256 << 20),
            })
        );
        assert_eq!(
            cmd("CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=256M ENGINE=NDB").unwrap(),
            Command::Disk(DiskOp::CreateTablespace {
                name: "ts_1".into(),
                data_file: "data1.dat".into(),
                logfile_group: "lg".into(),
                initial_size: Some(256 << 20),
                extent_size: None,
                autoextend_size: None,
                max_size: None,
            })
        );
        assert_eq!(
            cmd("CREATE TABLESPACE ts ADD DATAFILE 'd.dat' USE LOGFILE GROUP lg EXTENT_SIZE 256K INITIAL_SIZE 4M AUTOEXTEND_SIZE=8M MAX_SIZE=64M ENGINE NDBCLUSTER").unwrap(),
            Command::Disk(DiskOp::CreateTablespace {
                name: "ts".into(),
                data_file: "d.dat".into(),
                logfile_group: "lg".into(),
                initial_size: Some(4 << 20),
                extent_size: Some(256 << 10),
                autoextend_size: Some(8 << 20),
                max_size: Some(64 << 20),
            })
        );
        assert_eq!(
            cmd(
                "ALTER TABLESPACE ts_1 ADD DATAFILE 'data_2.dat' INITIAL_SIZE 48M ENGINE NDBCLUSTER"
            )
            .unwrap(),
            Command::Disk(DiskOp::AddDatafile {
                tablespace: "ts_1".into(),
                data_file: "data_2.dat".into(),
                initial_size: Some(48 << 20),
            })
        );
        assert_eq!(
            cmd("ALTER TABLESPACE ts_1 DROP DATAFILE 'data_2.dat' ENGINE NDB").unwrap(),
            Command::Disk(DiskOp::DropDatafile {
                tablespace: "ts_1".into(),
                data_file: "data_2.dat".into(),
            })
        );
        assert_eq!(
            cmd("DROP TABLESPACE ts_1 ENGINE=NDB").unwrap(),
            Command::Disk(DiskOp::DropTablespace {
                name: "ts_1".into()
            })
        );
        assert_eq!(
            cmd("DROP LOGFILE GROUP lg ENGINE NDB").unwrap(),
            Command::Disk(DiskOp::DropLogfileGroup { name: "lg".into() })
        );
    }

    #[test]
    fn bad_disk_ddl_is_a_syntax_error_or_names_the_engine() {
        assert_eq!(
            cmd("CREATE TABLESPACE ts ADD DATAFILE 'd' INITIAL_SIZE 1M")
                .unwrap_err()
                .mysql_code,
            (1064),
            "USE LOGFILE GROUP is required"
        );
        assert_eq!(
            cmd("CREATE LOGFILE GROUP lg ADD UNDOFILE 'u' INITIAL_SIZE=12Q")
                .unwrap_err()
                .mysql_code,
            (1064)
        );
        assert_eq!(
            cmd("CREATE LOGFILE GROUP lg ADD UNDOFILE 'u' EXTENT_SIZE=1M")
                .unwrap_err()
                .mysql_code,
            (1064)
        );
        assert_eq!(
            cmd("CREATE TABLESPACE ts ADD DATAFILE 'd' USE LOGFILE GROUP lg ENGINE=InnoDB")
                .unwrap_err()
                .mysql_code,
            (1478)
        );
    }
}
