//! Real clients, each doing one tool round trip against the loopback
//! model (not through the gateway yet): the model asks for a tool call,
//! the client runs its tool and sends the result, the model answers with
//! it. Each test checks the final answer and that the tool's result
//! reached the model. The clients and their harness are
//! `chimera_tests::clients`; the fidelity corpus they recorded is
//! `tests/data/fidelity` (see [`fidelity`]).

use chimera_tests::clients::{Client, RoundTrip, MCP_INSTRUCTIONS};
use chimera_tests::http::{tool_results, Request, Server, ANSWER_PREFIX};

/// The key every client is given (a made-up one: the model never checks).
const KEY: &str = "sk-chimera-fidelity-0123456789";

/// Runs `client` against a fresh loopback model; `None` when it cannot
/// be had here (skipped, or failed under `CHIMERA_REQUIRE_REAL_PARTS`).
fn round_trip(client: Client) -> Option<(RoundTrip, Server)> {
    let server = Server::start_concurrent(vec![client.upstream()]);
    let trip = client.run(&server.url, KEY)?;
    Some((trip, server))
}

/// The tool results that reached the model, in every request.
fn results_received(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .filter(|request| request.method == "POST")
        .filter_map(|request| serde_json::from_slice(&request.bytes).ok())
        .flat_map(|body| tool_results(&body))
        .collect()
}

/// Runs `client` and checks its round trip: it succeeded, its final
/// answer is the model's answer holding the tool's result, and that
/// result reached the model. Returns the requests the model got.
fn assert_round_trip(client: Client) -> Option<Vec<Request>> {
    let (trip, server) = round_trip(client)?;
    let requests = server.requests();
    let call = client.tool_call();
    let what = format!(
        "{}: stdout {:?}\nstderr {}\nrequests {:?}",
        client.name(),
        trip.stdout,
        trip.stderr,
        requests
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    assert!(trip.success, "the client failed: {what}");
    assert!(
        trip.answer().contains(ANSWER_PREFIX) && trip.answer().contains(call.result),
        "the final answer is not the model's answer with the tool's result: {what}"
    );
    let results = results_received(&requests);
    assert!(
        results.iter().any(|result| result.contains(call.result)),
        "the tool's result never reached the model ({results:?}): {what}"
    );
    Some(requests)
}

#[test]
fn claude_code_runs_its_bash_tool_for_the_model_and_prints_the_answer_built_on_its_output() {
    let Some(requests) = assert_round_trip(Client::ClaudeCode) else {
        return;
    };
    let turns: Vec<&Request> = requests
        .iter()
        .filter(|r| r.method == "POST" && r.route() == "/v1/messages")
        .collect();
    assert!(
        turns
            .iter()
            .all(|r| r.header("x-api-key") == Some(KEY) && r.header("anthropic-version").is_some()),
        "every turn carries the key and a version"
    );
    assert!(
        turns.iter().any(|r| r.json()["stream"] == true),
        "Claude Code streams its turns"
    );
}

#[test]
fn claude_code_sends_an_mcp_servers_instructions_to_the_model_and_runs_the_servers_tool() {
    let Some(requests) = assert_round_trip(Client::ClaudeCodeMcp) else {
        return;
    };
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.body.contains(MCP_INSTRUCTIONS)),
        "the MCP server's instructions never reached the model"
    );
}

#[test]
fn the_openai_agents_sdk_runs_a_function_tool_over_chat_completions() {
    let Some(requests) = assert_round_trip(Client::OpenAiAgents) else {
        return;
    };
    assert!(requests
        .iter()
        .filter(|r| r.method == "POST")
        .all(|r| r.route() == "/v1/chat/completions"));
}

#[test]
fn langchains_chat_openai_runs_a_bound_tool_over_chat_completions() {
    assert_round_trip(Client::LangChainOpenAi);
}

#[test]
fn langchains_chat_anthropic_runs_a_bound_tool_over_messages() {
    assert_round_trip(Client::LangChainAnthropic);
}

