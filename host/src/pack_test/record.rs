//! Recording a real session (`chimera run --record FILE`), and turning the
//! recording into a case, so a policy can be regression-tested against
//! real traffic without calling the model again.
//!
//! A recording is JSON lines, in the order things happened:
//!
//! ```text
//! {"type":"session","format":1,"chimera":"0.1.0","model":"gpt-4o-mini","packs":[{"name":"no-rm-rf","config":{…}}],"stream":false,"max_steps":25,"headers":[]}
//! {"type":"user","content":"clean the build"}
//! {"type":"request","call":1,"model":"gpt-4o-mini","messages":[…],"tools":[…],"kwargs":{},"headers":[…]}
//! {"type":"reply","call":1,"content":"","tool_calls":[{"id":"call_1","name":"bash","arguments":{…}}],"usage":{…}}
//! {"type":"answer","subject":"bash","answer":"allow"}
//! ```
//!
//! Requests are recorded as the provider received them, after every seam;
//! replies as the provider returned them, before any. Credentials are never
//! written: an API key travels outside the header surface, and headers
//! whose names say they carry one (`Authorization`, `x-api-key`, cookies,
//! anything naming a key, token, secret, password or auth) are left out of
//! every line. What the user typed and the model said is recorded as it
//! was: treat a recording like the conversation it holds.
//!
//! Long with its tests: the code is its first 697 lines, and the last 175
//! are the tests that pin it, kept beside it.

use super::case::{line_of, CaseError};
use crate::agent::{read_user_file, AgentEvent, Approver, EventBus, OperatorAnswer};
use crate::interception::Question;
use crate::providers::{
    Assembler, ModelResponse, Provider, ProviderCall, ProviderError, StreamDelta, Usage,
};
use crate::types::{Headers, Message, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The recording format this host writes and reads.
pub const RECORDING_FORMAT: u32 = 1;

/// The largest recording read.
pub const MAX_RECORDING_BYTES: u64 = 64 << 20;

/// Whether a header named `name` may carry a credential (and so is never
/// recorded).
#[must_use]
pub fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth", "key", "token", "secret", "password", "cookie", "session",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// `headers` without the ones that may carry a credential.
fn scrubbed(headers: &Headers) -> Headers {
    Headers(
        headers
            .iter()
            .filter(|(name, _)| !is_secret_header(name))
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect(),
    )
}

/// One pack of the recorded session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedPack {
    /// The entry-point name.
    pub name: String,
    /// Its configuration (`null`: the defaults).
    #[serde(default)]
    pub config: Value,
}

/// What a recording's first line says about the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// [`RECORDING_FORMAT`].
    pub format: u32,
    /// The version of the host that recorded it.
    pub chimera: String,
    /// The model the provider called.
    pub model: String,
    /// The packs, in load order.
    pub packs: Vec<RecordedPack>,
    /// The system prompt, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Whether replies streamed.
    #[serde(default)]
    pub stream: bool,
    /// Provider calls allowed per turn.
    pub max_steps: usize,
    /// The provider's header surface, credentials left out.
    #[serde(default)]
    pub headers: Headers,
}

/// One line of a recording, as written. (Read back kind by kind: a
/// model's arguments are raw JSON text, which an internally tagged enum
/// cannot read through.)
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Session(SessionInfo),
    User(UserLine),
    Request(RequestLine),
    Reply(ReplyLine),
    Failed(FailedLine),
    Answer(AnswerLine),
}

/// `{"type": "user"}`: a user turn began.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserLine {
    content: String,
}

/// `{"type": "request"}`: what the provider received.
#[derive(Debug, Clone, Serialize)]
struct RequestLine {
    call: u64,
    model: String,
    messages: Vec<Message>,
    tools: Vec<ToolSchema>,
    kwargs: serde_json::Map<String, Value>,
    headers: Option<Headers>,
}

/// `{"type": "reply"}`: what the provider returned for call `call`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ReplyLine {
    call: u64,
    content: String,
    tool_calls: Vec<ToolCall>,
    usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deltas: Option<Vec<String>>,
}

/// `{"type": "failed"}`: call `call` failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FailedLine {
    call: u64,
    error: String,
}

/// `{"type": "answer"}`: the operator answered a pack's question.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AnswerLine {
    subject: String,
    answer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload: Option<Value>,
}

/// A line's kind.
#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: String,
}

