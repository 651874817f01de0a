//! A test harness for the data path with the network in the test's hands: data paths
//! of four nodes (two node groups, NoOfReplicas=2) joined by an in-memory transport
//! that can cut a node off at a chosen message or count a connection as overloaded,
//! and an API node whose answers the test reads. Used by `takeover_tests` and
//! `rounds_tests`.

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

pub(super) const API: NodeId = 1000;
pub(super) const DB: &str = "test";

/// Decides, per message, whether it is delivered; may cut its sender off.
pub(super) type Filter = Box<dyn Fn(NodeId, NodeId, &DataMsg) -> Verdict + Send + Sync>;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Deliver,
    /// Drop this message and every later one from the sender (it crashed).
    CrashSender,
}

#[derive(Default)]
pub(super) struct Router {
    pub(super) nodes: Mutex<BTreeMap<NodeId, Arc<DataPath>>>,
    pub(super) crashed: Mutex<BTreeSet<NodeId>>,
    pub(super) filter: Mutex<Option<Filter>>,
    api: Mutex<Option<SyncSender<DataMsg>>>,
    /// Connections (from, to) whose send buffers count as overloaded.
    pub(super) overloaded: Mutex<BTreeSet<(NodeId, NodeId)>>,
}

pub(super) struct MemTransport {
    me: NodeId,
    router: Arc<Router>,
}

impl MemTransport {
    pub(super) fn new(me: NodeId, router: Arc<Router>) -> MemTransport {
        MemTransport { me, router }
    }
}

impl Transport for MemTransport {
    fn send(&self, to: NodeId, msg: &Message) -> bool {
        let (view_id, d) = match msg {
            Message::Data(d) => (None, d),
            Message::DataInView { view_id, msg } => (Some(*view_id), msg),
            _ => return true,
        };
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
                match view_id {
                    Some(v) => dp.on_message_in_view(self.me, v, d.clone()),
                    None => dp.on_message(self.me, d.clone()),
                }
                true
            }
            None => false,
        }
    }

    fn overloaded(&self, to: NodeId) -> bool {
        self.router.overloaded.lock().contains(&(self.me, to))
    }
}

pub(super) fn config() -> ClusterConfig {
    let mut text = String::from("[ndbd default]\nNoOfReplicas=2\nDataMemory=16M\n");
    text.push_str("[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\n");
    for id in 2..=5 {
        text.push_str(&format!("[ndbd]\nNodeId={id}\nHostName=127.0.0.1\n"));
    }
    text.push_str("[mysqld]\n");
    ClusterConfig::parse(&text, "takeover.ini").expect("config")
}

pub(super) fn view(id: u64, members: &[NodeId]) -> View {
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

pub(super) struct Harness {
    pub(super) router: Arc<Router>,
    pub(super) api: Receiver<DataMsg>,
}

impl Harness {
    pub(super) fn new() -> Harness {
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

    pub(super) fn all(&self) -> Vec<Arc<DataPath>> {
        self.router.nodes.lock().values().cloned().collect()
    }

    pub(super) fn node(&self, id: NodeId) -> Arc<DataPath> {
        self.router.nodes.lock()[&id].clone()
    }

    pub(super) fn answer(&self) -> DataMsg {
        self.api
            .recv_timeout(Duration::from_secs(10))
            .expect("an answer to the API node")
    }

    pub(super) fn sql(&self, sql: &str) {
        self.node(2).on_message(
            API,
            DataMsg::SqlReq {
                req: 1,
                database: DB.into(),
                sql: sql.into(),
                vars: Default::default(),
            },
        );
        match self.answer() {
            DataMsg::SqlConf { code: 0, .. } => {}
            other => panic!("{sql}: {other:?}"),
        }
    }

    /// Keys whose partitions belong to each node group, from node 2's layout.
    pub(super) fn keys_of_both_groups(&self) -> (i64, i64) {
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
    pub(super) fn local(&self, id: NodeId, k: i64) -> Option<Value> {
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
    pub(super) fn replicas(&self, k: i64) -> Vec<NodeId> {
        let dp = self.node(3);
        let p = dp.partition_of_op(&write(k, "x")).expect("partition");
        crate::cluster::layout::replica_nodes(p, &dp.groups)
    }

    /// Waits until every surviving replica of `k` holds `want`.
    pub(super) fn wait_value(&self, k: i64, want: Option<&str>, dead: NodeId) {
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

    pub(super) fn stop(&self) {
        for dp in self.all() {
            dp.stop();
        }
    }
}

pub(super) fn write(k: i64, v: &str) -> KeyOp {
    KeyOp {
        op: OpType::Write,
        database: DB.into(),
        table: "kv".into(),
        key: vec![Value::Int(k)],
        values: vec![(1, Value::Str(v.into()))],
        columns: Vec::new(),
    }
}
