//! Printing the transcript: JSON lines (`--json`) or a readable, colored view.
//!
//! Colors go through `anstream`, which drops them when stdout is not a
//! terminal and honours `NO_COLOR` / `CLICOLOR_FORCE`. Every text that came
//! from a model, a tool or a pack passes [`clean`] first, so it can never
//! carry an escape sequence of its own to the terminal.

use anstyle::{AnsiColor, Style};
use chimera_host::agent::{AgentEvent, NestedEvent, RunUsage, SourceUsage};
use chimera_host::interception::{EventDecision, InterceptorEvent};
use chimera_host::types::terminal_safe as clean;
use chimera_host::types::ToolCall;
use std::io::Write;
use std::sync::Mutex;

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const USER: Style = AnsiColor::Cyan.on_default().bold();
const CALL: Style = AnsiColor::Magenta.on_default();
const OK: Style = AnsiColor::Green.on_default();
const FAILED: Style = AnsiColor::Red.on_default();
const WARN: Style = AnsiColor::Yellow.on_default();
const ALERT: Style = AnsiColor::Red.on_default().bold();
const NEWS: Style = AnsiColor::Blue.on_default().bold();
const DONE: Style = AnsiColor::Green.on_default().bold();

/// How many lines of a tool result the readable view shows.
const PREVIEW_LINES: usize = 12;

/// Prints events to stdout as they happen.
pub(crate) struct Renderer {
    json: bool,
    out: Mutex<Output>,
}

/// The terminal, and whether a streamed reply line is still open.
struct Output {
    stdout: anstream::AutoStream<std::io::Stdout>,
    /// A streamed reply is being printed on the current line.
    open: bool,
    /// This step's reply text was already printed as it streamed.
    streamed: bool,
    /// What each session's current run has shown (index: delegation depth).
    seen: Vec<Seen>,
}

/// What the readable view showed of one session's current run, so that it
/// says each thing once: a block's reason is not repeated by the result it
/// produced, nor the final answer by the closing line.
#[derive(Default)]
struct Seen {
    /// The last reply text shown (the `assistant` event's).
    reply: Option<String>,
    /// The last notice shown.
    notice: Option<String>,
    /// The last block (or failure) an interceptor line showed.
    block: Option<ShownBlock>,
}

/// An interceptor line that stopped something.
struct ShownBlock {
    interceptor: String,
    /// The call it stopped (empty: not a tool seam).
    call_id: String,
    reason: String,
}

impl ShownBlock {
    /// Whether `text` (a tool result, a run's output) only restates this
    /// block: it carries the reason, or the error text without the
    /// `<interceptor>: ` an error's reason starts with.
    fn restated_by(&self, text: &str) -> bool {
        let reason = self
            .reason
            .strip_prefix(&format!("{}: ", self.interceptor))
            .unwrap_or(&self.reason);
        !reason.is_empty() && text.contains(reason)
    }
}

/// `text` in `style` (the stream drops the style where colors are off).
fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

impl Renderer {
    pub(crate) fn new(json: bool) -> Self {
        let choice = if json {
            anstream::ColorChoice::Never
        } else {
            anstream::ColorChoice::Auto
        };
        Renderer {
            json,
            out: Mutex::new(Output {
                stdout: anstream::AutoStream::new(std::io::stdout(), choice),
                open: false,
                streamed: false,
                seen: Vec::new(),
            }),
        }
    }

    pub(crate) fn render(&self, event: &AgentEvent) {
        let mut out = self
            .out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.json {
            let text = serde_json::to_string(event).unwrap_or_default();
            let _ = writeln!(out.stdout, "{text}");
            let _ = out.stdout.flush();
            return;
        }
        // A status line (a wait) ends where the transcript goes on.
        super::status::clear();
        if let AgentEvent::AssistantDelta { content } = event {
            if !out.open {
                let _ = write!(out.stdout, "  {} ", paint(BOLD, "assistant:"));
                out.open = true;
                out.streamed = true;
            }
            let _ = write!(out.stdout, "{}", clean(content));
            let _ = out.stdout.flush();
            return;
        }
        if out.open {
            let _ = writeln!(out.stdout);
            out.open = false;
        }
        let streamed = out.streamed;
        let depth = match event {
            AgentEvent::Nested(nested) => nested.depth as usize,
            _ => 0,
        };
        if out.seen.len() <= depth {
            out.seen.resize_with(depth + 1, Seen::default);
        }
        let text = readable(event, streamed, &mut out.seen[depth]);
        if matches!(event, AgentEvent::Assistant { .. }) {
            out.streamed = false;
        }
        if !text.is_empty() {
            let _ = writeln!(out.stdout, "{text}");
        }
        let _ = out.stdout.flush();
    }
}