/// Writes a recording. Shared by the recording provider, the recording
/// approver and the bus listener that records user turns.
pub struct Recorder {
    file: Mutex<std::fs::File>,
    calls: AtomicU64,
}

impl Recorder {
    /// Creates (or truncates) `path`, readable by its owner only, and
    /// writes the session line. A FIFO or anything but a regular file in
    /// its place is refused, never waited on.
    ///
    /// # Errors
    ///
    /// `cannot write it: …` when `path` cannot be opened for writing,
    /// `not a regular file` when something else is in its place, or why the
    /// session line cannot be written.
    pub fn create(path: &Path, info: &SessionInfo) -> Result<Arc<Recorder>, String> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options
                .mode(0o600)
                .custom_flags(i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0));
        }
        let file = options
            .open(path)
            .map_err(|e| format!("cannot write it: {e}"))?;
        let metadata = file
            .metadata()
            .map_err(|e| format!("cannot write it: {e}"))?;
        if !metadata.is_file() {
            return Err("not a regular file".to_owned());
        }
        let recorder = Arc::new(Recorder {
            file: Mutex::new(file),
            calls: AtomicU64::new(0),
        });
        recorder.write(&Line::Session(SessionInfo {
            headers: scrubbed(&info.headers),
            ..info.clone()
        }))?;
        Ok(recorder)
    }

    fn write(&self, line: &Line) -> Result<(), String> {
        let text = serde_json::to_string(line).map_err(|e| e.to_string())?;
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        writeln!(file, "{text}").map_err(|e| format!("cannot record the session: {e}"))
    }

    /// `inner`, recording each request (as it arrives, after the seams)
    /// and each reply.
    #[must_use]
    pub fn provider(self: &Arc<Self>, inner: Arc<dyn Provider>) -> Arc<dyn Provider> {
        Arc::new(RecordingProvider {
            inner,
            recorder: Arc::clone(self),
        })
    }

    /// `inner`, recording each answer it gives to a pack's question (the
    /// answers a case replays; `--ask` approvals are the host's policy, not
    /// a pack's, and are not recorded).
    #[must_use]
    pub fn approver(self: &Arc<Self>, inner: Arc<dyn Approver>) -> Arc<dyn Approver> {
        Arc::new(RecordingApprover {
            inner,
            recorder: Arc::clone(self),
        })
    }

    /// Records each user turn of the top-level session publishing on `bus`.
    pub fn follow(self: &Arc<Self>, bus: &EventBus) {
        let recorder = Arc::clone(self);
        bus.subscribe(move |event| {
            if let AgentEvent::User { content } = event {
                let line = Line::User(UserLine {
                    content: content.clone(),
                });
                if let Err(error) = recorder.write(&line) {
                    tracing::warn!("{error}");
                }
            }
        });
    }

    /// Records `call` and returns its number.
    fn request(
        &self,
        call: &ProviderCall<'_>,
        provider: &dyn Provider,
    ) -> Result<u64, ProviderError> {
        let number = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let own = provider.request_headers();
        let headers = own
            .as_ref()
            .map(|own| scrubbed(call.headers.unwrap_or(own)));
        self.write(&Line::Request(RequestLine {
            call: number,
            model: call.model.unwrap_or(provider.model()).to_owned(),
            messages: call.messages.to_vec(),
            tools: call.tools.to_vec(),
            kwargs: call.kwargs.clone(),
            headers,
        }))
        .map_err(ProviderError::msg)?;
        Ok(number)
    }

    /// Records the outcome of call `number`.
    fn outcome(
        &self,
        number: u64,
        outcome: &Result<ModelResponse, ProviderError>,
        deltas: Option<Vec<String>>,
    ) -> Result<(), ProviderError> {
        let line = match outcome {
            Ok(response) => Line::Reply(ReplyLine {
                call: number,
                content: response.content.clone(),
                tool_calls: response.tool_calls.clone(),
                usage: response.usage,
                deltas,
            }),
            Err(error) => Line::Failed(FailedLine {
                call: number,
                error: error.to_string(),
            }),
        };
        self.write(&line).map_err(ProviderError::msg)
    }
}

/// A provider that records every request and reply of the one it wraps.
struct RecordingProvider {
    inner: Arc<dyn Provider>,
    recorder: Arc<Recorder>,
}

