//! What the gateway keeps and bounds between and around requests:
//! conversations (and so budgets) across requests, its `[serve]`
//! configuration as the README shows it, the audit log of its requests,
//! the header cap and the upstream timeout.

use super::{chat_with, costly_upstream, post_chat, serve, started, user, Gateway};
use chimera_tests::chimera_bin;
use chimera_tests::http::{Reply, Server};
use chimera_tests::serve::Served;
use chimera_tests::slow_http::SlowServer;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// A chat-completions request to model `m` saying `text`, with `headers`.
fn chat_as(gateway: &Gateway, headers: &[&str], text: &str) -> (u16, Value) {
    chat_with(gateway, headers, &user(text))
}

#[test]
fn a_token_budget_spans_the_requests_of_one_conversation_and_no_other() {
    let upstream = costly_upstream("ok");
    let gateway = serve(&upstream, &["--pack", r#"token-budget={"max_tokens":100}"#]);
    let three = |headers: &[&str]| -> Vec<u16> {
        (0..3).map(|_| chat_as(&gateway, headers, "hi").0).collect()
    };
    // Two replies spend 120 of the 100 tokens: the third request is refused.
    assert_eq!(three(&["x-chimera-session: chat-1"]), [200, 200, 403]);
    let (_, refused) = chat_as(&gateway, &["x-chimera-session: chat-1"], "hi");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("budget exceeded"), "{message}");
    // Another conversation has a budget of its own.
    assert_eq!(three(&["x-chimera-session: chat-2"]), [200, 200, 403]);
    // Without a session header, a key is one conversation; another key another.
    assert_eq!(three(&["authorization: Bearer sk-one"]), [200, 200, 403]);
    assert_eq!(three(&["authorization: Bearer sk-two"]), [200, 200, 403]);
    // A key's conversation "chat-1" is not the key-less one of that name.
    let keyed = ["authorization: Bearer sk-one", "x-chimera-session: chat-1"];
    assert_eq!(chat_as(&gateway, &keyed, "hi").0, 200);
    // With neither, nothing carries over.
    assert_eq!(three(&[]), [200, 200, 200]);
    // A session name that is not a plain name is refused, in the wire's shape.
    let (status, bad) = chat_as(&gateway, &["x-chimera-session: a/b"], "hi");
    assert_eq!(status, 400, "{bad}");
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("x-chimera-session"));
    // Scoped by key, a new session name is no way around the key's budget
    // (a scope that needs the gateway to know its clients' keys).
    let hash = chimera_host::gateway::key_hash("sk-one");
    let by_key = serve(
        &upstream,
        &[
            "--pack",
            r#"token-budget={"max_tokens":100}"#,
            "--session-scope",
            "key",
            "--client-key-sha256",
            &hash,
        ],
    );
    let named = |name: &str| {
        let header = format!("x-chimera-session: {name}");
        chat_as(&by_key, &["authorization: Bearer sk-one", &header], "hi").0
    };
    assert_eq!([named("a"), named("b"), named("c")], [200, 200, 403]);
    // The key never reaches the upstream; the gateway's own key does.
    assert!(upstream
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer the-gateways-key")));
}

#[test]
fn concurrent_requests_of_one_conversation_all_count() {
    let upstream = costly_upstream("ok");
    // 10 requests at once spend 600 tokens; the budget of 500 then refuses.
    let gateway = serve(&upstream, &["--pack", r#"token-budget={"max_tokens":500}"#]);
    let header = ["x-chimera-session: busy"];
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..10)
            .map(|_| scope.spawn(|| chat_as(&gateway, &header, "hi").0))
            .collect();
        for handle in handles {
            assert_eq!(handle.join().unwrap(), 200);
        }
    });
    assert_eq!(chat_as(&gateway, &header, "hi").0, 403);
}

/// The `toml` block of the README's "Guard an existing app" section.
fn readme_config() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md beside the workspace");
    let section = readme
        .split("## Guard an existing app")
        .nth(1)
        .expect("the README has the section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a toml block");
    block.to_owned()
}

#[test]
fn the_readme_config_serves_an_app_that_sends_its_key_and_a_flag_overrides_the_file() {
    let upstream = Server::start(vec![Reply::Model(
        vec!["hello, reach me at ops@example.com".into()],
        Duration::ZERO,
    )]);
    let dir = tempfile::tempdir().unwrap();
    let config = readme_config();
    assert!(config.contains("https://api.openai.com/v1"), "{config}");
    let config = config.replace("https://api.openai.com/v1", &format!("{}/v1", upstream.url));
    let file = dir.path().join("chimera.toml");
    std::fs::write(&file, &config).unwrap();
    // The README's way to get the hash it shows.
    let hashed = Command::new(chimera_bin())
        .args(["serve", "--hash-key", "MY_KEY"])
        .env("MY_KEY", "my-app-key")
        .output()
        .unwrap();
    assert!(hashed.status.success());
    let hash = String::from_utf8(hashed.stdout).unwrap();
    assert!(
        config.contains(hash.trim()),
        "{hash} is the hash in the README"
    );

    let mut command = Command::new(chimera_bin());
    command
        .arg("--config")
        .arg(&file)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("OPENAI_API_KEY", "the-gateways-key");
    let gateway = started(command);
    assert!(
        gateway.address.starts_with("127.0.0.1:") && !gateway.address.ends_with(":8787"),
        "--listen overrides the file: {}",
        gateway.address
    );
    let mut request = user("hi");
    request["model"] = json!("gpt-4o-mini");
    let (status, _) = chat_with(&gateway, &[], &request);
    assert_eq!(status, 401, "the file asks for a key");
    let (status, reply) = chat_with(&gateway, &["authorization: Bearer my-app-key"], &request);
    assert_eq!(status, 200, "{reply}");
    let text = reply["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        !text.contains("ops@example.com"),
        "content-safety ran: {text}"
    );
    let asked = &upstream.requests()[0];
    assert_eq!(
        asked.header("authorization"),
        Some("Bearer the-gateways-key")
    );
    assert_eq!(asked.json()["model"], "gpt-4o-mini");
    drop(gateway);
    let audit = dir.path().join("gateway-audit.jsonl");
    assert!(audit.exists(), "the file's audit path is relative to it");
}

