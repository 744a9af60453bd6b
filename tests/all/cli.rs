//! The `chimera` binary's outward contract, through the built
//! executable: the JSONL transcript, exit statuses, one-line errors.
//!
//! One file for the binary's outward contract, so the whole contract reads
//! in one place; each test is an independent run of the binary.

use chimera_tests::cli::{command, lines_of, until, Ran};
use chimera_tests::{pack_path, packs_dir, test_packs_dir};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

fn chimera(args: &[&str], stdin: &str, cwd: &Path) -> Ran {
    chimera_tests::cli::chimera(cwd, args, &[], stdin)
}

fn write_script(dir: &Path, responses: Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.display().to_string()
}

fn think_then_done() -> Value {
    json!([
        {"content": "planning", "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "hello"}}]},
        {"content": "done"}
    ])
}

fn assert_shapes(events: &[Value]) {
    let keys = |kind: &str| -> &'static [&'static str] {
        match kind {
            "user" => &["content"],
            "assistant" => &["content", "tool_calls"],
            "tool_result" => &["call_id", "name", "content", "is_error"],
            "interceptor" => &[
                "seam",
                "decision",
                "reason",
                "tool_name",
                "call_id",
                "interceptor",
            ],
            "pack_loaded" | "pack_reloaded" => &["name", "version", "path"],
            "pack_reload_failed" => &["name", "error"],
            "run_end" => &["success", "output", "reason", "usage"],
            other => panic!("unexpected event type {other}"),
        }
    };
    for event in events {
        let kind = event["type"].as_str().expect("every event has a type");
        for key in keys(kind) {
            assert!(event.get(key).is_some(), "{kind} lacks {key}: {event}");
        }
    }
}

#[test]
fn every_seam_blocks_replaces_and_errors_in_the_json_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), think_then_done());
    let plugins = test_packs_dir().display().to_string();
    for seam in ["context", "provider_request", "tool_call", "tool_result"] {
        for (action, decision) in [
            ("block", "blocked"),
            ("replace", "replaced"),
            ("error", "error"),
        ] {
            let config = json!({ seam: {"action": action, "reason": format!("{seam} says {action}"), "with": "+x"} });
            let pack = format!("fixture={config}");
            let cli = chimera(
                &[
                    "run",
                    "--plugins-dir",
                    &plugins,
                    "--pack",
                    &pack,
                    "--script",
                    &script,
                    "--json",
                    "think first",
                ],
                "",
                dir.path(),
            );
            let case = format!("{seam}/{action}");
            let events = cli.events();
            assert_shapes(&events);
            assert_eq!(events[0]["type"], "pack_loaded", "{case}");
            assert_eq!(events[0]["name"], "fixture");
            assert_eq!(
                events[0]["path"],
                pack_path("chimera-fixture-pack").display().to_string()
            );
            let interceptor = cli.of_type("interceptor");
            assert!(!interceptor.is_empty(), "{case}: no interceptor event");
            let first = &interceptor[0];
            assert_eq!(first["seam"], seam, "{case}");
            assert_eq!(first["decision"], decision, "{case}");
            assert_eq!(first["interceptor"], format!("fixture/{seam}-0"), "{case}");
            if seam.starts_with("tool") {
                assert_eq!(
                    (first["tool_name"].as_str(), first["call_id"].as_str()),
                    (Some("think"), Some("c1"))
                );
            }
            let end = cli.of_type("run_end").pop().expect("run_end");
            let pre_provider_block = action == "block" && !seam.starts_with("tool");
            if pre_provider_block {
                assert_eq!(cli.status(), 1, "{case}");
                assert_eq!(end["success"], false);
                assert_eq!(
                    end["output"],
                    format!("Blocked by interceptor: {seam} says block")
                );
                assert_eq!(
                    end["reason"],
                    format!("interceptor_blocked: {seam} says block")
                );
                assert!(
                    cli.of_type("assistant").is_empty(),
                    "{case}: no provider call"
                );
            } else {
                assert_eq!(cli.status(), 0, "{case}: {}", cli.stderr());
                assert_eq!(end["success"], true);
                assert_eq!(end["output"], "done");
            }
            let result = cli.of_type("tool_result").first().cloned();
            match (seam, action) {
                ("tool_call", "block") => {
                    let result = result.unwrap();
                    assert_eq!(
                        result["content"],
                        "Blocked by interceptor: tool_call says block"
                    );
                    assert_eq!(result["is_error"], true);
                }
                ("tool_call", "error") => {
                    assert_eq!(
                        result.unwrap()["content"],
                        "Blocked by interceptor: interceptor error: tool_call says error"
                    );
                }
                ("tool_result", "block") => {
                    assert_eq!(
                        result.unwrap()["content"],
                        "[tool result withheld by interceptor: tool_result says block]"
                    );
                }
                ("tool_result", "replace") => {
                    assert_eq!(result.unwrap()["content"], "Thought recorded.+x");
                }
                _ if !pre_provider_block => {
                    assert_eq!(result.unwrap()["is_error"], false, "{case}");
                }
                _ => {}
            }
        }
    }
}

