//! Seam mechanics and placement through real runs of the agent loop, with
//! host closures.
//!
//! One file for the seam mechanics, so each seam's placement rules read
//! together; each test is an independent session.

use crate::harness::{script, Harness};
use chimera_host::agent::{Approver, Permission, PermissionPolicy, ToolRules};
use chimera_host::interception::*;
use chimera_host::types::{Headers, Message, ProviderRequest, ToolCall, ToolResult};
use chimera_tests::tools::{Dangerous, Fixed};
use serde_json::json;
use std::sync::{Arc, Mutex};

fn echo_then_done() -> serde_json::Value {
    script(json!([
        {"tool_calls": [{"id": "tc1", "name": "echo", "arguments": {"message": "hello"}}]},
        {"content": "done"}
    ]))
}

#[test]
fn no_interceptors_is_byte_identical_and_silent() {
    let absent = Harness::new(echo_then_done()).run("say hello");
    let empty = Harness::new(echo_then_done())
        .host(Interceptors::new())
        .run("say hello");
    let registry = Arc::new(chimera_host::plugins::Registry::new());
    let empty_registry = Harness::new(echo_then_done())
        .registry(registry)
        .run("say hello");
    for other in [&empty, &empty_registry] {
        assert_eq!(
            serde_json::to_string(&absent.requests()).unwrap(),
            serde_json::to_string(&other.requests()).unwrap()
        );
        assert_eq!(absent.history(), other.history());
        assert_eq!(absent.result, other.result);
        assert!(other.interceptor_events().is_empty());
    }
    assert!(absent.requests()[0].kwargs.is_empty());
    assert_eq!(absent.result.output, "done");
}

fn appender(
    name: &'static str,
    from: &'static str,
    to: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
) -> ToolCallInterceptor {
    Interceptor::tool_call(name, move |call: &ToolCall| {
        let message = call.arguments.get_str("message").unwrap_or_default();
        seen.lock().unwrap().push(message.clone());
        if message != from {
            return Ok(InterceptDecision::Allow);
        }
        Ok(InterceptDecision::Replace(ToolCall::new(
            "other",
            &call.name,
            json!({"message": to}),
        )))
    })
}

#[test]
fn replacements_chain_in_order_and_reach_the_tool() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(appender("A", "start", "start+a", seen.clone()));
    bundle
        .tool_call
        .push(appender("B", "start+a", "start+a+b", seen.clone()));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "echo", "arguments": {"message": "start"}}]},
        {"content": "done"}
    ])))
    .host(bundle)
    .run("go");
    assert_eq!(*seen.lock().unwrap(), ["start", "start+a"]);
    assert_eq!(run.tool_messages(), ["Echo: start+a+b"]);
    assert_eq!(run.history()[3].tool_call_id.as_deref(), Some("tc1"));
    // The durable assistant message keeps the call as proposed.
    assert_eq!(
        run.history()[2].tool_calls[0]
            .arguments
            .get_str("message")
            .unwrap(),
        "start"
    );

    let mut nothing = Interceptors::new();
    nothing
        .tool_call
        .push(Interceptor::tool_call("none", |_: &ToolCall| {
            Ok(InterceptDecision::Allow)
        }));
    let run = Harness::new(echo_then_done()).host(nothing).run("go");
    assert_eq!(run.tool_messages(), ["Echo: hello"]);
}

#[test]
fn the_first_block_wins_and_the_run_continues() {
    let y_calls = Arc::new(Mutex::new(0));
    let counter = y_calls.clone();
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(Interceptor::tool_call("X", |_: &ToolCall| {
            Ok(InterceptDecision::block("first reason"))
        }));
    bundle
        .tool_call
        .push(Interceptor::tool_call("Y", move |_: &ToolCall| {
            *counter.lock().unwrap() += 1;
            Ok(InterceptDecision::block("second reason"))
        }));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "echo", "arguments": {"message": "x"}}]},
        {"content": "done"}
    ])))
    .host(bundle)
    .run("go");
    assert_eq!(*y_calls.lock().unwrap(), 0);
    assert_eq!(
        run.tool_messages(),
        ["Blocked by interceptor: first reason"]
    );
    assert!(run.result.success);
    assert_eq!(run.result.output, "done");
    let events = run.interceptor_events();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(
        (
            e.seam,
            e.decision,
            e.tool_name.as_str(),
            e.call_id.as_str(),
            e.reason.as_str()
        ),
        (
            "tool_call",
            EventDecision::Blocked,
            "echo",
            "tc1",
            "first reason"
        )
    );
}

