//! Server to client: every message read whole and judged for what a model
//! reads of it before it goes on: an answer to a call on `tool_result`
//! (error answers too), a tool listing tool by tool (and the pins), a
//! server's `instructions`, any other answer, request or notification as
//! its strings. An answer to no request in flight, or one the guard cannot
//! read, never reaches the client.

use super::judge::{
    judge_instructions, judge_listed_tool, judge_view, lock, Audited, Judging, Pending, Verdict,
};
use super::message::{id_key, Parsed, Shape};
use super::view::View;
use super::wire::{answer, error_result, reassemble, render_member, rpc_error, say};
use crate::interception::{AuditRecord, EventDecision, InterceptorEvent};
use crate::jsondoc::{array_from, parse, Limits, Node, Splice};
use crate::types::ToolCall;

/// JSON-RPC's "internal error", for what the guard withholds.
const WITHHELD: i32 = -32603;

/// The answer to `pending` when the server will not give one: `why`, and
/// `this call` or `this request`.
pub(super) fn unanswered_answer(pending: &Pending, why: &str) -> Vec<u8> {
    pending.audited.done();
    let id = pending.call.id.as_bytes();
    if pending.method == "tools/call" {
        answer(
            id,
            "result",
            &error_result(&format!("{why} this call"), pending.modern),
        )
    } else {
        answer(
            id,
            "error",
            &rpc_error(WITHHELD, &format!("{why} this request")),
        )
    }
}

/// What judging one frame from the server made: what goes on to the
/// client, and the guard's own answers to the server (its requests the
/// guard refused).
#[derive(Default)]
pub(super) struct FromServer {
    /// The frame as judged, when any of it goes on.
    pub(super) forward: Option<Vec<u8>>,
    /// The guard's own answers to the server.
    pub(super) to_server: Vec<Vec<u8>>,
}

impl Judging {
    /// Judges one frame from the server; `pending` takes the request an id
    /// key answers, if one is in flight.
    pub(super) fn judge_server(
        &self,
        parsed: &Parsed,
        pending: &mut dyn FnMut(&str) -> Option<Pending>,
    ) -> FromServer {
        let mut judged = FromServer::default();
        let mut relayed = Vec::new();
        for message in parsed.messages() {
            if let Some(bytes) = self.server_message(&parsed.src, message, pending, &mut judged) {
                relayed.push(bytes);
            }
        }
        judged.forward = reassemble(parsed.is_batch(), relayed);
        judged
    }

    /// What goes on of one message (`None`: nothing).
    fn server_message(
        &self,
        src: &[u8],
        message: &Node,
        pending: &mut dyn FnMut(&str) -> Option<Pending>,
        judged: &mut FromServer,
    ) -> Option<Vec<u8>> {
        match Shape::of(src, message) {
            Shape::Invalid(why) => {
                say(&format!("withheld a message from the server: {why}"));
                None
            }
            Shape::Response { id } => {
                let Some(pending) = pending(&id_key(src, id)) else {
                    // A second answer, or one to no request: it would
                    // reach the client unjudged.
                    say("withheld an answer the server sent for no request in flight");
                    return None;
                };
                let relayed = response(self, src, message, &pending);
                pending.audited.done();
                relayed
            }
            Shape::Request { method, id } => match self.judge_strings(src, message, &method) {
                Verdict::Withheld(why) => {
                    say(&format!("refused the server's {method} request: {why}"));
                    let error =
                        rpc_error(WITHHELD, &format!("refused by chimera mcp guard: {why}"));
                    judged.to_server.push(answer(id.raw(src), "error", &error));
                    None
                }
                verdict => applied(src, message, verdict),
            },
            Shape::Notification { method } => match self.judge_strings(src, message, &method) {
                Verdict::Withheld(why) => {
                    say(&format!(
                        "withheld the server's {method} notification: {why}"
                    ));
                    None
                }
                verdict => applied(src, message, verdict),
            },
        }
    }

    /// A server's request or notification judged as its params' strings,
    /// as the result of a synthetic `mcp:METHOD` call.
    fn judge_strings(&self, src: &[u8], message: &Node, method: &str) -> Verdict {
        let Some(params) = message.get(src, "params") else {
            return Verdict::Pass;
        };
        let view = View::strings(src, params);
        if view.is_empty() {
            return Verdict::Pass;
        }
        let audited = Audited::of(self.rules.audit.as_ref(), &format!("server {method}"));
        let call = ToolCall::new("", format!("mcp:{method}"), serde_json::json!({}));
        let chains = self.registry.current();
        let verdict = judge_view(&audited, &chains.tool_result, &call, &view, false);
        audited.done();
        verdict
    }
}

/// `message` with `verdict` applied (`Pass` or `Edited`).
fn applied(src: &[u8], message: &Node, verdict: Verdict) -> Option<Vec<u8>> {
    match verdict {
        Verdict::Pass => Some(message.raw(src).to_vec()),
        Verdict::Edited(splice) => render_member(src, message, &splice),
        Verdict::Withheld(_) => None,
    }
}

