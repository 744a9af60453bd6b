//! Real providers against a loopback server started by each test: request
//! shapes on the wire, the redactor on the wire, per-call headers of
//! sessions sharing one provider across threads, streaming, retries,
//! one-line errors, body and line limits, refused redirects and masked
//! credentials — through the library and through the binary.
//!
//! One file for the providers' wire behaviour, which shares the loopback
//! server; each test starts its own.

use chimera_host::agent::{AgentEvent, AgentSession, EndReason, EventBus};
use chimera_host::interception::{InterceptDecision, Interceptor, Interceptors};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::providers::{
    AnthropicConfig, AnthropicProvider, HttpSettings, ModelResponse, OpenAiConfig, OpenAiProvider,
    Provider, ProviderCall, ProviderError, RetryPolicy, ScriptedModel, StreamDelta,
};
use chimera_host::tools::{ToolSet, Workspace};
use chimera_host::types::{Headers, Message, ProviderRequest, Role};
use chimera_tests::cli::Ran;
use chimera_tests::http::{Reply, Server};
use chimera_tests::packs_dir;
use serde_json::{json, Value};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

fn fast_http() -> HttpSettings {
    HttpSettings {
        retry: RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(1),
            max_wait: Duration::from_secs(1),
        },
        ..HttpSettings::default()
    }
}

fn openai(server: &Server, headers: &[(&str, &str)]) -> Arc<OpenAiProvider> {
    Arc::new(OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1", server.url),
        model: "test-model".into(),
        api_key: Some("sk-bearer-key-000111".into()),
        headers: Headers(
            headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        http: fast_http(),
    }))
}

fn tool_call_reply(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5}
    }))
}

fn text_reply(text: &str) -> Reply {
    Reply::json(
        json!({"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 20, "completion_tokens": 2}}),
    )
}

struct Outcome {
    result: chimera_host::agent::RunResult,
    events: Vec<AgentEvent>,
    session: AgentSession,
}

fn run(
    provider: Arc<dyn Provider>,
    registry: Option<Arc<Registry>>,
    stream: bool,
    prompt: &str,
) -> Outcome {
    let workspace = tempfile::tempdir().unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let bus = EventBus::new();
    let sink = Arc::clone(&events);
    bus.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    let mut builder = AgentSession::builder(provider, Workspace::new(workspace.path()).unwrap())
        .system("be brief")
        .tools(ToolSet::standard())
        .events(bus)
        .stream(stream);
    if let Some(registry) = registry {
        builder = builder.registry(registry);
    }
    let mut session = builder.build();
    let result = session.run_turn(prompt);
    let events = events.lock().unwrap().clone();
    Outcome {
        result,
        events,
        session,
    }
}

#[test]
fn openai_requests_reach_the_wire_in_the_chat_completions_shape() {
    let server = Server::start(vec![
        tool_call_reply("call_1", "think", json!({"thought": "plan"})),
        text_reply("done"),
    ]);
    let outcome = run(
        openai(&server, &[("X-Title", "chimera")]),
        None,
        false,
        "hello",
    );
    assert!(outcome.result.success, "{:?}", outcome.result);
    assert_eq!(outcome.session.facts().input_tokens, 31);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        first.header("authorization"),
        Some("Bearer sk-bearer-key-000111")
    );
    assert_eq!(first.header("x-title"), Some("chimera"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    let body = first.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}])
    );
    assert_eq!(body["tools"][6]["type"], "function");
    assert_eq!(body["tools"][6]["function"]["name"], "think");
    assert!(body.get("stream").is_none());
    let second = requests[1].json();
    assert_eq!(
        second["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "think", "arguments": "{\"thought\":\"plan\"}"}}
        ]})
    );
    assert_eq!(
        second["messages"][3],
        json!({"role": "tool", "content": "Thought recorded.", "tool_call_id": "call_1"})
    );
}

