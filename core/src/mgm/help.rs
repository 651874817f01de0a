//! `HELP` and `HELP <command>`: ndb_mgm's help text for the commands rndb has, saying
//! which ones are refused and why.

/// The command list (`HELP`).
pub const GENERAL: &str = "\
---------------------------------------------------------------------------
 rndb Cluster -- Management Client -- Help
---------------------------------------------------------------------------
HELP                                   Print help text
HELP COMMAND                           Print detailed help for COMMAND(e.g. SHOW)
SHOW                                   Print information about cluster
SHUTDOWN                               Shutdown all processes in cluster
CLUSTERLOG ON [<severity>] ...         Enable Cluster logging
CLUSTERLOG OFF [<severity>] ...        Disable Cluster logging
CLUSTERLOG TOGGLE [<severity>] ...     Toggle severity filter on/off
CLUSTERLOG INFO                        Print cluster log information
<id> START                             Start a stopped data node
<id> RESTART [-n] [-i] [-a] [-f]       Restart data node (or ALL: system restart)
<id> STOP [-a] [-f]                    Stop data node (START copies it back)
ROLLING RESTART                        Restart the data nodes one at a time
ENTER SINGLE USER MODE <id>            Enter single user mode
EXIT SINGLE USER MODE                  Exit single user mode
<id> STATUS                            Print status
<id> REPORT {<report>}+                Display report for <report>
<id> DUMP 1000                         Memory usage to the cluster log
SET <Parameter>=<value>                Change a data node parameter
PURGE STALE SESSIONS                   Reset reserved nodeid's in the mgmt server

<severity> = ALERT | CRITICAL | ERROR | WARNING | INFO | DEBUG
<report>   = MEMORYUSAGE | EVENTLOG | DISKPAGEBUFFER | FRAGMENTATION
<id>       = ALL | Any database node id

For detailed help on COMMAND, use HELP COMMAND.";

/// Detailed help for one command (by its first word, or a verb after `<id>`).
pub fn topic(name: &str) -> Option<&'static str> {
    let first = name.split_whitespace().next().unwrap_or("");
    Some(match first.to_ascii_uppercase().as_str() {
        "HELP" => {
            "HELP [<command>]\n\
             Print the list of commands, or detailed help for <command> (e.g. HELP SHOW)."
        }
        "SHOW" => {
            "SHOW\n\
             Print the cluster configuration: the data nodes ([ndbd(NDB)]) with their\n\
             node group and the master mark (*), the management node ([ndb_mgmd(MGM)])\n\
             and the API slots ([mysqld(API)]), connected or not."
        }
        "STATUS" => {
            "<id> STATUS | ALL STATUS\n\
             Print the status of a node: started, starting (Last completed phase N),\n\
             single user mode; for API nodes connected or not connected."
        }
        "REPORT" => {
            "<id> REPORT <report> | ALL REPORT <report>\n\
             <report> = MemoryUsage | EventLog | DiskPageBuffer | Fragmentation\n\
             (case-insensitive, any unique prefix: MEM, DISKP, FRAG)\n\
             MemoryUsage:    Data and Index usage of DataMemory, in 32K pages.\n\
             EventLog:       the events the cluster log keeps in memory for the node.\n\
             DiskPageBuffer: the DiskPageBufferMemory page cache (size, pages used and\n\
                             dirty, hit ratio, page requests, pages read) and the\n\
                             predicted hit ratio at other sizes (16M to 2G and the\n\
                             current size), as ndbinfo.diskpagebuffer_advice.\n\
             Fragmentation:  per table, the DataMemory pages and extents its fragments\n\
                             hold on the node, how much is free, what OPTIMIZE TABLE\n\
                             would give back, and whether it is recommended (as the\n\
                             reclaimable_* columns of ndbinfo.memory_per_fragment)."
        }
        "DUMP" => {
            "<id> DUMP <code> [<arg>...] | ALL DUMP <code>\n\
             Send a dump signal. Supported: 1000 (memory usage to the cluster log)."
        }
        "CLUSTERLOG" => {
            "CLUSTERLOG ON|OFF|TOGGLE [<severity>...] | CLUSTERLOG INFO\n\
             Turn the cluster log on or off, or enable/disable severities\n\
             (ALERT CRITICAL ERROR WARNING INFO DEBUG; INFO and up by default).\n\
             The log is ndb_<mgm id>_cluster.log in the data directory; the last 1000\n\
             events are also kept in memory (ALL REPORT EventLog)."
        }
        "ENTER" | "SINGLE" => {
            "ENTER SINGLE USER MODE <api node id>\n\
             Only the given API node may run transactions and change the schema;\n\
             the others get error 299 (Operation not allowed due to single user mode).\n\
             SHOW and ALL STATUS list the API node ids."
        }
        "EXIT" => {
            "EXIT SINGLE USER MODE\n\
             Give every API node access again. (EXIT alone, like QUIT, leaves the client.)"
        }
        "SHUTDOWN" => {
            "SHUTDOWN\n\
             Shut down every data node and the management server: the embedded cluster\n\
             stops and the client exits. With a data directory (the default) what was\n\
             committed is recovered at the next start (a system restart); without one\n\
             it is lost."
        }
        "START" => {
            "<id> START\n\
             Start a stopped data node (STOP, or RESTART -n): its data is copied back\n\
             from the live replicas while the cluster serves; ALL STATUS shows it\n\
             starting until it is started (with a data directory, until the local\n\
             checkpoint after the copy is saved: its own files restore it from then on).\n\
             ALL START after ALL STOP or ALL RESTART -n: the system restart."
        }
        "STOP" => {
            "<id> STOP [-a] [-f]\n\
             Stop a data node: its replicas are left out and the partitions go on\n\
             with the others; the last live node of a node group is refused. START\n\
             brings it back when rndb_mgm runs the cluster in its own process (an\n\
             rndbd process that stopped is started again by hand, as ndbd). ALL STOP\n\
             (rndb_mgm, with a data directory) stops every data node until ALL START,\n\
             a system restart. SHUTDOWN stops the whole cluster and this client."
        }
        "RESTART" => {
            "<id> RESTART [-n] [-i] [-a] [-f] | ALL RESTART [...]\n\
             -n  do not start again until START   -i  initial (wipe the node's files)\n\
             -a  abort transactions at once        -f  force, even if the cluster stops\n\
             A node restart copies the node's data back from its live peers while\n\
             the cluster serves.\n\
             ALL RESTART (system restart) in rndb_mgm: every node stops and recovers\n\
             what it saved in the data directory. ALL RESTART -i (initial): every\n\
             node starts again empty, with the configuration changed by SET, and the\n\
             data and undo files the earlier run created are removed and listed.\n\
             ALL RESTART -n: the nodes wait for ALL START."
        }
        "ROLLING" => {
            "ROLLING RESTART\n\
             Restart the data nodes one at a time, each waited for until started (its\n\
             data copied back while the others serve), applying SET DataMemory.\n\
             Refused with a data directory for now."
        }
        "SET" => {
            "SET <Parameter>=<value>\n\
             Change a data node parameter (config.ini name and syntax, e.g.\n\
             SET DiskPageBufferMemory=512M) on every data node, checked like config.ini.\n\
             Says whether applying it needs a rolling or initial restart; parameters\n\
             that need none (TransactionDeadlockDetectionTimeout) take effect at once."
        }
        "PURGE" => {
            "PURGE STALE SESSIONS\n\
             Release node ids reserved by clients that went away."
        }
        _ => return None,
    })
}
