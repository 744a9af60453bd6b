//! `edit_file`: exact string replacement in a file.

use super::args::{optional_bool, read_text, required_str};
use super::workspace::{rewrite, Access};
use super::{outcome, Tool, ToolContext};
use crate::types::ToolResult;

/// `edit_file`: replaces `old_string` with `new_string` in a text file.
/// `old_string` must occur exactly once unless `replace_all` is true. The
/// file is read and rewritten through one checked descriptor.
pub struct EditFileTool;

impl Tool for EditFileTool {
    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace an exact string in a text file in the workspace. `old_string` must match the \
         file's text exactly (whitespace and indentation included) and occur exactly once, \
         unless `replace_all` is true, which replaces every occurrence. Include enough \
         surrounding lines in `old_string` to make it unique."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "File path, relative to the workspace root."
                },
                "old_string": {
                    "type": "string",
                    "description": "The exact text to replace (non-empty)."
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put in its place."
                },
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence instead of requiring exactly one (default false)."
                }
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    fn execute(&self, arguments: &serde_json::Value, cx: &ToolContext<'_>) -> ToolResult {
        outcome(edit(arguments, cx))
    }
}

fn edit(arguments: &serde_json::Value, cx: &ToolContext<'_>) -> Result<String, String> {
    let path = required_str(arguments, "path")?;
    let old = required_str(arguments, "old_string")?;
    let new = required_str(arguments, "new_string")?;
    let replace_all = optional_bool(arguments, "replace_all")?.unwrap_or(false);
    if old.is_empty() {
        return Err(
            "old_string is empty: give the exact text to replace (use write_file to create a file)"
                .to_owned(),
        );
    }
    if old == new {
        return Err("old_string and new_string are identical: nothing would change".to_owned());
    }
    let mut file = cx.workspace.open(path, Access::Edit)?;
    let text = read_text(path, &mut file)?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(format!("old_string not found in {path}"));
    }
    if count > 1 && !replace_all {
        return Err(format!(
            "old_string occurs {count} times in {path}; add surrounding context to make it unique, or set replace_all to true"
        ));
    }
    let updated = text.replace(old, new);
    rewrite(&mut file, path, updated.as_bytes())?;
    let noun = if count == 1 {
        "replacement"
    } else {
        "replacements"
    };
    Ok(format!("Made {count} {noun} in {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use serde_json::json;
    use std::fs;

    fn run(ws: &Workspace, args: serde_json::Value) -> ToolResult {
        EditFileTool.execute(&args, &ToolContext::new(ws))
    }

    fn setup() -> (tempfile::TempDir, Workspace) {
        let (dir, ws) = crate::tools::testing::setup();
        fs::write(ws.root().join("f.txt"), "alpha beta\nbeta gamma\n").unwrap();
        (dir, ws)
    }

    fn content(ws: &Workspace) -> String {
        fs::read_to_string(ws.root().join("f.txt")).unwrap()
    }

    #[test]
    fn zero_occurrences() {
        let (_dir, ws) = setup();
        let r = run(
            &ws,
            json!({"path": "f.txt", "old_string": "delta", "new_string": "x"}),
        );
        assert_eq!(r.error.as_deref(), Some("old_string not found in f.txt"));
        assert_eq!(content(&ws), "alpha beta\nbeta gamma\n");
    }

    #[test]
    fn one_occurrence() {
        let (_dir, ws) = setup();
        let r = run(
            &ws,
            json!({"path": "f.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Made 1 replacement in f.txt");
        assert_eq!(content(&ws), "ALPHA beta\nbeta gamma\n");
    }

    #[test]
    fn many_occurrences() {
        let (_dir, ws) = setup();
        let r = run(
            &ws,
            json!({"path": "f.txt", "old_string": "beta", "new_string": "B"}),
        );
        let error = r.error.unwrap();
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
    fn bad_arguments() {
        let (_dir, ws) = setup();
        assert!(run(&ws, json!({"path": "f.txt", "old_string": "a"})).is_error());
        assert!(run(
            &ws,
            json!({"path": "f.txt", "old_string": "", "new_string": "a"})
        )
        .error
        .unwrap()
        .contains("empty"));
        assert!(run(
            &ws,
            json!({"path": "f.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"})
        )
        .error
        .unwrap()
        .contains("boolean"));
        assert!(run(
            &ws,
            json!({"path": "nope", "old_string": "a", "new_string": "b"})
        )
        .error
        .unwrap()
        .contains("no such file"));
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