#[test]
fn the_redactor_scrubs_the_wire_and_leaves_the_provider_headers_as_configured() {
    let server = Server::start(vec![
        tool_call_reply(
            "call_1",
            "bash",
            json!({"command": "echo token-tooloutput123456"}),
        ),
        text_reply("done"),
    ]);
    let registry = Arc::new(Registry::new());
    PluginManager::new(Arc::clone(&registry), vec![packs_dir().to_owned()])
        .load("redactor", "")
        .unwrap();
    let provider = openai(
        &server,
        &[
            ("Authorization", "Bearer sk-surface-secret-999"),
            ("X-Trace", "id sk-trace-secret-12345"),
        ],
    );
    let outcome = run(
        provider.clone(),
        Some(registry),
        false,
        "deploy with sk-prompt-secret-777",
    );
    assert!(outcome.result.success, "{:?}", outcome.result);
    for request in server.requests() {
        let wire = format!("{:?} {}", request.headers, request.body);
        for secret in [
            "sk-prompt-secret-777",
            "token-tooloutput123456",
            "sk-trace-secret-12345",
            "sk-surface-secret-999",
        ] {
            assert!(!wire.contains(secret), "{secret} reached the wire: {wire}");
        }
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-bearer-key-000111"),
            "the key is not on the surface"
        );
        assert_eq!(request.header("x-trace"), Some("id [redacted]"));
    }
    let after = provider.request_headers().unwrap();
    assert_eq!(
        after.get("X-Trace"),
        Some("id sk-trace-secret-12345"),
        "the redacted headers went with the calls, not into the provider"
    );
    assert_eq!(
        after.get("Authorization"),
        Some("Bearer sk-surface-secret-999")
    );
}

/// Turns each of two sessions runs over one shared provider.
const SHARED_TURNS: usize = 200;

/// A pass-through to one shared provider that holds every call until a call
/// from the other session arrives, so the two are on their way to the wire at
/// the same moment, every turn.
struct Meeting {
    inner: Arc<dyn Provider>,
    barrier: Barrier,
}

impl Provider for Meeting {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        self.barrier.wait();
        self.inner.complete(call)
    }

    fn request_headers(&self) -> Option<Headers> {
        self.inner.request_headers()
    }
}

