//! The tool and request gates as loaded packs: `tool-filter` (the tools a
//! request offers), `approval-policy` (the operator asked before matching
//! calls) and `rate-limiter` (a full window pauses the turn, and the
//! resumed request gets through) — through the loaded libraries' chains
//! and through the binary with the scripted model.

use crate::helpers::manager;
use chimera_host::interception::{
    run_chain, ChainContext, ChainOutcome, Interceptor, SeamSpec, SessionFacts,
};
use chimera_host::types::{ProviderRequest, ToolCall, ToolList, ToolSchema};
use chimera_tests::cli::Ran;
use serde_json::{json, Value};
use std::path::Path;

/// Runs `chain` for the conversation `session`.
fn run_for<S: SeamSpec>(
    session: &str,
    chain: &[Interceptor<S>],
    lead: &S::Lead,
    value: &S::Value,
) -> ChainOutcome<S::Value> {
    let facts = SessionFacts::new(session);
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    run_chain(chain, lead, value, &cx)
}

fn request_offering(names: &[&str]) -> ProviderRequest {
    let schemas = names
        .iter()
        .map(|name| ToolSchema {
            name: (*name).to_owned(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object"}),
        })
        .collect();
    ProviderRequest {
        model: "scripted".into(),
        messages: Vec::new(),
        tools: ToolList::new(schemas),
        kwargs: serde_json::Map::new(),
        headers: None,
    }
}

fn offered(request: &ProviderRequest) -> Vec<&str> {
    request.tools.iter().map(|t| t.name.as_str()).collect()
}

/// Runs `chimera run --json` in `dir` with `packs` (name, config) loaded in
/// order, on a script of `responses`, with `extra` flags.
fn run(dir: &Path, packs: &[(&str, Value)], responses: &Value, extra: &[&str]) -> Ran {
    let args: Vec<&str> = extra.iter().copied().chain(["go"]).collect();
    crate::helpers::run_with_packs(dir, packs, responses, &args, "")
}

/// One `bash` call with `command`, then a final answer.
fn bash_then_done(command: &str) -> Value {
    json!([
        {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": command}}]},
        {"content": "done"}
    ])
}

#[test]
fn the_loaded_tool_filter_offers_exactly_the_included_or_all_but_the_excluded_tools() {
    let all = request_offering(&["bash", "read_file", "web_search"]);
    for (config, expected) in [
        (
            json!({"include": ["bash", "read_file"]}),
            vec!["bash", "read_file"],
        ),
        (
            json!({"exclude": ["bash"]}),
            vec!["read_file", "web_search"],
        ),
        (json!({"include": ["*_*"]}), vec!["read_file", "web_search"]),
    ] {
        let manager = manager();
        manager.load("tool-filter", &config.to_string()).unwrap();
        let chains = manager.registry().get_all();
        let outcome = run_for("s", &chains.provider_request, &(), &all);
        let filtered = outcome.replaced.expect("filtered");
        assert_eq!(offered(&filtered), expected, "{config}");
        assert_eq!(
            filtered.tools[0].description,
            format!("the {} tool", expected[0])
        );
        // A request with no tools, or none filtered out, is left alone.
        let none = run_for("s", &chains.provider_request, &(), &request_offering(&[]));
        assert!(
            none.replaced.is_none() && none.blocked.is_none(),
            "{config}"
        );
        let kept = run_for(
            "s",
            &chains.provider_request,
            &(),
            &request_offering(&expected),
        );
        assert!(kept.replaced.is_none(), "{config}");
    }
    let both = manager()
        .load(
            "tool-filter",
            &json!({"include": ["bash"], "exclude": ["read_file"]}).to_string(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        both.contains("include and exclude are both given"),
        "{both}"
    );
    assert!(!both.contains('\n'), "{both}");
}

#[test]
fn through_the_binary_the_model_is_offered_only_the_included_tools() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("requests.jsonl");
    let record_arg = record.display().to_string();
    let answer = json!([{"content": "fine"}]);
    for (config, check) in [
        (json!({"include": ["bash", "read_file"]}), "include"),
        (json!({"exclude": ["bash"]}), "exclude"),
    ] {
        let _ = std::fs::remove_file(&record);
        let ran = run(
            dir.path(),
            &[("tool-filter", config)],
            &answer,
            &["--record-requests", &record_arg],
        );
        assert_eq!(ran.status(), 0, "{}", ran.stderr());
        let sent: Value = serde_json::from_str(
            std::fs::read_to_string(&record)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        let mut names: Vec<&str> = sent["tools"]
            .as_array()
            .expect("tools recorded")
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        if check == "include" {
            assert_eq!(names, ["bash", "read_file"]);
        } else {
            assert!(
                !names.contains(&"bash") && names.contains(&"read_file"),
                "{names:?}"
            );
        }
    }
}

#[test]
fn the_loaded_approval_policy_asks_once_about_a_matching_call_only() {
    let manager = manager();
    let rules = json!({"rules": [
        {"match": {"tool": "bash", "args.command": "rm*"}, "timeout": "1500ms", "choices": ["allow", "reject", "edit"]},
        {"match": {"tool": "bash"}, "prompt": "any other bash call"}
    ]});
    manager.load("approval-policy", &rules.to_string()).unwrap();
    let chains = manager.registry().get_all();
    let call = |command: &str| ToolCall::new("c1", "bash", json!({"command": command}));
    let ls = run_for("s", &chains.tool_call, &(), &call("ls"));
    let asked = ls.ask.expect("the second rule matches ls");
    assert_eq!(asked.2.prompt, "any other bash call");
    let rm = run_for("s", &chains.tool_call, &(), &call("rm -rf /"));
    let (_, interceptor, question) = *rm.ask.expect("asked");
    assert_eq!(interceptor, "approval-policy/tool");
    assert_eq!(question.prompt, "Approve tool.invoke: bash");
    assert_eq!(question.choices, ["allow", "reject", "edit"]);
    assert_eq!(question.timeout_ms, Some(1500));
    assert_eq!(question.default, "reject");
    // No rule is about provider requests: nothing is registered there.
    assert!(chains.provider_request.is_empty());
    let bad = crate::helpers::manager()
        .load(
            "approval-policy",
            &json!({"rules": [{"mode": "free_text"}]}).to_string(),
        )
        .unwrap_err()
        .to_string();
    assert!(bad.contains("rules[0]: mode must be `choices`"), "{bad}");
}

#[test]
fn through_the_binary_the_operator_allows_rejects_or_edits_a_matching_shell_call() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    let answers = dir.path().join("answers.jsonl");
    let answers_arg = answers.display().to_string();
    let rm_rule = json!({"match": {"tool": "bash", "args.command": "rm*"}});
    let with_edit = json!({"match": {"tool": "bash", "args.command": "rm*"},
                           "choices": ["allow", "edit", "reject"]});
    let two = json!(["allow", "reject"]);
    let three = json!(["allow", "reject", "edit"]);
    let edit = r#"{"answer": "edit", "payload": {"command": "ls -la"}}"#;
    /// One operator answer and what follows from it.
    struct Case<'a> {
        rules: Value,
        answer: &'a str,
        flags: &'a [&'a str],
        choices: &'a Value,
        victim_survives: bool,
        output_has: &'a str,
    }
    let reject = r#"{"answer": "reject"}"#;
    let cases = [
        Case {
            rules: json!([rm_rule]),
            answer: reject,
            flags: &[],
            choices: &two,
            victim_survives: true,
            output_has: "",
        },
        Case {
            rules: json!([rm_rule]),
            answer: r#"{"answer": "allow"}"#,
            flags: &[],
            choices: &two,
            victim_survives: false,
            output_has: "",
        },
        Case {
            rules: json!([with_edit]),
            answer: edit,
            flags: &[],
            choices: &three,
            victim_survives: true,
            output_has: "victim",
        },
        // The edited call still meets the permission policy.
        Case {
            rules: json!([with_edit]),
            answer: edit,
            flags: &["--deny", "bash"],
            choices: &three,
            victim_survives: true,
            output_has: "",
        },
        // Two matching rules: one question.
        Case {
            rules: json!([rm_rule, {"match": {"tool": "bash"}}]),
            answer: reject,
            flags: &[],
            choices: &two,
            victim_survives: true,
            output_has: "",
        },
    ];
    for Case {
        rules,
        answer,
        flags,
        choices,
        victim_survives: survives,
        output_has: output,
    } in cases
    {
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(&answers, format!("{answer}\n")).unwrap();
        let mut extra = vec!["--approvals", answers_arg.as_str()];
        extra.extend_from_slice(flags);
        let ran = run(
            dir.path(),
            &[("approval-policy", json!({ "rules": rules }))],
            &bash_then_done("rm -rf victim"),
            &extra,
        );
        let answered = serde_json::from_str::<Value>(answer).unwrap()["answer"].clone();
        let case = format!("{answer} {flags:?}");
        let asked = ran.of_type("approval_requested");
        assert_eq!(asked.len(), 1, "{case}: {}", ran.stdout());
        assert_eq!(asked[0]["prompt"], "Approve tool.invoke: bash", "{case}");
        assert_eq!(asked[0]["subject"], "bash", "{case}");
        assert_eq!(&asked[0]["choices"], choices, "{case}");
        let answers_given = ran.of_type("approval_answered");
        assert_eq!(answers_given.len(), 1, "{case}");
        assert_eq!(answers_given[0]["answer"], answered, "{case}");
        assert_eq!(victim.exists(), survives, "{case}");
        let result = ran.of_type("tool_result").pop().expect("tool_result");
        let ran_ok = answered == "allow" || (answered == "edit" && flags.is_empty());
        assert_eq!(result["is_error"], !ran_ok, "{case}: {result}");
        let text = result.to_string();
        assert!(text.contains(output), "{case}: {result}");
    }
    // A call no rule matches passes without a question.
    let ran = run(
        dir.path(),
        &[(
            "approval-policy",
            json!({"rules": [{"match": {"tool": "bash", "args.command": "rm*"}}]}),
        )],
        &bash_then_done("ls"),
        &["--no"],
    );
    assert!(
        ran.of_type("approval_requested").is_empty(),
        "{}",
        ran.stdout()
    );
    let result = ran.of_type("tool_result").pop().expect("tool_result");
    assert_eq!(result["is_error"], false, "{result}");
}

