//! Tools the agent can call, confined to a workspace directory.
//!
//! Every file tool opens its files through [`Workspace`], which holds a
//! handle on the workspace root and looks every path up relative to it:
//! nothing is resolved to a path first and opened by that path later, so a
//! symlink or directory swapped in meanwhile cannot redirect a read or a
//! write. A path that leaves the workspace — by `..`, an absolute path
//! outside it, or a symlink pointing out (or any absolute symlink) — is
//! refused with a [`PathError`], never followed; relative symlinks that
//! stay inside are followed. What is opened is checked on its descriptor:
//! only regular files are read or written (FIFOs, sockets and devices are
//! refused without blocking) and a file with more than one hard link is
//! never written. `apply_patch` stages new content in files created
//! exclusively under random names and renames them through the directory's
//! handle.
//!
//! Each tool's arguments are a Rust type: the schema offered to the model
//! is generated from it and every call is parsed into it (see
//! [`TypedTool`], [`schema_of`], [`parse_args`]), so an unknown or
//! ill-typed argument is refused with a line naming it. A failure is a
//! [`ToolError`] whose text is what the conversation records.

mod apply_patch;
mod args;
mod bash;
mod delegate;
mod edit_file;
mod error;
mod process_tree;
mod read_file;
mod replace_in_file;
mod sandbox;
mod think;
mod todo;
mod workspace;
mod write_file;

pub use apply_patch::{ApplyPatchArgs, ApplyPatchTool};
pub use args::{parse_args, schema_of};
pub use bash::{BashArgs, BashTool};
pub use delegate::{DelegateArgs, DelegateTool, SubAgent};
pub use edit_file::{EditFileArgs, EditFileTool};
pub use error::{PathError, ToolError};
pub use read_file::{ReadFileArgs, ReadFileTool};
pub use replace_in_file::{ReplaceInFileArgs, ReplaceInFileTool};
pub use think::{ThinkArgs, ThinkTool};
pub use todo::{TodoArgs, TodoItem, TodoStatus, TodoTool};
pub use workspace::Workspace;
pub use write_file::{WriteFileArgs, WriteFileTool};

use crate::types::ToolSchema;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// What a tool gets besides its arguments: per-call data travels with the
/// call, never through shared state on the tool.
pub struct ToolContext<'a> {
    /// The directory every path is confined to.
    pub workspace: &'a Workspace,
    /// The id of the call being run (empty outside a session).
    pub call_id: &'a str,
    /// What the caller hands down with the call, for tools that need more
    /// than the workspace: an agent session passes its policy here, so the
    /// sub-agent behind `delegate` inherits it. `&()` when there is nothing.
    pub extensions: &'a (dyn std::any::Any + Send + Sync),
    /// How long the call may take, when a `tool_call` interceptor gave it a
    /// deadline. The host stops waiting then (and records a timeout); a tool
    /// that starts processes kills them by then (`bash` caps its own
    /// timeout with it).
    pub deadline: Option<std::time::Duration>,
}

impl<'a> ToolContext<'a> {
    /// A context with only a workspace: no call id, no extensions.
    #[must_use]
    pub fn new(workspace: &'a Workspace) -> Self {
        ToolContext {
            workspace,
            call_id: "",
            extensions: &(),
            deadline: None,
        }
    }
}