impl Provider for RecordingProvider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        let number = self.recorder.request(call, &*self.inner)?;
        let outcome = self.inner.complete(call);
        self.recorder.outcome(number, &outcome, None)?;
        outcome
    }

    fn stream(
        &self,
        call: &ProviderCall<'_>,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        let number = self.recorder.request(call, &*self.inner)?;
        let mut reply = StreamedReply::default();
        let outcome = self.inner.stream(call, &mut |delta| {
            reply.push(&delta);
            on_delta(delta);
        });
        let (response, deltas) = reply.finish();
        let recorded = outcome.map(|()| response);
        self.recorder.outcome(number, &recorded, Some(deltas))?;
        recorded.map(|_| ())
    }

    fn request_headers(&self) -> Option<Headers> {
        self.inner.request_headers()
    }
}

/// A streamed reply as the recording keeps it: the text pieces as they
/// came, and the whole reply.
#[derive(Default)]
struct StreamedReply {
    pieces: Vec<String>,
    reply: Assembler,
}

impl StreamedReply {
    fn push(&mut self, delta: &StreamDelta) {
        if let Some(text) = self.reply.push(delta.clone()) {
            self.pieces.push(text);
        }
    }

    fn finish(self) -> (ModelResponse, Vec<String>) {
        (self.reply.finish(), self.pieces)
    }
}

/// An approver that records the answers the one it wraps gives to packs.
struct RecordingApprover {
    inner: Arc<dyn Approver>,
    recorder: Arc<Recorder>,
}

impl Approver for RecordingApprover {
    fn approve(&self, call: &ToolCall) -> bool {
        self.inner.approve(call)
    }

    fn source(&self) -> &str {
        self.inner.source()
    }

    fn answer(&self, subject: &str, question: &Question) -> OperatorAnswer {
        let answer = self.inner.answer(subject, question);
        let payload = match &answer {
            OperatorAnswer::Edit(text) => serde_json::from_str(text).ok(),
            _ => None,
        };
        let line = Line::Answer(AnswerLine {
            subject: subject.to_owned(),
            answer: answer.as_str().to_owned(),
            payload,
        });
        if let Err(error) = self.recorder.write(&line) {
            tracing::warn!("{error}");
        }
        answer
    }
}

/// A recording being read, line by line.
#[derive(Default)]
struct Reading {
    session: Option<SessionInfo>,
    prompts: Vec<String>,
    replies: BTreeMap<u64, (ModelResponse, Option<Vec<String>>)>,
    failures: BTreeMap<u64, String>,
    answers: Vec<(String, String, Option<Value>)>,
}

impl Reading {
    /// Takes one line; the error is what is wrong with it.
    fn take(&mut self, line: &str) -> Result<(), String> {
        let bad = |error: serde_json::Error| format!("not a recording line: {error}");
        let kind: Kind = serde_json::from_str(line).map_err(bad)?;
        match (kind.kind.as_str(), &self.session) {
            ("session", None) => {
                let info: SessionInfo = serde_json::from_str(line).map_err(bad)?;
                if info.format != RECORDING_FORMAT {
                    return Err(format!(
                        "recording format {} (this chimera reads format {RECORDING_FORMAT})",
                        info.format
                    ));
                }
                self.session = Some(info);
            }
            ("session", Some(_)) => return Err("a second session line".to_owned()),
            (_, None) => {
                return Err(
                    "a recording starts with its session line (written by chimera run --record)"
                        .to_owned(),
                )
            }
            ("user", _) => {
                let user: UserLine = serde_json::from_str(line).map_err(bad)?;
                self.prompts.push(user.content);
            }
            ("request", _) => {}
            ("reply", _) => {
                let reply: ReplyLine = serde_json::from_str(line).map_err(bad)?;
                let response = ModelResponse {
                    content: reply.content,
                    tool_calls: reply.tool_calls,
                    usage: reply.usage,
                };
                self.replies.insert(reply.call, (response, reply.deltas));
            }
            ("failed", _) => {
                let failed: FailedLine = serde_json::from_str(line).map_err(bad)?;
                self.failures.insert(failed.call, failed.error);
            }
            ("answer", _) => {
                let answer: AnswerLine = serde_json::from_str(line).map_err(bad)?;
                self.answers
                    .push((answer.subject, answer.answer, answer.payload));
            }
            (other, _) => {
                return Err(format!(
                    "unknown line type `{}`",
                    crate::types::terminal_safe(&crate::types::one_line(other))
                ))
            }
        }
        Ok(())
    }
}

