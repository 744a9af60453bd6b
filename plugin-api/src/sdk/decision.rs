//! The typed decision an SDK interceptor returns.

use std::fmt;

/// What an interceptor decides about one value of type `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<T> {
    /// Pass the value through unchanged; later interceptors still run. No event.
    Allow,
    /// Substitute the value; later interceptors see the substitute. Emits a
    /// `replaced` event.
    Replace(T),
    /// Stop the chain. What a block means is the seam's (a denied tool call, a
    /// withheld result, a run that ends before the provider call). Emits a
    /// `blocked` event.
    Block(String),
}

impl<T> Decision<T> {
    /// A block with `reason`.
    pub fn block(reason: impl Into<String>) -> Self {
        Decision::Block(reason.into())
    }
}

/// An interceptor failure. The seam's failure policy decides what follows:
/// `tool_call` blocks the call, the other seams skip the interceptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterceptError(String);

impl InterceptError {
    /// An error with this text.
    pub fn msg(text: impl Into<String>) -> Self {
        InterceptError(text.into())
    }

    /// The error text.
    #[must_use]
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

/// What an interceptor closure returns: `?` works on any error type.
pub type InterceptResult<T> = Result<Decision<T>, InterceptError>;
