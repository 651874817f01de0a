//! `rndbd`: a data node process of a distributed cluster (see `rndb_shell::daemons`).

fn main() {
    std::process::exit(rndb_shell::daemons::main_ndbd());
}
