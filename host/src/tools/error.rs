//! Why a tool call failed: [`ToolError`], and [`PathError`] for the paths
//! the workspace refuses.
//!
//! Every error's `Display` is the one line the conversation records for the
//! failed call; the agent turns a tool's outcome into a
//! [`ToolResult`](crate::types::ToolResult) in one place, the
//! `From<Result<String, ToolError>>` conversion below. Errors wrapping an
//! `io::Error` repeat its text in their own line (the model sees only that
//! line) and also keep it as their `source`.

use crate::types::ToolResult;
use std::io;
use std::path::PathBuf;

/// Why a tool call failed. The `Display` text is what the model is told.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not fit the tool's schema, or break one of its
    /// rules (an empty `old_string`, a `timeout_secs` above the maximum).
    #[error("{message}")]
    InvalidArguments {
        /// The argument at fault, as a path into the arguments
        /// (`offset`, `todos[2].status`); `None` when the arguments as a
        /// whole are wrong.
        argument: Option<String>,
        /// The whole line: what is wrong and what to give instead.
        message: String,
    },
    /// The workspace refused a path.
    #[error(transparent)]
    Path(#[from] PathError),
    /// An operation on a workspace file failed: `cannot <action> <path>:
    /// <error>`.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// The path as the caller spelled it.
        path: String,
        /// What could not be done to it (`read`, `write`, `inspect`, ...).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file that is not UTF-8 text.
    #[error(
        "{path} is not valid UTF-8 text (binary file?); only text files can be read or edited"
    )]
    NotUtf8 {
        /// The path as the caller spelled it.
        path: String,
    },
    /// A file with a NUL byte, which text does not have.
    #[error(
        "{path} contains a NUL byte at byte {offset} (binary file?); only text files can be read"
    )]
    NulByte {
        /// The path as the caller spelled it.
        path: String,
        /// The byte offset of the first NUL.
        offset: u64,
    },
    /// A process the tool needs could not be set up or started:
    /// `could not <action>: <error>`.
    #[error("could not {action}: {source}")]
    Process {
        /// What could not be done (`start bash`, ...).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A command ran past its timeout and was killed with every process it
    /// started.
    #[error("command timed out after {seconds}s; it and every process it started were killed")]
    TimedOut {
        /// The timeout, in seconds.
        seconds: u64,
        /// What the command wrote before it was killed.
        output: String,
    },
    /// A command ended unsuccessfully.
    #[error("{status}")]
    CommandFailed {
        /// How it ended: `exit status 3`, `killed by signal 9`.
        status: String,
        /// What it wrote.
        output: String,
    },
    /// `apply_patch` failed, having written nothing or (when a rename
    /// failed half-way) part of the patch.
    #[error(
        "{source}; {}",
        if *partly_applied { "the patch was only partly applied" } else { "nothing was written" }
    )]
    Patch {
        /// Why it failed.
        #[source]
        source: Box<ToolError>,
        /// Whether some files were already changed.
        partly_applied: bool,
    },
    /// Any other failure of the tool's own, with whatever output it
    /// produced before failing (a sub-agent's unfinished answer, say).
    #[error("{message}")]
    Failed {
        /// The whole line.
        message: String,
        /// Output to keep with the error; empty when there is none.
        output: String,
    },
}

impl ToolError {
    /// An [`InvalidArguments`](ToolError::InvalidArguments) error about
    /// `argument`, whose line is `message`.
    pub fn invalid(argument: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError::InvalidArguments {
            argument: Some(argument.into()),
            message: message.into(),
        }
    }

    /// A [`Failed`](ToolError::Failed) error with no output.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed {
            message: message.into(),
            output: String::new(),
        }
    }

    /// An [`Io`](ToolError::Io) error: `action` could not be done to `path`.
    #[must_use]
    pub fn io(path: &str, action: &'static str, source: io::Error) -> Self {
        ToolError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    }

    /// This error as an `apply_patch` failure that wrote nothing.
    pub(crate) fn nothing_written(self) -> Self {
        ToolError::Patch {
            source: Box::new(self),
            partly_applied: false,
        }
    }

    /// This error as an `apply_patch` failure after some files were
    /// changed.
    pub(crate) fn partly_applied(self) -> Self {
        ToolError::Patch {
            source: Box::new(self),
            partly_applied: true,
        }
    }

    /// The output kept with the error (empty for most errors).
    #[must_use]
    pub fn output(&self) -> &str {
        match self {
            ToolError::TimedOut { output, .. }
            | ToolError::CommandFailed { output, .. }
            | ToolError::Failed { output, .. } => output,
            ToolError::Patch { source, .. } => source.output(),
            _ => "",
        }
    }
}

