//! Client to server: every message read whole; every `tools/call` (a
//! request, a batch's member, one without an id) judged by the tool gate
//! before it goes on, as judged; what the guard cannot read refused with a
//! JSON-RPC error, never forwarded.

use super::frame::{Frame, Framer};
use super::guard::{
    answer, error_result, lock, reassemble, render_member, rpc_error, say, GuardError, Pending,
    Relay,
};
use super::judge::{gate, Audited, Gate, SESSION};
use super::message::{id_key, Parsed, Shape};
use crate::interception::{SessionFacts, ToolCallSeam};
use crate::jsondoc::{object_from, string_literal, Node, Splice};
use crate::types::ToolCall;
use std::io::{BufReader, Read};

/// JSON-RPC's "parse error".
const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's "invalid request".
const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC's "invalid params".
const INVALID_PARAMS: i32 = -32602;

/// Relays the client's messages until its input ends.
pub(super) fn relay_calls(relay: &Relay, input: impl Read) -> Result<(), GuardError> {
    let mut framer = Framer::new(BufReader::new(input), "client");
    while let Some(frame) = framer.next_frame()? {
        let parsed = match frame {
            Frame::Value(bytes) => Parsed::of(bytes),
            Frame::Garbage(_) => Err("not a JSON-RPC message".to_owned()),
        };
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(why) => {
                say(&format!("refused a message from the client: {why}"));
                let error = rpc_error(PARSE_ERROR, &format!("refused by chimera mcp guard: {why}"));
                relay.to_client(&answer(b"null", "error", &error))?;
                continue;
            }
        };
        let mut forwarded = Vec::new();
        for message in parsed.messages() {
            if let Some(bytes) = one_message(relay, &parsed.src, message)? {
                forwarded.push(bytes);
            }
        }
        if let Some(bytes) = reassemble(parsed.is_batch(), forwarded) {
            relay.to_server(&bytes)?;
        }
    }
    Ok(())
}

/// What goes on of one message (`None`: nothing; its refusal, when it has
/// an id, is answered to the client).
fn one_message(relay: &Relay, src: &[u8], message: &Node) -> Result<Option<Vec<u8>>, GuardError> {
    let id = message.get(src, "id").filter(|id| !id.is_null());
    let refuse = |code: i32, why: &str| -> Result<Option<Vec<u8>>, GuardError> {
        say(&format!("refused a message from the client: {why}"));
        if let Some(id) = id {
            let error = rpc_error(code, &format!("refused by chimera mcp guard: {why}"));
            relay.to_client(&answer(id.raw(src), "error", &error))?;
        }
        Ok(None)
    };
    let (method, id) = match Shape::of(src, message) {
        Shape::Invalid(why) => return refuse(INVALID_REQUEST, why),
        Shape::Response { .. } => return Ok(Some(message.raw(src).to_vec())),
        Shape::Notification { method } => (method, None),
        Shape::Request { method, id } => (method, Some(id)),
    };
    let key = id.map(|id| id_key(src, id));
    if let Some(key) = &key {
        if lock(&relay.in_flight).contains_key(key) {
            return refuse(INVALID_REQUEST, "a request with this id is already in flight");
        }
    }
    let audited = Audited::of(
        relay.rules.audit.as_ref(),
        &id.map_or_else(|| format!("notification {method}"), |id| {
            String::from_utf8_lossy(id.raw(src)).into_owned()
        }),
    );
    let call_id = id.map_or_else(String::new, |id| String::from_utf8_lossy(id.raw(src)).into_owned());
    let params = message.get(src, "params");
    let (call, bytes) = if method == "tools/call" {
        let Some(call) = call_of(src, params, &call_id) else {
            audited.done();
            return refuse(INVALID_PARAMS, "a tools/call needs params with a string name");
        };
        match judge_call(relay, &audited, &call) {
            Err(reason) => {
                audited.done();
                say(&format!("refused a call of {}: {reason}", call.name));
                if let Some(id) = id {
                    relay.to_client(&answer(id.raw(src), "result", &error_result(&reason)))?;
                }
                return Ok(None);
            }
            Ok(None) => (call, message.raw(src).to_vec()),
            Ok(Some(rewritten)) => match rewrite(src, message, params, &rewritten) {
                Some(bytes) => (rewritten, bytes),
                None => {
                    audited.done();
                    return refuse(INVALID_PARAMS, "the packs' rewrite of this call cannot be written");
                }
            },
        }
    } else {
        let arguments = params.map_or(serde_json::Value::Null, |p| p.to_value(src));
        let call = ToolCall::new(call_id, format!("mcp:{method}"), arguments);
        (call, message.raw(src).to_vec())
    };
    match key {
        Some(key) => {
            lock(&relay.in_flight).insert(
                key,
                Pending {
                    method,
                    call,
                    audited,
                },
            );
        }
        None => audited.done(),
    }
    Ok(Some(bytes))
}

