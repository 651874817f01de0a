//! The data path's failure handling with the network in the test's hands: data paths
//! of four nodes (two node groups) joined by an in-memory transport that can cut a
//! node off at a chosen message, then a view without it. A TC that dies after some
//! participants were told to commit must leave every replica committed; one that dies
//! before any was told, every replica aborted; a participant lost during the commit is
//! replaced by its backup. New work over an overloaded connection is refused with
//! 1218 and changes nothing.

use super::DataPath;
use crate::config::ClusterConfig;
use crate::schema::Value;
use crate::transport::data::{DataMsg, KeyOp, OpType};
use crate::transport::{Message, NodeId, Transport, View};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

const API: NodeId = 1000;
const DB: &str = "test";

/// Decides, per message, whether it is delivered; may cut its sender off.
type Filter = Box<dyn Fn(NodeId, NodeId, &DataMsg) -> Verdict + Send + Sync>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Deliver,
    /// Drop this message and every later one from the sender (it crashed).
    CrashSender,
}

#[derive(Default)]
struct Router {
    nodes: Mutex<BTreeMap<NodeId, Arc<DataPath>>>,
    crashed: Mutex<BTreeSet<NodeId>>,
    filter: Mutex<Option<Filter>>,
    api: Mutex<Option<SyncSender<DataMsg>>>,
    /// Connections (from, to) whose send buffers count as overloaded.
    overloaded: Mutex<BTreeSet<(NodeId, NodeId)>>,
}

struct MemTransport {
    me: NodeId,
    router: Arc<Router>,
}

impl Transport for MemTransport {
    fn send(&self, to: NodeId, msg: &Message) -> bool {
        let Message::Data(d) = msg else { return true };
        if self.router.crashed.lock().contains(&self.me) {
            return false;
        }
        if let Some(f) = self.router.filter.lock().as_ref()
            && f(self.me, to, d) == Verdict::CrashSender
        {
            self.router.crashed.lock().insert(self.me);
            return false;
        }
        if to == API {
            if let Some(tx) = self.router.api.lock().as_ref() {
                let _ = tx.try_send(d.clone());
            }
            return true;
        }
        if self.router.crashed.lock().contains(&to) {
            return false;
        }
        let target = self.router.nodes.lock().get(&to).cloned();
        match target {
            Some(dp) => {
                dp.on_message(self.me, d.clone());
                true
            }
            None => false,
        }
    }

    fn overloaded(&self, to: NodeId) -> bool {
        self.router.overloaded.lock().contains(&(self.me, to))
    }
}

fn config() -> ClusterConfig {
    let mut text = String::from("[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\n");
    text.push_str("[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n");
    for id in 2..=5 {
        text.push_str(&format!("[ndbd]\nNodeId={id}\nHostName=127.0.0.1\n"));
    }
    text.push_str("[mysqld]\n");
    ClusterConfig::parse(&text, "takeover.ini").expect("config")
}

fn view(id: u64, members: &[NodeId]) -> View {
    View {
        id,
        ticket: 1,
        members: members
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i as u32 + 1))
            .collect(),
    }
}

struct Harness {
    router: Arc<Router>,
    api: Receiver<DataMsg>,
}

impl Harness {
    fn new() -> Harness {
        let router = Arc::new(Router::default());
        let (tx, rx) = sync_channel(1024);
        *router.api.lock() = Some(tx);
        let cfg = config();
        for id in 2..=5 {
            let t = Arc::new(MemTransport {
                me: id,
                router: router.clone(),
            });
            let dp = DataPath::start(&cfg, id, 1, t).expect("data path");
            router.nodes.lock().insert(id, dp);
        }
        let h = Harness { router, api: rx };
        for dp in h.all() {
            dp.on_view(&view(1, &[2, 3, 4, 5]));
        }
        // One tick: every node pings its group and holds a read lease (the clock
        // stays at 1 ms, well inside HeartbeatIntervalDbDb).
        for dp in h.all() {
            dp.on_tick(1);
        }
        h
    }

    fn all(&self) -> Vec<Arc<DataPath>> {
        self.router.nodes.lock().values().cloned().collect()
    }

    fn node(&self, id: NodeId) -> Arc<DataPath> {
        self.router.nodes.lock()[&id].clone()
    }

    fn answer(&self) -> DataMsg {
        self.api
            .recv_timeout(Duration::from_secs(10))
            .expect("an answer to the API node")
    }

    fn sql(&self, sql: &str) {
        self.node(2).on_message(
            API,
            DataMsg::SqlReq {
                req: 1,
                database: DB.into(),
                sql: sql.into(),
            },
        );
        match self.answer() {
            DataMsg::SqlConf { code: 0, .. } => {}
            other => panic!("{sql}: {other:?}"),
        }
    }

