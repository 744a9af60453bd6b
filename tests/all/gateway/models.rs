//! `GET /v1/models` answers each client in its own wire: the `openai` SDK
//! lists the chat-completions models, the `anthropic` SDK the Messages
//! models, each in its wire's list shape.

use super::{serve_with, with_anthropic_sdk, with_sdk};
use chimera_tests::http::Server;
use serde_json::json;

#[test]
fn each_sdk_lists_the_models_of_its_own_wire() {
    let openai = Server::start(Vec::new());
    let anthropic = Server::start(Vec::new());
    let base = format!("{}/v1", openai.url);
    let gateway = serve_with(&[
        "--upstream",
        &base,
        "--model",
        "gpt-m",
        "--upstream-key-env",
        "GATEWAY_UPSTREAM_KEY",
        "--anthropic-upstream",
        &anthropic.url,
        "--anthropic-model",
        "claude-m",
        "--anthropic-key-env",
        "GATEWAY_UPSTREAM_KEY",
    ]);
    let Some(listed) = with_sdk(
        &gateway,
        "
import json, openai
client = openai.OpenAI(max_retries=0)
print(json.dumps([m.id for m in client.models.list()]))
",
    ) else {
        return;
    };
    assert_eq!(listed, json!(["gpt-m"]));
    let Some(listed) = with_anthropic_sdk(
        &gateway,
        r#"
import json, anthropic
client = anthropic.Anthropic(max_retries=0)
page = client.models.list()
print(json.dumps({"ids": [m.id for m in page.data], "first": page.first_id, "more": page.has_more}))
"#,
    ) else {
        return;
    };
    assert_eq!(
        listed,
        json!({"ids": ["claude-m"], "first": "claude-m", "more": false})
    );
}