/// Two sessions, `a` and `b`, on two threads over one shared `provider`:
/// each has a `provider_request` interceptor that sets `X-Session` to its
/// own name, and both run [`SHARED_TURNS`] turns (`session <name> turn <n>`)
/// of one provider call each, the calls of a turn meeting before they go
/// on. A failed turn is reported after both threads ended (so neither waits
/// for a call that never comes).
fn two_sessions_sharing(provider: Arc<dyn Provider>) {
    let meeting: Arc<dyn Provider> = Arc::new(Meeting {
        inner: provider,
        barrier: Barrier::new(2),
    });
    let threads: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let provider = Arc::clone(&meeting);
            std::thread::spawn(move || {
                let mut bundle = Interceptors::new();
                bundle.provider_request.push(Interceptor::provider_request(
                    "tag",
                    move |r: &ProviderRequest| {
                        let mut headers = r.headers.clone().unwrap_or_default();
                        headers.set("X-Session", name);
                        Ok(InterceptDecision::Replace(ProviderRequest {
                            headers: Some(headers),
                            ..r.clone()
                        }))
                    },
                ));
                let workspace = tempfile::tempdir().unwrap();
                let mut session =
                    AgentSession::builder(provider, Workspace::new(workspace.path()).unwrap())
                        .interceptors(Arc::new(bundle))
                        .build();
                (0..SHARED_TURNS)
                    .map(|turn| session.run_turn(&format!("session {name} turn {turn}")))
                    .filter(|result| !result.success)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for thread in threads {
        let failed = thread.join().expect("a session thread");
        assert!(failed.is_empty(), "{failed:?}");
    }
}

/// The session a request came from, by its last user message.
fn session_of(last_user_message: &str) -> &str {
    last_user_message
        .strip_prefix("session ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("not a session's turn: {last_user_message}"))
}

/// Checks that every `(last user message, X-Session)` pair names one session
/// twice, and that each session sent all its turns.
fn assert_each_carries_its_own(sent: &[(String, Option<String>)]) {
    assert_eq!(sent.len(), 2 * SHARED_TURNS);
    for (message, header) in sent {
        assert_eq!(
            header.as_deref(),
            Some(session_of(message)),
            "the request of {message:?} carried another session's header"
        );
    }
    let from_a = sent.iter().filter(|(m, _)| session_of(m) == "a").count();
    assert_eq!(from_a, SHARED_TURNS);
}

#[test]
fn two_sessions_sharing_one_scripted_model_across_threads_each_record_only_their_own_headers() {
    let responses = vec![json!({"content": "done"}); 2 * SHARED_TURNS];
    let model = Arc::new(
        ScriptedModel::from_json(&json!({ "responses": responses }).to_string())
            .unwrap()
            .with_headers(Headers(vec![("X-Trace".into(), "configured".into())])),
    );
    two_sessions_sharing(Arc::clone(&model) as Arc<dyn Provider>);
    let recorded = model.recorded();
    let sent: Vec<(String, Option<String>)> = recorded
        .iter()
        .map(|request| {
            let headers = request.headers.as_ref().expect("a header surface");
            assert_eq!(headers.get("X-Trace"), Some("configured"));
            let last = request.messages.iter().rev().find(|m| m.role == Role::User);
            (
                last.expect("a user message").content.clone(),
                headers.get("X-Session").map(str::to_owned),
            )
        })
        .collect();
    assert_each_carries_its_own(&sent);
    assert_eq!(
        model.request_headers(),
        Some(Headers(vec![("X-Trace".into(), "configured".into())]))
    );
}

#[test]
fn two_sessions_sharing_one_openai_provider_across_threads_each_send_only_their_own_headers() {
    let server = Server::start(vec![text_reply("done")]);
    let provider = openai(&server, &[("X-Trace", "configured")]);
    two_sessions_sharing(Arc::clone(&provider) as Arc<dyn Provider>);
    let sent: Vec<(String, Option<String>)> = server
        .requests()
        .iter()
        .map(|request| {
            assert_eq!(request.header("x-trace"), Some("configured"));
            assert_eq!(
                request.header("authorization"),
                Some("Bearer sk-bearer-key-000111")
            );
            let body = request.json();
            let last = body["messages"]
                .as_array()
                .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .expect("a user message");
            (
                last.to_owned(),
                request.header("x-session").map(str::to_owned),
            )
        })
        .collect();
    assert_each_carries_its_own(&sent);
    assert_eq!(provider.request_headers().unwrap().get("X-Session"), None);
}

fn sse(chunks: &[Value]) -> Reply {
    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    events.push("data: [DONE]\n\n".into());
    Reply::Stream(events)
}

#[test]
fn streaming_assembles_text_and_tool_calls_split_across_events() {
    let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d}]});
    let server = Server::start(vec![
        sse(&[
            delta(json!({"role": "assistant", "content": "Let me "})),
            delta(json!({"content": "think."})),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "think", "arguments": ""}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"thou"}}]})),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "ght\": \"split\"}"}}]}),
            ),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
        ]),
        sse(&[
            delta(json!({"content": "All "})),
            delta(json!({"content": "done."})),
        ]),
    ]);
    let outcome = run(openai(&server, &[]), None, true, "go");
    assert!(outcome.result.success, "{:?}", outcome.result);
    assert_eq!(outcome.result.output, "All done.");
    let deltas: Vec<String> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::AssistantDelta { content } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Let me ", "think.", "All ", "done."]);
    let calls = outcome.session.history()[2].tool_calls.clone();
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_9", "think")
    );
    assert_eq!(calls[0].arguments.parse(), json!({"thought": "split"}));
    assert_eq!(outcome.session.facts().input_tokens, 9);
    assert_eq!(server.requests()[0].json()["stream"], true);
}

