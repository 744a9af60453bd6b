//! The fixture pack: the test double for the host's chain, loader and loop
//! tests. Each seam's behaviour comes from the JSON config:
//!
//! ```json
//! { "tool_call": { "action": "block", "reason": "no", "tools": ["bash"] },
//!   "tool_result": { "action": "replace", "find": "hello", "with": "[REDACTED]" },
//!   "constructor": "panic" }
//! ```
//!
//! A `tool_result` replacement's `{relayed}` says what the session facts
//! said when it was judged (`true` behind a gateway).
//!
//! The output-side seams take the same behaviour (`model_response`,
//! `output`: `replace` edits the text, `notice` rides on every decision
//! but allow), and `stream_chunk` takes a word gate
//! (`{"ban": "forbidden", "reason": "…", "notice": "…"}`, see [`StreamGate`]).
//!
//! Actions: `allow`, `block`, `replace`, `error`, `panic`, `invalid` (a
//! replacement the host must refuse), and the hostile ones for isolated
//! packs, which take the whole process down or try to leave it: `hang`,
//! `segfault`, `abort`, `exit`, `allocate` and `escape` (see [`Action`]).
//! `count` registers that many identical
//! interceptors (chains for benchmarks). A seam left out registers nothing.
//! The library exports the same pack twice, as `fixture` and `fixture-alt`,
//! so tests can load two packs from one file. `CHIMERA_FIXTURE_TAG` at build
//! time sets [`BUILD_TAG`] (a rebuilt "new version" for hot-swap tests); a
//! `{tag}` in a reason is replaced by it.

use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::{Scope, Window};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The build's tag (`CHIMERA_FIXTURE_TAG` at compile time, else `v1`).
pub const BUILD_TAG: &str = match option_env!("CHIMERA_FIXTURE_TAG") {
    Some(tag) => tag,
    None => "v1",
};

/// What one seam's interceptors do.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Pass through.
    #[default]
    Allow,
    /// Block with `reason`.
    Block,
    /// Replace (seam-specific, see [`Behavior`]).
    Replace,
    /// Return an error with `reason`.
    Error,
    /// Panic with `reason`.
    Panic,
    /// Return a replacement the host must refuse.
    Invalid,
    /// Never answer: spin on the CPU forever (no sleep the host could
    /// interrupt).
    Hang,
    /// Write through a null pointer: `SIGSEGV`.
    Segfault,
    /// `std::process::abort()`: `SIGABRT`.
    Abort,
    /// `std::process::exit(3)`.
    Exit,
    /// Allocate and touch memory without bound (64 MiB at a time, kept),
    /// until the process runs out.
    Allocate,
    /// Try to leave the process: create the file at `with` and open a TCP
    /// connection to the address in `find` (`host:port`), then block with a
    /// reason saying how each went, e.g. `write: denied (EACCES); connect:
    /// denied (EPERM)` or `write: ok; connect: ok`.
    Escape,
}

/// One seam's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Behavior {
    /// What to do.
    pub action: Action,
    /// Block reason / error text / panic message.
    pub reason: String,
    /// Text to replace (empty: append `with` instead).
    pub find: String,
    /// Replacement text.
    pub with: String,
    /// How many identical interceptors to register.
    pub count: usize,
    /// Tool seams: act only on these tool names (empty: all); others allow.
    pub tools: Vec<String>,
    /// `provider_request` replace: headers to set.
    pub set_headers: BTreeMap<String, String>,
    /// `provider_request` replace: kwargs to use instead of the originals.
    pub set_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sleep this long in every call before answering (a slow pack).
    pub sleep_ms: u64,
    /// A user-facing notice attached to every decision but allow.
    pub notice: String,
    /// Declare the interceptors fail-closed (`Registrar::fail_closed`).
    pub fail_closed: bool,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            action: Action::Allow,
            reason: String::new(),
            find: String::new(),
            with: String::new(),
            count: 1,
            tools: Vec::new(),
            set_headers: BTreeMap::new(),
            set_kwargs: None,
            sleep_ms: 0,
            notice: String::new(),
            fail_closed: false,
        }
    }
}

impl Behavior {
    fn edit(&self, text: &str) -> String {
        if self.find.is_empty() {
            format!("{text}{}", self.with)
        } else {
            text.replace(&self.find, &self.with)
        }
    }

    fn reason(&self) -> String {
        self.reason.replace("{tag}", BUILD_TAG)
    }