#[test]
fn a_crashing_tool_call_interceptor_fails_closed() {
    let dangerous = Dangerous::default();
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(Interceptor::tool_call("bug", |_: &ToolCall| {
            Err(InterceptError::msg("plugin bug"))
        }));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "dangerous_delete"}]},
        {"content": "done"}
    ])))
    .tool(Arc::new(dangerous.clone()))
    .host(bundle)
    .run("go");
    assert!(!dangerous.ran());
    assert_eq!(
        run.tool_messages(),
        ["Blocked by interceptor: interceptor error: plugin bug"]
    );
    assert_eq!(
        run.seam_decisions(),
        [("tool_call".to_owned(), EventDecision::Error)]
    );
}

/// A permission policy that records what it was asked.
#[derive(Default)]
struct Recording {
    seen: Mutex<Vec<(String, serde_json::Value)>>,
    ask_for: Option<&'static str>,
}

impl PermissionPolicy for Recording {
    fn evaluate(&self, call: &ToolCall) -> Permission {
        self.seen
            .lock()
            .unwrap()
            .push((call.name.clone(), call.arguments.parse()));
        if Some(call.name.as_str()) == self.ask_for {
            Permission::Ask
        } else {
            Permission::Allow
        }
    }
}

#[test]
fn the_permission_policy_evaluates_the_interceptor_effective_call() {
    let policy = Arc::new(Recording::default());
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(Interceptor::tool_call("mutate", |c: &ToolCall| {
            Ok(InterceptDecision::Replace(ToolCall::new(
                &c.id,
                &c.name,
                json!({"message": "MUTATED"}),
            )))
        }));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "echo", "arguments": {"message": "original"}}]},
        {"content": "done"}
    ])))
    .host(bundle)
    .permissions(policy.clone())
    .run("go");
    assert_eq!(
        *policy.seen.lock().unwrap(),
        [("echo".to_owned(), json!({"message": "MUTATED"}))]
    );
    assert!(run.tool_messages()[0].contains("Echo: MUTATED"));
}

#[test]
fn a_blocked_call_never_reaches_the_permission_policy() {
    let policy = Arc::new(Recording::default());
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(Interceptor::tool_call("no", |_: &ToolCall| {
            Ok(InterceptDecision::block("policy says no"))
        }));
    let run = Harness::new(echo_then_done())
        .host(bundle)
        .permissions(policy.clone())
        .run("go");
    assert!(policy.seen.lock().unwrap().is_empty());
    assert!(run.tool_messages()[0].contains("Blocked by interceptor: policy says no"));
    assert!(run.result.success);
}

#[test]
fn tool_result_replacements_patch_the_record_and_crashes_are_skipped() {
    let mut bundle = Interceptors::new();
    bundle.tool_result.push(Interceptor::tool_result(
        "C",
        |_: &ToolCall, _: &ToolResult| Err(InterceptError::msg("C is broken")),
    ));
    bundle.tool_result.push(Interceptor::tool_result(
        "D",
        |_: &ToolCall, r: &ToolResult| {
            Ok(InterceptDecision::Replace(ToolResult::ok(format!(
                "{}+patched",
                r.output
            ))))
        },
    ));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "original_tool"}]},
        {"content": "done"}
    ])))
    .tool(Arc::new(Fixed {
        name: "original_tool",
        output: "original",
    }))
    .host(bundle)
    .run("go");
    assert_eq!(run.tool_messages(), ["original+patched"]);
    let decisions = run.seam_decisions();
    assert_eq!(
        decisions[0],
        ("tool_result".to_owned(), EventDecision::Error)
    );
    assert_eq!(run.interceptor_events()[0].reason, "C: C is broken");

    let mut redact = Interceptors::new();
    redact.tool_result.push(Interceptor::tool_result(
        "redact",
        |_: &ToolCall, r: &ToolResult| {
            Ok(InterceptDecision::Replace(ToolResult::ok(
                r.output.replace("hello", "[REDACTED]"),
            )))
        },
    ));
    let run = Harness::new(echo_then_done()).host(redact).run("go");
    assert_eq!(run.tool_messages()[0], "Echo: [REDACTED]");
}

