//! The relay itself: two threads (client to server in [`super::calls`],
//! server to client in [`super::answers`]), what they share (the
//! requests in flight, the tools withheld, one writer each way), and how
//! the session ends.

use super::judge::Audited;
use crate::agent::PermissionPolicy;
use crate::audit::AuditLog;
use crate::jsondoc::{object_from, string_literal, Node, Splice};
use crate::plugins::Registry;
use crate::types::ToolCall;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The longest message relayed, in bytes.
pub const MAX_LINE: usize = 16 << 20;

/// Why the guard stopped before its server did.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

/// What the guard applies beside the packs: the permission policy (after
/// the `tool_call` chain, as in the loop; a call it does not allow is
/// refused, since there is no operator to ask), the server's pinned tools
/// and the audit log.
#[derive(Clone)]
pub struct Rules {
    /// Which calls may go to the server (`--deny TOOL`).
    pub policy: Arc<dyn PermissionPolicy>,
    /// The server's tools as `chimera mcp pin` recorded them, when it was
    /// pinned: a listed tool that is not so is withheld.
    pub pins: Option<super::pin::PinnedServer>,
    /// Where every decision is recorded (`--audit FILE`).
    pub audit: Option<AuditLog>,
}

/// A request the client sent and the server has not answered: its
/// method, the call its answer is judged as the result of (a synthetic
/// `mcp:METHOD` call for a method other than `tools/call`), and where its
/// decisions are audited.
pub(super) struct Pending {
    pub(super) method: String,
    pub(super) call: ToolCall,
    pub(super) audited: Audited,
}

/// A writer one side of the relay writes whole messages to.
type Out = Mutex<Box<dyn Write + Send>>;

/// What judges messages, whatever carries them: the packs, the rules,
/// and the tools the last listing withheld.
pub(super) struct Judging {
    pub(super) registry: Arc<Registry>,
    pub(super) rules: Rules,
    /// Tools the last listing withheld, by name, with why.
    pub(super) withheld: Mutex<HashMap<String, String>>,
}

impl Judging {
    /// Judging by `registry`'s chains and `rules`.
    pub(super) fn new(registry: &Arc<Registry>, rules: Rules) -> Judging {
        Judging {
            registry: Arc::clone(registry),
            rules,
            withheld: Mutex::default(),
        }
    }
}

/// What the two sides of a stdio relay share.
pub(super) struct Relay {
    pub(super) judging: Judging,
    client: Out,
    server: Out,
    /// The client's requests the server has not answered, by id key.
    pub(super) in_flight: Mutex<HashMap<String, Pending>>,
}

/// `mutex` locked, whatever a panicking holder left.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Relay {
    /// Writes `message` and a newline to the client.
    pub(super) fn to_client(&self, message: &[u8]) -> Result<(), GuardError> {
        send(&mut **lock(&self.client), message, "client")
    }

    /// Writes `message` and a newline to the server.
    pub(super) fn to_server(&self, message: &[u8]) -> Result<(), GuardError> {
        send(&mut **lock(&self.server), message, "server")
    }
}

/// Writes `message` and a newline to `to`, flushed.
fn send(to: &mut dyn Write, message: &[u8], who: &'static str) -> Result<(), GuardError> {
    to.write_all(message)
        .and_then(|()| to.write_all(b"\n"))
        .and_then(|()| to.flush())
        .map_err(|e| GuardError::Io(who, e))
}

/// One line on standard error, safe to print.
pub(super) fn say(line: &str) {
    eprintln!("mcp guard: {}", crate::types::terminal_safe(line));
}

/// A JSON-RPC answer to `id` (its raw JSON) with `member` (`result` or
/// `error`) holding `value` (raw JSON).
pub(super) fn answer(id: &[u8], member: &str, value: &[u8]) -> Vec<u8> {
    object_from([("jsonrpc", &b"\"2.0\""[..]), ("id", id), (member, value)])
}

/// A JSON-RPC error object.
pub(super) fn rpc_error(code: i32, message: &str) -> Vec<u8> {
    object_from([
        ("code", code.to_string().as_bytes()),
        ("message", string_literal(message).as_bytes()),
    ])
}

/// An MCP tool result saying `text` as an error.
pub(super) fn error_result(text: &str) -> Vec<u8> {
    let item = object_from([
        ("type", &b"\"text\""[..]),
        ("text", string_literal(text).as_bytes()),
    ]);
    object_from([
        ("content", crate::jsondoc::array_from([item]).as_slice()),
        ("isError", b"true"),
    ])
}

/// `member` of `src` with `splice`'s edits (all inside it) applied.
pub(super) fn render_member(src: &[u8], member: &Node, splice: &Splice) -> Option<Vec<u8>> {
    let rendered = splice.render(src).ok()?;
    let end = (member.span.end + rendered.len()).checked_sub(src.len())?;
    rendered.get(member.span.start..end).map(<[u8]>::to_vec)
}

/// The messages of one frame as they go on: a batch's members (those that
/// go on) as a batch, or the one message.
pub(super) fn reassemble(batch: bool, members: Vec<Vec<u8>>) -> Option<Vec<u8>> {
    if batch {
        (!members.is_empty()).then(|| crate::jsondoc::array_from(members))
    } else {
        members.into_iter().next()
    }
}

/// Relays between the client on `input`/`output` and the MCP server
/// `command` (program and arguments) until the server's output ends,
/// judging every message both ways by `registry`'s chains (taken afresh
/// for each message, so a hot swap applies to the next) and by `rules`,
/// each decision recorded in its audit log when there is one (one
/// exchange per request, named by its JSON-RPC id). Returns the server's
/// exit status.
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
    let relay = Arc::new(Relay {
        judging: Judging::new(registry, rules),
        client: Mutex::new(Box::new(output)),
        server: Mutex::new(Box::new(to_server)),
        in_flight: Mutex::default(),
    });
    // The client's side on a thread of its own, not joined: it may wait on
    // the client's input after the server is gone. Its end closes the
    // server's input, which ends the server and so the other side.
    let calls = {
        let relay = Arc::clone(&relay);
        std::thread::spawn(move || {
            let outcome = super::calls::relay_calls(&relay, input);
            // The client is gone: so is the server's input.
            *lock(&relay.server) = Box::new(std::io::sink());
            outcome
        })
    };
    let outcome = super::answers::relay_answers(&relay, from_server);
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
