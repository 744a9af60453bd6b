//! `apply_patch`: a unified diff over one or more files, all or nothing.
//!
//! The patch is split into per-file sections (`--- ` / `+++ ` headers and
//! their `@@` hunks; preamble lines such as `diff --git` or `index` are
//! skipped), each parsed and applied with `diffy`. Every file's new content
//! is computed first; files are written only when every section applies.
//!
//! Each file is found as an entry (a directory handle and a name, symlinks
//! followed inside the workspace) and everything after goes through that
//! handle: the old content is read without following a symlink, new content
//! is staged in a fresh file created exclusively (`O_EXCL`, no symlink
//! followed) under a random name beside it, given the old file's mode on
//! its descriptor, and renamed over the name; a deletion unlinks the name.
//!
//! Long with its tests: the code is its first 506 lines, and the last 287
//! are the tests that pin it, kept beside it.

use super::workspace::{read_text, Access, Entry};
use super::{ToolContext, ToolError, TypedTool, Workspace};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
use schemars::JsonSchema;
use serde::Deserialize;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Permissions};
use std::io::{self, Write};

/// How many random staging names are tried before giving up.
const STAGING_ATTEMPTS: usize = 16;

/// `apply_patch`: applies a unified diff (possibly touching several files:
/// `/dev/null` as the old side creates a file, as the new side deletes it).
/// Either every file applies and is written, or nothing is written.
pub struct ApplyPatchTool;

/// The arguments of `apply_patch` (the field docs are what the model
/// reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The unified diff text.
    pub patch: String,
}

impl TypedTool for ApplyPatchTool {
    /// Inline under a deadline: it a local file edit.
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = ApplyPatchArgs;

    fn name(&self) -> &str {
        "apply_patch"
    }

    fn description(&self) -> &str {
        "Apply a unified diff to files in the workspace. The patch may touch several files; \
         each starts with `--- a/path` and `+++ b/path` headers (a leading a/ or b/ is \
         stripped) followed by `@@ -l,s +l,s @@` hunks with a few lines of context. Use \
         `--- /dev/null` to create a file and `+++ /dev/null` to delete one. All or \
         nothing: if any hunk does not apply, no file is changed."
    }

    fn run(&self, arguments: ApplyPatchArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        apply(&arguments.patch, cx.workspace)
    }
}

/// One file's part of the patch: its header and hunk lines.
struct Section {
    /// 1-based line of its `--- ` header in the patch.
    line: usize,
    text: String,
}

/// A file's pending state.
struct Change {
    /// As the patch named it.
    shown: String,
    /// Where it lives.
    entry: Entry,
    /// Its permissions before the patch; `None` when it did not exist.
    original: Option<Permissions>,
    /// `None` once deleted.
    content: Option<String>,
}

impl Change {
    fn existed(&self) -> bool {
        self.original.is_some()
    }
}

fn apply(patch: &str, workspace: &Workspace) -> Result<String, ToolError> {
    let sections = split(patch)?;
    if sections.is_empty() {
        return Err(ToolError::invalid(
            "patch",
            "patch contains no file changes: give a unified diff with `--- a/path` / `+++ b/path` headers and @@ hunks",
        ));
    }
    let mut changes: Vec<Change> = Vec::new();
    for section in &sections {
        apply_section(section, workspace, &mut changes)?;
    }
    commit(workspace, &mut changes)?;

    let mut lines = Vec::new();
    for change in &changes {
        let verb = match (change.existed(), change.content.is_some()) {
            (false, true) => "created",
            (true, true) => "modified",
            (true, false) => "deleted",
            (false, false) => continue,
        };
        lines.push(format!("{verb} {}", change.shown));
    }
    let noun = if lines.len() == 1 { "file" } else { "files" };
    Ok(format!(
        "Applied patch to {} {noun}:\n{}",
        lines.len(),
        lines.join("\n")
    ))
}