/// The call a `tools/call`'s params make: its name and arguments (`{}`
/// when it has none).
fn call_of(src: &[u8], params: Option<&Node>, id: &str) -> Option<ToolCall> {
    let params = params?;
    let name = params.get(src, "name")?.text(src)?;
    let arguments = params
        .get(src, "arguments")
        .map_or_else(|| serde_json::json!({}), |a| a.to_value(src));
    Some(ToolCall::new(id, name, arguments))
}

/// The `tool_call` chain, then the tool gate, then the pins: `Ok(None)`
/// to send the call as it came, `Ok(Some)` rewritten, `Err` refused.
fn judge_call(relay: &Relay, audited: &Audited, call: &ToolCall) -> Result<Option<ToolCall>, String> {
    let chains = relay.registry.get_all();
    let facts = SessionFacts::new(SESSION);
    let outcome = audited.run::<ToolCallSeam>(&chains.tool_call, &(), call, &facts);
    let effective = match gate(outcome, call, relay.rules.policy.as_ref()) {
        Gate::Refused(reason) => return Err(reason),
        Gate::Sent(effective) => effective,
    };
    let name = &effective.as_ref().unwrap_or(call).name;
    if let Some(why) = lock(&relay.withheld).get(name) {
        return Err(format!("Blocked by chimera mcp guard: tool {name} is withheld: {why}"));
    }
    if let Some(pins) = &relay.rules.pins {
        if !pins.tools.contains_key(name) {
            return Err(format!(
                "Blocked by chimera mcp guard: tool {name} is not in the MCP lock"
            ));
        }
    }
    Ok(effective)
}

/// `message` (a `tools/call`) with `call`'s name and arguments written in
/// its params.
fn rewrite(src: &[u8], message: &Node, params: Option<&Node>, call: &ToolCall) -> Option<Vec<u8>> {
    let params = params?;
    let arguments = call.arguments.as_str().as_bytes();
    let mut splice = Splice::new();
    if let Some(name) = params.get(src, "name") {
        splice.replace(name.span.clone(), string_literal(&call.name));
    }
    match params.get(src, "arguments") {
        Some(old) => splice.replace(old.span.clone(), arguments.to_vec()),
        None => {
            // Params rebuilt: every member as it came, the arguments added.
            let members = params.as_object().unwrap_or_default();
            let mut parts: Vec<(String, Vec<u8>)> = members
                .iter()
                .map(|(key, value)| {
                    let value = if key.is(src, "name") {
                        string_literal(&call.name).into_bytes()
                    } else {
                        value.raw(src).to_vec()
                    };
                    (key.text(src).into_owned(), value)
                })
                .collect();
            parts.push(("arguments".to_owned(), arguments.to_vec()));
            let mut whole = Splice::new();
            whole.replace(params.span.clone(), object_from(parts));
            return render_member(src, message, &whole);
        }
    }
    render_member(src, message, &splice)
}
