//! Unit tests: matching, the question, and the rules refused at load.

use super::*;
use std::time::Duration;

fn policy(rules: Value) -> ApprovalPolicy {
    ApprovalPolicy::new(Config {
        rules: serde_json::from_value(rules).unwrap(),
    })
    .unwrap()
}

fn refused(rules: Value) -> String {
    let error = ApprovalPolicy::new(Config {
        rules: serde_json::from_value(rules.clone()).unwrap(),
    })
    .expect_err(&rules.to_string())
    .to_string();
    assert!(!error.contains('\n'), "{error}");
    error
}

fn bash(command: &str) -> Value {
    ApprovalPolicy::tool_payload("bash", "c1", json!({"command": command}), 0)
}

fn rm_rule() -> Value {
    json!({"match": {"tool": "bash", "args.command": "rm*"}})
}

#[test]
fn only_a_matching_call_is_asked_about_with_the_default_question() {
    let p = policy(json!([rm_rule()]));
    assert_eq!(p.ask_for(&bash("ls"), true), None);
    assert_eq!(
        p.ask_for(&bash("rm -rf /"), true),
        Some(Ask {
            prompt: "Approve tool.invoke: bash".into(),
            edit: false,
            timeout: None,
            default_allow: false,
        })
    );
    let other_tool = ApprovalPolicy::tool_payload("read_file", "c", json!({"command": "rm"}), 0);
    assert_eq!(p.ask_for(&other_tool, true), None);
}

#[test]
fn the_first_matching_rule_asks_once_whatever_follows_it() {
    let p = policy(json!([
        {"match": {"tool": "bash"}, "prompt": "first"},
        {"match": {"args.command": "rm*"}, "prompt": "second"}
    ]));
    assert_eq!(p.ask_for(&bash("rm x"), true).unwrap().prompt, "first");
}

#[test]
fn a_prompt_template_renders_payload_paths_and_missing_ones_empty() {
    let p = policy(json!([{"match": {"tool": "bash"}, "prompt": "Run shell {args.command}?"}]));
    assert_eq!(
        p.ask_for(&bash("ls /etc"), true).unwrap().prompt,
        "Run shell ls /etc?"
    );
    let payload = ApprovalPolicy::tool_payload("t", "id9", json!({"n": 3, "list": ["a", "b"]}), 4);
    assert_eq!(
        crate::rule::render(
            "{tool}/{id} n={args.n} [{args.list.1}] turn {turn_id} <{args.nope}>",
            &payload
        ),
        "t/id9 n=3 [b] turn 4 <>"
    );
    // Braces around anything but a path are kept.
    assert_eq!(
        crate::rule::render("{} { tool } {tool", &payload),
        "{} { tool } {tool"
    );
}

#[test]
fn choices_with_edit_offer_edit_on_tool_calls_only_and_timeouts_may_be_sub_second() {
    let p = policy(json!([{
        "choices": ["allow", {"id": "edit", "label": "Edit it"}, {"id": "reject", "kind": "reject"}],
        "default_choice": "allow",
        "timeout": "500ms"
    }]));
    let ask = p.ask_for(&bash("anything"), true).unwrap();
    assert!(ask.edit && ask.default_allow);
    assert_eq!(ask.timeout, Some(Duration::from_millis(500)));
    let request = ApprovalPolicy::request_payload("m", "[]", "{}").unwrap();
    let ask = p.ask_for(&request, false).unwrap();
    assert!(!ask.edit);
    assert_eq!(ask.prompt, "Approve llm.request: m");
    let p = policy(json!([{"timeout": "1m 30s"}]));
    assert_eq!(
        p.ask_for(&bash("x"), true).unwrap().timeout,
        Some(Duration::from_secs(90))
    );
}

#[test]
fn globs_match_any_run_including_slashes_and_newlines_and_scalars_compare_formatted() {
    let p = policy(json!([{"match": {"args.command": "*rm -rf*"}}]));
    assert!(p.ask_for(&bash("cd /tmp && rm -rf /x"), true).is_some());
    assert!(p.ask_for(&bash("ls\nrm -rf /"), true).is_some());
    assert!(p.ask_for(&bash("ls -la"), true).is_none());
    let p = policy(json!([{"match": {"args.command": "r?"}}]));
    assert!(p.ask_for(&bash("rm"), true).is_some());
    assert!(p.ask_for(&bash("rmdir"), true).is_none());
    let p = policy(json!([{"match": {"args.command": "\\*"}}]));
    assert!(p.ask_for(&bash("*"), true).is_some());
    assert!(p.ask_for(&bash("x"), true).is_none());
    let p = policy(json!([{"match": {"args.depth": 2, "args.force": true}}]));
    let call = |args: Value| ApprovalPolicy::tool_payload("t", "c", args, 0);
    assert!(p
        .ask_for(&call(json!({"depth": 2, "force": true})), true)
        .is_some());
    assert!(p
        .ask_for(&call(json!({"depth": "2", "force": "true"})), true)
        .is_some());
    assert!(p
        .ask_for(&call(json!({"depth": 3, "force": true})), true)
        .is_none());
    assert!(p.ask_for(&call(json!({"force": true})), true).is_none());
}

