//! The workspace confinement: every path a tool touches resolves here.
//!
//! A path is resolved against the canonical root; the deepest ancestor that
//! exists is canonicalised (following every symlink on the way) and must stay
//! under the root. The part that does not exist yet may not contain `..`. A
//! dangling symlink is followed to where it points, which must be inside too.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// How many dangling symlinks one resolution may follow before giving up.
const MAX_LINK_DEPTH: usize = 40;

/// The directory tools are confined to.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

/// A resolved path and whether something exists there.
struct Located {
    path: PathBuf,
    exists: bool,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist); the root is
    /// canonicalised.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref().canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("workspace root is not a directory: {}", root.display()),
            ));
        }
        Ok(Workspace { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root, or absolute inside it) to the
    /// canonical path of an existing file or directory inside the workspace.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        let located = self.locate(path)?;
        if located.exists {
            Ok(located.path)
        } else {
            Err(format!(
                "no such file or directory: {path} (paths are relative to the workspace root)"
            ))
        }
    }

    /// Resolves `path` for writing: the file may not exist yet, nor its
    /// parent directories. The result is inside the workspace; any missing
    /// directories on the way are for the caller to create.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, String> {
        self.locate(path).map(|located| located.path)
    }

    fn escape_error(&self, path: &str) -> String {
        format!(
            "path escapes the workspace: {path} (use a path inside {})",
            self.root.display()
        )
    }

    fn locate(&self, path: &str) -> Result<Located, String> {
        if path.is_empty() {
            return Err("path is empty: give a path relative to the workspace root".to_owned());
        }
        if path.contains('\0') {
            return Err(format!("path contains a NUL byte: {path:?}"));
        }
        let joined = if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            self.root.join(path)
        };
        self.locate_joined(path, &joined, 0)
    }

    /// `joined` is absolute; `shown` is what the caller asked for, for errors.
    fn locate_joined(&self, shown: &str, joined: &Path, depth: usize) -> Result<Located, String> {
        if depth > MAX_LINK_DEPTH {
            return Err(format!("too many levels of symbolic links: {shown}"));
        }
        // The deepest ancestor (a component-wise prefix) that canonicalises.
        let mut found = None;
        for ancestor in joined.ancestors() {
            if let Ok(canonical) = ancestor.canonicalize() {
                found = Some((ancestor, canonical));
                break;
            }
        }
        let Some((ancestor, canonical)) = found else {
            return Err(self.escape_error(shown));
        };
        if !canonical.starts_with(&self.root) {
            return Err(self.escape_error(shown));
        }
        let rest: Vec<OsString> = joined
            .components()
            .skip(ancestor.components().count())
            .map(|c| c.as_os_str().to_owned())
            .collect();
        if rest.is_empty() {
            return Ok(Located {
                path: canonical,
                exists: true,
            });
        }
        for part in &rest {
            match Path::new(part).components().next() {
                Some(Component::Normal(_)) => {}
                Some(Component::ParentDir) => return Err(self.escape_error(shown)),
                _ => return Err(format!("invalid path: {shown}")),
            }
        }
        let first = canonical.join(&rest[0]);
        if let Ok(meta) = first.symlink_metadata() {
            if meta.file_type().is_symlink() {
                // A dangling (or looping) symlink: follow it by hand.
                let target = std::fs::read_link(&first)
                    .map_err(|e| format!("cannot read symlink {shown}: {e}"))?;
                let mut next = canonical.join(target);
                for part in &rest[1..] {
                    next.push(part);
                }
                return self.locate_joined(shown, &next, depth + 1);
            }
            // It exists but could not be canonicalised (permissions, or a
            // file used as a directory): report it as it is.
        }
        let mut path = canonical;
        for part in &rest {
            path.push(part);
        }
        Ok(Located {
            path,
            exists: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::tools::testing::setup;

    #[test]
    fn new_requires_existing_root() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Workspace::new(dir.path().join("missing")).is_err());
        let ws = Workspace::new(dir.path()).unwrap();
        assert_eq!(ws.root(), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn resolves_relative_and_absolute_inside() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("sub")).unwrap();
        fs::write(ws.root().join("sub/a.txt"), "a").unwrap();
        let expected = ws.root().join("sub/a.txt");
        assert_eq!(ws.resolve("sub/a.txt").unwrap(), expected);
        assert_eq!(ws.resolve("./sub/../sub/a.txt").unwrap(), expected);
        let abs = expected.to_str().unwrap().to_owned();
        assert_eq!(ws.resolve(&abs).unwrap(), expected);
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
    }

    #[test]
    fn missing_and_empty() {
        let (_dir, ws) = setup();
        assert!(ws.resolve("nope.txt").unwrap_err().contains("no such file"));
        assert!(ws.resolve("").unwrap_err().contains("empty"));
        assert!(ws.resolve_for_write("").unwrap_err().contains("empty"));
        assert_eq!(
            ws.resolve_for_write("new/dir/f.txt").unwrap(),
            ws.root().join("new/dir/f.txt")
        );
    }

    #[test]
    fn refuses_parent_dir_escape() {
        let (_dir, ws) = setup();
        assert!(ws
            .resolve("../x")
            .unwrap_err()
            .contains("escapes the workspace"));
        assert!(ws
            .resolve_for_write("../x")
            .unwrap_err()
            .contains("escapes the workspace"));
        assert!(ws
            .resolve_for_write("missing/../../x")
            .unwrap_err()
            .contains("escapes the workspace"));
        // `..` under a directory that does not exist yet is refused too.
        assert!(ws
            .resolve_for_write("missing/../x")
            .unwrap_err()
            .contains("escapes the workspace"));
    }

    #[test]
    fn refuses_absolute_outside() {
        let (_dir, ws) = setup();
        assert!(ws
            .resolve("/etc/passwd")
            .unwrap_err()
            .contains("escapes the workspace"));
        assert!(ws
            .resolve_for_write("/etc/chimera-test-nope")
            .unwrap_err()
            .contains("escapes the workspace"));
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_out() {
        use std::os::unix::fs::symlink;
        let (_dir, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path(), ws.root().join("dirlink")).unwrap();
        symlink(outside.path().join("secret"), ws.root().join("filelink")).unwrap();
        symlink(outside.path().join("nothing"), ws.root().join("dangling")).unwrap();
        for p in ["dirlink/secret", "filelink", "dangling"] {
            assert!(ws.resolve(p).unwrap_err().contains("escapes"), "{p}");
            assert!(
                ws.resolve_for_write(p).unwrap_err().contains("escapes"),
                "{p}"
            );
        }
        assert!(ws
            .resolve_for_write("dirlink/new/file")
            .unwrap_err()
            .contains("escapes"));
    }

    #[cfg(unix)]
    #[test]
    fn follows_symlinks_inside() {
        use std::os::unix::fs::symlink;
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("real")).unwrap();
        fs::write(ws.root().join("real/f"), "x").unwrap();
        symlink("real", ws.root().join("link")).unwrap();
        symlink("real/later", ws.root().join("dangling_in")).unwrap();
        symlink("loop", ws.root().join("loop")).unwrap();
        assert_eq!(ws.resolve("link/f").unwrap(), ws.root().join("real/f"));
        assert_eq!(
            ws.resolve_for_write("dangling_in").unwrap(),
            ws.root().join("real/later")
        );
        assert!(ws
            .resolve_for_write("loop")
            .unwrap_err()
            .contains("symbolic links"));
    }
}