    #[inline]
    fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == tool)
    }

    /// The shared part of every action but `replace` and `invalid`.
    #[inline]
    fn verdict<T>(
        &self,
        replace: impl FnOnce() -> T,
        invalid: impl FnOnce() -> T,
    ) -> InterceptResult<T> {
        if self.sleep_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        }
        match self.action {
            Action::Allow => Ok(Decision::Allow),
            Action::Block => Ok(Decision::Block(self.reason())),
            Action::Error => Err(InterceptError::msg(self.reason())),
            Action::Panic => panic!("{}", self.reason()),
            Action::Replace => Ok(Decision::Replace(replace())),
            Action::Invalid => Ok(Decision::Replace(invalid())),
            Action::Hang => loop {
                std::hint::spin_loop();
            },
            Action::Segfault => segfault(),
            Action::Abort => std::process::abort(),
            Action::Exit => std::process::exit(3),
            Action::Allocate => allocate_forever(),
            Action::Escape => Ok(Decision::Block(self.escape())),
        }
    }

    /// The `escape` attempt: each of write and connect, as `ok` or
    /// `denied (ERRNO)`.
    fn escape(&self) -> String {
        let write = std::fs::write(&self.with, "escaped");
        let connect = self.find.parse::<std::net::SocketAddr>().map_or_else(
            |e| Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)),
            |addr| std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)),
        );
        format!("write: {}; connect: {}", outcome(&write), outcome(&connect))
    }
}

/// `ok`, or `denied (EPERM)` and the like.
fn outcome<T>(result: &std::io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(e) => match e.raw_os_error() {
            Some(1) => "denied (EPERM)".to_owned(),
            Some(13) => "denied (EACCES)".to_owned(),
            Some(2) => "failed (ENOENT)".to_owned(),
            Some(111) => "failed (ECONNREFUSED)".to_owned(),
            Some(n) => format!("failed (errno {n})"),
            None => format!("failed ({e})"),
        },
    }
}

/// The `segfault` action.
#[allow(
    unsafe_code,
    reason = "a deliberate crash: the test double for a pack that corrupts its process"
)]
fn segfault() -> ! {
    // SAFETY: not safe at all, on purpose: this write faults, and the
    // process dies of SIGSEGV before anything could observe it.
    unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
    unreachable!("a write through a null pointer returned")
}

/// The `allocate` action: every page touched, every block kept.
fn allocate_forever() -> ! {
    const BLOCK: usize = 64 << 20;
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        kept.push(vec![1u8; BLOCK]);
        std::hint::black_box(&kept);
    }
}

/// The configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// A `provider_request` gate that pauses the first `times` requests.
    pub provider_request_pause: Option<PauseGate>,
    /// A `tool_call` gate that asks the operator about every call
    /// (registered before `tool_call`).
    pub tool_call_ask: Option<AskGate>,
    /// An `output` gate that asks for retries (registered after `output`).
    pub output_retry: Option<RetryGate>,
    /// `model_response` behaviour.
    pub model_response: Option<Behavior>,
    /// `output` behaviour.
    pub output: Option<Behavior>,
    /// `stream_chunk` behaviour.
    pub stream_chunk: Option<StreamGate>,
    /// `error` or `panic` to make the constructor fail.
    pub constructor: Option<String>,
    /// Builds whose [`BUILD_TAG`] is listed refuse this config (a
    /// constructor error), so a reload to them fails.
    pub refuse_tags: Vec<String>,
    /// Builds whose tag is listed panic in the constructor.
    pub panic_tags: Vec<String>,
    /// `context` behaviour.
    pub context: Option<Behavior>,
    /// `provider_request` behaviour.
    pub provider_request: Option<Behavior>,
    /// `tool_call` behaviour.
    pub tool_call: Option<Behavior>,
    /// `tool_result` behaviour.
    pub tool_result: Option<Behavior>,
    /// Each `tool_call` interceptor call first adds 1 to the
    /// conversation's counter `calls` in the host's gate state this many
    /// times; a block's reason then has `{total}` replaced by the last
    /// total (a pack that counts through the host, or floods it).
    pub state_ops: u32,
}

