//! Chain semantics, through host closures and through the loaded fixture
//! pack: order, first block wins, replacements chain, per-seam failure
//! policy, events.

use crate::helpers::{fixture_bundle, run, summary};
use abi_stable::sabi_trait::TD_Opaque;
use chimera_host::interception::*;
use chimera_host::types::{Message, ProviderRequest, ToolCall, ToolResult};
use chimera_plugin_api::abi::{self, Decision, DecisionKind, InterceptorAbi, InterceptorAbi_TO};
use serde_json::json;
use std::sync::{Arc, Mutex};

fn echo(message: &str) -> ToolCall {
    ToolCall::new("tc1", "echo", json!({ "message": message }))
}

fn appender(
    name: &'static str,
    suffix: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
) -> ToolCallInterceptor {
    Interceptor::tool_call(name, move |call: &ToolCall| {
        let message = call.arguments.get_str("message").unwrap_or_default();
        seen.lock().unwrap().push(message.clone());
        Ok(InterceptDecision::Replace(ToolCall::new(
            "someone-elses-id",
            &call.name,
            json!({ "message": format!("{message}{suffix}") }),
        )))
    })
}

#[test]
fn host_replacements_chain_in_list_order_and_keep_the_original_call_id() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let chain = vec![
        appender("A", "+a", seen.clone()),
        appender("B", "+b", seen.clone()),
    ];
    let (outcome, events) = run(&chain, &(), &echo("start"));
    let effective = outcome.replaced.unwrap();
    assert_eq!(effective.arguments.get_str("message").unwrap(), "start+a+b");
    assert_eq!(effective.id, "tc1");
    assert_eq!(*seen.lock().unwrap(), ["start", "start+a"]);
    assert_eq!(events.len(), 2);
    assert!(events
        .iter()
        .all(|e| e.decision == EventDecision::Replaced && e.reason.is_empty()));
    assert_eq!(
        (events[0].tool_name.as_str(), events[0].call_id.as_str()),
        ("echo", "tc1")
    );
    assert_eq!(events[1].interceptor, "B");
}

#[test]
fn pack_replacements_chain_and_a_host_interceptor_after_them_sees_the_pack_value() {
    let (manager, _) = fixture_bundle(json!({"tool_call": {"action": "replace", "with": "+a"}}));
    manager
        .load(
            "fixture-alt",
            &json!({"tool_call": {"action": "replace", "with": "+b"}}).to_string(),
        )
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut chain = manager.registry().get_all().tool_call;
    chain.push(appender("host", "+host", seen.clone()));
    let (outcome, events) = run(&chain, &(), &echo("start"));
    let effective = outcome.replaced.unwrap();
    assert_eq!(
        effective.arguments.get_str("message").unwrap(),
        "start+a+b+host"
    );
    assert_eq!(effective.id, "tc1");
    assert_eq!(*seen.lock().unwrap(), ["start+a+b"]);
    let names: Vec<&str> = events.iter().map(|e| e.interceptor.as_str()).collect();
    assert_eq!(
        names,
        ["fixture/tool_call-0", "fixture-alt/tool_call-0", "host"]
    );
}

#[test]
fn allow_and_nothing_leave_the_value_untouched_and_silent() {
    let (_manager, bundle) = fixture_bundle(json!({"tool_call": {"action": "allow", "count": 3}}));
    let mut chain = bundle.tool_call;
    chain.push(Interceptor::tool_call("host-allow", |_: &ToolCall| {
        Ok(InterceptDecision::Allow)
    }));
    let (outcome, events) = run(&chain, &(), &echo("hello"));
    assert!(outcome.replaced.is_none());
    assert!(outcome.blocked.is_none());
    assert!(events.is_empty());
}

fn recorder(calls: Arc<Mutex<u32>>) -> ToolCallInterceptor {
    Interceptor::tool_call("Y", move |_: &ToolCall| {
        *calls.lock().unwrap() += 1;
        Ok(InterceptDecision::block("second reason"))
    })
}

