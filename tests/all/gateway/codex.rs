//! The Codex CLI (`codex exec`, whose only wire is the Responses API)
//! through `chimera serve` with packs loaded, against a loopback Responses
//! model that proposes a call of Codex's shell tool (`exec_command`, a
//! `function` tool): Codex runs the command in its working directory and
//! the model reads its output (and its own encrypted reasoning, which Codex
//! sends back, as it was); a `tool_call` pack's block of that call
//! reaches Codex as the refusal line in the call's place, so the command
//! never runs and Codex ends its turn showing why; and what the redactor
//! changed, in Codex's prompt and in its command's output, is what the
//! model receives.

use super::{serve_with, Gateway};
use chimera_tests::codex::{self, Run};
use chimera_tests::http::{tool_model, Request, Server, ANSWER_PREFIX};
use chimera_tests::responses::{results, ENCRYPTED_REASONING};
use serde_json::{json, Value};

/// The key Codex is given (the gateway takes any: no client keys are
/// configured; the upstream gets the gateway's own).
const KEY: &str = "sk-codex-own-key-0123456789";

/// Codex's shell tool, as it offers it.
const SHELL: &str = "exec_command";

/// The command the model proposes: a side effect in Codex's working
/// directory, and a line only running it prints.
const COMMAND: &str = "touch ran.txt && echo chimera-$((6*7))";

/// What the command leaves in the working directory.
const SIDE_EFFECT: &str = "ran.txt";

/// What only running the command prints.
const PRINTED: &str = "chimera-42";

/// What the redactor's default pattern finds (an API key), and what it
/// leaves in its place.
const SECRET: &str = "sk-ABCDEFGH12345678";
const REDACTED: &str = "[redacted]";

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

/// The gateway in front of `upstream` on the `OpenAI` wires (chat
/// completions and Responses), every model name, with `packs`.
fn gateway(upstream: &Server, packs: &[&str]) -> Gateway {
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
    serve_with(&args)
}

/// One `codex exec` turn with `prompt` through the gateway with `packs`,
/// the model proposing `command` to Codex's shell tool (then answering
/// with [`ANSWER_PREFIX`] and the command's output once it has it): what
/// Codex did, and the requests the model received. `None` when Codex
/// cannot be had here.
fn turn(prompt: &str, command: &str, packs: &[&str]) -> Option<(Run, Vec<Request>)> {
    let upstream = Server::start_concurrent(vec![tool_model(SHELL, json!({ "cmd": command }))]);
    let gateway = gateway(&upstream, packs);
    let run = codex::exec(&format!("http://{}/v1", gateway.address), KEY, prompt)?;
    drop(gateway);
    Some((run, upstream.requests()))
}

/// The JSON bodies of the requests.
fn bodies(requests: &[Request]) -> Vec<Value> {
    requests
        .iter()
        .filter_map(|r| serde_json::from_slice(&r.bytes).ok())
        .collect()
}

/// What Codex printed and what the model received, for a failure message.
fn describe(run: &Run, requests: &[Request]) -> String {
    let routes: Vec<String> = requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    format!("{}\nrequests upstream: {routes:?}", run.transcript())
}

