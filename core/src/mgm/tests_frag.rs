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

/// `ndbinfo.memoryusage` (what REPORT MEMORYUSAGE prints) per node equals the pages
/// every fragment replica on the node holds: Data = fixed + var + ordered index pages,
/// Index = hash index pages.
fn assert_memory_usage_exact(c: &Cluster, stage: &str) {
    let (names, rows) = crate::ndbinfo::lookup(c.inner(), "ndbinfo", "memoryusage")
        .expect("table")
        .expect("rows");
    let at = |n: &str| names.iter().position(|x| x == n).expect(n);
    let (ni, ti, ui) = (at("node_id"), at("memory_type"), at("used_pages"));
    for n in &c.inner().data_nodes {
        let (mut data, mut index) = (0u64, 0u64);
        for t in c.inner().dict.read().all() {
            for cell in t.all_cells().filter(|cell| cell.node_id == n.node_id) {
                let m = cell.state.lock().memory();
                data += u64::from(m.fixed_pages) + u64::from(m.var_pages);
                data += m.ordered.iter().map(|o| u64::from(o.1)).sum::<u64>();
                index += u64::from(m.hash_pages);
            }
        }
        let used = |ty: &str| {
            rows.iter()
                .find(|r| {
                    r[ni] == Value::UInt(u64::from(n.node_id)) && r[ti] == Value::Str(ty.into())
                })
                .map(|r| r[ui].clone())
        };
        assert_eq!(
            used("Data memory"),
            Some(Value::UInt(data)),
            "{stage}, node {}",
            n.node_id
        );
        assert_eq!(
            used("Index memory"),
            Some(Value::UInt(index)),
            "{stage}, node {}",
            n.node_id
        );
    }
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
    assert_memory_usage_exact(&c, "after the load");
    let fresh = execute(c.inner(), "2 REPORT Fragmentation").expect("report");
    assert!(fresh.starts_with("Node 2: test/def/t: "), "{fresh}");
    assert!(!fresh.contains("recommended"), "freshly loaded: {fresh}");
    sql(&mut s, "DELETE FROM t WHERE id % 3 <> 0");
    assert_memory_usage_exact(&c, "after the deletes");
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
    assert_memory_usage_exact(&c, "after OPTIMIZE TABLE");
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