#[test]
fn the_first_block_wins_and_later_interceptors_never_run() {
    let calls = Arc::new(Mutex::new(0));
    let host_chain = vec![
        Interceptor::tool_call("X", |_: &ToolCall| {
            Ok(InterceptDecision::block("first reason"))
        }),
        recorder(calls.clone()),
    ];
    let (_manager, bundle) =
        fixture_bundle(json!({"tool_call": {"action": "block", "reason": "first reason"}}));
    let mut pack_chain = bundle.tool_call;
    pack_chain.push(recorder(calls.clone()));
    for chain in [host_chain, pack_chain] {
        let (outcome, events) = run(&chain, &(), &echo("x"));
        assert_eq!(outcome.blocked.as_deref(), Some("first reason"));
        assert_eq!(
            summary(&events),
            [("tool_call".into(), "blocked".into(), "first reason".into())]
        );
        assert_eq!(
            (events[0].tool_name.as_str(), events[0].call_id.as_str()),
            ("echo", "tc1")
        );
    }
    assert_eq!(*calls.lock().unwrap(), 0);
}

#[test]
fn an_empty_block_reason_becomes_blocked_by_interceptor() {
    let chain = vec![Interceptor::tool_call("X", |_: &ToolCall| {
        Ok(InterceptDecision::block(""))
    })];
    let (outcome, events) = run(&chain, &(), &echo("x"));
    assert_eq!(outcome.blocked.as_deref(), Some("blocked by interceptor"));
    assert_eq!(events[0].reason, "");
}

/// How one interceptor fails, host-side or pack-side.
#[derive(Clone, Copy, Debug)]
enum Failure {
    Error,
    Panic,
    Invalid,
}

fn pack_failure(seam: &str, failure: Failure) -> Interceptors {
    let action = match failure {
        Failure::Error => "error",
        Failure::Panic => "panic",
        Failure::Invalid => "invalid",
    };
    let (manager, bundle) =
        fixture_bundle(json!({ seam: {"action": action, "reason": "plugin bug"} }));
    std::mem::forget(manager); // keep the pack loaded for the test's lifetime
    bundle
}

#[test]
fn a_failing_tool_call_interceptor_fails_closed() {
    let cases = [
        (Failure::Error, "interceptor error: plugin bug"),
        (Failure::Panic, "interceptor error: panicked: plugin bug"),
        (
            Failure::Invalid,
            "interceptor error: fixture/tool_call-0: invalid ToolCall replacement: tool call arguments are not JSON",
        ),
    ];
    for (failure, expected) in cases {
        let later = Arc::new(Mutex::new(0));
        let mut chain = pack_failure("tool_call", failure).tool_call;
        chain.push(recorder(later.clone()));
        let (outcome, events) = run(&chain, &(), &echo("x"));
        let blocked = outcome.blocked.unwrap();
        assert!(blocked.starts_with(expected), "{failure:?}: {blocked}");
        assert!(!blocked.contains('\n'), "{blocked}");
        assert_eq!(events.len(), 1, "{failure:?}");
        assert_eq!(events[0].decision, EventDecision::Error);
        assert!(
            events[0].reason.starts_with("fixture/tool_call-0: "),
            "{}",
            events[0].reason
        );
        assert_eq!(
            *later.lock().unwrap(),
            0,
            "nothing runs after a fail-closed error"
        );
    }
}

