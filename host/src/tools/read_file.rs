//! `read_file`: a text file's contents, or a range of its lines.

use super::args::{optional_u64, read_text, required_str};
use super::{outcome, Tool, ToolContext};
use crate::types::ToolResult;

/// At most this many bytes of text are returned.
const MAX_BYTES: usize = 100_000;

/// `read_file`: reads a UTF-8 text file inside the workspace, optionally a
/// range of lines (`offset` is 1-based, `limit` a line count). Output over
/// 100 000 bytes is truncated with a final `[truncated: N more bytes]` line.
pub struct ReadFileTool;

impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a UTF-8 text file in the workspace. Paths are relative to the workspace root \
         (absolute paths must be inside it). Optionally read only `limit` lines starting at \
         line `offset` (1-based). Output longer than 100000 bytes is cut, ending with a \
         `[truncated: N more bytes]` line; use offset/limit to read further."
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "File path, relative to the workspace root."
                },
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line to return, 1-based (default 1)."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Maximum number of lines to return (default: to the end)."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn execute(&self, arguments: &serde_json::Value, cx: &ToolContext<'_>) -> ToolResult {
        outcome(read(arguments, cx))
    }
}

fn read(arguments: &serde_json::Value, cx: &ToolContext<'_>) -> Result<String, String> {
    let path = required_str(arguments, "path")?;
    let offset = optional_u64(arguments, "offset")?;
    let limit = optional_u64(arguments, "limit")?;
    if offset == Some(0) {
        return Err("argument `offset` is 1-based: use 1 for the first line".to_owned());
    }
    if limit == Some(0) {
        return Err("argument `limit` must be at least 1".to_owned());
    }
    let resolved = cx.workspace.resolve(path)?;
    let text = read_text(path, &resolved)?;

    let selected = if offset.is_none() && limit.is_none() {
        text.as_str()
    } else {
        let start_line = usize::try_from(offset.unwrap_or(1)).unwrap_or(usize::MAX);
        let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let starts = line_starts(&text);
        let total = starts.len();
        if start_line > total {
            if text.is_empty() && start_line == 1 {
                ""
            } else {
                return Err(format!(
                    "offset {start_line} is past the end of {path}, which has {total} lines"
                ));
            }
        } else {
            let begin = starts[start_line - 1];
            let end_line = start_line.saturating_sub(1).saturating_add(take);
            let end = starts.get(end_line).copied().unwrap_or(text.len());
            &text[begin..end]
        }
    };
    Ok(cap(selected))
}

/// Byte offsets where each line starts (a trailing newline does not start
/// an extra line).
fn line_starts(text: &str) -> Vec<usize> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut starts = vec![0];
    starts.extend(
        text.match_indices('\n')
            .map(|(i, _)| i + 1)
            .filter(|&i| i < text.len()),
    );
    starts
}

/// `text`, cut to [`MAX_BYTES`] on a character boundary with a note.
fn cap(text: &str) -> String {
    if text.len() <= MAX_BYTES {
        return text.to_owned();
    }
    let mut cut = MAX_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = text[..cut].to_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("[truncated: {} more bytes]", text.len() - cut));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use serde_json::json;
    use std::fs;

    fn run(ws: &Workspace, args: serde_json::Value) -> ToolResult {
        ReadFileTool.execute(&args, &ToolContext::new(ws))
    }

    use crate::tools::testing::setup;

    #[test]
    fn reads_whole_file_and_ranges() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        let r = run(&ws, json!({"path": "a.txt"}));
        assert_eq!(r.error, None);
        assert_eq!(r.output, "one\ntwo\nthree\nfour\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 2, "limit": 2}));
        assert_eq!(r.output, "two\nthree\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 3}));
        assert_eq!(r.output, "three\nfour\n");
        let r = run(&ws, json!({"path": "a.txt", "limit": 1}));
        assert_eq!(r.output, "one\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 9}));
        assert!(r.error.unwrap().contains("past the end"));
        let r = run(&ws, json!({"path": "a.txt", "offset": 0}));
        assert!(r.error.unwrap().contains("1-based"));
    }

    #[test]
    fn bad_arguments() {
        let (_dir, ws) = setup();
        assert!(run(&ws, json!({})).error.unwrap().contains("missing"));
        assert!(run(&ws, json!({"path": 3}))
            .error
            .unwrap()
            .contains("string"));
        assert!(run(&ws, json!({"path": "x", "offset": "a"})).is_error());
        assert!(run(&ws, json!("nope")).error.unwrap().contains("object"));
        assert!(run(&ws, json!({"path": "missing.txt"}))
            .error
            .unwrap()
            .contains("no such file"));
    }

    #[test]
    fn refuses_directories_and_binary() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("d")).unwrap();
        fs::write(ws.root().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        assert!(run(&ws, json!({"path": "d"}))
            .error
            .unwrap()
            .contains("is a directory"));
        assert!(run(&ws, json!({"path": "bin"}))
            .error
            .unwrap()
            .contains("not valid UTF-8"));
    }

    #[test]
    fn truncates_large_files() {
        let (_dir, ws) = setup();
        let line = "x".repeat(99) + "\n";
        fs::write(ws.root().join("big"), line.repeat(1500)).unwrap();
        let r = run(&ws, json!({"path": "big"}));
        assert_eq!(r.error, None);
        assert!(r.output.ends_with("[truncated: 50000 more bytes]"));
        assert!(r.output.len() < MAX_BYTES + 40);
    }
}
