//! Exit statuses and the one-line errors that go with them.

use std::fmt;
use std::process::ExitCode;

/// A command's failure: an exit status and one line for stderr.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: u8,
    pub(crate) message: String,
}

impl Failure {
    /// Exit 1: the run ended unsuccessfully (the transcript says why).
    pub(crate) fn run_failed(message: impl Into<String>) -> Self {
        Failure {
            status: 1,
            message: message.into(),
        }
    }

    /// Exit 2: usage or configuration error.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            status: 2,
            message: message.into(),
        }
    }

    /// Exit 3: a pack could not be loaded.
    pub(crate) fn pack(message: impl Into<String>) -> Self {
        Failure {
            status: 3,
            message: message.into(),
        }
    }

    pub(crate) fn exit(self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("error: {}", chimera_host::types::one_line(&self.message));
        }
        ExitCode::from(self.status)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