/// The answer to `pending` as it goes on.
fn response(judging: &Judging, src: &[u8], message: &Node, pending: &Pending) -> Option<Vec<u8>> {
    let id = message
        .get(src, "id")
        .map_or(&b"null"[..], |id| id.raw(src));
    let chains = judging.registry.current();
    let audited = &pending.audited;
    if let Some(error) = message.get(src, "error") {
        let view = View::strings(src, error);
        return match judge_view(audited, &chains.tool_result, &pending.call, &view, true) {
            Verdict::Withheld(why) => {
                say(&format!(
                    "withheld an error answer to {}: {why}",
                    pending.method
                ));
                Some(answer(id, "error", &rpc_error(WITHHELD, &why)))
            }
            verdict => applied(src, message, verdict),
        };
    }
    let result = message.get(src, "result")?;
    let verdict = match pending.method.as_str() {
        "tools/call" if chains.tool_result.is_empty() => Verdict::Pass,
        "tools/call" => {
            let failed = result.get(src, "isError").and_then(Node::as_bool) == Some(true);
            let view = View::tool_result(src, result);
            match judge_view(audited, &chains.tool_result, &pending.call, &view, failed) {
                Verdict::Withheld(why) => {
                    say(&format!(
                        "withheld the result of a call of {}: {why}",
                        pending.call.name
                    ));
                    return Some(answer(id, "result", &error_result(&why, pending.modern)));
                }
                verdict => verdict,
            }
        }
        "tools/list" => return listing(judging, src, message, result, audited),
        "initialize" | "server/discover" => match result.get(src, "instructions") {
            Some(instructions) => match judge_instructions(audited, &chains, src, instructions) {
                Verdict::Withheld(why) => {
                    say(&format!("withheld the server's instructions: {why}"));
                    let mut splice = Splice::new();
                    splice.replace(instructions.span.clone(), b"\"\"".to_vec());
                    Verdict::Edited(splice)
                }
                verdict => verdict,
            },
            None => Verdict::Pass,
        },
        _ => {
            let view = View::strings(src, result);
            match judge_view(audited, &chains.tool_result, &pending.call, &view, false) {
                Verdict::Withheld(why) => {
                    say(&format!("withheld the answer to {}: {why}", pending.method));
                    return Some(answer(id, "error", &rpc_error(WITHHELD, &why)));
                }
                verdict => verdict,
            }
        }
    };
    applied(src, message, verdict)
}

/// A `tools/list` answer: each tool judged, then held to the pins; a tool
/// either withholds is left out of the listing, and calls of it are
/// refused until a listing offers it as it should be.
fn listing(
    judging: &Judging,
    src: &[u8],
    message: &Node,
    result: &Node,
    audited: &Audited,
) -> Option<Vec<u8>> {
    let tools = result
        .get(src, "tools")
        .and_then(Node::as_array)
        .unwrap_or_default();
    let chains = judging.registry.current();
    let mut edits = Splice::new();
    let mut kept = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        let name = tool
            .get(src, "name")
            .and_then(|n| n.text(src))
            .unwrap_or_default()
            .into_owned();
        let mut verdict = judge_listed_tool(audited, &chains, src, tool);
        if let Some(pins) = &judging.rules.pins {
            if let Some(drift) = pins.drift(&name, &super::pin::fingerprint(src, tool)) {
                verdict = Verdict::Withheld(drift.to_string());
                audited.record(drifted(&name, &drift.to_string()));
            }
        }
        match verdict {
            Verdict::Withheld(why) => {
                say(&format!("withheld tool {name} from the listing: {why}"));
                lock(&judging.withheld).insert(name, why);
            }
            Verdict::Edited(splice) => {
                lock(&judging.withheld).remove(&name);
                edits.absorb(splice);
                kept.push(index);
            }
            Verdict::Pass => {
                lock(&judging.withheld).remove(&name);
                kept.push(index);
            }
        }
    }
    let edited = render_member(src, message, &edits)?;
    if kept.len() == tools.len() {
        return Some(edited);
    }
    // The tools withheld are left out: the listing rebuilt from the
    // edited message, every other byte as it was.
    let root = parse(
        &edited,
        &Limits::new().with_max_depth(super::message::MAX_DEPTH),
    )
    .ok()?;
    let listed = root.get(&edited, "result")?.get(&edited, "tools")?;
    let items = listed.as_array()?;
    let mut splice = Splice::new();
    splice.replace(
        listed.span.clone(),
        array_from(
            kept.iter()
                .filter_map(|&i| items.get(i))
                .map(|n| n.raw(&edited)),
        ),
    );
    splice.render(&edited).ok()
}

/// The audit record of a tool withheld for drifting from its pin.
fn drifted(name: &str, why: &str) -> AuditRecord {
    AuditRecord {
        event: InterceptorEvent {
            seam: "tool_call",
            decision: EventDecision::Blocked,
            reason: format!("tool {name} withheld: {why}"),
            tool_name: name.to_owned(),
            call_id: String::new(),
            interceptor: "mcp-pin".to_owned(),
            monitor: false,
        },
        from_pack: false,
        changes: None,
        depth: 0,
        parent_call_id: None,
    }
}
