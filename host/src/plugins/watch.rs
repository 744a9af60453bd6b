//! Hot swap: watching pack files and reloading them into the live process.
//!
//! ```text
//!  notify (debounced) ─▶ worker thread, per changed pack file:
//!    gone?           ─▶ log it; the loaded version stays active
//!    still growing?  ─▶ look again shortly (size and mtime must hold still)
//!    same content as loaded, or as the last failed attempt? ─▶ nothing
//!    backing off after failures? ─▶ retry when the back-off ends
//!    PluginManager::reload(name) for each pack loaded from the file
//!      ─▶ Reloaded { info }                  (same position, same config, state handed over)
//!      ─▶ Failed { name, error }             (the old chains keep running)
//! ```
//!
//! Only private copies are ever mapped (see the loader), so a writer that
//! writes in chunks or in place cannot crash the host: the worst it can do is
//! produce a failed reload, which the next complete write corrects.

use super::errors::LoadError;
use super::file_check::sha256_hex;
use super::manager::{PluginManager, ReloadOutcome};
use super::PackInfo;
use notify_debouncer_full::notify::{self, EventKind, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, Debouncer, RecommendedCache};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Tuning of the watcher.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after the last file event before a file is looked at.
    pub debounce: Duration,
    /// A file's size and mtime must hold still this long before it is loaded.
    pub settle: Duration,
    /// Wait after the second consecutive failure; doubles per failure.
    pub backoff: Duration,
    /// Longest back-off.
    pub max_backoff: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(200),
            settle: Duration::from_millis(25),
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// What the watcher did.
#[derive(Debug, Clone)]
pub enum ReloadEvent {
    /// A pack's new build is active.
    Reloaded(PackInfo),
    /// A reload failed; the previous version keeps running.
    Failed {
        /// The pack whose reload failed.
        name: String,
        /// The file it was reloaded from.
        path: PathBuf,
        /// Why (shared: every listener sees the same error).
        error: Arc<LoadError>,
    },
    /// A loaded pack's file disappeared; the loaded version stays active.
    Removed {
        /// The file that is gone.
        path: PathBuf,
        /// The packs still running from it.
        names: Vec<String>,
    },
}

/// A watch that can't be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {}: {source}", path.display())]
pub struct WatchError {
    path: PathBuf,
    #[source]
    source: notify::Error,
}

/// A running watch. Dropping it stops watching.
pub struct Watcher {
    debouncer: Option<Debouncer<RecommendedWatcher, RecommendedCache>>,
    worker: Option<JoinHandle<()>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Dropping the debouncer closes the channel, which ends the worker.
        drop(self.debouncer.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// Watches the directories of every pack `manager` loaded from a file and
/// reloads a pack when its file changes. `on_event` runs on the watcher's
/// thread.
pub fn watch(
    manager: Arc<PluginManager>,
    options: WatchOptions,
    on_event: impl Fn(ReloadEvent) + Send + 'static,
) -> Result<Watcher, WatchError> {
    let (sender, receiver) = mpsc::channel();
    let mut debouncer =
        new_debouncer(options.debounce, None, sender).map_err(|source| WatchError {
            path: PathBuf::from("."),
            source,
        })?;
    let dirs: HashSet<PathBuf> = manager
        .loaded_files()
        .into_iter()
        .filter_map(|(path, _)| path.parent().map(Path::to_owned))
        .collect();
    for dir in &dirs {
        debouncer
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                path: dir.clone(),
                source,
            })?;
    }
    let worker = std::thread::Builder::new()
        .name("chimera-pack-watcher".to_owned())
        .spawn(move || Worker::new(manager, options).run(receiver, on_event))
        .map_err(|e| WatchError {
            path: PathBuf::from("."),
            source: notify::Error::io(e),
        })?;
    Ok(Watcher {
        debouncer: Some(debouncer),
        worker: Some(worker),
    })
}

/// Per-file bookkeeping of failures.
#[derive(Default)]
struct FileState {
    failures: u32,
    failed_hash: Option<String>,
    not_before: Option<Instant>,
}

struct Worker {
    manager: Arc<PluginManager>,
    options: WatchOptions,
    /// Files waiting to be looked at, and from when.
    pending: HashMap<PathBuf, Instant>,
    files: HashMap<PathBuf, FileState>,
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || (a
            .canonicalize()
            .ok()
            .zip(b.parent().and_then(|d| d.canonicalize().ok())))
        .is_some_and(|(a, dir)| b.file_name().is_some_and(|name| a == dir.join(name)))
}

