//! One entry of a chain: a host closure, or an interceptor from a pack.

use super::health::PackHealth;
use super::seams::SeamSpec;
use chimera_plugin_api::abi::{Decision, InterceptorBox, SeamInput};
use std::fmt;
use std::sync::Arc;

/// One interceptor on seam `S`: a host closure or a pack's interceptor.
///
/// Cheap to clone (shared). Two handles are *equal* when they are clones of
/// the same interceptor, which is what `Registry::unregister` matches on
/// (whatever [`PackMode`] each handle carries).
pub struct Interceptor<S: SeamSpec> {
    pub(crate) inner: Arc<Entry<S>>,
    /// Whether the chain enacts its decisions or only records them. Kept
    /// on the handle, not in the shared entry, so a loaded pack's
    /// interceptors are put in monitor mode whoever else holds them.
    pub(crate) mode: PackMode,
}

/// How a pack's decisions take effect (`mode` on a `[[packs]]` entry of
/// `chimera.toml`, `--monitor NAME` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PackMode {
    /// Its decisions are enacted: a block blocks, a replacement replaces.
    #[default]
    Enforce,
    /// Its decisions are recorded (events marked `monitor`, audit lines,
    /// metrics) but never enacted: the chain goes on as if it allowed,
    /// and its failures never block. For rolling a policy out on live
    /// traffic.
    Monitor,
}

impl PackMode {
    /// `enforce` or `monitor`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            PackMode::Enforce => "enforce",
            PackMode::Monitor => "monitor",
        }
    }
}

impl fmt::Display for PackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) struct Entry<S: SeamSpec> {
    pub(crate) name: String,
    pub(crate) kind: Kind<S>,
    /// The interceptor's own failure policy, when it declared one (a pack's
    /// `Registrar::fail_closed`); `None` follows the seam's default.
    pub(crate) fail_closed: Option<bool>,
    /// What the interceptor does to content, when its pack declared it.
    pub(crate) role: ContentRole,
    /// `stream_chunk` only: the bytes it takes unjudged before it is
    /// offered the stream again (its pack's `Registrar::stream_window`,
    /// capped by the host); 0 is every delta.
    pub(crate) stream_window: usize,
}

/// What an interceptor does to the content on its seam, as its pack
/// declared it (`Registrar::redacts`, `Registrar::judges`). The host uses
/// it to warn about an order that defeats a policy: a ban check that runs
/// before the redactor sees text the redactor would have removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentRole {
    /// Nothing declared.
    #[default]
    Unstated,
    /// Rewrites content to remove what must not pass (a redactor).
    Redacts,
    /// Blocks on what the content contains (a ban check).
    Judges,
    /// Only reads (counts what a reply cost): never blocks nor replaces,
    /// so streaming stays on for it.
    Observes,
}

pub(crate) enum Kind<S: SeamSpec> {
    Host(Box<S::HostFn>),
    Pack(InterceptorBox, Option<Arc<PackHealth>>),
    /// Interceptor `index` of a pack running in a child process.
    Isolated(Arc<dyn RemotePack>, u32, Option<Arc<PackHealth>>),
}

impl<S: SeamSpec> Interceptor<S> {
    pub(crate) fn host(name: impl Into<String>, f: Box<S::HostFn>) -> Self {
        Interceptor {
            inner: Arc::new(Entry {
                name: name.into(),
                kind: Kind::Host(f),
                fail_closed: None,
                role: ContentRole::Unstated,
                stream_window: 0,
            }),
            mode: PackMode::Enforce,
        }
    }

    /// Wraps a pack's interceptor. `name` is its display name (`<pack>/<name>`).
    pub fn from_pack(name: impl Into<String>, interceptor: InterceptorBox) -> Self {
        Interceptor::from_pack_watched(name, interceptor, None)
    }

    /// Wraps a pack's interceptor whose failures and call times count
    /// towards the pack's shared health record (quarantine, budget).
    pub fn from_pack_watched(
        name: impl Into<String>,
        interceptor: InterceptorBox,
        health: Option<Arc<PackHealth>>,
    ) -> Self {
        Interceptor::pack(name.into(), interceptor, health, None)
    }

    /// The same pack interceptor, failing closed on its seam: an error or a
    /// panic blocks instead of being skipped.
    pub(crate) fn pack_failing_closed(
        name: impl Into<String>,
        interceptor: InterceptorBox,
        health: Option<Arc<PackHealth>>,
    ) -> Self {
        Interceptor::pack(name.into(), interceptor, health, Some(true))
    }