#[test]
fn a_tool_result_block_withholds_the_output() {
    let mut bundle = Interceptors::new();
    bundle.tool_result.push(Interceptor::tool_result(
        "secrets",
        |_: &ToolCall, _: &ToolResult| Ok(InterceptDecision::block("contains secrets")),
    ));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "sauce"}]},
        {"content": "done"}
    ])))
    .tool(Arc::new(Fixed {
        name: "sauce",
        output: "the secret sauce",
    }))
    .host(bundle)
    .run("go");
    assert_eq!(
        run.tool_messages(),
        ["[tool result withheld by interceptor: contains secrets]"]
    );
    let events = run.events.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(e,
        chimera_host::agent::AgentEvent::ToolResult { is_error: false, content, .. }
            if content == "[tool result withheld by interceptor: contains secrets]")));
    assert!(!run.everything().contains("secret sauce"));
}

fn scrub(from: &'static str, to: &'static str) -> ContextInterceptor {
    Interceptor::context("scrub", move |messages: &[Message]| {
        Ok(InterceptDecision::Replace(
            messages
                .iter()
                .map(|m| Message {
                    content: m.content.replace(from, to),
                    ..m.clone()
                })
                .collect(),
        ))
    })
}

#[test]
fn a_context_rewrite_is_ephemeral() {
    let mut bundle = Interceptors::new();
    bundle.context.push(scrub("SECRETVALUE", "***"));
    let run = Harness::new(script(json!([{"content": "done"}])))
        .host(bundle)
        .run("the password is SECRETVALUE");
    let sent = serde_json::to_string(&run.requests()).unwrap();
    assert!(sent.contains("***") && !sent.contains("SECRETVALUE"));
    assert_eq!(run.history()[1].content, "the password is SECRETVALUE");
}

#[test]
fn a_pre_provider_block_ends_the_run_before_any_model_call() {
    let mut context = Interceptors::new();
    context
        .context
        .push(Interceptor::context("no", |_: &[Message]| {
            Ok(InterceptDecision::block("context policy says no"))
        }));
    let run = Harness::new(echo_then_done()).host(context).run("go");
    assert!(run.requests().is_empty());
    assert!(!run.result.success);
    assert_eq!(
        run.result.output,
        "Blocked by interceptor: context policy says no"
    );
    assert_eq!(
        run.result.error.as_deref(),
        Some("Blocked by interceptor: context policy says no")
    );
    let kept: Vec<&str> = run.history().iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        kept,
        ["You are a test agent."],
        "neither the block text nor the refused input stays in durable history"
    );

    let mut request = Interceptors::new();
    request.provider_request.push(Interceptor::provider_request(
        "no",
        |_: &ProviderRequest| Ok(InterceptDecision::block("no requests today")),
    ));
    let run = Harness::new(echo_then_done()).host(request).run("go");
    assert!(run.requests().is_empty());
    assert_eq!(
        run.result.error.as_deref(),
        Some("Blocked by interceptor: no requests today")
    );
}

#[test]
fn extra_options_pass_through_verbatim() {
    let mut bundle = Interceptors::new();
    bundle.provider_request.push(Interceptor::provider_request(
        "temp",
        |r: &ProviderRequest| {
            let mut r = r.clone();
            r.kwargs = json!({"temperature": 0.7}).as_object().unwrap().clone();
            Ok(InterceptDecision::Replace(r))
        },
    ));
    let run = Harness::new(script(json!([{"content": "done"}])))
        .host(bundle)
        .run("go");
    assert_eq!(run.requests()[0].kwargs["temperature"], json!(0.7));
}

fn set_authorization() -> ProviderRequestInterceptor {
    Interceptor::provider_request("auth", |r: &ProviderRequest| {
        let Some(mut headers) = r.headers.clone() else {
            return Ok(InterceptDecision::Allow);
        };
        headers.set("Authorization", "[redacted]");
        Ok(InterceptDecision::Replace(ProviderRequest {
            headers: Some(headers),
            ..r.clone()
        }))
    })
}

