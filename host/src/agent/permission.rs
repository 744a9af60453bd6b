//! The permission policy (allow / ask / deny per tool) and approvals.

use crate::interception::Question;
use crate::types::{terminal_safe, ToolCall};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::pin::Pin;
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

/// Per-tool rules over a default: exact names, and glob patterns
/// (`mcp__*`, `write_*`, `fs_{read,write}`) as Claude Code's users write
/// them. A tool named exactly takes its rule; otherwise the strictest rule
/// of the patterns it matches (deny over ask over allow); otherwise the
/// default.
#[derive(Debug, Clone)]
pub struct ToolRules {
    default: Permission,
    rules: HashMap<String, Permission>,
    patterns: Vec<(globset::GlobMatcher, Permission)>,
}

impl ToolRules {
    /// Every tool gets `default` unless a rule says otherwise.
    #[must_use]
    pub fn new(default: Permission) -> Self {
        ToolRules {
            default,
            rules: HashMap::new(),
            patterns: Vec::new(),
        }
    }

    /// Whether `rule` is a glob pattern (holds `*`, `?`, `[` or `{`)
    /// rather than a tool's name.
    #[must_use]
    pub fn is_pattern(rule: &str) -> bool {
        rule.contains(['*', '?', '[', '{'])
    }

    /// Checks a rule: a name, or a glob pattern that compiles.
    ///
    /// # Errors
    ///
    /// One line naming the pattern and what is wrong with it.
    pub fn check(rule: &str) -> Result<(), String> {
        if Self::is_pattern(rule) {
            globset::Glob::new(rule).map_err(|e| format!("tool pattern {rule:?}: {}", e.kind()))?;
        }
        Ok(())
    }

    /// Sets the rule for `tool`: a name, or a glob pattern (one that does
    /// not compile, which [`check`](Self::check) refuses, is taken as a
    /// name).
    #[must_use]
    pub fn set(mut self, tool: impl Into<String>, permission: Permission) -> Self {
        let tool = tool.into();
        if Self::is_pattern(&tool) {
            if let Ok(glob) = globset::Glob::new(&tool) {
                self.patterns.push((glob.compile_matcher(), permission));
                return self;
            }
        }
        self.rules.insert(tool, permission);
        self
    }
}

/// How strict a permission is: deny over ask over allow.
fn strictness(permission: Permission) -> u8 {
    match permission {
        Permission::Allow => 0,
        Permission::Ask => 1,
        Permission::Deny => 2,
    }
}

impl PermissionPolicy for ToolRules {
    fn evaluate(&self, call: &ToolCall) -> Permission {
        if let Some(permission) = self.rules.get(&call.name) {
            return *permission;
        }
        self.patterns
            .iter()
            .filter(|(glob, _)| glob.is_match(&call.name))
            .map(|(_, permission)| *permission)
            .max_by_key(|permission| strictness(*permission))
            .unwrap_or(self.default)
    }
}

/// An operator's answer to an interceptor's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorAnswer {
    /// Let it through (the rest of the chain still runs).
    Allow,
    /// Stop it.
    Reject,
    /// Replace it with this payload (a tool call's new arguments, as JSON),
    /// which still passes the rest of the chain, the hooks and the policy.
    Edit(String),
}

impl OperatorAnswer {
    /// `allow`, `reject` or `edit`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            OperatorAnswer::Allow => "allow",
            OperatorAnswer::Reject => "reject",
            OperatorAnswer::Edit(_) => "edit",
        }
    }

    fn default_of(question: &Question) -> OperatorAnswer {
        if question.default == "allow" {
            OperatorAnswer::Allow
        } else {
            OperatorAnswer::Reject
        }
    }
}

/// What an approver's `async` methods return: a boxed future (the trait
/// stays usable as `dyn Approver`).
pub type Answering<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The operator: answers the permission policy's `Ask` and interceptors'
/// questions — one operator for both. Each question and its answer are
/// published as `approval_requested` / `approval_answered` events, the
/// answer naming where it came from ([`source`](Self::source)).
///
/// The loop asks through the `async` methods ([`approve_async`](Self::approve_async),
/// [`answer_async`](Self::answer_async)). By default they answer with the
/// blocking ones, inline: right for an approver that answers at once (`--yes`,
/// an answers file, a fixed policy). One that waits for a person overrides
/// them to wait without blocking the executor, as [`TerminalApprover`] does.
pub trait Approver: Send + Sync {
    /// True to approve `call`.
    fn approve(&self, call: &ToolCall) -> bool;

    /// Answers an interceptor's `question` about `subject` (the tool name,
    /// or `provider request`). The default gives the question's default
    /// answer.
    fn answer(&self, subject: &str, question: &Question) -> OperatorAnswer {
        let _ = subject;
        OperatorAnswer::default_of(question)
    }

