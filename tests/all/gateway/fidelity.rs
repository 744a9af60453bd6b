//! The gateway against the fidelity corpus (`tests/data/fidelity`): what
//! real clients sent and hand-made bodies with every block type, relayed
//! through `chimera serve` with packs that allow everything.
//!
//! - The upstream receives the client's body byte for byte, and the
//!   client's headers less its key (the gateway's in its place).
//! - The client receives the upstream's status and body byte for byte
//!   (JSON), or its events (a stream) — exactly, with no stream gate; with
//!   a stream gate, the same events with each text's deltas split
//!   wherever the gate released them.
//! - With the redactor, only the redacted spans differ.

use super::{exchange_with_head, head_value, serve_with, Gateway};
use chimera_tests::http::{Reply, Request, Server};
use serde_json::Value;
use std::path::PathBuf;

/// Packs that judge every view and allow everything: a redactor whose
/// pattern never matches, prompt-injection, content-safety on requests'
/// answers with a pattern that never matches.
const ALLOWING: &[&str] = &[
    "--pack",
    r#"redactor={"pattern":"NEVER-MATCHES-[0-9]{40}"}"#,
    "--pack",
    "prompt-injection",
];

/// The same, and a stream gate (content-safety judging every streamed
/// text, with no check that can fire on the corpus).
const ALLOWING_WITH_STREAM_GATE: &[&str] = &[
    "--pack",
    r#"redactor={"pattern":"NEVER-MATCHES-[0-9]{40}"}"#,
    "--pack",
    r#"content-safety={"scan_llm_responses":true,"check_pii_email":false,"check_pii_phone":false,"check_pii_ssn":false,"check_secrets_api_key":false,"check_secrets_private_key":false,"check_secrets_password":false,"check_credit_card":false,"check_ip_internal":false,"custom_patterns":["NEVER-MATCHES-[0-9]{40}"]}"#,
];

fn corpus() -> PathBuf {
    chimera_tests::workspace_root().join("tests/data/fidelity")
}

/// One request of the corpus: its wire, method, target, headers, body.
struct Recorded {
    messages: bool,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
    reply: (u16, Vec<(String, String)>, String),
}

fn pairs(value: &Value) -> Vec<(String, String)> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((pair[0].as_str()?.to_owned(), pair[1].as_str()?.to_owned())))
        .collect()
}

/// Every exchange the real clients recorded.
fn recorded() -> Vec<(String, Recorded)> {
    let mut all = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for file in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let messages = doc["wire"].as_str().unwrap_or_default().contains("essages");
        for (at, exchange) in doc["exchanges"].as_array().unwrap().iter().enumerate() {
            let request = &exchange["request"];
            let reply = &exchange["reply"];
            all.push((
                format!("{name} #{at}"),
                Recorded {
                    messages,
                    path: request["path"].as_str().unwrap().to_owned(),
                    headers: pairs(&request["headers"]),
                    body: request["body"].as_str().unwrap().to_owned(),
                    reply: (
                        u16::try_from(reply["status"].as_u64().unwrap()).unwrap(),
                        pairs(&reply["headers"]),
                        reply["body"].as_str().unwrap_or_default().to_owned(),
                    ),
                },
            ));
        }
    }
    all
}

/// The gateway in front of `upstream`, for the wire, every model name
/// (a pattern), with `packs`.
fn gateway(upstream: &Server, messages: bool, packs: &[&str]) -> Gateway {
    let base = format!("{}/v1", upstream.url);
    let mut args: Vec<&str> = if messages {
        vec![
            "--anthropic-upstream",
            upstream.url.as_str(),
            "--anthropic-model",
            "*",
            "--anthropic-key-env",
            "GATEWAY_UPSTREAM_KEY",
        ]
    } else {
        vec![
            "--upstream",
            base.as_str(),
            "--model",
            "*",
            "--upstream-key-env",
            "GATEWAY_UPSTREAM_KEY",
        ]
    };
    args.extend(packs);
    serve_with(&args)
}

