//! Tests of `REPORT Fragmentation` (grammar, figures against OPTIMIZE TABLE's own
//! result and against `ndbinfo.memory_per_fragment`'s reclaimable columns).

use super::*;
use crate::api::Cluster;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::sql::{Session, SqlResult};

fn sql(s: &mut Session, text: &str) -> Vec<SqlResult> {
    s.execute(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Sum of one memory_per_fragment column over the rows of `fq_name` on node `node`.
fn column_sum(c: &crate::api::ClusterInner, col: &str, fq_name: &str, node: u32) -> u64 {
    let (names, rows) = crate::ndbinfo::lookup(c, "ndbinfo", "memory_per_fragment")
        .expect("table")
        .expect("rows");
    let at = |n: &str| names.iter().position(|x| x == n).expect(n);
    let (ci, fi, pi, ni) = (at(col), at("fq_name"), at("parent_fq_name"), at("node_id"));
    rows.iter()
        .filter(|r| {
            (r[fi] == Value::Str(fq_name.into()) || r[pi] == Value::Str(fq_name.into()))
                && r[ni] == Value::UInt(u64::from(node))
        })
        .map(|r| match r[ci] {
            Value::UInt(v) => v,
            ref other => panic!("{col}: {other:?}"),
        })
        .sum()
}

#[test]
fn report_fragmentation_grammar() {
    for text in ["ALL REPORT Fragmentation", "all report FRAG", "2 REPORT f"] {
        let p = parse(text).expect(text);
        assert!(
            matches!(p, Some(Command::Report(_, Report::Fragmentation))),
            "{text}: {p:?}"
        );
    }
    assert!(help::GENERAL.contains("FRAGMENTATION"));
    assert!(help::topic("REPORT").is_some_and(|t| t.contains("Fragmentation:")));
}

#[test]
fn report_fragmentation_recommends_optimize_and_agrees_with_it() {
    let mut cfg = ClusterConfig::embedded(2, 2).expect("config");
    cfg.set_data_node_param("DataMemory", "64M").expect("dm");
    let c = Cluster::embedded(cfg).expect("start");
    let mut s = Session::new(c.ndb("test"));
    let empty = execute(c.inner(), "ALL REPORT Fragmentation").expect("report");
    assert_eq!(
        empty,
        "Node 2: no table holds pages on this node\nNode 3: no table holds pages on this node"
    );
    sql(
        &mut s,
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(200), INDEX ix_a (a)) ENGINE=NDB",
    );
    for chunk in (0..20_000i64).collect::<Vec<_>>().chunks(500) {
        let v: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, {}, '{}')", i % 97, "x".repeat((i % 150) as usize)))
            .collect();
        sql(&mut s, &format!("INSERT INTO t VALUES {}", v.join(",")));
    }
    let fresh = execute(c.inner(), "2 REPORT Fragmentation").expect("report");
    assert!(fresh.starts_with("Node 2: test/def/t: "), "{fresh}");
    assert!(!fresh.contains("recommended"), "freshly loaded: {fresh}");
    sql(&mut s, "DELETE FROM t WHERE id % 3 <> 0");
    let before = frag_report::fragmentation(c.inner(), 2);
    let t = before
        .iter()
        .find(|(n, _)| n == "test/def/t")
        .map(|x| x.1)
        .expect("t in the report");
    assert!(
        t.recommended() && t.reclaimable_pages > t.pages() / 3,
        "{t:?}"
    );
    let text = execute(c.inner(), "ALL REPORT FRAG").expect("report");
    let line = text
        .lines()
        .find(|l| l.starts_with("Node 2: test/def/t: "))
        .expect("line");
    assert!(
        line.ends_with(&format!(
            "OPTIMIZE TABLE would give back {} pages ({:.1} MB): recommended",
            t.reclaimable_pages,
            (t.reclaimable_pages * 32768) as f64 / 1048576.0
        )),
        "{line}"
    );
    assert!(text.contains("Node 3: test/def/t: "), "{text}");
    // ndbinfo's reclaimable columns say the same.
    let cols = column_sum(c.inner(), "reclaimable_fixed_bytes", "test/def/t", 2)
        + column_sum(c.inner(), "reclaimable_var_bytes", "test/def/t", 2);
    assert_eq!(cols, t.reclaimable_pages * 32768);
    // OPTIMIZE gives back at least what the report promised, and the recommendation goes.
    sql(&mut s, "SET ndb_optimization_delay = 0");
    sql(&mut s, "OPTIMIZE TABLE t");
    let after = frag_report::fragmentation(c.inner(), 2);
    let a = after
        .iter()
        .find(|(n, _)| n == "test/def/t")
        .map(|x| x.1)
        .expect("t");
    assert!(
        t.pages() - a.pages() >= t.reclaimable_pages,
        "{t:?} -> {a:?}"
    );
    assert!(!a.recommended(), "{a:?}");
    assert!(a.reclaimable_pages * 100 <= a.pages() * 5, "{a:?}");
}