/// A recording, read back.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The session line.
    pub session: SessionInfo,
    /// The user turns, in order.
    pub prompts: Vec<String>,
    /// The replies in call order, up to the first failed call.
    pub replies: Vec<ModelResponse>,
    /// The text pieces of each streamed reply (same order as `replies`).
    pub deltas: Vec<Option<Vec<String>>>,
    /// Whether a call failed (its reply and every later one are left out,
    /// so the replay's script runs out there).
    pub failed_call: Option<String>,
    /// The operator's answers to packs' questions, in order.
    pub answers: Vec<(String, String, Option<Value>)>,
}

impl Recording {
    /// Reads the recording at `path`: a regular file of at most
    /// [`MAX_RECORDING_BYTES`], UTF-8 JSON lines this format knows.
    ///
    /// # Errors
    ///
    /// A `CaseError` naming the file when it cannot be read (not a regular
    /// file, over [`MAX_RECORDING_BYTES`], not UTF-8), or
    /// [`Recording::parse`]'s error for its text.
    pub fn from_file(path: &Path) -> Result<Recording, CaseError> {
        let text = read_user_file(path, MAX_RECORDING_BYTES)
            .map_err(|reason| CaseError::new(path, None, reason))?;
        Recording::parse(path, &text)
    }

    /// Parses recording `text` (read from `path`, for errors).
    ///
    /// # Errors
    ///
    /// A `CaseError` naming the first line that is not one of this format's; or
    /// naming the file when it has no session line or no user turn.
    pub fn parse(path: &Path, text: &str) -> Result<Recording, CaseError> {
        let mut reading = Reading::default();
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let number = line_of(text, offset);
            offset += line.len();
            if !line.trim().is_empty() {
                reading
                    .take(line)
                    .map_err(|message| CaseError::new(path, Some(number), message))?;
            }
        }
        let Some(session) = reading.session else {
            return Err(CaseError::new(
                path,
                None,
                "empty: no session line (write a recording with chimera run --record FILE)",
            ));
        };
        if reading.prompts.is_empty() {
            return Err(CaseError::new(path, None, "the recording has no user turn"));
        }
        let first_failure = reading.failures.into_iter().next();
        let kept = reading.replies.into_iter().take_while(|(call, _)| {
            first_failure
                .as_ref()
                .is_none_or(|(failed, _)| call < failed)
        });
        let (replies, deltas) = kept.map(|(_, reply)| reply).unzip();
        Ok(Recording {
            session,
            prompts: reading.prompts,
            replies,
            deltas,
            failed_call: first_failure.map(|(_, error)| error),
            answers: reading.answers,
        })
    }

    /// The recording as a case file's TOML text (see the [module
    /// docs](super) for the format).
    #[must_use]
    pub fn to_case(&self) -> String {
        let mut out = String::new();
        let session = &self.session;
        let _ = writeln!(
            out,
            "# Recorded by `chimera run --record` (chimera {}, model {}).",
            session.chimera, session.model
        );
        if let Some(error) = &self.failed_call {
            let _ = writeln!(
                out,
                "# A provider call failed here ({}); the script ends before it.",
                crate::types::one_line(error)
            );
        }
        let _ = writeln!(
            out,
            "description = {}",
            toml_string(&format!("recorded session with {}", session.model))
        );
        let _ = writeln!(out, "model = {}", toml_string(&session.model));
        let prompts: Vec<toml::Value> = self
            .prompts
            .iter()
            .map(|p| toml::Value::String(p.clone()))
            .collect();
        let _ = writeln!(out, "prompts = {}", toml::Value::Array(prompts));
        if let Some(system) = &session.system {
            let _ = writeln!(out, "system = {}", toml_string(system));
        }
        if session.stream {
            let _ = writeln!(out, "stream = true");
        }
        if session.max_steps != 25 {
            let _ = writeln!(out, "max_steps = {}", session.max_steps);
        }
        if !session.headers.0.is_empty() {
            let _ = writeln!(out, "\n[headers]");
            for (name, value) in session.headers.iter() {
                let _ = writeln!(out, "{} = {}", toml_key(name), toml_string(value));
            }
        }
        for pack in &session.packs {
            let _ = writeln!(out, "\n[[packs]]\nname = {}", toml_string(&pack.name));
            if !pack.config.is_null() {
                out.push_str(&json_entry("config", &pack.config));
            }
        }
        for (index, reply) in self.replies.iter().enumerate() {
            let _ = writeln!(out, "\n[[responses]]");
            if !reply.content.is_empty() {
                let _ = writeln!(out, "content = {}", toml_string(&reply.content));
            }
            if let Some(Some(deltas)) = self.deltas.get(index) {
                let pieces = deltas
                    .iter()
                    .map(|d| toml::Value::String(d.clone()))
                    .collect();
                let _ = writeln!(out, "deltas = {}", toml::Value::Array(pieces));
            }
            for call in &reply.tool_calls {
                let _ = writeln!(
                    out,
                    "[[responses.tool_calls]]\nid = {}\nname = {}",
                    toml_string(&call.id),
                    toml_string(&call.name)
                );
                match to_toml(&call.arguments.parse()) {
                    Some(value) => {
                        let _ = writeln!(out, "arguments = {value}");
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "arguments_json = {}",
                            toml_string(call.arguments.as_str())
                        );
                    }
                }
            }
            let usage = reply.usage;
            if usage != Usage::default() {
                let _ = writeln!(
                    out,
                    "[responses.usage]\ninput_tokens = {}\noutput_tokens = {}",
                    usage.input_tokens, usage.output_tokens
                );
            }
        }
        for (subject, answer, payload) in &self.answers {
            let _ = writeln!(
                out,
                "\n[[answers]]\ntool = {}\nanswer = {}",
                toml_string(subject),
                toml_string(answer)
            );
            if let Some(payload) = payload {
                out.push_str(&json_entry("payload", payload));
            }
        }
        out
    }
}

