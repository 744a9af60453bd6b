//! Reloading a pack from its file: a new build (in this process, or a new
//! pack host for an isolated pack) gets the old one's state and its chains
//! are swapped in at the same load-order position, in one step.

use super::load::{stage, PackInfo, PackSource, PluginManager};
use crate::plugins::errors::LoadError;
use crate::plugins::plugin::Plugin;
use crate::plugins::registry::OwnerId;
use std::path::PathBuf;
use std::sync::Arc;

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new build is active, at the old one's load-order position.
    Reloaded(PackInfo),
    /// The file's content is what is already loaded: nothing happened.
    Unchanged,
}

impl PluginManager {
    /// Reloads pack `name` from its file, keeping its configuration and its
    /// load-order position:
    ///
    /// copy → check → load → verify the entry point is still there →
    /// instantiate with the same config → hand over state → swap the chains
    /// in one step.
    ///
    /// Content identical to what is loaded is [`ReloadOutcome::Unchanged`].
    /// Any failure leaves the running version exactly as it was. A turn
    /// already in flight keeps the chains it started with (the old code
    /// stays mapped).
    ///
    /// # Errors
    ///
    /// `LoadError::NotLoaded` when no pack by that name is loaded;
    /// `LoadError::NotReloadable` when it was not loaded from a file (or runs
    /// isolated, and isolation is now off); else what loading the file again
    /// fails with (`LoadError::File`, `LoadError::Instantiate`,
    /// `LoadError::Activation`).
    pub fn reload(&self, name: &str) -> Result<ReloadOutcome, LoadError> {
        let running = self.running_from_file(name)?;
        if running.isolated {
            return self.reload_isolated(name, running);
        }
        let probed = [(name, running.config.as_str())];
        let library = self.open(
            &running.path,
            |trust| trust.probe_on_reload.as_ref(),
            &probed,
        )?;
        if library.info.sha256 == running.sha256 {
            return Ok(ReloadOutcome::Unchanged);
        }
        let plugin: Arc<dyn Plugin> = Arc::new(self.build(&library, name, &running.config)?);
        let sha256 = library.info.sha256.clone();
        self.swap_in(name, running, plugin, sha256)
    }

    /// The end of a reload: hands `running`'s state over to `plugin` (built
    /// from the file's new content, `sha256`) and swaps its chains in at
    /// the same position, in one step.
    fn swap_in(
        &self,
        name: &str,
        running: Running,
        plugin: Arc<dyn Plugin>,
        sha256: String,
    ) -> Result<ReloadOutcome, LoadError> {
        hand_over_state(name, running.plugin.as_ref(), plugin.as_ref());
        let mode = self.mode_of(name);
        let chains = stage(plugin.as_ref(), mode)?;
        let mut loaded = self.loaded();
        let entry = loaded
            .iter_mut()
            .find(|l| l.owner == running.owner)
            .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
        self.registry.replace_owner(running.owner, chains);
        plugin.version().clone_into(&mut entry.info.version);
        plugin.description().clone_into(&mut entry.info.description);
        entry.info.source = PackSource::File {
            path: running.path,
            sha256,
        };
        entry.info.mode = mode;
        entry.plugin = plugin;
        Ok(ReloadOutcome::Reloaded(entry.info.clone()))
    }

    /// [`PluginManager::reload`] of an isolated pack: a new pack host with
    /// the new build (same config, the old one's state), swapped in at the
    /// same position; the old one ends when no chain holds it any more.
    fn reload_isolated(&self, name: &str, running: Running) -> Result<ReloadOutcome, LoadError> {
        let isolation = self
            .isolation
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or_else(|| LoadError::NotReloadable(name.to_owned()))?;
        let sealed = self.loader.seal(&running.path, &self.trust())?;
        if sealed.sha256 == running.sha256 {
            return Ok(ReloadOutcome::Unchanged);
        }
        let (plugin, sha256) = self.start_isolated(
            &running.path,
            sealed,
            Some(name),
            &running.config,
            &isolation,
        )?;
        self.swap_in(name, running, Arc::new(plugin), sha256)
    }

    /// What [`PluginManager::reload`] replaces: loaded pack `name`, which
    /// must have come from a file.
    fn running_from_file(&self, name: &str) -> Result<Running, LoadError> {
        let loaded = self.loaded();
        let entry = loaded
            .iter()
            .find(|l| l.info.name == name)
            .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
        let PackSource::File { path, sha256 } = &entry.info.source else {
            return Err(LoadError::NotReloadable(name.to_owned()));
        };
        Ok(Running {
            path: path.clone(),
            sha256: sha256.clone(),
            config: entry.info.config.clone(),
            owner: entry.owner,
            plugin: Arc::clone(&entry.plugin),
            isolated: entry.isolated,
        })
    }
}

/// A loaded pack [`PluginManager::reload`] is replacing.
struct Running {
    path: PathBuf,
    sha256: String,
    config: String,
    owner: OwnerId,
    plugin: Arc<dyn Plugin>,
    isolated: bool,
}

/// Hands the old build's state to the new one; a new build that does not
/// take it starts fresh (and the reload goes on).
fn hand_over_state(name: &str, old: &dyn Plugin, new: &dyn Plugin) {
    if let Some(state) = old.export_state() {
        if let Err(error) = new.import_state(&state) {
            tracing::warn!(pack = name, %error, "the new build did not take the old state; it starts fresh");
        }
    }
}
