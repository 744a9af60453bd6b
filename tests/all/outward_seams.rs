//! The output-side seams through the binary and the loaded fixture pack:
//! `model_response` (substitution), `output` (redaction, refusal),
//! `stream_chunk` (release, hold, block, retract), notices, and the
//! streaming downgrade for packs that gate whole replies only.

use crate::harness::{script, Harness};
use chimera_host::interception::{InterceptDecision, Interceptor, Interceptors};
use chimera_tests::cli::Ran;
use chimera_tests::test_packs_dir;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const BANNED: &str = "Response contains prohibited term: \"forbidden\"";
const NOTICE: &str = "Content blocked: contains prohibited terms.";

/// Runs `chimera run --json` with the fixture pack configured by `config`
/// (more `extra` flags before the prompt) on a script of `responses`.
fn run(dir: &Path, config: &Value, responses: &Value, extra: &[&str]) -> Ran {
    let mut flags = extra.to_vec();
    flags.push("--json");
    run_readable(dir, config, responses, &flags)
}

/// [`run`] with the readable transcript (no `--json`).
fn run_readable(dir: &Path, config: &Value, responses: &Value, extra: &[&str]) -> Ran {
    let script = dir.join("script.json");
    std::fs::write(&script, json!({ "responses": responses }).to_string()).unwrap();
    let script = script.display().to_string();
    let plugins = test_packs_dir().display().to_string();
    let pack = format!("fixture={config}");
    let mut args = vec![
        "run",
        "--plugins-dir",
        &plugins,
        "--pack",
        &pack,
        "--script",
        &script,
    ];
    args.extend_from_slice(extra);
    args.push("go");
    chimera_tests::cli::chimera(dir, &args, &[], "")
}

/// The texts of the `assistant_delta` events, in order.
fn released(ran: &Ran) -> Vec<String> {
    ran.of_type("assistant_delta")
        .iter()
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn word_gate() -> Value {
    json!({"stream_chunk": {"ban": "forbidden", "reason": BANNED, "notice": NOTICE}})
}

/// One streamed final reply in these pieces.
fn streamed(deltas: &[&str]) -> Value {
    json!([{ "deltas": deltas }])
}

#[test]
fn with_no_stream_gate_deltas_are_published_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"tool_call": {}});
    let ran = run(
        dir.path(),
        &config,
        &streamed(&["Hello", ", ", "world"]),
        &["--stream"],
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert_eq!(released(&ran), ["Hello", ", ", "world"]);
    assert!(ran.of_type("stream_retract").is_empty());
}

#[test]
fn a_word_gate_never_releases_a_banned_word_and_releases_clean_text_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &[&str], bool); 5] = [
        (&["this is ", "forbidden ", "text"], &["this is "], true),
        (&["say forb", "idden now"], &["say "], true),
        (&["hello wor"], &["hello ", "wor"], false),
        (
            &["hello wor", "ld there"],
            &["hello ", "world ", "there"],
            false,
        ),
        (
            &["a perfectly ", "ordinary ", "answer"],
            &["a perfectly ", "ordinary ", "answer"],
            false,
        ),
    ];
    for (deltas, expected, blocked) in cases {
        let ran = run(dir.path(), &word_gate(), &streamed(deltas), &["--stream"]);
        let case = format!("{deltas:?}");
        assert_eq!(released(&ran), expected, "{case}");
        let retracts = ran.of_type("stream_retract");
        let end = ran.of_type("run_end").pop().expect("run_end");
        if blocked {
            assert_eq!(retracts.len(), 1, "{case}");
            assert_eq!(retracts[0]["released"], expected.concat().len(), "{case}");
            assert_eq!(retracts[0]["reason"], BANNED, "{case}");
            // The reply is substituted by the block's notice.
            let reply = ran.of_type("assistant").pop().expect("assistant");
            assert_eq!(reply["content"], NOTICE, "{case}");
            assert_eq!(reply["finish_reason"], "vetoed", "{case}");
            assert_eq!(end["output"], NOTICE, "{case}");
            let shown = ran
                .of_type("assistant")
                .into_iter()
                .chain(ran.of_type("assistant_delta"));
            for event in shown {
                assert!(
                    !event["content"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("forbidden"),
                    "{case}: {event}"
                );
            }
        } else {
            assert!(retracts.is_empty(), "{case}");
            assert_eq!(end["output"], deltas.concat(), "{case}");
        }
    }
}

