//! One decision as the audit channel carries it: what the chain decided,
//! and for a replacement what it changed (see [`Changes`]).

use super::{Changes, InterceptorEvent};

/// One decision as the audit channel carries it
/// ([`EventBus::subscribe_audit`](crate::agent::EventBus::subscribe_audit)):
/// any decision (allows too), with what only the log keeps. Never part of
/// the transcript, so what a replacement changed never reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The decision, as the transcript's event for it reads.
    pub event: InterceptorEvent,
    /// The deciding interceptor came from a pack (its name is `<pack>/<name>`).
    pub from_pack: bool,
    /// For a replacement: what it changed.
    pub changes: Option<Changes>,
    /// Delegations above the session that decided (0: the top level).
    pub depth: u32,
    /// For a sub-agent's decision: the call that started the sub-agent.
    pub parent_call_id: Option<String>,
}

impl AuditRecord {
    /// The record as the session `depth` delegations up sees it, under the
    /// call `parent_call_id`; one from deeper down passes as it is.
    pub(crate) fn nested(&self, depth: u32, parent_call_id: &str) -> AuditRecord {
        let mut record = self.clone();
        if record.depth == 0 {
            record.depth = depth;
            record.parent_call_id = Some(parent_call_id.to_owned());
        }
        record
    }
}
