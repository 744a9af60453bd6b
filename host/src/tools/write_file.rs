//! `write_file`: create or overwrite a file.

use super::workspace::Access;
use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::Write;

/// `write_file`: writes `content` to `path` (replacing the whole file),
/// creating missing parent directories inside the workspace. An existing
/// file is emptied and rewritten in place through the descriptor that was
/// checked (a regular file with one link), so its mode is kept.
pub struct WriteFileTool;

/// The arguments of `write_file` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// File path, relative to the workspace root.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

impl TypedTool for WriteFileTool {
    /// Inline under a deadline: it a local file write.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = WriteFileArgs;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create or overwrite a file in the workspace with the given content (the whole file \
         is replaced). Missing parent directories are created. Paths are relative to the \
         workspace root. Prefer edit_file or apply_patch for changes to existing files."
    }

    fn run(&self, arguments: WriteFileArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let WriteFileArgs { path, content } = arguments;
        cx.workspace.create_parents(&path)?;
        let mut file = cx.workspace.open(&path, Access::Write)?;
        file.write_all(content.as_bytes())
            .map_err(|e| ToolError::io(&path, "write", e))?;
        Ok(format!("Wrote {} bytes to {path}", content.len()))
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
        crate::tools::testing::run(&WriteFileTool, ws, args)
    }

    use crate::tools::testing::setup;

    #[test]
    fn writes_and_creates_parents() {
        let (_dir, ws) = setup();
        let r = run(&ws, json!({"path": "a/b/c.txt", "content": "hello"}));
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Wrote 5 bytes to a/b/c.txt");
        assert_eq!(
            fs::read_to_string(ws.root().join("a/b/c.txt")).unwrap(),
            "hello"
        );
        let r = run(&ws, json!({"path": "a/b/c.txt", "content": "x"}));
        assert_eq!(r.error, None);
        assert_eq!(
            fs::read_to_string(ws.root().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[test]
    fn bad_arguments_and_directories() {
        let (_dir, ws) = setup();
        assert!(run(&ws, json!({"path": "x"}))
            .error
            .unwrap()
            .contains("content"));
        assert!(run(&ws, json!({"content": "x"}))
            .error
            .unwrap()
            .contains("path"));
        fs::create_dir(ws.root().join("d")).unwrap();
        assert!(run(&ws, json!({"path": "d", "content": ""}))
            .error
            .unwrap()
            .contains("is a directory"));
    }

    #[test]
    fn refuses_escapes() {
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("out.txt");
        for p in [
            "../x".to_owned(),
            "/etc/passwd".to_owned(),
            target.to_str().unwrap().to_owned(),
        ] {
            let r = run(&ws, json!({"path": p, "content": "pwned"}));
            assert!(r.error.unwrap().contains("escapes the workspace"), "{p}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            fs::write(&target, "original").unwrap();
            symlink(&target, ws.root().join("l")).unwrap();
            symlink(outside.path(), ws.root().join("dl")).unwrap();
            symlink(outside.path().join("new.txt"), ws.root().join("dangling")).unwrap();
            for p in ["l", "dl/out.txt", "dl/sub/new.txt", "dangling"] {
                let r = run(&ws, json!({"path": p, "content": "pwned"}));
                assert!(r.error.unwrap().contains("escapes the workspace"), "{p}");
            }
            assert_eq!(fs::read_to_string(&target).unwrap(), "original");
            assert!(!outside.path().join("new.txt").exists());
            assert!(!outside.path().join("sub").exists());
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_out_never_receives_a_write() {
        crate::tools::testing::race_swapped_subdirectory(2000, |ws, i| {
            let path = format!("sub/new-{i}.txt");
            run(ws, json!({"path": path, "content": "pwned"}))
                .error
                .is_none()
        });
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_even_with_a_reader_waiting() {
        use std::os::unix::fs::OpenOptionsExt;
        let (_dir, ws) = setup();
        let fifo = ws.root().join("fifo");
        crate::tools::testing::make_fifo(&fifo);
        let _reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(i32::from_ne_bytes(
                rustix::fs::OFlags::NONBLOCK.bits().to_ne_bytes(),
            ))
            .open(&fifo)
            .unwrap();
        crate::tools::testing::within_seconds(10, move || {
            let r = run(&ws, json!({"path": "fifo", "content": "x"}));
            assert_eq!(
                r.error.as_deref(),
                Some("fifo is not a regular file; only regular files can be read or written")
            );
        });
    }

    #[cfg(unix)]
    #[test]
    fn overwriting_keeps_the_mode_and_refuses_hard_links() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ws) = setup();
        let file = ws.root().join("script.sh");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o750)).unwrap();
        let r = run(&ws, json!({"path": "script.sh", "content": "new"}));
        assert_eq!(r.error, None);
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750);
        fs::hard_link(&file, ws.root().join("other")).unwrap();
        let r = run(&ws, json!({"path": "script.sh", "content": "pwned"}));
        assert_eq!(
            r.error.as_deref(),
            Some("script.sh has 2 hard links; refusing to write through a hard link (replace it with a copy of its own first)")
        );
        assert_eq!(fs::read_to_string(ws.root().join("other")).unwrap(), "new");
    }
}
