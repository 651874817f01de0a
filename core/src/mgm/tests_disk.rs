//! Tests of `REPORT DiskPageBuffer` (grammar, output against the cache's own counters and
//! advice) and of what an initial start reports.

use super::*;
use crate::api::Cluster;
use crate::config::ClusterConfig;
use crate::disk::pgman::{Intent, PageAddr};
use crate::sql::Session;

fn disk_cluster(dir: &std::path::Path, initial: bool) -> Cluster {
    let cfg = crate::config::small_disk_test_config(2, 2, "16M");
    if initial {
        Cluster::embedded_initial(cfg, dir.to_path_buf()).expect("start")
    } else {
        Cluster::embedded_in(cfg, dir.to_path_buf()).expect("start")
    }
}

fn sql(c: &Cluster, text: &str) {
    let mut s = Session::new(c.ndb("test"));
    s.execute(text).unwrap_or_else(|e| panic!("{text}: {e}"));
}

const LG: &str = "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=2M UNDO_BUFFER_SIZE=1M ENGINE=NDB";
const TS: &str = "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg INITIAL_SIZE=5M EXTENT_SIZE=1M ENGINE=NDB";

#[test]
fn report_diskpagebuffer_grammar() {
    for text in [
        "ALL REPORT DiskPageBuffer",
        "all report DISKPAGEBUFFER",
        "ALL REPORT d",
        "all report diskp",
    ] {
        assert_eq!(
            parse(text).expect(text),
            Some(Command::Report(Target::All, Report::DiskPageBuffer)),
            "{text}"
        );
    }
    assert_eq!(
        parse("2 REPORT diskp").expect("2 diskp"),
        Some(Command::Report(Target::Node(2), Report::DiskPageBuffer))
    );
    let e = parse("ALL REPORT DiskPageBufferX").expect_err("X").message;
    assert_eq!(
        e,
        "Unknown report type: DiskPageBufferX. Known reports: MemoryUsage, EventLog, DiskPageBuffer, Fragmentation"
    );
    let e = parse("ALL REPORT").expect_err("missing").message;
    assert_eq!(
        e,
        "Missing report type: ALL REPORT <report>, <report> = MemoryUsage | EventLog | DiskPageBuffer | Fragmentation"
    );
    assert!(
        help::topic("REPORT").is_some_and(|t| t.contains("DiskPageBuffer")),
        "HELP REPORT names the report"
    );
    assert!(help::GENERAL.contains("DISKPAGEBUFFER"));
}

#[test]
fn size_text_uses_the_largest_exact_unit() {
    use disk_report::size_text;
    assert_eq!(size_text(64 << 20), "64M");
    assert_eq!(size_text(1 << 30), "1G");
    assert_eq!(size_text(2 << 30), "2G");
    assert_eq!(size_text(1536 << 20), "1536M");
    assert_eq!(size_text(4096 + 1024), "5K");
    assert_eq!(size_text(1000), "1000");
    assert_eq!(
        disk_report::advice_sizes_bytes(100 << 20)
            .iter()
            .map(|b| b >> 20)
            .collect::<Vec<_>>(),
        vec![16, 32, 64, 100, 128, 256, 512, 1024, 2048]
    );
    assert_eq!(disk_report::advice_sizes_bytes(64 << 20).len(), 8);
}

#[test]
fn report_diskpagebuffer_before_any_request() {
    let c = Cluster::embedded(ClusterConfig::embedded_default()).expect("start");
    let out = execute(c.inner(), "ALL REPORT DiskPageBuffer").expect("report");
    assert_eq!(
        out,
        "Node 2: Disk page buffer 64M (2048 pages), 0 used, 0 dirty, no page requests yet (page_requests 0, pages_read 0)\n\
         Node 2: no hit ratio predictions until pages have been requested\n\
         Node 3: Disk page buffer 64M (2048 pages), 0 used, 0 dirty, no page requests yet (page_requests 0, pages_read 0)\n\
         Node 3: no hit ratio predictions until pages have been requested"
    );
    assert_eq!(
        execute(c.inner(), "3 report diskp")
            .expect("node 3")
            .lines()
            .count(),
        2
    );
    assert_eq!(
        execute(c.inner(), "9 REPORT DiskPageBuffer")
            .expect_err("no node 9")
            .code,
        5001
    );
}

