//! The arbitrator's side of arbitration (NDB's ARBIT on the management server,
//! ArbitrationRank 1). Every view carries a ticket chosen by its president; when the
//! members of a view split into sides that could each hold every partition, each
//! side's president asks to continue (`ArbitReq`) with that view's ticket. The first
//! request for a ticket wins (`ArbitConf`); every other side with the same ticket gets
//! `ArbitRef` with NDB's code 47 (LoseChoose). (Starts never ask: a partial start
//! happens only when the nodes present hold a whole node group, `qmgr`.)
//!
//! The grants are this process's memory, the last [`MAX_GRANTS`] tickets: a restarted
//! management server starts empty (a split while the arbitrator restarts is a double
//! fault). Known limit (docs/cluster.md §4): a side that missed the commit of a newer
//! view and then splits presents the older view's ticket, which may not have been
//! decided yet.

use super::{Event, Outbox};
use crate::cluster::qmgr::arbit_code;
use crate::mgm::log::Severity;
use crate::transport::{Message, NodeId};
use std::collections::{BTreeMap, VecDeque};

/// Tickets whose decision is kept.
pub const MAX_GRANTS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    view_id: u64,
    members: Vec<NodeId>,
    president: NodeId,
}

/// The arbitrator of one management server.
#[derive(Debug)]
pub struct Arbitrator {
    me: NodeId,
    grants: BTreeMap<u64, Grant>,
    order: VecDeque<u64>,
}

impl Arbitrator {
    pub fn new(me: NodeId) -> Arbitrator {
        Arbitrator {
            me,
            grants: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }

    pub fn on_message(&mut self, from: NodeId, msg: Message, out: &mut Outbox) {
        let Message::ArbitReq {
            ticket,
            view_id,
            members,
        } = msg
        else {
            return;
        };
        let decision = match self.grants.get(&ticket) {
            None => {
                if self.order.len() == MAX_GRANTS
                    && let Some(old) = self.order.pop_front()
                {
                    self.grants.remove(&old);
                }
                self.order.push_back(ticket);
                self.grants.insert(
                    ticket,
                    Grant {
                        view_id,
                        members: members.clone(),
                        president: from,
                    },
                );
                true
            }
            // The same request again (a retry).
            Some(g) => g.president == from && g.view_id == view_id && g.members == members,
        };
        let nodes = super::qmgr::join(&members);
        if decision {
            out.events.push(Event::Log {
                node: self.me,
                severity: Severity::Info,
                text: format!("Arbitration: nodes {nodes} (president {from}) continue"),
            });
            out.send(from, Message::ArbitConf { ticket, view_id });
        } else {
            out.events.push(Event::Log {
                node: self.me,
                severity: Severity::Warning,
                text: format!(
                    "Arbitration: nodes {nodes} (president {from}) must stop: another side was chosen"
                ),
            });
            out.send(
                from,
                Message::ArbitRef {
                    ticket,
                    view_id,
                    code: arbit_code::LOSE_CHOOSE,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(a: &mut Arbitrator, from: NodeId, ticket: u64, members: Vec<NodeId>) -> Message {
        let mut out = Outbox::default();
        a.on_message(
            from,
            Message::ArbitReq {
                ticket,
                view_id: 5,
                members,
            },
            &mut out,
        );
        out.sends.pop().expect("an answer").1
    }

    #[test]
    fn the_first_side_of_a_round_wins_and_each_ticket_is_its_own_round() {
        let mut a = Arbitrator::new(1);
        assert!(matches!(
            req(&mut a, 2, 77, vec![2, 4]),
            Message::ArbitConf { .. }
        ));
        assert!(
            matches!(req(&mut a, 2, 77, vec![2, 4]), Message::ArbitConf { .. }),
            "repeat"
        );
        assert!(matches!(
            req(&mut a, 3, 77, vec![3, 5]),
            Message::ArbitRef { code: 47, .. }
        ));
        assert!(matches!(
            req(&mut a, 3, 78, vec![3, 5]),
            Message::ArbitConf { .. }
        ));
        for t in 100..100 + MAX_GRANTS as u64 {
            req(&mut a, 2, t, vec![2]);
        }
        assert_eq!(a.grants.len(), MAX_GRANTS, "bounded");
    }
}
