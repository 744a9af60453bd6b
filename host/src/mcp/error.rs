//! Why the guard stops, and how long a message may be.

/// The longest message relayed, in bytes.
pub const MAX_LINE: usize = 16 << 20;

/// Why the guard stopped before its server did.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The server could not be started.
    #[error("cannot start the MCP server {program}: {source}")]
    Start {
        /// The command.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A message longer than [`MAX_LINE`].
    #[error("a message from the {from} is longer than {MAX_LINE} bytes: the session ends")]
    TooLong {
        /// `client` or `server`.
        from: &'static str,
    },
    /// Reading or writing a stream failed.
    #[error("the {0} went away: {1}")]
    Io(&'static str, std::io::Error),
}