/// Splits the patch into file sections, following each hunk by its line
/// counts so that removed lines starting with `--` are not taken for headers.
fn split(patch: &str) -> Result<Vec<Section>, ToolError> {
    let lines: Vec<&str> = patch.split_inclusive('\n').collect();
    let mut sections: Vec<Section> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            let mut text = String::new();
            push_line(&mut text, line);
            push_line(&mut text, lines[i + 1]);
            sections.push(Section { line: i + 1, text });
            i += 2;
        } else if line.starts_with("@@") {
            let Some(section) = sections.last_mut() else {
                return Err(ToolError::invalid(
                    "patch",
                    format!(
                        "hunk at patch line {} comes before any `--- `/`+++ ` file header",
                        i + 1
                    ),
                ));
            };
            let (mut old_left, mut new_left) = hunk_counts(line).ok_or_else(|| {
                ToolError::invalid(
                    "patch",
                    format!(
                        "malformed hunk header at patch line {}: {:?} (expected `@@ -l,s +l,s @@`)",
                        i + 1,
                        line.trim_end()
                    ),
                )
            })?;
            push_line(&mut section.text, line);
            i += 1;
            while i < lines.len() && (old_left > 0 || new_left > 0) {
                let body = lines[i];
                match body.as_bytes().first() {
                    Some(b' ' | b'\n' | b'\r') | None => {
                        old_left = old_left.saturating_sub(1);
                        new_left = new_left.saturating_sub(1);
                    }
                    Some(b'-') => old_left = old_left.saturating_sub(1),
                    Some(b'+') => new_left = new_left.saturating_sub(1),
                    Some(b'\\') => {}
                    // Short hunk: diffy reports the count mismatch.
                    Some(_) => break,
                }
                push_line(&mut section.text, body);
                i += 1;
            }
            while i < lines.len() && lines[i].starts_with('\\') {
                push_line(&mut section.text, lines[i]);
                i += 1;
            }
        } else {
            // Preamble (`diff --git`, `index`, `new file mode`, prose): skipped.
            i += 1;
        }
    }
    Ok(sections)
}

fn push_line(text: &mut String, line: &str) {
    text.push_str(line);
    if !line.ends_with('\n') {
        text.push('\n');
    }
}

/// The old and new line counts of a `@@ -l[,s] +l[,s] @@` header.
fn hunk_counts(header: &str) -> Option<(usize, usize)> {
    let rest = header.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    Some((range_len(old)?, range_len(new)?))
}

fn range_len(range: &str) -> Option<usize> {
    match range.split_once(',') {
        Some((start, len)) => {
            start.parse::<usize>().ok()?;
            len.parse().ok()
        }
        None => range.parse::<usize>().ok().map(|_| 1),
    }
}

/// A header path without its `a/` / `b/` prefix; `None` for `/dev/null`.
fn header_path(name: Option<&str>) -> Option<String> {
    let name = name?.trim_end_matches('\r');
    if name == "/dev/null" {
        return None;
    }
    let stripped = name
        .strip_prefix("a/")
        .or_else(|| name.strip_prefix("b/"))
        .unwrap_or(name);
    Some(stripped.to_owned())
}