    fn pack(
        name: String,
        interceptor: InterceptorBox,
        health: Option<Arc<PackHealth>>,
        fail_closed: Option<bool>,
    ) -> Self {
        Interceptor {
            inner: Arc::new(Entry {
                name,
                kind: Kind::Pack(interceptor, health),
                fail_closed,
                role: ContentRole::Unstated,
                stream_window: 0,
            }),
            mode: PackMode::Enforce,
        }
    }

    /// Interceptor `index` of isolated pack `pack`, named `name`.
    pub(crate) fn isolated(
        name: String,
        pack: Arc<dyn RemotePack>,
        index: u32,
        fail_closed: bool,
    ) -> Self {
        let health = Some(Arc::clone(pack.health()));
        Interceptor {
            inner: Arc::new(Entry {
                name,
                kind: Kind::Isolated(pack, index, health),
                fail_closed: fail_closed.then_some(true),
                role: ContentRole::Unstated,
                stream_window: 0,
            }),
            mode: PackMode::Enforce,
        }
    }

    /// True when a failure of this interceptor blocks: its own declared
    /// policy, else the seam's default; always when its pack judges for a
    /// server and was not set to fail open (see
    /// [`PackHealth::fails_closed`]).
    #[must_use]
    pub fn fails_closed(&self) -> bool {
        let serving = match &self.inner.kind {
            Kind::Pack(_, Some(health)) | Kind::Isolated(_, _, Some(health)) => {
                health.fails_closed()
            }
            _ => false,
        };
        serving || self.inner.fail_closed.unwrap_or(S::FAIL_CLOSED)
    }

    /// What it does to content, as its pack declared it.
    #[must_use]
    pub fn role(&self) -> ContentRole {
        self.inner.role
    }

    /// Declares its role; only before the interceptor is shared.
    pub(crate) fn set_role(&mut self, role: ContentRole) {
        if let Some(entry) = Arc::get_mut(&mut self.inner) {
            entry.role = role;
        }
    }

    /// `stream_chunk` only: how many bytes may gather unjudged before the
    /// stream is offered to it again (0: every delta).
    #[must_use]
    pub fn stream_window(&self) -> usize {
        self.inner.stream_window
    }

    /// Declares its stream window; only before the interceptor is shared.
    pub(crate) fn set_stream_window(&mut self, bytes: usize) {
        if let Some(entry) = Arc::get_mut(&mut self.inner) {
            entry.stream_window = bytes;
        }
    }

    /// The display name used in events.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// True when this interceptor comes from a pack.
    #[must_use]
    pub fn is_pack(&self) -> bool {
        matches!(self.inner.kind, Kind::Pack(..) | Kind::Isolated(..))
    }

    /// Whether its decisions are enacted or only recorded.
    #[must_use]
    pub fn mode(&self) -> PackMode {
        self.mode
    }

    /// True in monitor mode: its decisions are recorded, never enacted.
    #[must_use]
    pub fn is_monitored(&self) -> bool {
        self.mode == PackMode::Monitor
    }

    /// The same interceptor in `mode`.
    #[must_use]
    pub fn with_mode(mut self, mode: PackMode) -> Self {
        self.mode = mode;
        self
    }
}

impl<S: SeamSpec> Clone for Interceptor<S> {
    fn clone(&self) -> Self {
        Interceptor {
            inner: Arc::clone(&self.inner),
            mode: self.mode,
        }
    }
}

impl<S: SeamSpec> PartialEq for Interceptor<S> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl<S: SeamSpec> fmt::Debug for Interceptor<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interceptor")
            .field("seam", &S::SEAM)
            .field("name", &self.inner.name)
            .field("pack", &self.is_pack())
            .field("mode", &self.mode)
            .finish()
    }
}

/// A pack whose interceptors run in another process (`--isolate`): the
/// chain hands a run of its consecutive interceptors over in one round
/// trip. The process side lives a floor up (the `isolate` module); this
/// is all the chain needs of it.
pub(crate) trait RemotePack: Send + Sync {
    /// The pack's health, shared by all its interceptors.
    fn health(&self) -> &Arc<PackHealth>;

    /// Runs the pack's interceptors `indices`, in order, on `input`: how
    /// many allowed, and the first decision that was not a bare allow.
    ///
    /// # Errors
    ///
    /// The line saying why nothing was called, when the pack's process
    /// is unavailable (restarting past its budget, or quarantined).
    fn call(
        &self,
        indices: &[u32],
        input: &SeamInput<'_>,
    ) -> Result<(usize, Option<Decision>), String>;
}
