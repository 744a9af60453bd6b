//! The permission policy (allow / ask / deny per tool) and approvals.

use crate::types::{terminal_safe, ToolCall};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;

/// What the policy says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Run it.
    Allow,
    /// Ask for approval first.
    Ask,
    /// Refuse: `Permission denied for <tool>`.
    Deny,
}

/// Decides whether a (interceptor-effective) call may run.
pub trait PermissionPolicy: Send + Sync {
    /// The verdict for `call`, which already passed the `tool_call` seam.
    fn evaluate(&self, call: &ToolCall) -> Permission;
}

/// Per-tool rules over a default.
#[derive(Debug, Clone)]
pub struct ToolRules {
    default: Permission,
    rules: HashMap<String, Permission>,
}

impl ToolRules {
    /// Every tool gets `default` unless a rule says otherwise.
    #[must_use]
    pub fn new(default: Permission) -> Self {
        ToolRules {
            default,
            rules: HashMap::new(),
        }
    }

    /// Sets the rule for `tool`.
    #[must_use]
    pub fn set(mut self, tool: impl Into<String>, permission: Permission) -> Self {
        self.rules.insert(tool.into(), permission);
        self
    }
}

impl PermissionPolicy for ToolRules {
    fn evaluate(&self, call: &ToolCall) -> Permission {
        self.rules.get(&call.name).copied().unwrap_or(self.default)
    }
}

/// Answers `Ask`.
pub trait Approver: Send + Sync {
    /// True to approve `call`.
    fn approve(&self, call: &ToolCall) -> bool;
}

/// Approves everything (`--yes`).
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        true
    }
}

/// Denies everything.
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        false
    }
}

/// Prompts on the terminal; denies when stdin is not a terminal (the CLI
/// refuses to start `--ask` without one). The call is shown with control
/// sequences escaped, so a model cannot disguise what it asks to run.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve(&self, call: &ToolCall) -> bool {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return false;
        }
        let mut stderr = std::io::stderr();
        let _ = write!(
            stderr,
            "allow {}({})? [y/N] ",
            terminal_safe(&call.name),
            terminal_safe(call.arguments.as_str())
        );
        let _ = stderr.flush();
        let mut answer = String::new();
        if stdin.lock().read_line(&mut answer).is_err() {
            return false;
        }
        matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
    }
}

/// Answers from a file (`--approvals FILE`): one JSON object per line, in
/// the order the questions come, `{"answer": "allow" | "reject"}`,
/// optionally with `"tool": NAME`, which must then be the tool asked about
/// (a mismatch rejects the call: the answers are out of step). A question
/// with no answer left is rejected.
#[derive(Debug)]
pub struct AnswersFile {
    answers: Mutex<VecDeque<Answer>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    answer: AnswerKind,
    tool: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerKind {
    Allow,
    Reject,
}

impl AnswersFile {
    /// Parses answers-file text; an error names the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut answers = VecDeque::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let answer: Answer = serde_json::from_str(line).map_err(|error| {
                format!(
                    "line {}: {error} (expected {{\"answer\": \"allow\"}} or {{\"answer\": \"reject\"}})",
                    index + 1
                )
            })?;
            answers.push_back(answer);
        }
        Ok(AnswersFile {
            answers: Mutex::new(answers),
        })
    }

    /// Reads and parses `path`.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
        AnswersFile::parse(&text)
    }
}

impl Approver for AnswersFile {
    fn approve(&self, call: &ToolCall) -> bool {
        let next = self
            .answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front();
        match next {
            Some(answer) if answer.tool.as_deref().is_some_and(|t| t != call.name) => {
                tracing::warn!(
                    asked = %call.name,
                    answered = answer.tool.as_deref().unwrap_or_default(),
                    "the approvals file answers another tool here; rejected"
                );
                false
            }
            Some(answer) => answer.answer == AnswerKind::Allow,
            None => {
                tracing::warn!(tool = %call.name, "the approvals file has no answer left; rejected");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Arguments;

    fn call(name: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: Arguments::empty(),
        }
    }

    #[test]
    fn an_answers_file_answers_in_order_and_rejects_once_it_runs_out() {
        let answers = AnswersFile::parse(
            "{\"answer\": \"allow\"}\n\n{\"answer\": \"reject\"}\n{\"answer\": \"allow\", \"tool\": \"bash\"}\n",
        )
        .unwrap();
        assert!(answers.approve(&call("bash")));
        assert!(!answers.approve(&call("bash")));
        assert!(!answers.approve(&call("write_file")), "out of step");
        assert!(!answers.approve(&call("bash")), "no answer left");
    }

    #[test]
    fn a_bad_answers_line_is_one_error_naming_the_line() {
        let error =
            AnswersFile::parse("{\"answer\": \"allow\"}\n{\"answer\": \"maybe\"}").unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
    }
}