fn apply_section(
    section: &Section,
    workspace: &Workspace,
    changes: &mut Vec<Change>,
) -> Result<(), ToolError> {
    let at = section.line;
    let parsed = diffy::Patch::from_str(&section.text)
        .map_err(|e| unwritten(format!("file patch at line {at}: {e}")))?;
    let old = header_path(parsed.original());
    let new = header_path(parsed.modified());
    let hunks = parsed.hunks();
    match (old, new) {
        (None, None) => Err(ToolError::failed(format!(
            "file patch at line {at} has /dev/null on both sides; name the file in its `---` or `+++` header"
        ))),
        (None, Some(new)) => {
            let index = change_for(workspace, changes, &new)?;
            if changes[index].content.is_some() {
                return Err(unwritten(format!(
                    "patch creates {new}, which already exists; use a modification (`--- a/{new}`) instead"
                )));
            }
            let content = apply_hunks(&new, "", &parsed)?;
            changes[index].content = Some(content);
            Ok(())
        }
        (Some(old), None) => {
            let index = change_for(workspace, changes, &old)?;
            let Some(base) = changes[index].content.as_deref() else {
                return Err(unwritten(format!(
                    "patch deletes {old}, which does not exist"
                )));
            };
            if !hunks.is_empty() && !apply_hunks(&old, base, &parsed)?.is_empty() {
                return Err(unwritten(format!(
                    "patch deletes {old} but its hunks do not remove all of the file's content"
                )));
            }
            changes[index].content = None;
            Ok(())
        }
        (Some(old), Some(new)) => {
            if hunks.is_empty() {
                return Err(unwritten(format!(
                    "file patch for {new} at line {at} has no @@ hunks"
                )));
            }
            let from = change_for(workspace, changes, &old)?;
            let Some(base) = changes[from].content.as_deref() else {
                return Err(unwritten(format!(
                    "patch modifies {old}, which does not exist; use `--- /dev/null` to create it"
                )));
            };
            let content = apply_hunks(&new, base, &parsed)?;
            let to = change_for(workspace, changes, &new)?;
            if from != to {
                // A rename: the new name must be free.
                if changes[to].content.is_some() {
                    return Err(unwritten(format!(
                        "patch renames {old} to {new}, which already exists"
                    )));
                }
                changes[from].content = None;
            }
            changes[to].content = Some(content);
            Ok(())
        }
    }
}

/// A failure of the patch that leaves every file as it was.
fn unwritten(message: String) -> ToolError {
    ToolError::failed(message).nothing_written()
}

fn apply_hunks(
    shown: &str,
    base: &str,
    patch: &diffy::Patch<'_, str>,
) -> Result<String, ToolError> {
    diffy::apply(base, patch).map_err(|e| {
        let message = e.to_string();
        let number: Option<usize> = message
            .rsplit('#')
            .next()
            .and_then(|n| n.trim().parse().ok());
        unwritten(
            match number.and_then(|n| Some((n, patch.hunks().get(n.checked_sub(1)?)?))) {
                Some((n, hunk)) => format!(
                    "{shown}: hunk #{n} (@@ -{} +{} @@) does not apply: its context or removed lines do not match the file",
                    hunk.old_range(),
                    hunk.new_range()
                ),
                None => format!("{shown}: {message}"),
            },
        )
    })
}

/// The index of `shown`'s pending change, loading its current state from
/// disk on first touch.
fn change_for(
    workspace: &Workspace,
    changes: &mut Vec<Change>,
    shown: &str,
) -> Result<usize, ToolError> {
    let entry = workspace.entry(shown).map_err(ToolError::nothing_written)?;
    if let Some(index) = changes.iter().position(|c| c.entry.same_as(&entry)) {
        return Ok(index);
    }
    let (content, original) = match entry
        .open(workspace, shown, Access::Replace)
        .map_err(ToolError::nothing_written)?
    {
        Some(mut file) => {
            let permissions = file
                .metadata()
                .map_err(|e| ToolError::io(shown, "inspect", e).nothing_written())?
                .permissions();
            let content = read_text(&mut file, shown).map_err(ToolError::nothing_written)?;
            (Some(content), Some(permissions))
        }
        None => (None, None),
    };
    changes.push(Change {
        shown: shown.to_owned(),
        entry,
        original,
        content,
    });
    Ok(changes.len() - 1)
}

/// A staged new content: the change it is for and the staging file's name
/// in the change's directory.
struct Staged {
    change: usize,
    name: OsString,
}

