//! Data path messages carry their sender's view (`DataInView`): a node's new life
//! (an in-place restart) never handles what a peer meant for its earlier life, and a
//! message from a newer view waits for the receiver to install it.

use super::DataPath;
use super::mem_harness::*;
use crate::transport::NodeId;
use crate::transport::data::DataMsg;
use parking_lot::Mutex;
use std::sync::Arc;

/// The harness with node 3 replaced by a new life (a fresh data path, no view yet),
/// and the `seq` of every LeasePong node 3 sends node 2: the pings it handled.
fn restarted_node_3() -> (Harness, Arc<DataPath>, Arc<Mutex<Vec<u64>>>) {
    let h = Harness::new();
    let t = Arc::new(MemTransport::new(3, h.router.clone()));
    let fresh = DataPath::start(&config(), 3, 1, t).expect("data path");
    h.router.nodes.lock().insert(3, fresh.clone());
    let pongs: Arc<Mutex<Vec<u64>>> = Arc::default();
    let p2 = pongs.clone();
    *h.router.filter.lock() = Some(Box::new(move |from: NodeId, to: NodeId, m: &DataMsg| {
        if let (3, 2, DataMsg::LeasePong { seq }) = (from, to, m) {
            p2.lock().push(*seq);
        }
        Verdict::Deliver
    }));
    (h, fresh, pongs)
}

#[test]
fn a_new_life_drops_what_was_sent_to_its_earlier_life_and_waits_for_newer_views() {
    // Node 3 restarts in place, admitted at view 3 (view 2 was the others' without it).
    let (h, fresh, pongs) = restarted_node_3();
    // Before its first view: held.
    fresh.on_message_in_view(2, 3, DataMsg::LeasePing { seq: 1 });
    // Sent by node 2 in view 1, before it saw node 3 restart: meant for the earlier
    // life (in the new life a prepare like it would hold a row lock for ever).
    fresh.on_message_in_view(2, 1, DataMsg::LeasePing { seq: 2 });
    assert!(pongs.lock().is_empty(), "{:?}", pongs.lock());
    fresh.on_view(&view(3, &[2, 3, 4, 5]));
    assert_eq!(*pongs.lock(), vec![1], "the held message of view 3 only");
    // After the first view too: a message of view 2 (without node 3) is not for it.
    fresh.on_message_in_view(2, 2, DataMsg::LeasePing { seq: 3 });
    fresh.on_message_in_view(2, 3, DataMsg::LeasePing { seq: 4 });
    assert_eq!(*pongs.lock(), vec![1, 4]);
    // Node 2 is a view ahead: handled once node 3 installs it, in order.
    fresh.on_message_in_view(2, 4, DataMsg::LeasePing { seq: 5 });
    fresh.on_message_in_view(2, 4, DataMsg::LeasePing { seq: 6 });
    assert_eq!(*pongs.lock(), vec![1, 4]);
    fresh.on_view(&view(4, &[2, 3, 4, 5]));
    assert_eq!(*pongs.lock(), vec![1, 4, 5, 6]);
    // A node that a view up to this one dropped: what it sent before is of a life
    // that ended.
    fresh.on_view(&view(5, &[3, 4, 5]));
    fresh.on_message_in_view(2, 4, DataMsg::LeasePing { seq: 7 });
    fresh.on_view(&view(6, &[2, 3, 4, 5]));
    assert_eq!(*pongs.lock(), vec![1, 4, 5, 6]);
    h.stop();
}

#[test]
fn what_a_node_outside_the_first_view_sent_before_it_is_dropped() {
    let (h, fresh, pongs) = restarted_node_3();
    // Held before node 3's first view; node 2 is not in that view (3 dropped it), so
    // what it sent in view 3 is of a life that ended, even once node 2 is back.
    fresh.on_message_in_view(2, 3, DataMsg::LeasePing { seq: 1 });
    fresh.on_view(&view(3, &[3, 4, 5]));
    fresh.on_view(&view(4, &[2, 3, 4, 5]));
    fresh.on_message_in_view(2, 4, DataMsg::LeasePing { seq: 2 });
    assert_eq!(*pongs.lock(), vec![2]);
    h.stop();
}
