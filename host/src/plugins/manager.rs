//! The plugin manager: load by name, by file or in-process; unload; list.

use super::discovery::{discover, Discovery, SearchDir};
use super::errors::{LoadError, PluginError};
use super::loader::{Checks, Library, LibraryInfo, Loader, SealedPack};
use super::plugin::{Plugin, PluginRegistrar};
use super::registry::{OwnerId, Registry};
use super::trust::{Probe, TrustSettings};
use crate::interception::{AnyInterceptor, ContentRole, Interceptors, SeamName};
use crate::interception::{HealthPolicy, HealthSink, PackHealth};
use crate::isolate::host::{IsolatedPack, Spawner};
use crate::isolate::Isolation;
use chimera_plugin_api::abi::{PackInstanceBox, Seam};
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

struct Loaded {
    info: PackInfo,
    owner: OwnerId,
    plugin: Arc<dyn Plugin>,
    /// Runs in a child process (a reload starts a new one).
    isolated: bool,
}

/// Loads packs and plugins into a [`Registry`], and takes them out again.
pub struct PluginManager {
    registry: Arc<Registry>,
    search_path: Vec<SearchDir>,
    loader: Loader,
    loaded: Mutex<Vec<Loaded>>,
    trust: RwLock<TrustSettings>,
    health: RwLock<HealthSettings>,
    isolation: RwLock<Option<Isolation>>,
}

/// How loaded packs' health is watched, and who hears about it.
#[derive(Clone, Default)]
struct HealthSettings {
    policy: HealthPolicy,
    sink: Option<HealthSink>,
}