#[test]
fn the_vercel_ai_sdk_runs_a_tool_over_openai_chat_completions() {
    assert_round_trip(Client::VercelOpenAi);
}

#[test]
fn the_vercel_ai_sdk_runs_a_tool_over_anthropic_messages() {
    assert_round_trip(Client::VercelAnthropic);
}

#[test]
fn the_openai_python_sdk_does_a_tool_round_trip_by_hand() {
    assert_round_trip(Client::OpenAiSdk);
}

#[test]
fn the_openai_python_sdk_does_a_streamed_tool_round_trip_by_hand() {
    let Some(requests) = assert_round_trip(Client::OpenAiSdkStreamed) else {
        return;
    };
    assert!(requests
        .iter()
        .filter(|r| r.method == "POST")
        .all(|r| r.json()["stream"] == true));
}

#[test]
fn the_anthropic_python_sdk_does_a_tool_round_trip_by_hand() {
    assert_round_trip(Client::AnthropicSdk);
}

#[test]
fn the_anthropic_python_sdk_does_a_streamed_tool_round_trip_by_hand() {
    let Some(requests) = assert_round_trip(Client::AnthropicSdkStreamed) else {
        return;
    };
    assert!(requests
        .iter()
        .filter(|r| r.method == "POST")
        .all(|r| r.json()["stream"] == true));
}

#[test]
fn every_client_has_a_corpus_name_of_its_own() {
    let names: std::collections::BTreeSet<&str> = Client::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), Client::ALL.len());
}

mod fidelity {
    //! The fidelity corpus: what the real clients sent to the loopback
    //! model and what it replied, one file per client in
    //! `tests/data/fidelity/<client>.json`, and hand-made bodies in
    //! `tests/data/fidelity/handmade/`. Recorded by the ignored test
    //! [`record_the_fidelity_corpus_from_every_real_client`]:
    //!
    //! ```text
    //! cargo test -p chimera-tests --test all -- --ignored clients::fidelity::record
    //! ```

    use super::KEY;
    use chimera_tests::clients::Client;
    use chimera_tests::http::{Exchange, Server};
    use chimera_tests::workspace_root;
    use serde_json::{json, Value};
    use std::path::PathBuf;

    /// Where the corpus lives.
    fn corpus_dir() -> PathBuf {
        workspace_root().join("tests/data/fidelity")
    }

    /// Whether a header's value is a key or token, recorded as `<redacted>`.
    fn secret_header(name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        ["authorization", "cookie"].contains(&name.as_str())
            || ["key", "token", "secret"]
                .iter()
                .any(|word| name.contains(word))
    }

    /// One exchange as the corpus holds it: the request (method, path
    /// with query, headers with keys and tokens redacted and the loopback
    /// port as `<port>`, the body exactly as sent) and the reply.
    fn recorded(exchange: &Exchange, port: &str) -> Value {
        let request = &exchange.request;
        let headers: Vec<Value> = request
            .raw_headers
            .iter()
            .map(|(name, value)| {
                let value = if secret_header(name) {
                    "<redacted>".to_owned()
                } else {
                    value.replace(port, "<port>")
                };
                json!([name, value])
            })
            .collect();
        let body = String::from_utf8(request.bytes.clone()).expect("a UTF-8 request body");
        let reply = exchange.reply.as_ref().map_or(Value::Null, |sent| {
            json!({
                "status": sent.status,
                "headers": sent.headers.iter().map(|(n, v)| json!([n, v])).collect::<Vec<_>>(),
                "body": String::from_utf8(sent.body.clone()).expect("a UTF-8 reply"),
            })
        });
        json!({
            "request": {"method": request.method, "path": request.path,
                "headers": headers, "body": body},
            "reply": reply,
        })
    }