/// The lines that depend on what the run has shown, or change it; `None`
/// for every other event.
fn remembered(event: &AgentEvent, streamed: bool, seen: &mut Seen) -> Option<String> {
    Some(match event {
        AgentEvent::User { content } => {
            *seen = Seen::default();
            format!("{} {}", paint(USER, "» user:"), clean(content))
        }
        AgentEvent::Assistant {
            content,
            tool_calls,
            ..
        } => {
            if !content.is_empty() {
                seen.reply = Some(content.clone());
            }
            assistant(content, tool_calls, streamed)
        }
        AgentEvent::ToolResult {
            call_id, content, ..
        } if seen
            .block
            .as_ref()
            .is_some_and(|b| b.call_id == *call_id && b.restated_by(content)) =>
        {
            // The interceptor line just above said it.
            seen.block = None;
            String::new()
        }
        AgentEvent::Interceptor(e) => {
            // A monitored block blocked nothing: no tool result restates it.
            if e.decision != EventDecision::Replaced && !e.monitor {
                seen.block = Some(ShownBlock {
                    interceptor: e.interceptor.clone(),
                    call_id: e.call_id.clone(),
                    reason: e.reason.clone(),
                });
            }
            interceptor(e)
        }
        AgentEvent::Notice { text, .. } => {
            seen.notice = Some(text.clone());
            gate_line(event)
        }
        AgentEvent::RunEnd {
            success,
            output,
            reason,
            usage,
            vetoed_by,
            ..
        } => {
            let line = if let (true, Some(gate)) = (*success, vetoed_by) {
                format!("{} {}", paint(ALERT, "⊘ vetoed by"), clean(gate))
            } else if *success {
                done_line(output, seen)
            } else {
                failed_line(output, reason, seen)
            };
            match usage_text(usage) {
                Some(usage) => format!("{line} {}", paint(DIM, &format!("· {usage}"))),
                None => line,
            }
        }
        AgentEvent::Nested(nested) => nested_lines(nested, seen),
        _ => return None,
    })
}

/// One event as readable text (empty: nothing to print); `streamed` says
/// the reply text was already printed as it arrived; `seen` is what this
/// session's run has shown so far.
fn readable(event: &AgentEvent, streamed: bool, seen: &mut Seen) -> String {
    if let Some(text) = remembered(event, streamed, seen) {
        return text;
    }
    match event {
        AgentEvent::AssistantDelta { content } => clean(content),
        AgentEvent::ToolResult {
            call_id,
            name,
            content,
            is_error,
        } => {
            let head = clean(&format!("← {name} [{call_id}]"));
            let head = if *is_error {
                paint(FAILED, &format!("{head} error:"))
            } else {
                paint(OK, &format!("{head}:"))
            };
            format!("  {head} {}", preview(&clean(content)))
        }
        AgentEvent::PackLoaded {
            name,
            version,
            path,
        } => paint(DIM, &pack_line("loaded", name, version, path.as_deref())),
        AgentEvent::PackReloaded {
            name,
            version,
            path,
        } => paint(NEWS, &pack_line("reloaded", name, version, path.as_deref())),
        AgentEvent::PackReloadFailed { name, error } => paint(
            ALERT,
            &clean(&format!(
                "reload of {name} failed, previous version kept: {error}"
            )),
        ),
        AgentEvent::PackQuarantined { name, reason } => {
            paint(ALERT, &clean(&format!("quarantined pack {name}: {reason}")))
        }
        AgentEvent::InterceptorSlow {
            seam,
            interceptor,
            elapsed_ms,
            budget_ms,
        } => paint(
            WARN,
            &clean(&format!(
                "  ⏱ {seam} {interceptor} took {elapsed_ms} ms (budget {budget_ms} ms)"
            )),
        ),
        gate => gate_line(gate),
    }
}

