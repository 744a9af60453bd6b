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
    /// the constant one (usage, cost, the call's source), written for the
    /// gate-retry mark as it was then (`extension_retry`). Empty: the
    /// constants.
    extension: String,
    /// The `gate_retry` that `extension` was written for.
    extension_retry: bool,
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
    /// mark. Empty: only those. Set `gate_retry` first: the members are
    /// written for it, and a later change of it alone drops them.
    pub fn set_extension_members(&mut self, members: &str) {
        self.write_extension(members.len(), |out| {
            out.extend_from_slice(members.as_bytes());
        });
    }

    /// [`SessionFacts::set_extension_members`], the members appended by
    /// `members` straight into the extension's buffer (reused from one
    /// call to the next) rather than made apart and copied in. `room`: about
    /// how many bytes `members` writes, reserved at once (a new session's
    /// buffer does not grow three times on its first facts).
    pub(crate) fn write_extension(&mut self, room: usize, members: impl FnOnce(&mut Vec<u8>)) {
        let constant = self.constant_extension();
        let mut out = std::mem::take(&mut self.extension).into_bytes();
        out.clear();
        out.reserve(constant.len() + room + 1);
        out.extend_from_slice(&constant.as_bytes()[..constant.len() - 1]);
        out.push(b',');
        let start = out.len();
        members(&mut out);
        if out.len() == start {
            return;
        }
        out.push(b'}');
        // What `members` writes is JSON text, so UTF-8; were it not, packs
        // see the constants rather than bytes that are not text.
        self.extension = String::from_utf8(out).unwrap_or_default();
        self.extension_retry = self.gate_retry;
    }

    /// What packs see with nothing more to say: the host's capabilities,
    /// with the gate-retry mark during a gate retry.
    fn constant_extension(&self) -> &'static str {
        if self.gate_retry {
            super::seams::SESSION_EXTENSION_GATE_RETRY
        } else {
            super::seams::SESSION_EXTENSION
        }
    }

    fn extension_json(&self) -> &str {
        if self.extension.is_empty() || self.extension_retry != self.gate_retry {
            self.constant_extension()
        } else {
            &self.extension
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SessionFacts;

    #[test]
    fn the_extension_carries_the_members_after_the_mark_they_were_written_for() {
        let mut facts = SessionFacts::new("s");
        assert_eq!(
            facts.view().extension_json.as_str(),
            r#"{"capabilities":["edits"]}"#
        );
        facts.set_extension_members(r#""source":"agent""#);
        assert_eq!(
            facts.view().extension_json.as_str(),
            r#"{"capabilities":["edits"],"source":"agent"}"#
        );
        facts.gate_retry = true;
        facts.write_extension(0, |out| out.extend_from_slice(br#""source":"gate_retry""#));
        assert_eq!(
            facts.view().extension_json.as_str(),
            r#"{"capabilities":["edits"],"gate_retry":true,"source":"gate_retry"}"#
        );
        // The mark changed without the members written again: the constant
        // for the mark, never members written for the other.
        facts.gate_retry = false;
        assert_eq!(
            facts.view().extension_json.as_str(),
            r#"{"capabilities":["edits"]}"#
        );
        facts.set_extension_members("");
        assert_eq!(
            facts.view().extension_json.as_str(),
            r#"{"capabilities":["edits"]}"#
        );
    }
}