#[test]
fn host_closure_errors_and_panics_fail_closed_on_tool_call_with_the_error_text() {
    let erroring =
        Interceptor::tool_call("bug", |_: &ToolCall| Err(InterceptError::msg("plugin bug")));
    let (outcome, events) = run(&[erroring], &(), &echo("x"));
    assert_eq!(
        outcome.blocked.as_deref(),
        Some("interceptor error: plugin bug")
    );
    assert_eq!(
        summary(&events),
        [("tool_call".into(), "error".into(), "bug: plugin bug".into())]
    );
    let panicking = Interceptor::tool_call("boom", |_: &ToolCall| -> InterceptResult<ToolCall> {
        panic!("host closure bug")
    });
    let (outcome, _) = run(&[panicking], &(), &echo("x"));
    assert_eq!(
        outcome.blocked.as_deref(),
        Some("interceptor error: panicked: host closure bug")
    );
}

#[test]
fn a_failing_tool_result_interceptor_is_skipped_and_the_chain_continues() {
    for failure in [Failure::Error, Failure::Panic, Failure::Invalid] {
        let mut chain = pack_failure("tool_result", failure).tool_result;
        chain.push(Interceptor::tool_result(
            "D",
            |_: &ToolCall, r: &ToolResult| {
                Ok(InterceptDecision::Replace(ToolResult::ok(format!(
                    "{}+patched",
                    r.output
                ))))
            },
        ));
        let (outcome, events) = run(&chain, &echo("x"), &ToolResult::ok("original"));
        assert!(outcome.blocked.is_none(), "{failure:?}");
        assert_eq!(outcome.replaced.unwrap().output, "original+patched");
        let decisions: Vec<String> = events.iter().map(|e| e.decision.to_string()).collect();
        assert_eq!(decisions, ["error", "replaced"], "{failure:?}");
        assert_eq!(events[0].seam, "tool_result");
        assert_eq!(events[0].tool_name, "echo");
    }
}

#[test]
fn a_failing_context_or_provider_request_interceptor_keeps_the_last_good_value() {
    let messages = vec![
        Message::system("sys"),
        Message::user("the password is SECRETVALUE"),
    ];
    for failure in [Failure::Error, Failure::Panic, Failure::Invalid] {
        let (outcome, events) = run(&pack_failure("context", failure).context, &(), &messages);
        assert!(
            outcome.blocked.is_none() && outcome.replaced.is_none(),
            "{failure:?}"
        );
        assert_eq!(summary(&events)[0].1, "error");
        assert!(events[0].tool_name.is_empty() && events[0].call_id.is_empty());

        let request = ProviderRequest {
            model: "m".into(),
            messages: messages.clone(),
            tools: Default::default(),
            kwargs: Default::default(),
            headers: None,
        };
        let (outcome, events) = run(
            &pack_failure("provider_request", failure).provider_request,
            &(),
            &request,
        );
        assert!(
            outcome.blocked.is_none() && outcome.replaced.is_none(),
            "{failure:?}"
        );
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seam, "provider_request");
    }
}

#[test]
fn a_block_is_honoured_on_every_seam_including_fail_open_ones() {
    let (_m, bundle) = fixture_bundle(json!({
        "context": {"action": "block", "reason": "context policy says no"},
        "provider_request": {"action": "block", "reason": "no requests today"},
        "tool_result": {"action": "block", "reason": "contains secrets"},
    }));
    let messages = vec![Message::user("hi")];
    assert_eq!(
        run(&bundle.context, &(), &messages).0.blocked.as_deref(),
        Some("context policy says no")
    );
    let request = ProviderRequest {
        model: "m".into(),
        messages,
        tools: Default::default(),
        kwargs: Default::default(),
        headers: None,
    };
    assert_eq!(
        run(&bundle.provider_request, &(), &request)
            .0
            .blocked
            .as_deref(),
        Some("no requests today")
    );
    assert_eq!(
        run(
            &bundle.tool_result,
            &echo("x"),
            &ToolResult::ok("the secret sauce")
        )
        .0
        .blocked
        .as_deref(),
        Some("contains secrets")
    );
    assert_eq!(
        withheld_result("contains secrets").output,
        "[tool result withheld by interceptor: contains secrets]"
    );
}