/// A tool, as the agent holds it (object-safe). `execute` never panics on
/// bad input: a missing or ill-typed argument, a refused path or a failed
/// operation is a [`ToolError`] whose `Display` is one line saying what to
/// fix; the agent records it (with any output the error kept) as the
/// call's result.
///
/// Tools with typed arguments implement [`TypedTool`] instead and get this
/// trait from it.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of its arguments (an object schema): exactly what the
    /// model is offered.
    fn parameters(&self) -> Value;
    /// Runs the tool: its output text, or why it failed.
    ///
    /// # Errors
    ///
    /// A [`ToolError`] whose line tells the model what went wrong and what to
    /// do instead: arguments that do not fit, a refused path, a file operation
    /// or command that failed, a timeout.
    fn execute(&self, arguments: &Value, cx: &ToolContext<'_>) -> Result<String, ToolError>;

    /// True when the tool itself stops by [`ToolContext::deadline`] (or
    /// always finishes far sooner: a local file edit, a note). The host
    /// then runs it inline under a deadline instead of on a thread of its
    /// own, and a result that comes back past the deadline is a timeout.
    /// The default, false, suits a tool that may block on its own: it runs
    /// on a thread the host can abandon at the deadline.
    fn stops_by_deadline(&self) -> bool {
        false
    }

    /// Whether the tool is offered to the model now. Built-in tools always
    /// are; a tool of an MCP server stops being offered once its server is
    /// gone (a session notices at the start of its next turn).
    fn offered(&self) -> bool {
        true
    }

    /// The schema offered to the model.
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

/// A tool whose arguments are a type: its [`Tool::parameters`] are
/// generated from [`TypedTool::Args`] (see [`schema_of`]) and every call's
/// arguments are parsed into it (see [`parse_args`]) before
/// [`TypedTool::run`] sees them, so the schema offered and the parsing
/// cannot disagree. Every `TypedTool` is a [`Tool`].
///
/// `Args` should derive `Deserialize` with `#[serde(deny_unknown_fields)]`
/// and `JsonSchema`; its fields' doc comments are the descriptions the
/// model reads.
pub trait TypedTool: Send + Sync {
    /// The arguments.
    type Args: DeserializeOwned + JsonSchema;
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// Changes the schema generated from `Args` before it is offered, for
    /// what depends on the tool's settings (`bash`'s maximum timeout); by
    /// default it is offered as generated.
    fn adjust_parameters(&self, _parameters: &mut Value) {}
    /// Runs the tool on parsed arguments.
    ///
    /// # Errors
    ///
    /// As [`Tool::execute`]; the arguments already fit `Args`, so
    /// `ToolError::InvalidArguments` is left for the tool's own rules.
    fn run(&self, arguments: Self::Args, cx: &ToolContext<'_>) -> Result<String, ToolError>;
    /// See [`Tool::stops_by_deadline`].
    fn stops_by_deadline(&self) -> bool {
        false
    }
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        TypedTool::name(self)
    }

    fn description(&self) -> &str {
        TypedTool::description(self)
    }

    fn parameters(&self) -> Value {
        let mut parameters = schema_of::<T::Args>();
        self.adjust_parameters(&mut parameters);
        parameters
    }

    fn execute(&self, arguments: &Value, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        self.run(parse_args(arguments)?, cx)
    }

    fn stops_by_deadline(&self) -> bool {
        TypedTool::stops_by_deadline(self)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Shared set-up for the tools' unit tests.

    use super::{Tool, ToolContext, Workspace};
    use crate::types::ToolResult;

    /// Runs `tool` on `arguments` in `workspace`, giving the result the
    /// agent would record.
    pub(crate) fn run(
        tool: &dyn Tool,
        workspace: &Workspace,
        arguments: serde_json::Value,
    ) -> ToolResult {
        ToolResult::from(tool.execute(&arguments, &ToolContext::new(workspace)))
    }

    /// A fresh workspace (the directory lives as long as the guard).
    pub(crate) fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, workspace)
    }

    /// A fresh workspace holding the file `name` with `content`.
    pub(crate) fn with_file(name: &str, content: &str) -> (tempfile::TempDir, Workspace) {
        let (dir, workspace) = setup();
        std::fs::write(workspace.root().join(name), content).expect("write");
        (dir, workspace)
    }

    /// Creates a FIFO at `path`.
    #[cfg(unix)]
    pub(crate) fn make_fifo(path: &std::path::Path) {
        rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from(0o600)).expect("mkfifo");
    }

    /// Runs `check` on another thread and fails if it does not finish
    /// within `seconds` (a hung open would otherwise hang the test run).
    #[cfg(unix)]
    pub(crate) fn within_seconds<F: FnOnce() + Send + 'static>(seconds: u64, check: F) {
        use std::sync::mpsc;
        use std::time::Duration;
        let (done, finished) = mpsc::channel();
        let runner = std::thread::spawn(move || {
            check();
            let _ = done.send(());
        });
        match finished.recv_timeout(Duration::from_secs(seconds)) {
            Ok(()) => runner.join().expect("check thread"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The check panicked: report its panic.
                if let Err(panic) = runner.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("still blocked after {seconds} s"),
        }
    }

    /// Calls `attempt(workspace, i)` for each `i < tries` while another
    /// thread swaps the workspace's directory `sub` with `sub.swap`, a
    /// relative symlink to a directory outside (`../outside`), as fast as it
    /// can (an atomic `RENAME_EXCHANGE`). Both `sub` and the outside
    /// directory start with `secret.txt` holding `secret\n`. `attempt`
    /// returns whether its call succeeded.
    ///
    /// Afterwards asserts that the outside directory holds nothing but its
    /// unchanged `secret.txt`, that the racer did swap, and that some
    /// attempts went through (so both sides of the race were exercised).
    #[cfg(target_os = "linux")]
    pub(crate) fn race_swapped_subdirectory(
        tries: usize,
        mut attempt: impl FnMut(&Workspace, usize) -> bool,
    ) {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let base = tempfile::tempdir().expect("temp dir");
        let root = base.path().join("ws");
        let outside = base.path().join("outside");
        for dir in [&root.join("sub"), &outside] {
            std::fs::create_dir_all(dir).expect("mkdir");
            std::fs::write(dir.join("secret.txt"), "secret\n").expect("write");
        }
        std::os::unix::fs::symlink("../outside", root.join("sub.swap")).expect("symlink");
        let workspace = Workspace::new(&root).expect("workspace");

        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let stop = Arc::clone(&stop);
            let (a, b) = (root.join("sub"), root.join("sub.swap"));
            std::thread::spawn(move || {
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).expect("exchange");
                    swaps += 1;
                }
                swaps
            })
        };
        let succeeded = (0..tries).filter(|&i| attempt(&workspace, i)).count();
        stop.store(true, Ordering::Relaxed);
        let swaps = racer.join().expect("racer");

        let names: Vec<_> = std::fs::read_dir(&outside)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(
            names == ["secret.txt"],
            "the racer won: {} names outside, among them {:?}",
            names.len(),
            &names[..names.len().min(5)]
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("secret.txt")).expect("read"),
            "secret\n"
        );
        assert!(swaps > 0, "the racer never swapped");
        assert!(succeeded > 0, "no attempt succeeded in {tries} tries");
    }
}

