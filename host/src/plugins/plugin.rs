//! In-process plugins and the staging registrar they activate into.

use super::errors::{PluginError, RegistryError};
use super::registry::Registry;
use crate::interception::{AnyInterceptor, Interceptors};

/// A plugin: something that contributes interceptor chains.
///
/// Compiled packs become plugins when loaded; host code can implement this
/// trait directly for in-process policies.
pub trait Plugin: Send + Sync {
    /// The name it is loaded, listed and unloaded under.
    fn name(&self) -> &str;

    /// The version listed for it (`0.0.0` unless the plugin says otherwise).
    fn version(&self) -> &str {
        "0.0.0"
    }

    /// One line for listings.
    fn description(&self) -> &str {
        ""
    }

    /// Registers the plugin's interceptors. Registration is staged: if this
    /// returns an error (or panics), nothing it registered ever reaches the
    /// registry.
    ///
    /// # Errors
    ///
    /// The plugin's own [`PluginError`] when it refuses to activate, or a
    /// registration it passes on refused (`PluginError::Registry`); the load
    /// then fails with `LoadError::Activation`.
    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError>;

    /// Called on unload, before the manager withdraws every chain the plugin
    /// still owns (whatever this does or returns).
    ///
    /// # Errors
    ///
    /// The plugin's own [`PluginError`] when it cannot wind down; the unload
    /// goes on, and reports it as `LoadError::Deactivation`.
    fn deactivate(&self) -> Result<(), PluginError> {
        Ok(())
    }

    /// State to hand to the plugin's next version on hot swap (JSON), if any.
    fn export_state(&self) -> Option<String> {
        None
    }

    /// Adopts state exported by the previous version.
    ///
    /// # Errors
    ///
    /// The plugin's own [`PluginError`] when it cannot adopt `state`; the
    /// reload goes on, and the new version starts fresh.
    fn import_state(&self, state: &str) -> Result<(), PluginError> {
        let _ = state;
        Ok(())
    }
}

/// Collects a plugin's registrations during activation.
#[derive(Default)]
pub struct PluginRegistrar {
    staged: Interceptors,
}

impl PluginRegistrar {
    pub(crate) fn new() -> Self {
        PluginRegistrar::default()
    }

    /// Registers `interceptor` on `seam`; the seam name is validated.
    ///
    /// # Errors
    ///
    /// `RegistryError::UnknownSeam` when `seam` is not a seam name;
    /// `RegistryError::SeamMismatch` when `interceptor` was built for another
    /// seam.
    pub fn register(
        &mut self,
        seam: &str,
        interceptor: impl Into<AnyInterceptor>,
    ) -> Result<(), RegistryError> {
        let interceptor = interceptor.into();
        Registry::validate(seam, &interceptor)?;
        self.staged.push(interceptor);
        Ok(())
    }

    pub(crate) fn into_chains(self) -> Interceptors {
        self.staged
    }
}
