//! The plugin manager: load by name, by file or in-process; unload; list.

use super::discovery::{discover, Discovery, SearchDir};
use super::errors::{FileError, LoadError, PluginError};
use super::loader::{Checks, Library, Loader};
use super::plugin::{Plugin, PluginRegistrar};
use super::registry::{OwnerId, Registry};
use super::trust::TrustSettings;
use crate::interception::{AnyInterceptor, Interceptor, Interceptors, SeamName};
use crate::interception::{HealthPolicy, HealthSink, PackHealth};
use chimera_plugin_api::abi::{PackInstanceBox, Seam};
use chimera_plugin_api::sdk::{self, Pack};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Where a loaded pack came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackSource {
    /// Linked into the host (an SDK pack or a host plugin).
    InProcess,
    /// A pack library.
    File {
        /// The file it was loaded from.
        path: PathBuf,
        /// SHA-256 of the loaded bytes, hex.
        sha256: String,
    },
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new build is active, at the old one's load-order position.
    Reloaded(PackInfo),
    /// The file's content is what is already loaded: nothing happened.
    Unchanged,
}

/// A loaded pack, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// One line.
    pub description: String,
    /// Where it came from.
    pub source: PackSource,
    /// The JSON configuration it was built with (empty: defaults).
    pub config: String,
}

impl PackInfo {
    /// The pack file, when it came from one.
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            PackSource::File { path, .. } => Some(path),
            PackSource::InProcess => None,
        }
    }
}

struct Loaded {
    info: PackInfo,
    owner: OwnerId,
    plugin: Arc<dyn Plugin>,
}

/// Loads packs and plugins into a [`Registry`], and takes them out again.
pub struct PluginManager {
    registry: Arc<Registry>,
    search_path: Vec<SearchDir>,
    loader: Loader,
    loaded: Mutex<Vec<Loaded>>,
    trust: RwLock<TrustSettings>,
    health: RwLock<HealthSettings>,
}

/// How loaded packs' health is watched, and who hears about it.
#[derive(Clone, Default)]
struct HealthSettings {
    policy: HealthPolicy,
    sink: Option<HealthSink>,
}

impl PluginManager {
    /// A manager feeding `registry`, finding packs by name in every pack
    /// file of the directories of `search_path`. A name two files provide is
    /// refused.
    pub fn new(registry: Arc<Registry>, search_path: Vec<PathBuf>) -> Self {
        PluginManager::with_search_path(
            registry,
            search_path.into_iter().map(SearchDir::all).collect(),
        )
    }

    /// [`PluginManager::new`] with directories that may admit only some
    /// files (see [`SearchDir`]).
    pub fn with_search_path(registry: Arc<Registry>, search_path: Vec<SearchDir>) -> Self {
        PluginManager {
            registry,
            search_path,
            loader: Loader::new(),
            loaded: Mutex::new(Vec::new()),
            trust: RwLock::new(TrustSettings::default()),
            health: RwLock::new(HealthSettings::default()),
        }
    }

    /// Sets how pack files are trusted (lock file, directory policy, probe).
    pub fn set_trust(&self, trust: TrustSettings) {
        *self.trust.write().unwrap_or_else(|p| p.into_inner()) = trust;
    }

    fn trust(&self) -> TrustSettings {
        self.trust.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets the quarantine and time-budget policy for packs loaded from now
    /// on, and who is told when a pack is quarantined or a call runs over
    /// its budget.
    pub fn set_health(&self, policy: HealthPolicy, sink: Option<HealthSink>) {
        *self.health.write().unwrap_or_else(|p| p.into_inner()) = HealthSettings { policy, sink };
    }

    fn new_health(&self, pack: &str) -> Arc<PackHealth> {
        let settings = self
            .health
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Arc::new(PackHealth::new(pack, settings.policy, settings.sink))
    }

    /// The registry this manager feeds.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The directories searched by name.
    pub fn search_path(&self) -> &[SearchDir] {
        &self.search_path
    }

    fn loaded(&self) -> MutexGuard<'_, Vec<Loaded>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Indexes the search path (no pack code runs).
    pub fn discover(&self) -> Discovery {
        discover(&self.search_path)
    }

    /// Loads the pack whose entry-point name is `name` from the search path,
    /// configured by `config_json` (empty: defaults).
    pub fn load(&self, name: &str, config_json: &str) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(name)?;
        let discovery = self.discover();
        let Some(found) = discovery.find(name)? else {
            return Err(LoadError::UnknownName {
                name: name.to_owned(),
                searched: self
                    .search_path
                    .iter()
                    .map(|d| d.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":"),
            });
        };
        self.load_file(&found.path, Some(name), config_json)
    }