#[test]
fn a_header_replacement_goes_with_the_call_and_the_provider_keeps_its_own_even_when_the_call_fails()
{
    for responses in [json!([{"content": "done"}]), json!([])] {
        let mut bundle = Interceptors::new();
        bundle.provider_request.push(set_authorization());
        let run = Harness::new(script(responses))
            .headers(&[("Authorization", "Bearer sk-live"), ("X-Extra", "keep")])
            .host(bundle)
            .run("go");
        let during = run.requests()[0].headers.clone().unwrap();
        assert_eq!(
            during.0,
            [
                ("Authorization".to_owned(), "[redacted]".to_owned()),
                ("X-Extra".to_owned(), "keep".to_owned())
            ]
        );
        let after = chimera_host::providers::Provider::request_headers(run.model.as_ref()).unwrap();
        assert_eq!(
            after.0,
            [
                ("Authorization".to_owned(), "Bearer sk-live".to_owned()),
                ("X-Extra".to_owned(), "keep".to_owned())
            ]
        );
    }
}

#[test]
fn no_header_surface_means_no_headers_in_the_envelope() {
    let observed = Arc::new(Mutex::new(Vec::new()));
    let sink = observed.clone();
    let mut bundle = Interceptors::new();
    bundle.provider_request.push(Interceptor::provider_request(
        "look",
        move |r: &ProviderRequest| {
            sink.lock().unwrap().push(r.headers.clone());
            Ok(InterceptDecision::Allow)
        },
    ));
    Harness::new(script(json!([{"content": "done"}])))
        .without_header_surface()
        .host(bundle)
        .run("go");
    assert_eq!(*observed.lock().unwrap(), [None]);
}

/// A bundle of one `provider_request` interceptor that sends the headers
/// `choose` makes for a request, or allows it when `choose` makes none.
fn replacing_headers(
    choose: impl Fn(&ProviderRequest) -> Option<Headers> + Send + Sync + 'static,
) -> Interceptors {
    let mut bundle = Interceptors::new();
    bundle.provider_request.push(Interceptor::provider_request(
        "headers",
        move |r: &ProviderRequest| {
            Ok(choose(r).map_or(InterceptDecision::Allow, |headers| {
                InterceptDecision::Replace(ProviderRequest {
                    headers: Some(headers),
                    ..r.clone()
                })
            }))
        },
    ));
    bundle
}

#[test]
fn a_header_replacement_applies_to_its_own_call_only() {
    let calls = Mutex::new(0);
    let first_only = replacing_headers(move |r| {
        let mut calls = calls.lock().unwrap();
        *calls += 1;
        let mut headers = r.headers.clone().filter(|_| *calls == 1)?;
        headers.set("X-Extra", "first call");
        Some(headers)
    });
    let run = Harness::new(echo_then_done())
        .headers(&[("X-Extra", "configured")])
        .host(first_only)
        .run("go");
    let sent: Vec<_> = run
        .requests()
        .iter()
        .map(|r| {
            r.headers
                .as_ref()
                .and_then(|h| h.get("X-Extra"))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        sent,
        [Some("first call".to_owned()), Some("configured".to_owned())]
    );
}

#[test]
fn a_header_replacement_without_a_header_surface_is_a_no_op() {
    let invent = replacing_headers(|_| Some(Headers(vec![("X-Invented".into(), "yes".into())])));
    let run = Harness::new(script(json!([{"content": "done"}])))
        .without_header_surface()
        .host(invent)
        .run("go");
    assert!(run.result.success, "{:?}", run.result);
    assert_eq!(run.requests()[0].headers, None);
    assert_eq!(
        chimera_host::providers::Provider::request_headers(run.model.as_ref()),
        None
    );
}

fn four_seams() -> Interceptors {
    let mut bundle = Interceptors::new();
    bundle.context.push(scrub("TOPSECRET-42", "[scrubbed]"));
    bundle.provider_request.push(set_authorization());
    bundle
        .tool_call
        .push(Interceptor::tool_call("gate", |c: &ToolCall| {
            if c.name.starts_with("dangerous_") {
                return Ok(InterceptDecision::block(format!(
                    "tool {} is gated by policy",
                    c.name
                )));
            }
            Ok(InterceptDecision::Allow)
        }));
    bundle.tool_result.push(Interceptor::tool_result(
        "check",
        |_: &ToolCall, r: &ToolResult| {
            if r.is_error() {
                return Ok(InterceptDecision::Allow);
            }
            Ok(InterceptDecision::Replace(ToolResult::ok(format!(
                "{} [policy-checked]",
                r.output
            ))))
        },
    ));
    bundle
}

#[test]
fn all_four_seams_together_in_one_turn() {
    let dangerous = Dangerous::default();
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "tc1", "name": "dangerous_delete"}, {"id": "tc2", "name": "echo", "arguments": {"message": "ok"}}]},
        {"content": "all done"}
    ])))
    .tool(Arc::new(dangerous.clone()))
    .headers(&[("Authorization", "Bearer sk-live"), ("X-Title", "chimera")])
    .host(four_seams())
    .run("the launch code is TOPSECRET-42");
    let requests = run.requests();
    assert!(!serde_json::to_string(&requests)
        .unwrap()
        .contains("TOPSECRET-42"));
    assert!(serde_json::to_string(&requests[0])
        .unwrap()
        .contains("[scrubbed]"));
    assert!(
        run.everything().contains("TOPSECRET-42"),
        "the durable transcript keeps it"
    );
    for request in &requests {
        assert_eq!(
            request.headers.as_ref().unwrap().get("Authorization"),
            Some("[redacted]")
        );
    }
    let after = chimera_host::providers::Provider::request_headers(run.model.as_ref()).unwrap();
    assert_eq!(after.get("Authorization"), Some("Bearer sk-live"));
    assert!(!dangerous.ran());
    assert_eq!(
        run.tool_messages(),
        [
            "Blocked by interceptor: tool dangerous_delete is gated by policy",
            "Echo: ok [policy-checked]"
        ],
        "tool messages stay in call order"
    );
    let decisions = run.seam_decisions();
    for pair in [
        ("tool_call", EventDecision::Blocked),
        ("tool_result", EventDecision::Replaced),
        ("context", EventDecision::Replaced),
        ("provider_request", EventDecision::Replaced),
    ] {
        assert!(
            decisions.contains(&(pair.0.to_owned(), pair.1)),
            "{pair:?} in {decisions:?}"
        );
    }
    assert!(run.result.success);
}