#[test]
fn a_429_is_retried_honouring_retry_after_and_then_succeeds() {
    let server = Server::start(vec![
        Reply::status(
            429,
            &[("retry-after", "0")],
            r#"{"error": {"message": "slow down"}}"#,
        ),
        text_reply("done"),
    ]);
    let outcome = run(openai(&server, &[]), None, false, "go");
    assert!(outcome.result.success);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_500_that_never_clears_exhausts_the_retries_with_one_line() {
    let server = Server::start(vec![Reply::status(
        500,
        &[("retry-after", "0")],
        r#"{"error": {"message": "upstream\nbroke"}}"#,
    )]);
    let outcome = run(openai(&server, &[]), None, false, "go");
    assert!(!outcome.result.success);
    let EndReason::ProviderError(error) = &outcome.result.reason else {
        panic!("{:?}", outcome.result.reason);
    };
    assert_eq!(
        (error.status(), error.retryable()),
        (Some(500), true),
        "the run's result keeps the status and that a retry could help"
    );
    assert_eq!(
        outcome.result.output,
        "the provider kept failing: HTTP 500 Internal Server Error after 3 retries: upstream broke"
    );
    assert_eq!(server.requests().len(), 4, "one attempt and three retries");
}

#[test]
fn a_malformed_response_and_a_client_error_are_one_line() {
    let server = Server::start(vec![Reply::status(
        200,
        &[("content-type", "application/json")],
        "{not json",
    )]);
    let outcome = run(openai(&server, &[]), None, false, "go");
    assert!(
        outcome
            .result
            .output
            .starts_with("malformed response from the provider (not JSON"),
        "{}",
        outcome.result.output
    );
    assert!(!outcome.result.output.contains('\n'));

    let server = Server::start(vec![Reply::status(
        401,
        &[],
        r#"{"error": {"message": "bad key"}}"#,
    )]);
    let outcome = run(openai(&server, &[]), None, false, "go");
    assert_eq!(
        outcome.result.output,
        "the provider refused the request: HTTP 401 Unauthorized: bad key"
    );
    assert_eq!(server.requests().len(), 1, "client errors are not retried");
}

#[test]
fn a_refused_connection_is_one_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = Arc::new(OpenAiProvider::new(OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: "m".into(),
        api_key: None,
        headers: Headers::default(),
        http: fast_http(),
    }));
    let outcome = run(provider, None, false, "go");
    assert_eq!(
        outcome.result.output,
        format!("cannot reach http://127.0.0.1:{port}/v1/chat/completions: connection refused (is the server running?)")
    );
}

#[test]
fn anthropic_requests_have_the_messages_api_shape() {
    let server = Server::start(vec![
        Reply::json(json!({"content": [
            {"type": "text", "text": "thinking"},
            {"type": "tool_use", "id": "toolu_1", "name": "think", "input": {"thought": "plan"}}
        ], "usage": {"input_tokens": 12, "output_tokens": 6}})),
        Reply::json(
            json!({"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 30, "output_tokens": 1}}),
        ),
    ]);
    let provider = Arc::new(AnthropicProvider::new(AnthropicConfig {
        base_url: server.url.clone(),
        model: "claude-test".into(),
        api_key: Some("ak-test".into()),
        max_tokens: 1024,
        http: fast_http(),
    }));
    assert!(provider.request_headers().is_none(), "no header surface");
    let outcome = run(provider, None, false, "hello");
    assert!(outcome.result.success, "{:?}", outcome.result);
    assert_eq!(outcome.session.facts().output_tokens, 7);
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("ak-test"));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    let first = requests[0].json();
    assert_eq!(
        (first["model"].as_str(), first["max_tokens"].as_u64()),
        (Some("claude-test"), Some(1024))
    );
    assert_eq!(first["system"], "be brief");
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": "hello"}]),
        "a lone text block goes as a plain string"
    );
    assert!(first["tools"][0]["input_schema"].is_object());
    let second = requests[1].json();
    assert_eq!(second["messages"][0]["content"], "hello");
    assert_eq!(
        second["messages"][1]["content"][0],
        json!({"type": "text", "text": "thinking"}),
        "several blocks stay blocks"
    );
    assert_eq!(
        second["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "think", "input": {"thought": "plan"}})
    );
    assert_eq!(
        second["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Thought recorded."}]})
    );
}

fn chimera(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    chimera_tests::cli::chimera(dir.path(), args, env, "")
}