    /// Keys whose partitions belong to each node group, from node 2's layout.
    fn keys_of_both_groups(&self) -> (i64, i64) {
        let dp = self.node(2);
        let (mut g0, mut g1) = (None, None);
        for k in 0..1000i64 {
            let p = dp.partition_of_op(&write(k, "x")).expect("partition");
            match (p % 2, g0, g1) {
                (0, None, _) => g0 = Some(k),
                (1, _, None) => g1 = Some(k),
                _ => {}
            }
            if let (Some(a), Some(b)) = (g0, g1) {
                return (a, b);
            }
        }
        panic!("no keys of both groups")
    }

    /// The value of `k` in node `id`'s local engine (None: no row).
    fn local(&self, id: NodeId, k: i64) -> Option<Value> {
        let dp = self.node(id);
        let t = dp.engine.inner().table(DB, "kv").expect("kv");
        let got = dp
            .engine
            .ndb(DB)
            .read_batch(&t, &[vec![Value::Int(k)]], &[1])
            .expect("read");
        got.into_iter().next().flatten().map(|mut r| r.remove(0))
    }

    /// The replicas of `k`'s partition (from node `from`'s layout), primary first.
    fn replicas(&self, k: i64) -> Vec<NodeId> {
        let dp = self.node(3);
        let p = dp.partition_of_op(&write(k, "x")).expect("partition");
        crate::cluster::layout::replica_nodes(p, &dp.groups)
    }

