//! Tools the agent can call, confined to a workspace directory.
//!
//! Every file tool resolves its paths through [`Workspace`]: a path that
//! leaves the workspace — by `..`, an absolute path outside it, or a symlink
//! pointing out — is refused with an error result, never followed.

mod apply_patch;
mod args;
mod bash;
mod delegate;
mod edit_file;
mod process_tree;
mod read_file;
mod replace_in_file;
mod sandbox;
mod think;
mod todo;
mod workspace;
mod write_file;

pub use apply_patch::ApplyPatchTool;
pub use bash::BashTool;
pub use delegate::{DelegateTool, SubAgent};
pub use edit_file::EditFileTool;
pub use read_file::ReadFileTool;
pub use replace_in_file::ReplaceInFileTool;
pub use think::ThinkTool;
pub use todo::TodoTool;
pub use workspace::Workspace;
pub use write_file::WriteFileTool;

use crate::types::{ToolResult, ToolSchema};
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
}

impl<'a> ToolContext<'a> {
    /// A context with only a workspace: no call id, no extensions.
    pub fn new(workspace: &'a Workspace) -> Self {
        ToolContext {
            workspace,
            call_id: "",
            extensions: &(),
        }
    }
}

/// A tool. `execute` never panics on bad input: a missing or ill-typed
/// argument, a refused path or a failed operation is an error result with
/// one line saying what to fix.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of its arguments (an object schema).
    fn parameters(&self) -> serde_json::Value;
    /// Runs the tool.
    fn execute(&self, arguments: &serde_json::Value, cx: &ToolContext<'_>) -> ToolResult;

    /// The schema offered to the model.
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

/// A tool's result from its outcome: the text on success, the one-line
/// error otherwise.
pub(crate) fn outcome(result: Result<String, String>) -> ToolResult {
    match result {
        Ok(text) => ToolResult::ok(text),
        Err(error) => ToolResult::err(error),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Shared set-up for the tools' unit tests.

    use super::Workspace;

    /// A fresh workspace (the directory lives as long as the guard).
    pub(crate) fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        (dir, workspace)
    }
}

/// An ordered set of tools, by name.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        ToolSet::default()
    }

    /// The standard tools: `read_file`, `write_file`, `edit_file`,
    /// `replace_in_file`, `apply_patch`, `bash`, `think`, `todo`.
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
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Schemas of every tool, in order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools.iter().map(|t| t.schema()).collect()
    }

    /// Tool names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

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
        type Case<'a> = (&'a dyn Tool, fn(&str) -> Value);
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
        let cx = ToolContext::new(&workspace);
        for (tool, arguments) in cases {
            for path in &paths {
                let result = tool.execute(&arguments(path), &cx);
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
}
