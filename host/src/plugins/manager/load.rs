//! The manager itself: its settings (trust, isolation, health), loading a
//! pack by name, from a file or in-process, activating it in one step,
//! listing, inspecting and unloading.

use super::pack_plugin::{IsolatedPlugin, PackPlugin};
use crate::interception::{HealthPolicy, HealthSink, Interceptors, PackHealth, PackMode};
use crate::isolate::host::Spawner;
use crate::isolate::pool::IsolatedPool;
use crate::isolate::Isolation;
use crate::plugins::discovery::{discover, Discovery, SearchDir};
use crate::plugins::errors::{LoadError, PluginError};
use crate::plugins::loader::{Checks, Library, LibraryInfo, LoadTogether, Loader, SealedPack};
use crate::plugins::plugin::{Plugin, PluginRegistrar};
use crate::plugins::registry::{OwnerId, Registry};
use crate::plugins::trust::{Probe, TrustSettings};
use crate::state::GateState;
use chimera_plugin_api::abi::PackInstanceBox;
use chimera_plugin_api::sdk::{self, panic_message, Pack};
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

/// A loaded pack, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackInfo {
    /// Whether its decisions are enacted or only recorded
    /// ([`PluginManager::set_monitored`]).
    pub mode: PackMode,
    /// The name it is listed, reloaded and unloaded under (a pack's
    /// entry-point name).
    pub name: String,
    /// The version it declares.
    pub version: String,
    /// Its one-line description, for listings.
    pub description: String,
    /// Where it came from.
    pub source: PackSource,
    /// The JSON configuration it was built with (empty: defaults).
    pub config: String,
}

impl PackInfo {
    /// The pack file, when it came from one.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            PackSource::File { path, .. } => Some(path),
            PackSource::InProcess => None,
        }
    }
}

/// A loaded pack: what is listed, the registry owner of its chains, the
/// plugin, and how it runs.
pub(super) struct Loaded {
    pub(super) info: PackInfo,
    pub(super) owner: OwnerId,
    pub(super) plugin: Arc<dyn Plugin>,
    /// Runs in a child process (a reload starts a new one).
    pub(super) isolated: bool,
}

/// Loads packs and plugins into a [`Registry`], and takes them out again.
pub struct PluginManager {
    pub(super) registry: Arc<Registry>,
    search_path: Vec<SearchDir>,
    pub(super) loader: Loader,
    loaded: Mutex<Vec<Loaded>>,
    trust: RwLock<TrustSettings>,
    health: RwLock<HealthSettings>,
    pub(super) isolation: RwLock<Option<Isolation>>,
    /// The gate state offered to every pack that asks for it.
    state: RwLock<GateState>,
    /// The names of the packs loaded (and reloaded) in monitor mode.
    monitored: RwLock<Vec<String>>,
}

/// How loaded packs' health is watched, and who hears about it.
#[derive(Clone, Default)]
struct HealthSettings {
    policy: HealthPolicy,
    sink: Option<HealthSink>,
    /// The packs whose failures, in a server, follow each seam's own
    /// policy (`on_unavailable = "fail_open"`).
    fail_open: Vec<String>,
}

impl PluginManager {
    /// A manager feeding `registry`, finding packs by name in every pack
    /// file of the directories of `search_path`, all at one precedence
    /// level ([`Level::Chosen`](crate::plugins::Level::Chosen)): a name two files
    /// provide is refused.
    pub fn new(registry: Arc<Registry>, search_path: Vec<PathBuf>) -> Self {
        PluginManager::with_search_path(
            registry,
            search_path.into_iter().map(SearchDir::all).collect(),
        )
    }

    /// [`PluginManager::new`] with directories that may admit only some
    /// files, each at its precedence level (see [`SearchDir`]): a name is
    /// taken from the best level that provides it, and refused when two
    /// files provide it there.
    pub fn with_search_path(registry: Arc<Registry>, search_path: Vec<SearchDir>) -> Self {
        PluginManager {
            registry,
            search_path,
            loader: Loader::new(),
            loaded: Mutex::new(Vec::new()),
            trust: RwLock::new(TrustSettings::default()),
            health: RwLock::new(HealthSettings::default()),
            isolation: RwLock::new(None),
            state: RwLock::new(GateState::in_process()),
            monitored: RwLock::new(Vec::new()),
        }
    }

