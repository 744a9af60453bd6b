//! Stream gates through the binary and a loopback model that streams
//! server-sent events: `chimera run --provider openai --stream` against a
//! local server, with the bundled `content-safety` (and `output-length`)
//! loaded by name. What the user is shown is the `assistant_delta` events.

#[path = "../../packs/content-safety/tests/oracle/mod.rs"]
mod oracle;

use chimera_tests::cli::{chimera, Ran};
use chimera_tests::http::{Reply, Server};
use serde_json::{json, Value};
use std::time::Duration;

/// Slower than the gate's 25 ms window latency: every delta is judged (and
/// its release shown) on its own, as a model at reading pace is.
const READING_PACE: Duration = Duration::from_millis(80);

/// `chimera run --json --stream` against a model that streams `deltas`
/// `pace` apart, with each `--pack` spec loaded in order. The run and what
/// the model was asked.
fn streamed(deltas: &[&str], pace: Duration, packs: &[String], extra: &[&str]) -> (Ran, Value) {
    let deltas = deltas.iter().map(|d| (*d).to_owned()).collect();
    let server = Server::start(vec![Reply::Model(deltas, pace)]);
    let base = format!("{}/v1", server.url);
    let mut args = vec![
        "run",
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--model",
        "m",
        "--json",
        "--stream",
    ];
    for pack in packs {
        args.extend(["--pack", pack.as_str()]);
    }
    args.extend(extra);
    args.push("go");
    let dir = tempfile::tempdir().unwrap();
    let ran = chimera(dir.path(), &args, &[("OPENAI_API_KEY", "test-key")], "");
    let requests = server.requests();
    let asked = requests
        .first()
        .map_or(Value::Null, chimera_tests::http::Request::json);
    (ran, asked)
}

/// A `--pack` spec for `content-safety` with `config`.
fn content_safety(config: Value) -> String {
    format!("content-safety={config}")
}

