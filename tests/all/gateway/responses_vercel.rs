//! The Vercel AI SDK on the Responses wire through `chimera serve` with
//! packs loaded: `openai('gpt-4.1-mini')` (the provider's default model,
//! which speaks `POST /v1/responses`) does its tool round trip with
//! `generateText` and with `streamText` (its whole stream read, an `error`
//! part or an empty text a failure), every request reaching the model on
//! `/v1/responses` and the tool's output reaching it as a
//! `function_call_output`; and content-safety's redaction of an address in
//! the streamed answer is what `streamText` shows, never the address.

use super::{serve_with, Gateway};
use chimera_tests::clients::{npm_clients, run_bounded, RoundTrip};
use chimera_tests::http::{tool_model, Reply, Request, Server, ANSWER_PREFIX};
use chimera_tests::responses::{message, results, scripted};
use chimera_tests::{publish, workspace_root};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The key the client is given (the gateway takes any: no client keys
/// are configured).
const KEY: &str = "sk-client-own-key-0123456789";

/// What the `secret` tool returns for the word the model sends.
const TOOL_RESULT: &str = "OCELOT-6";

/// The call id the loopback model gives its `function_call`.
const CALL_ID: &str = "call_chimera_01";

/// What content-safety finds in an answer (an email address).
const ADDRESS: &str = "bob@example.com";

/// What content-safety's redaction leaves in a match's place.
const REDACTED: &str = "[REDACTED]";

/// Packs a deployment would load: a redactor, content safety (which also
/// judges every proposed call behind the gateway) and prompt injection.
const PACKS: &[&str] = &[
    "--pack",
    "redactor",
    "--pack",
    "content-safety",
    "--pack",
    "prompt-injection",
];

/// How the script drives the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `generateText`.
    Generate,
    /// `streamText`, its whole stream read.
    Stream,
}

impl Mode {
    /// The script's argument for it.
    fn arg(self) -> &'static str {
        match self {
            Mode::Generate => "generate",
            Mode::Stream => "stream",
        }
    }
}

/// Runs `tests/support/clients/vercel_responses.mjs` against `base_url`
/// in `mode` (copied beside the npm clients once per run, where Node
/// resolves its imports), with a cleared environment and a scratch `HOME`
/// and working directory, bounded in time; `None` when the npm clients
/// cannot be had.
fn vercel_responses(base_url: &str, mode: Mode) -> Option<RoundTrip> {
    static COPIED: OnceLock<PathBuf> = OnceLock::new();
    let dir = npm_clients()?;
    let script = COPIED.get_or_init(|| {
        let source = workspace_root().join("tests/support/clients/vercel_responses.mjs");
        let source = std::fs::read(source).expect("the Vercel Responses script");
        publish(dir, "vercel_responses.mjs", &source)
    });
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path().join("home");
    let work = scratch.path().join("work");
    for place in [&home, &work] {
        std::fs::create_dir_all(place).expect("a scratch directory");
    }
    let mut command = Command::new("node");
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .current_dir(&work)
        .stdin(Stdio::null())
        .arg(script)
        .args([base_url, KEY, mode.arg()]);
    Some(run_bounded(command))
}

/// One run through the gateway: what the client printed, the requests
/// the loopback model saw, and both in a line for failures.
struct Run {
    trip: RoundTrip,
    requests: Vec<Request>,
    what: String,
}

impl Run {
    /// The request bodies the model saw, as JSON.
    fn bodies(&self) -> Vec<Value> {
        self.requests
            .iter()
            .map(|r| serde_json::from_slice(&r.bytes).unwrap_or(Value::Null))
            .collect()
    }
}

/// The script's run in `mode` through a gateway with `packs` on the
/// `OpenAI` wires (every model name) in front of a loopback model
/// answering `model`, or `None` when the npm clients cannot be had.
fn through_gateway(mode: Mode, model: Reply, packs: &[&str]) -> Option<Run> {
    let upstream = Server::start_concurrent(vec![model]);
    let base = format!("{}/v1", upstream.url);
    let mut args = vec![
        "--upstream",
        base.as_str(),
        "--model",
        "*",
        "--upstream-key-env",
        "GATEWAY_UPSTREAM_KEY",
    ];
    args.extend(packs);
    let gateway: Gateway = serve_with(&args);
    let trip = vercel_responses(&format!("http://{}", gateway.address), mode)?;
    drop(gateway);
    let requests = upstream.requests();
    let what = format!(
        "Vercel AI SDK ({}) through the gateway: stdout {:?}\nstderr {}\nrequests {:#?}",
        mode.arg(),
        trip.stdout,
        trip.stderr,
        requests
            .iter()
            .map(|r| format!("{} {} {}", r.method, r.path, r.body))
            .collect::<Vec<_>>()
    );
    Some(Run {
        trip,
        requests,
        what,
    })
}

