//! How a session offers a streamed reply to its `stream_chunk` gates:
//! each delta through the [`StreamGate`], what it releases published as
//! `assistant_delta`, and each hold's edges as events. The loop
//! ([`super::react`]) and the gateway's relay ([`super::relay`]) both
//! stream through these.

use super::events::AgentEvent;
use super::session::AgentSession;
use super::stream::{HoldEdge, StreamGate};
use crate::interception::{AuditRecord, EventDecision, InterceptorEvent, StreamChunkInterceptor};

impl AgentSession {
    /// Offers one streamed delta (or, with `last`, the held text) to the
    /// `stream_chunk` chain and publishes what it releases.
    pub(super) fn gated_delta(
        &self,
        gate: &mut StreamGate,
        chain: &[StreamChunkInterceptor],
        delta: &str,
        last: bool,
    ) {
        let offered = self.stream_offer(gate, chain, delta, last);
        if let Some(range) = offered.release {
            self.bus.emit(|| AgentEvent::AssistantDelta {
                content: gate.text()[range].to_owned(),
            });
        }
        if let Some(started) = offered.hold {
            self.publish_hold(chain, started);
        }
    }

    /// Offers `delta` to `chain` through `gate` and publishes what the
    /// offer says besides the text it releases: a hold's end (it comes
    /// before that text) and a retract. The released range and a hold's
    /// start (it comes after the text) are the caller's to publish.
    pub(super) fn stream_offer(
        &self,
        gate: &mut StreamGate,
        chain: &[StreamChunkInterceptor],
        delta: &str,
        last: bool,
    ) -> super::stream::Offered {
        let mut offered = gate.offer(delta, last, |facts, text| self.run_seam(chain, facts, text));
        // A hold's end comes before the text it let go; its start after
        // the text released before it.
        let started = match offered.hold.take() {
            Some(ended @ HoldEdge::Ended { .. }) => {
                self.publish_hold(chain, ended);
                None
            }
            started => started,
        };
        if let Some((released, reason)) = offered.retract.clone() {
            self.bus
                .emit(|| AgentEvent::StreamRetract { released, reason });
        }
        offered.hold = started;
        offered
    }

    /// A hold edge as an event (`stream_hold` / `stream_hold_end`) and an
    /// audit line (`hold` / `hold_end`, the bytes and the outcome in the
    /// reason).
    pub(super) fn publish_hold(&self, chain: &[StreamChunkInterceptor], edge: HoldEdge) {
        let (gate, decision, reason) = match &edge {
            HoldEdge::Started { gate, held } => {
                (gate, EventDecision::Hold, format!("holding {held} bytes"))
            }
            HoldEdge::Ended {
                gate,
                held,
                outcome,
            } => (
                gate,
                EventDecision::HoldEnd,
                format!("{outcome}: {held} bytes were held"),
            ),
        };
        if self.bus.is_audited() {
            self.bus.publish_audit(AuditRecord {
                event: InterceptorEvent {
                    seam: "stream_chunk",
                    decision,
                    reason,
                    tool_name: String::new(),
                    call_id: String::new(),
                    interceptor: gate.clone(),
                    // Only an enforced gate's hold holds anything.
                    monitor: false,
                },
                from_pack: chain.iter().any(|i| i.name() == gate && i.is_pack()),
                changes: None,
                depth: 0,
                parent_call_id: None,
            });
        }
        self.bus.emit(|| match edge {
            HoldEdge::Started { gate, held } => AgentEvent::StreamHold { gate, held },
            HoldEdge::Ended {
                gate,
                held,
                outcome,
            } => AgentEvent::StreamHoldEnd {
                gate,
                held,
                outcome,
            },
        });
    }
}