#[test]
fn through_the_binary_an_unanswered_question_takes_the_rules_default_and_a_template_renders_the_command(
) {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.jsonl");
    std::fs::write(&answers, "").unwrap();
    let answers_arg = answers.display().to_string();
    for (default, blocked) in [("reject", true), ("allow", false)] {
        let rules = json!({"rules": [{
            "match": {"tool": "bash"}, "timeout": "1s", "default_choice": default,
            "prompt": "Run shell {args.command}?"
        }]});
        let ran = run(
            dir.path(),
            &[("approval-policy", rules)],
            &bash_then_done("ls /etc"),
            &["--approvals", &answers_arg],
        );
        let asked = ran.of_type("approval_requested");
        assert_eq!(asked.len(), 1, "{default}: {}", ran.stdout());
        assert_eq!(asked[0]["prompt"], "Run shell ls /etc?");
        assert_eq!(ran.of_type("approval_answered")[0]["answer"], default);
        let result = ran.of_type("tool_result").pop().expect("tool_result");
        assert_eq!(result["is_error"], blocked, "{default}: {result}");
    }
}

#[test]
fn the_loaded_rate_limiter_pauses_a_full_window_and_bounds_its_queue() {
    let request = request_offering(&[]);
    let reject = manager();
    reject
        .load(
            "rate-limiter",
            &json!({"requests_per_minute": 2, "window_seconds": 10, "pause_message": "paused {seconds}s"})
                .to_string(),
        )
        .unwrap();
    let chains = reject.registry().get_all();
    for _ in 0..2 {
        let outcome = run_for("s", &chains.provider_request, &(), &request);
        assert!(outcome.pause.is_none() && outcome.blocked.is_none());
    }
    let third = run_for("s", &chains.provider_request, &(), &request);
    let (interceptor, wait, reason) = *third.pause.expect("paused");
    assert_eq!(interceptor, "rate-limiter/window");
    assert!(
        wait <= std::time::Duration::from_secs(10) && wait.as_secs() >= 5,
        "{wait:?}"
    );
    let seconds = wait.as_secs() + 1;
    assert_eq!(reason, format!("Rate limited: retry in {seconds}s"));
    assert_eq!(third.notices.len(), 1);
    assert_eq!(third.notices[0].text, format!("paused {seconds}s"));

    let queue = manager();
    queue
        .load(
            "rate-limiter",
            &json!({"mode": "queue", "requests_per_minute": 1, "window_seconds": 10, "queue": {"max_pending": 2}})
                .to_string(),
        )
        .unwrap();
    let chains = queue.registry().get_all();
    let first = run_for("a", &chains.provider_request, &(), &request);
    assert!(first.pause.is_none() && first.blocked.is_none());
    for who in ["b", "c"] {
        let outcome = run_for(who, &chains.provider_request, &(), &request);
        let (_, _, reason) = *outcome.pause.expect("queued");
        assert!(
            reason.starts_with("Rate limited (queued): retry in ~"),
            "{reason}"
        );
    }
    let full = run_for("d", &chains.provider_request, &(), &request);
    assert_eq!(
        full.blocked.as_deref(),
        Some("Rate limited: queue full (max_pending=2)")
    );
    assert_eq!(
        full.notices[0].text,
        "Rate limit queue full (2 pending). Request rejected."
    );
}

