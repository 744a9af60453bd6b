//! The four ordered chains.

use super::interceptor::Interceptor;
use super::seams::{ContextSeam, ProviderRequestSeam, SeamSpec, ToolCallSeam, ToolResultSeam};
use std::fmt;

/// An interceptor on `context`.
pub type ContextInterceptor = Interceptor<ContextSeam>;
/// An interceptor on `provider_request`.
pub type ProviderRequestInterceptor = Interceptor<ProviderRequestSeam>;
/// An interceptor on `tool_call`.
pub type ToolCallInterceptor = Interceptor<ToolCallSeam>;
/// An interceptor on `tool_result`.
pub type ToolResultInterceptor = Interceptor<ToolResultSeam>;

/// The seam names, in bundle order: the closed set every string seam name is
/// validated against.
pub const SEAM_NAMES: [&str; 4] = ["provider_request", "tool_call", "tool_result", "context"];

/// A bundle: four ordered chains, one per seam. Within a chain, list order is
/// execution order.
#[derive(Clone, Default, Debug)]
pub struct Interceptors {
    /// Runs on the request envelope, after `context`.
    pub provider_request: Vec<ProviderRequestInterceptor>,
    /// Runs on each proposed tool call.
    pub tool_call: Vec<ToolCallInterceptor>,
    /// Runs on each executed tool's result.
    pub tool_result: Vec<ToolResultInterceptor>,
    /// Runs on the outgoing message list.
    pub context: Vec<ContextInterceptor>,
}

impl Interceptors {
    /// An empty bundle.
    #[must_use]
    pub fn new() -> Self {
        Interceptors::default()
    }

    /// True when every chain is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.provider_request.is_empty()
            && self.tool_call.is_empty()
            && self.tool_result.is_empty()
            && self.context.is_empty()
    }

    /// Appends `interceptor` to the chain of its seam.
    pub fn push(&mut self, interceptor: AnyInterceptor) {
        match interceptor {
            AnyInterceptor::ProviderRequest(i) => self.provider_request.push(i),
            AnyInterceptor::ToolCall(i) => self.tool_call.push(i),
            AnyInterceptor::ToolResult(i) => self.tool_result.push(i),
            AnyInterceptor::Context(i) => self.context.push(i),
        }
    }

    /// Appends every chain of `other` after this bundle's.
    pub fn extend(&mut self, other: &Interceptors) {
        self.provider_request
            .extend(other.provider_request.iter().cloned());
        self.tool_call.extend(other.tool_call.iter().cloned());
        self.tool_result.extend(other.tool_result.iter().cloned());
        self.context.extend(other.context.iter().cloned());
    }

    /// The chain of one seam, as seam-agnostic handles.
    pub fn chain(&self, seam: SeamName) -> Vec<AnyInterceptor> {
        match seam {
            SeamName::ProviderRequest => {
                wrap(&self.provider_request, AnyInterceptor::ProviderRequest)
            }
            SeamName::ToolCall => wrap(&self.tool_call, AnyInterceptor::ToolCall),
            SeamName::ToolResult => wrap(&self.tool_result, AnyInterceptor::ToolResult),
            SeamName::Context => wrap(&self.context, AnyInterceptor::Context),
        }
    }

    /// Removes the first interceptor equal to `interceptor`; true if found.
    pub(crate) fn remove(&mut self, interceptor: &AnyInterceptor) -> bool {
        fn remove_from<S: SeamSpec>(chain: &mut Vec<Interceptor<S>>, i: &Interceptor<S>) -> bool {
            match chain.iter().position(|x| x == i) {
                Some(at) => {
                    chain.remove(at);
                    true
                }
                None => false,
            }
        }
        match interceptor {
            AnyInterceptor::ProviderRequest(i) => remove_from(&mut self.provider_request, i),
            AnyInterceptor::ToolCall(i) => remove_from(&mut self.tool_call, i),
            AnyInterceptor::ToolResult(i) => remove_from(&mut self.tool_result, i),
            AnyInterceptor::Context(i) => remove_from(&mut self.context, i),
        }
    }

    /// Number of interceptors over all seams.
    #[must_use]
    pub fn len(&self) -> usize {
        self.provider_request.len()
            + self.tool_call.len()
            + self.tool_result.len()
            + self.context.len()
    }
}

fn wrap<S: SeamSpec>(
    chain: &[Interceptor<S>],
    f: fn(Interceptor<S>) -> AnyInterceptor,
) -> Vec<AnyInterceptor> {
    chain.iter().cloned().map(f).collect()
}

/// A seam, validated. Parse strings with [`SeamName::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeamName {
    /// `provider_request`
    ProviderRequest,
    /// `tool_call`
    ToolCall,
    /// `tool_result`
    ToolResult,
    /// `context`
    Context,
}

/// A seam name outside the closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown interceptor seam '{0}'; expected one of ('provider_request', 'tool_call', 'tool_result', 'context')")]
pub struct UnknownSeam(pub String);

impl SeamName {
    /// Every seam, in bundle order.
    pub const ALL: [SeamName; 4] = [
        SeamName::ProviderRequest,
        SeamName::ToolCall,
        SeamName::ToolResult,
        SeamName::Context,
    ];

    /// Parses a seam name; anything outside the closed set is an error.
    pub fn parse(name: &str) -> Result<SeamName, UnknownSeam> {
        SeamName::ALL
            .into_iter()
            .find(|seam| seam.as_str() == name)
            .ok_or_else(|| UnknownSeam(name.to_owned()))
    }

    /// The canonical name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SeamName::ProviderRequest => "provider_request",
            SeamName::ToolCall => "tool_call",
            SeamName::ToolResult => "tool_result",
            SeamName::Context => "context",
        }
    }
}

impl fmt::Display for SeamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An interceptor on any seam.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyInterceptor {
    /// On `provider_request`.
    ProviderRequest(ProviderRequestInterceptor),
    /// On `tool_call`.
    ToolCall(ToolCallInterceptor),
    /// On `tool_result`.
    ToolResult(ToolResultInterceptor),
    /// On `context`.
    Context(ContextInterceptor),
}

impl AnyInterceptor {
    /// The seam this interceptor runs on.
    #[must_use]
    pub fn seam(&self) -> SeamName {
        match self {
            AnyInterceptor::ProviderRequest(_) => SeamName::ProviderRequest,
            AnyInterceptor::ToolCall(_) => SeamName::ToolCall,
            AnyInterceptor::ToolResult(_) => SeamName::ToolResult,
            AnyInterceptor::Context(_) => SeamName::Context,
        }
    }

    /// The display name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            AnyInterceptor::ProviderRequest(i) => i.name(),
            AnyInterceptor::ToolCall(i) => i.name(),
            AnyInterceptor::ToolResult(i) => i.name(),
            AnyInterceptor::Context(i) => i.name(),
        }
    }
}

impl From<ProviderRequestInterceptor> for AnyInterceptor {
    fn from(i: ProviderRequestInterceptor) -> Self {
        AnyInterceptor::ProviderRequest(i)
    }
}
impl From<ToolCallInterceptor> for AnyInterceptor {
    fn from(i: ToolCallInterceptor) -> Self {
        AnyInterceptor::ToolCall(i)
    }
}
impl From<ToolResultInterceptor> for AnyInterceptor {
    fn from(i: ToolResultInterceptor) -> Self {
        AnyInterceptor::ToolResult(i)
    }
}
impl From<ContextInterceptor> for AnyInterceptor {
    fn from(i: ContextInterceptor) -> Self {
        AnyInterceptor::Context(i)
    }
}
