//! `edit_file`: exact string replacement in a file.

use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

/// `edit_file`: replaces `old_string` with `new_string` in a text file.
/// `old_string` must occur exactly once unless `replace_all` is true. The
/// file is read and rewritten through one checked descriptor.
pub struct EditFileTool;

/// The arguments of `edit_file` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// File path, relative to the workspace root.
    pub path: String,
    /// The exact text to replace (non-empty).
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default
    /// false).
    pub replace_all: Option<bool>,
}

impl TypedTool for EditFileTool {
    /// Inline under a deadline: it a local file edit.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = EditFileArgs;

    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace an exact string in a text file in the workspace. `old_string` must match the \
         file's text exactly (whitespace and indentation included) and occur exactly once, \
         unless `replace_all` is true, which replaces every occurrence. Include enough \
         surrounding lines in `old_string` to make it unique."
    }

    fn run(&self, arguments: EditFileArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let EditFileArgs {
            path,
            old_string: old,
            new_string: new,
            replace_all,
        } = arguments;
        if old.is_empty() {
            return Err(ToolError::invalid(
                "old_string",
                "old_string is empty: give the exact text to replace (use write_file to create a file)",
            ));
        }
        if old == new {
            return Err(ToolError::invalid(
                "new_string",
                "old_string and new_string are identical: nothing would change",
            ));
        }
        let count = cx.workspace.edit_text(&path, |text| {
            let count = text.matches(old.as_str()).count();
            if count == 0 {
                return Err(ToolError::failed(format!("old_string not found in {path}")));
            }
            if count > 1 && replace_all != Some(true) {
                return Err(ToolError::failed(format!(
                    "old_string occurs {count} times in {path}; add surrounding context to make it unique, or set replace_all to true"
                )));
            }
            Ok((text.replace(old.as_str(), &new), count))
        })?;
        let noun = if count == 1 {
            "replacement"
        } else {
            "replacements"
        };
        Ok(format!("Made {count} {noun} in {path}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use crate::types::ToolResult;
    use serde_json::json;
    use std::fs;

    fn run(ws: &Workspace, args: serde_json::Value) -> ToolResult {
        crate::tools::testing::run(&EditFileTool, ws, args)
    }

    fn setup() -> (tempfile::TempDir, Workspace) {
        crate::tools::testing::with_file("f.txt", "alpha beta\nbeta gamma\n")
    }

    fn content(ws: &Workspace) -> String {
        fs::read_to_string(ws.root().join("f.txt")).unwrap()
    }

    /// Replaces `old` with `new` in `f.txt`.
    fn edit(ws: &Workspace, old: &str, new: &str) -> ToolResult {
        run(
            ws,
            json!({"path": "f.txt", "old_string": old, "new_string": new}),
        )
    }

    #[test]
    fn zero_occurrences() {
        let (_dir, ws) = setup();
        let r = edit(&ws, "delta", "x");
        assert_eq!(r.error.as_deref(), Some("old_string not found in f.txt"));
        assert_eq!(content(&ws), "alpha beta\nbeta gamma\n");
    }

    #[test]
    fn one_occurrence() {
        let (_dir, ws) = setup();
        let r = edit(&ws, "alpha", "ALPHA");
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Made 1 replacement in f.txt");
        assert_eq!(content(&ws), "ALPHA beta\nbeta gamma\n");
    }

    #[test]
    fn many_occurrences() {
        let (_dir, ws) = setup();
        let error = edit(&ws, "beta", "B").error.unwrap();
        assert!(error.contains("occurs 2 times"), "{error}");
        assert!(error.contains("replace_all"), "{error}");
        assert_eq!(content(&ws), "alpha beta\nbeta gamma\n");
        let r = run(
            &ws,
            json!({"path": "f.txt", "old_string": "beta", "new_string": "B", "replace_all": true}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Made 2 replacements in f.txt");
        assert_eq!(content(&ws), "alpha B\nB gamma\n");
    }

    #[test]
    fn ill_formed_or_pointless_edits_are_refused_and_change_nothing() {
        let (_dir, ws) = setup();
        let error = |args| run(&ws, args).error.unwrap();
        assert_eq!(
            error(json!({"path": "f.txt", "old_string": "a"})),
            "missing required argument `new_string` (a string)"
        );
        assert_eq!(
            edit(&ws, "", "a").error.as_deref(),
            Some("old_string is empty: give the exact text to replace (use write_file to create a file)")
        );
        assert_eq!(
            edit(&ws, "beta", "beta").error.as_deref(),
            Some("old_string and new_string are identical: nothing would change")
        );
        assert_eq!(
            error(
                json!({"path": "f.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"})
            ),
            "argument `replace_all` must be a boolean, got \"yes\""
        );
        assert_eq!(
            error(json!({"path": "f.txt", "old": "a", "new_string": "b"})),
            "unknown argument `old`; expected one of `path`, `old_string`, `new_string`, `replace_all`"
        );
        assert!(
            error(json!({"path": "nope", "old_string": "a", "new_string": "b"}))
                .contains("no such file")
        );
        assert_eq!(content(&ws), "alpha beta\nbeta gamma\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_out_is_never_edited() {
        crate::tools::testing::race_swapped_subdirectory(2000, |ws, _| {
            let args =
                json!({"path": "sub/secret.txt", "old_string": "secret", "new_string": "secret!"});
            run(ws, args).error.is_none()
        });
    }
}