fn fingerprint(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// The SHA-256 (hex) of the file's content now, as the loader computes it.
fn content_hash(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|bytes| sha256_hex(&bytes))
}

impl Worker {
    fn new(manager: Arc<PluginManager>, options: WatchOptions) -> Self {
        Worker {
            manager,
            options,
            pending: HashMap::new(),
            files: HashMap::new(),
        }
    }

    fn run(mut self, receiver: Receiver<DebounceEventResult>, on_event: impl Fn(ReloadEvent)) {
        loop {
            let wait = self
                .pending
                .values()
                .min()
                .map_or(Duration::from_secs(3600), |due| {
                    due.saturating_duration_since(Instant::now())
                });
            match receiver.recv_timeout(wait) {
                Ok(Ok(events)) => {
                    for event in events {
                        if matches!(event.event.kind, EventKind::Access(_)) {
                            continue;
                        }
                        for path in &event.event.paths {
                            self.pending
                                .entry(path.clone())
                                .or_insert_with(Instant::now);
                        }
                    }
                }
                Ok(Err(errors)) => {
                    for error in errors {
                        tracing::warn!(%error, "file watching reported an error");
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            let now = Instant::now();
            let due: Vec<PathBuf> = self
                .pending
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(path, _)| path.clone())
                .collect();
            for path in due {
                self.pending.remove(&path);
                for event in self.look_at(&path) {
                    on_event(event);
                }
            }
        }
    }

    /// The packs loaded from the file at `path`, and that file's loaded path.
    fn loaded_from(&self, path: &Path) -> Option<(PathBuf, Vec<String>)> {
        self.manager
            .loaded_files()
            .into_iter()
            .find(|(loaded, _)| same_file(loaded, path) || same_file(path, loaded))
    }

    fn retry_later(&mut self, path: &Path, at: Instant) {
        self.pending.insert(path.to_owned(), at);
    }

    fn look_at(&mut self, path: &Path) -> Vec<ReloadEvent> {
        let Some((loaded_path, names)) = self.loaded_from(path) else {
            return Vec::new();
        };
        let Some(before) = fingerprint(&loaded_path) else {
            tracing::warn!(path = %loaded_path.display(), packs = ?names, "pack file removed; the loaded version stays active");
            return vec![ReloadEvent::Removed {
                path: loaded_path,
                names,
            }];
        };
        std::thread::sleep(self.options.settle);
        if fingerprint(&loaded_path) != Some(before) {
            let at = Instant::now() + self.options.debounce;
            self.retry_later(&loaded_path, at);
            return Vec::new();
        }
        let Some(hash) = content_hash(&loaded_path) else {
            return Vec::new();
        };
        if names
            .iter()
            .all(|n| self.manager.loaded_sha256(n).as_deref() == Some(hash.as_str()))
        {
            return Vec::new();
        }
        let state = self.files.entry(loaded_path.clone()).or_default();
        if state.failed_hash.as_deref() == Some(hash.as_str()) {
            return Vec::new();
        }
        if let Some(not_before) = state.not_before.filter(|at| *at > Instant::now()) {
            self.retry_later(&loaded_path, not_before);
            return Vec::new();
        }
        let mut events = Vec::new();
        let mut failed = None;
        for name in &names {
            match self.manager.reload(name) {
                Ok(ReloadOutcome::Reloaded(info)) => events.push(ReloadEvent::Reloaded(info)),
                Ok(ReloadOutcome::Unchanged) => {}
                Err(error) => {
                    tracing::warn!(pack = %name, %error, "reload failed; the previous version keeps running");
                    failed = Some(());
                    events.push(ReloadEvent::Failed {
                        name: name.clone(),
                        path: loaded_path.clone(),
                        error: Arc::new(error),
                    });
                }
            }
        }
        let state = self.files.entry(loaded_path).or_default();
        if failed.is_none() {
            *state = FileState::default();
        } else {
            state.failures += 1;
            state.failed_hash = Some(hash);
            let doublings = state.failures.saturating_sub(1).min(16);
            let wait = (self.options.backoff * 2u32.pow(doublings)).min(self.options.max_backoff);
            state.not_before = (state.failures > 1).then(|| Instant::now() + wait);
        }
        events
    }
}
