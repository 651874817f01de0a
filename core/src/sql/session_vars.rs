//! A session's variables as a value that travels: the user variables (`SET @x = 7`) and
//! the system variables a session set away from their defaults (`SET
//! ndb_table_no_logging = 1`). A client of data nodes over a transport keeps them
//! (`cluster::remote_session`), sends them with each statement, and a data node runs
//! the statement in a fresh [`Session`] that starts from them; what a statement assigns
//! comes back the same way. The connection-local state that is not a variable (the
//! current database, the open transaction, LAST_INSERT_ID) is not here.
//!
//! Names: a user variable as `@name`, a system variable by its name, both lower case.
//! Ordered by name (a `BTreeMap`), so the bytes on the wire do not depend on hashing.
//! Limits: at most [`MAX_SESSION_VARS`] variables, names of at most
//! [`MAX_VAR_NAME_BYTES`] bytes (MySQL's 64), each variable's value at most
//! [`MAX_VAR_VALUE_BYTES`]; beyond them a SET fails with 1231 before it takes effect.

use super::errors;
use super::{Session, Vars, sys_var_defaults};
use crate::error::Result;
use crate::schema::Value;
use std::collections::BTreeMap;

/// Variables one session may hold (user and changed system variables together).
pub const MAX_SESSION_VARS: usize = 1024;
/// A variable name's longest length, as MySQL's identifiers.
pub const MAX_VAR_NAME_BYTES: usize = 64;
/// A variable value's largest size (MySQL's max_allowed_packet default is 64 MiB; a
/// session's variables travel with each statement here, so far less).
pub const MAX_VAR_VALUE_BYTES: usize = 64 * 1024;

/// User variables and changed system variables of a session (module notes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionVars {
    vars: BTreeMap<String, Value>,
}

impl SessionVars {
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The variables, by name (`@name` for user variables).
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The variables from `(name, value)` pairs (as [`Self::pairs`] gave them),
    /// checked against the limits and the known system variables.
    pub fn from_pairs(pairs: Vec<(String, Value)>) -> Result<SessionVars> {
        if pairs.len() > MAX_SESSION_VARS {
            return Err(too_many());
        }
        let defaults = sys_var_defaults();
        let mut vars = BTreeMap::new();
        for (name, value) in pairs {
            check_size(&name, &value)?;
            let name = name.to_ascii_lowercase();
            if !name.starts_with('@') && !defaults.contains_key(&name) {
                return Err(errors::unknown_variable(&name));
            }
            vars.insert(name, value);
        }
        Ok(SessionVars { vars })
    }
}

fn too_many() -> crate::error::NdbError {
    errors::app(
        1231,
        format!(
            "a session holds at most {MAX_SESSION_VARS} variables (user variables and changed system variables)"
        ),
    )
}

fn check_size(name: &str, value: &Value) -> Result<()> {
    let bare = name.strip_prefix('@').unwrap_or(name);
    if bare.is_empty() || bare.len() > MAX_VAR_NAME_BYTES {
        return Err(errors::app(
            1231,
            format!("variable name '{name}': 1 to {MAX_VAR_NAME_BYTES} bytes"),
        ));
    }
    let bytes = match value {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 16,
    };
    if bytes > MAX_VAR_VALUE_BYTES {
        return Err(errors::app(
            1231,
            format!("variable '{name}': a value of {bytes} bytes, at most {MAX_VAR_VALUE_BYTES}"),
        ));
    }
    Ok(())
}

impl Vars {
    /// This connection's variables as [`SessionVars`].
    pub(crate) fn export(&self) -> SessionVars {
        let defaults = sys_var_defaults();
        let mut vars = BTreeMap::new();
        for (n, v) in &self.user {
            vars.insert(format!("@{}", n.to_ascii_lowercase()), v.clone());
        }
        for (n, v) in &self.sys {
            if defaults.get(n) != Some(v) {
                vars.insert(n.to_ascii_lowercase(), v.clone());
            }
        }
        SessionVars { vars }
    }

    /// Takes `vars` in: user variables replace this connection's, system variables
    /// are set (the others keep their values).
    pub(crate) fn import(&mut self, vars: &SessionVars) {
        self.user.clear();
        for (n, v) in &vars.vars {
            match n.strip_prefix('@') {
                Some(user) => {
                    self.user.insert(user.to_string(), v.clone());
                }
                None => {
                    self.sys.insert(n.clone(), v.clone());
                }
            }
        }
    }
}

impl Session {
    /// The session's user variables and changed system variables.
    pub fn session_vars(&self) -> SessionVars {
        self.vars.export()
    }

    /// Starts from `vars` (a client's session, sent with a statement).
    pub fn set_session_vars(&mut self, vars: &SessionVars) {
        self.vars.import(vars);
    }

    /// The variables after a statement, checked against the limits (1231 when a SET
    /// went past them).
    pub fn checked_session_vars(&self) -> Result<SessionVars> {
        let vars = self.vars.export();
        if vars.vars.len() > MAX_SESSION_VARS {
            return Err(too_many());
        }
        for (n, v) in &vars.vars {
            check_size(n, v)?;
        }
        Ok(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::tests::{cluster, rows, run, session};

    #[test]
    fn variables_go_from_one_session_to_another() {
        let c = cluster(1, 1, "16M");
        let mut a = session(&c);
        run(&mut a, "SET @X = 7, @s = 'text', ndb_table_no_logging = 1");
        run(&mut a, "SET ndb_use_exact_count = 0");
        let vars = a.session_vars();
        let names: Vec<&str> = vars.pairs().map(|(n, _)| n).collect();
        // ndb_use_exact_count is at its default: not carried.
        assert_eq!(names, ["@s", "@x", "ndb_table_no_logging"]);
        let mut b = session(&c);
        b.set_session_vars(&vars);
        assert_eq!(
            rows(&mut b, "SELECT @x, @s, @@ndb_table_no_logging, @nothing"),
            [["7", "text", "1", "NULL"]]
        );
        // Through pairs, as on the wire.
        let pairs = vars
            .pairs()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        assert_eq!(SessionVars::from_pairs(pairs).expect("valid"), vars);
        c.shutdown();
    }

    #[test]
    fn limits_and_unknown_names_are_errors() {
        let e = SessionVars::from_pairs(vec![("frob".into(), Value::Int(1))]).expect_err("unknown");
        assert_eq!(e.mysql_code, 1193);
        let many = (0..=MAX_SESSION_VARS)
            .map(|i| (format!("@v{i}"), Value::Int(1)))
            .collect();
        assert_eq!(
            SessionVars::from_pairs(many)
                .expect_err("too many")
                .mysql_code,
            1231
        );
        let long = vec![("@x".into(), Value::Str("a".repeat(MAX_VAR_VALUE_BYTES + 1)))];
        assert_eq!(
            SessionVars::from_pairs(long)
                .expect_err("too big")
                .mysql_code,
            1231
        );
        let c = cluster(1, 1, "16M");
        let mut a = session(&c);
        run(
            &mut a,
            &format!("SET @big = REPEAT('a', {})", MAX_VAR_VALUE_BYTES + 1),
        );
        assert_eq!(
            a.checked_session_vars().expect_err("too big").mysql_code,
            1231
        );
        c.shutdown();
    }
}