    /// Sets which packs, by name, are loaded from now on in monitor mode
    /// ([`PackMode::Monitor`]): their decisions are recorded but never
    /// enacted. A reload keeps a pack's mode as this says it. A pack
    /// already loaded keeps the mode it was loaded in until reloaded.
    pub fn set_monitored(&self, names: impl IntoIterator<Item = String>) {
        *self
            .monitored
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = names.into_iter().collect();
    }

    /// The mode pack `name` is loaded in.
    #[must_use]
    pub fn mode_of(&self, name: &str) -> PackMode {
        let monitored = self
            .monitored
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if monitored.iter().any(|n| n == name) {
            PackMode::Monitor
        } else {
            PackMode::Enforce
        }
    }

    /// Sets the gate state offered to packs built from now on (in this
    /// process until set: see [`crate::state`]).
    pub fn set_state(&self, state: GateState) {
        *self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = state;
    }

    /// The gate state packs are offered.
    #[must_use]
    pub fn state(&self) -> GateState {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Offers the gate state to `instance` of pack `name`: a pack that
    /// asks and cannot take it is refused in one line.
    fn offer_state(&self, name: &str, instance: &PackInstanceBox) -> Result<(), LoadError> {
        self.state()
            .offer(name, instance)
            .map(|_| ())
            .map_err(|refused| LoadError::Instantiate(format!("{name}: {refused}")))
    }

    /// Sets how pack files are trusted (lock file, directory policy, probe).
    pub fn set_trust(&self, trust: TrustSettings) {
        *self
            .trust
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = trust;
    }

    /// Sets which packs loaded from files from now on run isolated, each
    /// in a child process of its own (see [`crate::isolate`]).
    pub fn set_isolation(&self, isolation: Option<Isolation>) {
        *self
            .isolation
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = isolation;
    }

    /// The isolation settings, when pack `name` is to run isolated.
    fn isolation_for(&self, name: Option<&str>) -> Option<Isolation> {
        self.isolation
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .filter(|isolation| isolation.covers(name))
            .cloned()
    }

    pub(super) fn trust(&self) -> TrustSettings {
        self.trust
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sets the quarantine and time-budget policy for packs loaded from now
    /// on, and who is told when a pack is quarantined or a call runs over
    /// its budget.
    pub fn set_health(&self, policy: HealthPolicy, sink: Option<HealthSink>) {
        let mut settings = self
            .health
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        settings.policy = policy;
        settings.sink = sink;
    }

    /// Packs loaded from now on judge for a server's clients
    /// ([`HealthPolicy::serving`]): a judgement that cannot be made fails
    /// closed on every seam, but for the packs named in `fail_open`,
    /// which follow each seam's own policy; slow calls never quarantine;
    /// failures quarantine only when several clients meet them.
    pub fn set_serving(&self, fail_open: impl IntoIterator<Item = String>) {
        let mut settings = self
            .health
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        settings.policy.serving = true;
        settings.fail_open = fail_open.into_iter().collect();
    }

    fn new_health(&self, pack: &str) -> Arc<PackHealth> {
        let settings = self
            .health
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let open = settings.fail_open.iter().any(|name| name == pack);
        Arc::new(PackHealth::new(pack, settings.policy, settings.sink).failing_open(open))
    }

    /// The registry this manager feeds.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The directories searched by name.
    pub fn search_path(&self) -> &[SearchDir] {
        &self.search_path
    }

    pub(super) fn loaded(&self) -> MutexGuard<'_, Vec<Loaded>> {
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Loads together until the guard is dropped: a file this thread
    /// loads several packs from is read and checked once, and every pack
    /// taken from it comes from those bytes (fifteen packs from one library
    /// read it once, not fifteen times). Reloads on other threads (a
    /// watcher's) read as always. Nested, the inner one changes nothing.
    pub fn load_together(&self) -> LoadTogether<'_> {
        self.loader.batch()
    }

    /// Indexes the search path (no pack code runs).
    pub fn discover(&self) -> Discovery {
        discover(&self.search_path)
    }

    /// Loads the pack whose entry-point name is `name` from the search path,
    /// configured by `config_json` (empty: defaults). When the file chosen
    /// shadows copies at lower levels, one info line names them.
    ///
    /// # Errors
    ///
    /// `LoadError::AlreadyLoaded` when a pack by that name is loaded;
    /// `LoadError::ClaimedTwice` when two files at the best level provide it;
    /// `LoadError::UnknownName` when none on the search path does; else
    /// [`PluginManager::load_file`]'s errors.
    pub fn load(&self, name: &str, config_json: &str) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(name)?;
        let discovery = self.discover();
        let Some(found) = discovery.find(name)? else {
            return Err(LoadError::UnknownName {
                name: name.to_owned(),
                searched: self.search_path.iter().map(|d| d.path.clone()).collect(),
            });
        };
        let info = self.load_file(&found.path, Some(name), config_json)?;
        let shadowed = discovery.shadowed(name);
        if !shadowed.is_empty() {
            let copies: Vec<String> = shadowed
                .iter()
                .map(|pack| format!("{} {}", pack.level, pack.path.display()))
                .collect();
            tracing::info!(
                "pack '{name}' loaded from {} ({}), shadowing {}",
                found.path.display(),
                found.level,
                copies.join(", ")
            );
        }
        Ok(info)
    }