/// `key = <value>` for a JSON value: an inline TOML value when TOML can
/// hold it, else `key_json = '<JSON text>'`.
fn json_entry(key: &str, value: &Value) -> String {
    match to_toml(value) {
        Some(toml) => format!("{key} = {toml}\n"),
        None => format!("{key}_json = {}\n", toml_string(&value.to_string())),
    }
}

fn toml_string(text: &str) -> toml::Value {
    toml::Value::String(text.to_owned())
}

/// A table key: bare when it can be, else quoted.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_owned()
    } else {
        toml_string(key).to_string()
    }
}

/// `value` as TOML, when TOML can hold it (no `null`, integers within i64).
fn to_toml(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(flag) => toml::Value::Boolean(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => toml::Value::Integer(integer),
            None if number.is_f64() => toml::Value::Float(number.as_f64()?),
            None => return None,
        },
        Value::String(text) => toml::Value::String(text.clone()),
        Value::Array(items) => {
            toml::Value::Array(items.iter().map(to_toml).collect::<Option<_>>()?)
        }
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .map(|(key, value)| Some((key.clone(), to_toml(value)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack_test::Case;
    use crate::providers::ScriptedModel;

    fn info() -> SessionInfo {
        SessionInfo {
            format: RECORDING_FORMAT,
            chimera: "0.1.0".into(),
            model: "gpt-test".into(),
            packs: vec![
                RecordedPack {
                    name: "no-rm-rf".into(),
                    config: serde_json::json!({"pattern": "rm -rf", "unset": null}),
                },
                RecordedPack {
                    name: "plan-gate".into(),
                    config: Value::Null,
                },
            ],
            system: None,
            stream: false,
            max_steps: 25,
            headers: Headers(vec![
                ("X-Trace".into(), "t-1".into()),
                ("Authorization".into(), "Bearer sk-header".into()),
            ]),
        }
    }

    #[test]
    fn headers_that_may_carry_a_credential_are_never_recorded() {
        for name in [
            "Authorization",
            "x-api-key",
            "Proxy-Authorization",
            "Cookie",
            "X-Auth-Token",
            "api-key",
            "X-Secret",
        ] {
            assert!(is_secret_header(name), "{name}");
        }
        for name in ["X-Trace", "Content-Type", "OpenAI-Organization"] {
            assert!(!is_secret_header(name), "{name}");
        }
    }

    #[test]
    fn a_recorded_session_becomes_a_case_that_replays_the_same_replies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let recorder = Recorder::create(&path, &info()).unwrap();
        let script = r#"{"responses": [
            {"content": "on it", "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "rm -rf build", "cwd": null}}],
             "usage": {"input_tokens": 11, "output_tokens": 5}},
            {"content": "done"}]}"#;
        let model = ScriptedModel::from_json(script)
            .unwrap()
            .with_headers(Headers(vec![
                ("X-Trace".into(), "t-1".into()),
                ("X-Api-Key".into(), "sk-surface".into()),
            ]));
        let provider = recorder.provider(Arc::new(model));
        let bus = EventBus::new();
        recorder.follow(&bus);
        bus.publish(AgentEvent::User {
            content: "clean the build".into(),
        });
        let kwargs = serde_json::Map::new();
        let messages = [Message::user("clean the build")];
        let call = ProviderCall {
            model: None,
            messages: &messages,
            tools: &[],
            kwargs: &kwargs,
            headers: None,
        };
        let first = provider.complete(&call).unwrap();
        let mut streamed = Vec::new();
        provider
            .stream(&call, &mut |delta| streamed.push(delta))
            .unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-header"), "{text}");
        assert!(!text.contains("sk-surface"), "{text}");
        assert!(text.contains("t-1"), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "owner only: {mode:o}");
        }

        let recording = Recording::from_file(&path).unwrap();
        assert_eq!(recording.prompts, ["clean the build"]);
        assert_eq!(recording.replies.len(), 2);
        assert_eq!(recording.replies[0], first);
        assert_eq!(recording.deltas[1], Some(vec!["done".to_owned()]));
        let case_text = recording.to_case();
        let case = Case::parse(&dir.path().join("replayed.toml"), &case_text)
            .unwrap_or_else(|e| panic!("{e}\n{case_text}"));
        assert_eq!(case.model.as_deref(), Some("gpt-test"));
        assert_eq!(case.packs[0].name, "no-rm-rf");
        let config: Value = serde_json::from_str(&case.packs[0].config).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"pattern": "rm -rf", "unset": null})
        );
        assert_eq!(case.packs[1].config, "");
        assert_eq!(case.headers, [("X-Trace".to_owned(), "t-1".to_owned())]);
        let replay = ScriptedModel::from_json(&case.script).unwrap();
        let again = replay.complete(&call).unwrap();
        assert_eq!(again.content, first.content);
        assert_eq!(again.tool_calls, first.tool_calls);
        assert_eq!(again.usage, first.usage);
        assert_eq!(replay.complete(&call).unwrap().content, "done");
    }

    #[test]
    fn a_bad_recording_line_is_one_line_with_its_number() {
        let path = Path::new("session.jsonl");
        let session = serde_json::to_string(&Line::Session(info())).unwrap();
        let error = Recording::parse(path, &format!("{session}\n\n{{\"type\":\"mystery\"}}\n"))
            .unwrap_err();
        assert_eq!(error.line, Some(3), "{error}");
        assert!(!error.to_string().contains('\n'));
        let error = Recording::parse(path, "{\"type\":\"user\",\"content\":\"hi\"}\n").unwrap_err();
        assert!(
            error.message.contains("starts with its session line"),
            "{error}"
        );
        assert!(Recording::parse(path, "")
            .unwrap_err()
            .message
            .contains("chimera run --record"));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_the_recording_is_refused_never_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("pipe.jsonl");
        crate::test_support::make_fifo(&pipe);
        assert!(Recorder::create(&pipe, &info()).is_err(), "writing");
        let error = Recording::from_file(&pipe).unwrap_err();
        assert_eq!(error.message, "not a regular file", "reading");
        assert!(Recording::from_file(dir.path())
            .unwrap_err()
            .message
            .contains("not a regular file"));
    }

    #[test]
    fn replies_after_a_failed_call_are_left_out() {
        let mut text = serde_json::to_string(&Line::Session(info())).unwrap();
        for line in [
            r#"{"type":"user","content":"go"}"#,
            r#"{"type":"reply","call":1,"content":"one","tool_calls":[],"usage":{"input_tokens":0,"output_tokens":0}}"#,
            r#"{"type":"failed","call":2,"error":"HTTP 500"}"#,
            r#"{"type":"reply","call":3,"content":"three","tool_calls":[],"usage":{"input_tokens":0,"output_tokens":0}}"#,
        ] {
            text.push('\n');
            text.push_str(line);
        }
        let recording = Recording::parse(Path::new("r.jsonl"), &text).unwrap();
        assert_eq!(recording.replies.len(), 1);
        assert_eq!(recording.failed_call.as_deref(), Some("HTTP 500"));
        assert!(recording
            .to_case()
            .contains("# A provider call failed here (HTTP 500)"));
    }
}
