//! `replace_in_file`: regular-expression replace-all in a file.

use super::{ToolContext, ToolError, TypedTool};
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;

/// `replace_in_file`: replaces every match of a regular expression (the
/// `regex` crate's syntax) in a text file; `$1` / `${name}` in the
/// replacement refer to capture groups. The file is read and rewritten
/// through one checked descriptor.
pub struct ReplaceInFileTool;

/// The arguments of `replace_in_file` (the field docs are what the model
/// reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceInFileArgs {
    /// File path, relative to the workspace root.
    pub path: String,
    /// Regular expression (Rust regex syntax).
    pub pattern: String,
    /// Replacement text; $1, ${1} or ${name} refer to capture groups, $$ is
    /// a literal $.
    pub replacement: String,
}

impl TypedTool for ReplaceInFileTool {
    /// Inline under a deadline: it a local file edit.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = ReplaceInFileArgs;

    fn name(&self) -> &str {
        "replace_in_file"
    }

    fn description(&self) -> &str {
        "Replace every match of a regular expression in a text file in the workspace \
         (Rust `regex` syntax; use (?m) for ^/$ per line, (?s) for . to match newlines). \
         In the replacement, $1 or ${name} insert capture groups (write ${1} when letters \
         or digits follow, and $$ for a literal $). Fails if the pattern matches nothing."
    }

    fn run(&self, arguments: ReplaceInFileArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let ReplaceInFileArgs {
            path,
            pattern,
            replacement,
        } = arguments;
        let regex = Regex::new(&pattern).map_err(|e| {
            ToolError::invalid(
                "pattern",
                format!(
                    "invalid regex {pattern:?}: {}",
                    regex_error_line(&e.to_string())
                ),
            )
        })?;
        let count = cx.workspace.edit_text(&path, |text| {
            let count = regex.find_iter(text).count();
            if count == 0 {
                return Err(ToolError::failed(format!(
                    "pattern matched nothing in {path}"
                )));
            }
            Ok((regex.replace_all(text, &replacement).into_owned(), count))
        })?;
        let noun = if count == 1 { "match" } else { "matches" };
        Ok(format!("Replaced {count} {noun} in {path}"))
    }
}

/// A regex error on one line: its `error: ...` line when it has one (the
/// syntax errors draw a caret diagram over several lines).
fn regex_error_line(message: &str) -> String {
    message
        .lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map_or_else(|| crate::types::one_line(message), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use crate::types::ToolResult;
    use serde_json::json;
    use std::fs;

    fn run(ws: &Workspace, args: serde_json::Value) -> ToolResult {
        crate::tools::testing::run(&ReplaceInFileTool, ws, args)
    }

    fn setup() -> (tempfile::TempDir, Workspace) {
        crate::tools::testing::with_file("f.txt", "let a = 1;\nlet b = 2;\n")
    }

    #[test]
    fn replaces_with_capture_groups() {
        let (_dir, ws) = setup();
        let r = run(
            &ws,
            json!({"path": "f.txt", "pattern": r"let (\w+) = (\d+);", "replacement": "const ${1}_X: i32 = $2;"}),
        );
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Replaced 2 matches in f.txt");
        assert_eq!(
            fs::read_to_string(ws.root().join("f.txt")).unwrap(),
            "const a_X: i32 = 1;\nconst b_X: i32 = 2;\n"
        );
    }

    #[test]
    fn no_match_and_invalid_regex() {
        let (_dir, ws) = setup();
        let r = run(
            &ws,
            json!({"path": "f.txt", "pattern": "zzz", "replacement": "y"}),
        );
        assert_eq!(r.error.as_deref(), Some("pattern matched nothing in f.txt"));
        let r = run(
            &ws,
            json!({"path": "f.txt", "pattern": "(unclosed", "replacement": "y"}),
        );
        let error = r.error.unwrap();
        assert!(error.starts_with("invalid regex"), "{error}");
        assert!(!error.contains('\n'), "{error}");
        assert_eq!(
            fs::read_to_string(ws.root().join("f.txt")).unwrap(),
            "let a = 1;\nlet b = 2;\n"
        );
    }
}
