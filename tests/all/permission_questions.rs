//! The permission policy's questions (`--ask TOOL`), through the built
//! binary: each is an `approval_requested` event and its answer an
//! `approval_answered` naming where it came from (`--approvals FILE`,
//! `--yes`, `--no`, the terminal), as a pack's question is; a sub-agent's
//! reach the parent nested; the audit log records them, and still
//! verifies; the readable transcript shows them.

use crate::audit::{lines, verify};
use crate::helpers::run_with_packs;
use chimera_tests::cli::{chimera, Ran};
use serde_json::{json, Value};
use std::path::Path;

/// `dir/script.json` holding `responses`; its path.
fn script(dir: &Path, responses: &Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.display().to_string()
}

/// Two `bash` calls in one reply (`c1` creates `one`, `c2` creates
/// `two`), then a final answer.
fn two_bash_calls() -> Value {
    json!([
        {"tool_calls": [
            {"id": "c1", "name": "bash", "arguments": {"command": "touch one"}},
            {"id": "c2", "name": "bash", "arguments": {"command": "touch two"}}
        ]},
        {"content": "done"}
    ])
}

/// `chimera run --ask bash` in `dir` on `responses`, with `more` flags
/// (who answers, `--json`, `--audit`) before the prompt.
fn ask_bash(dir: &Path, responses: &Value, more: &[&str]) -> Ran {
    let script = script(dir, responses);
    let mut args = vec!["run", "--ask", "bash", "--script", &script];
    args.extend_from_slice(more);
    args.push("go");
    let ran = chimera(dir, &args, &[], "");
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    ran
}

/// `dir/answers.jsonl` holding `lines`; its path.
fn answers(dir: &Path, lines: &[&str]) -> String {
    let path = dir.join("answers.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.display().to_string()
}

/// The events that are the permission policy's questions and answers
/// (`approval_requested` / `approval_answered` on seam `permission`), in
/// order, as `(type, event)`.
fn permission_events(ran: &Ran) -> Vec<(String, Value)> {
    ran.events()
        .into_iter()
        .filter(|e| e["seam"] == "permission")
        .map(|e| (e["type"].as_str().unwrap_or_default().to_owned(), e))
        .collect()
}

/// Checks that `question` is the permission policy's about `bash` running
/// `command`.
fn assert_asks_about_bash(question: &Value, command: &str) {
    assert_eq!(question["type"], "approval_requested", "{question}");
    assert_eq!(question["interceptor"], "permission-policy", "{question}");
    assert_eq!(question["subject"], "bash", "{question}");
    assert_eq!(
        question["choices"],
        json!(["allow", "reject"]),
        "{question}"
    );
    let expected = format!("Allow bash({})?", json!({ "command": command }));
    assert_eq!(question["prompt"], expected.as_str(), "{question}");
}

/// Checks that `answer` is the permission policy's `answer` about `bash`,
/// from `source`.
fn assert_answered(answer: &Value, expected: &str, source: &str) {
    assert_eq!(answer["type"], "approval_answered", "{answer}");
    assert_eq!(answer["interceptor"], "permission-policy", "{answer}");
    assert_eq!(answer["subject"], "bash", "{answer}");
    assert_eq!(answer["answer"], expected, "{answer}");
    assert_eq!(answer["source"], source, "{answer}");
}

#[test]
fn an_ask_answered_from_the_approvals_file_is_a_question_and_an_answer_before_each_calls_result() {
    let dir = tempfile::tempdir().unwrap();
    let file = answers(
        dir.path(),
        &[
            r#"{"answer": "allow"}"#,
            r#"{"answer": "reject", "tool": "bash"}"#,
        ],
    );
    let ran = ask_bash(
        dir.path(),
        &two_bash_calls(),
        &["--json", "--approvals", &file],
    );
    assert!(dir.path().join("one").exists(), "the allowed call ran");
    assert!(
        !dir.path().join("two").exists(),
        "the rejected call did not"
    );
    // Per call: the question, the answer, then the call's result.
    let settled: Vec<Value> = ran
        .events()
        .into_iter()
        .filter(|e| e["seam"] == "permission" || e["type"] == "tool_result")
        .collect();
    assert_eq!(settled.len(), 6, "{}", ran.stdout());
    assert_asks_about_bash(&settled[0], "touch one");
    assert_answered(&settled[1], "allow", "approvals_file");
    assert_eq!(settled[2]["call_id"], "c1");
    assert_eq!(settled[2]["is_error"], false, "{}", settled[2]);
    assert_asks_about_bash(&settled[3], "touch two");
    assert_answered(&settled[4], "reject", "approvals_file");
    assert_eq!(settled[5]["call_id"], "c2");
    assert_eq!(settled[5]["content"], "Permission denied for bash");
}

#[test]
fn yes_and_no_answer_an_ask_as_events_naming_the_flag() {
    for (flag, answer, source, ran_it) in [
        ("--yes", "allow", "yes", true),
        ("--no", "reject", "no", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let responses = json!([
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "touch one"}}]},
            {"content": "done"}
        ]);
        let ran = ask_bash(dir.path(), &responses, &["--json", flag]);
        assert_eq!(dir.path().join("one").exists(), ran_it, "{flag}");
        let events = permission_events(&ran);
        assert_eq!(events.len(), 2, "{flag}: {}", ran.stdout());
        assert_asks_about_bash(&events[0].1, "touch one");
        assert_answered(&events[1].1, answer, source);
    }
}