    /// Loads pack `name` (or the library's only pack, when `None`) from the
    /// file at `path`.
    ///
    /// # Errors
    ///
    /// `LoadError::File` when the file fails its checks (trust policy, lock,
    /// format, completeness, probe) or does not provide the pack (or, unnamed,
    /// provides more than one); `LoadError::AlreadyLoaded` when a pack by that
    /// name is loaded; `LoadError::Instantiate` when the pack refuses
    /// `config_json`, or its constructor or pack host fails;
    /// `LoadError::Activation` when activation fails (the registry is left as
    /// it was).
    pub fn load_file(
        &self,
        path: &Path,
        name: Option<&str>,
        config_json: &str,
    ) -> Result<PackInfo, LoadError> {
        if let Some(isolation) = self.isolation_for(name) {
            let sealed = self.loader.seal(path, &self.trust())?;
            let (plugin, sha256) =
                self.start_isolated(path, sealed, name, config_json, &isolation)?;
            self.refuse_duplicate(plugin.name())?;
            let source = PackSource::File {
                path: path.to_owned(),
                sha256,
            };
            return self.activate(Arc::new(plugin), source, config_json, true);
        }
        let probed: Vec<(&str, &str)> = name.map(|n| vec![(n, config_json)]).unwrap_or_default();
        let library = self.open(path, |trust| trust.probe_on_load.as_ref(), &probed)?;
        let name = library.pack(name)?.name.clone();
        self.refuse_duplicate(&name)?;
        let plugin = self.build(&library, &name, config_json)?;
        let source = PackSource::File {
            path: path.to_owned(),
            sha256: library.info.sha256.clone(),
        };
        self.activate(Arc::new(plugin), source, config_json, false)
    }

