//! Compaction: shortening a long conversation when a `provider_request`
//! interceptor (a context-window gate) asks for it.
//!
//! ```text
//!  [system…] [turn 1] [turn 2] … [turn n-1] [turn n]
//!  [system…] [user: "Summary of the earlier conversation: …"] [turn n-1] [turn n]
//! ```
//!
//! The system messages and the last turns (a turn runs from a user message
//! to the next; [`DEFAULT_KEEP_TURNS`](super::DEFAULT_KEEP_TURNS) unless the session says otherwise)
//! stay as they are. Everything between is summarised by one model call —
//! source `compaction`, not streamed, no tools, through the `context` and
//! `provider_request` seams and `model_response` like any call — and
//! replaced by one user message carrying the summary. `compaction` events
//! mark the start and the end. The request that asked is then built again
//! from the shorter history; a second ask for the same request blocks it.

use super::events::AgentEvent;
use super::outcome::{blocked_run, RunResult};
use super::session::AgentSession;
use super::usage::CallSource;
use crate::interception::Interceptors;
use crate::types::{Message, Role, ToolList};
use std::fmt::Write as _;

/// What the summary call is asked.
const PROMPT: &str = "Summarise the conversation below for your own later use: the user's goals, \
    the decisions made, the facts learned, the files and commands involved, and what remains \
    to do. Be concise and complete. Answer with the summary only.";

/// The longest excerpt of one message the summary call is shown.
const EXCERPT: usize = 4000;

/// The text the summary call summarises: one line (or paragraph) per
/// message, each cut at [`EXCERPT`] bytes.
fn transcript(messages: &[Message]) -> String {
    let mut text = String::new();
    for message in messages {
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
        };
        let mut cut = message.content.len().min(EXCERPT);
        while !message.content.is_char_boundary(cut) {
            cut -= 1;
        }
        let more = if cut < message.content.len() {
            " …"
        } else {
            ""
        };
        let _ = writeln!(text, "{role}: {}{more}", &message.content[..cut]);
        for call in &message.tool_calls {
            let _ = writeln!(
                text,
                "  (called {} with {})",
                call.name,
                call.arguments.as_str()
            );
        }
    }
    text
}

/// Where the kept part of `history` starts: at the `keep`-th last user
/// message. `None` when there is nothing older to summarise.
fn kept_from(history: &[Message], system_end: usize, keep: usize) -> Option<usize> {
    let users: Vec<usize> = history
        .iter()
        .enumerate()
        .skip(system_end)
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let keep = keep.max(1);
    let from = *users.get(users.len().checked_sub(keep)?)?;
    (from > system_end).then_some(from)
}

impl AgentSession {
    /// Compacts the durable history for `interceptor`'s ask. `Err` ends the
    /// run: nothing to compact, or the summary call failed or was blocked.
    pub(crate) async fn compact(
        &mut self,
        bundle: Option<&Interceptors>,
        interceptor: &str,
        reason: &str,
    ) -> Result<(), RunResult> {
        let refused =
            |why: &str| blocked_run(format!("{reason} ({why})"), Some(interceptor.to_owned()));
        if self.source == CallSource::Compaction {
            return Err(refused("asked again by the summary call itself"));
        }
        let system_end = self
            .history
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        let Some(from) = kept_from(&self.history, system_end, self.config.compaction.keep_turns)
        else {
            return Err(refused(
                "the conversation has nothing older than its last turns to compact",
            ));
        };
        let (summarised, kept) = (from - system_end, self.history.len() - from);
        self.bus.emit(|| AgentEvent::Compaction {
            phase: "started",
            interceptor: interceptor.to_owned(),
            reason: reason.to_owned(),
            summarised,
            kept,
        });
        let asked = vec![
            Message::system(PROMPT),
            Message::user(transcript(&self.history[system_end..from])),
        ];
        let history = std::mem::replace(&mut self.history, asked);
        let streaming = std::mem::replace(&mut self.streaming, false);
        self.source = CallSource::Compaction;
        let received = self.call_provider(bundle, &ToolList::default()).await;
        self.source = CallSource::Agent;
        self.streaming = streaming;
        self.history = history;
        self.refresh_facts();
        let judged = self.judge_reply(bundle, received?);
        if judged.vetoed() {
            return Err(refused(&format!(
                "the summary was blocked: {}",
                judged.content
            )));
        }
        self.history.splice(
            system_end..from,
            [Message::user(format!(
                "Summary of the earlier conversation:\n{}",
                judged.content
            ))],
        );
        self.bus.emit(|| AgentEvent::Compaction {
            phase: "finished",
            interceptor: interceptor.to_owned(),
            reason: reason.to_owned(),
            summarised,
            kept,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_part_starts_at_the_last_turns_and_needs_something_before_it() {
        let history = [
            Message::system("s"),
            Message::user("1"),
            Message::assistant("a1", Vec::new()),
            Message::user("2"),
            Message::assistant("a2", Vec::new()),
            Message::user("3"),
        ];
        assert_eq!(kept_from(&history, 1, 2), Some(3));
        assert_eq!(kept_from(&history, 1, 1), Some(5));
        assert_eq!(kept_from(&history, 1, 3), None, "turn 1 is the oldest kept");
        assert_eq!(kept_from(&history, 1, 9), None);
        let text = transcript(&history[1..3]);
        assert_eq!(text, "user: 1\nassistant: a1\n");
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let long = "é".repeat(EXCERPT);
        let text = transcript(&[Message::user(long)]);
        assert!(text.ends_with(" …\n"));
        assert!(text.len() < EXCERPT + 20);
    }
}
