//! The `content-safety` pack: through the loaded `.so` (chains run as the
//! loop runs them), through the binary with the scripted model (answers,
//! tool results, replies, streams), and a property test of its stream
//! handler driven by the host's own `StreamGate`.

use crate::harness::{script, Harness};
use crate::helpers::{manager, run as run_chain_once};
use chimera_host::agent::StreamGate;
use chimera_host::interception::{
    run_chain, ChainContext, Interceptor, Interceptors, SessionFacts,
};
use chimera_host::plugins::{interceptors_of, PluginManager};
use chimera_plugin_api::sdk::Pack;
use chimera_tests::cli::Ran;
use chimera_tests::tools::Fixed;
use content_safety::ContentSafety;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

const NOTICE_EMAIL: &str = "Content blocked: contains sensitive information (email).";

/// A manager with `content-safety` loaded with `config`.
fn loaded(config: &Value) -> PluginManager {
    let manager = manager();
    manager
        .load("content-safety", &config.to_string())
        .unwrap_or_else(|e| panic!("content-safety: {e}"));
    manager
}

/// The `output` chain's verdict on `text`: (block reason, last notice,
/// replacement).
fn on_output(
    bundle: &Interceptors,
    text: &str,
) -> (Option<String>, Option<String>, Option<String>) {
    let (outcome, _) = run_chain_once(&bundle.output, &(), &text.to_owned());
    let notice = outcome.notices.last().map(|n| n.text.clone());
    (outcome.blocked, notice, outcome.replaced)
}

/// `chimera run --json` with each `(pack, config)` loaded in order, on a
/// script of `responses`, with `extra` flags.
fn chimera(dir: &Path, packs: &[(&str, Value)], responses: &Value, extra: &[&str]) -> Ran {
    let args: Vec<&str> = extra.iter().copied().chain(["go"]).collect();
    crate::helpers::run_with_packs(dir, packs, responses, &args, "")
}