#[test]
fn a_pre_provider_block_reports_interceptor_blocked_as_the_reason() {
    let mut bundle = Interceptors::new();
    bundle.provider_request.push(Interceptor::provider_request(
        "seal",
        |_: &ProviderRequest| Ok(InterceptDecision::block("sealed")),
    ));
    let run = Harness::new(echo_then_done()).host(bundle).run("go");
    assert!(run.requests().is_empty());
    assert_eq!(run.result.reason.to_string(), "interceptor_blocked: sealed");
}

/// An approver that answers from a list and records what it was asked.
struct Answers {
    answers: Mutex<Vec<bool>>,
    asked: Mutex<Vec<String>>,
}

impl Answers {
    fn new(answers: &[bool]) -> Arc<Answers> {
        Arc::new(Answers {
            answers: Mutex::new(answers.iter().rev().copied().collect()),
            asked: Mutex::new(Vec::new()),
        })
    }
}

impl Approver for Answers {
    fn approve(&self, call: &ToolCall) -> bool {
        self.asked.lock().unwrap().push(call.id.clone());
        self.answers.lock().unwrap().pop().unwrap_or(false)
    }
}

#[test]
fn one_approval_lets_exactly_one_call_through_and_the_rest_of_the_batch_is_still_checked() {
    let dangerous = Dangerous::default();
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let sink = recorded.clone();
    let mut bundle = Interceptors::new();
    bundle
        .tool_call
        .push(Interceptor::tool_call("rec", move |c: &ToolCall| {
            sink.lock().unwrap().push(c.id.clone());
            if c.name == "dangerous_delete" {
                return Ok(InterceptDecision::block("never"));
            }
            Ok(InterceptDecision::Allow)
        }));
    let answers = Answers::new(&[true]);
    let run = Harness::new(script(json!([
        {"tool_calls": [
            {"id": "a", "name": "echo", "arguments": {"message": "hi"}},
            {"id": "b", "name": "dangerous_delete"},
            {"id": "c", "name": "echo", "arguments": {"message": "again"}}
        ]},
        {"content": "done"}
    ])))
    .tool(Arc::new(dangerous.clone()))
    .host(bundle)
    .permissions(Arc::new(
        ToolRules::new(Permission::Allow).set("echo", Permission::Ask),
    ))
    .approver(answers.clone())
    .run("go");
    // Every call of the batch passed the tool_call seam.
    assert_eq!(*recorded.lock().unwrap(), ["a", "b", "c"]);
    assert!(
        !dangerous.ran(),
        "an approval never waves a later call through"
    );
    // Each `Ask` was put to the approver: the first was approved, the
    // second (no answer left) was denied.
    assert_eq!(*answers.asked.lock().unwrap(), ["a", "c"]);
    assert_eq!(
        run.tool_messages(),
        [
            "Echo: hi",
            "Blocked by interceptor: never",
            "Permission denied for echo"
        ]
    );
    assert!(run.result.success);
}