#[test]
fn pack_replacements_on_context_and_provider_request_round_trip_every_field() {
    let (_m, bundle) = fixture_bundle(json!({
        "context": {"action": "replace", "find": "SECRETVALUE", "with": "***"},
        "provider_request": {"action": "replace", "set_headers": {"Authorization": "[redacted]"},
                              "set_kwargs": {"temperature": 0.7}},
    }));
    let mut assistant = Message::assistant("calling", vec![echo("SECRETVALUE")]);
    assistant.name = Some("bot".into());
    let messages = vec![
        Message::system("sys"),
        Message::user("the password is SECRETVALUE"),
        assistant,
        Message::tool("tc1", "Echo: SECRETVALUE"),
    ];
    let (outcome, _) = run(&bundle.context, &(), &messages);
    let rewritten = outcome.replaced.unwrap();
    assert_eq!(rewritten[1].content, "the password is ***");
    assert_eq!(rewritten[3].content, "Echo: ***");
    assert_eq!(rewritten[3].tool_call_id.as_deref(), Some("tc1"));
    assert_eq!(
        rewritten[2].tool_calls, messages[2].tool_calls,
        "tool calls survive untouched"
    );
    assert_eq!(rewritten[2].name.as_deref(), Some("bot"));

    let mut headers = chimera_host::types::Headers::default();
    headers.set("Authorization", "Bearer sk-live");
    headers.set("X-Extra", "keep");
    let request = ProviderRequest {
        model: "scripted".into(),
        messages,
        tools: vec![chimera_host::types::ToolSchema {
            name: "echo".into(),
            description: "echo".into(),
            parameters: json!({"type": "object"}),
        }]
        .into(),
        kwargs: Default::default(),
        headers: Some(headers),
    };
    let (outcome, events) = run(&bundle.provider_request, &(), &request);
    let replaced = outcome.replaced.unwrap();
    let headers = replaced.headers.unwrap();
    assert_eq!(headers.get("authorization"), Some("[redacted]"));
    assert_eq!(headers.get("X-Extra"), Some("keep"));
    assert_eq!(replaced.kwargs["temperature"], json!(0.7));
    assert_eq!(replaced.tools, request.tools);
    assert_eq!(replaced.model, "scripted");
    assert_eq!(
        summary(&events),
        [("provider_request".into(), "replaced".into(), String::new())]
    );
}

/// An interceptor written against the raw ABI, answering a decision kind the
/// host does not know (as a pack built for a later ABI might).
struct FromTheFuture(DecisionKind);

impl InterceptorAbi for FromTheFuture {
    fn intercept(&self, _input: &abi::SeamInput<'_>) -> Decision {
        Decision {
            kind: self.0,
            reason: "try again".into(),
            value: abi_stable::std_types::ROption::RNone,
        }
    }
}

#[test]
fn an_unknown_decision_kind_is_an_interceptor_error_under_the_seam_policy() {
    let future = |kind| {
        Interceptor::<ToolCallSeam>::from_pack(
            "future/gate",
            InterceptorAbi_TO::from_value(FromTheFuture(kind), TD_Opaque),
        )
    };
    let (outcome, events) = run(&[future(DecisionKind::RETRY)], &(), &echo("x"));
    assert_eq!(
        outcome.blocked.as_deref(),
        Some("interceptor error: unknown decision kind 'retry'")
    );
    assert_eq!(
        events[0].reason,
        "future/gate: unknown decision kind 'retry'"
    );
    let result_chain = vec![Interceptor::<ToolResultSeam>::from_pack(
        "future/gate",
        InterceptorAbi_TO::from_value(FromTheFuture(DecisionKind(42)), TD_Opaque),
    )];
    let (outcome, events) = run(&result_chain, &echo("x"), &ToolResult::ok("fine"));
    assert!(outcome.blocked.is_none() && outcome.replaced.is_none());
    assert_eq!(events[0].reason, "future/gate: unknown decision kind '42'");
}