#[test]
fn provider_request_rules_see_the_model_tool_names_and_call_options() {
    let tools = r#"[{"name": "bash", "description": "", "parameters": {}}, {"name": "read_file", "description": "", "parameters": {}}]"#;
    let payload =
        ApprovalPolicy::request_payload("claude-x", tools, r#"{"temperature": 0.5, "other": 1}"#)
            .unwrap();
    assert_eq!(
        payload,
        json!({"action_kind": "llm.request", "model": "claude-x",
               "args": {"model": "claude-x", "tools": ["bash", "read_file"], "temperature": 0.5}})
    );
    let p = policy(json!([{"match": {"action_kind": "llm.request", "args.tools.0": "bash"}}]));
    assert!(p.ask_for(&payload, false).is_some());
    assert!(p.ask_for(&bash("ls"), true).is_none());
    assert!(p.asks_about(REQUEST_KIND));
    assert!(!p.asks_about(TOOL_KIND));
    for tools_only in [
        json!({"match": {"action_kind": "tool.*"}}),
        json!({"match": {"tool": "bash", "args.command": "rm*"}}),
        json!({"match": {"args.command": "rm*"}}),
    ] {
        let p = policy(json!([tools_only]));
        assert!(!p.asks_about(REQUEST_KIND), "{tools_only}");
        assert!(p.asks_about(TOOL_KIND), "{tools_only}");
    }
    let both = policy(json!([{"match": {"args.model": "x"}}, {}]));
    assert!(both.asks_about(REQUEST_KIND) && both.asks_about(TOOL_KIND));
    let requests_only = policy(json!([{"match": {"model": "claude-*"}}]));
    assert!(requests_only.asks_about(REQUEST_KIND) && !requests_only.asks_about(TOOL_KIND));
}

#[test]
fn a_malformed_rule_refuses_the_load_with_one_line_naming_it() {
    let cases = [
        (json!([{"mach": {}}]), "unknown field"),
        (json!([{"mode": "free_text"}]), "mode must be `choices`"),
        (json!([{"mode": "both"}]), "mode must be `choices`"),
        (json!([{"mode": "loud"}]), "unknown variant"),
        (json!([{"choices": ["allow", "maybe"]}]), "`maybe`"),
        (
            json!([{"choices": ["allow", "edit"]}]),
            "must include `reject`",
        ),
        (
            json!([{"choices": [{"id": "allow", "kind": "reject"}]}]),
            "kind",
        ),
        (
            json!([{"default_choice": "edit", "choices": ["allow", "reject", "edit"]}]),
            "edit",
        ),
        (json!([{"default_choice": "later"}]), "`later`"),
        (json!([{"match": {"tool": null}}]), "must be a string"),
        (json!([{"match": {"tool": ["bash"]}}]), "must be a string"),
        (json!([{"match": {"args..x": "y"}}]), "dotted path"),
        (json!([{"match": {"tool": "[bash"}}]), "match `tool`"),
        (json!([{"timeout": "soon"}]), "not a duration"),
        (json!([{"timeout": "0s"}]), "under a millisecond"),
        (json!([{"timeout": 5}]), "invalid type"),
        (json!(["allow"]), "invalid type"),
        (
            json!([{"choices": ["allow", "reject", {"id": "edit", "hint": "x"}]}]),
            "did not match",
        ),
    ];
    for (rules, expected) in cases {
        let error = refused(json!([{}, rules[0]]));
        assert!(error.starts_with("rules[1]: "), "{rules}: {error}");
        assert!(error.contains(expected), "{rules}: {error}");
    }
    // An unknown top-level key, or one in a choice, too.
    assert!(serde_json::from_value::<Config>(json!({"rule": []})).is_err());
}

#[test]
fn prompt_synthesizer_is_accepted_and_the_prompt_is_used_as_written() {
    let p = policy(json!([{"prompt": "ok {tool}?", "prompt_synthesizer": "nexus.llm"}]));
    assert_eq!(p.ask_for(&bash("x"), true).unwrap().prompt, "ok bash?");
}