/// The texts of the `assistant_delta` events, joined.
fn released(ran: &Ran) -> String {
    ran.of_type("assistant_delta")
        .iter()
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Everything a user of the run could have been shown: deltas, replies,
/// notices and the final output.
fn shown(ran: &Ran) -> String {
    let mut all = released(ran);
    for kind in ["assistant", "notice", "run_end"] {
        for event in ran.of_type(kind) {
            for key in ["content", "text", "output"] {
                all.push_str(event[key].as_str().unwrap_or_default());
                all.push('\n');
            }
        }
    }
    all
}

#[test]
fn content_safety_blocks_each_kind_of_sensitive_answer_with_its_check_names_in_reason_and_notice() {
    let manager = loaded(&json!({}));
    let bundle = manager.registry().get_all();
    let cases = [
        ("write to bob@example.com", "email"),
        ("call 555-123-4567", "phone"),
        ("my ssn is 123-45-6789", "ssn"),
        ("aws AKIAIOSFODNN7EXAMPLE", "api_key"),
        ("sk-abcdefghijklmnopqrstuvwx", "api_key"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"),
        ("xoxb-1234567890-abcdefghij", "api_key"),
        ("-----BEGIN RSA PRIVATE KEY-----", "private_key"),
        ("password: hunter2", "password"),
        ("card 4111 1111 1111 1111", "credit_card"),
        ("db at 10.0.0.5", "ip_internal"),
        ("router 192.168.0.1", "ip_internal"),
        (
            "bob@example.com, 10.0.0.5 and password: hunter2",
            "email, password, ip_internal",
        ),
    ];
    for (text, checks) in cases {
        let (blocked, notice, replaced) = on_output(&bundle, text);
        assert_eq!(
            blocked.as_deref(),
            Some(format!("Content safety: {checks}").as_str()),
            "{text}"
        );
        assert_eq!(
            notice.as_deref(),
            Some(format!("Content blocked: contains sensitive information ({checks}).").as_str()),
            "{text}"
        );
        assert_eq!(replaced, None, "{text}");
    }
    for clean in [
        "the build passed in 3.21s on 2026-12-02",
        "public dns 8.8.8.8, card-like 4111 1111 1111 1112",
    ] {
        assert_eq!(on_output(&bundle, clean), (None, None, None), "{clean}");
    }
}

#[test]
fn content_safety_switches_and_custom_patterns_decide_which_checks_run() {
    let manager = loaded(&json!({
        "check_pii_email": false,
        "custom_patterns": ["project-x", {"pattern": r"deploy\s+key\s+omega", "name": "deploy_key"}],
        "message": "no: {checks}"
    }));
    let bundle = manager.registry().get_all();
    assert_eq!(on_output(&bundle, "bob@example.com"), (None, None, None));
    // A custom check is named by its name (or `custom-N`, its position),
    // never by its regex.
    assert_eq!(
        on_output(&bundle, "bob@example.com on project-x"),
        (
            Some("Content safety: custom-1".to_owned()),
            Some("no: custom-1".to_owned()),
            None
        )
    );
    assert_eq!(
        on_output(&bundle, "the deploy key omega, and project-x"),
        (
            Some("Content safety: custom-1, deploy_key".to_owned()),
            Some("no: custom-1, deploy_key".to_owned()),
            None
        )
    );
}

#[test]
fn content_safety_registers_output_by_default_each_opt_in_seam_only_when_configured_and_all_fail_closed(
) {
    let chains = |config: Value| {
        let all = loaded(&config).registry().get_all();
        (
            all.output.len(),
            all.tool_result.len(),
            all.model_response.len(),
            all.stream_chunk.len(),
        )
    };
    assert_eq!(chains(json!({})), (1, 0, 0, 0));
    assert_eq!(chains(json!({"scan_tool_results": true})), (1, 1, 0, 0));
    // Stream scanning follows reply scanning, in either action: a stream
    // is redacted as it is shown.
    assert_eq!(chains(json!({"scan_llm_responses": true})), (1, 0, 1, 1));
    assert_eq!(
        chains(json!({"scan_llm_responses": true, "scan_stream": false})),
        (1, 0, 1, 0)
    );
    assert_eq!(
        chains(json!({"scan_llm_responses": true, "action": "redact"})),
        (1, 0, 1, 1)
    );
    assert_eq!(chains(json!({"scan_stream": true})), (1, 0, 0, 1));

    // A content gate never fails open: every interceptor fails closed.
    let manager = loaded(&json!({"scan_tool_results": true, "scan_llm_responses": true}));
    let all = manager.registry().get_all();
    assert!(all.output.iter().all(Interceptor::fails_closed));
    assert!(all.tool_result.iter().all(Interceptor::fails_closed));
    assert!(all.model_response.iter().all(Interceptor::fails_closed));
    assert!(all.stream_chunk.iter().all(Interceptor::fails_closed));
}

#[test]
fn content_safety_refuses_unknown_keys_other_actions_and_invalid_patterns_in_one_line() {
    let manager = manager();
    for (config, needle) in [
        (json!({"actoin": "block"}), "actoin"),
        (json!({"action": "warn"}), "warn"),
        (json!({"custom_patterns": ["(unclosed"]}), "(unclosed"),
        (
            json!({"custom_patterns": [{"pattern": "x", "name": "has space"}]}),
            "has space",
        ),
        (json!({"stream_hold_back": -1}), "-1"),
    ] {
        let error = manager
            .load("content-safety", &config.to_string())
            .unwrap_err()
            .to_string();
        assert!(!error.contains('\n'), "{config}: {error}");
        assert!(error.contains(needle), "{config}: {error}");
    }
    assert!(manager.registry().get_all().is_empty());
}

#[test]
fn content_safety_blocks_an_answer_through_the_binary_showing_only_the_notice() {
    let dir = tempfile::tempdir().unwrap();
    let ran = chimera(
        dir.path(),
        &[("content-safety", json!({}))],
        &json!([{"content": "write to bob@example.com"}]),
        &[],
    );
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"], &end["reason"]),
        (
            &json!(false),
            &json!(NOTICE_EMAIL),
            &json!("output_blocked: Content safety: email")
        )
    );
    assert!(!ran.stdout().contains("bob@"), "{}", ran.stdout());

    let ran = chimera(
        dir.path(),
        &[("content-safety", json!({}))],
        &json!([{"content": "all clear"}]),
        &[],
    );
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (&json!(true), &json!("all clear"))
    );
    assert!(ran.of_type("notice").is_empty());
}

