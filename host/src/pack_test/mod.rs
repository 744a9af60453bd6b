//! Policy test cases for packs: a scripted session replayed through the
//! real loaded packs and the real agent loop, its decisions compared with a
//! golden file (`chimera pack test`), and real sessions recorded to become
//! such cases (`chimera run --record`, `chimera pack test --from-record`).
//!
//! # A case
//!
//! A case is a TOML file (`tests/cases/NAME.toml`); every key but
//! `prompts` is optional, and an unknown key is refused with its line:
//!
//! ```toml
//! description = "a shell command with `rm -rf` is blocked; `echo` runs"
//! prompts = ["tidy up the build directory"]   # the user turns, in order
//! plugins_dirs = ["../../target/debug"]       # more pack directories, relative to this file
//! model = "gpt-4o-mini"       # the model name the session reports (default "scripted")
//! system = "…"                # the system prompt (default: chimera run's)
//! max_steps = 25              # provider calls allowed per turn
//! stream = false              # stream replies (each reply's `deltas` are its pieces)
//! headers = { "X-Trace" = "t-1" }   # the scripted model's header surface
//!
//! [[packs]]                   # in load order, found by entry-point name
//! name = "my-gate"
//! config = { deny = ["rm -rf"] }    # the pack's JSON config, written as TOML
//!
//! [[responses]]               # the scripted model: one reply per provider call
//! content = "Cleaning up."
//! tool_calls = [{ id = "c1", name = "bash", arguments = { command = "rm -rf build" } }]
//! usage = { input_tokens = 120, output_tokens = 30 }
//!
//! [[responses]]
//! content = "Done."
//!
//! [[answers]]                 # the operator's answers to packs' questions, in order
//! answer = "allow"            # allow | reject | edit (with `payload = {…}`)
//! tool = "bash"               # optional: the subject it must answer
//! ```
//!
//! TOML has no `null`: where a config, arguments or a payload need one,
//! give the JSON text instead (`config_json = '{"limit": null}'`,
//! `arguments_json = '…'`). A question with no answer left gets its
//! default.
//!
//! # The golden file
//!
//! Beside each case, `NAME.golden.jsonl` holds what the run decided, one
//! JSON object per line ([`RECORDED_EVENTS`]): each turn's `user` line,
//! `interceptor` (block, replace, error), `notice`, `approval_requested` /
//! `approval_answered`, retries, pauses, compactions, model changes, tool
//! deadlines, stream retractions, quarantines and `run_end`. Paths are
//! replaced by placeholders (`<workspace>`, `<cases>`, `<plugins>`,
//! `<tmp>`), durations are dropped, each object's `type` comes first and
//! its other keys are sorted — so the file is the same on every machine,
//! and a change in a pack's behaviour is a readable diff.
//!
//! # Running
//!
//! [`Harness::check`] replays one case in a scratch workspace with a fresh
//! registry (fresh pack instances), the standard tools, sandboxed `bash`
//! and `delegate` ([`setup`]), exactly as `chimera run` wires a session,
//! and returns a [`Verdict`]: passed, differs (with the unified diff),
//! missing golden, or blessed. [`Harness::check_path`] does a whole
//! directory, every case file checked before any runs.
//!
//! ```no_run
//! use chimera_host::pack_test::{Harness, Mode};
//! use chimera_host::plugins::SearchDir;
//! use std::path::Path;
//!
//! let harness = Harness::new(vec![SearchDir::all("target/debug")]);
//! let report = harness.check_path(Path::new("tests/cases"), Mode::Check)?;
//! assert!(report.passed(), "{report}");
//! # Ok::<(), chimera_host::pack_test::HarnessError>(())
//! ```
//!
//! A pack's own `cargo test` runs the same cases through the `chimera`
//! binary instead (`chimera_plugin_api::testing::run_cases`, feature
//! `testing`), so a pack never depends on the host crate.
//!
//! # Recording
//!
//! [`Recorder`] wraps a session's provider and approver and listens to its
//! bus: every request (after the seams) and reply, the operator's answers
//! to packs, the user turns and the packs loaded, with credentials left
//! out ([`record`]). [`Recording::to_case`] turns that into a case whose
//! script is the real model's replies.

pub mod case;
pub mod golden;
pub mod harness;
pub mod record;
pub mod setup;

pub use case::{case_files, load_cases, Case, CaseError, CasePack};
pub use golden::{golden_path, Normaliser, GOLDEN_SUFFIX, RECORDED_EVENTS};
pub use harness::{Harness, HarnessError, Mode, Outcome, Report, Verdict};
pub use record::{RecordedPack, Recorder, Recording, SessionInfo, RECORDING_FORMAT};
pub use setup::{
    load_in_order, loaded_event, session_builder, standard_tools, PackLoadError, SYSTEM_PROMPT,
};