impl PluginManager {
    /// A manager feeding `registry`, finding packs by name in every pack
    /// file of the directories of `search_path`, all at one precedence
    /// level ([`Level::Chosen`](super::Level::Chosen)): a name two files
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
        }
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

    fn trust(&self) -> TrustSettings {
        self.trust
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sets the quarantine and time-budget policy for packs loaded from now
    /// on, and who is told when a pack is quarantined or a call runs over
    /// its budget.
    pub fn set_health(&self, policy: HealthPolicy, sink: Option<HealthSink>) {
        *self
            .health
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = HealthSettings { policy, sink };
    }

    fn new_health(&self, pack: &str) -> Arc<PackHealth> {
        let settings = self
            .health
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Indexes the search path (no pack code runs).
    pub fn discover(&self) -> Discovery {
        discover(&self.search_path)
    }

    /// Loads the pack whose entry-point name is `name` from the search path,
    /// configured by `config_json` (empty: defaults). When the file chosen
    /// shadows copies at lower levels, one info line names them.
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
    fn start_isolated(
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
                let kind = super::errors::FileError::WhichPack {
                    have: have.to_vec(),
                };
                return Err(LoadError::file(path, kind));
            }
        };
        if !sealed.packs.contains(&name) {
            let kind = super::errors::FileError::NoSuchPack {
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
        };
        let pack =
            IsolatedPack::start(spawner, self.new_health(&name)).map_err(LoadError::Instantiate)?;
        Ok((IsolatedPlugin { pack }, sealed.sha256))
    }

    /// Opens the library at `path` with this manager's trust settings,
    /// probing `probed` (name, config) first where `probe` picks a probe.
    fn open(
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
    fn build(
        &self,
        library: &Library,
        name: &str,
        config_json: &str,
    ) -> Result<PackPlugin, LoadError> {
        let description = library.pack(Some(name))?.clone();
        let instance = library.instantiate(name, config_json)?;
        Ok(PackPlugin {
            health: self.new_health(&description.name),
            name: description.name,
            version: description.version,
            description: description.description,
            instance,
        })
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
        self.activate(Arc::new(plugin), PackSource::InProcess, config_json, false)
    }

    /// Loads an in-process plugin.
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
            isolated,
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
        let chains = stage(plugin.as_ref())?;
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
        let outcome = guarded("deactivate", || entry.plugin.deactivate());
        self.registry.unregister_owner(entry.owner);
        outcome.map_err(|source| LoadError::Deactivation {
            name: name.to_owned(),
            source,
        })
    }

    /// Opens the library at `path` and reports what it provides, without
    /// instantiating or activating anything.
    pub fn inspect_file(&self, path: &Path) -> Result<LibraryInfo, LoadError> {
        self.check_file(path, &[])
    }

    /// Opens the library at `path` (with this manager's trust settings, but
    /// never a probe) and builds each of `packs` (name, config) without
    /// activating it: a load test. Returns what the library provides.
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
    pub fn check_inherited_stdin(&self, packs: &[(&str, &str)]) -> Result<LibraryInfo, LoadError> {
        let library = self.loader.open_inherited_stdin()?;
        build_each(&library, packs)
    }

    /// The loaded packs, in load order.
    pub fn list(&self) -> Vec<PackInfo> {
        self.loaded().iter().map(|l| l.info.clone()).collect()
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
fn guarded(
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

/// Stages a plugin's registrations; a failure or panic stages nothing.
fn stage(plugin: &dyn Plugin) -> Result<Interceptors, LoadError> {
    let mut registrar = PluginRegistrar::new();
    match guarded("activate", || plugin.activate(&mut registrar)) {
        Ok(()) => Ok(registrar.into_chains()),
        Err(source) => Err(LoadError::Activation {
            name: plugin.name().to_owned(),
            source,
        }),
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
            .map_err(|e| PluginError::Failed(e.into_string()))
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
    let policy = declared_policy(instance);
    instance
        .registrations()
        .into_iter()
        .map(|registration| {
            let interceptor = registration.interceptor;
            declared(
                pack,
                registration.name.as_str(),
                registration.seam,
                &policy,
                |seam, name, closed| {
                    let health = Some(Arc::clone(health));
                    AnyInterceptor::from_pack(seam, name, interceptor, health, closed)
                },
            )
        })
        .collect()
}

/// Interceptor `own` of `pack` on `seam`, made by `make` (seam, display
/// name, fail closed) with the role and stream window `policy` declares. A
/// seam this host does not know refuses it with one line.
fn declared(
    pack: &str,
    own: &str,
    seam: Seam,
    policy: &DeclaredPolicy,
    make: impl FnOnce(SeamName, String, bool) -> AnyInterceptor,
) -> Result<AnyInterceptor, PluginError> {
    let closed = policy.fail_closed.iter().any(|n| n == own);
    let role = if policy.redacts.iter().any(|n| n == own) {
        ContentRole::Redacts
    } else if policy.judges.iter().any(|n| n == own) {
        ContentRole::Judges
    } else {
        ContentRole::Unstated
    };
    let name = format!("{pack}/{own}");
    let seam_name = SeamName::ALL
        .into_iter()
        .find(|s| Seam::from_name(s.as_str()) == Some(seam))
        .ok_or_else(|| PluginError::UnsupportedSeam {
            interceptor: name.clone(),
            seam,
        })?;
    let window = policy.stream_windows.get(own).copied().unwrap_or(0);
    let mut interceptor = make(seam_name, name, closed);
    interceptor.set_role(role);
    interceptor.set_stream_window(window.min(MAX_STREAM_WINDOW));
    Ok(interceptor)
}

/// An isolated pack's registrations (from its hello) as host interceptors
/// named `<pack>/<name>`, each a call into its process.
fn isolated_interceptors(pack: &Arc<IsolatedPack>) -> Result<Vec<AnyInterceptor>, PluginError> {
    let hello = pack.hello();
    let policy = parse_policy(&hello.policy_json);
    hello
        .registrations
        .iter()
        .enumerate()
        .map(|(index, (seam, own))| {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            declared(
                &hello.name,
                own,
                Seam(*seam),
                &policy,
                |seam, name, closed| {
                    AnyInterceptor::from_isolated(seam, name, Arc::clone(pack), index, closed)
                },
            )
        })
        .collect()
}

/// A pack instance running in its own process, seen as a plugin.
struct IsolatedPlugin {
    pack: Arc<IsolatedPack>,
}

impl Plugin for IsolatedPlugin {
    fn name(&self) -> &str {
        &self.pack.hello().name
    }

    fn version(&self) -> &str {
        &self.pack.hello().version
    }

    fn description(&self) -> &str {
        &self.pack.hello().description
    }

    fn export_state(&self) -> Option<String> {
        self.pack.export_state()
    }

    fn import_state(&self, state: &str) -> Result<(), PluginError> {
        self.pack.import_state(state).map_err(PluginError::Failed)
    }

    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError> {
        for interceptor in isolated_interceptors(&self.pack)? {
            let seam = interceptor.seam();
            registrar.register(seam.as_str(), interceptor)?;
        }
        Ok(())
    }
}

/// The largest stream window the host grants: however many bytes a
/// `stream_chunk` interceptor asks to take unjudged, at most this many
/// gather before it is offered the stream again.
pub const MAX_STREAM_WINDOW: usize = 4096;

/// What a pack declared about its interceptors: which fail closed, which
/// redact, which judge content, and the stream windows of its
/// `stream_chunk` interceptors.
#[derive(serde::Deserialize, Default)]
struct DeclaredPolicy {
    fail_closed: Vec<String>,
    #[serde(default)]
    redacts: Vec<String>,
    #[serde(default)]
    judges: Vec<String>,
    #[serde(default)]
    stream_windows: std::collections::BTreeMap<String, usize>,
}

/// The policy a pack declares. A pack built before the failure policy
/// existed answers "unsupported": nothing declared.
fn declared_policy(instance: &PackInstanceBox) -> DeclaredPolicy {
    let answer = instance.extension(
        abi_stable::std_types::RStr::from_str(sdk::FAILURE_POLICY_METHOD),
        abi_stable::std_types::RStr::from_str("{}"),
    );
    answer
        .into_result()
        .ok()
        .map(|json| parse_policy(json.as_str()))
        .unwrap_or_default()
}

/// A declared policy from its JSON; anything unreadable declares nothing.
fn parse_policy(json: &str) -> DeclaredPolicy {
    serde_json::from_str::<DeclaredPolicy>(json).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{RResult, RStr, RString, RVec};
    use chimera_plugin_api::abi::{
        Decision, InterceptorAbi, InterceptorAbi_TO, PackInstanceAbi, PackInstanceAbi_TO,
        Registration, SeamInput,
    };

    struct Allow;
    impl InterceptorAbi for Allow {
        fn intercept(&self, _input: &SeamInput<'_>) -> Decision {
            Decision::allow()
        }
    }

    /// A pack written against the raw ABI that registers on `seam`.
    struct OnSeam(Seam);
    impl PackInstanceAbi for OnSeam {
        fn registrations(&self) -> RVec<Registration> {
            RVec::from(vec![Registration {
                seam: self.0,
                name: RString::from("gate"),
                interceptor: InterceptorAbi_TO::from_value(Allow, TD_Opaque),
            }])
        }
        fn export_state(&self) -> RString {
            RString::new()
        }
        fn import_state(&self, _state: RStr<'_>) -> RResult<(), RString> {
            RResult::ROk(())
        }
        fn extension(&self, method: RStr<'_>, _payload: RStr<'_>) -> RResult<RString, RString> {
            RResult::RErr(format!("unsupported: {method}").into())
        }
    }

    #[test]
    fn a_pack_on_a_seam_this_host_does_not_run_is_refused_with_one_line() {
        let health = Arc::new(PackHealth::new("later", HealthPolicy::default(), None));
        let later = PackInstanceAbi_TO::from_value(OnSeam(Seam(9)), TD_Opaque);
        let error = pack_interceptors("later", &later, &health).unwrap_err();
        let line = error.to_string();
        assert_eq!(
            line,
            "interceptor 'later/gate' registers on seam#9 which this host does not run; upgrade the host or drop the pack"
        );
        assert!(!line.contains('\n'));
        // The seven known seams are all accepted, the new ones included.
        for seam in Seam::KNOWN {
            let known = PackInstanceAbi_TO::from_value(OnSeam(seam), TD_Opaque);
            let interceptors = pack_interceptors("now", &known, &health).expect("known seam");
            assert_eq!(
                interceptors[0].seam().as_str(),
                seam.name().unwrap_or_default()
            );
        }
    }
}