/// Headers a client sends that a gateway rightly does not pass on.
fn dropped(name: &str) -> bool {
    [
        "host",
        "content-length",
        "connection",
        "transfer-encoding",
        "accept-encoding",
        "authorization",
        "x-api-key",
    ]
    .contains(&name.to_ascii_lowercase().as_str())
}

/// Sends `recorded` through `gateway` as the client did (its key replaced
/// by a test key): the status, the response head and body.
fn send(gateway: &Gateway, recorded: &Recorded, body: &str) -> (u16, String, String) {
    let headers: Vec<String> = recorded
        .headers
        .iter()
        .filter(|(name, _)| !dropped(name))
        .map(|(name, value)| format!("{name}: {value}"))
        .chain(["authorization: Bearer the-clients-key".to_owned()])
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    exchange_with_head(&gateway.address, "POST", &recorded.path, &headers, body)
}

/// An upstream that answers once with `reply`, as recorded.
fn upstream_for(reply: &(u16, Vec<(String, String)>, String)) -> Server {
    let headers: Vec<(String, String)> = reply
        .1
        .iter()
        .filter(|(name, _)| !dropped(name))
        .cloned()
        .collect();
    Server::start(vec![Reply::Body {
        status: reply.0,
        headers,
        body: reply.2.clone(),
    }])
}

/// The events of an event stream: (`event` name, data), in order.
fn events(text: &str) -> Vec<(String, String)> {
    let text = text.replace("\r\n", "\n");
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut name = String::new();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    value.trim().clone_into(&mut name);
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                }
            }
            (name, data.join("\n"))
        })
        .filter(|(name, data)| !(name.is_empty() && data.is_empty()))
        .collect()
}

/// A stream's events with every text's deltas merged (per Messages block
/// index, per chat choice), so two streams that split one text
/// differently compare equal.
fn merged(text: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for (name, data) in events(text) {
        let Ok(event) = serde_json::from_str::<Value>(&data) else {
            out.push(Value::String(format!("{name}:{data}")));
            continue;
        };
        let piece = event["delta"]["text"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                let choice = &event["choices"][0];
                (event["choices"].as_array().is_some_and(|c| c.len() == 1)
                    && choice["delta"].as_object().is_some_and(|d| d.len() == 1)
                    && choice["finish_reason"].is_null())
                .then(|| choice["delta"]["content"].as_str().map(str::to_owned))
                .flatten()
            });
        let key = event["index"]
            .as_u64()
            .or_else(|| event["choices"][0]["index"].as_u64());
        if let (Some(piece), Some(key)) = (piece, key) {
            if let Some(last) = out.last_mut() {
                if last["merged"] == key {
                    let joined = format!("{}{piece}", last["text"].as_str().unwrap_or_default());
                    last["text"] = Value::String(joined);
                    continue;
                }
            }
            if piece.is_empty() {
                continue;
            }
            out.push(serde_json::json!({"merged": key, "text": piece}));
            continue;
        }
        out.push(event);
    }
    out
}

/// A chat stream's events per choice, in order within each (and the
/// events of no single choice, in order): a relay holds one choice's tool
/// calls until the choice is judged while another's text goes on, so the
/// choices' events may interleave differently, never reorder.
fn per_choice(text: &str) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let mut out: std::collections::BTreeMap<String, Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    for (name, data) in events(text) {
        let key = serde_json::from_str::<Value>(&data)
            .ok()
            .and_then(|event| {
                let choices = event["choices"].as_array()?;
                (choices.len() == 1).then(|| choices[0]["index"].to_string())
            })
            .unwrap_or_default();
        out.entry(key).or_default().push((name, data));
    }
    out
}

/// What the upstream got, compared with what the client sent.
fn assert_forwarded(case: &str, recorded: &Recorded, sent_body: &str, got: &Request) {
    assert_eq!(
        got.bytes,
        sent_body.as_bytes(),
        "{case}: the body reached the upstream as the client wrote it"
    );
    assert_eq!(
        got.path, recorded.path,
        "{case}: the target, query included"
    );
    for (name, value) in &recorded.headers {
        if dropped(name) {
            continue;
        }
        assert_eq!(
            got.header(&name.to_ascii_lowercase()),
            Some(value.as_str()),
            "{case}: header {name}"
        );
    }
    let key = if recorded.messages {
        got.header("x-api-key")
    } else {
        got.header("authorization")
    };
    assert!(
        key.is_some_and(|k| k.contains("the-gateways-key")),
        "{case}: the gateway's key"
    );
    assert!(
        !format!("{:?}", got.headers).contains("the-clients-key"),
        "{case}: never the client's key"
    );
}