#[test]
fn the_audit_log_names_each_request_and_its_conversation_and_verifies() {
    let upstream = Server::start(vec![Reply::Model(vec!["noted".into()], Duration::ZERO)]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_arg = log.to_str().unwrap();
    let gateway = serve(&upstream, &["--pack", "redactor", "--audit", log_arg]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, head, reply) = super::exchange_with_head(
            &gateway.address,
            "POST",
            "/v1/chat/completions",
            &["x-chimera-session: audited"],
            &user("my key is sk-ABCDEFGH12345678").to_string(),
        );
        assert_eq!(status, 200, "{reply}");
        // The upstream's reply passes as it came (its own id); the gateway
        // names the request it relayed in a header of its own.
        ids.push(super::head_value(&head, "x-chimera-request-id").expect("the request's id"));
    }
    let lines = crate::audit::lines(&log);
    for (turn, id) in ids.iter().enumerate() {
        let mine: Vec<&Value> = lines.iter().filter(|l| l["request"] == *id).collect();
        let replaced = mine
            .iter()
            .find(|l| l["decision"] == "replaced")
            .unwrap_or_else(|| panic!("request {id} has its redaction recorded: {lines:?}"));
        assert_eq!(replaced["pack"], "redactor");
        assert_eq!(replaced["session"], "session/audited");
        assert_eq!(replaced["turn"], turn);
        assert!(
            !replaced.to_string().contains("ABCDEFGH"),
            "what was redacted is not in the log"
        );
    }
    assert!(lines
        .iter()
        .all(|l| ids.iter().any(|id| l["request"] == *id)));
    drop(gateway);
    let verified = crate::audit::verify(dir.path(), &log, &[]);
    assert_eq!(verified.status(), 0, "{}", verified.stderr());
}

#[test]
fn content_no_pack_reads_and_a_retry_the_gateway_made_are_in_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let upstream = Server::start(vec![
        Reply::status(
            429,
            &[("retry-after", "0")],
            r#"{"error":{"message":"slow down"}}"#,
        ),
        Reply::Model(vec!["a cat".into()], Duration::ZERO),
    ]);
    let gateway = serve(
        &upstream,
        &[
            "--pack",
            "redactor",
            "--upstream-retries",
            "1",
            "--audit",
            log.to_str().unwrap(),
        ],
    );
    let body = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    ]}]});
    let (status, reply) = chat_with(&gateway, &[], &body);
    assert_eq!(status, 200, "the retry got the answer: {reply}");
    assert_eq!(upstream.requests().len(), 2);
    let reasons: Vec<String> = crate::audit::lines(&log)
        .iter()
        .filter(|l| l["interceptor"] == "gateway")
        .map(|l| l["reason"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        reasons,
        [
            "not judged: image_url",
            "the upstream answered 429: retry 1"
        ],
        "what no pack read, and the retry"
    );
    let (_, metrics) = super::exchange(&gateway, "GET", "/metrics", &[], "");
    assert!(
        metrics.contains("chimera_gateway_upstream_retries_total 1"),
        "{metrics}"
    );
}

#[test]
fn headers_over_the_cap_get_a_431_in_the_clients_wire_format() {
    let upstream = Server::start(vec![Reply::Model(vec!["never".into()], Duration::ZERO)]);
    let gateway = serve(&upstream, &["--header-cap", "2048"]);
    let big = format!("x-padding: {}", "a".repeat(4096));
    let (status, body) = post_chat(&gateway, &[&big], &user("hi"));
    assert_eq!(status, 431, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "headers_too_large");
    assert!(body["error"]["message"].as_str().unwrap().contains("2048"));
    assert!(upstream.requests().is_empty());
    let (status, _) = chat_as(&gateway, &[], "hi");
    assert_eq!(status, 200, "a request under the cap passes");
}

#[test]
fn an_upstream_that_does_not_answer_in_time_is_a_502_naming_the_timeout() {
    let silent = SlowServer::start(Duration::from_secs(120), 0);
    let base = format!("{}/v1", silent.url);
    let command = Served::command(&base, &["--model", "m", "--upstream-timeout", "1"]);
    let gateway = started(command);
    let (status, reply) = chat_as(&gateway, &[], "hi");
    assert_eq!(status, 502, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("timed out"), "{message}");
}