#[test]
fn a_stream_window_judges_gathered_deltas_at_once_and_still_never_shows_a_banned_word() {
    let dir = tempfile::tempdir().unwrap();
    let windowed = |ban: &str| json!({"stream_chunk": {"ban": ban, "reason": BANNED, "notice": NOTICE, "window": 64}});
    // Twelve deltas arrive at once: after the first, they gather into
    // windows of 64 bytes, so fewer, larger releases — and the text shown
    // is the answer.
    let deltas: Vec<String> = (0..12).map(|i| format!("clean part {i:02} ")).collect();
    let pieces: Vec<&str> = deltas.iter().map(String::as_str).collect();
    let ran = run(
        dir.path(),
        &windowed("forbidden"),
        &streamed(&pieces),
        &["--stream"],
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let shown = released(&ran);
    assert_eq!(shown.concat(), deltas.concat());
    assert!(shown.len() < pieces.len(), "gathered: {shown:?}");
    // A banned word split across deltas inside one window: nothing of the
    // window is shown (the first delta was offered on its own), the stream
    // is retracted at what came before.
    let ran = run(
        dir.path(),
        &windowed("forbidden"),
        &streamed(&["an answer with ", "forb", "idden", " words"]),
        &["--stream"],
    );
    assert_eq!(released(&ran).concat(), "an answer with ");
    let retracts = ran.of_type("stream_retract");
    assert_eq!(retracts.len(), 1);
    assert_eq!(retracts[0]["released"], "an answer with ".len());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["output"], NOTICE);
}

#[test]
fn a_blocked_stream_stays_blocked_and_its_tool_calls_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"stream_chunk": {"ban": "BANNED", "reason": "prohibited term"}});
    let responses = json!([
        {"deltas": ["safe ", "BANNED", " and more"],
         "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]},
        {"content": "never reached"}
    ]);
    let ran = run(dir.path(), &config, &responses, &["--stream"]);
    assert_eq!(released(&ran), ["safe "]);
    let retracts = ran.of_type("stream_retract");
    assert_eq!(retracts.len(), 1);
    assert_eq!(
        (&retracts[0]["released"], &retracts[0]["reason"]),
        (&json!(5), &json!("prohibited term"))
    );
    assert!(ran.of_type("tool_result").is_empty(), "{}", ran.stdout());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["output"], "prohibited term");
    assert_eq!(ran.of_type("assistant").len(), 1);
}

#[test]
fn a_model_response_block_publishes_one_substitute_that_the_output_seam_never_judges() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "model_response": {"action": "block", "reason": BANNED, "notice": NOTICE},
        "output": {"action": "block", "reason": "output would have blanked it"}
    });
    let responses = json!([
        {"content": "a forbidden plan",
         "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]}
    ]);
    let ran = run(dir.path(), &config, &responses, &[]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let replies = ran.of_type("assistant");
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0]["content"], NOTICE);
    assert_eq!(replies[0]["tool_calls"], json!([]));
    assert_eq!(replies[0]["finish_reason"], "vetoed");
    assert!(ran.of_type("tool_result").is_empty());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!(NOTICE))
    );
    let notices = ran.of_type("notice");
    assert_eq!(notices.len(), 1);
    assert_eq!(
        (&notices[0]["seam"], &notices[0]["text"]),
        (&json!("model_response"), &json!(NOTICE))
    );
    assert!(!ran.stdout().contains("a forbidden plan"));
}

#[test]
fn a_model_response_replacement_redacts_the_text_and_keeps_the_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("requests.jsonl");
    let record_arg = record.display().to_string();
    let config = json!({
        "model_response": {"action": "replace", "find": "sk-123", "with": "[REDACTED]",
                           "notice": "a secret was redacted"}
    });
    let responses = json!([
        {"content": "key sk-123",
         "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]},
        {"content": "done"}
    ]);
    let ran = run(
        dir.path(),
        &config,
        &responses,
        &["--record-requests", &record_arg],
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let replies = ran.of_type("assistant");
    assert_eq!(replies[0]["content"], "key [REDACTED]");
    assert_eq!(replies[0]["tool_calls"][0]["name"], "think");
    assert_eq!(ran.of_type("tool_result").len(), 1, "the tool call ran");
    // The second request carries the redacted reply and never the notice.
    let requests = std::fs::read_to_string(&record).unwrap();
    let second = requests.lines().nth(1).expect("a second request");
    assert!(
        second.contains("key [REDACTED]") && !second.contains("sk-123"),
        "{second}"
    );
    assert!(!second.contains("a secret was redacted"), "{second}");
    assert_eq!(ran.of_type("notice").len(), 2, "one per reply");
}

#[test]
fn the_output_seam_redacts_the_answer_or_shows_only_the_notice() {
    let dir = tempfile::tempdir().unwrap();
    let answer = json!([{"content": "mail bob@example.com"}]);
    let redact =
        json!({"output": {"action": "replace", "find": "bob@example.com", "with": "[REDACTED]"}});
    let ran = run(dir.path(), &redact, &answer, &[]);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("mail [REDACTED]"))
    );
    assert!(!ran.stdout().contains("bob@"), "{}", ran.stdout());

    let refuse = json!({"output": {"action": "block", "reason": "pii", "notice": NOTICE}});
    let ran = run(dir.path(), &refuse, &answer, &[]);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["success"], false);
    assert_eq!(end["output"], NOTICE);
    assert_eq!(end["reason"], "output_blocked: pii");
    assert!(!ran.stdout().contains("bob@"), "{}", ran.stdout());

    // The readable transcript: the notice on a line of its own, never the text.
    let stdout = run_readable(dir.path(), &refuse, &answer, &[]).stdout();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("notice (fixture/output-0)") && l.contains(NOTICE)),
        "{stdout}"
    );
    // A pack's notice is foreign text: shown with its escapes, never run.
    let hostile = json!({"output": {"action": "block", "reason": "pii", "notice": "\u{1b}]0;pwned\u{7}\u{1b}[2J"}});
    let shown = run_readable(dir.path(), &hostile, &answer, &[]).stdout();
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(shown.contains("pwned"), "{shown:?}");
    assert!(!stdout.contains("bob@"), "{stdout}");
}

