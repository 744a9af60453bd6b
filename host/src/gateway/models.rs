//! `GET /v1/models`, answered in the wire the client speaks.

use super::wire::Refusal;
use super::{json_response, refuse, Anthropic, Gateway, OpenAi, BAD_KEY};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;

/// `GET /v1/models`: the models served by name on the wire the client
/// speaks (a pattern is not a model: it is not listed), in that wire's
/// own list shape. A Messages client says so by its `anthropic-version`
/// header (the Anthropic SDKs and Claude Code always send it); any other
/// client is taken for a chat-completions one.
pub(super) async fn models(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let messages = headers.contains_key("anthropic-version");
    if !gateway.accepts_key(super::presented_key_hash(&headers).as_deref()) {
        return if messages {
            refuse::<Anthropic>(Refusal::BadKey, BAD_KEY)
        } else {
            refuse::<OpenAi>(Refusal::BadKey, BAD_KEY)
        };
    }
    let served = if messages {
        &gateway.anthropic
    } else {
        &gateway.openai
    };
    let names: Vec<&String> = served
        .iter()
        .flat_map(|served| served.upstream.models.iter())
        .filter(|name| !name.contains(['*', '?']))
        .collect();
    let body = if messages {
        let data: Vec<Value> = names
            .iter()
            .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z"}))
            .collect();
        json!({"data": data, "has_more": false, "first_id": names.first(), "last_id": names.last()})
    } else {
        let data: Vec<Value> = names
            .iter()
            .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "chimera"}))
            .collect();
        json!({"object": "list", "data": data})
    };
    json_response(StatusCode::OK, &body)
}
