//! docs/EVENTS.md against the events themselves: one value of every
//! `AgentEvent` variant, serialised as `--json` prints it, must find its
//! `type` and every key documented there, and every documented type, field
//! and example must still exist.

use crate::helpers::run;
use chimera_host::agent::{AgentEvent, NestedEvent, RunUsage, SourceUsage};
use chimera_host::types::ToolCall;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The section of every sub-agent event's extra fields.
const NESTED: &str = "Sub-agent events (any type)";

/// How many variants [`variant`] knows: bump it with a new arm.
const VARIANTS: usize = 25;

/// Which variant `event` is. No wildcard: a new variant does not compile
/// until it has an arm here, and the test below then wants a sample of it
/// (and docs/EVENTS.md a section).
fn variant(event: &AgentEvent) -> usize {
    match event {
        AgentEvent::User { .. } => 0,
        AgentEvent::Assistant { .. } => 1,
        AgentEvent::Notice { .. } => 2,
        AgentEvent::TurnPaused { .. } => 3,
        AgentEvent::Compaction { .. } => 4,
        AgentEvent::ModelChanged { .. } => 5,
        AgentEvent::ApprovalRequested { .. } => 6,
        AgentEvent::ApprovalAnswered { .. } => 7,
        AgentEvent::GateRetry { .. } => 8,
        AgentEvent::StreamRetract { .. } => 9,
        AgentEvent::StreamingDowngraded { .. } => 10,
        AgentEvent::AssistantDelta { .. } => 11,
        AgentEvent::ToolResult { .. } => 12,
        AgentEvent::ToolTimeout { .. } => 13,
        AgentEvent::LateResultSuppressed { .. } => 14,
        AgentEvent::Interceptor(_) => 15,
        AgentEvent::PackLoaded { .. } => 16,
        AgentEvent::PackReloaded { .. } => 17,
        AgentEvent::PackReloadFailed { .. } => 18,
        AgentEvent::PackQuarantined { .. } => 19,
        AgentEvent::InterceptorSlow { .. } => 20,
        AgentEvent::RunEnd { .. } => 21,
        AgentEvent::Nested(_) => 22,
        AgentEvent::StreamHold { .. } => 23,
        AgentEvent::StreamHoldEnd { .. } => 24,
    }
}

fn text(value: &str) -> String {
    value.to_owned()
}