/// The `stream_chunk` behaviour: a word gate that holds a trailing partial
/// word and blocks when `ban` (ASCII, any case) appears, scanning only from
/// the start of the word straddling the released boundary (linear in the
/// stream). `action` `error` / `panic` fail instead.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamGate {
    /// `allow` (the gate), `error` or `panic`.
    pub action: Action,
    /// The banned word (empty: never blocks, still holds).
    pub ban: String,
    /// The block reason.
    pub reason: String,
    /// A notice attached to the block.
    pub notice: String,
    /// Release every delta whole instead of holding a trailing partial word.
    pub no_hold: bool,
    /// Declare the gate fail-closed (`Registrar::fail_closed`).
    pub fail_closed: bool,
    /// Declare a stream window of this many bytes
    /// (`Registrar::stream_window`; 0: none).
    pub window: usize,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'\'' | b'_' | b'-')
}

impl StreamGate {
    fn judge(&self, session: Session<'_>, segment: Segment<'_>) -> StreamResult {
        match self.action {
            Action::Error => return Err(InterceptError::msg(self.reason.clone())),
            Action::Panic => panic!("{}", self.reason),
            _ => {}
        }
        let full = segment.full().as_bytes();
        let released = segment.released_offset();
        let mut from = released;
        while from > 0 && is_word(full[from - 1]) {
            from -= 1;
        }
        let ban = self.ban.as_bytes();
        if !ban.is_empty()
            && full[from..]
                .windows(ban.len())
                .any(|w| w.eq_ignore_ascii_case(ban))
        {
            if !self.notice.is_empty() {
                session.notice(self.notice.clone());
            }
            return Ok(StreamDecision::Block(self.reason.clone()));
        }
        if self.no_hold || segment.is_final() {
            return Ok(StreamDecision::Release);
        }
        let mut end = full.len();
        while end > released && is_word(full[end - 1]) {
            end -= 1;
        }
        Ok(StreamDecision::HoldFrom(end))
    }
}

/// An `output` gate that asks the model again until the answer contains
/// `until`, at most `max` times; then `exhausted` (`allow` or `block` with
/// `reason`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryGate {
    /// The text a good answer contains.
    pub until: String,
    /// The feedback for the model.
    pub feedback: String,
    /// The retry bound.
    pub max: u32,
    /// `allow` or `block`.
    pub exhausted: String,
    /// The block reason on exhaustion.
    pub reason: String,
}

impl RetryGate {
    fn judge(&self, answer: &str) -> OutputDecision {
        if answer.contains(&self.until) {
            return OutputDecision::Allow;
        }
        let exhausted = if self.exhausted == "block" {
            Exhausted::Block(self.reason.clone())
        } else {
            Exhausted::Allow
        };
        OutputDecision::Retry(Retry {
            feedback: self.feedback.clone(),
            max: self.max,
            exhausted,
        })
    }
}

/// A `provider_request` gate (a rate limiter) that pauses the first
/// `times` requests for `wait_ms`, then allows.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PauseGate {
    /// How many requests to pause.
    pub times: u64,
    /// How long each pause asks for.
    pub wait_ms: u64,
    /// Why.
    pub reason: String,
}

/// A `tool_call` gate that asks the operator `prompt` about every call.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AskGate {
    /// The question.
    pub prompt: String,
    /// Offer `edit`.
    pub edit: bool,
    /// Wait at most this long (none: as long as it takes).
    pub timeout_ms: Option<u64>,
    /// A timeout allows (else it rejects).
    pub default_allow: bool,
}

/// Names the two exported copies of the pack.
pub trait Flavor: Send + Sync + 'static {
    /// Entry-point name.
    const NAME: &'static str;
}

/// `fixture`.
pub struct Main;
impl Flavor for Main {
    const NAME: &'static str = "fixture";
}

/// `fixture-alt`.
pub struct Alt;
impl Flavor for Alt {
    const NAME: &'static str = "fixture-alt";
}

/// The fixture pack.
pub struct Fixture<F: Flavor> {
    config: Config,
    /// Interceptor calls so far (exported as hot-swap state).
    calls: AtomicU64,
    flavor: PhantomData<F>,
}

/// `fixture`.
pub type FixturePack = Fixture<Main>;
/// `fixture-alt`.
pub type FixtureAltPack = Fixture<Alt>;

fn edit_arguments(value: &mut serde_json::Value, behavior: &Behavior) {
    match value {
        serde_json::Value::String(text) => *text = behavior.edit(text),
        serde_json::Value::Array(items) => {
            for v in items.iter_mut() {
                edit_arguments(v, behavior);
            }
        }
        serde_json::Value::Object(map) => {
            map.values_mut().for_each(|v| edit_arguments(v, behavior));
        }
        _ => {}
    }
}