#[test]
fn the_binary_runs_a_redacted_tool_calling_session_against_a_local_openai_server() {
    for stream in [false, true] {
        let (first, second) = if stream {
            let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d}]});
            (
                sse(&[delta(
                    json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash", "arguments": "{\"command\": \"echo token-tooloutput123456\"}"}}]}),
                )]),
                sse(&[delta(json!({"content": "done"}))]),
            )
        } else {
            (
                tool_call_reply(
                    "c1",
                    "bash",
                    json!({"command": "echo token-tooloutput123456"}),
                ),
                text_reply("done"),
            )
        };
        let server = Server::start(vec![first, second]);
        let base = format!("{}/v1", server.url);
        let mut args = vec![
            "run",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "M",
            "--api-key-env",
            "TEST_KEY",
            "--pack",
            "redactor",
            "--header",
            "X-Trace: sk-header-secret-4242",
            "--json",
        ];
        if stream {
            args.push("--stream");
        }
        args.push("my key is sk-prompt-secret-777");
        let output = chimera(&args, &[("TEST_KEY", "sk-bearer-key-000111")]);
        assert_eq!(output.code(), Some(0), "{}", output.stderr());
        let requests = server.requests();
        assert_eq!(
            requests.len(),
            2,
            "stream {stream}: {}\n{}",
            output.stdout(),
            output.stderr()
        );
        for request in &requests {
            let wire = format!("{:?} {}", request.headers, request.body);
            for secret in [
                "sk-prompt-secret-777",
                "token-tooloutput123456",
                "sk-header-secret-4242",
            ] {
                assert!(
                    !wire.contains(secret),
                    "{secret} on the wire (stream {stream})"
                );
            }
            assert_eq!(
                request.header("authorization"),
                Some("Bearer sk-bearer-key-000111")
            );
        }
        let stdout = output.stdout();
        assert!(
            stdout.contains(r#""type":"run_end","success":true,"output":"done""#),
            "{stdout}"
        );
        if stream {
            assert!(stdout.contains(r#""type":"assistant_delta""#));
        }
    }
}

#[test]
fn provider_errors_through_the_binary_are_one_line_with_exit_1_or_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let refused = chimera(
        &[
            "run",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "M",
            "hi",
        ],
        &[],
    );
    assert_eq!(refused.code(), Some(1));
    let stderr = refused.stderr();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");

    for (args, fragment) in [
        (
            vec!["run", "--provider", "openai", "--model", "M", "hi"],
            "set OPENAI_API_KEY",
        ),
        (
            vec!["run", "--provider", "openai", "--base-url", &base, "hi"],
            "--provider openai needs --model M",
        ),
        (
            vec![
                "run",
                "--provider",
                "openai",
                "--base-url",
                &base,
                "--model",
                "M",
                "--api-key-env",
                "NOPE_UNSET",
                "hi",
            ],
            "NOPE_UNSET: the variable is not set",
        ),
        (
            vec!["run", "--provider", "gemini", "--model", "M", "hi"],
            "unknown provider 'gemini'",
        ),
        (
            vec![
                "run",
                "--provider",
                "anthropic",
                "--model",
                "M",
                "--header",
                "A: b",
                "hi",
            ],
            "no per-request header surface",
        ),
    ] {
        let output = chimera(&args, &[]);
        assert_eq!(output.code(), Some(2), "{args:?}");
        let stderr = output.stderr();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(fragment), "{stderr}");
    }
}

/// One call straight to the provider (no loop): `Ok` with the streamed
/// text's length, or the error.
fn call(provider: &dyn Provider, stream: bool) -> Result<usize, ProviderError> {
    let messages = [Message::user("hi")];
    let kwargs = serde_json::Map::new();
    let call = ProviderCall {
        model: None,
        messages: &messages,
        tools: &[],
        kwargs: &kwargs,
        headers: None,
    };
    if stream {
        let mut text = 0;
        provider
            .stream(&call, &mut |delta| {
                if let StreamDelta::Text(piece) = delta {
                    text += piece.len();
                }
            })
            .map(|()| text)
    } else {
        provider.complete(&call).map(|r| r.content.len())
    }
}

fn anthropic(base_url: &str, http: HttpSettings) -> Arc<AnthropicProvider> {
    Arc::new(AnthropicProvider::new(AnthropicConfig {
        base_url: base_url.to_owned(),
        model: "claude-test".into(),
        api_key: Some("ak-anthropic-key-424242".into()),
        max_tokens: 64,
        http,
    }))
}