#[test]
fn every_recorded_request_and_reply_passes_the_allowing_packs_unchanged() {
    for (case, recorded) in recorded() {
        let upstream = upstream_for(&recorded.reply);
        let gateway = gateway(&upstream, recorded.messages, ALLOWING);
        let (status, head, body) = send(&gateway, &recorded, &recorded.body);
        assert_eq!(status, recorded.reply.0, "{case}: {body}");
        assert_forwarded(&case, &recorded, &recorded.body, &upstream.requests()[0]);
        if head_value(&head, "content-type").is_some_and(|t| t.starts_with("text/event-stream")) {
            assert_eq!(
                events(&body),
                events(&recorded.reply.2),
                "{case}: the stream as it came"
            );
        } else {
            assert_eq!(body, recorded.reply.2, "{case}: the reply as it came");
        }
    }
}

#[test]
fn a_stream_gate_splits_streamed_texts_where_it_releases_them_and_changes_nothing_else() {
    for (case, recorded) in recorded() {
        let upstream = upstream_for(&recorded.reply);
        let gateway = gateway(&upstream, recorded.messages, ALLOWING_WITH_STREAM_GATE);
        let (status, _, body) = send(&gateway, &recorded, &recorded.body);
        assert_eq!(status, recorded.reply.0, "{case}: {body}");
        assert_forwarded(&case, &recorded, &recorded.body, &upstream.requests()[0]);
        if recorded.reply.2.starts_with('{') {
            assert_eq!(body, recorded.reply.2, "{case}: the reply as it came");
        } else {
            assert_eq!(
                merged(&body),
                merged(&recorded.reply.2),
                "{case}: the stream's texts and events"
            );
        }
    }
}

/// A hand-made corpus file.
fn handmade(name: &str) -> String {
    std::fs::read_to_string(corpus().join("handmade").join(name)).unwrap()
}

#[test]
fn hand_made_requests_with_every_block_type_reach_the_upstream_byte_for_byte() {
    for (name, messages) in [
        ("messages-request.json", true),
        ("messages-request-stream.json", true),
        ("chat-request.json", false),
        ("chat-request-stream.json", false),
    ] {
        let body = handmade(name);
        let reply = if messages {
            handmade("messages-reply.json")
        } else {
            handmade("chat-reply.json")
        };
        let upstream = Server::start(vec![Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: reply.clone(),
        }]);
        let gateway = gateway(&upstream, messages, ALLOWING);
        let path = if messages {
            "/v1/messages"
        } else {
            "/v1/chat/completions"
        };
        let (status, _, got) = exchange_with_head(
            &gateway.address,
            "POST",
            path,
            &[
                "anthropic-version: 2023-06-01",
                "anthropic-beta: interleaved-thinking-2025-05-14",
            ],
            &body,
        );
        assert_eq!(status, 200, "{name}: {got}");
        let asked = &upstream.requests()[0];
        assert_eq!(
            String::from_utf8_lossy(&asked.bytes),
            body,
            "{name}: byte for byte"
        );
        assert_eq!(
            asked.header("anthropic-beta"),
            Some("interleaved-thinking-2025-05-14"),
            "{name}"
        );
        assert_eq!(got, reply, "{name}: the reply byte for byte");
    }
}

