//! The seven ordered chains, one per seam. The seams are listed once, in
//! [`seams!`]; every per-seam item below is generated from that list.

use super::interceptor::{ContentRole, Interceptor, PackMode};
use super::seams::{
    ContextSeam, ModelResponseSeam, OutputSeam, ProviderRequestSeam, SeamSpec, StreamChunkSeam,
    ToolCallSeam, ToolResultSeam,
};
use std::fmt;

/// An interceptor on `context`.
pub type ContextInterceptor = Interceptor<ContextSeam>;
/// An interceptor on `provider_request`.
pub type ProviderRequestInterceptor = Interceptor<ProviderRequestSeam>;
/// An interceptor on `tool_call`.
pub type ToolCallInterceptor = Interceptor<ToolCallSeam>;
/// An interceptor on `tool_result`.
pub type ToolResultInterceptor = Interceptor<ToolResultSeam>;
/// An interceptor on `model_response`.
pub type ModelResponseInterceptor = Interceptor<ModelResponseSeam>;
/// An interceptor on `output`.
pub type OutputInterceptor = Interceptor<OutputSeam>;
/// An interceptor on `stream_chunk`.
pub type StreamChunkInterceptor = Interceptor<StreamChunkSeam>;

/// Generates the bundle, the seam names and the any-seam handle from one
/// list: `Variant field Marker "name" — doc`, in bundle order.
macro_rules! seams {
    ($($variant:ident $field:ident $marker:ty, $name:literal, $doc:literal;)*) => {
        /// The seam names, in bundle order: the closed set every string seam
        /// name is validated against.
        pub const SEAM_NAMES: [&str; 7] = [$($name),*];

        /// A bundle: one ordered chain per seam. Within a chain, list order
        /// is execution order.
        #[derive(Clone, Default, Debug)]
        pub struct Interceptors {
            $(
                #[doc = $doc]
                pub $field: Vec<Interceptor<$marker>>,
            )*
        }

        impl Interceptors {
            /// True when every chain is empty.
            #[must_use]
            pub fn is_empty(&self) -> bool {
                true $(&& self.$field.is_empty())*
            }

            /// Appends `interceptor` to the chain of its seam.
            pub fn push(&mut self, interceptor: AnyInterceptor) {
                match interceptor {
                    $(AnyInterceptor::$variant(i) => self.$field.push(i),)*
                }
            }

            /// Appends every chain of `other` after this bundle's.
            pub fn extend(&mut self, other: &Interceptors) {
                $(self.$field.extend(other.$field.iter().cloned());)*
            }

            /// The chain of one seam, as seam-agnostic handles.
            pub fn chain(&self, seam: SeamName) -> Vec<AnyInterceptor> {
                match seam {
                    $(SeamName::$variant => wrap(&self.$field, AnyInterceptor::$variant),)*
                }
            }

            /// Removes the first interceptor equal to `interceptor`; true if found.
            pub(crate) fn remove(&mut self, interceptor: &AnyInterceptor) -> bool {
                match interceptor {
                    $(AnyInterceptor::$variant(i) => remove_from(&mut self.$field, i),)*
                }
            }

            /// Puts every interceptor of the bundle in `mode`.
            pub fn set_mode(&mut self, mode: PackMode) {
                $(for i in &mut self.$field {
                    i.mode = mode;
                })*
            }

            /// Number of interceptors over all seams.
            #[must_use]
            pub fn len(&self) -> usize {
                0 $(+ self.$field.len())*
            }
        }

        /// A seam, validated. Parse strings with [`SeamName::parse`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum SeamName {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl SeamName {
            /// Every seam, in bundle order.
            pub const ALL: [SeamName; 7] = [$(SeamName::$variant),*];

            /// The canonical name.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $(SeamName::$variant => $name,)*
                }
            }
        }

        /// An interceptor on any seam.
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum AnyInterceptor {
            $(
                #[doc = concat!("On `", $name, "`.")]
                $variant(Interceptor<$marker>),
            )*
        }

        impl AnyInterceptor {
            /// The seam this interceptor runs on.
            #[must_use]
            pub fn seam(&self) -> SeamName {
                match self {
                    $(AnyInterceptor::$variant(_) => SeamName::$variant,)*
                }
            }

            /// The display name.
            #[must_use]
            pub fn name(&self) -> &str {
                match self {
                    $(AnyInterceptor::$variant(i) => i.name(),)*
                }
            }

            /// True when this interceptor comes from a pack.
            #[must_use]
            pub fn is_pack(&self) -> bool {
                match self {
                    $(AnyInterceptor::$variant(i) => i.is_pack(),)*
                }
            }

            /// What it does to content, as its pack declared it.
            #[must_use]
            pub fn role(&self) -> ContentRole {
                match self {
                    $(AnyInterceptor::$variant(i) => i.role(),)*
                }
            }

            /// Whether its decisions are enacted or only recorded.
            #[must_use]
            pub fn mode(&self) -> PackMode {
                match self {
                    $(AnyInterceptor::$variant(i) => i.mode(),)*
                }
            }

            /// Declares its role; only before the interceptor is shared.
            pub(crate) fn set_role(&mut self, role: ContentRole) {
                match self {
                    $(AnyInterceptor::$variant(i) => i.set_role(role),)*
                }
            }

            /// Declares its stream window (`stream_chunk`); only before the
            /// interceptor is shared.
            pub(crate) fn set_stream_window(&mut self, bytes: usize) {
                match self {
                    $(AnyInterceptor::$variant(i) => i.set_stream_window(bytes),)*
                }
            }

            /// Interceptor `index` of isolated pack `pack` on `seam`, named
            /// `name`; `fail_closed` when it declared so.
            pub(crate) fn from_isolated(
                seam: SeamName,
                name: String,
                pack: std::sync::Arc<dyn super::interceptor::RemotePack>,
                index: u32,
                fail_closed: bool,
            ) -> AnyInterceptor {
                match seam {
                    $(SeamName::$variant => AnyInterceptor::$variant(
                        Interceptor::isolated(name, pack, index, fail_closed),
                    ),)*
                }
            }

            /// A pack's interceptor `interceptor` on `seam`, named `name`,
            /// counting towards `health`; `fail_closed` when it declared so.
            pub(crate) fn from_pack(
                seam: SeamName,
                name: String,
                interceptor: chimera_plugin_api::abi::InterceptorBox,
                health: Option<std::sync::Arc<super::PackHealth>>,
                fail_closed: bool,
            ) -> AnyInterceptor {
                match seam {
                    $(SeamName::$variant => AnyInterceptor::$variant(if fail_closed {
                        Interceptor::pack_failing_closed(name, interceptor, health)
                    } else {
                        Interceptor::from_pack_watched(name, interceptor, health)
                    }),)*
                }
            }
        }

        $(
            impl From<Interceptor<$marker>> for AnyInterceptor {
                fn from(i: Interceptor<$marker>) -> Self {
                    AnyInterceptor::$variant(i)
                }
            }
        )*
    };
}