#[test]
fn requests_are_recorded_exactly_as_the_model_received_them() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), json!([{"content": "done"}]));
    let record = dir.path().join("requests.jsonl");
    let cli = chimera(
        &[
            "run",
            "--script",
            &script,
            "--record-requests",
            &record.display().to_string(),
            "--header",
            "Authorization: Bearer sk-live",
            "--system",
            "be brief",
            "--json",
            "hello",
        ],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 0, "{}", cli.stderr());
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    let request = &lines[0];
    for key in ["model", "messages", "tools", "kwargs", "headers"] {
        assert!(request.get(key).is_some(), "recorded request lacks {key}");
    }
    assert_eq!(
        request["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        request["messages"][1],
        json!({"role": "user", "content": "hello"})
    );
    assert_eq!(
        request["headers"],
        json!([["Authorization", "Bearer sk-live"]])
    );
    let names: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "replace_in_file",
            "apply_patch",
            "bash",
            "think",
            "todo",
            "delegate"
        ]
    );
}

#[test]
fn turns_from_stdin_continue_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        json!([{"content": "one"}, {"content": "two"}, {"content": "three"}]),
    );
    let cli = chimera(
        &[
            "run",
            "--script",
            &script,
            "--json",
            "--turns-from-stdin",
            "first",
        ],
        "second\n\nthird\n",
        dir.path(),
    );
    assert_eq!(cli.status(), 0, "{}", cli.stderr());
    let users: Vec<Value> = cli
        .of_type("user")
        .into_iter()
        .map(|e| e["content"].clone())
        .collect();
    assert_eq!(users, [json!("first"), json!("second"), json!("third")]);
    let ends: Vec<Value> = cli
        .of_type("run_end")
        .into_iter()
        .map(|e| e["output"].clone())
        .collect();
    assert_eq!(ends, [json!("one"), json!("two"), json!("three")]);
}

#[test]
fn a_malformed_script_is_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, r#"{"responses": [{"content": 42}]}"#).unwrap();
    let cli = chimera(
        &["run", "--script", &path.display().to_string(), "hi"],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 2);
    let line = cli.error_line();
    assert!(line.starts_with("error: malformed script"), "{line}");
    assert!(line.contains("line 1"), "{line}");
}

#[test]
fn an_unknown_pack_is_exit_3_naming_the_search_path() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), json!([{"content": "done"}]));
    let plugins = dir.path().join("plugins");
    let cli = chimera(
        &[
            "run",
            "--plugins-dir",
            &plugins.display().to_string(),
            "--pack",
            "no-such-pack",
            "--script",
            &script,
            "hi",
        ],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 3);
    let line = cli.error_line();
    assert!(
        line.contains("no pack entry point named 'no-such-pack'"),
        "{line}"
    );
    assert!(line.contains(&plugins.display().to_string()), "{line}");
    assert!(
        line.contains(&packs_dir().display().to_string()),
        "the executable's directory is searched too: {line}"
    );
}

