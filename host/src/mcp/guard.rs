//! The relay itself: two threads (client to server, server to client),
//! the calls in flight between them, and one writer for the client.

use crate::agent::{EventBus, Permission, PermissionPolicy};
use crate::audit::{AuditLog, Exchange};
use crate::interception::{
    run_chain_spent, ChainContext, ChainOutcome, SeamSpec, SessionFacts, ToolCallSeam,
    ToolResultSeam,
};
use crate::plugins::Registry;
use crate::types::{ToolCall, ToolResult};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

/// The longest message relayed, in bytes (a line of the stdio transport).
pub const MAX_LINE: usize = 16 << 20;

/// Why the guard stopped before its server did.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The server could not be started.
    #[error("cannot start the MCP server {program}: {source}")]
    Start {
        /// The command.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A message longer than [`MAX_LINE`].
    #[error("a message from the {from} is longer than {MAX_LINE} bytes: the session ends")]
    TooLong {
        /// `client` or `server`.
        from: &'static str,
    },
    /// Reading or writing a stream failed.
    #[error("the {0} went away: {1}")]
    Io(&'static str, std::io::Error),
}

/// The calls sent to the server and not answered yet, by JSON-RPC id (as
/// JSON text), each as the server got it, with the bus its decisions are
/// audited on.
type InFlight = Arc<Mutex<HashMap<String, (ToolCall, Audited)>>>;

/// Where one call's decisions go: the audit log, as one exchange (its
/// lines name the JSON-RPC id), when the guard keeps one.
#[derive(Clone)]
struct Audited(Option<(EventBus, AuditLog)>);

impl Audited {
    /// The exchange of call `id` in `audit`.
    fn of(audit: Option<&AuditLog>, id: &str) -> Audited {
        Audited(audit.map(|audit| {
            let bus = EventBus::new();
            audit.attach_exchange(
                &bus,
                Exchange {
                    request: id.to_owned(),
                    session: SESSION.to_owned(),
                    turn: 0,
                },
            );
            (bus, audit.clone())
        }))
    }

    /// `chain` run over `value`, every decision audited.
    fn run<S: SeamSpec>(
        &self,
        chain: &[crate::interception::Interceptor<S>],
        lead: &S::Lead,
        value: &S::Value,
    ) -> ChainOutcome<S::Value> {
        let facts = SessionFacts::new(SESSION);
        let cx = ChainContext {
            session: &facts,
            events: None,
        };
        match &self.0 {
            Some((bus, _)) => {
                let sink = |record| bus.publish_audit(record);
                run_chain_spent(chain, lead, value, &cx, Some(&sink), &|_| false)
            }
            None => run_chain_spent(chain, lead, value, &cx, None, &|_| false),
        }
    }

    /// The exchange is over: its lines go to the log.
    fn done(&self) {
        if let Some((_, audit)) = &self.0 {
            audit.write_out();
        }
    }
}

/// What the guard applies beside the packs: the permission policy (after
/// the `tool_call` chain, as in the loop; a call it does not allow is
/// refused, since there is no operator to ask) and the audit log.
#[derive(Clone)]
pub struct Rules {
    /// Which calls may go to the server (`--deny TOOL`).
    pub policy: Arc<dyn PermissionPolicy>,
    /// Where every decision is recorded (`--audit FILE`).
    pub audit: Option<AuditLog>,
}

/// The session the chains run for, and the audit lines name: one per
/// guard.
const SESSION: &str = "mcp-guard";

/// Relays between the client on `input`/`output` and the MCP server
/// `command` (program and arguments) until the server's output ends,
/// judging tool calls and results by `registry`'s chains (taken afresh
/// for each message, so a hot swap applies to the next call) and by
/// `rules`' permission policy, each decision recorded in its audit log
/// when there is one (one exchange per call, named by its JSON-RPC id).
/// Returns the server's exit status.
///
/// # Errors
///
/// `GuardError::Start` when the server cannot be started; `TooLong` when a
/// message is over [`MAX_LINE`]; `Io` when a stream fails.
pub fn guard(
    registry: &Arc<Registry>,
    command: &[String],
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
    rules: Rules,
) -> Result<ExitStatus, GuardError> {
    let (program, args) = command.split_first().ok_or_else(|| GuardError::Start {
        program: String::new(),
        source: std::io::Error::other("no command given"),
    })?;
    let mut server = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| GuardError::Start {
            program: program.clone(),
            source,
        })?;
    let (Some(to_server), Some(from_server)) = (server.stdin.take(), server.stdout.take()) else {
        let _ = server.kill();
        return Err(GuardError::Start {
            program: program.clone(),
            source: std::io::Error::other("its standard input or output is not a pipe"),
        });
    };
    let client = Arc::new(Mutex::new(output));
    let in_flight: InFlight = Arc::default();
    // The client's side on a thread of its own, not joined: it may wait on
    // the client's input after the server is gone. Its end closes the
    // server's input, which ends the server and so the other side.
    let calls = {
        let (registry, client, in_flight) = (
            Arc::clone(registry),
            Arc::clone(&client),
            Arc::clone(&in_flight),
        );
        std::thread::spawn(move || {
            relay_calls(&registry, input, to_server, &*client, &in_flight, &rules)
        })
    };
    let outcome = relay_results(registry, from_server, &*client, &in_flight);
    let outcome = match (outcome, calls.is_finished()) {
        (Ok(()), true) => calls.join().unwrap_or(Ok(())),
        (outcome, _) => outcome,
    };
    if outcome.is_err() {
        let _ = server.kill();
    }
    let status = server.wait().map_err(|e| GuardError::Io("server", e))?;
    outcome.map(|()| status)
}

