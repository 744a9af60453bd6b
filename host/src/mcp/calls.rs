//! Client to server: every message read whole; every `tools/call` (a
//! request, a batch's member, one without an id) judged by the tool gate
//! before it goes on, as judged; what the guard cannot read refused with a
//! JSON-RPC error, never forwarded.

use super::judge::{lock, Audited, Judging, Pending, SESSION};
use super::message::{id_key, Parsed, Shape};
use super::wire::{answer, error_result, is_modern, reassemble, render_member, rpc_error, say};
use crate::agent::{unattended, Unattended};
use crate::interception::{SessionFacts, ToolCallSeam};
use crate::jsondoc::{object_from, string_literal, Node, Splice};
use crate::types::ToolCall;

/// JSON-RPC's "parse error".
const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's "invalid request".
const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC's "invalid params".
const INVALID_PARAMS: i32 = -32602;

/// What judging one frame from the client made: what goes on to the
/// server, the answers the guard gives the client itself (refusals), and
/// the requests that go on, to match their answers with.
#[derive(Default)]
pub(super) struct FromClient {
    /// The frame as judged, when any of it goes on.
    pub(super) forward: Option<Vec<u8>>,
    /// The guard's own answers to the client.
    pub(super) replies: Vec<Vec<u8>>,
    /// The requests forwarded, by id key.
    pub(super) pending: Vec<(String, Pending)>,
}

impl FromClient {
    /// A frame the guard cannot read: refused with a parse error.
    pub(super) fn unreadable(why: &str) -> FromClient {
        say(&format!("refused a message from the client: {why}"));
        let error = rpc_error(PARSE_ERROR, &format!("refused by chimera mcp guard: {why}"));
        FromClient {
            replies: vec![answer(b"null", "error", &error)],
            ..FromClient::default()
        }
    }
}

impl Judging {
    /// Judges one frame from the client; `in_flight` says whether an id
    /// key is taken by a request not answered yet.
    pub(super) fn judge_client(
        &self,
        parsed: &Parsed,
        in_flight: &dyn Fn(&str) -> bool,
    ) -> FromClient {
        let mut judged = FromClient::default();
        let mut forwarded = Vec::new();
        for message in parsed.messages() {
            if let Some(bytes) = self.client_message(&parsed.src, message, in_flight, &mut judged) {
                forwarded.push(bytes);
            }
        }
        judged.forward = reassemble(parsed.is_batch(), forwarded);
        judged
    }

    /// What goes on of one message (`None`: nothing; its refusal, when it
    /// has an id, is among `judged`'s replies).
    fn client_message(
        &self,
        src: &[u8],
        message: &Node,
        in_flight: &dyn Fn(&str) -> bool,
        judged: &mut FromClient,
    ) -> Option<Vec<u8>> {
        let id = message.get(src, "id").filter(|id| !id.is_null());
        let refuse = |judged: &mut FromClient, code: i32, why: &str| {
            say(&format!("refused a message from the client: {why}"));
            if let Some(id) = id {
                let error = rpc_error(code, &format!("refused by chimera mcp guard: {why}"));
                judged.replies.push(answer(id.raw(src), "error", &error));
            }
            None
        };
        let (method, id) = match Shape::of(src, message) {
            Shape::Invalid(why) => return refuse(judged, INVALID_REQUEST, why),
            Shape::Response { .. } => return Some(message.raw(src).to_vec()),
            Shape::Notification { method } => (method, None),
            Shape::Request { method, id } => (method, Some(id)),
        };
        let key = id.map(|id| id_key(src, id));
        if let Some(key) = &key {
            if in_flight(key) || judged.pending.iter().any(|(taken, _)| taken == key) {
                return refuse(
                    judged,
                    INVALID_REQUEST,
                    "a request with this id is already in flight",
                );
            }
        }
        let raw_id = id.map(|id| String::from_utf8_lossy(id.raw(src)).into_owned());
        let audited = match &raw_id {
            Some(raw_id) => Audited::of(self.rules.audit.as_ref(), raw_id),
            None => Audited::of(self.rules.audit.as_ref(), &format!("notification {method}")),
        };
        let call_id = raw_id.unwrap_or_default();
        let params = message.get(src, "params");
        let modern = is_modern(src, params);
        let (call, bytes) = if method == "tools/call" {
            let Some(call) = call_of(src, params, &call_id) else {
                audited.done();
                return refuse(
                    judged,
                    INVALID_PARAMS,
                    "a tools/call needs params with a string name",
                );
            };
            match self.judge_call(&audited, &call) {
                Err(reason) => {
                    audited.done();
                    say(&format!("refused a call of {}: {reason}", call.name));
                    if let Some(id) = id {
                        judged.replies.push(answer(
                            id.raw(src),
                            "result",
                            &error_result(&reason, modern),
                        ));
                    }
                    return None;
                }
                Ok(None) => (call, message.raw(src).to_vec()),
                Ok(Some(rewritten)) => {
                    let Some(bytes) = rewrite(src, message, params, &rewritten) else {
                        audited.done();
                        return refuse(
                            judged,
                            INVALID_PARAMS,
                            "the packs' rewrite of this call cannot be written",
                        );
                    };
                    (rewritten, bytes)
                }
            }
        } else {
            let arguments = params.map_or(serde_json::Value::Null, |p| p.to_value(src));
            let call = ToolCall::new(call_id, format!("mcp:{method}"), arguments);
            (call, message.raw(src).to_vec())
        };
        match key {
            Some(key) => judged.pending.push((
                key,
                Pending {
                    method,
                    modern,
                    call,
                    audited,
                },
            )),
            None => audited.done(),
        }
        Some(bytes)
    }

    /// The `tool_call` chain, then the tool gate, then the pins:
    /// `Ok(None)` to send the call as it came, `Ok(Some)` rewritten, `Err`
    /// refused.
    fn judge_call(&self, audited: &Audited, call: &ToolCall) -> Result<Option<ToolCall>, String> {
        let chains = self.registry.current();
        let facts = SessionFacts::new(SESSION);
        let outcome = audited.run::<ToolCallSeam>(&chains.tool_call, &(), call, &facts);
        let effective = match unattended(outcome, call, self.rules.policy.as_ref()) {
            Unattended::Refused(reason) => return Err(reason),
            Unattended::Sent(effective) => effective,
        };
        let name = &effective.as_ref().unwrap_or(call).name;
        if let Some(why) = lock(&self.withheld).get(name) {
            return Err(format!(
                "Blocked by chimera mcp guard: tool {name} is withheld: {why}"
            ));
        }
        if let Some(pins) = &self.rules.pins {
            if !pins.tools.contains_key(name) {
                return Err(format!(
                    "Blocked by chimera mcp guard: tool {name} is not in the MCP lock"
                ));
            }
        }
        Ok(effective)
    }
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

/// `message` (a `tools/call`) with `call`'s name and arguments written in
/// its params.
fn rewrite(src: &[u8], message: &Node, params: Option<&Node>, call: &ToolCall) -> Option<Vec<u8>> {
    let params = params?;
    let arguments = call.arguments.as_str().as_bytes();
    if let Some(old) = params.get(src, "arguments") {
        let mut splice = Splice::new();
        if let Some(name) = params.get(src, "name") {
            splice.replace(name.span.clone(), string_literal(&call.name));
        }
        splice.replace(old.span.clone(), arguments.to_vec());
        return render_member(src, message, &splice);
    }
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
    render_member(src, message, &whole)
}