impl<F: Flavor> Fixture<F> {
    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// The output-side seams: `model_response`, `output`, `stream_chunk`.
    fn register_outward(self: &Arc<Self>, registrar: &mut Registrar) {
        let text_seam = |b: &Behavior, session: Session<'_>, text: &str| {
            let answer = b.verdict(|| b.edit(text), || b.edit(text));
            if !b.notice.is_empty() && !matches!(answer, Ok(Decision::Allow)) {
                session.notice(b.notice.clone());
            }
            answer
        };
        if let Some(behavior) = self.config.model_response.clone() {
            for i in 0..behavior.count {
                let (me, b) = (Arc::clone(self), behavior.clone());
                let name = format!("model_response-{i}");
                registrar.model_response(&name, move |session, reply| {
                    me.count();
                    text_seam(&b, session, reply.content())
                });
                if behavior.fail_closed {
                    registrar.fail_closed(&name);
                }
            }
        }
        if let Some(behavior) = self.config.output.clone() {
            for i in 0..behavior.count {
                let (me, b) = (Arc::clone(self), behavior.clone());
                let name = format!("output-{i}");
                registrar.output(&name, move |session, answer| {
                    me.count();
                    text_seam(&b, session, answer)
                });
                if behavior.fail_closed {
                    registrar.fail_closed(&name);
                }
            }
        }
        if let Some(pause) = self.config.provider_request_pause.clone() {
            let me = Arc::clone(self);
            let paused = Arc::new(AtomicU64::new(0));
            registrar.provider_request_gate("provider_request_pause-0", move |_, _| {
                me.count();
                if paused.fetch_add(1, Ordering::Relaxed) >= pause.times {
                    return Ok(GateDecision::Allow);
                }
                Ok(GateDecision::RetryAfter {
                    wait: std::time::Duration::from_millis(pause.wait_ms),
                    reason: pause.reason.clone(),
                })
            });
        }
        if let Some(ask) = self.config.tool_call_ask.clone() {
            let me = Arc::clone(self);
            registrar.tool_call_gate("tool_call_ask-0", move |_, call| {
                me.count();
                Ok(GateDecision::Ask(Ask {
                    prompt: format!("{} ({})", ask.prompt, call.name()),
                    edit: ask.edit,
                    timeout: ask.timeout_ms.map(std::time::Duration::from_millis),
                    default_allow: ask.default_allow,
                }))
            });
        }
        if let Some(gate) = self.config.output_retry.clone() {
            let me = Arc::clone(self);
            registrar.output_gate("output_retry-0", move |_, answer| {
                me.count();
                Ok(gate.judge(answer))
            });
        }
        if let Some(gate) = self.config.stream_chunk.clone() {
            if gate.fail_closed {
                registrar.fail_closed("stream_chunk-0");
            }
            if gate.window > 0 {
                registrar.stream_window("stream_chunk-0", gate.window);
            }
            let me = Arc::clone(self);
            registrar.stream_chunk("stream_chunk-0", move |session, segment| {
                me.count();
                gate.judge(session, segment)
            });
        }
    }
}

