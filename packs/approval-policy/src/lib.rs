//! # approval-policy
//!
//! Asks the operator before the tool calls and provider requests its rules
//! match: the rule's question goes to the host's operator (the terminal,
//! an answers file, `--yes` / `--no`), whose answer decides.
//!
//! * `tool_call` (a gate that asks): the call is described as the payload
//!   `{"action_kind": "tool.invoke", "tool": <name>, "args": <arguments>,
//!   "id": <call id>, "turn_id": <turn index>}`. The first rule that matches
//!   asks; no rule matching, the call passes untouched. `allow` lets the call
//!   go on through the rest of the chain; `reject` blocks it; `edit` (when
//!   the rule offers it) replaces the call's arguments with the operator's —
//!   and the edited call still passes the rest of the chain, the hooks and
//!   the permission policy. Arguments that are not JSON are an error, so
//!   the call is blocked (this seam fails closed).
//! * `provider_request` (a gate that asks): the request is the payload
//!   `{"action_kind": "llm.request", "model": <model>, "args": {"model":
//!   <model>, "tools": [<tool names>], "temperature": .., "max_tokens":
//!   ..}}` (the last two when the call options carry them). `edit` is not
//!   offered here. The host's own gate retries (an `output` gate asking the
//!   model again) are not asked about, as in Nexus. This interceptor fails
//!   closed: should it ever fail, the request is blocked, not sent unasked.
//!
//! One question per call: the first matching rule asks, whatever rules
//! follow it. The pack registers on a seam only when some rule can be
//! about it (its `action_kind` admits the kind and every path it names can
//! exist in that payload: a rule on `tool` or `args.command` never looks at
//! provider requests), so requests cost nothing when every rule is about
//! tools.
//!
//! Configuration: `rules`, a list of rules, each with every key optional:
//! * `match`: an object of conditions that must all hold. A key is a dotted
//!   path into the payload (`tool`, `args.command`, `args.tools.0`); a
//!   string value is a glob over the value found there (`*` any run of
//!   characters, `/` and newlines included, `?` one character, `\` escapes
//!   the next one; `[..]` and `{a,b}` work too); a number or boolean must
//!   equal it. The value found is compared as text: a string as it is,
//!   anything else as its JSON (`args.tools` is `["bash","read_file"]`, so
//!   `*"bash"*` matches a request offering `bash`). A path with nothing at
//!   it does not match. No `match`: every
//!   call and every request.
//! * `mode`: `choices` (the only one this host's operator supports; Nexus's
//!   `free_text` and `both` refuse the load).
//! * `choices`: the answers offered, as ids or `{id, label, kind}` objects:
//!   `allow`, `reject` and optionally `edit` (default: allow and reject).
//!   Labels are accepted; the operator sees the ids.
//! * `default_choice`: the answer a timeout (or an answers file with no
//!   answer left) gives: `allow` or `reject` (default `reject`).
//! * `prompt`: the question, a template in which `{dotted.path}` is the
//!   payload's value there (missing: empty), e.g. `Run shell
//!   {args.command}?`. Default: `Approve <kind>: <target>` — the tool name
//!   or the model, e.g. `Approve tool.invoke: bash`.
//! * `prompt_synthesizer`: accepted so a Nexus rule loads unchanged, and
//!   unused: Nexus let another plugin rewrite the prompt before it was
//!   shown; this host has no such step, so `prompt` (or the default) is
//!   what the operator reads.
//! * `timeout`: how long the operator has, a duration (`30s`, `500ms`,
//!   `1m 30s`); then the default choice stands. Sub-second timeouts are
//!   honoured (Nexus kept whole seconds, so they meant "no timeout"); under
//!   a millisecond is refused. Default: as long as it takes.
//!
//! A malformed rule, an unknown key or a bad glob refuses the load with one
//! line naming the rule (`rules[2]: ...`).
//!
//! ```
//! use approval_policy::ApprovalPolicy;
//! use chimera_plugin_api::prelude::Pack;
//!
//! let config = serde_json::from_str(
//!     r#"{"rules": [{"match": {"tool": "bash", "args.command": "rm*"},
//!                    "prompt": "Run shell {args.command}?", "timeout": "30s"}]}"#,
//! )?;
//! let policy = ApprovalPolicy::new(config).map_err(|e| e.to_string())?;
//! let call = |command: &str| {
//!     ApprovalPolicy::tool_payload("bash", "call-1", serde_json::json!({"command": command}), 0)
//! };
//! assert!(policy.ask_for(&call("ls"), true).is_none());
//! let ask = policy.ask_for(&call("rm -rf build"), true).expect("asked");
//! assert_eq!(ask.prompt, "Run shell rm -rf build?");
//! assert!(!ask.default_allow && !ask.edit);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod policy;
mod rule;

pub use policy::{ApprovalPolicy, Config, REQUEST_KIND, TOOL_KIND};

chimera_plugin_api::export_packs!(ApprovalPolicy);