    /// Loads pack `name` (or the library's only pack, when `None`) from the
    /// file at `path`.
    pub fn load_file(
        &self,
        path: &Path,
        name: Option<&str>,
        config_json: &str,
    ) -> Result<PackInfo, LoadError> {
        let trust = self.trust();
        let probe_packs: Vec<(&str, &str)> =
            name.map(|n| vec![(n, config_json)]).unwrap_or_default();
        let checks = Checks {
            trust: &trust,
            probe: trust
                .probe_on_load
                .as_ref()
                .map(|p| (p, probe_packs.as_slice())),
        };
        let library = self.loader.open(path, &checks)?;
        let name = pick(&library, path, name)?;
        self.refuse_duplicate(&name)?;
        let instance = library
            .instantiate(&name, config_json)
            .map_err(LoadError::Instantiate)?;
        let description = library
            .info
            .packs
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| LoadError::file(path, FileError::ManifestMismatch(name.clone())))?;
        let plugin = PackPlugin {
            health: self.new_health(&description.name),
            name: description.name,
            version: description.version,
            description: description.description,
            instance,
        };
        let source = PackSource::File {
            path: path.to_owned(),
            sha256: library.info.sha256.clone(),
        };
        self.activate(Arc::new(plugin), source, config_json)
    }

    /// Loads SDK pack `P` in-process (linked into the host, no library file).
    pub fn load_pack<P: Pack>(&self, config_json: &str) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(P::NAME)?;
        let instance = sdk::instantiate::<P>(config_json).map_err(LoadError::Instantiate)?;
        let plugin = PackPlugin {
            name: P::NAME.to_owned(),
            version: P::VERSION.to_owned(),
            description: P::DESCRIPTION.to_owned(),
            instance,
            health: self.new_health(P::NAME),
        };
        self.activate(Arc::new(plugin), PackSource::InProcess, config_json)
    }

    /// Loads an in-process plugin.
    pub fn load_plugin(&self, plugin: Arc<dyn Plugin>) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(plugin.name())?;
        self.activate(plugin, PackSource::InProcess, "")
    }

    fn refuse_duplicate(&self, name: &str) -> Result<(), LoadError> {
        if self.loaded().iter().any(|l| l.info.name == name) {
            return Err(LoadError::AlreadyLoaded(name.to_owned()));
        }
        Ok(())
    }

    /// Activates into a staging area, then commits everything in one step.
    /// A failure (or panic) leaves the registry exactly as it was.
    fn activate(
        &self,
        plugin: Arc<dyn Plugin>,
        source: PackSource,
        config_json: &str,
    ) -> Result<PackInfo, LoadError> {
        let name = plugin.name().to_owned();
        let chains = stage(plugin.as_ref())?;
        let mut loaded = self.loaded();
        if loaded.iter().any(|l| l.info.name == name) {
            return Err(LoadError::AlreadyLoaded(name));
        }
        let owner = self.registry.new_owner();
        self.registry.commit(owner, chains);
        let info = PackInfo {
            name,
            version: plugin.version().to_owned(),
            description: plugin.description().to_owned(),
            source,
            config: config_json.to_owned(),
        };
        loaded.push(Loaded {
            info: info.clone(),
            owner,
            plugin,
        });
        Ok(info)
    }

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
    pub fn reload(&self, name: &str) -> Result<ReloadOutcome, LoadError> {
        let (path, sha256, config, owner, old) = {
            let loaded = self.loaded();
            let entry = loaded
                .iter()
                .find(|l| l.info.name == name)
                .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
            let PackSource::File { path, sha256 } = &entry.info.source else {
                return Err(LoadError::NotReloadable(name.to_owned()));
            };
            (
                path.clone(),
                sha256.clone(),
                entry.info.config.clone(),
                entry.owner,
                Arc::clone(&entry.plugin),
            )
        };
        let trust = self.trust();
        let probe_packs = [(name, config.as_str())];
        let checks = Checks {
            trust: &trust,
            probe: trust
                .probe_on_reload
                .as_ref()
                .map(|p| (p, &probe_packs[..])),
        };
        let library = self.loader.open(&path, &checks)?;
        if library.info.sha256 == sha256 {
            return Ok(ReloadOutcome::Unchanged);
        }
        let description = library
            .info
            .packs
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| {
                LoadError::file(
                    &path,
                    FileError::NoSuchPack {
                        wanted: name.to_owned(),
                        have: library
                            .info
                            .packs
                            .iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    },
                )
            })?;
        let instance = library
            .instantiate(name, &config)
            .map_err(LoadError::Instantiate)?;
        let plugin: Arc<dyn Plugin> = Arc::new(PackPlugin {
            health: self.new_health(name),
            name: description.name,
            version: description.version,
            description: description.description,
            instance,
        });
        if let Some(state) = old.export_state() {
            if let Err(error) = plugin.import_state(&state) {
                tracing::warn!(pack = name, %error, "the new build did not take the old state; it starts fresh");
            }
        }
        let chains = stage(plugin.as_ref())?;
        let mut loaded = self.loaded();
        let entry = loaded
            .iter_mut()
            .find(|l| l.owner == owner)
            .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
        self.registry.replace_owner(owner, chains);
        entry.info.version = plugin.version().to_owned();
        entry.info.description = plugin.description().to_owned();
        entry.info.source = PackSource::File {
            path,
            sha256: library.info.sha256.clone(),
        };
        entry.plugin = plugin;
        Ok(ReloadOutcome::Reloaded(entry.info.clone()))
    }

    /// The files loaded packs came from, with the names loaded from each.
    pub fn loaded_files(&self) -> Vec<(PathBuf, Vec<String>)> {
        let mut files: Vec<(PathBuf, Vec<String>)> = Vec::new();
        for entry in self.loaded().iter() {
            if let PackSource::File { path, .. } = &entry.info.source {
                match files.iter_mut().find(|(p, _)| p == path) {
                    Some((_, names)) => names.push(entry.info.name.clone()),
                    None => files.push((path.clone(), vec![entry.info.name.clone()])),
                }
            }
        }
        files
    }

    /// The SHA-256 of the content `name` was loaded from, when it came from a file.
    pub fn loaded_sha256(&self, name: &str) -> Option<String> {
        self.loaded()
            .iter()
            .find(|l| l.info.name == name)
            .and_then(|l| match &l.info.source {
                PackSource::File { sha256, .. } => Some(sha256.clone()),
                PackSource::InProcess => None,
            })
    }

    /// Unloads `name`: calls its `deactivate`, then withdraws every chain it
    /// still owns — even when `deactivate` fails or panics, in which case the
    /// failure is returned after the withdrawal.
    pub fn unload(&self, name: &str) -> Result<(), LoadError> {
        let entry = {
            let mut loaded = self.loaded();
            let at = loaded
                .iter()
                .position(|l| l.info.name == name)
                .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
            loaded.remove(at)
        };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| entry.plugin.deactivate()))
            .unwrap_or_else(|_| Err(PluginError("deactivate panicked".to_owned())));
        self.registry.unregister_owner(entry.owner);
        outcome.map_err(|source| LoadError::Deactivation {
            name: name.to_owned(),
            source,
        })
    }

    /// Opens the library at `path` and reports what it provides, without
    /// instantiating or activating anything.
    pub fn inspect_file(&self, path: &Path) -> Result<super::loader::LibraryInfo, LoadError> {
        self.check_file(path, &[])
    }

    /// Opens the library at `path` (with this manager's trust settings, but
    /// never a probe) and builds each of `packs` (name, config) without
    /// activating it: a load test. Returns what the library provides.
    pub fn check_file(
        &self,
        path: &Path,
        packs: &[(&str, &str)],
    ) -> Result<super::loader::LibraryInfo, LoadError> {
        let trust = self.trust();
        let library = self.loader.open(
            path,
            &Checks {
                trust: &trust,
                probe: None,
            },
        )?;
        build_each(&library, path, packs)
    }

    /// The probe's side of [`PluginManager::check_file`]: the same load test
    /// on the sealed pack this process was handed on its standard input.
    pub fn check_inherited_stdin(
        &self,
        packs: &[(&str, &str)],
    ) -> Result<super::loader::LibraryInfo, LoadError> {
        let library = self.loader.open_inherited_stdin()?;
        build_each(&library, Path::new("(sealed pack on stdin)"), packs)
    }

    /// The loaded packs, in load order.
    pub fn list(&self) -> Vec<PackInfo> {
        self.loaded().iter().map(|l| l.info.clone()).collect()
    }
}