/// One value of every variant, every optional field set.
fn samples() -> Vec<AgentEvent> {
    let usage = SourceUsage {
        input_tokens: 10,
        output_tokens: 2,
        cost_usd: 0.5,
    };
    // The interceptor event as the real chain makes it: a pack's block,
    // the pack in monitor mode (so `monitor` is set too).
    let manager = crate::helpers::manager();
    manager.set_monitored(["fixture".to_owned()]);
    manager
        .load(
            "fixture",
            &json!({"tool_call": {"action": "block", "reason": "no"}}).to_string(),
        )
        .expect("fixture loads");
    let bundle = manager.registry().get_all();
    let call = ToolCall::new("c1", "bash", json!({"command": "ls"}));
    let (_, mut decisions) = run(&bundle.tool_call, &(), &call);
    let decision = decisions.remove(0);
    vec![
        AgentEvent::User {
            content: text("hi"),
        },
        AgentEvent::Assistant {
            content: text("sure"),
            tool_calls: vec![call],
            finish_reason: Some("vetoed"),
        },
        AgentEvent::Notice {
            seam: "output",
            interceptor: text("p/n"),
            text: text("careful"),
        },
        AgentEvent::TurnPaused {
            interceptor: text("p/n"),
            wait_ms: 5,
            reason: text("busy"),
        },
        AgentEvent::Compaction {
            phase: "started",
            interceptor: text("p/n"),
            reason: text("long"),
            summarised: 3,
            kept: 2,
        },
        AgentEvent::ModelChanged {
            from: text("big"),
            to: text("small"),
        },
        AgentEvent::ApprovalRequested {
            seam: "tool_call",
            interceptor: text("p/n"),
            subject: text("bash"),
            prompt: text("ok?"),
            choices: vec![text("allow"), text("reject")],
        },
        AgentEvent::ApprovalAnswered {
            seam: "tool_call",
            interceptor: text("p/n"),
            answer: "allow",
            subject: text("bash"),
            source: text("approvals_file"),
        },
        AgentEvent::GateRetry {
            interceptor: text("p/n"),
            attempt: 1,
            max: 2,
            feedback: text("shorter"),
        },
        AgentEvent::StreamRetract {
            released: 4,
            reason: text("banned"),
        },
        AgentEvent::StreamingDowngraded {
            packs: vec![text("p")],
        },
        AgentEvent::StreamHold {
            gate: text("content-safety/stream_chunk"),
            held: 12,
        },
        AgentEvent::StreamHoldEnd {
            gate: text("content-safety/stream_chunk"),
            held: 12,
            outcome: "released",
        },
        AgentEvent::AssistantDelta {
            content: text("su"),
        },
        AgentEvent::ToolResult {
            call_id: text("c1"),
            name: text("bash"),
            content: text("out"),
            is_error: false,
        },
        AgentEvent::ToolTimeout {
            call_id: text("c1"),
            name: text("bash"),
            timeout_ms: 10,
            interceptor: text("p/n"),
            turn: 0,
        },
        AgentEvent::LateResultSuppressed {
            call_id: text("c1"),
            reason: text("late"),
        },
        AgentEvent::Interceptor(decision),
        AgentEvent::PackLoaded {
            name: text("p"),
            version: text("1.0.0"),
            path: Some(text("/p.so")),
        },
        AgentEvent::PackReloaded {
            name: text("p"),
            version: text("1.0.1"),
            path: Some(text("/p.so")),
        },
        AgentEvent::PackReloadFailed {
            name: text("p"),
            error: text("broken"),
        },
        AgentEvent::PackQuarantined {
            name: text("p"),
            reason: text("failing"),
        },
        AgentEvent::InterceptorSlow {
            seam: text("tool_call"),
            interceptor: text("p/n"),
            elapsed_ms: 200,
            budget_ms: 100,
        },
        AgentEvent::RunEnd {
            success: true,
            output: text("done"),
            reason: text("completed"),
            vetoed: true,
            vetoed_by: Some(text("content-safety/stream_chunk")),
            usage: RunUsage {
                turn: usage,
                session: usage,
            },
        },
        AgentEvent::Nested(NestedEvent {
            depth: 1,
            parent_call_id: text("c9"),
            event: Box::new(AgentEvent::User {
                content: text("sub"),
            }),
        }),
    ]
}

/// One `###` section of docs/EVENTS.md: its fields (path → type as
/// written) and its example lines.
#[derive(Default)]
struct Section {
    fields: BTreeMap<String, String>,
    examples: Vec<Value>,
}

/// The sections of docs/EVENTS.md, by event type (the heading's first
/// backticked word; the heading itself when it has none).
fn documented() -> BTreeMap<String, Section> {
    let path = chimera_tests::workspace_root().join("docs/EVENTS.md");
    let doc = std::fs::read_to_string(&path).expect("docs/EVENTS.md exists");
    let mut sections: BTreeMap<String, Section> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_example = false;
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            let name = heading
                .split('`')
                .nth(1)
                .filter(|_| heading.starts_with('`'))
                .unwrap_or(heading);
            current = Some(name.to_owned());
            sections.entry(name.to_owned()).or_default();
            continue;
        }
        let Some(section) = current.as_ref().and_then(|c| sections.get_mut(c)) else {
            continue;
        };
        if line == "```json" {
            in_example = true;
        } else if line == "```" {
            in_example = false;
        } else if in_example {
            let example = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("an example that is not JSON ({e}): {line}"));
            section.examples.push(example);
        } else if let Some(row) = line.strip_prefix("| `") {
            let cells: Vec<&str> = row.split(" | ").collect();
            let field = cells[0].split('`').next().unwrap_or_default();
            section.fields.insert(
                field.to_owned(),
                cells.get(1).copied().unwrap_or("").to_owned(),
            );
        }
    }
    sections
}