#[test]
fn an_unknown_tool_and_a_script_that_runs_out_are_reported() {
    let mut bundle = Interceptors::new();
    bundle.tool_result.push(Interceptor::tool_result(
        "never",
        |_: &ToolCall, _: &ToolResult| {
            Ok(InterceptDecision::block(
                "tool_result ran for a tool that does not exist",
            ))
        },
    ));
    let run = Harness::new(script(json!([
        {"tool_calls": [{"id": "t", "name": "nope"}]}
    ])))
    .host(bundle)
    .run("go");
    assert!(
        run.interceptor_events().is_empty(),
        "synthetic results never pass through tool_result"
    );
    assert_eq!(run.tool_messages(), ["Unknown tool: nope"]);
    assert!(!run.result.success);
    assert_eq!(run.result.reason.to_string(), "provider_error");
    assert!(
        run.result.output.contains("the script ran out"),
        "{}",
        run.result.output
    );
}

#[test]
fn hooks_sit_where_the_order_says_and_see_the_effective_call() {
    use chimera_host::agent::{Hooks, PreToolUse};
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o1, o2, o3, o4) = (order.clone(), order.clone(), order.clone(), order.clone());
    let mut bundle = Interceptors::new();
    bundle.context.push(Interceptor::context(
        "ctx",
        move |messages: &[Message]| {
            o1.lock()
                .unwrap()
                .push(format!("context sees {} messages", messages.len()));
            Ok(InterceptDecision::Allow)
        },
    ));
    bundle
        .tool_call
        .push(Interceptor::tool_call("rename", move |c: &ToolCall| {
            o2.lock().unwrap().push(format!("tool_call {}", c.name));
            if c.name == "say" {
                return Ok(InterceptDecision::Replace(ToolCall::new(
                    &c.id,
                    "echo",
                    c.arguments.parse(),
                )));
            }
            Ok(InterceptDecision::Allow)
        }));
    let hooks = Hooks::new()
        .before_model(move |history: &mut Vec<Message>| {
            o3.lock().unwrap().push("before-model".to_owned());
            if history.iter().all(|m| m.content != "[anchor]") {
                history.push(Message::user("[anchor]"));
            }
        })
        .pre_tool_use(move |call: &ToolCall| {
            o4.lock()
                .unwrap()
                .push(format!("pre-tool-use {}", call.name));
            match call.arguments.get_str("message").as_deref() {
                Some("forbidden") => PreToolUse {
                    deny: Some("not today".into()),
                    ..PreToolUse::default()
                },
                _ => PreToolUse {
                    updated_input: Some(
                        json!({"message": "rewritten"}).as_object().unwrap().clone(),
                    ),
                    ..PreToolUse::default()
                },
            }
        });
    let seen_after = Arc::new(Mutex::new(Vec::new()));
    let sink = seen_after.clone();
    let hooks = hooks.post_tool_use(move |call: &ToolCall, result: &ToolResult| {
        sink.lock()
            .unwrap()
            .push((call.name.clone(), result.output.clone()));
    });
    let run = Harness::new(script(json!([
        {"tool_calls": [
            {"id": "a", "name": "say", "arguments": {"message": "hi"}},
            {"id": "b", "name": "echo", "arguments": {"message": "forbidden"}}
        ]},
        {"content": "done"}
    ])))
    .host(bundle)
    .hooks(hooks)
    .run("go");
    let (result, session) = (run.result.clone(), &run.session);
    assert!(result.success);
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order[..5],
        [
            "before-model",
            "context sees 3 messages",
            "tool_call say",
            "pre-tool-use echo",
            "tool_call echo"
        ]
    );
    assert_eq!(order[5], "pre-tool-use echo");
    let tool_messages: Vec<&str> = session
        .history()
        .iter()
        .filter(|m| m.role == chimera_host::types::Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        tool_messages,
        ["Echo: rewritten", "Blocked by hook: not today"]
    );
    assert_eq!(
        *seen_after.lock().unwrap(),
        [("echo".to_owned(), "Echo: rewritten".to_owned())]
    );
    assert!(
        session.history().iter().any(|m| m.content == "[anchor]"),
        "middleware edits are durable"
    );
}
