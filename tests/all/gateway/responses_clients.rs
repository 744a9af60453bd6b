//! Real clients on the Responses wire through `chimera serve` with packs
//! loaded: the `openai` Python SDK (`responses.create`, `responses.stream`)
//! and the `OpenAI` Agents SDK on its default model (`Runner.run`,
//! `Runner.run_streamed`) each do their tool round trip; a pack's refusal
//! of the call is what the agent shows, and the tool never runs; a veto of
//! the answer shows the gate's notice, never the text it withheld.

use super::{serve_with, Gateway};
use chimera_tests::clients::{python_script, RoundTrip};
use chimera_tests::http::{tool_model, Reply, Request, Server, ANSWER_PREFIX};
use chimera_tests::responses::{message, results, scripted, ENCRYPTED_REASONING};
use serde_json::{json, Value};

/// The key every client is given (the gateway takes any: no client keys
/// are configured).
const KEY: &str = "sk-client-own-key-0123456789";

/// What the `secret` tool returns for the word the model sends.
const TOOL_RESULT: &str = "OCELOT-6";

/// What content-safety finds in an answer (an email address).
const ADDRESS: &str = "bob@example.com";

/// The notice content-safety's veto of an answer holding [`ADDRESS`] shows.
const NOTICE: &str = "Content blocked: contains sensitive information (email).";

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

/// One real client on the Responses wire, and how it is driven.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// The `openai` SDK, `client.responses.create(...)`, by hand.
    OpenAiCreate,
    /// The `openai` SDK, `client.responses.stream(...)`, by hand.
    OpenAiStream,
    /// The Agents SDK's default model, `Runner.run`.
    AgentsRun,
    /// The Agents SDK's default model, `Runner.run_streamed`.
    AgentsStream,
}

impl Sdk {
    /// Every client.
    const ALL: [Sdk; 4] = [
        Sdk::OpenAiCreate,
        Sdk::OpenAiStream,
        Sdk::AgentsRun,
        Sdk::AgentsStream,
    ];

    /// Its script (in `tests/support/clients`) and the script's mode.
    fn script(self) -> (&'static str, &'static str) {
        match self {
            Sdk::OpenAiCreate => ("openai_responses.py", "create"),
            Sdk::OpenAiStream => ("openai_responses.py", "stream"),
            Sdk::AgentsRun => ("agents_responses.py", "run"),
            Sdk::AgentsStream => ("agents_responses.py", "stream"),
        }
    }

    /// Whether it asks for an event stream.
    fn streams(self) -> bool {
        matches!(self, Sdk::OpenAiStream | Sdk::AgentsStream)
    }

    /// Whether it asks for reasoning (the Agents SDK's default model is a
    /// reasoning model) and so sends the model's reasoning items back.
    fn reasons(self) -> bool {
        matches!(self, Sdk::AgentsRun | Sdk::AgentsStream)
    }
}

/// One client run through the gateway: what it printed, the requests
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

    /// The tool outputs every request carried.
    fn tool_outputs(&self) -> Vec<String> {
        self.bodies()
            .iter()
            .flat_map(|body| results(body).0)
            .collect()
    }
}

