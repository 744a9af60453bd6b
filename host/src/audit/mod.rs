//! The audit log: a tamper-evident record of every decision interceptors
//! make (`chimera run --audit FILE`), its check (`chimera audit verify`)
//! and its summary (`chimera audit summarise`).
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
//! `decision` is `allowed`, `replaced`, `blocked`, `error`, `ask` (a pack,
//! or the permission policy under `--ask` — seam `permission`, interceptor
//! `permission-policy` — asks the operator; `answered` follows with the
//! `answer` and its `source`: `terminal`, `approvals_file`, `yes`, `no`, …),
//! `retry` (an `output` gate asks the model again), `pause` (a rate
//! limiter waits), or `hold` and `hold_end` (a `stream_chunk` gate held
//! streamed text beyond the trailing word, and that hold ended: `reason`
//! says `holding N bytes`, then `released`, `blocked` or `ended` and the
//! bytes held).
//! A decision of a pack in monitor mode (`--monitor NAME`) carries
//! `"monitor": true` after `decision`: the pack decided so, and nothing
//! was enacted (the member is absent otherwise). `audit summarise` counts
//! those apart, as what the pack *would* have done.
//! `pack` and `sha256` are `null` for host interceptors. Behind the
//! gateway (`chimera serve --audit FILE`) a line also carries `request`,
//! the id of the reply the client got, after `session` (the conversation)
//! and `turn` is the request's turn in that conversation. A sub-agent's
//! decisions carry `depth` and `parent_call_id`. Allows on `stream_chunk`
//! (one per streamed delta and gate) and the ordinary hold of a trailing
//! word are not recorded; its blocks and its holds beyond the word are.
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

mod line;
mod log;
mod summary;
mod verify;

// The record and its diff live with the chains that make them (a
// floor below): the log reads them, the interception layer writes them.
pub use crate::interception::{AuditRecord, Change, Changes, INSERT_CAP, SPAN_CAP};
pub(crate) use line::hex;
pub use line::{seal, GENESIS, LINE_CAP};
pub use log::{AuditError, AuditLog, Exchange, Head, PackHashes};
pub use summary::{summarise_file, Summary, Tally};
pub use verify::{verify_file, Verified, VerifyError, FILE_CAP};