#[test]
fn a_pack_that_refuses_its_config_is_exit_3_and_bad_json_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), json!([{"content": "done"}]));
    let plugins = test_packs_dir().display().to_string();
    let cli = chimera(
        &[
            "run",
            "--plugins-dir",
            &plugins,
            "--pack",
            r#"fixture={"nope": 1}"#,
            "--script",
            &script,
            "hi",
        ],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 3);
    assert!(cli
        .error_line()
        .contains("fixture: bad config: unknown field `nope`"));
    let cli = chimera(
        &["run", "--pack", "fixture={nope", "--script", &script, "hi"],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 2);
    assert!(cli.error_line().contains("the config is not JSON"));
}

#[test]
fn a_script_that_runs_out_is_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        json!([{"tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]}]),
    );
    let cli = chimera(
        &["run", "--script", &script, "--json", "hi"],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 1);
    let end = cli.of_type("run_end").pop().unwrap();
    assert_eq!(end["success"], false);
    assert_eq!(end["reason"], "provider_error");
    assert!(end["output"]
        .as_str()
        .unwrap()
        .contains("the script ran out"));
    assert!(cli.error_line().contains("the script ran out"));
}

#[test]
fn usage_errors_are_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["run", "--no-such-flag"],
        vec!["run", "hi"],
        vec!["run", "--script", "x.json"],
        vec!["frobnicate"],
    ] {
        let cli = chimera(&args, "", dir.path());
        assert_eq!(cli.status(), 2, "{args:?}");
        assert!(cli.error_line().starts_with("error: "), "{args:?}");
    }
}

#[test]
fn file_tools_refuse_paths_outside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let script = write_script(
        dir.path(),
        json!([
            {"tool_calls": [
                {"id": "a", "name": "write_file", "arguments": {"path": "../escape.txt", "content": "x"}},
                {"id": "b", "name": "write_file", "arguments": {"path": dir.path().join("abs.txt"), "content": "x"}},
                {"id": "c", "name": "read_file", "arguments": {"path": "/etc/passwd"}}
            ]},
            {"content": "done"}
        ]),
    );
    let cli = chimera(
        &[
            "run",
            "--workspace",
            &workspace.display().to_string(),
            "--script",
            &script,
            "--json",
            "escape",
        ],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 0, "{}", cli.stderr());
    let results = cli.of_type("tool_result");
    assert_eq!(results.len(), 3);
    for result in results {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("escapes the workspace"),
            "{result}"
        );
    }
    assert!(!dir.path().join("escape.txt").exists());
    assert!(!dir.path().join("abs.txt").exists());
}

#[test]
fn packs_list_and_check_read_packs_without_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = test_packs_dir().display().to_string();
    let cli = chimera(
        &["packs", "list", "--plugins-dir", &plugins, "--json"],
        "",
        dir.path(),
    );
    assert_eq!(cli.status(), 0);
    let names: Vec<String> = cli
        .events()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        names.contains(&"fixture".to_owned()) && names.contains(&"fixture-alt".to_owned()),
        "{names:?}"
    );

    let fixture = pack_path("chimera-fixture-pack").display().to_string();
    let cli = chimera(&["packs", "check", &fixture, "--json"], "", dir.path());
    assert_eq!(cli.status(), 0, "{}", cli.stderr());
    let checked = cli.events();
    assert_eq!(checked[0]["name"], "fixture");
    assert_eq!(
        checked[0]["seams"],
        json!([
            "context",
            "provider_request",
            "tool_call",
            "tool_result",
            "model_response",
            "output",
            "stream_chunk"
        ])
    );

    let garbage = dir.path().join("libgarbage.so");
    std::fs::write(&garbage, "garbage").unwrap();
    let bytes = std::fs::read(pack_path("chimera-fixture-pack")).unwrap();
    let truncated = dir.path().join("libtruncated.so");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    for file in [garbage, truncated] {
        let cli = chimera(
            &["packs", "check", &file.display().to_string()],
            "",
            dir.path(),
        );
        assert_eq!(cli.status(), 3, "{}", cli.stderr());
        cli.error_line();
    }
}