#[test]
fn report_diskpagebuffer_shows_the_caches_counters_and_advice() {
    let tmp = tempfile::tempdir().expect("tmp");
    let c = disk_cluster(tmp.path(), false);
    sql(&c, LG);
    sql(&c, TS);
    let node = c.inner().node(2).expect("node 2").clone();
    let file_no = node.disk.tsman.files_info()[0].file_no;
    let pgman = &node.disk.pgman;
    // 10 pages formatted (misses), then each read back 9 times (hits).
    for page_no in 10..20 {
        drop(
            pgman
                .get(PageAddr { file_no, page_no }, Intent::Format)
                .expect("format"),
        );
    }
    for _ in 0..9 {
        for page_no in 10..20 {
            drop(
                pgman
                    .get(PageAddr { file_no, page_no }, Intent::Read)
                    .expect("read"),
            );
        }
    }
    let st = pgman.stats();
    assert_eq!(st.page_requests_wait_io, 10);
    assert_eq!(st.page_requests_direct_return, 90);
    let out = execute(c.inner(), "2 REPORT diskp").expect("report");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "Node 2: Disk page buffer 4M (128 pages), {} used, {} dirty, hit ratio 90.0% (page_requests 100, pages_read {})",
            st.resident_pages, st.dirty_pages, st.pages_read
        )
    );
    // 4M is not an advice size: it is added, marked, in order.
    let sizes = disk_report::advice_sizes_bytes(4 << 20);
    assert_eq!(lines.len(), 1 + sizes.len(), "{out}");
    let advice = pgman.advice(&sizes);
    for (line, (bytes, pct)) in lines[1..].iter().zip(&advice) {
        let mark = if *bytes == 4 << 20 {
            " (current size)"
        } else {
            ""
        };
        assert_eq!(
            *line,
            format!(
                "Node 2: predicted hit ratio at {}: {pct:.1}%{mark}",
                disk_report::size_text(*bytes)
            )
        );
    }
    assert_eq!(
        lines[1],
        format!(
            "Node 2: predicted hit ratio at 4M: {:.1}% (current size)",
            advice[0].1
        )
    );
    // ALL: node 3's cache saw nothing.
    let all = execute(c.inner(), "ALL REPORT DISKPAGEBUFFER").expect("all");
    assert!(all.starts_with(&out), "{all}");
    assert!(
        all.ends_with("Node 3: no hit ratio predictions until pages have been requested"),
        "{all}"
    );
}

#[test]
fn an_initial_start_reports_the_files_it_removed() {
    let tmp = tempfile::tempdir().expect("tmp");
    {
        let c = disk_cluster(tmp.path(), false);
        assert!(c.inner().initial_removed.is_empty());
        sql(&c, LG);
        sql(&c, TS);
        c.shutdown();
    }
    let c = disk_cluster(tmp.path(), true);
    let removed = &c.inner().initial_removed;
    assert_eq!(removed.len(), 4, "{removed:?}");
    let lines = initial_start_lines(removed);
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(
        lines[0],
        "Initial start: removed 4 files created by an earlier run (NDB leaves them behind):"
    );
    for (line, p) in lines[1..].iter().zip(removed) {
        assert_eq!(*line, format!("  {}", p.display()));
    }
    assert!(lines.iter().any(|l| l.ends_with("ndb_2_fs/undo1.dat")));
    assert!(lines.iter().any(|l| l.ends_with("ndb_3_fs/data1.dat")));
    // the cluster log has it too
    let log = execute(c.inner(), "2 REPORT EventLog").expect("log");
    assert!(
        log.contains("Initial start: removed 2 files created by an earlier run"),
        "{log}"
    );
    assert!(initial_start_lines(&[]).is_empty());
    c.shutdown();
    // a second initial start finds nothing to remove
    let c = disk_cluster(tmp.path(), true);
    assert!(c.inner().initial_removed.is_empty());
}