#[test]
fn a_tool_the_policy_does_not_ask_about_raises_no_question() {
    let dir = tempfile::tempdir().unwrap();
    let responses = json!([
        {"tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "hm"}}]},
        {"content": "done"}
    ]);
    let ran = ask_bash(dir.path(), &responses, &["--json", "--no"]);
    assert!(permission_events(&ran).is_empty(), "{}", ran.stdout());
    assert_eq!(ran.of_type("tool_result")[0]["is_error"], false);
}

#[test]
fn a_sub_agents_ask_reaches_the_parent_nested_under_the_delegating_call() {
    let dir = tempfile::tempdir().unwrap();
    let responses = json!([
        {"tool_calls": [{"id": "d1", "name": "delegate", "arguments": {"task": "tidy"}}]},
        {"tool_calls": [{"id": "s1", "name": "bash", "arguments": {"command": "touch one"}}]},
        {"content": "sub-agent done"},
        {"content": "done"}
    ]);
    let ran = ask_bash(dir.path(), &responses, &["--json", "--yes"]);
    let events = permission_events(&ran);
    assert_eq!(events.len(), 2, "{}", ran.stdout());
    for (_, event) in &events {
        assert_eq!(event["depth"], 1, "{event}");
        assert_eq!(event["parent_call_id"], "d1", "{event}");
    }
    assert_asks_about_bash(&events[0].1, "touch one");
    assert_answered(&events[1].1, "allow", "yes");
}

#[test]
fn the_audit_log_records_each_ask_and_its_answer_with_where_it_came_from_and_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let file = answers(
        dir.path(),
        &[r#"{"answer": "allow"}"#, r#"{"answer": "reject"}"#],
    );
    ask_bash(
        dir.path(),
        &two_bash_calls(),
        &["--audit", audit.to_str().unwrap(), "--approvals", &file],
    );
    let log: Vec<Value> = lines(&audit)
        .into_iter()
        .filter(|l| l["seam"] == "permission")
        .collect();
    assert_eq!(log.len(), 4, "an ask and an answer per call: {log:?}");
    for (line, (decision, call_id, answer)) in log.iter().zip([
        ("ask", "c1", None),
        ("answered", "c1", Some("allow")),
        ("ask", "c2", None),
        ("answered", "c2", Some("reject")),
    ]) {
        assert_eq!(line["decision"], decision, "{line}");
        assert_eq!(line["interceptor"], "permission-policy", "{line}");
        assert_eq!(line["pack"], Value::Null, "the host's policy: {line}");
        assert_eq!(line["tool"], "bash", "{line}");
        assert_eq!(line["call_id"], call_id, "{line}");
        match answer {
            Some(answer) => {
                assert_eq!(line["answer"], answer, "{line}");
                assert_eq!(line["source"], "approvals_file", "{line}");
            }
            None => assert!(
                line["reason"].as_str().unwrap().starts_with("Allow bash("),
                "the question: {line}"
            ),
        }
    }
    let verified = verify(dir.path(), &audit, &[]);
    assert_eq!(verified.status(), 0, "{}", verified.stderr());
}

#[test]
fn the_readable_transcript_shows_each_ask_and_where_its_answer_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = answers(
        dir.path(),
        &[r#"{"answer": "allow"}"#, r#"{"answer": "reject"}"#],
    );
    let ran = ask_bash(dir.path(), &two_bash_calls(), &["--approvals", &file]);
    let shown = ran.stdout();
    let question = "? permission-policy asks about bash: Allow bash({\"command\":\"touch one\"})?";
    assert!(shown.contains(question), "{shown}");
    for answer in ["allow", "reject"] {
        let line = format!("? permission-policy: answered {answer} (from the approvals file)");
        assert!(shown.contains(&line), "{line} in:\n{shown}");
    }
    assert!(
        shown.find(question) < shown.find("answered allow"),
        "the question comes first: {shown}"
    );
}

#[test]
fn an_ask_typed_at_the_terminal_is_answered_from_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(
        dir.path(),
        &json!([
            {"tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "plan"}}]},
            {"content": "done"}
        ]),
    );
    let ran = crate::cli_papercuts::chimera_on_a_terminal(
        dir.path(),
        &["run", "--json", "--ask", "think", "--script", &script, "hi"],
        "y\n",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let answered = ran.of_type("approval_answered");
    assert_eq!(answered.len(), 1, "{}", ran.stdout());
    assert_eq!(answered[0]["seam"], "permission");
    assert_eq!(answered[0]["subject"], "think");
    assert_eq!(answered[0]["answer"], "allow");
    assert_eq!(answered[0]["source"], "terminal");
}

#[test]
fn a_packs_answer_names_its_source_too_in_the_events_and_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let file = answers(dir.path(), &[r#"{"answer": "reject"}"#]);
    let ran = run_with_packs(
        dir.path(),
        &[(
            "approval-policy",
            json!({"rules": [{"match": {"tool": "bash"}}]}),
        )],
        &json!([
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "touch one"}}]},
            {"content": "done"}
        ]),
        &[
            "--audit",
            audit.to_str().unwrap(),
            "--approvals",
            &file,
            "go",
        ],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let answered = ran.of_type("approval_answered");
    assert_eq!(answered.len(), 1, "{}", ran.stdout());
    assert_eq!(answered[0]["seam"], "tool_call");
    assert_eq!(answered[0]["subject"], "bash");
    assert_eq!(answered[0]["answer"], "reject");
    assert_eq!(answered[0]["source"], "approvals_file");
    let log = lines(&audit);
    let line = log
        .iter()
        .find(|l| l["decision"] == "answered")
        .expect("the answer is recorded");
    assert_eq!(line["pack"], "approval-policy");
    assert_eq!(line["source"], "approvals_file");
    let verified = verify(dir.path(), &audit, &[]);
    assert_eq!(verified.status(), 0, "{}", verified.stderr());
}