impl<F: Flavor> Pack for Fixture<F> {
    const NAME: &'static str = F::NAME;
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "test double: configurable behaviour on every seam";
    const SEAMS: &'static [SeamKind] = &[
        SeamKind::Context,
        SeamKind::ProviderRequest,
        SeamKind::ToolCall,
        SeamKind::ToolResult,
        SeamKind::ModelResponse,
        SeamKind::Output,
        SeamKind::StreamChunk,
    ];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.refuse_tags.iter().any(|t| t == BUILD_TAG) {
            return Err(PackError::msg(format!(
                "build {BUILD_TAG} refuses this configuration"
            )));
        }
        assert!(
            !config.panic_tags.iter().any(|t| t == BUILD_TAG),
            "build {BUILD_TAG} panics on this configuration"
        );
        match config.constructor.as_deref() {
            Some("error") => return Err(PackError::msg("constructor refused on purpose")),
            Some("panic") => panic!("constructor panicked on purpose"),
            _ => {}
        }
        Ok(Fixture {
            config,
            calls: AtomicU64::new(0),
            flavor: PhantomData,
        })
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one registration per seam and behaviour, read as one table"
    )]
    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        self.register_outward(registrar);
        if let Some(behavior) = self.config.context.clone() {
            for i in 0..behavior.count {
                let (me, b) = (Arc::clone(&self), behavior.clone());
                registrar.context(&format!("context-{i}"), move |_, messages| {
                    me.count();
                    b.verdict(
                        || {
                            let mut owned = messages.to_owned();
                            for m in &mut owned {
                                m.content = b.edit(&m.content);
                            }
                            owned
                        },
                        || {
                            let mut owned = messages.to_owned();
                            if let Some(first) = owned.first_mut() {
                                "robot".clone_into(&mut first.role);
                            }
                            owned
                        },
                    )
                });
            }
        }
        if let Some(behavior) = self.config.provider_request.clone() {
            for i in 0..behavior.count {
                let (me, b) = (Arc::clone(&self), behavior.clone());
                registrar.provider_request(&format!("provider_request-{i}"), move |_, request| {
                    me.count();
                    b.verdict(
                        || {
                            let mut owned = request.to_owned();
                            for m in &mut owned.messages {
                                if !b.with.is_empty() || !b.find.is_empty() {
                                    m.content = b.edit(&m.content);
                                }
                            }
                            if let Some(headers) = owned.headers.as_mut() {
                                for (name, value) in &b.set_headers {
                                    match headers
                                        .iter_mut()
                                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                                    {
                                        Some(slot) => slot.1.clone_from(value),
                                        None => headers.push((name.clone(), value.clone())),
                                    }
                                }
                            }
                            if let Some(kwargs) = &b.set_kwargs {
                                owned.kwargs_json =
                                    serde_json::Value::Object(kwargs.clone()).to_string();
                            }
                            owned
                        },
                        || {
                            let mut owned = request.to_owned();
                            "[1, 2, 3]".clone_into(&mut owned.kwargs_json);
                            owned
                        },
                    )
                });
            }
        }
        if let Some(behavior) = self.config.tool_call.clone() {
            let state = registrar.state();
            for i in 0..behavior.count {
                let (me, b, state) = (Arc::clone(&self), behavior.clone(), state.clone());
                registrar.tool_call(&format!("tool_call-{i}"), move |session, call| {
                    me.count();
                    if !b.applies_to(call.name()) {
                        return Ok(Decision::Allow);
                    }
                    let mut total = None;
                    for _ in 0..me.config.state_ops {
                        let scope = Scope::conversation(&session);
                        total = Some(state.incr_by(scope, "calls", 1, Window::None)?);
                    }
                    if let (Some(total), Action::Block) = (total, b.action) {
                        let reason = b.reason().replace("{total}", &total.to_string());
                        return Ok(Decision::Block(reason));
                    }
                    b.verdict(
                        || {
                            let mut arguments = call.arguments().unwrap_or_default();
                            edit_arguments(&mut arguments, &b);
                            let mut owned = call.to_owned();
                            owned.arguments_json = arguments.to_string();
                            owned
                        },
                        || {
                            let mut owned = call.to_owned();
                            "{not json".clone_into(&mut owned.arguments_json);
                            owned
                        },
                    )
                });
            }
        }
        if let Some(behavior) = self.config.tool_result.clone() {
            for i in 0..behavior.count {
                let (me, b) = (Arc::clone(&self), behavior.clone());
                registrar.tool_result(&format!("tool_result-{i}"), move |session, call, result| {
                    me.count();
                    if !b.applies_to(call.name()) {
                        return Ok(Decision::Allow);
                    }
                    b.verdict(
                        || {
                            let mut owned = result.to_owned();
                            let relayed = session.is_relayed().to_string();
                            owned.output = b.edit(&owned.output).replace("{relayed}", &relayed);
                            owned
                        },
                        || {
                            let mut owned = result.to_owned();
                            "not json at all".clone_into(&mut owned.metadata_json);
                            owned
                        },
                    )
                });
            }
        }
    }

    fn export_state(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({ "calls": self.calls.load(Ordering::Relaxed), "tag": BUILD_TAG }))
    }

    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let calls = state["calls"]
            .as_u64()
            .ok_or_else(|| PackError::msg("state has no call count"))?;
        self.calls.fetch_add(calls, Ordering::Relaxed);
        Ok(())
    }
}

chimera_plugin_api::export_packs!(FixturePack, FixtureAltPack);