/// The lines of the output-side gates: notices, stream retractions and
/// downgrades, operator questions, gate retries.
fn gate_line(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Notice {
            interceptor, text, ..
        } => paint(
            NEWS,
            &clean(&format!("  ℹ notice ({interceptor}): {text}")),
        ),
        AgentEvent::TurnPaused {
            interceptor,
            wait_ms,
            reason,
        } => paint(
            WARN,
            &clean(&format!("  ⏸ {interceptor} pauses the turn for {wait_ms} ms: {reason}")),
        ),
        AgentEvent::ApprovalRequested {
            interceptor,
            subject,
            prompt,
            ..
        } => paint(
            WARN,
            &clean(&format!("  ? {interceptor} asks about {subject}: {prompt}")),
        ),
        AgentEvent::ApprovalAnswered {
            interceptor,
            answer,
            source,
            ..
        } => paint(
            DIM,
            &clean(&format!(
                "  ? {interceptor}: answered {answer} ({})",
                answered_by(source)
            )),
        ),
        AgentEvent::GateRetry {
            interceptor,
            attempt,
            max,
            feedback,
        } => paint(
            WARN,
            &clean(&format!(
                "  ↻ {interceptor} asks the model again ({attempt}/{max}): {feedback}"
            )),
        ),
        AgentEvent::StreamRetract { released, reason } => paint(
            ALERT,
            &clean(&format!(
                "  ⨯ stream blocked after {released} bytes were shown (take them back): {reason}"
            )),
        ),
        AgentEvent::ToolTimeout {
            name,
            timeout_ms,
            interceptor,
            ..
        } => paint(
            ALERT,
            &clean(&format!(
                "  ⏱ {name} ran past its {timeout_ms} ms deadline ({interceptor}): stopped"
            )),
        ),
        AgentEvent::LateResultSuppressed { reason, .. } => {
            paint(DIM, &clean(&format!("  ⏱ {reason}")))
        }
        AgentEvent::Compaction {
            phase,
            interceptor,
            summarised,
            kept,
            ..
        } => paint(
            WARN,
            &clean(&format!(
                "  ⇲ compaction {phase} ({interceptor}): {summarised} messages summarised, {kept} kept"
            )),
        ),
        AgentEvent::ModelChanged { from, to } => paint(
            WARN,
            &clean(&format!("  ⇣ this call goes to {to} instead of {from}")),
        ),
        AgentEvent::StreamingDowngraded { packs } => paint(
            WARN,
            &clean(&format!(
                "streaming off for this run: {} gate whole replies but not streamed text (--stream-policy allow keeps it on)",
                packs.join(", ")
            )),
        ),
        _ => String::new(),
    }
}

/// The closing line of a run that ended with an answer: the answer, unless
/// the reply line above already showed it.
fn done_line(output: &str, seen: &Seen) -> String {
    if output.is_empty() || seen.reply.as_deref() == Some(output) {
        paint(DONE, "✓ done")
    } else {
        format!("{} {}", paint(DONE, "✓ done:"), clean(output))
    }
}

/// The closing line of a run that ended without one: why, unless a line
/// above already said it (a block, its notice, the substitute reply); then
/// only who stopped it.
fn failed_line(output: &str, reason: &str, seen: &Seen) -> String {
    let block = seen.block.as_ref().filter(|b| b.call_id.is_empty());
    let said = seen.reply.as_deref() == Some(output)
        || seen.notice.as_deref() == Some(output)
        || block.is_some_and(|b| b.restated_by(output));
    if said {
        let who = block.map_or_else(
            || format!("({reason})"),
            |b| format!("blocked by {}", b.interceptor),
        );
        return format!("{} {}", paint(ALERT, "✗ failed:"), clean(&who));
    }
    // `interceptor_blocked: <reason>` repeats what the output says.
    let detail = reason.split_once(": ").map_or(reason, |(_, detail)| detail);
    let text = if output.contains(detail) {
        output.to_owned()
    } else {
        format!("{output} ({reason})")
    };
    format!("{} {}", paint(ALERT, "✗ failed:"), clean(&text))
}