#[test]
fn streaming_is_downgraded_for_a_pack_that_gates_whole_replies_only() {
    let dir = tempfile::tempdir().unwrap();
    let deltas = streamed(&["one ", "two"]);
    let whole_only = json!({"model_response": {}});
    let ran = run(dir.path(), &whole_only, &deltas, &["--stream"]);
    assert!(released(&ran).is_empty(), "{}", ran.stdout());
    let downgraded = ran.of_type("streaming_downgraded");
    assert_eq!(downgraded.len(), 1);
    assert_eq!(downgraded[0]["packs"], json!(["fixture"]));
    assert!(
        ran.stderr().contains("streaming disabled"),
        "{}",
        ran.stderr()
    );

    let ran = run(
        dir.path(),
        &whole_only,
        &deltas,
        &["--stream", "--stream-policy", "allow"],
    );
    assert_eq!(released(&ran), ["one ", "two"]);
    assert!(ran.of_type("streaming_downgraded").is_empty());

    let both = json!({"model_response": {}, "stream_chunk": {"no_hold": true}});
    let ran = run(dir.path(), &both, &deltas, &["--stream"]);
    assert_eq!(released(&ran), ["one ", "two"]);
    assert!(ran.of_type("streaming_downgraded").is_empty());
}

#[test]
fn a_failing_stream_gate_is_skipped_and_a_panicking_one_leaves_the_host_alive() {
    let dir = tempfile::tempdir().unwrap();
    for action in ["error", "panic"] {
        let config = json!({"stream_chunk": {"action": action, "reason": "gate broke"}});
        let ran = run(
            dir.path(),
            &config,
            &streamed(&["fine ", "text"]),
            &["--stream"],
        );
        assert_eq!(ran.status(), 0, "{action}: {}", ran.stderr());
        // Fail-open: nothing is held, every delta is released as offered.
        assert_eq!(released(&ran), ["fine ", "text"], "{action}");
        let errors = ran.of_type("interceptor");
        assert!(
            errors
                .iter()
                .all(|e| e["seam"] == "stream_chunk" && e["decision"] == "error"),
            "{action}: {errors:?}"
        );
        assert!(!errors.is_empty(), "{action}");
    }
}

/// A session whose registry holds the fixture then fixture-alt, each with
/// its own configuration, and `host` after them.
fn two_packs_and_host(first: &Value, second: &Value, host: Interceptors) -> Harness {
    let manager = crate::helpers::manager();
    manager
        .load("fixture", &first.to_string())
        .expect("fixture");
    manager
        .load("fixture-alt", &second.to_string())
        .expect("fixture-alt");
    Harness::new(script(json!([{"content": "the answer"}])))
        .registry(Arc::clone(manager.registry()))
        .host(host)
}

