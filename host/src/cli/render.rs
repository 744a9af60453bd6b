//! Printing the transcript: JSON lines (`--json`) or a readable, colored view.

use chimera_host::agent::AgentEvent;
use chimera_host::types::terminal_safe as clean;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// Prints events to stdout as they happen.
pub(crate) struct Renderer {
    json: bool,
    color: bool,
    out: Mutex<Output>,
}

/// The terminal, and whether a streamed reply line is still open.
struct Output {
    stdout: std::io::Stdout,
    /// A streamed reply is being printed on the current line.
    open: bool,
    /// This step's reply text was already printed as it streamed.
    streamed: bool,
}

const PREVIEW_LINES: usize = 12;

impl Renderer {
    pub(crate) fn new(json: bool) -> Self {
        let stdout = std::io::stdout();
        let color = !json && stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Renderer {
            json,
            color,
            out: Mutex::new(Output {
                stdout,
                open: false,
                streamed: false,
            }),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn render(&self, event: &AgentEvent) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if self.json {
            let text = serde_json::to_string(event).unwrap_or_default();
            let _ = writeln!(out.stdout, "{text}");
            let _ = out.stdout.flush();
            return;
        }
        if let AgentEvent::AssistantDelta { content } = event {
            let content = clean(content);
            if !out.open {
                let head = self.paint("1", "assistant:");
                let _ = write!(out.stdout, "  {head} ");
                out.open = true;
                out.streamed = true;
            }
            let _ = write!(out.stdout, "{content}");
            let _ = out.stdout.flush();
            return;
        }
        if out.open {
            let _ = writeln!(out.stdout);
            out.open = false;
        }
        let text = self.readable(event, out.streamed);
        if matches!(event, AgentEvent::Assistant { .. }) {
            out.streamed = false;
        }
        if !text.is_empty() {
            let _ = writeln!(out.stdout, "{text}");
        }
        let _ = out.stdout.flush();
    }

    /// One event as readable text; `streamed` says the reply text was
    /// already printed as it arrived.
    fn readable(&self, event: &AgentEvent, streamed: bool) -> String {
        match event {
            AgentEvent::AssistantDelta { content } => clean(content),
            AgentEvent::User { content } => {
                format!("{} {}", self.paint("1;36", "» user:"), clean(content))
            }
            AgentEvent::Assistant {
                content,
                tool_calls,
            } => {
                let mut lines = Vec::new();
                if !content.is_empty() && !streamed {
                    lines.push(format!(
                        "  {} {}",
                        self.paint("1", "assistant:"),
                        clean(content)
                    ));
                }
                for call in tool_calls {
                    lines.push(format!(
                        "  {} {}",
                        self.paint("35", &format!("→ {}", clean(&call.name))),
                        self.paint(
                            "2",
                            &clean(&format!("{}  [{}]", call.arguments.parse(), call.id))
                        )
                    ));
                }
                lines.join("\n")
            }
            AgentEvent::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => {
                let head = clean(&format!("← {name} [{call_id}]"));
                let head = if *is_error {
                    self.paint("31", &format!("{head} error:"))
                } else {
                    self.paint("32", &format!("{head}:"))
                };
                format!("  {head} {}", preview(&clean(content)))
            }
            AgentEvent::Interceptor(e) => {
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
                self.paint(
                    "33",
                    &clean(&format!(
                        "  ⚑ {} {} by {}{reason}{target}",
                        e.seam, e.decision, e.interceptor
                    )),
                )
            }
            AgentEvent::PackLoaded {
                name,
                version,
                path,
            } => self.paint(
                "2",
                &clean(&format!(
                    "loaded pack {name} {version} ({})",
                    path.as_deref().unwrap_or("in-process")
                )),
            ),
            AgentEvent::PackReloaded {
                name,
                version,
                path,
            } => self.paint(
                "1;34",
                &clean(&format!(
                    "reloaded pack {name} {version} ({})",
                    path.as_deref().unwrap_or("in-process")
                )),
            ),
            AgentEvent::PackReloadFailed { name, error } => self.paint(
                "1;31",
                &clean(&format!(
                    "reload of {name} failed, previous version kept: {error}"
                )),
            ),
            AgentEvent::PackQuarantined { name, reason } => self.paint(
                "1;31",
                &clean(&format!("quarantined pack {name}: {reason}")),
            ),
            AgentEvent::InterceptorSlow {
                seam,
                interceptor,
                elapsed_ms,
                budget_ms,
            } => self.paint(
                "33",
                &clean(&format!(
                    "  ⏱ {seam} {interceptor} took {elapsed_ms} ms (budget {budget_ms} ms)"
                )),
            ),
            AgentEvent::RunEnd {
                success,
                output,
                reason,
            } => {
                if *success {
                    format!("{} {}", self.paint("1;32", "✓ done:"), clean(output))
                } else {
                    format!(
                        "{} {}",
                        self.paint("1;31", "✗ failed:"),
                        clean(&format!("{output} ({reason})"))
                    )
                }
            }
            AgentEvent::Nested(nested) => {
                let inner = self.readable(&nested.event, false);
                let prefix = format!("{}↳ ", "  ".repeat(nested.depth as usize));
                inner
                    .lines()
                    .map(|line| format!("{prefix}{}", line.trim_start()))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
    }
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