/// `sdk`'s run through a gateway with `packs` on the `OpenAI` wires (every
/// model name) in front of a loopback model answering `model`, or `None`
/// when the Python SDKs cannot be had.
fn through_gateway(sdk: Sdk, model: Reply, packs: &[&str]) -> Option<Run> {
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
    let (script, mode) = sdk.script();
    let trip = python_script(script, &format!("http://{}", gateway.address), KEY, &[mode])?;
    drop(gateway);
    let requests = upstream.requests();
    let what = format!(
        "{sdk:?} through the gateway: stdout {:?}\nstderr {}\nrequests {:#?}",
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

/// The loopback model for the round trip: it asks for `secret` with the
/// word `ocelot`, then answers with [`ANSWER_PREFIX`] and the tool's
/// output.
fn secret_model() -> Reply {
    tool_model("secret", json!({"word": "ocelot"}))
}

/// Checks `sdk`'s round trip through the gateway with [`PACKS`]: it
/// succeeded, its answer is the model's holding the tool's result, the
/// result reached the model, every request went to `/v1/responses`
/// (streamed when the client streams) and none carried the client's key,
/// and the model's encrypted reasoning came back as it was sent.
fn assert_round_trip(sdk: Sdk) {
    let Some(run) = through_gateway(sdk, secret_model(), PACKS) else {
        return;
    };
    let what = &run.what;
    assert!(run.trip.success, "the client failed: {what}");
    let answer = run.trip.answer();
    assert!(
        answer.contains(ANSWER_PREFIX) && answer.contains(TOOL_RESULT),
        "the answer is not the model's with the tool's result: {what}"
    );
    assert!(
        run.tool_outputs().iter().any(|o| o.contains(TOOL_RESULT)),
        "the tool's result never reached the model: {what}"
    );
    assert!(run.requests.len() >= 2, "a call, then an answer: {what}");
    let bodies = run.bodies();
    if sdk.reasons() {
        assert!(!bodies[0]["reasoning"].is_null(), "{what}");
        assert!(
            bodies[1]["input"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|item| item["encrypted_content"] == ENCRYPTED_REASONING),
            "the model's encrypted reasoning came back through the client: {what}"
        );
    }
    for (request, body) in run.requests.iter().zip(bodies) {
        assert_eq!(
            (request.method.as_str(), request.route()),
            ("POST", "/v1/responses"),
            "{what}"
        );
        assert_eq!(
            body["stream"] == true,
            sdk.streams(),
            "streamed as the client asked: {what}"
        );
        assert!(
            !format!("{:?}", request.headers).contains(KEY),
            "the client's key reached the upstream: {what}"
        );
    }
}

#[test]
fn the_openai_sdk_does_its_responses_tool_round_trip_through_the_gateway_created_and_streamed() {
    assert_round_trip(Sdk::OpenAiCreate);
    assert_round_trip(Sdk::OpenAiStream);
}

#[test]
fn the_agents_sdks_default_model_does_its_tool_round_trip_through_the_gateway_streamed_and_not() {
    assert_round_trip(Sdk::AgentsRun);
    assert_round_trip(Sdk::AgentsStream);
}

#[test]
fn a_packs_block_of_the_agents_call_is_its_output_and_the_tool_never_runs() {
    let packs = ["--pack", r#"plan-gate={"gated_tools":["secret"]}"#];
    for sdk in [Sdk::AgentsRun, Sdk::AgentsStream] {
        let Some(run) = through_gateway(sdk, secret_model(), &packs) else {
            return;
        };
        let what = &run.what;
        assert!(run.trip.success, "the agent run ends normally: {what}");
        assert!(
            run.trip
                .answer()
                .starts_with("Blocked by interceptor: plan-gate"),
            "the refusal is the agent's output: {what}"
        );
        assert!(
            run.bodies().iter().all(|body| results(body).1 == 0),
            "the refused call never ran: {what}"
        );
        assert_eq!(run.requests.len(), 1, "the refusal ends the turn: {what}");
        assert!(!run.trip.answer().contains(TOOL_RESULT), "{what}");
    }
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
                    "call_id": "call_chimera_01", "name": "secret",
                    "arguments": r#"{"word":"ocelot"}"#}),
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
fn a_veto_of_the_answer_shows_every_client_the_notice_never_the_address() {
    let packs = [
        "--pack",
        r#"content-safety={"action":"block","scan_llm_responses":true}"#,
    ];
    for sdk in Sdk::ALL {
        let Some(run) = through_gateway(sdk, leaking_model(), &packs) else {
            return;
        };
        let what = &run.what;
        assert!(run.trip.success, "the client ends normally: {what}");
        assert!(
            run.tool_outputs().iter().any(|o| o.contains(TOOL_RESULT)),
            "the veto is of the answer after the round trip: {what}"
        );
        let shown = &run.trip.stdout;
        assert!(shown.contains(NOTICE), "the notice is shown: {what}");
        assert!(
            !shown.contains('@') && !shown.contains("example.com"),
            "the address reached the client: {what}"
        );
    }
}