/// Writes every change: new contents go to staging files beside their
/// targets first (so a failure leaves the originals alone), then are renamed
/// into place; deletions come last.
fn commit(workspace: &Workspace, changes: &mut [Change]) -> Result<(), ToolError> {
    let mut staged: Vec<Staged> = Vec::new();
    for index in 0..changes.len() {
        let change = &mut changes[index];
        let Some(content) = &change.content else {
            continue;
        };
        let shown = &change.shown;
        match stage(
            workspace,
            &mut change.entry,
            shown,
            content,
            change.original.as_ref(),
        ) {
            Ok(name) => staged.push(Staged {
                change: index,
                name,
            }),
            Err(error) => {
                discard(changes, &staged);
                return Err(error.nothing_written());
            }
        }
    }
    for (done, staging) in staged.iter().enumerate() {
        let change = &changes[staging.change];
        let renamed = match change.entry.existing_directory() {
            Some(dir) => dir.rename(&staging.name, dir, change.entry.name()),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        };
        if let Err(e) = renamed {
            discard(changes, &staged[done..]);
            return Err(ToolError::io(&change.shown, "write", e).partly_applied());
        }
    }
    for change in changes.iter() {
        if change.existed() && change.content.is_none() {
            delete(change)
                .map_err(|e| ToolError::io(&change.shown, "delete", e).partly_applied())?;
        }
    }
    Ok(())
}

/// Removes staging files that will not be renamed into place.
fn discard(changes: &[Change], staged: &[Staged]) {
    for staging in staged {
        if let Some(dir) = changes[staging.change].entry.existing_directory() {
            let _ = dir.remove_file(&staging.name);
        }
    }
}

fn delete(change: &Change) -> io::Result<()> {
    match change.entry.existing_directory() {
        Some(dir) => dir.remove_file(change.entry.name()),
        None => Err(io::Error::from(io::ErrorKind::NotFound)),
    }
}

/// Writes `content` to a new staging file in the entry's directory
/// (creating the directory when needed) with the original's permissions;
/// returns the staging file's name.
fn stage(
    workspace: &Workspace,
    entry: &mut Entry,
    shown: &str,
    content: &str,
    original: Option<&Permissions>,
) -> Result<OsString, ToolError> {
    let target = entry.name().to_owned();
    let dir = entry.directory(workspace, shown)?;
    let (name, mut file) = create_staging_file(dir, &target, original.is_some())
        .map_err(|e| ToolError::io(shown, "write", e))?;
    if let Err(e) = fill(&mut file, content, original) {
        let _ = dir.remove_file(&name);
        return Err(ToolError::io(shown, "write", e));
    }
    Ok(name)
}

/// Writes the staged content and sets the permissions on the descriptor.
fn fill(file: &mut File, content: &str, original: Option<&Permissions>) -> io::Result<()> {
    file.write_all(content.as_bytes())?;
    if let Some(permissions) = original {
        file.set_permissions(permissions.clone())?;
    }
    Ok(())
}

/// Creates a fresh staging file for `target` in `dir`: a random name,
/// created exclusively and without following a symlink, so nothing planted
/// at a name is ever opened. `private` files start readable by the owner
/// only (their mode is set from the original afterwards); others get the
/// usual creation mode.
fn create_staging_file(dir: &Dir, target: &OsStr, private: bool) -> io::Result<(OsString, File)> {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .follow(FollowSymlinks::No);
    creation_mode(&mut options, if private { 0o600 } else { 0o666 });
    for _ in 0..STAGING_ATTEMPTS {
        let name = staging_name(target)?;
        match dir.open_with(&name, &options) {
            Ok(file) => return Ok((name, file.into_std())),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free staging name beside it",
    ))
}

/// `.<target>.apply_patch.<16 random hex digits>.tmp`.
fn staging_name(target: &OsStr) -> io::Result<OsString> {
    let random = getrandom::u64().map_err(|e| io::Error::other(e.to_string()))?;
    let mut name = OsString::from(".");
    name.push(target);
    name.push(format!(".apply_patch.{random:016x}.tmp"));
    Ok(name)
}

#[cfg(unix)]
fn creation_mode(options: &mut OpenOptions, mode: u32) {
    use cap_std::fs::OpenOptionsExt;
    options.mode(mode);
}