/// `tokens: 120 in / 30 out · $0.0012`, then the session's when it differs
/// (later turns); `None` when the provider reported no tokens at all.
fn usage_text(usage: &RunUsage) -> Option<String> {
    let amount = |u: &SourceUsage| {
        let cost = match u.cost_usd {
            c if c <= 0.0 => String::new(),
            c if c < 0.0001 => " · <$0.0001".to_owned(),
            c => format!(" · ${c:.4}"),
        };
        format!("{} in / {} out{cost}", u.input_tokens, u.output_tokens)
    };
    let session = &usage.session;
    if session.input_tokens == 0 && session.output_tokens == 0 {
        return None;
    }
    let whole = if usage.turn == usage.session {
        String::new()
    } else {
        format!(" (session: {})", amount(session))
    };
    Some(format!("tokens: {}{whole}", amount(&usage.turn)))
}

fn assistant(content: &str, tool_calls: &[ToolCall], streamed: bool) -> String {
    let mut lines = Vec::new();
    if !content.is_empty() && !streamed {
        lines.push(format!(
            "  {} {}",
            paint(BOLD, "assistant:"),
            clean(content)
        ));
    }
    for call in tool_calls {
        lines.push(format!(
            "  {} {}",
            paint(CALL, &format!("→ {}", clean(&call.name))),
            paint(
                DIM,
                &clean(&format!("{}  [{}]", call.arguments.parse(), call.id))
            )
        ));
    }
    lines.join("\n")
}

fn interceptor(e: &InterceptorEvent) -> String {
    let target = if e.tool_name.is_empty() {
        String::new()
    } else {
        format!(" [{} {}]", e.tool_name, e.call_id)
    };
    // An error's reason starts with the interceptor's name, said already.
    let said = e
        .reason
        .strip_prefix(&format!("{}: ", e.interceptor))
        .unwrap_or(&e.reason);
    let reason = if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    };
    if e.monitor {
        // Recorded, not enacted: said as what would have happened.
        return paint(
            DIM,
            &clean(&format!(
                "  ⚐ monitor: {} {} by {} (not enforced){reason}{target}",
                e.seam, e.decision, e.interceptor
            )),
        );
    }
    paint(
        WARN,
        &clean(&format!(
            "  ⚑ {} {} by {}{reason}{target}",
            e.seam, e.decision, e.interceptor
        )),
    )
}

/// Where an operator's answer came from, as the readable view says it.
fn answered_by(source: &str) -> &str {
    match source {
        "terminal" => "on the terminal",
        "no_terminal" => "no terminal to ask on",
        "approvals_file" => "from the approvals file",
        "yes" => "yes to every question",
        "no" => "no to every question",
        other => other,
    }
}

fn pack_line(verb: &str, name: &str, version: &str, path: Option<&str>) -> String {
    clean(&format!(
        "{verb} pack {name} {version} ({})",
        path.unwrap_or("in-process")
    ))
}

/// A sub-agent's event, indented under the call that started it; `seen`
/// is what its run has shown.
fn nested_lines(nested: &NestedEvent, seen: &mut Seen) -> String {
    let inner = readable(&nested.event, false, seen);
    let prefix = format!("{}↳ ", "  ".repeat(nested.depth as usize));
    inner
        .lines()
        .map(|line| format!("{prefix}{}", line.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn preview(content: &str) -> String {
    let content = content.trim_end();
    let lines: Vec<&str> = content.lines().collect();
    if lines.len() <= PREVIEW_LINES {
        return content.replace('\n', "\n    ");
    }
    format!(
        "{}\n    … {} more lines",
        lines[..PREVIEW_LINES].join("\n    "),
        lines.len() - PREVIEW_LINES
    )
}