#[test]
fn load_order_is_priority_the_first_block_stops_the_chain_and_observers_see_it() {
    let host_ran = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&host_ran);
    let mut host = Interceptors::new();
    host.output.push(Interceptor::output("host-last", move |_| {
        seen.store(true, Ordering::SeqCst);
        Ok(InterceptDecision::Allow)
    }));
    let run = two_packs_and_host(
        &json!({"output": {"action": "replace", "with": " (checked)"}}),
        &json!({"output": {"action": "block", "reason": "R"}}),
        host,
    )
    .run("go");
    let decisions: Vec<(String, String)> = run
        .interceptor_events()
        .iter()
        .map(|e| (e.interceptor.clone(), e.decision.to_string()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("fixture/output-0".to_owned(), "replaced".to_owned()),
            ("fixture-alt/output-0".to_owned(), "blocked".to_owned())
        ]
    );
    assert!(
        !host_ran.load(Ordering::SeqCst),
        "the chain stopped at the block"
    );
    assert_eq!(run.result.output, "R");
    assert_eq!(run.result.reason.to_string(), "output_blocked: R");
}

#[test]
fn a_panicking_output_gate_declared_fail_closed_blocks_and_an_undeclared_one_is_skipped() {
    for (fail_closed, shown) in [
        (true, "interceptor error: panicked: gate broke"),
        (false, "the answer"),
    ] {
        let run = two_packs_and_host(
            &json!({"output": {"action": "panic", "reason": "gate broke", "fail_closed": fail_closed}}),
            &json!({}),
            Interceptors::new(),
        )
        .run("go");
        assert!(
            run.result.output.starts_with(shown),
            "fail_closed {fail_closed}: {}",
            run.result.output
        );
        assert_eq!(run.result.success, !fail_closed);
        let events = run.interceptor_events();
        assert_eq!(events.len(), 1, "one error event: {events:?}");
        assert!(events[0].reason.contains("panicked: gate broke"));
    }
}

#[test]
fn an_output_retry_sends_exactly_the_answer_and_the_feedback_through_the_request_seams() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("requests.jsonl");
    let record_arg = record.display().to_string();
    let config = json!({
        "output_retry": {"until": "OK", "feedback": "Say OK. token sk-999", "max": 2, "exhausted": "block", "reason": "never OK"},
        "provider_request": {"action": "replace", "find": "sk-999", "with": "[REDACTED]"}
    });
    let responses =
        json!([{"content": "first try"}, {"content": "still no"}, {"content": "OK now"}]);
    let ran = run(
        dir.path(),
        &config,
        &responses,
        &["--record-requests", &record_arg],
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["output"], "OK now");
    let retries = ran.of_type("gate_retry");
    assert_eq!(retries.len(), 2);
    assert_eq!(
        (&retries[1]["attempt"], &retries[1]["max"]),
        (&json!(2), &json!(2))
    );
    let requests: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(requests.len(), 3);
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second.len(), 2, "exactly two messages: {second:?}");
    assert_eq!(
        (&second[0]["role"], &second[0]["content"]),
        (&json!("assistant"), &json!("first try"))
    );
    assert_eq!(second[1]["role"], "user");
    // The feedback passed provider_request: redaction applied to the retry.
    assert_eq!(second[1]["content"], "Say OK. token [REDACTED]");
    // Exhaustion: blocked with the interceptor's reason after max retries.
    let responses = json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]);
    let ran = run(dir.path(), &config, &responses, &[]);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(false), &json!("never OK"))
    );
    assert_eq!(ran.of_type("gate_retry").len(), 2);
    // Exhaustion that allows: the last answer is shown.
    let allow =
        json!({"output_retry": {"until": "OK", "feedback": "f", "max": 1, "exhausted": "allow"}});
    let ran = run(
        dir.path(),
        &allow,
        &json!([{"content": "a"}, {"content": "b"}]),
        &[],
    );
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("b"))
    );
}

