//! Judging fails safe in `chimera serve`: a client that makes a pack slow
//! or kills its process gets its own request refused (503), never the
//! redactor switched off for everyone, and never a text passed unjudged.
//!
//! The redactor here keeps the Unicode word boundaries its default once
//! had (`\b`), whose slow path a non-ASCII letter in a near-miss
//! (`sk-aaaaaaaé `) finds; the call budget is a few milliseconds with no
//! allowance per MiB, so every padded request is an overrun.

use super::{chat_with, serve, user, Gateway};
use chimera_tests::http::{Reply, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The redactor's old default pattern: Unicode word boundaries.
const UNICODE_PATTERN: &str = r"\b(?:sk|key|token|secret)-[A-Za-z0-9_\-]{8,}\b";

const SECRET: &str = "sk-live1234567890abcdef";

/// The redactor with [`UNICODE_PATTERN`].
fn slow_redactor() -> String {
    format!("redactor={}", json!({ "pattern": UNICODE_PATTERN }))
}

/// About `bytes` of near-misses, then the secret.
fn padded(bytes: usize) -> Value {
    let unit = "sk-aaaaaaaé ";
    let text = format!("{}{SECRET}", unit.repeat(bytes / unit.len()));
    user(&text)
}

/// The authorization header of client key `key`.
fn key(key: &str) -> String {
    format!("authorization: Bearer {key}")
}

/// A gateway with client keys `a` and `b` and `extra` flags.
fn keyed(upstream: &Server, extra: &[&str]) -> Gateway {
    let a = chimera_host::gateway::key_hash("a");
    let b = chimera_host::gateway::key_hash("b");
    let mut args = vec![
        "--client-key-sha256",
        a.as_str(),
        "--client-key-sha256",
        b.as_str(),
    ];
    args.extend(extra);
    serve(upstream, &args)
}

/// No request the upstream got carries the secret.
fn assert_never_sent(upstream: &Server) {
    for request in upstream.requests() {
        assert!(
            !request.body.contains(SECRET),
            "the secret reached the upstream"
        );
    }
}

#[test]
fn one_clients_padded_requests_never_quarantine_the_redactor_for_the_others() {
    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let pack = slow_redactor();
    let gateway = keyed(
        &upstream,
        &[
            "--pack",
            &pack,
            "--call-budget-ms",
            "2",
            "--call-budget-per-mib-ms",
            "0",
        ],
    );
    // Each is a slow call, judged all the same (the attacker's own secret
    // is redacted too), and none counts against the pack.
    for _ in 0..7 {
        let (status, reply) = chat_with(&gateway, &[&key("a")], &padded(400_000));
        assert_eq!(status, 200, "{reply}");
    }
    let (status, reply) = chat_with(
        &gateway,
        &[&key("b")],
        &user(&format!("deploy with {SECRET}")),
    );
    assert_eq!(status, 200, "{reply}");
    let last = upstream.requests().last().unwrap().json();
    assert_eq!(
        last["messages"][0]["content"], "deploy with [redacted]",
        "the other client's request is judged"
    );
    assert_never_sent(&upstream);
}

/// A gateway with the slow redactor isolated, its deadline 25 ms whatever
/// the input's size, and `extra` flags; warm (the pack's process is up and
/// has judged a request).
fn isolated(upstream: &Server, extra: &[&str]) -> Gateway {
    let pack = slow_redactor();
    let mut args = vec![
        "--pack",
        &pack,
        "--isolate",
        "redactor",
        "--call-budget-ms",
        "25",
        "--call-budget-per-mib-ms",
        "0",
    ];
    args.extend(extra);
    let gateway = keyed(upstream, &args);
    let (status, reply) = chat_with(&gateway, &[&key("b")], &user("hello"));
    assert_eq!(status, 200, "{reply}");
    gateway
}

#[test]
fn an_isolated_redactor_killed_for_its_deadline_refuses_that_request_and_the_next_is_judged() {
    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let gateway = isolated(&upstream, &[]);
    let (status, reply) = chat_with(&gateway, &[&key("a")], &padded(3_000_000));
    assert_eq!(status, 503, "{reply}");
    assert_eq!(reply["error"]["type"], "server_error", "{reply}");
    assert_eq!(reply["error"]["code"], "policy_unavailable", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("could not judge") && message.contains("redactor"),
        "{message}"
    );
    // While the child restarts, a request with a secret is refused or
    // judged, never passed: until one is judged.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, reply) = chat_with(
            &gateway,
            &[&key("b")],
            &user(&format!("deploy with {SECRET}")),
        );
        match status {
            200 => break,
            503 => assert!(Instant::now() < until, "the pack never came back: {reply}"),
            other => panic!("{other}: {reply}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let last = upstream.requests().last().unwrap().json();
    assert_eq!(last["messages"][0]["content"], "deploy with [redacted]");
    assert_never_sent(&upstream);
}

#[test]
fn a_pack_its_operator_set_to_fail_open_lets_what_it_could_not_judge_through() {
    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let gateway = isolated(&upstream, &["--fail-open", "redactor"]);
    // The operator's choice: the seam's own policy (the redactor's is
    // fail-open), so the request the pack could not judge goes upstream.
    let (status, reply) = chat_with(&gateway, &[&key("a")], &padded(3_000_000));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(upstream.requests().len(), 2);
    assert!(upstream.requests()[1].body.contains(SECRET));
}

#[test]
fn the_official_sdks_read_a_rate_limit_and_an_unjudged_request_as_their_own_errors() {
    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let limit = r#"rate-limiter={"scope":"key","requests_per_minute":1}"#;
    let limited = serve(&upstream, &["--pack", limit]);
    // The openai SDK: a RateLimitError with the wait, then (the request a
    // pack could not judge) an InternalServerError it would retry.
    let Some(seen) = super::with_sdk(
        &limited,
        r#"
import json, openai
client = openai.OpenAI(max_retries=0)
client.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
try:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}])
    print(json.dumps({"raised": None}))
except openai.RateLimitError as e:
    print(json.dumps({"raised": "RateLimitError", "status": e.status_code, "code": e.code,
                      "retry_after": e.response.headers.get("retry-after")}))
"#,
    ) else {
        return;
    };
    assert_eq!(seen["raised"], "RateLimitError", "{seen}");
    assert_eq!(seen["status"], 429);
    assert_eq!(seen["code"], "rate_limit_exceeded");
    let wait: u64 = seen["retry_after"].as_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{seen}");

    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let gateway = isolated(&upstream, &[]);
    let seen = super::with_sdk(
        &gateway,
        r#"
import json, openai
client = openai.OpenAI(max_retries=0, api_key="a")
padded = "sk-aaaaaaa\u00e9 " * 250000 + "sk-live1234567890abcdef"
try:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": padded}])
    print(json.dumps({"raised": None}))
except openai.InternalServerError as e:
    print(json.dumps({"raised": "InternalServerError", "status": e.status_code, "code": e.code,
                      "should_retry": client._should_retry(e.response)}))
"#,
    )
    .unwrap();
    assert_eq!(seen["raised"], "InternalServerError", "{seen}");
    assert_eq!(seen["status"], 503);
    assert_eq!(seen["code"], "policy_unavailable");
    assert_eq!(seen["should_retry"], true, "{seen}");
    assert_never_sent(&upstream);
}