    /// Where this approver's answers come from, as the `approval_answered`
    /// event and the audit log name it: `terminal`, `no_terminal`,
    /// `approvals_file`, `yes` or `no` for the host's own approvers. The
    /// default, `custom`, stands for an approver of the embedder's that does
    /// not say; one that wraps another should give the inner one's.
    fn source(&self) -> &str {
        "custom"
    }

    /// [`approve`](Self::approve), waited for asynchronously. The default
    /// answers inline.
    fn approve_async<'a>(&'a self, call: &'a ToolCall) -> Answering<'a, bool> {
        Box::pin(std::future::ready(self.approve(call)))
    }

    /// [`answer`](Self::answer), waited for asynchronously. The default
    /// answers inline.
    fn answer_async<'a>(
        &'a self,
        subject: &'a str,
        question: &'a Question,
    ) -> Answering<'a, OperatorAnswer> {
        Box::pin(std::future::ready(self.answer(subject, question)))
    }
}

/// Approves everything (`--yes`).
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        true
    }

    fn answer(&self, _subject: &str, _question: &Question) -> OperatorAnswer {
        OperatorAnswer::Allow
    }

    /// `yes`.
    fn source(&self) -> &str {
        "yes"
    }
}

/// Denies everything.
pub struct DenyAll;

impl Approver for DenyAll {
    fn approve(&self, _call: &ToolCall) -> bool {
        false
    }

    fn answer(&self, _subject: &str, _question: &Question) -> OperatorAnswer {
        OperatorAnswer::Reject
    }

    /// `no`.
    fn source(&self) -> &str {
        "no"
    }
}

/// Prompts on the terminal; denies when stdin is not a terminal (the CLI
/// refuses to start `--ask` without one). The call is shown with control
/// sequences escaped, so a model cannot disguise what it asks to run.
/// Asked asynchronously, it waits for the person on a blocking thread, so
/// the executor goes on with other sessions meanwhile.
#[derive(Clone, Copy)]
pub struct TerminalApprover;

/// Runs `ask` on a blocking thread of the current runtime and waits for it;
/// inline when there is no runtime. A panic in `ask` gives `fallback`.
async fn on_blocking_thread<T: Send + 'static>(
    ask: impl FnOnce() -> T + Send + 'static,
    fallback: T,
) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(ask).await.unwrap_or(fallback),
        Err(_) => ask(),
    }
}

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

    /// Prompts on stderr and reads one line (waiting at most the question's
    /// timeout; then its default stands): `a`/`allow`, `r`/`reject`, or
    /// `e`/`edit` followed by a line of JSON.
    fn answer(&self, subject: &str, question: &Question) -> OperatorAnswer {
        if !std::io::stdin().is_terminal() {
            return OperatorAnswer::default_of(question);
        }
        let mut stderr = std::io::stderr();
        let _ = write!(
            stderr,
            "{} [{}] ({}; default {}): ",
            terminal_safe(&question.prompt),
            terminal_safe(subject),
            question.choices.join("/"),
            question.default
        );
        let _ = stderr.flush();
        let timeout = question.timeout_ms.map(std::time::Duration::from_millis);
        let Some(line) = read_line_within(timeout) else {
            return OperatorAnswer::default_of(question);
        };
        let offered = |c: &str| question.choices.iter().any(|x| x == c);
        match line.trim() {
            "a" | "allow" if offered("allow") => OperatorAnswer::Allow,
            "r" | "reject" if offered("reject") => OperatorAnswer::Reject,
            "e" | "edit" if offered("edit") => {
                let _ = write!(stderr, "edited arguments (JSON): ");
                let _ = stderr.flush();
                read_line_within(timeout).map_or(OperatorAnswer::Reject, OperatorAnswer::Edit)
            }
            _ => OperatorAnswer::default_of(question),
        }
    }

    /// `terminal`; `no_terminal` when stdin is not one (nobody was asked: a
    /// permission question is rejected, a pack's takes its default).
    fn source(&self) -> &str {
        if std::io::stdin().is_terminal() {
            "terminal"
        } else {
            "no_terminal"
        }
    }

    /// Prompts on a blocking thread, so the executor is not held while the
    /// person types.
    fn approve_async<'a>(&'a self, call: &'a ToolCall) -> Answering<'a, bool> {
        let call = call.clone();
        Box::pin(on_blocking_thread(
            move || TerminalApprover.approve(&call),
            false,
        ))
    }

    /// Prompts on a blocking thread, so the executor is not held while the
    /// person types (or the question's timeout runs).
    fn answer_async<'a>(
        &'a self,
        subject: &'a str,
        question: &'a Question,
    ) -> Answering<'a, OperatorAnswer> {
        let (subject, question) = (subject.to_owned(), question.clone());
        let fallback = OperatorAnswer::default_of(&question);
        Box::pin(on_blocking_thread(
            move || TerminalApprover.answer(&subject, &question),
            fallback,
        ))
    }
}