#[test]
fn each_bundled_pack_shows_its_behaviour_with_its_pinned_strings() {
    let dir = tempfile::tempdir().unwrap();
    let run = |pack: &str, responses: Value, prompt: &str, extra: &[&str]| {
        let script = write_script(dir.path(), responses);
        let mut args = vec!["run", "--pack", pack, "--script", &script, "--json"];
        args.extend_from_slice(extra);
        args.push(prompt);
        chimera(&args, "", dir.path())
    };

    let plan = run(
        "plan-gate",
        json!([
            {"content": "editing right away", "tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "early"}}]},
            {"tool_calls": [{"id": "p1", "name": "think", "arguments": {"thought": "plan: write hello.txt"}}]},
            {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "hello.txt", "content": "planned"}}]},
            {"content": "done"}
        ]),
        "create hello.txt",
        &[],
    );
    assert_eq!(plan.status(), 0, "{}", plan.stderr());
    let reason = "plan-gate: no plan recorded this turn — call one of [think, todo] to record a plan before using write_file";
    let blocked = &plan.of_type("interceptor")[0];
    assert_eq!(
        (blocked["seam"].as_str(), blocked["decision"].as_str()),
        (Some("tool_call"), Some("blocked"))
    );
    assert_eq!(blocked["reason"], reason);
    assert_eq!(blocked["interceptor"], "plan-gate/gate");
    let results = plan.of_type("tool_result");
    assert_eq!(
        results[0]["content"],
        format!("Blocked by interceptor: {reason}")
    );
    assert_eq!(results[2]["is_error"], false);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "planned"
    );

    let record = dir.path().join("wire.jsonl");
    let record_arg = record.display().to_string();
    let redact = run(
        "redactor",
        json!([
            {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo connected using sk-livekey12345678 just fine"}}]},
            {"content": "done"}
        ]),
        "authenticate with sk-livekey12345678 please",
        &["--record-requests", &record_arg],
    );
    assert_eq!(redact.status(), 0, "{}", redact.stderr());
    assert_eq!(
        redact.of_type("tool_result")[0]["content"],
        "connected using [redacted] just fine\n"
    );
    let wire = std::fs::read_to_string(&record).unwrap();
    assert!(
        !wire.contains("sk-livekey12345678")
            && wire.contains("authenticate with [redacted] please")
    );
    assert_eq!(
        redact.of_type("user")[0]["content"],
        "authenticate with sk-livekey12345678 please"
    );
    let seams: Vec<(String, String)> = redact
        .of_type("interceptor")
        .iter()
        .map(|e| {
            (
                e["seam"].as_str().unwrap().to_owned(),
                e["interceptor"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(seams.contains(&("provider_request".into(), "redactor/wire".into())));
    assert!(seams.contains(&("tool_result".into(), "redactor/result".into())));

    let spawn = run(
        "delegate-spawner",
        json!([
            {"tool_calls": [{"id": "s1", "name": "spawn_research", "arguments": {"task": "count the beans"}}]},
            {"content": "sub-agent finished: count the beans"},
            {"content": "done"}
        ]),
        "research",
        &[],
    );
    assert_eq!(spawn.status(), 0, "{}", spawn.stderr());
    let result = &spawn.of_type("tool_result")[0];
    assert_eq!(
        (
            result["call_id"].as_str(),
            result["name"].as_str(),
            result["content"].as_str()
        ),
        (
            Some("s1"),
            Some("delegate"),
            Some("sub-agent finished: count the beans")
        )
    );
    assert_eq!(
        spawn.of_type("interceptor")[0]["interceptor"],
        "delegate-spawner/rewrite"
    );
}

#[test]
fn the_demo_shows_every_policy_at_work() {
    let dir = tempfile::tempdir().unwrap();
    let readable = chimera(&["demo"], "", dir.path());
    assert_eq!(readable.status(), 0, "{}", readable.stderr());
    let text = String::from_utf8_lossy(&readable.output.stdout).into_owned();
    for expected in [
        "loaded pack plan-gate",
        "loaded pack redactor",
        "loaded pack delegate-spawner",
        "plan-gate: no plan recorded this turn — call one of [think, todo] to record a plan before using bash",
        "tool_call replaced by delegate-spawner/rewrite",
        "← bash [c3]: API token: [redacted]",
        "user: Set up the demo project. My deploy key is [redacted].",
        "header Authorization: [redacted]",
        "← delegate [c5]: Pinto, black and kidney beans.",
        "✓ done",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let json = chimera(&["demo", "--json"], "", dir.path());
    assert_eq!(json.status(), 0);
    assert_eq!(json.of_type("pack_loaded").len(), 3);
    assert_eq!(json.of_type("run_end")[0]["success"], true);
}

#[test]
fn a_live_session_picks_up_a_rebuilt_pack_and_survives_a_half_written_one() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let file = chimera_host::plugins::platform::library_file_name("chimera-fixture-pack");
    chimera_tests::publish(
        &plugins,
        &file,
        &std::fs::read(pack_path("chimera-fixture-pack")).unwrap(),
    );
    let turn = |n: u32| {
        json!([
            {"tool_calls": [{"id": format!("b{n}"), "name": "bash", "arguments": {"command": "true"}}]},
            {"content": format!("turn {n} done")}
        ])
    };
    let responses: Vec<Value> = (1..=3)
        .flat_map(|n| turn(n).as_array().unwrap().clone())
        .collect();
    let script = write_script(dir.path(), Value::Array(responses));
    let pack = format!(
        "fixture={}",
        json!({"tool_call": {"action": "block", "reason": "{tag} says no"}})
    );
    let plugins_arg = plugins.display().to_string();
    let args = [
        "run",
        "--watch",
        "--turns-from-stdin",
        "--json",
        "--plugins-dir",
        &plugins_arg,
        "--pack",
        &pack,
        "--script",
        &script,
    ];
    let mut child = command(dir.path(), &args, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let events = lines_of(&mut child);
    let blocked_reason = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["type"] == "tool_result")
            .map(|e| e["content"].as_str().unwrap().to_owned())
    };

    writeln!(stdin, "turn one").unwrap();
    let first = until(&events, "run_end");
    assert_eq!(
        blocked_reason(&first).as_deref(),
        Some("Blocked by interceptor: v1 says no")
    );

    let v2 = std::fs::read(chimera_tests::fixture_v2()).unwrap();
    chimera_tests::publish(&plugins, &file, &v2);
    let reloaded = until(&events, "pack_reloaded");
    assert_eq!(reloaded.last().unwrap()["name"], "fixture");
    writeln!(stdin, "turn two").unwrap();
    let second = until(&events, "run_end");
    assert_eq!(
        blocked_reason(&second).as_deref(),
        Some("Blocked by interceptor: v2 says no")
    );

    let mut half = v2.clone();
    half.truncate(v2.len() / 2);
    half.extend_from_slice(b"half");
    chimera_tests::publish(&plugins, &file, &half);
    let failed = until(&events, "pack_reload_failed");
    let failure = failed.last().unwrap();
    assert_eq!(failure["name"], "fixture");
    assert!(
        failure["error"].as_str().unwrap().contains("incomplete"),
        "{failure}"
    );
    writeln!(stdin, "turn three").unwrap();
    let third = until(&events, "run_end");
    assert_eq!(
        blocked_reason(&third).as_deref(),
        Some("Blocked by interceptor: v2 says no")
    );

    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}