/// Every request went to the Responses route, and the first offered Codex's
/// shell tool (so the model's call was one Codex can make).
fn assert_responses_offering_the_shell(requests: &[Request], what: &str) {
    assert!(!requests.is_empty(), "no request reached the model: {what}");
    assert!(
        requests
            .iter()
            .all(|r| r.method == "POST" && r.route() == "/v1/responses"),
        "Codex speaks Responses alone: {what}"
    );
    let first = requests[0].json();
    assert!(
        first["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == SHELL)),
        "Codex offers its shell tool as {SHELL:?} (tools: {:?}): {what}",
        first["tools"]
            .as_array()
            .map(|tools| tools.iter().map(|t| t["name"].clone()).collect::<Vec<_>>())
    );
}

#[test]
fn codex_runs_the_shell_command_the_model_proposes_through_the_gateway_and_prints_the_answer() {
    let Some((run, requests)) = turn(
        "Run the shell command that prints the marker, then tell me what it printed.",
        COMMAND,
        PACKS,
    ) else {
        return;
    };
    let what = describe(&run, &requests);
    assert!(run.success, "Codex finishes its turn: {what}");
    assert_responses_offering_the_shell(&requests, &what);
    assert!(
        run.work.join(SIDE_EFFECT).is_file(),
        "the command ran in Codex's working directory: {what}"
    );
    let outputs: Vec<String> = bodies(&requests)
        .iter()
        .flat_map(|body| results(body).0)
        .collect();
    assert!(
        outputs.iter().any(|output| output.contains(PRINTED)),
        "the command's output reached the model as a function_call_output ({outputs:?}): {what}"
    );
    assert!(
        run.stdout.contains(ANSWER_PREFIX) && run.stdout.contains(PRINTED),
        "Codex's last message is the model's answer holding the output: {what}"
    );
    assert!(
        bodies(&requests).iter().skip(1).any(|body| {
            body["input"].as_array().is_some_and(|items| {
                items.iter().any(|item| {
                    item["type"] == "reasoning" && item["encrypted_content"] == ENCRYPTED_REASONING
                })
            })
        }),
        "the model's encrypted reasoning came back to it through Codex as it was: {what}"
    );
    assert!(
        requests.iter().all(|r| {
            r.header("authorization") == Some("Bearer the-gateways-key")
                && !format!("{:?}", r.headers).contains(KEY)
        }),
        "the model gets the gateway's key, never Codex's: {what}"
    );
}

#[test]
fn a_packs_block_of_codexs_shell_call_is_refused_and_shown_and_the_command_never_runs() {
    let packs = ["--pack", r#"plan-gate={"gated_tools":["exec_command"]}"#];
    let Some((run, requests)) = turn(
        "Run the shell command that prints the marker, then tell me what it printed.",
        COMMAND,
        &packs,
    ) else {
        return;
    };
    let what = describe(&run, &requests);
    assert!(run.success, "Codex ends its turn normally: {what}");
    assert_responses_offering_the_shell(&requests, &what);
    assert!(
        !run.work.join(SIDE_EFFECT).exists(),
        "the refused command never ran: {what}"
    );
    assert!(
        run.stdout.contains("Blocked by interceptor: plan-gate") && run.stdout.contains(SHELL),
        "the refusal is Codex's last message: {what}"
    );
    assert!(
        !run.stdout.contains(PRINTED) && !run.stderr.contains(PRINTED),
        "nothing the command prints was shown: {what}"
    );
    assert_eq!(
        requests.len(),
        1,
        "the refusal ends the turn: no output of the command went back: {what}"
    );
    assert!(
        bodies(&requests).iter().all(|body| results(body).1 == 0),
        "no function_call_output reached the model: {what}"
    );
}

#[test]
fn the_redactors_change_of_codexs_prompt_and_of_its_commands_output_is_what_the_model_receives() {
    let prompt = format!("My key is {SECRET}. Run the command that prints the other one.");
    // The key is printed only when the command runs: its text is not in
    // the call (whose arguments the redactor would scrub too).
    let command = format!(
        "printf 'sk-%s\\n' {}",
        SECRET.strip_prefix("sk-").expect("an sk- key")
    );
    let Some((run, requests)) = turn(&prompt, &command, &["--pack", "redactor"]) else {
        return;
    };
    let what = describe(&run, &requests);
    assert!(run.success, "Codex finishes its turn: {what}");
    assert_responses_offering_the_shell(&requests, &what);
    assert!(
        run.stderr.contains(SECRET),
        "Codex ran the command and saw the key it prints: {what}"
    );
    assert_eq!(requests.len(), 2, "the call, then the answer: {what}");
    for request in &requests {
        assert!(
            !request.body.contains(SECRET),
            "no byte of the key reaches the model: {}\n{what}",
            request.body
        );
    }
    let bodies = bodies(&requests);
    let asked = prompt.replace(SECRET, REDACTED);
    for body in &bodies {
        let user_texts: Vec<&str> = body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["role"] == "user")
            .flat_map(|item| item["content"].as_array().into_iter().flatten())
            .filter_map(|part| part["text"].as_str())
            .collect();
        assert!(
            user_texts.contains(&asked.as_str()),
            "the prompt reaches the model as the redactor left it ({user_texts:?}): {what}"
        );
    }
    let (outputs, _) = results(&bodies[1]);
    assert!(
        outputs.len() == 1 && outputs[0].contains(REDACTED),
        "the command's output reaches the model as the redactor left it ({outputs:?}): {what}"
    );
}
