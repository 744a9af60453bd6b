//! The cost of the ABI boundary alone: each real pack against the same
//! policy written as a host closure, side by side in one run.
//!
//! Run: `cargo bench -p chimera-tests --bench packs_vs_closures`
//! (one case: append `-- <group>`, e.g. `-- redactor_envelope`).
//!
//! Every case times two chains through the real chain runner (`run_chain`),
//! with the same inputs and the same decisions:
//!
//! * `pack`: the pack loaded from its `.so` through the plugin manager, run
//!   exactly as the agent loop runs it (ABI views, `sabi_trait` dispatch,
//!   the pack's health record, replacements converted back into host types);
//! * `closure`: the same policy as a host closure over the host's own types
//!   (`ToolCall`, `ProviderRequest`, `ToolResult`, ...), calling the pack
//!   crate's own functions (plan-gate's check, the redactor's per-string
//!   scrub, the spawner's rewrite) and walking host values where the pack
//!   walks ABI views, with the same replacement shape, so only the boundary
//!   differs.
//!
//! Cases:
//!
//! * `tool_call_allow_3`: three allowing fixture interceptors
//!   (`{"tool_call": {"action": "allow", "count": 3}}`): count the call on a
//!   shared atomic, check the tool filter and the sleep, allow.
//! * `plan_gate_gated_after_plan`: plan-gate (default config) on `bash` in a
//!   session that already planned (a `think` call through the same chain,
//!   before timing): a lookup in the per-session LRU behind a mutex, allow.
//!   The closure calls the pack crate's own `PlanGate::check`; host closures
//!   do not see the session, so it captures the id of the session it was
//!   built for.
//! * `redactor_envelope`: the redactor (default config) on a 20-message
//!   `provider_request` envelope with two headers and a secret in three
//!   messages (one in tool-call arguments): a replacement envelope.
//! * `spawner_rewrite`: delegate-spawner (default config) rewriting
//!   `spawn_research` into `delegate` with the rendered task.
//! * `redactor_result_1mib`: the redactor on a 1 MiB `tool_result` with a
//!   near-miss (`sk-ab12`) about every 85 bytes and a real secret every 4 KiB;
//!   `redactor_result_1mib_clean`: the same size with neither (no decision).
//!
//! Both sides' outputs are checked equal once before timing. Criterion
//! reports each side's absolute time; a table at the end gives the medians
//! and the figure that matters, the ratio **pack / closure** (absolute times
//! drift on a shared machine, the ratio is measured side by side).
//!
//! Long by design: each pack's closure twin sits beside its benchmark, so a
//! reader can check the two policies are the same.

#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "statistics over measured durations and sizes, far from the limits"
)]
#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use chimera_host::interception::{
    run_chain, ChainContext, ChainOutcome, InterceptDecision, Interceptor,
    ProviderRequestInterceptor, SessionFacts, ToolCallInterceptor, ToolResultInterceptor,
};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::{
    Arguments, Headers, Message, ProviderRequest, ToolCall, ToolList, ToolResult, ToolSchema,
};
use chimera_plugin_api::sdk::{Decision as PackDecision, Pack};
use criterion::{criterion_group, Criterion};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const MIB: usize = 1 << 20;
const SESSION: &str = "bench-session";

/// The groups, in the order they run (and the summary prints).
const CASES: &[&str] = &[
    "tool_call_allow_3",
    "plan_gate_gated_after_plan",
    "redactor_envelope",
    "spawner_rewrite",
    "redactor_result_1mib",
    "redactor_result_1mib_clean",
];

// ---------------------------------------------------------------- helpers

/// A manager with pack `name` loaded from its `.so` with `config`.
fn load(name: &str, config: &str) -> PluginManager {
    let manager = PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs());
    manager
        .load(name, config)
        .unwrap_or_else(|error| panic!("{name} loads: {error}"));
    manager
}

fn context(facts: &SessionFacts) -> ChainContext<'_> {
    ChainContext {
        session: facts,
        events: None,
    }
}

fn call_tool(
    chain: &[ToolCallInterceptor],
    call: &ToolCall,
    facts: &SessionFacts,
) -> ChainOutcome<ToolCall> {
    run_chain(chain, &(), call, &context(facts))
}

