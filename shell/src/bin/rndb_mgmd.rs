//! `rndb_mgmd`: the management server of a distributed cluster (see `rndb_shell::mgmd`).

fn main() {
    std::process::exit(rndb_shell::daemons::main_mgmd());
}