/// Every key path of `object` (`usage.turn.input_tokens`, `tool_calls[].id`)
/// but `type`; a value documented as `any JSON` is not looked into.
fn key_paths(object: &Map<String, Value>, section: &Section, prefix: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for (key, value) in object {
        if prefix.is_empty() && key == "type" {
            continue;
        }
        let path = format!("{prefix}{key}");
        paths.insert(path.clone());
        if section.fields.get(&path).is_some_and(|t| t == "any JSON") {
            continue;
        }
        let inner = match value {
            Value::Object(inner) => Some((inner, format!("{path}."))),
            Value::Array(items) => match items.first() {
                Some(Value::Object(inner)) => Some((inner, format!("{path}[]."))),
                _ => None,
            },
            _ => None,
        };
        if let Some((inner, prefix)) = inner {
            paths.extend(key_paths(inner, section, &prefix));
        }
    }
    paths
}

fn object(value: &Value) -> &Map<String, Value> {
    value.as_object().expect("an event is a JSON object")
}

/// The `type` of an event object.
fn kind(value: &Value) -> String {
    value["type"]
        .as_str()
        .expect("an event has a type")
        .to_owned()
}

#[test]
fn every_event_type_and_field_is_documented_and_every_documented_one_exists() {
    let samples = samples();
    let seen: BTreeSet<usize> = samples.iter().map(variant).collect();
    assert_eq!(
        seen,
        (0..VARIANTS).collect(),
        "one sample per variant of AgentEvent"
    );
    let sections = documented();
    let empty = Section::default();
    let nested = sections.get(NESTED).expect("a section on sub-agent events");
    let mut types = BTreeSet::new();
    for event in &samples {
        let value = serde_json::to_value(event).expect("an event serialises");
        let kind = kind(&value);
        let section = sections
            .get(&kind)
            .unwrap_or_else(|| panic!("docs/EVENTS.md has no section for `{kind}`"));
        let mut paths = key_paths(object(&value), section, "");
        if let AgentEvent::Nested(inner) = event {
            let own = serde_json::to_value(&*inner.event).expect("serialises");
            let own = key_paths(object(&own), section, "");
            let extra: BTreeSet<String> = paths.difference(&own).cloned().collect();
            for field in &extra {
                assert!(
                    nested.fields.contains_key(field),
                    "sub-agent field `{field}` is not documented"
                );
            }
            assert_eq!(extra.len(), nested.fields.len(), "sub-agent fields");
            paths = own;
        } else {
            types.insert(kind.clone());
            let documented: BTreeSet<String> = section.fields.keys().cloned().collect();
            assert_eq!(
                paths, documented,
                "`{kind}`: the fields it has (left) and the fields documented (right)"
            );
        }
        for field in &paths {
            assert!(
                section.fields.contains_key(field),
                "`{kind}`: field `{field}` is not documented"
            );
        }
    }
    let documented_types: BTreeSet<String> = sections
        .keys()
        .filter(|name| name.as_str() != NESTED)
        .cloned()
        .collect();
    assert_eq!(
        types, documented_types,
        "documented types that do not exist"
    );

    for (name, section) in &sections {
        assert!(!section.examples.is_empty(), "`{name}` has no example line");
        for example in &section.examples {
            let kind = kind(example);
            let own = sections.get(&kind).unwrap_or(&empty);
            assert!(
                name == NESTED || kind == *name,
                "`{name}`'s example is a `{kind}`"
            );
            for field in key_paths(object(example), own, "") {
                assert!(
                    own.fields.contains_key(&field)
                        || (name == NESTED && nested.fields.contains_key(&field)),
                    "`{name}`'s example has `{field}`, which is not documented"
                );
            }
        }
    }
}