/// A path the workspace refuses, or one that names nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The empty path.
    #[error("path is empty: give a path relative to the workspace root")]
    Empty,
    /// A path with a NUL byte, which no file name has.
    #[error("path contains a NUL byte: {path:?}")]
    ContainsNul {
        /// The path as given.
        path: String,
    },
    /// A path of a form the platform does not allow here (a Windows drive
    /// prefix after the root was dropped, say).
    #[error("invalid path: {path}")]
    Invalid {
        /// The path as given.
        path: String,
    },
    /// A path that leads out of the workspace: by `..`, an absolute path
    /// outside it, or a symlink pointing out (or any absolute symlink).
    #[error("path escapes the workspace: {path} (use a path inside {})", root.display())]
    Escapes {
        /// The path as given.
        path: String,
        /// The workspace root, to say where paths should lead.
        root: PathBuf,
    },
    /// Nothing is there.
    #[error("no such file or directory: {path} (paths are relative to the workspace root)")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A symlink loop, or more symlinks in a row than are followed.
    #[error("too many levels of symbolic links: {path}")]
    SymlinkLoop {
        /// The path as given.
        path: String,
    },
    /// A directory where a file was to be read or edited.
    #[error("{path} is a directory, not a file")]
    Directory {
        /// The path as given.
        path: String,
    },
    /// A directory where a file was to be written.
    #[error("{path} is a directory; give a file path to write to")]
    DirectoryNotWritable {
        /// The path as given.
        path: String,
    },
    /// A FIFO, socket or device: never read or written, so never waited
    /// on.
    #[error("{path} is not a regular file; only regular files can be read or written")]
    NotRegular {
        /// The path as given.
        path: String,
    },
    /// A file with other names, which may be outside the workspace: never
    /// written.
    #[error(
        "{path} has {links} hard links; refusing to write through a hard link (replace it with a copy of its own first)"
    )]
    HardLinks {
        /// The path as given.
        path: String,
        /// How many names the file has.
        links: u64,
    },
    /// A parent directory to create exists as something else.
    #[error("a parent of {path} is not a directory")]
    ParentNotDirectory {
        /// The path as given.
        path: String,
    },
}

impl From<Result<String, ToolError>> for ToolResult {
    /// The result the transcript records: the text on success; on failure
    /// the error's line, with the output the error kept.
    fn from(outcome: Result<String, ToolError>) -> Self {
        match outcome {
            Ok(text) => ToolResult::ok(text),
            Err(error) => ToolResult::failed(error.to_string(), error.output()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_output_beside_the_error_line() {
        let result = ToolResult::from(Err(ToolError::CommandFailed {
            status: "exit status 3".to_owned(),
            output: "out\n".to_owned(),
        }));
        assert_eq!(result.error.as_deref(), Some("exit status 3"));
        assert_eq!(result.output, "out\n");
        assert_eq!(result.transcript_text(), "exit status 3\nout\n");
        assert_eq!(
            ToolResult::from(Ok("fine".to_owned())),
            ToolResult::ok("fine")
        );
    }

    #[test]
    fn a_patch_failure_says_whether_anything_was_written() {
        let escape = PathError::Escapes {
            path: "../x".to_owned(),
            root: PathBuf::from("/ws"),
        };
        let error = ToolError::from(escape.clone()).nothing_written();
        assert_eq!(
            error.to_string(),
            "path escapes the workspace: ../x (use a path inside /ws); nothing was written"
        );
        let partly = ToolError::io("f", "write", io::Error::other("disk full")).partly_applied();
        assert_eq!(
            partly.to_string(),
            "cannot write f: disk full; the patch was only partly applied"
        );
        assert!(std::error::Error::source(&partly).is_some());
    }
}