#[test]
fn content_safety_redacts_before_a_later_stop_words_gate_which_never_sees_the_redacted_word() {
    let dir = tempfile::tempdir().unwrap();
    let answer = json!([{"content": "write to forbidden@example.com or bob@example.com now"}]);
    let redact = ("content-safety", json!({"action": "redact"}));
    let ban = ("stop-words", json!({"words": ["forbidden"]}));
    let ran = chimera(dir.path(), &[redact.clone(), ban.clone()], &answer, &[]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"]),
        (
            &json!(true),
            &json!("write to [REDACTED] or [REDACTED] now")
        )
    );
    assert!(ran.of_type("notice").is_empty(), "{}", ran.stdout());
    assert!(!ran.stdout().contains("@example.com"), "{}", ran.stdout());
    assert!(!ran.stderr().contains("redacts it"), "{}", ran.stderr());

    // Loaded first, the ban check sees the address and blocks; start-up
    // says which order would not.
    let ran = chimera(dir.path(), &[ban, redact], &answer, &[]);
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        end["reason"],
        "output_blocked: Output contains prohibited term: \"forbidden\""
    );
    assert!(
        ran.stderr().contains(
            "on output, stop-words/output judges content before content-safety/output redacts it: \
             the check sees what the redactor would remove; load the redacting pack first"
        ),
        "{}",
        ran.stderr()
    );
}

#[test]
fn content_safety_turns_a_sensitive_tool_result_into_an_error_or_redacts_it() {
    let responses = json!([
        {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]},
        {"content": "done"}
    ]);
    let tool = Arc::new(Fixed {
        name: "lookup",
        output: "owner: bob@example.com",
    });
    let blocking = loaded(&json!({"scan_tool_results": true}));
    let run = Harness::new(script(responses.clone()))
        .tool(tool.clone())
        .registry(Arc::clone(blocking.registry()))
        .run("go");
    assert_eq!(
        run.tool_messages(),
        ["blocked by content_safety: email".to_owned()]
    );
    assert!(!run.everything().contains("bob@"));

    let redacting = loaded(&json!({"scan_tool_results": true, "action": "redact"}));
    let run = Harness::new(script(responses))
        .tool(tool)
        .registry(Arc::clone(redacting.registry()))
        .run("go");
    assert_eq!(run.tool_messages(), ["owner: [REDACTED]".to_owned()]);
}

