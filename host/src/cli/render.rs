//! Printing the transcript: JSON lines (`--json`) or a readable, colored view.
//!
//! Colors go through `anstream`, which drops them when stdout is not a
//! terminal and honours `NO_COLOR` / `CLICOLOR_FORCE`. Every text that came
//! from a model, a tool or a pack passes [`clean`] first, so it can never
//! carry an escape sequence of its own to the terminal.

use anstyle::{AnsiColor, Style};
use chimera_host::agent::{AgentEvent, NestedEvent};
use chimera_host::interception::InterceptorEvent;
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
        let text = readable(event, out.streamed);
        if matches!(event, AgentEvent::Assistant { .. }) {
            out.streamed = false;
        }
        if !text.is_empty() {
            let _ = writeln!(out.stdout, "{text}");
        }
        let _ = out.stdout.flush();
    }
}

/// One event as readable text; `streamed` says the reply text was already
/// printed as it arrived.
fn readable(event: &AgentEvent, streamed: bool) -> String {
    match event {
        AgentEvent::AssistantDelta { content } => clean(content),
        AgentEvent::User { content } => format!("{} {}", paint(USER, "» user:"), clean(content)),
        AgentEvent::Assistant {
            content,
            tool_calls,
            ..
        } => assistant(content, tool_calls, streamed),
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
        AgentEvent::Interceptor(e) => interceptor(e),
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
        AgentEvent::RunEnd {
            success: true,
            output,
            ..
        } => format!("{} {}", paint(DONE, "✓ done:"), clean(output)),
        AgentEvent::RunEnd { output, reason, .. } => format!(
            "{} {}",
            paint(ALERT, "✗ failed:"),
            clean(&format!("{output} ({reason})"))
        ),
        AgentEvent::Nested(nested) => nested_lines(nested),
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
            ..
        } => paint(DIM, &clean(&format!("  ? {interceptor}: answered {answer}"))),
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
    let reason = if e.reason.is_empty() {
        String::new()
    } else {
        format!(": {}", e.reason)
    };
    paint(
        WARN,
        &clean(&format!(
            "  ⚑ {} {} by {}{reason}{target}",
            e.seam, e.decision, e.interceptor
        )),
    )
}

fn pack_line(verb: &str, name: &str, version: &str, path: Option<&str>) -> String {
    clean(&format!(
        "{verb} pack {name} {version} ({})",
        path.unwrap_or("in-process")
    ))
}

/// A sub-agent's event, indented under the call that started it.
fn nested_lines(nested: &NestedEvent) -> String {
    let inner = readable(&nested.event, false);
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