/// Reads one line (without its newline) into `line`; `false` at the end.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    from: &'static str,
) -> Result<bool, GuardError> {
    line.clear();
    let read = reader
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', line)
        .map_err(|e| GuardError::Io(from, e))?;
    if read == 0 {
        return Ok(false);
    }
    if line.len() > MAX_LINE {
        return Err(GuardError::TooLong { from });
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(true)
}

/// Writes `line` and a newline to `to`, flushed.
fn send(to: &mut impl Write, line: &[u8], who: &'static str) -> Result<(), GuardError> {
    to.write_all(line)
        .and_then(|()| to.write_all(b"\n"))
        .and_then(|()| to.flush())
        .map_err(|e| GuardError::Io(who, e))
}

/// Client to server: each `tools/call` judged, everything else as sent.
/// Ends when the client's input ends (the server's input is then closed).
fn relay_calls<W: Write>(
    registry: &Arc<Registry>,
    input: impl Read,
    mut to_server: impl Write,
    client: &Mutex<W>,
    in_flight: &InFlight,
    rules: &Rules,
) -> Result<(), GuardError> {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    while read_line(&mut reader, &mut line, "client")? {
        let Some((id, call)) = tool_call_of(&line) else {
            send(&mut to_server, &line, "server")?;
            continue;
        };
        let chains = registry.get_all();
        let audited = Audited::of(rules.audit.as_ref(), &id.to_string());
        let outcome = audited.run::<ToolCallSeam>(&chains.tool_call, &(), &call);
        match judged_call(outcome, &call, rules.policy.as_ref()) {
            Judged::Refused(reason) => {
                audited.done();
                let refusal = json!({"jsonrpc": "2.0", "id": id, "result": error_result(&reason)});
                let mut client = client.lock().unwrap_or_else(PoisonError::into_inner);
                send(&mut *client, refusal.to_string().as_bytes(), "client")?;
            }
            Judged::Sent(effective) => {
                let forwarded = match &effective {
                    Some(rewritten) => rewrite_call(&line, rewritten),
                    None => line.clone(),
                };
                in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id.to_string(), (effective.unwrap_or(call), audited));
                send(&mut to_server, &forwarded, "server")?;
            }
        }
    }
    Ok(())
}

/// Server to client: each answer to a judged call judged in turn,
/// everything else as sent.
fn relay_results<W: Write>(
    registry: &Arc<Registry>,
    from_server: impl Read,
    client: &Mutex<W>,
    in_flight: &InFlight,
) -> Result<(), GuardError> {
    let mut reader = BufReader::new(from_server);
    let mut line = Vec::new();
    while read_line(&mut reader, &mut line, "server")? {
        let answered = answer_of(&line).and_then(|(id, message)| {
            in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id)
                .map(|call| (call, message))
        });
        let relayed = match answered {
            Some(((call, audited), message)) => {
                let relayed = judge_result(registry, &call, &audited, message);
                audited.done();
                relayed
            }
            None if unasked_tool_result(&line) => {
                // A second answer to a call, or one to no call: it would
                // reach the client unjudged.
                eprintln!("mcp guard: dropped a tool result the server sent for no call in flight");
                continue;
            }
            None => None,
        };
        let mut client = client.lock().unwrap_or_else(PoisonError::into_inner);
        send(&mut *client, relayed.as_deref().unwrap_or(&line), "client")?;
    }
    // The server is gone: every call it did not answer gets an answer.
    let unanswered: Vec<String> = in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain()
        .map(|(id, (_, audited))| {
            audited.done();
            id
        })
        .collect();
    let mut client = client.lock().unwrap_or_else(PoisonError::into_inner);
    for id in unanswered {
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        let answer = json!({"jsonrpc": "2.0", "id": id,
            "result": error_result("the MCP server ended before it answered this call")});
        send(&mut *client, answer.to_string().as_bytes(), "client")?;
    }
    Ok(())
}

/// What the `tool_call` chain made of a call.
enum Judged {
    /// Refused, with this reason.
    Refused(String),
    /// Sent: rewritten (`Some`), or as it was.
    Sent(Option<ToolCall>),
}