#[test]
fn hand_made_replies_and_streams_come_back_as_they_came() {
    for (name, messages, stream) in [
        ("messages-reply.json", true, false),
        ("messages-reply-max-tokens.json", true, false),
        ("messages-reply-refusal.json", true, false),
        ("messages-reply-stream.sse", true, true),
        ("messages-reply-stream-max-tokens.sse", true, true),
        ("messages-reply-stream-crlf.sse", true, true),
        ("chat-reply.json", false, false),
        ("chat-reply-refusal.json", false, false),
        ("chat-reply-stream.sse", false, true),
        ("chat-reply-stream-refusal.sse", false, true),
    ] {
        let reply = handmade(name);
        let kind = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let upstream = Server::start(vec![Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), kind.into())],
            body: reply.clone(),
        }]);
        let gateway = gateway(&upstream, messages, ALLOWING);
        let (path, request) = if messages {
            (
                "/v1/messages",
                r#"{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            )
        } else {
            (
                "/v1/chat/completions",
                r#"{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            )
        };
        let (status, _, got) = exchange_with_head(&gateway.address, "POST", path, &[], request);
        assert_eq!(status, 200, "{name}: {got}");
        if stream && !messages {
            assert_eq!(
                per_choice(&got),
                per_choice(&reply),
                "{name}: each choice's events as they came"
            );
        } else if stream {
            assert_eq!(
                events(&got),
                events(&reply),
                "{name}: the events as they came"
            );
        } else {
            assert_eq!(got, reply, "{name}: byte for byte");
        }
    }
}

#[test]
fn a_redacted_secret_is_the_only_difference_the_upstream_sees() {
    for (name, messages) in [
        ("messages-request.json", true),
        ("chat-request.json", false),
    ] {
        let body = handmade(name);
        // A secret in the first text the model reads after the system
        // prompt: the redactor's default pattern.
        let secret = "sk-SECRET0123456789abcdef";
        let marked = body.replacen("\"text\": \"", &format!("\"text\": \"{secret} "), 1);
        assert_ne!(marked, body, "{name}: the secret went in");
        let upstream = Server::start(vec![Reply::Body {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: if messages {
                handmade("messages-reply.json")
            } else {
                handmade("chat-reply.json")
            },
        }]);
        let gateway = gateway(&upstream, messages, &["--pack", "redactor"]);
        let path = if messages {
            "/v1/messages"
        } else {
            "/v1/chat/completions"
        };
        let (status, _, got) = exchange_with_head(&gateway.address, "POST", path, &[], &marked);
        assert_eq!(status, 200, "{name}: {got}");
        let asked = String::from_utf8_lossy(&upstream.requests()[0].bytes).into_owned();
        let expected = marked.replacen(secret, "[redacted]", 1);
        assert_eq!(asked, expected, "{name}: only the secret's span changed");
    }
}

#[test]
fn a_chat_chunk_written_again_keeps_a_text_that_passed_as_its_own_bytes() {
    // One chunk carries a text (with escapes a writer would not choose:
    // `\u00e9`, `\/`), a proposed call and the finish: the gateway takes
    // the call out to judge it, so the chunk is written again, and the
    // text, which the packs let through unchanged, must keep the
    // upstream's own bytes.
    let text = r#""caf\u00e9 a\/b \"ok\"""#;
    let chunk = |delta: &str, finish: &str| {
        format!(
            r#"data: {{"id":"up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        ) + "\n\n"
    };
    let stream = [
        chunk(r#"{"role":"assistant","content":""}"#, "null"),
        chunk(
            &format!(
                r#"{{"content":{text},"tool_calls":[{{"index":0,"id":"call_1","type":"function","function":{{"name":"send","arguments":"{{}}"}}}}]}}"#
            ),
            r#""tool_calls""#,
        ),
        "data: [DONE]\n\n".to_owned(),
    ];
    for packs in [&[][..], ALLOWING] {
        let upstream = Server::start(vec![Reply::Stream(stream.to_vec())]);
        let gateway = gateway(&upstream, false, packs);
        let (status, _, body) = exchange_with_head(
            &gateway.address,
            "POST",
            "/v1/chat/completions",
            &[],
            r#"{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        );
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!(r#""content":{text}"#)),
            "{packs:?}: the text as the upstream wrote it: {body}"
        );
        assert!(
            body.contains(r#""id":"call_1""#) && body.contains(r#""name":"send""#),
            "{packs:?}: the call passes: {body}"
        );
    }
}