    /// Waits until every surviving replica of `k` holds `want`.
    fn wait_value(&self, k: i64, want: Option<&str>, dead: NodeId) {
        let want = want.map(|s| Value::Str(s.into()));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for n in self.replicas(k).into_iter().filter(|&n| n != dead) {
            loop {
                let got = self.local(n, k);
                if got == want {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "node {n}, key {k}: {got:?}, expected {want:?}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn stop(&self) {
        for dp in self.all() {
            dp.stop();
        }
    }
}

fn write(k: i64, v: &str) -> KeyOp {
    KeyOp {
        op: OpType::Write,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(k)],
        values: vec![(1, Value::Str(v.into()))],
        columns: Vec::new(),
    }
}

fn begin(h: &Harness, tc: NodeId, ops: Vec<KeyOp>) {
    h.node(tc)
        .on_message(API, DataMsg::TcKeyReq { req: 7, ops });
}

fn setup() -> (Harness, i64, i64) {
    let h = Harness::new();
    h.sql("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(16)) ENGINE=NDB");
    let (a, b) = h.keys_of_both_groups();
    begin(&h, 2, vec![write(a, "v0"), write(b, "v0")]);
    assert!(matches!(h.answer(), DataMsg::TcKeyConf { .. }));
    (h, a, b)
}

/// A node that is the primary of neither key (both participants are remote to it).
fn outsider(h: &Harness, a: i64, b: i64) -> NodeId {
    let (pa, pb) = (h.replicas(a)[0], h.replicas(b)[0]);
    [2, 3, 4, 5]
        .into_iter()
        .find(|&n| n != pa && n != pb)
        .expect("four nodes, two primaries")
}

#[test]
fn a_tc_that_dies_after_one_commit_leaves_every_replica_committed() {
    let (h, a, b) = setup();
    // The TC (the primary of neither key) is cut off right after its first
    // LqhCommit went out: that participant commits, the other is prepared when the TC
    // is declared dead and must learn the decision by takeover.
    let tc = outsider(&h, a, b);
    let sent = Arc::new(Mutex::new(0u32));
    let s2 = sent.clone();
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == tc && matches!(m, DataMsg::LqhCommit { backup: false, .. }) {
            let mut n = s2.lock();
            *n += 1;
            if *n == 2 {
                return Verdict::CrashSender;
            }
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v1"), write(b, "v1")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&tc) {
        assert!(
            std::time::Instant::now() < deadline,
            "the TC never committed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != tc).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(tc);
        h.node(n).on_view(&view(2, &survivors));
    }
    h.wait_value(a, Some("v1"), tc);
    h.wait_value(b, Some("v1"), tc);
    h.stop();
}

#[test]
fn a_tc_that_dies_before_any_commit_leaves_every_replica_aborted() {
    let (h, a, b) = setup();
    let tc = outsider(&h, a, b);
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == tc && matches!(m, DataMsg::LqhCommit { backup: false, .. }) {
            return Verdict::CrashSender;
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v2"), write(b, "v2")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&tc) {
        assert!(std::time::Instant::now() < deadline, "the TC never decided");
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != tc).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(tc);
        h.node(n).on_view(&view(2, &survivors));
    }
    // Prepared everywhere, committed nowhere: the old value stays, and the rows are
    // not left locked (a new transaction commits).
    std::thread::sleep(Duration::from_millis(200));
    h.wait_value(a, Some("v0"), tc);
    h.wait_value(b, Some("v0"), tc);
    *h.router.filter.lock() = None;
    let live_tc = survivors[0];
    begin(&h, live_tc, vec![write(a, "v3"), write(b, "v3")]);
    match h.answer() {
        DataMsg::TcKeyConf { .. } => {}
        other => panic!("{other:?}"),
    }
    h.wait_value(a, Some("v3"), tc);
    h.wait_value(b, Some("v3"), tc);

    h.stop();
}

#[test]
fn a_primary_lost_during_the_commit_is_replaced_by_its_backup() {
    let (h, a, b) = setup();
    // Key a's primary is cut off when it is told to commit (before it tells its
    // backup): the TC has decided, so the backup must commit and the API hear success.
    let pa = h.replicas(a)[0];
    let tc = h
        .replicas(b)
        .into_iter()
        .find(|&n| n != pa)
        .expect("a TC that survives");
    *h.router.filter.lock() = Some(Box::new(move |from, _to, m| {
        if from == pa && matches!(m, DataMsg::LqhCommit { backup: true, .. }) {
            return Verdict::CrashSender;
        }
        Verdict::Deliver
    }));
    begin(&h, tc, vec![write(a, "v4"), write(b, "v4")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.router.crashed.lock().contains(&pa) {
        assert!(
            std::time::Instant::now() < deadline,
            "the primary never committed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let survivors: Vec<NodeId> = [2, 3, 4, 5].into_iter().filter(|&n| n != pa).collect();
    for &n in &survivors {
        // The process died: its connections closed (no read-lease fence).
        h.node(n).on_disconnect(pa);
        h.node(n).on_view(&view(2, &survivors));
    }
    match h.answer() {
        DataMsg::TcKeyConf { .. } => {}
        other => panic!("the API must hear the commit: {other:?}"),
    }
    h.wait_value(a, Some("v4"), pa);
    h.wait_value(b, Some("v4"), pa);
    h.stop();
}

#[test]
fn new_work_over_an_overloaded_connection_gets_1218_and_changes_nothing() {
    let (h, a, b) = setup();
    let tc = outsider(&h, a, b);
    let [primary, backup] = h.replicas(a)[..] else {
        panic!("two replicas")
    };
    let code = |m: DataMsg| match m {
        DataMsg::TcKeyRef { code, class, .. } => {
            assert_eq!(
                class,
                crate::error::ErrorClassification::OverloadError as u8
            );
            code
        }
        DataMsg::ReadConf { code, .. } => code,
        other => panic!("unexpected {other:?}"),
    };
    // The primary's connection to its backup: the primary refuses the prepare and
    // the TC aborts everywhere.
    h.router.overloaded.lock().insert((primary, backup));
    begin(&h, tc, vec![write(a, "v1"), write(b, "v1")]);
    assert_eq!(code(h.answer()), 1218);
    // The TC's connection to the API node: refused before anything runs.
    h.router.overloaded.lock().clear();
    h.router.overloaded.lock().insert((tc, API));
    begin(&h, tc, vec![write(a, "v2")]);
    assert_eq!(code(h.answer()), 1218);
    // A read at the primary whose connection to the API node is overloaded.
    h.router.overloaded.lock().insert((primary, API));
    let read = DataMsg::ReadReq {
        req: 9,
        database: DB.into(),
        table: "kv".into(),
        columns: vec![1],
        keys: vec![Value::Int(a)],
    };
    h.node(primary).on_message(API, read.clone());
    assert_eq!(code(h.answer()), 1218);
    for n in h.replicas(a).into_iter().chain(h.replicas(b)) {
        assert_eq!(
            h.local(n, a).or(h.local(n, b)),
            Some(Value::Str("v0".into()))
        );
    }
    // Once the buffers drained, the same work goes through.
    h.router.overloaded.lock().clear();
    begin(&h, tc, vec![write(a, "v3"), write(b, "v3")]);
    assert!(matches!(h.answer(), DataMsg::TcKeyConf { .. }));
    h.node(primary).on_message(API, read);
    match h.answer() {
        DataMsg::ReadConf {
            code: 0, values, ..
        } => {
            assert_eq!(values, vec![Value::Str("v3".into())])
        }
        other => panic!("unexpected {other:?}"),
    }
    h.wait_value(a, Some("v3"), 0);
    h.wait_value(b, Some("v3"), 0);
    h.stop();
}