#[test]
fn through_the_binary_a_paused_request_resumes_once_and_the_turn_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let think = |id: &str| json!({"tool_calls": [{"id": id, "name": "think", "arguments": {"thought": "x"}}]});
    let responses = json!([think("t1"), think("t2"), {"content": "finished"}]);
    let limiter = json!({"requests_per_minute": 1, "window_seconds": 0.4, "pause_message": "paused {seconds}s"});
    let ran = run(dir.path(), &[("rate-limiter", limiter)], &responses, &[]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("finished"))
    );
    let paused = ran.of_type("turn_paused");
    // Three back-to-back calls in a one-per-window limit: the later ones
    // wait; none waits twice (a request counted again on resuming would be
    // paused on every retry until the host gave up).
    assert!(!paused.is_empty() && paused.len() <= 2, "{}", ran.stdout());
    for pause in &paused {
        assert_eq!(pause["interceptor"], "rate-limiter/window");
        assert_eq!(pause["reason"], "Rate limited: retry in 1s");
        assert!(pause["wait_ms"].as_u64().unwrap() <= 400, "{pause}");
    }
    let notices = ran.of_type("notice");
    assert_eq!(notices.len(), paused.len());
    assert!(notices
        .iter()
        .all(|n| n["text"] == "paused 1s" && n["seam"] == "provider_request"));
    let mut since_pause = None;
    for event in ran.events() {
        match event["type"].as_str() {
            Some("turn_paused") => {
                assert_ne!(
                    since_pause,
                    Some(0),
                    "a call paused twice: {}",
                    ran.stdout()
                );
                since_pause = Some(0);
            }
            Some("assistant") => since_pause = since_pause.map(|n| n + 1),
            _ => {}
        }
    }
}

#[test]
fn through_the_binary_a_provider_request_rule_asks_before_the_call_and_a_rejection_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let rules =
        json!({"rules": [{"match": {"action_kind": "llm.request", "args.tools": "*\"bash\"*"}}]});
    let answer = json!([{"content": "the answer"}]);
    let ran = run(
        dir.path(),
        &[("approval-policy", rules.clone())],
        &answer,
        &["--no"],
    );
    let asked = ran.of_type("approval_requested");
    assert_eq!(asked.len(), 1, "{}", ran.stdout());
    assert_eq!(asked[0]["seam"], "provider_request");
    assert_eq!(asked[0]["subject"], "provider request");
    assert!(
        asked[0]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Approve llm.request: "),
        "{}",
        asked[0]
    );
    assert_eq!(asked[0]["choices"], json!(["allow", "reject"]));
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["success"], false);
    assert!(ran.of_type("assistant").is_empty(), "{}", ran.stdout());
    // Allowed, the call is made.
    let ran = run(
        dir.path(),
        &[("approval-policy", rules)],
        &answer,
        &["--yes"],
    );
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("the answer"))
    );
}
