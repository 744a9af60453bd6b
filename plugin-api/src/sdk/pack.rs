//! The trait a pack implements.

use super::registrar::Registrar;
use super::seam_kind::SeamKind;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::fmt;
use std::sync::Arc;

/// Why a pack could not be built (bad configuration, invalid pattern, ...).
/// Reported to the user as one line: `<pack>: <text>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackError(String);

impl PackError {
    /// An error with this text.
    pub fn msg(text: impl Into<String>) -> Self {
        PackError(text.into())
    }
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for PackError {
    fn from(error: E) -> Self {
        PackError(error.to_string())
    }
}

/// The configuration of a pack that takes none: accepts `{}` (or nothing)
/// and refuses any key.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// A policy pack.
///
/// The host builds one instance per load with [`Pack::new`] and collects its
/// interceptors once with [`Pack::register`]. The instance is shared by every
/// session of the process: keep per-conversation state keyed by
/// [`Session::id`](super::Session::id).
pub trait Pack: Sized + Send + Sync + 'static {
    /// The entry-point name the host loads it by (`plan-gate`).
    const NAME: &'static str;
    /// The pack's version.
    const VERSION: &'static str;
    /// One line for `chimera packs list`.
    const DESCRIPTION: &'static str;
    /// Every seam [`Pack::register`] may use. Registering on another seam is
    /// a load error, so the list the host shows is honest.
    const SEAMS: &'static [SeamKind];

    /// The configuration, parsed from the JSON the user gives (`{}` when none).
    type Config: DeserializeOwned;

    /// Builds the pack. An `Err` refuses the load with one line.
    ///
    /// # Errors
    ///
    /// The [`PackError`] the pack refuses its configuration with; the host
    /// refuses the load with that line, prefixed with the pack's name.
    fn new(config: Self::Config) -> Result<Self, PackError>;

    /// Registers the pack's interceptors, in the order they run within a seam.
    fn register(self: Arc<Self>, registrar: &mut Registrar);

    /// State to hand to the next build of this pack on hot swap (`None`: nothing).
    fn export_state(&self) -> Option<serde_json::Value> {
        None
    }

    /// Adopts state exported by an earlier build. The default ignores it.
    ///
    /// # Errors
    ///
    /// A [`PackError`] when the pack cannot adopt `state`; the host logs it,
    /// and the new build starts fresh.
    fn import_state(&self, state: serde_json::Value) -> Result<(), PackError> {
        let _ = state;
        Ok(())
    }
}
