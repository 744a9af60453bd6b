//! The pack: the gate (`tool_call`) and the watcher (context).

use crate::config::Config;
use crate::lanes::Lanes;
use chimera_plugin_api::prelude::*;
use std::sync::Arc;

/// The plan-gate pack.
pub struct PlanGate {
    config: Config,
    lanes: Lanes,
}

impl PlanGate {
    /// The gate's verdict on a proposed call in conversation `session`.
    pub fn check(&self, session: &str, tool: &str) -> Decision<ToolCall> {
        if self.config.plan_tools.contains(tool) {
            self.lanes.set(session, true);
            return Decision::Allow;
        }
        if self.config.gated_tools.contains(tool) && !self.lanes.is_planned(session) {
            return Decision::Block(self.config.block_reason(tool));
        }
        Decision::Allow
    }

    /// Recomputes conversation `session`'s state from the outgoing messages:
    /// planned iff an assistant message after the last user message (or
    /// anywhere, when there is none) carries a plan-tool call.
    pub fn watch(&self, session: &str, messages: Messages<'_>) {
        let since_user = messages.iter().rev().take_while(|m| m.role() != "user");
        let planned = since_user.filter(|m| m.role() == "assistant").any(|m| {
            m.tool_calls()
                .any(|c| self.config.plan_tools.contains(c.name()))
        });
        self.lanes.set(session, planned);
    }
}

impl Pack for PlanGate {
    const NAME: &'static str = "plan-gate";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "blocks write/edit/shell tools until a planning call is issued in the current user turn";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall, SeamKind::Context];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        Ok(PlanGate {
            config,
            lanes: Lanes::default(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let gate = Arc::clone(&self);
        registrar.tool_call("gate", move |session, call| {
            Ok(gate.check(session.id(), call.name()))
        });
        registrar.context("watcher", move |session, messages| {
            self.watch(session.id(), messages);
            Ok(Decision::Allow)
        });
    }

    /// `{"planned": [session ids]}`: which conversations have planned their
    /// current turn, so a rebuilt gate does not re-block a turn mid-flight.
    fn export_state(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ "planned": self.lanes.planned() }))
    }

    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let planned = state["planned"]
            .as_array()
            .ok_or_else(|| PackError::msg("state has no `planned` list"))?;
        for session in planned.iter().filter_map(|s| s.as_str()) {
            self.lanes.set(session, true);
        }
        Ok(())
    }
}