    #[test]
    #[ignore = "records tests/data/fidelity from every real client: run it by name with --ignored"]
    fn record_the_fidelity_corpus_from_every_real_client() {
        let dir = corpus_dir();
        std::fs::create_dir_all(&dir).expect("make the corpus directory");
        for client in Client::ALL {
            let server = Server::start_concurrent(vec![client.upstream()]);
            let Some(trip) = client.run(&server.url, KEY) else {
                panic!(
                    "{} cannot be had here: the corpus needs every client",
                    client.name()
                );
            };
            assert!(
                trip.success,
                "{} failed: {}\n{}",
                client.name(),
                trip.stdout,
                trip.stderr
            );
            let port = server.url.rsplit(':').next().expect("a port").to_owned();
            let exchanges: Vec<Value> = server
                .exchanges()
                .iter()
                .map(|exchange| recorded(exchange, &port))
                .collect();
            let text = serde_json::to_string_pretty(&json!({
                "client": client.name(),
                "package": client.package(),
                "wire": format!("{:?}", client.wire()),
                "tool": client.tool_call().name,
                "answer": trip.answer(),
                "exchanges": exchanges,
            }))
            .expect("serialise");
            let body = text.replace(KEY, "<redacted>") + "\n";
            std::fs::write(dir.join(format!("{}.json", client.name())), body)
                .expect("write the corpus file");
        }
    }