fn call_request(
    chain: &[ProviderRequestInterceptor],
    request: &ProviderRequest,
    facts: &SessionFacts,
) -> ChainOutcome<ProviderRequest> {
    run_chain(chain, &(), request, &context(facts))
}

fn call_result(
    chain: &[ToolResultInterceptor],
    call: &ToolCall,
    result: &ToolResult,
    facts: &SessionFacts,
) -> ChainOutcome<ToolResult> {
    run_chain(chain, call, result, &context(facts))
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group
}

// ------------------------------------------------ 1. fixture: allow x 3

const FIXTURE_ALLOW_3: &str = r#"{"tool_call": {"action": "allow", "count": 3}}"#;

/// The fixture's `tool_call` interceptors as host closures, built from the
/// same configuration (its `Behavior`): each counts the call on the pack's
/// shared counter, checks the tool filter, sleeps if told to, then answers
/// the configured action.
fn fixture_closures(config: &str) -> Vec<ToolCallInterceptor> {
    use chimera_fixture_pack::Action;
    let config: chimera_fixture_pack::Config = serde_json::from_str(config).expect("config");
    let behavior = config.tool_call.expect("a tool_call behaviour");
    let calls = Arc::new(AtomicU64::new(0));
    (0..behavior.count)
        .map(|i| {
            let (calls, b) = (Arc::clone(&calls), behavior.clone());
            Interceptor::tool_call(format!("tool_call-{i}"), move |call: &ToolCall| {
                calls.fetch_add(1, Ordering::Relaxed);
                if !(b.tools.is_empty() || b.tools.contains(&call.name)) {
                    return Ok(InterceptDecision::Allow);
                }
                if b.sleep_ms > 0 {
                    std::thread::sleep(Duration::from_millis(b.sleep_ms));
                }
                match b.action {
                    Action::Allow => Ok(InterceptDecision::Allow),
                    Action::Block => Ok(InterceptDecision::Block(b.reason.clone())),
                    other => panic!("the bench reproduces allow and block only, not {other:?}"),
                }
            })
        })
        .collect()
}