const MIB: u64 = 1 << 20;

/// A streamed chunk carrying `text`, as one event.
fn text_event(text: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}}]})
    )
}

#[test]
fn a_stream_longer_than_the_body_limit_is_refused_with_one_line_and_reading_stops_there() {
    let server = Server::start(vec![Reply::Generated {
        first: String::new(),
        repeat: text_event(&"x".repeat(1000)),
        bytes: 256 * MIB,
    }]);
    let provider = openai(&server, &[]);
    let error = call(&*provider, true).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the provider's stream exceeded the body limit of 64 MiB"
    );
    assert_eq!((error.status(), error.retryable()), (None, false));
    let sent = server.generated_bytes_sent();
    assert!(
        sent < 96 * MIB,
        "the client stopped reading near the limit, {sent} bytes went out"
    );
}

#[test]
fn the_body_limit_is_a_setting_and_bounds_plain_json_replies_too() {
    let small = HttpSettings {
        max_body_bytes: MIB,
        ..fast_http()
    };
    let server = Server::start(vec![Reply::Generated {
        first: String::new(),
        repeat: text_event("some text"),
        bytes: 2 * MIB,
    }]);
    let provider = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1", server.url),
        model: "m".into(),
        api_key: None,
        headers: Headers::default(),
        http: small,
    });
    assert_eq!(
        call(&provider, true).unwrap_err().to_string(),
        "the provider's stream exceeded the body limit of 1 MiB"
    );

    let big = "y".repeat(2 * MIB as usize);
    let server = Server::start(vec![Reply::json(json!({"content": [
        {"type": "text", "text": big}
    ]}))]);
    assert_eq!(
        call(&*anthropic(&server.url, small), false)
            .unwrap_err()
            .to_string(),
        "the provider's response exceeded the body limit of 1 MiB"
    );
    let fits = "y".repeat(1000);
    let server = Server::start(vec![Reply::json(json!({"content": [
        {"type": "text", "text": fits}
    ]}))]);
    assert_eq!(call(&*anthropic(&server.url, small), false).unwrap(), 1000);
}

#[test]
fn a_stream_with_one_overlong_line_is_refused_with_one_line() {
    let server = Server::start(vec![Reply::Generated {
        first: "data: ".into(),
        repeat: "x".repeat(1024),
        bytes: 8 * MIB,
    }]);
    let outcome = run(openai(&server, &[]), None, true, "go");
    assert!(!outcome.result.success);
    assert_eq!(outcome.result.reason.to_string(), "provider_error");
    assert_eq!(
        outcome.result.output,
        "a line of the provider's stream exceeded the line limit of 1 MiB"
    );
}

#[test]
fn a_stream_that_carries_no_events_fails_instead_of_succeeding_empty() {
    let server = Server::start(vec![Reply::Stream(vec![
        ": keep-alive\n\n".into(),
        "event: ping\n\n".into(),
    ])]);
    let outcome = run(openai(&server, &[]), None, true, "go");
    assert!(!outcome.result.success);
    assert_eq!(outcome.result.reason.to_string(), "provider_error");
    assert_eq!(outcome.result.output, "the stream carried no events");

    let server = Server::start(vec![text_reply("not a stream")]);
    assert_eq!(
        call(&*openai(&server, &[]), true).unwrap_err().to_string(),
        "the stream carried no events (the response was application/json, not text/event-stream)"
    );
}

#[test]
fn streamed_lines_may_end_with_a_bare_carriage_return() {
    let event = |text: &str| {
        format!(
            "data: {}\r\r",
            json!({"choices": [{"index": 0, "delta": {"content": text}}]})
        )
    };
    let server = Server::start(vec![Reply::Stream(vec![
        event("carriage "),
        event("returns"),
        "data: [DONE]\r\r".into(),
    ])]);
    let outcome = run(openai(&server, &[]), None, true, "go");
    assert!(outcome.result.success, "{:?}", outcome.result);
    assert_eq!(outcome.result.output, "carriage returns");
}

