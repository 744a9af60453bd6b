//! The relay itself: two threads (client to server in [`super::calls`],
//! server to client in [`super::answers`]), what they share (the
//! requests in flight, the tools withheld, one writer each way), and how
//! the session ends.

use super::answers::unanswered_answer;
use super::calls::FromClient;
use super::error::GuardError;
use super::frame::{Frame, Framer};
use super::judge::{lock, Judging, Pending, Rules};
use super::message::Parsed;
use super::wire::say;
use crate::plugins::Registry;
use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

/// A writer one side of the relay writes whole messages to.
type Out = Mutex<Box<dyn Write + Send>>;

/// What the two sides of a stdio relay share.
pub(super) struct Relay {
    pub(super) judging: Judging,
    client: Out,
    server: Out,
    /// The client's requests the server has not answered, by id key.
    pub(super) in_flight: Mutex<HashMap<String, Pending>>,
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
            let outcome = relay_calls(&relay, input);
            // The client is gone: so is the server's input.
            *lock(&relay.server) = Box::new(std::io::sink());
            outcome
        })
    };
    let outcome = relay_answers(&relay, from_server);
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

/// Relays the client's messages until its input ends.
fn relay_calls(relay: &Relay, input: impl Read) -> Result<(), GuardError> {
    let mut framer = Framer::new(BufReader::new(input), "client");
    while let Some(frame) = framer.next_frame()? {
        let parsed = match frame {
            Frame::Value(bytes) => Parsed::of(bytes),
            Frame::Garbage(_) => Err("not a JSON-RPC message".to_owned()),
        };
        let judged = match parsed {
            Ok(parsed) => {
                let in_flight = |key: &str| lock(&relay.in_flight).contains_key(key);
                relay.judging.judge_client(&parsed, &in_flight)
            }
            Err(why) => FromClient::unreadable(&why),
        };
        for reply in &judged.replies {
            relay.to_client(reply)?;
        }
        lock(&relay.in_flight).extend(judged.pending);
        if let Some(bytes) = judged.forward {
            relay.to_server(&bytes)?;
        }
    }
    Ok(())
}

/// Relays the server's messages until its output ends, then answers each
/// request it left unanswered.
fn relay_answers(relay: &Relay, from_server: impl Read) -> Result<(), GuardError> {
    let mut framer = Framer::new(BufReader::new(from_server), "server");
    while let Some(frame) = framer.next_frame()? {
        let parsed = match frame {
            Frame::Value(bytes) => Parsed::of(bytes),
            Frame::Garbage(_) => Err("not a JSON-RPC message".to_owned()),
        };
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(why) => {
                say(&format!("withheld a message from the server: {why}"));
                continue;
            }
        };
        let mut pending = |key: &str| lock(&relay.in_flight).remove(key);
        let judged = relay.judging.judge_server(&parsed, &mut pending);
        for reply in &judged.to_server {
            relay.to_server(reply)?;
        }
        if let Some(bytes) = judged.forward {
            relay.to_client(&bytes)?;
        }
    }
    // The server is gone: every request it did not answer gets an answer.
    let unanswered: Vec<(String, Pending)> = lock(&relay.in_flight).drain().collect();
    for (_, pending) in unanswered {
        relay.to_client(&unanswered_answer(
            &pending,
            "the MCP server ended before it answered",
        ))?;
    }
    Ok(())
}