/// One line of stdin, waiting at most `timeout`. The read runs on its own
/// thread so a timeout can stand; a line typed after it is not used.
fn read_line_within(timeout: Option<std::time::Duration>) -> Option<String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_ok() {
            let _ = sender.send(line);
        }
    });
    match timeout {
        Some(limit) => receiver.recv_timeout(limit).ok(),
        None => receiver.recv().ok(),
    }
}

/// Answers from a file (`--approvals FILE`): one JSON object per line, in
/// the order the questions come, `{"answer": "allow" | "reject"}`,
/// optionally with `"tool": NAME`, which must then be the tool asked about
/// (a mismatch rejects the call: the answers are out of step). A question
/// with no answer left is rejected.
#[derive(Debug)]
pub struct AnswersFile {
    answers: Mutex<VecDeque<AnswerLine>>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerLine {
    answer: AnswerKind,
    tool: Option<String>,
    /// For `edit`: the replacement (a tool call's new arguments).
    payload: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerKind {
    Allow,
    Reject,
    Edit,
}

impl AnswersFile {
    /// Parses answers-file text; an error names the line.
    ///
    /// # Errors
    ///
    /// `line N: …` for the first non-blank line that is not an answer object
    /// (`allow`, `reject`, or `edit` with its `payload`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut answers = VecDeque::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let answer: AnswerLine = serde_json::from_str(line).map_err(|error| {
                format!(
                    "line {}: {error} (expected {{\"answer\": \"allow\"}}, {{\"answer\": \"reject\"}} or {{\"answer\": \"edit\", \"payload\": {{…}}}})",
                    index + 1
                )
            })?;
            answers.push_back(answer);
        }
        Ok(AnswersFile {
            answers: Mutex::new(answers),
        })
    }

    /// Reads and parses `path`: a regular file of at most 1 MiB (a FIFO, a
    /// directory or a larger file is refused).
    ///
    /// # Errors
    ///
    /// The reason the file cannot be used (unreadable, not a regular file, over
    /// 1 MiB, not UTF-8), or [`AnswersFile::parse`]'s line for its text.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        AnswersFile::parse(&crate::files::read_user_file(path, 1 << 20)?)
    }
}

impl Approver for AnswersFile {
    /// `approvals_file`.
    fn source(&self) -> &str {
        "approvals_file"
    }

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

    /// The next answer; `edit` needs a `payload` and an offered `edit`, a
    /// `tool` must name the subject, and a question with no answer left
    /// gets its default.
    fn answer(&self, subject: &str, question: &Question) -> OperatorAnswer {
        let next = self
            .answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front();
        let Some(answer) = next else {
            tracing::warn!(%subject, "the approvals file has no answer left; the question's default stands");
            return OperatorAnswer::default_of(question);
        };
        if answer.tool.as_deref().is_some_and(|t| t != subject) {
            tracing::warn!(%subject, "the approvals file answers another tool here; rejected");
            return OperatorAnswer::Reject;
        }
        match (answer.answer, answer.payload) {
            (AnswerKind::Allow, _) => OperatorAnswer::Allow,
            (AnswerKind::Reject, _) => OperatorAnswer::Reject,
            (AnswerKind::Edit, Some(payload)) if question.choices.iter().any(|c| c == "edit") => {
                OperatorAnswer::Edit(payload.to_string())
            }
            (AnswerKind::Edit, _) => {
                tracing::warn!(%subject, "an edit answer needs a payload and an ask that offers edit; rejected");
                OperatorAnswer::Reject
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
    fn a_name_takes_its_rule_and_a_pattern_the_strictest_it_matches() {
        let rules = ToolRules::new(Permission::Allow)
            .set("write_*", Permission::Ask)
            .set("*_file", Permission::Deny)
            .set("read_file", Permission::Allow)
            .set("fs_{mv,rm}", Permission::Deny);
        assert_eq!(rules.evaluate(&call("write_file")), Permission::Deny);
        assert_eq!(rules.evaluate(&call("write_notes")), Permission::Ask);
        assert_eq!(rules.evaluate(&call("read_file")), Permission::Allow);
        assert_eq!(rules.evaluate(&call("fs_rm")), Permission::Deny);
        assert_eq!(rules.evaluate(&call("echo")), Permission::Allow);
        assert!(ToolRules::check("fs_[").unwrap_err().contains("fs_["));
        assert!(ToolRules::check("plain").is_ok());
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