/// The text of each `assistant_delta` event, in order.
fn deltas_shown(ran: &Ran) -> Vec<String> {
    ran.of_type("assistant_delta")
        .iter()
        .map(|e| e["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn run_end(ran: &Ran) -> Value {
    ran.of_type("run_end").pop().expect("a run_end event")
}

#[test]
fn a_redacting_content_safety_publishes_a_streamed_reply_with_each_match_replaced_once() {
    let gate = [content_safety(
        json!({"action": "redact", "scan_llm_responses": true}),
    )];
    let splits: [&[&str]; 3] = [
        // Two addresses in one delta.
        &["reach ops@example.org or dev@example.net today"],
        // One address split across deltas.
        &["reach ops@exa", "mple.org or dev@", "example.net today"],
        // Matches in different deltas.
        &["reach ops@example.org ", "or dev@example.net ", "today"],
    ];
    for deltas in splits {
        for pace in [Duration::from_millis(1), READING_PACE] {
            let case = format!("{deltas:?} every {pace:?}");
            let (ran, asked) = streamed(deltas, pace, &gate, &[]);
            assert_eq!(ran.status(), 0, "{case}: {}", ran.stderr());
            assert_eq!(
                asked["stream"], true,
                "{case}: the model is asked to stream"
            );
            let shown = deltas_shown(&ran).concat();
            assert_eq!(shown, "reach [REDACTED] or [REDACTED] today", "{case}");
            assert!(
                deltas_shown(&ran).iter().all(|d| !d.contains('@')),
                "{case}: {:?}",
                deltas_shown(&ran)
            );
            assert!(ran.of_type("stream_retract").is_empty(), "{case}");
            let end = run_end(&ran);
            assert_eq!(
                (&end["success"], &end["vetoed"], &end["output"]),
                (
                    &json!(true),
                    &json!(false),
                    &json!("reach [REDACTED] or [REDACTED] today")
                ),
                "{case}"
            );
            assert!(
                !ran.stdout().contains("@example"),
                "{case}: {}",
                ran.stdout()
            );
        }
    }
}

#[test]
fn a_stream_gate_keeps_the_model_streaming_and_a_gate_without_one_turns_it_off_in_one_line() {
    let deltas = ["all ", "clear ", "here"];
    for action in ["block", "redact"] {
        let gate = [content_safety(
            json!({"action": action, "scan_llm_responses": true}),
        )];
        let (ran, asked) = streamed(&deltas, Duration::from_millis(1), &gate, &[]);
        assert_eq!(asked["stream"], true, "{action}");
        assert!(ran.of_type("streaming_downgraded").is_empty(), "{action}");
        assert!(
            !ran.stderr().contains("streaming"),
            "{action}: {}",
            ran.stderr()
        );
        assert_eq!(deltas_shown(&ran).concat(), "all clear here", "{action}");
    }
    // `output-length` judges whole answers only: streaming goes off, and
    // one line says which pack and which seam.
    let packs = [
        content_safety(json!({"scan_llm_responses": true})),
        "output-length={\"max_chars\":1000}".to_owned(),
    ];
    let (ran, asked) = streamed(&deltas, Duration::from_millis(1), &packs, &[]);
    assert_eq!(asked.get("stream"), None, "{asked}");
    let stderr = ran.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    let said: Vec<&&str> = lines.iter().filter(|l| l.contains("stream")).collect();
    assert_eq!(said.len(), 1, "{lines:?}");
    assert!(
        said[0].contains("output-length gates output but not stream_chunk"),
        "{}",
        said[0]
    );
    assert!(!said[0].contains("content-safety"), "{}", said[0]);
    assert_eq!(
        ran.of_type("streaming_downgraded")[0]["packs"],
        json!(["output-length"])
    );
    assert_eq!(run_end(&ran)["output"], "all clear here");
}

#[test]
fn the_stream_release_rule_holds_a_phrase_from_where_it_could_begin() {
    let config = |action: &str, hold_back: usize| {
        content_safety(json!({
            "action": action,
            "scan_stream": true,
            "stream_hold_back": hold_back,
            "custom_patterns": [{"pattern": r"deploy\s+key\s+omega", "name": "deploy_key"}]
        }))
    };
    let deltas = ["the deploy ", "key ", "omega now"];

    // Block: `the ` is released at once, `deploy key ` is held while it
    // could still become the phrase, and the phrase is never shown.
    let (ran, _) = streamed(&deltas, READING_PACE, &[config("block", 0)], &[]);
    assert_eq!(deltas_shown(&ran), ["the "]);
    let retract = &ran.of_type("stream_retract")[0];
    assert_eq!(
        (&retract["released"], &retract["reason"]),
        (
            &json!(4),
            &json!("Content safety (llm.stream.chunk): deploy_key")
        )
    );
    let notice = &ran.of_type("notice")[0]["text"];
    assert_eq!(
        notice,
        "Content blocked: contains sensitive information (deploy_key)."
    );
    assert!(
        !ran.stdout().contains(r"deploy\\s"),
        "no regex in what a user reads"
    );

    // Redact: the phrase is replaced as a whole once it completes.
    let (ran, _) = streamed(&deltas, READING_PACE, &[config("redact", 0)], &[]);
    assert_eq!(deltas_shown(&ran), ["the ", "[REDACTED] ", "now"]);
    assert!(ran.of_type("stream_retract").is_empty());

    // `stream_hold_back` larger than the text: nothing before the block.
    let (ran, _) = streamed(&deltas, READING_PACE, &[config("block", 64)], &[]);
    assert!(deltas_shown(&ran).is_empty(), "{:?}", deltas_shown(&ran));
    assert_eq!(ran.of_type("stream_retract")[0]["released"], 0);
}

#[test]
fn run_end_says_when_a_gate_vetoed_the_answer_and_which() {
    // A stream cut by a gate completes, and says it was vetoed.
    let gate = [content_safety(json!({"scan_llm_responses": true}))];
    let (ran, _) = streamed(&["my ssn is ", "123-45-6789"], READING_PACE, &gate, &[]);
    let end = run_end(&ran);
    assert_eq!(
        (&end["success"], &end["vetoed"], &end["vetoed_by"]),
        (
            &json!(true),
            &json!(true),
            &json!("content-safety/stream_chunk")
        )
    );
    assert_eq!(
        end["output"],
        "Content blocked: contains sensitive information (ssn)."
    );
    // An answer is not vetoed, and names no gate.
    let (ran, _) = streamed(&["fine ", "answer"], READING_PACE, &gate, &[]);
    let end = run_end(&ran);
    assert_eq!(
        (&end["vetoed"], end.get("vetoed_by")),
        (&json!(false), None)
    );
    // The final answer blocked on `output` (streaming off for a gate that
    // judges whole answers only): the run fails, vetoed by that gate.
    let (ran, _) = streamed(
        &["mail bob@example.com"],
        READING_PACE,
        &[content_safety(json!({}))],
        &[],
    );
    let end = run_end(&ran);
    assert_eq!(
        (&end["success"], &end["vetoed"], &end["vetoed_by"]),
        (&json!(false), &json!(true), &json!("content-safety/output"))
    );
}

/// `chimera run --json --stream` with the scripted model streaming
/// `deltas` at reading pace (each judged on its own) through
/// content-safety configured with `config`.
fn scripted(deltas: &[String], config: Value) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    scripted_in(dir.path(), deltas, config, &[])
}

/// [`scripted`] in `dir`, with `extra` arguments.
fn scripted_in(dir: &std::path::Path, deltas: &[String], config: Value, extra: &[&str]) -> Ran {
    let script = dir.join("script.json");
    let responses = json!({"responses": [{"deltas": deltas, "pace_ms": 40}]});
    std::fs::write(&script, responses.to_string()).unwrap();
    let script = script.display().to_string();
    let pack = content_safety(config);
    let mut args = vec![
        "run", "--json", "--stream", "--script", &script, "--pack", &pack,
    ];
    args.extend(extra);
    args.push("go");
    chimera(dir, &args, &[], "")
}

/// What the binary showed: the released text, and whether (and why) the
/// stream was blocked.
fn outcome(ran: &Ran) -> oracle::Outcome {
    let blocked = ran.of_type("stream_retract").first().map(|retract| {
        retract["reason"]
            .as_str()
            .is_some_and(|r| r.ends_with("(a possible match held past 64 bytes)"))
    });
    oracle::Outcome {
        shown: deltas_shown(ran).concat(),
        per_offer: None,
        blocked,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// The release rule's property (see `oracle`) through the binary: no
    /// byte of a match, and no byte of a possible match held past the
    /// limit, is ever shown, in block and redact mode.
    #[test]
    fn through_the_binary_no_span_of_any_length_is_shown_in_part((text, deltas) in oracle::text_and_deltas(6)) {
        let ran = scripted(&deltas, oracle::config("block"));
        let out = outcome(&ran);
        let checked = oracle::check_block(&text, &deltas, &out);
        proptest::prop_assert!(checked.is_ok(), "block: {}: {out:?}", checked.unwrap_err());
        let ran = scripted(&deltas, oracle::config("redact"));
        let out = outcome(&ran);
        let checked = oracle::check_redact(&text, &deltas, &out);
        proptest::prop_assert!(checked.is_ok(), "redact: {}: {out:?}", checked.unwrap_err());
    }
}

#[test]
fn a_phrase_padded_with_five_thousand_spaces_is_never_shown_in_either_mode() {
    // Regression (stream gating that no span defeats): the look-back for
    // live partial matches stopped at 4 KiB, so this phrase was streamed
    // in full, in both modes, with no retract.
    let config = |action: &str| {
        json!({"action": action, "scan_stream": true,
               "custom_patterns": [{"pattern": r"launch\s+code\s+alpha", "name": "launch_code"}]})
    };
    let deltas: Vec<String> = ["the launch", &" ".repeat(5000), "code ", "alpha is set"]
        .map(str::to_owned)
        .to_vec();
    let ran = scripted(&deltas, config("block"));
    assert_eq!(deltas_shown(&ran).concat(), "the ");
    let retract = &ran.of_type("stream_retract")[0];
    assert_eq!(
        (&retract["released"], &retract["reason"]),
        (
            &json!(4),
            &json!("Content safety (llm.stream.chunk): launch_code")
        )
    );
    let ran = scripted(&deltas, config("redact"));
    assert_eq!(deltas_shown(&ran).concat(), "the [REDACTED] is set");
    assert!(ran.of_type("stream_retract").is_empty());
    // Padded past the hold limit, the phrase is never released: blocked.
    let padded: Vec<String> = ["the launch", &" ".repeat(70_000), "pad"]
        .map(str::to_owned)
        .to_vec();
    for action in ["block", "redact"] {
        let ran = scripted(&padded, config(action));
        assert_eq!(deltas_shown(&ran).concat(), "the ", "{action}");
        let retract = &ran.of_type("stream_retract")[0];
        assert_eq!(
            retract["reason"],
            "Content safety (llm.stream.chunk): launch_code (a possible match held past 65536 bytes)"
        );
        let notice = &ran.of_type("notice")[0]["text"];
        assert!(
            notice
                .as_str()
                .unwrap()
                .ends_with(&content_safety::over_limit(65536)),
            "{notice}"
        );
    }
}

#[test]
fn a_hold_beyond_the_trailing_word_is_one_event_at_each_edge_in_the_transcript_and_the_audit_log() {
    let config = json!({"scan_stream": true,
        "custom_patterns": [{"pattern": r"launch\s+code\s+alpha", "name": "launch_code"}]});
    let gate = "content-safety/stream_chunk";
    // A phrase held while it may become a match, which turns out clean:
    // the hold starts, ends released, and the whole text is published.
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let deltas: Vec<String> = ["the launch ", "code ", "pad ", "is set"]
        .map(str::to_owned)
        .to_vec();
    let extra = ["--audit", audit.to_str().unwrap()];
    let ran = scripted_in(dir.path(), &deltas, config.clone(), &extra);
    assert_eq!(deltas_shown(&ran).concat(), "the launch code pad is set");
    let types: Vec<String> = ran
        .events()
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with("stream_hold") || t == "assistant_delta")
        .collect();
    assert_eq!(
        types,
        [
            "assistant_delta",
            "stream_hold",
            "stream_hold_end",
            "assistant_delta",
            "assistant_delta",
            "assistant_delta"
        ],
        "one event at each edge, however long the hold lasts"
    );
    assert_eq!(
        ran.of_type("stream_hold"),
        [json!({"type": "stream_hold", "gate": gate, "held": 7})]
    );
    assert_eq!(
        ran.of_type("stream_hold_end"),
        [json!({"type": "stream_hold_end", "gate": gate, "held": 12, "outcome": "released"})]
    );
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let held: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| {
            l["decision"]
                .as_str()
                .is_some_and(|d| d.starts_with("hold"))
        })
        .map(|l| {
            (
                l["decision"].as_str().unwrap(),
                l["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            ("hold", "holding 7 bytes"),
            ("hold_end", "released: 12 bytes were held")
        ]
    );
    assert!(lines
        .iter()
        .all(|l| l["interceptor"] == gate || l["decision"] != "hold"));
    let verified = chimera(
        dir.path(),
        &["audit", "verify", audit.to_str().unwrap()],
        &[],
        "",
    );
    assert_eq!(verified.status(), 0, "{}", verified.stderr());

    // A held phrase that becomes the match: the hold ends blocked.
    let deltas: Vec<String> = ["the launch ", "code ", "alpha now"]
        .map(str::to_owned)
        .to_vec();
    let ran = scripted(&deltas, config.clone());
    assert_eq!(
        ran.of_type("stream_hold_end")[0]["outcome"],
        "blocked",
        "{}",
        ran.stdout()
    );
    // Held when the stream ends: the final check judges it, `ended`.
    let deltas: Vec<String> = ["the launch ", "code"].map(str::to_owned).to_vec();
    let ran = scripted(&deltas, config.clone());
    assert_eq!(ran.of_type("stream_hold_end")[0]["outcome"], "ended");
    assert_eq!(deltas_shown(&ran).concat(), "the launch code");
    // The ordinary trailing-word lag raises no event.
    let deltas: Vec<String> = ["a perfectly ordin", "ary answer"]
        .map(str::to_owned)
        .to_vec();
    let ran = scripted(&deltas, config);
    assert!(ran.of_type("stream_hold").is_empty(), "{}", ran.stdout());
}
