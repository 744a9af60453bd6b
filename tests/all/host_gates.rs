//! The gates that lean on the host — `token-budget` (usage and cost in the
//! session facts, model downgrade), `tool-timeout` (tool deadlines) and
//! `context-window` (compaction) — through the binary and the loaded packs.

use crate::harness::Harness;
use crate::helpers::run_with_packs as run;
use chimera_host::agent::{AgentEvent, CallSource};
use chimera_host::tools::{Tool, ToolContext, ToolError};
use chimera_tests::cli::Ran;
use serde_json::{json, Value};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

fn run_end(ran: &Ran) -> Value {
    ran.of_type("run_end").pop().expect("run_end")
}

fn notices(ran: &Ran) -> Vec<String> {
    ran.of_type("notice")
        .iter()
        .map(|n| n["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A reply calling `bash true` that reports `input` + `output` tokens.
fn spending(input: u64, output: u64) -> Value {
    json!({"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "true"}}],
           "usage": {"input_tokens": input, "output_tokens": output}})
}

/// A total-token ceiling of 100 whose estimate of a request is nothing, so
/// only what the provider reported counts.
fn ceiling(extra: Value) -> Value {
    let mut config = json!({"estimate_factor": 0.000_001});
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    config
}

#[test]
fn a_session_at_its_token_ceiling_is_blocked_before_the_next_call_and_under_it_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let budget = ceiling(json!({"max_tokens": 100}));
    let at_cap = run(
        dir.path(),
        &[("token-budget", budget.clone())],
        &json!([spending(60, 40), {"content": "never asked"}]),
        &["go"],
        "",
    );
    assert_eq!(
        run_end(&at_cap)["reason"],
        "interceptor_blocked: session budget exceeded (100/100 tokens)"
    );
    assert_eq!(
        notices(&at_cap),
        ["Token budget exhausted for this session."]
    );

    let under = run(
        dir.path(),
        &[("token-budget", budget)],
        &json!([spending(30, 20), {"content": "done"}]),
        &["go"],
        "",
    );
    assert_eq!(under.status(), 0, "{}", under.stderr());
    assert_eq!(run_end(&under)["output"], "done");
    assert!(notices(&under).is_empty());
}

#[test]
fn dollars_are_priced_by_the_price_file_and_capped() {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    // $1000 per million tokens: 60 tokens cost $0.06.
    std::fs::write(&prices, r#"{"scripted": {"input": 1000, "output": 1000}}"#).unwrap();
    let prices = prices.display().to_string();
    let ran = run(
        dir.path(),
        &[(
            "token-budget",
            ceiling(json!({"ceilings": [{"max_usd": 0.05}]})),
        )],
        &json!([spending(30, 30), {"content": "never asked"}]),
        &["--prices", &prices, "go"],
        "",
    );
    assert_eq!(
        run_end(&ran)["reason"],
        "interceptor_blocked: session budget exceeded ($0.0600 / $0.0500)"
    );

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, r#"{"scripted": {"input": -1, "output": 1}}"#).unwrap();
    let refused = run(
        dir.path(),
        &[],
        &json!([]),
        &["--prices", &broken.display().to_string(), "go"],
        "",
    );
    // A FIFO where the price file should be is refused, not waited on.
    let fifo = dir.path().join("prices.fifo");
    chimera_tests::make_fifo(&fifo);
    let waiting = run(
        dir.path(),
        &[],
        &json!([]),
        &["--prices", &fifo.display().to_string(), "go"],
        "",
    );
    assert_eq!(waiting.status(), 2);
    assert!(
        waiting.error_line().ends_with("not a regular file"),
        "{}",
        waiting.error_line()
    );
    assert_eq!(refused.status(), 2);
    assert!(
        refused
            .error_line()
            .contains("prices must be finite and not negative"),
        "{}",
        refused.error_line()
    );
}

#[test]
fn over_budget_the_call_goes_to_the_cheapest_other_candidate_and_the_event_says_from_what() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = dir.path().join("requests.jsonl");
    let budget = ceiling(json!({
        "on_exceed": "downgrade-model",
        "downgrade_candidates": ["claude-opus-4-7", "claude-haiku-4-5-20251001", "claude-sonnet-4-6"],
        "ceilings": [{"max_total_tokens": 10}]
    }));
    let ran = run(
        dir.path(),
        &[("token-budget", budget)],
        &json!([spending(20, 20), {"content": "cheaper"}]),
        &["--record-requests", &recorded.display().to_string(), "go"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let models: Vec<String> = std::fs::read_to_string(&recorded)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["model"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(models, ["scripted", "claude-haiku-4-5-20251001"]);
    let changed = ran.of_type("model_changed");
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["from"], "scripted");
    assert_eq!(changed[0]["to"], "claude-haiku-4-5-20251001");
    assert!(ran
        .of_type("interceptor")
        .iter()
        .any(|e| e["interceptor"] == "token-budget/budget" && e["decision"] == "replaced"));
}

#[test]
fn the_ledger_charges_each_source_and_packs_read_it_from_the_session_facts() {
    let manager = crate::helpers::manager();
    manager
        .load(
            "token-budget",
            &json!({"estimate_factor": 0.000_001, "ceilings": [
                {"dimension": "source_plugin", "match": "agent", "max_input_tokens": 25}
            ]})
            .to_string(),
        )
        .expect("token-budget loads");
    let run = Harness::new(json!({"responses": [
        {"tool_calls": [{"id": "c1", "name": "echo", "arguments": {"message": "hi"}}],
         "usage": {"input_tokens": 20, "output_tokens": 5}},
        {"tool_calls": [{"id": "c2", "name": "echo", "arguments": {"message": "hi"}}],
         "usage": {"input_tokens": 10, "output_tokens": 5}},
        {"content": "never asked"}
    ]}))
    .registry(Arc::clone(manager.registry()))
    .run("go");
    let agent = run.session.ledger().of(CallSource::Agent);
    assert_eq!((agent.input_tokens, agent.output_tokens), (30, 10));
    assert_eq!(
        run.session.ledger().of(CallSource::GateRetry).input_tokens,
        0
    );
    assert!(
        run.result
            .output
            .contains("source_plugin budget exceeded (input 30/25 tokens)"),
        "{}",
        run.result.output
    );
    assert_eq!(run.requests().len(), 2);
}

#[test]
fn a_command_past_its_deadline_is_stopped_with_the_gates_text_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run(
        dir.path(),
        &[(
            "tool-timeout",
            json!({"default_timeout": "30s", "per_tool": {"ba*": "300ms"}}),
        )],
        &json!([
            {"tool_calls": [{"id": "hang", "name": "bash", "arguments": {"command": "sleep 1; touch late-marker"}}]},
            {"content": "moved on"}
        ]),
        &["go"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let timeouts = ran.of_type("tool_timeout");
    assert_eq!(timeouts.len(), 1);
    assert_eq!(timeouts[0]["name"], "bash");
    assert_eq!(timeouts[0]["call_id"], "hang");
    assert_eq!(timeouts[0]["timeout_ms"], 300);
    assert_eq!(timeouts[0]["interceptor"], "tool-timeout/deadline");
    assert_eq!(timeouts[0]["turn"], 0);
    let result = ran.of_type("tool_result").pop().unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"],
        "tool bash exceeded timeout 300ms; raise via gates.tool_timeout.per_tool.bash: <duration>"
    );
    assert_eq!(run_end(&ran)["output"], "moved on");
    // The command was killed at the deadline, not left to finish.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.path().join("late-marker").exists());
}

/// A tool that runs until the test lets it go.
struct Stuck(Mutex<mpsc::Receiver<()>>);

impl Tool for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }
    fn description(&self) -> &str {
        "Never returns on its own."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let _ = self.0.lock().unwrap().recv();
        Ok("late".to_owned())
    }
}

#[test]
fn a_tool_that_never_returns_is_abandoned_at_its_deadline_and_its_late_result_dropped() {
    let manager = crate::helpers::manager();
    manager
        .load("tool-timeout", r#"{"default_timeout": "50ms"}"#)
        .expect("tool-timeout loads");
    let (release, held) = mpsc::channel();
    let run = Harness::new(json!({"responses": [
        {"tool_calls": [{"id": "hang", "name": "stuck", "arguments": {}}]},
        {"content": "moved on"}
    ]}))
    .registry(Arc::clone(manager.registry()))
    .tool(Arc::new(Stuck(Mutex::new(held))))
    .run("go");
    assert_eq!(run.result.output, "moved on");
    assert_eq!(
        run.tool_messages(),
        ["tool stuck exceeded timeout 50ms; raise via gates.tool_timeout.per_tool.stuck: <duration>"]
    );
    release.send(()).unwrap();
    // The worker thread publishes the event once it has the late result:
    // wait for it (up to ten seconds), asserting what it says, not when.
    let late = || {
        run.events.lock().unwrap().iter().find_map(|e| match e {
            AgentEvent::LateResultSuppressed { call_id, reason } => {
                Some((call_id.clone(), reason.clone()))
            }
            _ => None,
        })
    };
    let suppressed = (0..1000)
        .find_map(|_| {
            late().or_else(|| {
                std::thread::sleep(Duration::from_millis(10));
                None
            })
        })
        .expect("the late result is reported");
    assert_eq!(
        suppressed,
        (
            "hang".to_owned(),
            "tool stuck already timed out; suppressing late result".to_owned()
        )
    );
    assert_eq!(
        run.tool_messages().len(),
        1,
        "the late result never reaches the history"
    );
}

#[test]
fn a_request_near_the_window_compacts_the_older_turns_and_is_sent_once_more() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = dir.path().join("requests.jsonl");
    let long = "x".repeat(200);
    let ran = run(
        dir.path(),
        &[("context-window", json!({"max_context_tokens": 100}))],
        &json!([
            {"content": long},
            {"content": "they talked about x"},
            {"content": "second answer"}
        ]),
        &[
            "--system",
            "S",
            "--compact-keep-turns",
            "1",
            "--record-requests",
            &recorded.display().to_string(),
            "--turns-from-stdin",
        ],
        &format!("{long}\nand now?\n"),
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert_eq!(
        notices(&ran),
        ["Context approaching limit (102 estimated tokens). Compacting conversation..."]
    );
    let phases: Vec<(String, u64, u64)> = ran
        .of_type("compaction")
        .iter()
        .map(|e| {
            (
                e["phase"].as_str().unwrap().to_owned(),
                e["summarised"].as_u64().unwrap(),
                e["kept"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [("started".to_owned(), 2, 1), ("finished".to_owned(), 2, 1)]
    );
    let requests: Vec<Value> = std::fs::read_to_string(&recorded)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(requests.len(), 3, "turn 1, the summary call, turn 2 once");
    let summary_call = &requests[1]["messages"];
    assert!(summary_call[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("Summarise the conversation"));
    assert!(summary_call[1]["content"].as_str().unwrap().contains(&long));
    let retried = &requests[2]["messages"];
    let contents: Vec<&str> = retried
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "S",
            "Summary of the earlier conversation:\nthey talked about x",
            "and now?"
        ]
    );
    assert_eq!(run_end(&ran)["output"], "second answer");
}

#[test]
fn a_window_that_compaction_cannot_help_blocks_the_request_with_the_gates_reason() {
    let dir = tempfile::tempdir().unwrap();
    let long = "y".repeat(400);
    let ran = run(
        dir.path(),
        &[("context-window", json!({"max_context_tokens": 100}))],
        &json!([{"content": "never asked"}]),
        &["--system", "S", &long],
        "",
    );
    assert_eq!(ran.status(), 1);
    let reason = run_end(&ran)["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.starts_with("interceptor_blocked: Context window approaching limit (100 / 100 estimated tokens), triggering compaction (the conversation has nothing older"),
        "{reason}"
    );
    assert!(ran.of_type("compaction").is_empty());
}

#[test]
fn calls_that_finish_within_their_deadline_are_recorded_as_usual_on_either_path() {
    let manager = crate::helpers::manager();
    manager
        .load("tool-timeout", r#"{"default_timeout": "5s"}"#)
        .expect("tool-timeout loads");
    // `echo` (a test tool) runs on a thread of its own; `think` stops by
    // its deadline itself and runs inline.
    let run = Harness::new(json!({"responses": [
        {"tool_calls": [
            {"id": "a", "name": "echo", "arguments": {"message": "hi"}},
            {"id": "b", "name": "think", "arguments": {"thought": "plan"}}
        ]},
        {"content": "done"}
    ]}))
    .registry(Arc::clone(manager.registry()))
    .tool(Arc::new(chimera_host::tools::ThinkTool))
    .run("go");
    assert_eq!(run.result.output, "done");
    let messages = run.tool_messages();
    assert_eq!(messages[0], "Echo: hi");
    assert!(!messages[1].contains("exceeded timeout"), "{}", messages[1]);
    let timeouts = run
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolTimeout { .. }))
        .count();
    assert_eq!(timeouts, 0);
}