seams! {
    ProviderRequest provider_request ProviderRequestSeam, "provider_request",
        "Runs on the request envelope, after `context`.";
    ToolCall tool_call ToolCallSeam, "tool_call",
        "Runs on each proposed tool call.";
    ToolResult tool_result ToolResultSeam, "tool_result",
        "Runs on each executed tool's result.";
    Context context ContextSeam, "context",
        "Runs on the outgoing message list.";
    ModelResponse model_response ModelResponseSeam, "model_response",
        "Runs on each model reply before it enters the conversation.";
    Output output OutputSeam, "output",
        "Runs on the final answer before the user sees it.";
    StreamChunk stream_chunk StreamChunkSeam, "stream_chunk",
        "Runs on each streamed text delta before it is released.";
}

impl Interceptors {
    /// An empty bundle.
    #[must_use]
    pub fn new() -> Self {
        Interceptors::default()
    }
}

fn wrap<S: SeamSpec>(
    chain: &[Interceptor<S>],
    f: fn(Interceptor<S>) -> AnyInterceptor,
) -> Vec<AnyInterceptor> {
    chain.iter().cloned().map(f).collect()
}

fn remove_from<S: SeamSpec>(chain: &mut Vec<Interceptor<S>>, i: &Interceptor<S>) -> bool {
    match chain.iter().position(|x| x == i) {
        Some(at) => {
            chain.remove(at);
            true
        }
        None => false,
    }
}

/// A seam name outside the closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown interceptor seam '{0}'; expected one of ({list})", list = quoted_names())]
pub struct UnknownSeam(pub String);

fn quoted_names() -> String {
    let names: Vec<String> = SEAM_NAMES.iter().map(|n| format!("'{n}'")).collect();
    names.join(", ")
}

impl SeamName {
    /// Parses a seam name; anything outside the closed set is an error.
    ///
    /// # Errors
    ///
    /// [`UnknownSeam`] when `name` is none of the seam names.
    pub fn parse(name: &str) -> Result<SeamName, UnknownSeam> {
        SeamName::ALL
            .into_iter()
            .find(|seam| seam.as_str() == name)
            .ok_or_else(|| UnknownSeam(name.to_owned()))
    }
}

impl fmt::Display for SeamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Interceptors {
    /// One line per seam where an interceptor declared to judge content
    /// (a ban check) runs before one declared to redact it: the check sees
    /// what the redactor would have removed, so a banned word inside a
    /// redacted address still blocks. `--pack` order is the order: load
    /// the redacting pack first. Monitored interceptors are left out: they
    /// neither redact nor block.
    #[must_use]
    pub fn order_warnings(&self) -> Vec<String> {
        SeamName::ALL
            .into_iter()
            .filter_map(|seam| {
                let mut chain = self.chain(seam);
                chain.retain(|i| i.mode() == PackMode::Enforce);
                let judge = chain
                    .iter()
                    .position(|i| i.role() == ContentRole::Judges)?;
                let redactor = chain[judge + 1..]
                    .iter()
                    .find(|i| i.role() == ContentRole::Redacts)?;
                Some(format!(
                    "on {}, {} judges content before {} redacts it: the check sees what the redactor would remove; load the redacting pack first (--pack order is the order)",
                    seam.as_str(),
                    chain[judge].name(),
                    redactor.name()
                ))
            })
            .collect()
    }
}