/// Checks what every round trip shows: the client succeeded, it made a
/// call then an answer, every request reached the model as `POST
/// /v1/responses` (streamed as `mode` asks) without the client's key, and
/// the tool's output reached it as the `function_call_output` of the
/// model's call.
fn assert_round_trip(run: &Run, mode: Mode) {
    let what = &run.what;
    assert!(run.trip.success, "the client failed: {what}");
    assert_eq!(run.requests.len(), 2, "a call, then an answer: {what}");
    for (request, body) in run.requests.iter().zip(run.bodies()) {
        assert_eq!(
            (request.method.as_str(), request.route()),
            ("POST", "/v1/responses"),
            "{what}"
        );
        assert_eq!(
            body["stream"] == true,
            mode == Mode::Stream,
            "streamed as the client asked: {what}"
        );
        assert!(
            !format!("{:?}", request.headers).contains(KEY),
            "the client's key reached the upstream: {what}"
        );
    }
    let last = &run.bodies()[1];
    assert_eq!(
        results(last).0,
        [TOOL_RESULT],
        "the tool's output is the answer request's last input: {what}"
    );
    let output = last["input"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["type"] == "function_call_output"))
        .unwrap_or_else(|| panic!("no function_call_output: {what}"));
    assert_eq!(output["call_id"], CALL_ID, "the model's call id: {what}");
}

#[test]
fn generate_text_does_its_responses_tool_round_trip_through_the_gateway() {
    let model = tool_model("secret", json!({"word": "ocelot"}));
    let Some(run) = through_gateway(Mode::Generate, model, PACKS) else {
        return;
    };
    assert_round_trip(&run, Mode::Generate);
    assert_eq!(
        run.trip.answer(),
        format!("{ANSWER_PREFIX}{TOOL_RESULT}"),
        "the model's answer: {}",
        run.what
    );
}

#[test]
fn stream_text_does_its_responses_tool_round_trip_through_the_gateway_with_no_error_part() {
    let model = tool_model("secret", json!({"word": "ocelot"}));
    let Some(run) = through_gateway(Mode::Stream, model, PACKS) else {
        return;
    };
    assert_round_trip(&run, Mode::Stream);
    assert_eq!(
        run.trip.answer(),
        format!("{ANSWER_PREFIX}{TOOL_RESULT}"),
        "the model's answer: {}",
        run.what
    );
}

/// A loopback model that asks for `secret`, then answers with the tool's
/// output and [`ADDRESS`].
fn leaking_model() -> Reply {
    Reply::respond(|request| {
        let body = request.json();
        let model = body["model"].as_str().unwrap_or("m");
        let (outputs, _) = results(&body);
        let items = if outputs.is_empty() {
            vec![
                message("msg_chimera_01", "I will use the tool."),
                json!({"id": "fc_chimera_01", "type": "function_call", "status": "completed",
                    "call_id": CALL_ID, "name": "secret", "arguments": r#"{"word":"ocelot"}"#}),
            ]
        } else {
            let text = format!(
                "{ANSWER_PREFIX}{}. Mail it to {ADDRESS} today.",
                outputs.join("\n")
            );
            vec![message("msg_chimera_02", &text)]
        };
        scripted(model, &items, body["stream"] == true)
    })
}

#[test]
fn content_safetys_redaction_of_an_address_in_the_streamed_answer_is_what_stream_text_shows() {
    let packs = [
        "--pack",
        r#"content-safety={"action":"redact","scan_llm_responses":true}"#,
    ];
    let Some(run) = through_gateway(Mode::Stream, leaking_model(), &packs) else {
        return;
    };
    assert_round_trip(&run, Mode::Stream);
    let what = &run.what;
    assert_eq!(
        run.trip.answer(),
        format!("{ANSWER_PREFIX}{TOOL_RESULT}. Mail it to {REDACTED} today."),
        "the answer with the address redacted: {what}"
    );
    assert!(
        !run.trip.stdout.contains('@') && !run.trip.stdout.contains("example.com"),
        "the address reached the client: {what}"
    );
}
