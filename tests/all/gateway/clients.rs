//! Real clients through `chimera serve`, with packs loaded: each does its
//! tool round trip against the loopback model with the gateway between
//! them (Claude Code with its own tools and with a guarded MCP server that
//! has instructions, the `OpenAI` Agents SDK, `LangChain` and the Vercel AI SDK
//! on both wires, the openai and anthropic SDKs streamed and not), and a
//! pack's block of Claude Code's `Bash` call is refused and shown.

use super::{serve_with, Gateway};
use chimera_tests::clients::{Client, RoundTrip};
use chimera_tests::http::{tool_results, Server, ANSWER_PREFIX};

/// The key every client is given (the gateway takes any: no client keys
/// are configured).
const KEY: &str = "sk-client-own-key-0123456789";

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

/// The gateway in front of `upstream` on both wires, every model name,
/// with `packs`.
fn gateway(upstream: &Server, packs: &[&str]) -> Gateway {
    let chat = format!("{}/v1", upstream.url);
    let mut args = vec![
        "--upstream",
        chat.as_str(),
        "--model",
        "*",
        "--upstream-key-env",
        "GATEWAY_UPSTREAM_KEY",
        "--anthropic-upstream",
        upstream.url.as_str(),
        "--anthropic-model",
        "*",
        "--anthropic-key-env",
        "GATEWAY_UPSTREAM_KEY",
    ];
    args.extend(packs);
    serve_with(&args)
}

/// `client`'s round trip through the gateway with `packs`: what it
/// printed, and the loopback model's server.
fn through_gateway(client: Client, packs: &[&str]) -> Option<(RoundTrip, Server)> {
    let upstream = Server::start_concurrent(vec![client.upstream()]);
    let gateway = gateway(&upstream, packs);
    let base = format!("http://{}", gateway.address);
    let trip = client.run(&base, KEY)?;
    drop(gateway);
    Some((trip, upstream))
}

/// Runs `client` through the gateway and checks its round trip: it
/// succeeded, its answer is the model's holding the tool's result, the
/// result reached the model, and the model never saw the client's key.
fn assert_round_trip(client: Client) {
    let Some((trip, upstream)) = through_gateway(client, PACKS) else {
        return;
    };
    let requests = upstream.requests();
    let call = client.tool_call();
    let what = format!(
        "{} through the gateway: stdout {:?}\nstderr {}\nrequests {:?}",
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
        "the answer is not the model's with the tool's result: {what}"
    );
    let results: Vec<String> = requests
        .iter()
        .filter_map(|r| serde_json::from_slice(&r.bytes).ok())
        .flat_map(|body| tool_results(&body))
        .collect();
    assert!(
        results.iter().any(|result| result.contains(call.result)),
        "the tool's result never reached the model ({results:?}): {what}"
    );
    assert!(
        requests
            .iter()
            .all(|r| !format!("{:?}", r.headers).contains(KEY)),
        "the client's key reached the upstream: {what}"
    );
}

#[test]
fn claude_code_runs_its_bash_tool_through_the_gateway_and_prints_the_answer() {
    assert_round_trip(Client::ClaudeCode);
}

#[test]
fn claude_code_with_an_mcp_server_that_has_instructions_runs_its_tool_through_the_gateway() {
    assert_round_trip(Client::ClaudeCodeMcp);
}

#[test]
fn a_packs_block_of_claude_codes_bash_call_is_refused_and_shown() {
    let packs = ["--pack", r#"plan-gate={"gated_tools":["Bash"]}"#];
    let Some((trip, upstream)) = through_gateway(Client::ClaudeCode, &packs) else {
        return;
    };
    let what = format!("stdout {:?}\nstderr {}", trip.stdout, trip.stderr);
    assert!(trip.success, "Claude Code ends normally: {what}");
    assert!(
        trip.stdout.contains("Blocked by interceptor: plan-gate"),
        "the refusal is what Claude Code shows: {what}"
    );
    assert!(
        upstream
            .requests()
            .iter()
            .filter_map(|r| serde_json::from_slice(&r.bytes).ok())
            .all(|body| tool_results(&body).is_empty()),
        "the refused call never ran: {what}"
    );
}

#[test]
fn the_openai_agents_sdk_does_its_tool_round_trip_through_the_gateway() {
    assert_round_trip(Client::OpenAiAgents);
}

#[test]
fn langchain_does_its_tool_round_trip_through_the_gateway_on_both_wires() {
    assert_round_trip(Client::LangChainOpenAi);
    assert_round_trip(Client::LangChainAnthropic);
}

#[test]
fn the_vercel_ai_sdk_does_its_tool_round_trip_through_the_gateway_on_both_wires() {
    assert_round_trip(Client::VercelOpenAi);
    assert_round_trip(Client::VercelAnthropic);
}

#[test]
fn the_openai_and_anthropic_sdks_do_their_tool_round_trips_through_the_gateway_streamed_and_not() {
    for client in [
        Client::OpenAiSdk,
        Client::OpenAiSdkStreamed,
        Client::AnthropicSdk,
        Client::AnthropicSdkStreamed,
    ] {
        assert_round_trip(client);
    }
}
