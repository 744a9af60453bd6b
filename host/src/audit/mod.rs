//! The audit log: a tamper-evident record of every decision interceptors
//! make (`chimera run --audit FILE`), and its check (`chimera audit verify`).
//!
//! # A line
//!
//! One JSON object per decision, in the order they were made:
//!
//! ```text
//! {"seq":3,"prev":"<hash of line 2>","time":"2025-06-01T12:00:00.000Z",
//!  "session":"<128-bit hex, one per run>","turn":0,"seam":"tool_result",
//!  "pack":"redactor","interceptor":"redactor/scrub-result","sha256":"<pack file>",
//!  "decision":"replaced","reason":"","tool":"bash","call_id":"c1",
//!  "change":[{"at":"output","pos":7,"del":20,"ins":"[redacted]"}],
//!  "hash":"<SHA-256 of this line up to here>"}
//! ```
//!
//! `decision` is `allowed`, `replaced`, `blocked`, `error`, `ask` (a pack
//! asks the operator; `answered` follows with the `answer`), `retry` (an
//! `output` gate asks the model again) or `pause` (a rate limiter waits).
//! `pack` and `sha256` are `null` for host interceptors. A sub-agent's
//! decisions carry `depth` and `parent_call_id`. Allows on `stream_chunk`
//! (one per streamed delta and gate) and its holds are not recorded; its
//! blocks are.
//!
//! # The chain
//!
//! `hash` is the SHA-256 of the line's bytes up to its `hash` member, with
//! the object closed there; `prev` is the previous line's `hash` (64 zeros
//! on the first line) and `seq` the line's number. So an edited line no
//! longer matches its own hash, and an edit that recomputes it breaks the
//! next line's `prev`; a deleted, inserted or reordered line breaks `seq`
//! and `prev`. What the chain cannot show on its own is lines cut from the
//! end, or a log replaced whole by a freshly computed one: for that,
//! record the head (`audit verify` prints the line count and the last
//! hash) somewhere its writers cannot reach and check it later with
//! `--expect-head`.
//!
//! # Secrets
//!
//! A replacement is recorded as a [`diff`](Changes): per changed span, its
//! position, the length it removed and the text it inserted. The removed
//! text is never kept, so what a redactor took out is not in the log.

mod diff;
mod line;
mod log;
mod verify;

pub(crate) use diff::Differ;
pub use diff::{Change, Changes, INSERT_CAP, SPAN_CAP};
pub use line::{seal, GENESIS, LINE_CAP};
pub use log::{AuditError, AuditLog, Head, PackHashes};
pub use verify::{verify_file, Verified, VerifyError, FILE_CAP};

use crate::interception::InterceptorEvent;

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