#[test]
fn a_pack_asks_the_operator_and_an_edited_call_still_passes_the_chain_and_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let write = json!([
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "out.txt", "content": "original"}}]},
        {"content": "done"}
    ]);
    let config = json!({
        "tool_call_ask": {"prompt": "may it write?", "edit": true},
        "tool_call": {"action": "replace", "find": "edited", "with": "edited+checked"}
    });
    let answers = dir.path().join("answers.jsonl");
    let answers_arg = answers.display().to_string();
    let cases = [
        (
            r#"{"answer": "allow"}"#,
            Vec::<&str>::new(),
            "allow",
            Some("original"),
        ),
        (r#"{"answer": "reject"}"#, vec![], "reject", None),
        (
            r#"{"answer": "edit", "payload": {"path": "out.txt", "content": "edited"}}"#,
            vec![],
            "edit",
            Some("edited+checked"),
        ),
        (
            r#"{"answer": "edit", "payload": {"path": "out.txt", "content": "edited"}}"#,
            vec!["--deny", "write_file"],
            "edit",
            None,
        ),
        // An edit that is not an arguments object is refused, never run.
        (
            r#"{"answer": "edit", "payload": [1, 2]}"#,
            vec![],
            "edit",
            None,
        ),
    ];
    for (answer, flags, answered, ran_with) in cases {
        std::fs::write(&answers, format!("{answer}\n")).unwrap();
        let mut extra = vec!["--approvals", answers_arg.as_str()];
        extra.extend(flags.iter().copied());
        let out = dir.path().join("out.txt");
        let _ = std::fs::remove_file(&out);
        let ran = run(dir.path(), &config, &write, &extra);
        let case = format!("{answer} {flags:?}");
        let asked = ran.of_type("approval_requested");
        assert_eq!(asked.len(), 1, "{case}: {}", ran.stdout());
        assert_eq!(asked[0]["prompt"], "may it write? (write_file)", "{case}");
        assert_eq!(
            asked[0]["choices"],
            json!(["allow", "reject", "edit"]),
            "{case}"
        );
        let answered_events = ran.of_type("approval_answered");
        assert_eq!(answered_events[0]["answer"], answered, "{case}");
        let result = ran.of_type("tool_result").pop().expect("tool_result");
        if let Some(content) = ran_with {
            assert_eq!(result["is_error"], false, "{case}: {result}");
            assert_eq!(std::fs::read_to_string(&out).unwrap(), content, "{case}");
        } else {
            assert_eq!(result["is_error"], true, "{case}: {result}");
            assert!(!out.exists(), "{case}");
        }
    }
}

#[test]
fn a_rate_limiter_pauses_the_turn_and_too_many_pauses_end_it_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let answer = json!([{"content": "fine"}]);
    let twice =
        json!({"provider_request_pause": {"times": 2, "wait_ms": 20, "reason": "window full"}});
    let ran = run(dir.path(), &twice, &answer, &[]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let paused = ran.of_type("turn_paused");
    assert_eq!(paused.len(), 2);
    assert_eq!(
        (&paused[0]["wait_ms"], &paused[0]["reason"]),
        (&json!(20), &json!("window full"))
    );
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["output"], "fine");

    let always =
        json!({"provider_request_pause": {"times": 100, "wait_ms": 1, "reason": "window full"}});
    let ran = run(dir.path(), &always, &answer, &[]);
    assert_eq!(ran.of_type("turn_paused").len(), 5);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["success"], false);
    assert_eq!(
        end["reason"],
        "interceptor_blocked: fixture/provider_request_pause-0 paused the turn 5 times and asked for more: window full"
    );
}

#[test]
fn every_decision_on_model_response_and_output_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let answer = json!([{"content": "the answer"}]);
    for seam in ["model_response", "output"] {
        for action in ["allow", "block", "replace", "error", "panic"] {
            let config = json!({ seam: {"action": action, "reason": "R", "with": "+x"} });
            let ran = run(dir.path(), &config, &answer, &[]);
            let case = format!("{seam}/{action}");
            let end = ran.of_type("run_end").pop().expect("run_end");
            let events = ran.of_type("interceptor");
            let decision = events.first().map(|e| e["decision"].clone());
            let (success, output, event) = match (seam, action) {
                (_, "allow") => (true, "the answer", None),
                ("model_response", "block") => (true, "R", Some("blocked")),
                ("output", "block") => (false, "R", Some("blocked")),
                (_, "replace") => (true, "the answer+x", Some("replaced")),
                _ => (true, "the answer", Some("error")),
            };
            assert_eq!(end["success"], success, "{case}: {}", ran.stdout());
            assert_eq!(end["output"], output, "{case}");
            assert_eq!(decision, event.map(|e| json!(e)), "{case}");
            if let Some(first) = events.first() {
                assert_eq!(first["seam"], seam, "{case}");
                assert_eq!(first["interceptor"], format!("fixture/{seam}-0"), "{case}");
            }
            let vetoed = ran
                .of_type("assistant")
                .iter()
                .any(|a| a["finish_reason"] == "vetoed");
            assert_eq!(vetoed, action == "block", "{case}");
        }
    }
}

#[test]
fn a_pack_cannot_make_the_host_retry_beyond_its_own_bound() {
    let dir = tempfile::tempdir().unwrap();
    let greedy = json!({"output_retry": {"until": "never", "feedback": "again", "max": 1_000_000, "exhausted": "allow"}});
    let answers: Vec<Value> = (0..12)
        .map(|i| json!({"content": format!("try {i}")}))
        .collect();
    let ran = run(dir.path(), &greedy, &Value::Array(answers), &[]);
    let retries = ran.of_type("gate_retry");
    assert_eq!(retries.len(), 10, "the host's bound");
    assert_eq!(retries[9]["max"], 10);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("try 10"))
    );
}