fn tool_call_allow_3(c: &mut Criterion) {
    let facts = SessionFacts::new(SESSION);
    let call = ToolCall::new(
        "call_1",
        "write_file",
        json!({"path": "/data/x.txt", "count": 3, "recursive": true}),
    );
    let closure = fixture_closures(FIXTURE_ALLOW_3);
    let manager = load("fixture", FIXTURE_ALLOW_3);
    let pack = manager.registry().get_all().tool_call;
    assert_eq!((closure.len(), pack.len()), (3, 3));
    for chain in [&closure, &pack] {
        let outcome = call_tool(chain, &call, &facts);
        assert!(outcome.replaced.is_none() && outcome.blocked.is_none());
    }
    let mut group = group(c, "tool_call_allow_3");
    group.bench_function("closure", |b| {
        b.iter(|| black_box(call_tool(&closure, black_box(&call), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(call_tool(&pack, black_box(&call), &facts)));
    });
    group.finish();
}

// ------------------------------------------------------ 2. plan-gate

/// plan-gate's own gate (the pack crate's `PlanGate::check`, default
/// config), called from a host closure over the host's `ToolCall`: the same
/// code on both sides, so the difference is the boundary.
fn plan_gate_closure(session: &str) -> Vec<ToolCallInterceptor> {
    let gate = <plan_gate::PlanGate as Pack>::new(plan_gate::Config::default())
        .unwrap_or_else(|error| panic!("plan-gate's default config builds: {error}"));
    let session = session.to_owned();
    vec![Interceptor::tool_call("gate", move |call: &ToolCall| {
        Ok(match gate.check(&session, &call.name) {
            PackDecision::Allow => InterceptDecision::Allow,
            PackDecision::Block(reason) => InterceptDecision::Block(reason),
            PackDecision::Replace(_) => unreachable!("plan-gate never rewrites a call"),
        })
    })]
}

fn plan_gate_gated_after_plan(c: &mut Criterion) {
    let facts = SessionFacts::new(SESSION);
    let think = ToolCall::new(
        "call_1",
        "think",
        json!({"thought": "plan: edit, then test"}),
    );
    let bash = ToolCall::new("call_2", "bash", json!({"command": "cargo test --quiet"}));
    let closure = plan_gate_closure(&facts.session_id);
    let manager = load("plan-gate", "");
    let pack = manager.registry().get_all().tool_call;
    for chain in [&closure, &pack] {
        let before = call_tool(chain, &bash, &facts);
        assert!(before.blocked.is_some(), "unplanned: blocked");
        let planning = call_tool(chain, &think, &facts);
        assert!(planning.blocked.is_none() && planning.replaced.is_none());
        let after = call_tool(chain, &bash, &facts);
        assert!(
            after.blocked.is_none() && after.replaced.is_none(),
            "planned: allowed"
        );
    }
    let mut group = group(c, "plan_gate_gated_after_plan");
    group.bench_function("closure", |b| {
        b.iter(|| black_box(call_tool(&closure, black_box(&bash), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(call_tool(&pack, black_box(&bash), &facts)));
    });
    group.finish();
}

// ------------------------------------------------------ 3, 5. redactor

/// The redactor's scrub over the host's types: the pack crate's own
/// per-string functions (default config), walked over host messages, so
/// only the traversal and the boundary differ.
struct Scrubber {
    redactor: redactor::Redactor,
}

impl Scrubber {
    fn new() -> Self {
        let redactor = <redactor::Redactor as Pack>::new(redactor::Config::default())
            .unwrap_or_else(|error| panic!("the default config builds: {error}"));
        Scrubber { redactor }
    }

    fn text(&self, text: &str) -> Option<String> {
        self.redactor.text(text)
    }

    /// Scrubbed arguments, or `None` (the model's text kept verbatim).
    fn arguments(&self, arguments: &Arguments) -> Option<Arguments> {
        let scrubbed = self.redactor.arguments(arguments.as_str())?;
        Arguments::from_json(&scrubbed).ok()
    }

    fn message(&self, message: &Message) -> Option<Message> {
        let content = self.text(&message.content);
        let blocks: Vec<Option<String>> = message
            .blocks
            .iter()
            .map(|b| {
                if b.kind == "text" {
                    self.text(&b.text)
                } else {
                    None
                }
            })
            .collect();
        let calls: Vec<Option<Arguments>> = message
            .tool_calls
            .iter()
            .map(|c| self.arguments(&c.arguments))
            .collect();
        if content.is_none()
            && blocks.iter().all(Option::is_none)
            && calls.iter().all(Option::is_none)
        {
            return None;
        }
        let mut owned = message.clone();
        if let Some(content) = content {
            owned.content = content;
        }
        for (block, scrubbed) in owned.blocks.iter_mut().zip(blocks) {
            if let Some(text) = scrubbed {
                block.text = text;
            }
        }
        for (call, scrubbed) in owned.tool_calls.iter_mut().zip(calls) {
            if let Some(arguments) = scrubbed {
                call.arguments = arguments;
            }
        }
        Some(owned)
    }

    fn header_values(&self, headers: &Headers) -> Option<Headers> {
        let mut changed = false;
        let scrubbed = headers
            .iter()
            .map(|(name, value)| {
                let new = self.redactor.header(name, value);
                changed |= new.is_some();
                (name.to_owned(), new.unwrap_or_else(|| value.to_owned()))
            })
            .collect();
        changed.then_some(Headers(scrubbed))
    }

    /// A replacement envelope (unchanged messages cloned), or `None`.
    fn request(&self, request: &ProviderRequest) -> Option<ProviderRequest> {
        let messages: Vec<Option<Message>> =
            request.messages.iter().map(|m| self.message(m)).collect();
        let headers = request.headers.as_ref().and_then(|h| self.header_values(h));
        if headers.is_none() && messages.iter().all(Option::is_none) {
            return None;
        }
        Some(ProviderRequest {
            model: request.model.clone(),
            messages: request
                .messages
                .iter()
                .zip(messages)
                .map(|(original, scrubbed)| scrubbed.unwrap_or_else(|| original.clone()))
                .collect(),
            tools: request.tools.clone(),
            kwargs: request.kwargs.clone(),
            headers: headers.or_else(|| request.headers.clone()),
        })
    }

    fn result(&self, result: &ToolResult) -> Option<ToolResult> {
        let output = self.text(&result.output);
        let error = result.error.as_deref().and_then(|e| self.text(e));
        if output.is_none() && error.is_none() {
            return None;
        }
        Some(ToolResult {
            output: output.unwrap_or_else(|| result.output.clone()),
            error: error.or_else(|| result.error.clone()),
            metadata: result.metadata.clone(),
        })
    }
}

fn redactor_closures() -> (Vec<ProviderRequestInterceptor>, Vec<ToolResultInterceptor>) {
    let scrubber = Arc::new(Scrubber::new());
    let wire = Arc::clone(&scrubber);
    let request = Interceptor::provider_request("wire", move |request: &ProviderRequest| {
        Ok(wire
            .request(request)
            .map_or(InterceptDecision::Allow, InterceptDecision::Replace))
    });
    let result = Interceptor::tool_result("result", move |_: &ToolCall, result: &ToolResult| {
        Ok(scrubber
            .result(result)
            .map_or(InterceptDecision::Allow, InterceptDecision::Replace))
    });
    (vec![request], vec![result])
}

/// `sk-` and 20 alphanumerics, distinct per `seed`.
fn secret(seed: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = String::from("sk-");
    for _ in 0..20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push(ALPHABET[(state % ALPHABET.len() as u64) as usize] as char);
    }
    out
}

fn schema(name: &str, description: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

/// 20 messages (system, then user/assistant alternating; four assistant
/// messages propose a tool call), two headers, a secret in messages 3
/// (user text), 8 (assistant text) and 12 (tool-call arguments).
fn envelope() -> ProviderRequest {
    let mut messages = vec![Message::system(
        "You are Chimera, a coding agent working in /srv/app. Read before you edit, plan before \
         you write, keep answers short, and never print credentials back to the user.",
    )];
    for i in 1..20u64 {
        let message = if i % 2 == 1 {
            let text = if i == 3 {
                format!(
                    "The staging API rejects the request; the key I was given is {} if that \
                     helps. Can you find where the client builds its headers?",
                    secret(i)
                )
            } else {
                format!(
                    "Step {i}: look at the handler for /api/v1/items/{} and tell me why the \
                     pagination cursor is dropped after the second page of results.",
                    i * 37
                )
            };
            Message::user(text)
        } else {
            let text = if i == 8 {
                format!(
                    "The client reads the token from the environment; right now it is set to {} \
                     in .env.staging, which is checked in. I will move it out of the repository.",
                    secret(i)
                )
            } else {
                format!(
                    "Looking at module {i}: the cursor is parsed in items::list and re-encoded in \
                     paginate(), which drops the `after` field when the page is short."
                )
            };
            let calls = match i {
                4 => vec![ToolCall::new(
                    format!("call_{i}"),
                    "read_file",
                    json!({"path": "src/api/items.rs", "max_lines": 200}),
                )],
                8 => vec![ToolCall::new(
                    format!("call_{i}"),
                    "bash",
                    json!({"command": "git grep -n 'fn paginate' -- src/", "timeout": 30}),
                )],
                12 => vec![ToolCall::new(
                    format!("call_{i}"),
                    "bash",
                    json!({
                        "command": format!(
                            "curl -s -H 'Authorization: Bearer {}' https://staging.example.com/api/v1/items?limit=2",
                            secret(i)
                        ),
                        "timeout": 30
                    }),
                )],
                16 => vec![ToolCall::new(
                    format!("call_{i}"),
                    "write_file",
                    json!({"path": "src/api/paginate.rs", "content": "pub fn paginate() {}\n"}),
                )],
                _ => Vec::new(),
            };
            Message::assistant(text, calls)
        };
        messages.push(message);
    }
    let string = json!({"type": "string"});
    let tools = ToolList::new(vec![
        schema(
            "read_file",
            "Reads a file of the workspace.",
            json!({"type": "object", "properties": {"path": string, "max_lines": {"type": "integer"}}, "required": ["path"]}),
        ),
        schema(
            "bash",
            "Runs a shell command in the workspace.",
            json!({"type": "object", "properties": {"command": string, "timeout": {"type": "integer"}}, "required": ["command"]}),
        ),
        schema(
            "write_file",
            "Writes a file of the workspace.",
            json!({"type": "object", "properties": {"path": string, "content": string}, "required": ["path", "content"]}),
        ),
    ]);
    let Value::Object(kwargs) = json!({"temperature": 0.2, "max_tokens": 1024}) else {
        unreachable!("an object literal")
    };
    ProviderRequest {
        model: "bench-model".to_owned(),
        messages,
        tools,
        kwargs,
        headers: Some(Headers(vec![
            ("Authorization".to_owned(), format!("Bearer {}", secret(99))),
            ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
        ])),
    }
}

fn redactor_envelope(c: &mut Criterion) {
    let facts = SessionFacts::new(SESSION);
    let request = envelope();
    assert_eq!(request.messages.len(), 20);
    let (closure, _) = redactor_closures();
    let manager = load("redactor", "");
    let pack = manager.registry().get_all().provider_request;
    let by_closure = call_request(&closure, &request, &facts)
        .replaced
        .expect("the closure replaces the envelope");
    let by_pack = call_request(&pack, &request, &facts)
        .replaced
        .expect("the pack replaces the envelope");
    assert_eq!(by_closure, by_pack, "both sides produce the same envelope");
    let changed: Vec<usize> = (0..20)
        .filter(|&i| by_pack.messages[i] != request.messages[i])
        .collect();
    assert_eq!(
        changed,
        [3, 8, 12],
        "exactly three messages carried a secret"
    );
    let headers = by_pack.headers.as_ref().expect("headers");
    assert_eq!(headers.get("authorization"), Some("[redacted]"));
    assert_eq!(headers.get("anthropic-version"), Some("2023-06-01"));
    let mut group = group(c, "redactor_envelope");
    group.bench_function("closure", |b| {
        b.iter(|| black_box(call_request(&closure, black_box(&request), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(call_request(&pack, black_box(&request), &facts)));
    });
    group.finish();
}

/// 1 MiB of log lines. `near_misses`: every line (about 85 bytes) carries
/// `sk-` with too few characters to match, and a line every 4 KiB carries a
/// real secret; otherwise neither.
fn log_output(near_misses: bool) -> String {
    let mut text = String::with_capacity(MIB + 256);
    let mut next_secret = 4096;
    let mut line = 0u64;
    loop {
        line += 1;
        let mut row = format!(
            "2026-11-30T12:{:02}:{:02}Z INFO  worker-{} req=r{:08} path=/api/v1/items/{:03} ",
            line / 60 % 60,
            line % 60,
            line % 8,
            line,
            line % 977
        );
        if near_misses && text.len() >= next_secret {
            next_secret += 4096;
            let _ = write!(row, "auth={}", secret(line));
        } else if near_misses {
            let _ = write!(row, "sk-ab{:02}", line % 100);
        } else {
            row.push_str("status=ok");
        }
        let _ = writeln!(row, " {}ms", line % 250);
        if text.len() + row.len() > MIB {
            break;
        }
        text.push_str(&row);
    }
    // Pad the last line to exactly 1 MiB.
    let pad = MIB - text.len();
    text.pop();
    text.push_str(&" ".repeat(pad));
    text.push('\n');
    text
}

fn redactor_result(c: &mut Criterion, name: &str, near_misses: bool) {
    let facts = SessionFacts::new(SESSION);
    let call = ToolCall::new("call_1", "bash", json!({"command": "cat /var/log/app.log"}));
    let result = ToolResult::ok(log_output(near_misses));
    assert_eq!(result.output.len(), MIB);
    let (_, closure) = redactor_closures();
    let manager = load("redactor", "");
    let pack = manager.registry().get_all().tool_result;
    let by_closure = call_result(&closure, &call, &result, &facts);
    let by_pack = call_result(&pack, &call, &result, &facts);
    assert!(by_closure.blocked.is_none() && by_pack.blocked.is_none());
    assert_eq!(by_closure.replaced, by_pack.replaced, "both sides agree");
    if near_misses {
        let scrubbed = by_pack.replaced.expect("secrets are scrubbed");
        let lines = result.output.lines().count();
        let redactions = scrubbed.output.matches("[redacted]").count();
        assert_eq!(
            redactions,
            result.output.matches("auth=sk-").count(),
            "every real secret is scrubbed, nothing else"
        );
        assert_eq!(redactions, MIB / 4096 - 1, "one real secret every 4 KiB");
        assert_eq!(
            result.output.matches("sk-").count(),
            lines,
            "a near-miss or a secret on every line"
        );
        let bytes_per_line = MIB / lines;
        assert!(
            (80..=90).contains(&bytes_per_line),
            "{bytes_per_line} B/line"
        );
    } else {
        assert!(by_pack.replaced.is_none(), "nothing to scrub: no decision");
        assert!(!result.output.contains("sk-"));
    }
    let mut group = group(c, name);
    group.sample_size(30);
    group.bench_function("closure", |b| {
        b.iter(|| black_box(call_result(&closure, &call, black_box(&result), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(call_result(&pack, &call, black_box(&result), &facts)));
    });
    group.finish();
}

fn redactor_result_1mib(c: &mut Criterion) {
    redactor_result(c, "redactor_result_1mib", true);
}

fn redactor_result_1mib_clean(c: &mut Criterion) {
    redactor_result(c, "redactor_result_1mib_clean", false);
}

// ------------------------------------------------ 4. delegate-spawner

fn spawner_closure() -> Vec<ToolCallInterceptor> {
    let config = delegate_spawner::Config::default();
    vec![Interceptor::tool_call("rewrite", move |call: &ToolCall| {
        let matches = call.name != config.delegate_tool
            && (config.names.contains(&call.name)
                || (!config.prefix.is_empty() && call.name.starts_with(&config.prefix)));
        if !matches {
            return Ok(InterceptDecision::Allow);
        }
        // The pack crate's own functions: the same work, exactly.
        let task = delegate_spawner::DelegateSpawner::task(&call.name, &call.arguments.parse());
        let arguments = delegate_spawner::DelegateSpawner::task_arguments(&task);
        Ok(InterceptDecision::Replace(ToolCall {
            id: call.id.clone(),
            name: config.delegate_tool.clone(),
            arguments: Arguments::from_json(&arguments)
                .map_err(|e| chimera_host::interception::InterceptError::msg(e.to_string()))?,
        }))
    })]
}

fn spawner_rewrite(c: &mut Criterion) {
    let facts = SessionFacts::new(SESSION);
    let call = ToolCall::new(
        "call_7",
        "spawn_research",
        json!({"query": "bean varieties", "depth": 2}),
    );
    let closure = spawner_closure();
    let manager = load("delegate-spawner", "");
    let pack = manager.registry().get_all().tool_call;
    let expected = ToolCall::new(
        "call_7",
        "delegate",
        json!({"task": "spawn_research: {\"depth\": 2, \"query\": \"bean varieties\"}"}),
    );
    for chain in [&closure, &pack] {
        let outcome = call_tool(chain, &call, &facts);
        assert!(outcome.blocked.is_none());
        assert_eq!(outcome.replaced.as_ref(), Some(&expected));
    }
    let mut group = group(c, "spawner_rewrite");
    group.bench_function("closure", |b| {
        b.iter(|| black_box(call_tool(&closure, black_box(&call), &facts)));
    });
    group.bench_function("pack", |b| {
        b.iter(|| black_box(call_tool(&pack, black_box(&call), &facts)));
    });
    group.finish();
}

// ---------------------------------------------------------------- summary

/// Where criterion writes its estimates: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else `<target>/criterion` (the target
/// directory this bench binary was built in).
fn criterion_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(home.into());
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.ancestors().nth(3)?.join("criterion"))
}

/// The median (ns) criterion estimated for `group/function` in this run.
fn median_ns(
    home: &std::path::Path,
    group: &str,
    function: &str,
    since: SystemTime,
) -> Option<f64> {
    let file = home.join(group).join(function).join("new/estimates.json");
    if std::fs::metadata(&file).ok()?.modified().ok()? < since {
        return None; // left from an earlier run
    }
    let estimates: Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

fn summary(since: SystemTime) {
    let Some(home) = criterion_home() else {
        return;
    };
    let rows: Vec<String> = CASES
        .iter()
        .filter_map(|case| {
            let closure = median_ns(&home, case, "closure", since)?;
            let pack = median_ns(&home, case, "pack", since)?;
            Some(format!(
                "| {case} | {} | {} | {:.2}× |",
                human(closure),
                human(pack),
                pack / closure
            ))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    println!("\nmedians of this run (criterion), pack / closure is the figure that matters");
    println!("| case | closure | pack | pack / closure |");
    println!("|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}

criterion_group!(
    benches,
    tool_call_allow_3,
    plan_gate_gated_after_plan,
    redactor_envelope,
    spawner_rewrite,
    redactor_result_1mib,
    redactor_result_1mib_clean
);

/// `criterion_main!`, then the summary table.
fn main() {
    let since = SystemTime::now();
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary(since);
}