#[cfg(not(unix))]
fn creation_mode(_options: &mut OpenOptions, _mode: u32) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolResult;
    use serde_json::json;
    use std::fs;

    fn run(ws: &Workspace, patch: &str) -> ToolResult {
        crate::tools::testing::run(&ApplyPatchTool, ws, json!({ "patch": patch }))
    }

    use crate::tools::testing::setup;

    fn read(ws: &Workspace, p: &str) -> String {
        fs::read_to_string(ws.root().join(p)).unwrap()
    }

    #[test]
    fn create_modify_delete_in_one_patch() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("keep.txt"), "one\ntwo\nthree\n").unwrap();
        fs::write(ws.root().join("gone.txt"), "bye\n").unwrap();
        let patch = "\
diff --git a/keep.txt b/keep.txt
index 1111111..2222222 100644
--- a/keep.txt
+++ b/keep.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/src/new.txt b/src/new.txt
new file mode 100644
--- /dev/null
+++ b/src/new.txt
@@ -0,0 +1,2 @@
+hello
+world
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
";
        let r = run(&ws, patch);
        assert_eq!(r.error, None);
        assert_eq!(
            r.output,
            "Applied patch to 3 files:\nmodified keep.txt\ncreated src/new.txt\ndeleted gone.txt"
        );
        assert_eq!(read(&ws, "keep.txt"), "one\nTWO\nthree\n");
        assert_eq!(read(&ws, "src/new.txt"), "hello\nworld\n");
        assert!(!ws.root().join("gone.txt").exists());
        // No temporary files left behind.
        let names: Vec<_> = fs::read_dir(ws.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn all_or_nothing() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("a.txt"), "a1\na2\n").unwrap();
        fs::write(ws.root().join("b.txt"), "b1\nb2\n").unwrap();
        let patch = "\
--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
-a1
+A1
 a2
--- /dev/null
+++ b/c.txt
@@ -0,0 +1 @@
+c
--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,2 @@
 b1
-not what is there
+B2
";
        let r = run(&ws, patch);
        let error = r.error.unwrap();
        assert!(error.starts_with("b.txt: hunk #1"), "{error}");
        assert!(error.contains("nothing was written"), "{error}");
        assert_eq!(read(&ws, "a.txt"), "a1\na2\n");
        assert_eq!(read(&ws, "b.txt"), "b1\nb2\n");
        assert!(!ws.root().join("c.txt").exists());
    }

    #[test]
    fn removed_lines_that_look_like_headers() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("m.md"), "-- a\n++ b\nend\n").unwrap();
        let patch = "\
--- a/m.md
+++ b/m.md
@@ -1,3 +1,1 @@
--- a
-++ b
 end