    /// Starts pack `name` (or the file's only pack) of `sealed` (the checked
    /// bytes of the file at `path`, never `dlopen`ed here) in a pack host of
    /// its own.
    pub(super) fn start_isolated(
        &self,
        path: &Path,
        sealed: SealedPack,
        name: Option<&str>,
        config_json: &str,
        isolation: &Isolation,
    ) -> Result<(IsolatedPlugin, String), LoadError> {
        let name = match (name, sealed.packs.as_slice()) {
            (Some(name), _) => name.to_owned(),
            (None, [only]) => only.clone(),
            (None, have) => {
                let kind = crate::plugins::errors::FileError::WhichPack {
                    have: have.to_vec(),
                };
                return Err(LoadError::file(path, kind));
            }
        };
        if !sealed.packs.contains(&name) {
            let kind = crate::plugins::errors::FileError::NoSuchPack {
                wanted: name,
                have: sealed.packs.clone(),
            };
            return Err(LoadError::file(path, kind));
        }
        let spawner = Spawner {
            program: isolation.program.clone(),
            memfd: sealed.memfd,
            pack: name.clone(),
            config: config_json.to_owned(),
            start_timeout: isolation.start_timeout,
            state: self.state().bind(&name),
        };
        let pack = IsolatedPool::start(spawner, &self.new_health(&name), isolation.processes)
            .map_err(LoadError::Instantiate)?;
        Ok((IsolatedPlugin { pack }, sealed.sha256))
    }

    /// Opens the library at `path` with this manager's trust settings,
    /// probing `probed` (name, config) first where `probe` picks a probe.
    pub(super) fn open(
        &self,
        path: &Path,
        probe: impl FnOnce(&TrustSettings) -> Option<&Probe>,
        probed: &[(&str, &str)],
    ) -> Result<Arc<Library>, LoadError> {
        let trust = self.trust();
        let checks = Checks {
            trust: &trust,
            probe: probe(&trust).map(|p| (p, probed)),
        };
        self.loader.open(path, &checks)
    }

    /// Builds pack `name` of `library` from `config_json`, as a plugin.
    pub(super) fn build(
        &self,
        library: &Library,
        name: &str,
        config_json: &str,
    ) -> Result<PackPlugin, LoadError> {
        let description = library.pack(Some(name))?.clone();
        let instance = library.instantiate(name, config_json)?;
        self.offer_state(&description.name, &instance)?;
        Ok(PackPlugin {
            health: self.new_health(&description.name),
            name: description.name,
            version: description.version,
            description: description.description,
            instance,
        })
    }