/// Builds each of `packs` (name, config) from `library` without activating
/// it; returns what the library provides.
fn build_each(
    library: &Library,
    path: &Path,
    packs: &[(&str, &str)],
) -> Result<super::loader::LibraryInfo, LoadError> {
    for (name, config) in packs {
        pick(library, path, Some(name))?;
        library
            .instantiate(name, config)
            .map_err(LoadError::Instantiate)?;
    }
    Ok(library.info.clone())
}

/// Stages a plugin's registrations; a failure or panic stages nothing.
fn stage(plugin: &dyn Plugin) -> Result<Interceptors, LoadError> {
    let mut registrar = PluginRegistrar::new();
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| plugin.activate(&mut registrar)))
        .unwrap_or_else(|_| Err(PluginError("activate panicked".to_owned())));
    match outcome {
        Ok(()) => Ok(registrar.into_chains()),
        Err(source) => Err(LoadError::Activation {
            name: plugin.name().to_owned(),
            source,
        }),
    }
}

fn pick(library: &Library, path: &Path, name: Option<&str>) -> Result<String, LoadError> {
    let have = || {
        library
            .info
            .packs
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(name) if library.info.packs.iter().any(|p| p.name == name) => Ok(name.to_owned()),
        Some(name) => Err(LoadError::file(
            path,
            FileError::NoSuchPack {
                wanted: name.to_owned(),
                have: have(),
            },
        )),
        None => match library.info.packs.as_slice() {
            [only] => Ok(only.name.clone()),
            _ => Err(LoadError::file(
                path,
                FileError::NoSuchPack {
                    wanted: "(unnamed)".to_owned(),
                    have: have(),
                },
            )),
        },
    }
}