";
        let r = run(&ws, patch);
        assert_eq!(r.error, None, "{}", r.output);
        assert_eq!(read(&ws, "m.md"), "end\n");
    }

    #[test]
    fn bad_patches() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("x.txt"), "x\n").unwrap();
        assert!(run(&ws, "").error.unwrap().contains("no file changes"));
        assert!(run(&ws, "@@ -1 +1 @@\n-x\n+y\n")
            .error
            .unwrap()
            .contains("before any"));
        let r = run(&ws, "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+y\n");
        assert!(r.error.unwrap().contains("already exists"));
        let r = run(&ws, "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-x\n+y\n");
        assert!(r.error.unwrap().contains("does not exist"));
        let r = run(&ws, "--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n-x\n+y\n");
        assert!(r.is_error());
        assert!(crate::tools::testing::run(&ApplyPatchTool, &ws, json!({})).is_error());
        assert_eq!(read(&ws, "x.txt"), "x\n");
    }

    #[test]
    fn refuses_escapes() {
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("out.txt");
        fs::write(&target, "secret\n").unwrap();
        let modify = |p: &str| format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-secret\n+pwned\n");
        let create = |p: &str| format!("--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+pwned\n");
        let mut patches = vec![
            modify("../x"),
            create("../x"),
            format!(
                "--- {0}\n+++ {0}\n@@ -1 +1 @@\n-secret\n+pwned\n",
                target.display()
            ),
            create("/etc/chimera-nope"),
        ];
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&target, ws.root().join("l")).unwrap();
            std::os::unix::fs::symlink(outside.path(), ws.root().join("dl")).unwrap();
            patches.push(modify("l"));
            patches.push(create("dl/new.txt"));
        }
        for patch in patches {
            let r = run(&ws, &patch);
            let error = r.error.unwrap();
            assert!(error.contains("escapes the workspace"), "{patch}: {error}");
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "secret\n");
        assert!(!outside.path().join("new.txt").exists());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_planted_at_staging_names_are_never_written_through() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        fs::write(&victim, "victim\n").unwrap();
        fs::set_permissions(&victim, Permissions::from_mode(0o600)).unwrap();
        let kept = ws.root().join("f.txt");
        fs::write(&kept, "one\n").unwrap();
        fs::set_permissions(&kept, Permissions::from_mode(0o751)).unwrap();
        // Every name the old code could have staged this patch's files under.
        let pid = std::process::id();
        let mut planted = Vec::new();
        for name in ["f.txt", "new.txt"] {
            for i in 0..4 {
                let link = ws.root().join(format!(".{name}.apply_patch.{pid}.{i}.tmp"));
                symlink(&victim, &link).unwrap();
                planted.push(link);
            }
        }
        let patch = "\
--- a/f.txt
+++ b/f.txt
@@ -1 +1 @@
-one
+two
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+new
";
        let r = run(&ws, patch);
        assert_eq!(r.error, None);
        assert_eq!(fs::read_to_string(&victim).unwrap(), "victim\n");
        assert_eq!(mode(&victim), 0o600);
        assert_eq!(read(&ws, "f.txt"), "two\n");
        assert_eq!(mode(&kept), 0o751);
        assert_eq!(read(&ws, "new.txt"), "new\n");
        for link in planted {
            assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_out_never_receives_a_patch() {
        crate::tools::testing::race_swapped_subdirectory(2000, |ws, i| {
            let patch = format!(
                "--- /dev/null\n+++ b/sub/new-{i}.txt\n@@ -0,0 +1 @@\n+pwned\n\
                 --- a/sub/secret.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-secret\n"
            );
            let applied = run(ws, &patch).error.is_none();
            if applied {
                // Put the deleted file back for the next try (a patch too,
                // so it races as well; it lands once `sub` is the real one).
                // Retried for a while, yielding: on a loaded machine the
                // racer can be descheduled with `sub` on the outside side
                // for longer than a fixed number of quick tries.
                let restore = "--- /dev/null\n+++ b/sub/secret.txt\n@@ -0,0 +1 @@\n+secret\n";
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                let restored = std::iter::repeat_with(|| {
                    let done = run(ws, restore).error.is_none();
                    if !done {
                        std::thread::yield_now();
                    }
                    done
                })
                .take_while(|_| std::time::Instant::now() < deadline)
                .any(|done| done);
                assert!(restored, "sub/secret.txt could not be put back in 10 s");
            }
            applied
        });
    }

    #[cfg(unix)]
    #[test]
    fn two_spellings_of_one_file_are_one_change() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("sub")).unwrap();
        fs::write(ws.root().join("sub/f.txt"), "one\n").unwrap();
        std::os::unix::fs::symlink("sub", ws.root().join("link")).unwrap();
        let patch = "\
--- a/sub/f.txt
+++ b/sub/f.txt
@@ -1 +1 @@
-one
+two
--- a/link/./f.txt
+++ b/link/./f.txt
@@ -1 +1 @@
-two
+three
";
        let r = run(&ws, patch);
        assert_eq!(r.error, None);
        assert_eq!(r.output, "Applied patch to 1 file:\nmodified sub/f.txt");
        assert_eq!(read(&ws, "sub/f.txt"), "three\n");
        assert!(fs::symlink_metadata(ws.root().join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_file_inside_is_patched_at_its_target() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("real.txt"), "one\n").unwrap();
        std::os::unix::fs::symlink("real.txt", ws.root().join("alias.txt")).unwrap();
        let r = run(
            &ws,
            "--- a/alias.txt\n+++ b/alias.txt\n@@ -1 +1 @@\n-one\n+two\n",
        );
        assert_eq!(r.error, None);
        assert_eq!(read(&ws, "real.txt"), "two\n");
        assert!(fs::symlink_metadata(ws.root().join("alias.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