/// An ordered set of tools, by name.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        ToolSet::default()
    }

    /// The standard tools: `read_file`, `write_file`, `edit_file`,
    /// `replace_in_file`, `apply_patch`, `bash`, `think`, `todo`.
    #[must_use]
    pub fn standard() -> Self {
        let mut set = ToolSet::new();
        set.insert(Arc::new(ReadFileTool));
        set.insert(Arc::new(WriteFileTool));
        set.insert(Arc::new(EditFileTool));
        set.insert(Arc::new(ReplaceInFileTool));
        set.insert(Arc::new(ApplyPatchTool));
        set.insert(Arc::new(BashTool::default()));
        set.insert(Arc::new(ThinkTool));
        set.insert(Arc::new(TodoTool::default()));
        set
    }

    /// Adds `tool`, replacing a tool of the same name in place.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(slot) => *slot = tool,
            None => self.tools.push(tool),
        }
    }

    /// Removes the tool named `name`; true if it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|t| t.name() != name);
        self.tools.len() != before
    }

    /// The tool named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Schemas of every tool offered now ([`Tool::offered`]), in order.
    #[must_use]
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools
            .iter()
            .filter(|t| t.offered())
            .map(|t| t.schema())
            .collect()
    }

    /// How many tools are offered now (it falls when an MCP server goes).
    #[must_use]
    pub fn offered_count(&self) -> usize {
        self.tools.iter().filter(|t| t.offered()).count()
    }

    /// Tool names, in order.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A sub-agent for the schema checks; never asked to run.
    struct Idle;

    impl SubAgent for Idle {
        fn run(&self, _task: &str, _cx: &ToolContext<'_>) -> Result<String, (String, String)> {
            Ok(String::new())
        }
    }

    /// Every built-in tool, `delegate` included.
    fn built_in() -> ToolSet {
        let mut set = ToolSet::standard();
        set.insert(Arc::new(DelegateTool::new(Arc::new(Idle))));
        set
    }

    /// Checks that `schema` (at `at`) and every subschema in it is plain:
    /// no reference or definitions, and every object schema closed.
    fn assert_plain(schema: &Value, at: &str) {
        let Value::Object(map) = schema else {
            panic!("{at}: not an object schema: {schema}");
        };
        for key in [
            "$ref",
            "$defs",
            "definitions",
            "$schema",
            "oneOf",
            "anyOf",
            "allOf",
        ] {
            assert!(!map.contains_key(key), "{at}: has {key}: {schema}");
        }
        if map.get("type") == Some(&json!("object")) {
            assert_eq!(
                map.get("additionalProperties"),
                Some(&json!(false)),
                "{at}: {schema}"
            );
            let properties = map["properties"].as_object().expect("properties");
            for (name, property) in properties {
                assert!(
                    property["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{at}.{name} has no description"
                );
                assert_plain(property, &format!("{at}.{name}"));
            }
            for required in map
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = required.as_str().expect("a name");
                assert!(
                    properties.contains_key(name),
                    "{at}: requires unknown {name}"
                );
            }
        }
        if let Some(items) = map.get("items") {
            assert_plain(items, &format!("{at}[]"));
        }
    }

    #[test]
    fn every_built_in_schema_is_a_closed_object_schema_without_references() {
        let schemas = built_in().schemas();
        assert_eq!(schemas.len(), 9);
        for schema in schemas {
            assert_eq!(schema.parameters["type"], "object", "{}", schema.name);
            assert!(
                !schema.parameters["required"]
                    .as_array()
                    .expect("required")
                    .is_empty(),
                "{}",
                schema.name
            );
            assert_plain(&schema.parameters, &schema.name);
        }
    }

    #[test]
    fn the_schema_offered_is_the_one_parameters_returns() {
        for tool in built_in().tools {
            assert_eq!(
                tool.schema().parameters,
                tool.parameters(),
                "{}",
                tool.name()
            );
        }
    }

    #[test]
    fn every_built_in_tool_refuses_an_unknown_argument_naming_it_and_runs_nothing() {
        let (_dir, workspace) = testing::setup();
        for tool in built_in().tools {
            let required = tool.parameters()["required"].clone();
            let mut arguments: serde_json::Map<String, Value> = required
                .as_array()
                .expect("required")
                .iter()
                .map(|name| (name.as_str().expect("a name").to_owned(), json!("x")))
                .collect();
            arguments.insert("pathh".to_owned(), json!("x"));
            let result = testing::run(tool.as_ref(), &workspace, Value::Object(arguments));
            let error = result.error.unwrap_or_default();
            assert!(
                error.starts_with("unknown argument `pathh`; expected "),
                "{}: {error}",
                tool.name()
            );
        }
        assert_eq!(
            std::fs::read_dir(workspace.root()).expect("list").count(),
            0
        );
    }

    #[test]
    fn a_wrongly_typed_argument_is_refused_naming_it_and_its_type() {
        let (_dir, workspace) = testing::setup();
        let cases: [(&dyn Tool, Value, &str); 4] = [
            (
                &WriteFileTool,
                json!({"path": "a", "content": 5}),
                "argument `content` must be a string, got 5",
            ),
            (
                &EditFileTool,
                json!({"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
                "argument `replace_all` must be a boolean, got \"yes\"",
            ),
            (
                &BashTool::default(),
                json!({"command": "true", "timeout_secs": "5"}),
                "argument `timeout_secs` must be a non-negative integer, got \"5\"",
            ),
            (
                &ApplyPatchTool,
                json!({"patch": ["--- a/x"]}),
                "argument `patch` must be a string, got an array",
            ),
        ];
        for (tool, arguments, expected) in cases {
            let result = testing::run(tool, &workspace, arguments);
            assert_eq!(result.error.as_deref(), Some(expected), "{}", tool.name());
            assert!(result.output.is_empty());
        }
        assert_eq!(
            std::fs::read_dir(workspace.root()).expect("list").count(),
            0
        );
    }

    type Case<'a> = (&'a dyn Tool, fn(&str) -> Value);

    #[test]
    fn every_file_tool_refuses_paths_that_leave_the_workspace() {
        let (_dir, workspace) = testing::setup();
        let outside = tempfile::tempdir().expect("temp dir");
        let target = outside.path().join("out.txt");
        std::fs::write(&target, "secret").expect("write");
        let mut paths = vec![
            "../x".to_owned(),
            "/etc/passwd".to_owned(),
            target.display().to_string(),
        ];
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&target, workspace.root().join("link")).expect("symlink");
            paths.push("link".to_owned());
        }
        let cases: [Case<'_>; 4] = [
            (&ReadFileTool, |p| json!({"path": p})),
            (&WriteFileTool, |p| json!({"path": p, "content": "pwned"})),
            (
                &EditFileTool,
                |p| json!({"path": p, "old_string": "secret", "new_string": "x"}),
            ),
            (
                &ReplaceInFileTool,
                |p| json!({"path": p, "pattern": "secret", "replacement": "x"}),
            ),
        ];
        for (tool, arguments) in cases {
            for path in &paths {
                let result = testing::run(tool, &workspace, arguments(path));
                let error = result.error.unwrap_or_default();
                assert!(
                    error.contains("escapes the workspace"),
                    "{} {path}: {error}",
                    tool.name()
                );
                assert!(result.output.is_empty());
            }
        }
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "secret");
    }

    /// The file tools, each with arguments that would change (or read) the
    /// file at a path whose content is `secret`.
    #[cfg(unix)]
    fn tools_touching(path: &str) -> Vec<(&'static dyn Tool, Value)> {
        let patch = format!("--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-secret\n+pwned\n");
        vec![
            (&ReadFileTool, json!({"path": path})),
            (&WriteFileTool, json!({"path": path, "content": "pwned"})),
            (
                &EditFileTool,
                json!({"path": path, "old_string": "secret", "new_string": "pwned"}),
            ),
            (
                &ReplaceInFileTool,
                json!({"path": path, "pattern": "secret", "replacement": "pwned"}),
            ),
            (&ApplyPatchTool, json!({ "patch": patch })),
        ]
    }

    #[cfg(unix)]
    #[test]
    fn every_file_tool_refuses_fifos_and_sockets_without_hanging() {
        let (_dir, workspace) = testing::setup();
        testing::make_fifo(&workspace.root().join("fifo"));
        let _listener =
            std::os::unix::net::UnixListener::bind(workspace.root().join("socket")).expect("bind");
        testing::within_seconds(20, move || {
            for path in ["fifo", "socket"] {
                for (tool, arguments) in tools_touching(path) {
                    let error = testing::run(tool, &workspace, arguments)
                        .error
                        .unwrap_or_default();
                    assert!(
                        error.contains(&format!("{path} is not a regular file")),
                        "{} {path}: {error}",
                        tool.name()
                    );
                }
            }
        });
    }

    #[cfg(unix)]
    #[test]
    fn every_writing_tool_refuses_to_write_through_a_hard_link() {
        let (_dir, workspace) = testing::setup();
        let outside = tempfile::tempdir().expect("temp dir");
        let target = outside.path().join("other-name");
        std::fs::write(&target, "secret\n").expect("write");
        // A second name inside the workspace (same file system here, as a
        // hard link needs).
        let linked = workspace.root().join("linked");
        if std::fs::hard_link(&target, &linked).is_err() {
            std::fs::write(workspace.root().join("a"), "secret\n").expect("write");
            std::fs::hard_link(workspace.root().join("a"), &linked).expect("hard link");
        }
        for (tool, arguments) in tools_touching("linked").into_iter().skip(1) {
            let error = testing::run(tool, &workspace, arguments)
                .error
                .unwrap_or_default();
            assert!(
                error.starts_with("linked has 2 hard links; refusing to write through a hard link"),
                "{}: {error}",
                tool.name()
            );
        }
        assert_eq!(std::fs::read_to_string(&linked).expect("read"), "secret\n");
        let read = testing::run(&ReadFileTool, &workspace, json!({"path": "linked"}));
        assert_eq!(
            read.output, "secret\n",
            "reading is allowed: {:?}",
            read.error
        );
    }
}
