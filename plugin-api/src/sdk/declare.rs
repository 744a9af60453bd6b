//! What a pack declares about its interceptors, beside registering them:
//! which fail closed, redact or judge, the stream windows it takes, and
//! whether it asks for the host's gate state.

use super::registrar::Registrar;
use super::state::State;

impl Registrar {
    /// Declares that the interceptor registered as `name` fails **closed**
    /// on whatever seam it is on: an error or a panic blocks (the call, the
    /// reply, the answer, the stream) instead of being skipped. Each seam's
    /// default stays for every other interceptor (only `tool_call` fails
    /// closed by default). A content gate on `output` wants this: it must
    /// never fail open.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.output("ban", |_session, answer| {
    ///     let verdict: serde_json::Value = serde_json::from_str(answer)?; // may fail
    ///     Ok(if verdict["ok"] == true { Decision::Allow } else { Decision::block("not ok") })
    /// });
    /// registrar.fail_closed("ban");
    /// # }
    /// ```
    pub fn fail_closed(&mut self, name: &str) {
        self.fail_closed.push(name.to_owned());
    }

    /// Declares that the interceptor registered as `name` *redacts*: it
    /// rewrites content to remove what must not pass. With
    /// [`judges`](Self::judges) it lets the host warn at start-up about an
    /// order that defeats a policy — a ban check loaded before a redactor
    /// on the same seam sees what the redactor would have removed.
    pub fn redacts(&mut self, name: &str) {
        self.redacts.push(name.to_owned());
    }

    /// Declares that the interceptor registered as `name` *judges* content:
    /// it blocks on what the text contains (see [`redacts`](Self::redacts)).
    pub fn judges(&mut self, name: &str) {
        self.judges.push(name.to_owned());
    }

    /// Declares that the `stream_chunk` interceptor registered as `name`
    /// judges the stream in windows of `bytes`: when deltas come in a
    /// burst, the host lets up to that many new bytes gather, unreleased,
    /// before it offers the stream again — as one delta — instead of
    /// calling on every delta. Nothing is released unjudged: a window only
    /// trades how soon text is shown for fewer calls. The host offers at
    /// once a delta that comes 25 ms or more after the last offer (so a
    /// stream at reading pace is still judged delta by delta), offers a
    /// gather whose oldest byte has waited 25 ms, offers what gathered at
    /// the end of the stream, and never gathers more than its own cap
    /// (4 KiB). Worth it for a gate whose per-call cost (a scan's setup, a
    /// look-behind) dwarfs what one delta adds.
    ///
    /// ```
    /// # use chimera_plugin_api::prelude::*;
    /// # fn register(registrar: &mut Registrar) {
    /// registrar.stream_chunk("ban", |_session, segment| {
    ///     Ok(if segment.candidate().contains("secret") {
    ///         StreamDecision::Block("secret".into())
    ///     } else {
    ///         StreamDecision::Release
    ///     })
    /// });
    /// registrar.stream_window("ban", 1024);
    /// # }
    /// ```
    pub fn stream_window(&mut self, name: &str, bytes: usize) {
        self.stream_windows.push((name.to_owned(), bytes));
    }

    /// The host's gate state for this pack: counters and token buckets the
    /// host keeps (shared by every replica when its store is), under this
    /// pack's name. Asking is what makes the host offer it; keep the handle
    /// in the interceptors that count. See [`State`] for the semantics and
    /// what a host without the service answers.
    pub fn state(&mut self) -> State {
        self.wants_state = true;
        self.state.clone()
    }
}
