//! What a host interceptor returns.

use std::fmt;

/// An interceptor's decision about one value of type `T`.
///
/// | variant | the value | later interceptors | event |
/// |---|---|---|---|
/// | `Allow` | unchanged (the very same value) | run | none |
/// | `Replace(v)` | becomes `v` | run, and see `v` | `replaced` |
/// | `Block(reason)` | — | never run | `blocked` |
///
/// What a block *means* is the seam's: a denied tool call, a withheld tool
/// result, or a run that ends before the provider is called.
#[derive(Debug, Clone, PartialEq)]
pub enum InterceptDecision<T> {
    /// Pass through unchanged.
    Allow,
    /// Substitute the value.
    Replace(T),
    /// Stop the chain with a human-readable reason (empty means
    /// `blocked by interceptor`).
    Block(String),
}

impl<T> InterceptDecision<T> {
    /// A block with `reason`.
    pub fn block(reason: impl Into<String>) -> Self {
        InterceptDecision::Block(reason.into())
    }
}

/// An interceptor failure: handled by the seam's failure policy
/// (`tool_call` blocks the call; the other seams skip the interceptor and go
/// on with the last good value). Reported as an `error` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterceptError(String);

impl InterceptError {
    /// An error with this text.
    pub fn msg(text: impl Into<String>) -> Self {
        InterceptError(text.into())
    }

    /// The error text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InterceptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for InterceptError {
    fn from(error: E) -> Self {
        InterceptError(error.to_string())
    }
}

/// What an interceptor closure returns.
pub type InterceptResult<T> = Result<InterceptDecision<T>, InterceptError>;