fn judged_call(
    outcome: ChainOutcome<ToolCall>,
    call: &ToolCall,
    policy: &dyn PermissionPolicy,
) -> Judged {
    if let Some(reason) = outcome.blocked {
        return Judged::Refused(format!("Blocked by interceptor: {reason}"));
    }
    if let Some(ask) = outcome.ask {
        let (_, by, question) = *ask;
        if question.default != "allow" {
            return Judged::Refused(format!(
                "Blocked by interceptor: {by} asks an operator ({}), and the guard has none: \
                 its default answer is {}",
                question.prompt, question.default
            ));
        }
    }
    let effective = outcome.replaced.as_ref().unwrap_or(call);
    if policy.evaluate(effective) != Permission::Allow {
        return Judged::Refused(format!(
            "Permission denied for {} (the guard has no operator to ask)",
            effective.name
        ));
    }
    Judged::Sent(outcome.replaced)
}

/// `(id, call)` when `line` is a `tools/call` request.
fn tool_call_of(line: &[u8]) -> Option<(Value, ToolCall)> {
    let message: Value = serde_json::from_slice(line).ok()?;
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let id = message.get("id")?.clone();
    let params = message.get("params")?;
    let name = params.get("name")?.as_str()?;
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    Some((id.clone(), ToolCall::new(id.to_string(), name, arguments)))
}

/// `line` (a `tools/call` request) with `call`'s name and arguments.
fn rewrite_call(line: &[u8], call: &ToolCall) -> Vec<u8> {
    let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
        return line.to_vec();
    };
    message["params"]["name"] = json!(call.name);
    message["params"]["arguments"] =
        serde_json::from_str(call.arguments.as_str()).unwrap_or_else(|_| json!({}));
    message.to_string().into_bytes()
}

/// `(id as JSON text, message)` when `line` is a response (an `id`, no
/// `method`).
fn answer_of(line: &[u8]) -> Option<(String, Value)> {
    let message: Value = serde_json::from_slice(line).ok()?;
    if message.get("method").is_some() {
        return None;
    }
    let id = message.get("id")?.to_string();
    Some((id, message))
}

/// Whether `line` is a tool result (a response whose `result` has
/// `content`: only `tools/call` is answered so) — here, one for no call in
/// flight.
fn unasked_tool_result(line: &[u8]) -> bool {
    answer_of(line).is_some_and(|(_, message)| message["result"].get("content").is_some())
}

/// An MCP tool result saying `text` as an error.
fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The answer to `call` after the `tool_result` chain: `None` when it
/// passes unchanged.
fn judge_result(
    registry: &Arc<Registry>,
    call: &ToolCall,
    audited: &Audited,
    mut message: Value,
) -> Option<Vec<u8>> {
    let result = message.get_mut("result")?;
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    let chains = registry.get_all();
    if chains.tool_result.is_empty() {
        return None;
    }
    // Each text the client is shown: the content's text items, and every
    // string of the structured content (which carries the same data).
    let judge = |text: &str| {
        let seen = if failed {
            ToolResult::err(text)
        } else {
            ToolResult::ok(text)
        };
        let outcome = audited.run::<ToolResultSeam>(&chains.tool_result, call, &seen);
        match (outcome.blocked, outcome.replaced) {
            (Some(reason), _) => Err(reason),
            (None, Some(replaced)) => Ok(Some(replaced.error.unwrap_or(replaced.output))),
            (None, None) => Ok(None),
        }
    };
    let mut structured = result
        .as_object_mut()
        .and_then(|members| members.remove("structuredContent"));
    let seen: Vec<String> = texts_of(result, structured.as_mut())
        .into_iter()
        .filter_map(|text| text.as_str().map(str::to_owned))
        .collect();
    let mut verdicts = Vec::with_capacity(seen.len());
    for text in &seen {
        match judge(text) {
            Ok(verdict) => verdicts.push(verdict),
            Err(reason) => {
                *result = error_result(&format!("Blocked by interceptor: {reason}"));
                return Some(message.to_string().into_bytes());
            }
        }
    }
    let changed = verdicts.iter().any(Option::is_some);
    if changed {
        let texts = texts_of(result, structured.as_mut());
        for (text, verdict) in texts.into_iter().zip(verdicts) {
            if let Some(replaced) = verdict {
                *text = json!(replaced);
            }
        }
    }
    if let (Some(structured), Some(members)) = (structured, result.as_object_mut()) {
        members.insert("structuredContent".to_owned(), structured);
    }
    changed.then(|| message.to_string().into_bytes())
}

/// The texts of a result the client is shown, in order: its content's
/// text items, then every string of its structured content.
fn texts_of<'v>(result: &'v mut Value, structured: Option<&'v mut Value>) -> Vec<&'v mut Value> {
    let mut texts = Vec::new();
    if let Some(items) = result.get_mut("content").and_then(Value::as_array_mut) {
        texts.extend(
            items
                .iter_mut()
                .filter(|item| item.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|item| item.get_mut("text"))
                .filter(|text| text.is_string()),
        );
    }
    if let Some(structured) = structured {
        strings_of(structured, &mut texts);
    }
    texts
}

/// Every string inside `value`, in order.
fn strings_of<'v>(value: &'v mut Value, into: &mut Vec<&'v mut Value>) {
    match value {
        Value::String(_) => into.push(value),
        Value::Array(items) => items.iter_mut().for_each(|item| strings_of(item, into)),
        Value::Object(members) => members.values_mut().for_each(|item| strings_of(item, into)),
        _ => {}
    }
}