#[test]
fn a_redirect_is_refused_and_the_server_it_points_at_hears_nothing() {
    let elsewhere = Server::start(vec![text_reply("caught the key")]);
    let location = format!("{}/v1/chat/completions", elsewhere.url);
    for stream in [false, true] {
        let server = Server::start(vec![Reply::redirect(302, &location)]);
        let provider = openai(&server, &[("X-Api-Token", "tok-header-secret-55")]);
        let error = call(&*provider, stream).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "the provider answered HTTP 302 Found, a redirect to {location}; redirects are \
                 not followed for API calls: point the base URL at the final address"
            ),
            "stream {stream}"
        );
        assert_eq!((error.status(), error.retryable()), (Some(302), false));
        assert_eq!(server.requests().len(), 1, "asked once, not retried");
    }
    let server = Server::start(vec![Reply::redirect(307, &elsewhere.url)]);
    let error = call(&*anthropic(&server.url, fast_http()), false).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the provider answered HTTP 307 Temporary Redirect, a redirect to "),
        "{error}"
    );
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect target received {:?}",
        elsewhere.requests()
    );
}

#[test]
fn an_error_body_that_echoes_the_key_is_shown_with_the_key_masked() {
    let server = Server::start(vec![Reply::status(
        401,
        &[],
        r#"{"error": {"message": "Incorrect API key provided: sk-bearer-key-000111"}}"#,
    )]);
    let error = call(&*openai(&server, &[]), false).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the provider refused the request: HTTP 401 Unauthorized: Incorrect API key provided: ***"
    );
    assert_eq!((error.status(), error.retryable()), (Some(401), false));

    let server = Server::start(vec![Reply::status(
        403,
        &[],
        "echo: x-api-key=ak-anthropic-key-424242 and a custom secret tok-header-secret-55",
    )]);
    let error = call(&*anthropic(&server.url, fast_http()), false).unwrap_err();
    assert!(!error.to_string().contains("ak-anthropic"), "{error}");

    let server = Server::start(vec![Reply::status(
        500,
        &[("retry-after", "0")],
        "upstream saw Authorization: Bearer sk-bearer-key-000111",
    )]);
    let provider = openai(&server, &[("X-Api-Token", "tok-header-secret-55")]);
    let error = call(&*provider, true).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the provider kept failing: HTTP 500 Internal Server Error after 3 retries: \
         upstream saw Authorization: ***"
    );
    assert_eq!((error.status(), error.retryable()), (Some(500), true));
}

#[test]
fn a_base_url_with_userinfo_is_shown_without_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("http://user:secret@127.0.0.1:{port}/v1"),
        model: "m".into(),
        api_key: None,
        headers: Headers::default(),
        http: fast_http(),
    });
    let error = call(&provider, false).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "cannot reach http://***@127.0.0.1:{port}/v1/chat/completions: connection refused \
             (is the server running?)"
        )
    );
    assert!(error.retryable(), "a refused connection may clear");
    let error = call(
        &*anthropic(&format!("http://user:secret@127.0.0.1:{port}"), fast_http()),
        false,
    )
    .unwrap_err();
    assert!(!error.to_string().contains("secret"), "{error}");
}

#[test]
fn the_binary_refuses_a_redirect_with_exit_1_and_one_line_naming_it() {
    let elsewhere = Server::start(vec![text_reply("caught the key")]);
    let location = format!("{}/v1/chat/completions", elsewhere.url);
    let server = Server::start(vec![Reply::redirect(302, &location)]);
    let base = format!("{}/v1", server.url);
    for stream in [false, true] {
        let mut args = vec![
            "run",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "M",
            "--api-key-env",
            "TEST_KEY",
            "--header",
            "X-Api-Token: tok-header-secret-55",
        ];
        if stream {
            args.push("--stream");
        }
        args.push("hi");
        let output = chimera(&args, &[("TEST_KEY", "sk-bearer-key-000111")]);
        assert_eq!(output.code(), Some(1), "{}", output.stderr());
        let line = output.error_line();
        assert!(
            line.contains(&format!(
                "HTTP 302 Found, a redirect to {location}; redirects are not followed"
            )),
            "{line}"
        );
    }
    assert_eq!(server.requests().len(), 2);
    assert!(elsewhere.requests().is_empty());
}
