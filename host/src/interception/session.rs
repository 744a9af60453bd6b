//! The host-maintained facts every interceptor call carries.

use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::SessionView;

/// Facts about the conversation a chain runs for. The agent session keeps
/// them current; packs see them as the ABI's session view and key their
/// state by `session_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFacts {
    /// Unique within the process.
    pub session_id: String,
    /// Zero-based index of the current user turn.
    pub turn_index: u64,
    /// Provider calls made so far in this turn.
    pub provider_calls_this_turn: u64,
    /// Tool calls processed so far in this turn.
    pub tool_calls_this_turn: u64,
    /// Input tokens reported so far in the session.
    pub input_tokens: u64,
    /// Output tokens reported so far in the session.
    pub output_tokens: u64,
    /// True while the host asks the model again for an `output` gate.
    pub gate_retry: bool,
    /// The extension JSON packs see, when the host has more to say than
    /// the constant one (usage, cost, the call's source): without and with
    /// the gate-retry mark. Empty: the constants.
    extension: [String; 2],
}

impl SessionFacts {
    /// Facts for a fresh conversation.
    pub fn new(session_id: impl Into<String>) -> Self {
        SessionFacts {
            session_id: session_id.into(),
            ..SessionFacts::default()
        }
    }

    pub(crate) fn view(&self) -> SessionView<'_> {
        SessionView {
            session_id: RStr::from_str(&self.session_id),
            turn_index: self.turn_index,
            provider_calls_this_turn: self.provider_calls_this_turn,
            tool_calls_this_turn: self.tool_calls_this_turn,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            extension_json: RStr::from_str(self.extension_json()),
        }
    }

    /// Adds `members` (JSON object members, without the braces:
    /// `"source":"agent","cost_usd":0.5`) to what packs see in the session
    /// view's extension, after the host's capabilities and the gate-retry
    /// mark. Empty: only those.
    pub fn set_extension_members(&mut self, members: &str) {
        if members.is_empty() {
            self.extension = [String::new(), String::new()];
            return;
        }
        let with = |constant: &str| format!("{},{members}}}", &constant[..constant.len() - 1]);
        self.extension = [
            with(super::seams::SESSION_EXTENSION),
            with(super::seams::SESSION_EXTENSION_GATE_RETRY),
        ];
    }

    fn extension_json(&self) -> &str {
        let index = usize::from(self.gate_retry);
        match &self.extension[index] {
            own if !own.is_empty() => own,
            _ if self.gate_retry => super::seams::SESSION_EXTENSION_GATE_RETRY,
            _ => super::seams::SESSION_EXTENSION,
        }
    }
}