#[test]
fn content_safety_substitutes_a_sensitive_reply_or_redacts_it_keeping_its_tool_calls() {
    let dir = tempfile::tempdir().unwrap();
    let responses = json!([
        {"content": "key sk-abcdefghijklmnopqrstuvwx",
         "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]},
        {"content": "done"}
    ]);
    let ran = chimera(
        dir.path(),
        &[("content-safety", json!({"scan_llm_responses": true}))],
        &responses,
        &[],
    );
    let replies = ran.of_type("assistant");
    let notice = "Content blocked: contains sensitive information (api_key).";
    assert_eq!(replies[0]["content"], notice);
    assert_eq!(replies[0]["tool_calls"], json!([]));
    assert_eq!(replies[0]["finish_reason"], "vetoed");
    let blocks = ran.of_type("interceptor");
    assert_eq!(
        blocks[0]["reason"],
        "Content safety (llm.response): api_key"
    );
    assert!(ran.of_type("tool_result").is_empty());
    assert!(!ran.stdout().contains("sk-abc"), "{}", ran.stdout());

    let ran = chimera(
        dir.path(),
        &[(
            "content-safety",
            json!({"scan_llm_responses": true, "action": "redact"}),
        )],
        &responses,
        &[],
    );
    let replies = ran.of_type("assistant");
    assert_eq!(replies[0]["content"], "key [REDACTED]");
    assert_eq!(replies[0]["tool_calls"][0]["name"], "think");
    assert_eq!(ran.of_type("tool_result").len(), 1, "the tool call ran");
    assert!(!ran.stdout().contains("sk-abc"), "{}", ran.stdout());
}

#[test]
fn content_safety_blocks_a_streamed_secret_before_any_of_it_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let gate = [("content-safety", json!({"scan_llm_responses": true}))];
    let cases: [(&[&str], &str, &str, &str); 3] = [
        (
            &["the number is ", "123-45-6789", " ok"],
            "the number is ",
            "ssn",
            "123-45-6789",
        ),
        (
            &["card 4111", "1111", "1111", "1111 end"],
            "card ",
            "credit_card",
            "4111111111111111",
        ),
        (
            &["card 4111 ", "1111 1111 ", "1111 end"],
            "card ",
            "credit_card",
            "4111",
        ),
    ];
    for (deltas, before, checks, secret) in cases {
        let case = format!("{deltas:?}");
        let ran = chimera(
            dir.path(),
            &gate,
            &json!([{ "deltas": deltas }]),
            &["--stream"],
        );
        assert_eq!(released(&ran), before, "{case}");
        let retracts = ran.of_type("stream_retract");
        assert_eq!(retracts.len(), 1, "{case}");
        assert_eq!(
            (&retracts[0]["released"], &retracts[0]["reason"]),
            (
                &json!(before.len()),
                &json!(format!("Content safety (llm.stream.chunk): {checks}"))
            ),
            "{case}"
        );
        let notice = format!("Content blocked: contains sensitive information ({checks}).");
        let reply = ran.of_type("assistant").pop().expect("assistant");
        assert_eq!(
            (&reply["content"], &reply["finish_reason"]),
            (&json!(notice), &json!("vetoed"))
        );
        assert!(!shown(&ran).contains(secret), "{case}: {}", ran.stdout());
    }

    // A clean stream is shown whole, with the ordinary one-word lag.
    let ran = chimera(
        dir.path(),
        &gate,
        &json!([{ "deltas": ["a perfectly ", "ordinary ", "answer"] }]),
        &["--stream"],
    );
    assert_eq!(released(&ran), "a perfectly ordinary answer");
    assert!(ran.of_type("stream_retract").is_empty());
}

#[test]
fn content_safety_in_redact_mode_redacts_a_streamed_reply_as_it_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let gate = [(
        "content-safety",
        json!({"scan_llm_responses": true, "action": "redact"}),
    )];
    let deltas = json!([{ "deltas": ["mail me at ", "bob@example.com", " today"] }]);
    let ran = chimera(dir.path(), &gate, &deltas, &["--stream"]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    // Streaming stays on: the gate has the stream hook and rewrites.
    assert!(
        ran.of_type("streaming_downgraded").is_empty(),
        "{}",
        ran.stdout()
    );
    assert_eq!(released(&ran), "mail me at [REDACTED] today");
    let end = ran.of_type("run_end").pop().expect("run_end");
    assert_eq!(
        (&end["success"], &end["output"], &end["vetoed"]),
        (
            &json!(true),
            &json!("mail me at [REDACTED] today"),
            &json!(false)
        )
    );
    assert!(ran.of_type("stream_retract").is_empty());
    assert!(!shown(&ran).contains("bob@"), "{}", ran.stdout());
    let rewrites: Vec<Value> = ran
        .of_type("interceptor")
        .into_iter()
        .filter(|e| e["seam"] == "stream_chunk")
        .collect();
    assert_eq!(rewrites.len(), 1, "one match, one rewrite: {rewrites:?}");
    assert_eq!(rewrites[0]["decision"], "replaced");

    // Told not to scan the stream, the gate can only judge whole replies:
    // streaming is turned off for the run, and the reply is redacted whole.
    let gate = [(
        "content-safety",
        json!({"scan_llm_responses": true, "action": "redact", "scan_stream": false}),
    )];
    let ran = chimera(dir.path(), &gate, &deltas, &["--stream"]);
    assert_eq!(
        ran.of_type("streaming_downgraded").len(),
        1,
        "{}",
        ran.stdout()
    );
    assert_eq!(
        ran.of_type("run_end").pop().expect("run_end")["output"],
        "mail me at [REDACTED] today"
    );
    assert!(!shown(&ran).contains("bob@"), "{}", ran.stdout());
}