    #[test]
    fn the_recorded_corpus_has_every_client_with_bodies_as_sent_and_no_key() {
        for client in Client::ALL {
            let path = corpus_dir().join(format!("{}.json", client.name()));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!text.contains(KEY), "{} holds the key", path.display());
            let corpus: Value = serde_json::from_str(&text).expect("the corpus is JSON");
            let exchanges = corpus["exchanges"].as_array().expect("exchanges");
            let posts: Vec<&Value> = exchanges
                .iter()
                .filter(|e| e["request"]["method"] == "POST")
                .collect();
            assert!(
                posts.len() >= 2,
                "{}: a round trip is two turns",
                client.name()
            );
            for exchange in &posts {
                let body = exchange["request"]["body"].as_str().expect("a body string");
                let _: Value = serde_json::from_str(body).expect("a JSON request body");
                assert!(exchange["reply"]["status"].is_u64(), "a recorded reply");
                for header in exchange["request"]["headers"].as_array().expect("headers") {
                    let (name, value) = (header[0].as_str().unwrap(), header[1].as_str().unwrap());
                    if secret_header(name) {
                        assert_eq!(value, "<redacted>", "{}: {name}", client.name());
                    }
                }
            }
        }
    }

    /// Each hand-made file, and texts that show it holds what
    /// `tests/data/fidelity/README.md` says it does.
    const HANDMADE: &[(&str, &[&str])] = &[
        (
            "messages-request.json",
            &[
                r#""cache_control": {"type": "ephemeral", "ttl": "1h"}"#,
                r#"{"role": "system", "content": "#,
                r#""type": "thinking""#,
                r#""type": "redacted_thinking""#,
                r#""signature": "#,
                r#""is_error": true"#,
                r#""type": "tool_result""#,
                r#""type": "document""#,
                r#""type": "image""#,
                r#""type": "web_search_20250305""#,
                r#""type": "server_tool_use""#,
                r#""type": "web_search_tool_result""#,
                r"\ud83d\ude00",
                "1e400",
                "12345678901234567890",
                "chimera_unknown_field",
            ],
        ),
        (
            "messages-request-stream.json",
            &[
                r#"{"stream":true,"#,
                r#"{"role":"system","content":"#,
                r#""type":"redacted_thinking""#,
                r#""defer_loading":true"#,
                "1e400",
                "12345678901234567890",
            ],
        ),
        (
            "chat-request.json",
            &[
                r#""n": 2"#,
                r#""role": "developer""#,
                r#""type": "image_url""#,
                r#""tool_calls": ["#,
                r#""role": "tool""#,
                r#""response_format": {"type": "json_schema""#,
                "1e400",
                "12345678901234567890",
                "chimera_unknown_field",
            ],
        ),
        (
            "chat-request-stream.json",
            &[
                r#""stream_options":{"include_usage":true}"#,
                r#""n":2"#,
                r#""response_format":{"type":"json_object"}"#,
                "1e400",
            ],
        ),
        (
            "messages-reply.json",
            &[
                r#""type": "thinking""#,
                r#""type": "redacted_thinking""#,
                r#""type": "tool_use""#,
                r#""type": "web_search_tool_result""#,
                r#""stop_reason": "tool_use""#,
            ],
        ),
        (
            "messages-reply-max-tokens.json",
            &[r#""stop_reason":"max_tokens""#],
        ),
        (
            "messages-reply-refusal.json",
            &[r#""stop_reason":"refusal""#],
        ),
        (
            "messages-reply-stream.sse",
            &[
                r#""type":"thinking_delta""#,
                r#""type":"signature_delta""#,
                r#""type":"redacted_thinking""#,
                r#""type":"input_json_delta""#,
                r#""type":"citations_delta""#,
                r#""stop_reason":"tool_use""#,
                "event: message_stop",
            ],
        ),
        (
            "messages-reply-stream-max-tokens.sse",
            &[r#""stop_reason":"max_tokens""#],
        ),
        (
            "messages-reply-stream-crlf.sse",
            &["\r\n\r\n", r#""stop_reason":"max_tokens""#],
        ),
        (
            "messages-reply-stream-error.sse",
            &["event: error", r#""type":"overloaded_error""#],
        ),
        (
            "chat-reply.json",
            &[
                r#""index": 1"#,
                r#""finish_reason": "tool_calls""#,
                r#""finish_reason": "length""#,
            ],
        ),
        ("chat-reply-refusal.json", &[r#""refusal":"I'm sorry"#]),
        (
            "chat-reply-stream.sse",
            &[
                r#""index":1"#,
                r#""function":{"arguments":"#,
                r#""finish_reason":"length""#,
                r#""choices":[],"usage":{"#,
                "data: [DONE]",
            ],
        ),
        (
            "chat-reply-stream-refusal.sse",
            &[r#""refusal":"I'm sorry, "}"#, "data: [DONE]"],
        ),
    ];

    /// Whether `text` is one JSON value (numbers are checked for syntax
    /// only, so `1e400` passes).
    fn is_json(text: &str) -> bool {
        serde_json::from_str::<Box<serde_json::value::RawValue>>(text).is_ok()
    }

    #[test]
    fn the_hand_made_bodies_are_well_formed_and_hold_every_block_type_they_claim() {
        let dir = corpus_dir().join("handmade");
        let mut present: Vec<String> = std::fs::read_dir(&dir)
            .expect("the hand-made directory")
            .map(|entry| entry.expect("an entry").file_name().into_string().unwrap())
            .collect();
        present.sort();
        let mut listed: Vec<String> = HANDMADE.iter().map(|(f, _)| (*f).to_owned()).collect();
        listed.sort();
        assert_eq!(
            present, listed,
            "every hand-made file is listed, and only those"
        );
        let readme = std::fs::read_to_string(corpus_dir().join("README.md")).expect("README");
        for (file, holds) in HANDMADE {
            assert!(
                readme.contains(&format!("`{file}`")),
                "the README tells {file}"
            );
            let text = std::fs::read_to_string(dir.join(file)).expect("a UTF-8 file");
            for needle in *holds {
                assert!(text.contains(needle), "{file} holds {needle}");
            }
            if std::path::Path::new(file)
                .extension()
                .is_some_and(|e| e == "json")
            {
                assert!(is_json(&text), "{file} is JSON");
                continue;
            }
            let separator = if text.contains("\r\n") { "\r\n" } else { "\n" };
            let blank = separator.repeat(2);
            assert!(text.ends_with(&blank), "{file} ends with a blank line");
            for event in text[..text.len() - blank.len()].split(&blank) {
                for line in event.split(separator) {
                    let (field, value) = line.split_once(": ").expect("a field line");
                    match field {
                        "event" => assert!(!value.is_empty()),
                        "data" => assert!(value == "[DONE]" || is_json(value), "{file}: {line}"),
                        _ => panic!("{file}: unexpected field {line}"),
                    }
                }
            }
        }
    }
}
