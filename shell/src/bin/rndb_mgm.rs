//! `rndb_mgm`: the management client and SQL shell (see the `rndb_shell` crate).

fn main() {
    std::process::exit(rndb_shell::main_mgm());
}