/// A text, the secret in it (if any), and the checks a block names.
const STREAM_TEXTS: [(&str, Option<(&str, &str)>); 12] = [
    ("a perfectly ordinary answer, nothing to see", None),
    ("build 42 took 3.21s on 2026-12-02 via 8.8.8.8", None),
    ("id 41111111111111112 is too long for a card", None),
    ("héllo wörld, ñandú and 12 € of café", None),
    ("the number is 123-45-6789 ok", Some(("123-45-6789", "ssn"))),
    (
        "card 4111111111111111 end",
        Some(("4111111111111111", "credit_card")),
    ),
    (
        "card 4111 1111 1111 1111 end",
        Some(("4111", "credit_card")),
    ),
    (
        "key sk-abcdefghijklmnopqrstuvwxyz end",
        Some(("sk-", "api_key")),
    ),
    ("mail me at bob@example.com today", Some(("bob@", "email"))),
    ("call (555) 123-4567 after lunch", Some(("(555", "phone"))),
    ("host 192.168.1.10 is up", Some(("192.", "ip_internal"))),
    ("ünïcode 123-45-6789 fin", Some(("123-45-6789", "ssn"))),
];

/// Streams `text` cut at `cuts` through the host's `StreamGate` and the
/// pack's `stream_chunk` chain, as the loop does: (released text, block).
fn stream_through(bundle: &Interceptors, text: &str, cuts: &[usize]) -> (String, Option<String>) {
    let facts = SessionFacts::new("prop");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            let mut at = c % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .chain([0, text.len()])
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut gate = StreamGate::default();
    let mut shown = String::new();
    let mut offer = |gate: &mut StreamGate, delta: &str, last: bool| {
        let offered = gate.offer(delta, last, |f, t| {
            run_chain(&bundle.stream_chunk, f, t, &cx)
        });
        if let Some(range) = offered.release {
            shown.push_str(&gate.text()[range]);
        }
    };
    for pair in points.windows(2) {
        offer(&mut gate, &text[pair[0]..pair[1]], false);
    }
    offer(&mut gate, "", true);
    (shown, gate.finish().blocked.map(|block| block.reason))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn content_safety_stream_verdict_and_shown_text_do_not_depend_on_the_split(
        which in 0..STREAM_TEXTS.len(),
        cuts in proptest::collection::vec(0usize..64, 0..8),
        hold_back in prop_oneof![Just(0usize), Just(5usize)],
        redact in any::<bool>(),
    ) {
        let action = if redact { "redact" } else { "block" };
        let config = json!({"scan_stream": true, "stream_hold_back": hold_back, "action": action})
            .to_string();
        let bundle = interceptors_of::<ContentSafety>(&config).unwrap();
        let (text, secret) = STREAM_TEXTS[which];
        let (shown, blocked) = stream_through(&bundle, text, &cuts);
        if redact {
            // Shown as the whole text redacted at once, however it was split.
            let whole = ContentSafety::new(serde_json::from_str(&config).unwrap()).unwrap();
            let expected = match whole.judge(text) {
                content_safety::Verdict::Redacted(redacted, _) => redacted,
                _ => text.to_owned(),
            };
            prop_assert_eq!(blocked, None);
            prop_assert_eq!(&shown, &expected);
            if let Some((value, _)) = secret {
                prop_assert!(!shown.contains(value), "{:?}", shown);
            }
            return Ok(());
        }
        match secret {
            None => {
                prop_assert_eq!(blocked, None);
                prop_assert_eq!(shown, text);
            }
            Some((value, checks)) => {
                prop_assert_eq!(
                    blocked,
                    Some(format!("Content safety (llm.stream.chunk): {checks}"))
                );
                // Whatever was shown stops before the secret starts.
                let start = text.find(value).unwrap();
                prop_assert!(text.starts_with(&shown) && shown.len() <= start, "{:?}", shown);
            }
        }
    }
}