    /// Loads SDK pack `P` in-process (linked into the host, no library file).
    ///
    /// # Errors
    ///
    /// `LoadError::AlreadyLoaded` when a pack named `P::NAME` is loaded;
    /// `LoadError::Instantiate` when `P` refuses `config_json`, or its
    /// constructor fails or panics; `LoadError::Activation` when activation
    /// fails.
    pub fn load_pack<P: Pack>(&self, config_json: &str) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(P::NAME)?;
        let instance = sdk::instantiate::<P>(config_json)
            .map_err(|e| LoadError::Instantiate(e.to_string()))?;
        self.offer_state(P::NAME, &instance)?;
        let plugin = PackPlugin {
            name: P::NAME.to_owned(),
            version: P::VERSION.to_owned(),
            description: P::DESCRIPTION.to_owned(),
            instance,
            health: self.new_health(P::NAME),
        };
        self.activate(Arc::new(plugin), PackSource::InProcess, config_json, false)
    }

    /// Loads an in-process plugin.
    ///
    /// # Errors
    ///
    /// `LoadError::AlreadyLoaded` when a pack or plugin by its name is loaded;
    /// `LoadError::Activation` when its `activate` fails or panics (nothing it
    /// registered is kept).
    pub fn load_plugin(&self, plugin: Arc<dyn Plugin>) -> Result<PackInfo, LoadError> {
        self.refuse_duplicate(plugin.name())?;
        self.activate(plugin, PackSource::InProcess, "", false)
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
        isolated: bool,
    ) -> Result<PackInfo, LoadError> {
        let name = plugin.name().to_owned();
        let mode = self.mode_of(&name);
        let chains = stage(plugin.as_ref(), mode)?;
        let mut loaded = self.loaded();
        if loaded.iter().any(|l| l.info.name == name) {
            return Err(LoadError::AlreadyLoaded(name));
        }
        let owner = self.registry.new_owner();
        self.registry.commit(owner, chains);
        let info = PackInfo {
            mode,
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
            isolated,
        });
        Ok(info)
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
    ///
    /// # Errors
    ///
    /// `LoadError::NotLoaded` when no pack by that name is loaded;
    /// `LoadError::Deactivation` when its `deactivate` fails or panics (it is
    /// unloaded all the same).
    pub fn unload(&self, name: &str) -> Result<(), LoadError> {
        let entry = {
            let mut loaded = self.loaded();
            let at = loaded
                .iter()
                .position(|l| l.info.name == name)
                .ok_or_else(|| LoadError::NotLoaded(name.to_owned()))?;
            loaded.remove(at)
        };
        let outcome = guarded("deactivate", || entry.plugin.deactivate());
        self.registry.unregister_owner(entry.owner);
        outcome.map_err(|source| LoadError::Deactivation {
            name: name.to_owned(),
            source,
        })
    }

    /// Opens the library at `path` and reports what it provides, without
    /// instantiating or activating anything.
    ///
    /// # Errors
    ///
    /// `LoadError::File` when the file fails its checks (trust policy, lock,
    /// format, completeness, manifest) or the dynamic loader refuses it.
    pub fn inspect_file(&self, path: &Path) -> Result<LibraryInfo, LoadError> {
        self.check_file(path, &[])
    }

    /// Opens the library at `path` (with this manager's trust settings, but
    /// never a probe) and builds each of `packs` (name, config) without
    /// activating it: a load test. Returns what the library provides.
    ///
    /// # Errors
    ///
    /// `LoadError::File` when the file fails its checks or does not provide one
    /// of `packs`; `LoadError::Instantiate` when one of them refuses its
    /// configuration or fails to build.
    pub fn check_file(
        &self,
        path: &Path,
        packs: &[(&str, &str)],
    ) -> Result<LibraryInfo, LoadError> {
        let library = self.open(path, |_| None, &[])?;
        build_each(&library, packs)
    }

    /// The probe's side of [`PluginManager::check_file`]: the same load test
    /// on the sealed pack this process was handed on its standard input.
    ///
    /// # Errors
    ///
    /// `LoadError::File` when standard input cannot be read as a pack library
    /// this platform loads, or the library lacks one of `packs`;
    /// `LoadError::Instantiate` when one of them refuses its configuration or
    /// fails to build.
    pub fn check_inherited_stdin(&self, packs: &[(&str, &str)]) -> Result<LibraryInfo, LoadError> {
        let library = self.loader.open_inherited_stdin()?;
        build_each(&library, packs)
    }

    /// The loaded packs, in load order.
    pub fn list(&self) -> Vec<PackInfo> {
        self.loaded().iter().map(|l| l.info.clone()).collect()
    }
}

/// Builds each of `packs` (name, config) from `library` without activating
/// it; returns what the library provides.
fn build_each(library: &Library, packs: &[(&str, &str)]) -> Result<LibraryInfo, LoadError> {
    for (name, config) in packs {
        library.pack(Some(name))?;
        library.instantiate(name, config)?;
    }
    Ok(library.info.clone())
}

/// Runs plugin hook `hook`; a panic becomes [`PluginError::Panicked`].
pub(super) fn guarded(
    hook: &'static str,
    body: impl FnOnce() -> Result<(), PluginError>,
) -> Result<(), PluginError> {
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        Err(PluginError::Panicked {
            hook,
            message: panic_message(&*payload),
        })
    })
}

/// Stages a plugin's registrations, every one in `mode`; a failure or
/// panic stages nothing.
pub(super) fn stage(plugin: &dyn Plugin, mode: PackMode) -> Result<Interceptors, LoadError> {
    let mut registrar = PluginRegistrar::new();
    match guarded("activate", || plugin.activate(&mut registrar)) {
        Ok(()) => {
            let mut chains = registrar.into_chains();
            chains.set_mode(mode);
            Ok(chains)
        }
        Err(source) => Err(LoadError::Activation {
            name: plugin.name().to_owned(),
            source,
        }),
    }
}