/// A pack instance (from a library or linked in) seen as a plugin.
struct PackPlugin {
    name: String,
    version: String,
    description: String,
    instance: PackInstanceBox,
    health: Arc<PackHealth>,
}

impl Plugin for PackPlugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn export_state(&self) -> Option<String> {
        let state = self.instance.export_state().into_string();
        (!state.is_empty()).then_some(state)
    }

    fn import_state(&self, state: &str) -> Result<(), PluginError> {
        self.instance
            .import_state(abi_stable::std_types::RStr::from_str(state))
            .into_result()
            .map_err(|e| PluginError(e.into_string()))
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError> {
        for interceptor in pack_interceptors(&self.name, &self.instance, &self.health)? {
            let seam = interceptor.seam();
            registrar.register(seam.as_str(), interceptor)?;
        }
        Ok(())
    }
}

/// A pack instance's registrations as host interceptors named
/// `<pack>/<name>`. A seam this host does not know refuses the whole pack.
pub(crate) fn pack_interceptors(
    pack: &str,
    instance: &PackInstanceBox,
    health: &Arc<PackHealth>,
) -> Result<Vec<AnyInterceptor>, PluginError> {
    instance
        .registrations()
        .into_iter()
        .map(|registration| {
            let name = format!("{pack}/{}", registration.name);
            let seam = SeamName::ALL
                .into_iter()
                .find(|s| Seam::from_name(s.as_str()) == Some(registration.seam))
                .ok_or_else(|| {
                    PluginError(format!(
                        "interceptor '{name}' registers on {} which this host does not run; upgrade the host or drop the pack",
                        registration.seam
                    ))
                })?;
            let interceptor = registration.interceptor;
            let health = Some(Arc::clone(health));
            Ok(match seam {
                SeamName::ProviderRequest => AnyInterceptor::ProviderRequest(
                    Interceptor::from_pack_watched(name, interceptor, health),
                ),
                SeamName::ToolCall => {
                    AnyInterceptor::ToolCall(Interceptor::from_pack_watched(name, interceptor, health))
                }
                SeamName::ToolResult => AnyInterceptor::ToolResult(Interceptor::from_pack_watched(
                    name,
                    interceptor,
                    health,
                )),
                SeamName::Context => {
                    AnyInterceptor::Context(Interceptor::from_pack_watched(name, interceptor, health))
                }
            })
        })
        .collect()
}

/// Pack `P`'s interceptors as a bundle, for a host that links the pack crate
/// and hands the chains to a session itself (no registry, no library file).
pub fn interceptors_of<P: Pack>(config_json: &str) -> Result<Interceptors, LoadError> {
    let instance = sdk::instantiate::<P>(config_json).map_err(LoadError::Instantiate)?;
    let health = Arc::new(PackHealth::new(P::NAME, HealthPolicy::default(), None));
    let mut bundle = Interceptors::new();
    for interceptor in
        pack_interceptors(P::NAME, &instance, &health).map_err(|source| LoadError::Activation {
            name: P::NAME.to_owned(),
            source,
        })?
    {
        bundle.push(interceptor);
    }
    Ok(bundle)
}
