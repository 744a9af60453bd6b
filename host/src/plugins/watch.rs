//! Hot swap: watching pack files and reloading them into the live process.
//!
//! ```text
//!  notify, raw events ─▶ worker thread, per pack file:
//!    closed by its writer (inotify IN_CLOSE_WRITE) or renamed into place?
//!      ─▶ look at it now
//!      (closed, renamed or looked at less than `debounce` ago: a burst of
//!       rewrites ─▶ wait for `debounce` of quiet instead)
//!    written, truncated, created, removed, attributes changed, no close yet?
//!      ─▶ wait for `debounce` of quiet, each further event starting it again
//!  looking at it:
//!    gone?           ─▶ log it; the loaded version stays active
//!    size or mtime moved while it was read (or, after a quiet wait, during
//!    a `settle` pause before)? ─▶ wait for quiet again
//!    same content as loaded, or as the last failed attempt? ─▶ nothing
//!    backing off after failures? ─▶ retry when the back-off ends
//!    PluginManager::reload(name) for each pack loaded from the file
//!      ─▶ Reloaded { info }                  (same position, same config, state handed over)
//!      ─▶ Failed { name, error }             (the old chains keep running)
//! ```
//!
//! A writer that keeps the file open and writes it in chunks is looked at
//! once, on its close; a burst of complete rewrites, once it is over. Close
//! events are inotify's: other backends (kqueue, `FSEvents`, Windows) report
//! none, and kqueue and `FSEvents` report a rename without saying which side
//! it is, so there every change waits for quiet, as it always did; a Windows
//! rename into place (`To`) settles at once.
//!
//! Only private copies are ever mapped (see the loader), so a writer that
//! writes in chunks or in place cannot crash the host: the worst it can do is
//! produce a failed reload, which the next complete write corrects.

use super::errors::LoadError;
use super::file_check::sha256_hex;
use super::manager::{PluginManager, ReloadOutcome};
use super::PackInfo;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Tuning of the watcher.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after the last event on a file that was changed but not
    /// yet closed or renamed into place, before it is looked at (each further
    /// event starts it again). Also the window of a burst: a close or rename
    /// less than this after the file's last close, rename or look waits for
    /// the same quiet; one after a quiet spell is looked at at once.
    pub debounce: Duration,
    /// After a quiet wait, a file's size and mtime must hold still this long
    /// (and while it is read) before it is loaded. A closed or renamed file
    /// is not paused on: its size and mtime must only hold while it is read.
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
    notify: Option<RecommendedWatcher>,
    worker: Option<JoinHandle<()>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Dropping the notify watcher closes the channel, which ends the worker.
        drop(self.notify.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// Watches the directories of every pack `manager` loaded from a file and
/// reloads a pack when its file changes. `on_event` runs on the watcher's
/// thread.
///
/// # Errors
///
/// [`WatchError`] when the file-system watcher cannot be made, a loaded pack's
/// directory cannot be watched, or the watcher's thread cannot be started.
pub fn watch(
    manager: Arc<PluginManager>,
    options: WatchOptions,
    on_event: impl Fn(ReloadEvent) + Send + 'static,
) -> Result<Watcher, WatchError> {
    let (sender, receiver) = mpsc::channel();
    let mut notify = notify::recommended_watcher(sender).map_err(|source| WatchError {
        path: PathBuf::from("."),
        source,
    })?;
    let dirs: HashSet<PathBuf> = manager
        .loaded_files()
        .into_iter()
        .filter_map(|(path, _)| path.parent().map(Path::to_owned))
        .collect();
    for dir in &dirs {
        notify
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
        notify: Some(notify),
        worker: Some(worker),
    })
}

/// What a file event says about when to look at the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// Its writer closed it, or it was renamed into place: its content is
    /// complete. A rename carries the backend's tracker, which inotify's two
    /// reports of one rename (`To`, then `Both`) share.
    Settled { rename: Option<usize> },
    /// Its attributes changed (a `touch`, a `chmod`, `cp -p` restoring
    /// times after the close): worth a look after a quiet wait, but never a
    /// reason to postpone a look that is already due.
    Touched,
    /// Written, truncated, created, removed or renamed away: look after a
    /// quiet wait.
    Changed,
}

/// The paths `event` concerns and what it says about them (nothing for
/// opens, reads and closes after reading, the watcher's own among them).
fn signal(event: &Event) -> Option<(Signal, &[PathBuf])> {
    let paths = event.paths.as_slice();
    let settled = Signal::Settled {
        rename: event.tracker(),
    };
    Some(match event.kind {
        // The writer's close; a rename's destination, which `To` names alone.
        EventKind::Access(AccessKind::Close(AccessMode::Write))
        | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => (settled, paths),
        EventKind::Access(_) => return None,
        // `Both` names the source, then the destination: only the
        // destination settles (the source is gone).
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            (settled, paths.get(1..).unwrap_or_default())
        }
        EventKind::Modify(ModifyKind::Metadata(_)) => (Signal::Touched, paths),
        _ => (Signal::Changed, paths),
    })
}

/// Per-file bookkeeping of failures.
#[derive(Default)]
struct FileState {
    failures: u32,
    failed_hash: Option<String>,
    not_before: Option<Instant>,
}

/// A file waiting to be looked at.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When.
    due: Instant,
    /// Closed or renamed into place (no settle pause), or after a quiet wait.
    settled: bool,
}

/// The last close or rename seen on a file.
#[derive(Debug, Clone, Copy)]
struct LastSettle {
    at: Instant,
    rename: Option<usize>,
}

struct Worker {
    manager: Arc<PluginManager>,
    options: WatchOptions,
    /// Files waiting to be looked at.
    pending: HashMap<PathBuf, Pending>,
    /// Closes and renames of the last `debounce`, per file.
    settles: HashMap<PathBuf, LastSettle>,
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
            settles: HashMap::new(),
            files: HashMap::new(),
        }
    }

    fn run(mut self, receiver: Receiver<notify::Result<Event>>, on_event: impl Fn(ReloadEvent)) {
        loop {
            let wait = self
                .pending
                .values()
                .map(|p| p.due)
                .min()
                .map_or(Duration::from_secs(3600), |due| {
                    due.saturating_duration_since(Instant::now())
                });
            match receiver.recv_timeout(wait) {
                // With whatever else is queued already, so that the events
                // of one change (a write and its close, a rename's two
                // reports) are noted before the file is looked at.
                Ok(first) => {
                    for event in std::iter::once(first).chain(receiver.try_iter()) {
                        self.note(event);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            let now = Instant::now();
            let debounce = self.options.debounce;
            self.settles
                .retain(|_, last| now.saturating_duration_since(last.at) < debounce);
            let due: Vec<(PathBuf, bool)> = self
                .pending
                .iter()
                .filter(|(_, p)| p.due <= now)
                .map(|(path, p)| (path.clone(), p.settled))
                .collect();
            for (path, settled) in due {
                self.pending.remove(&path);
                for event in self.look_at(&path, settled) {
                    on_event(event);
                }
                // What was queued while it was looked at is stamped when it
                // is taken, after the look: counting the look as a settle
                // keeps a close in that queue a burst however long the look
                // took.
                let now = Instant::now();
                self.settles
                    .entry(path)
                    .and_modify(|last| last.at = now)
                    .or_insert(LastSettle {
                        at: now,
                        rename: None,
                    });
            }
        }
    }

    /// Records what one file event means for when its files are looked at.
    fn note(&mut self, event: notify::Result<Event>) {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "file watching reported an error");
                return;
            }
        };
        if event.need_rescan() {
            // The backend lost events (inotify's queue overflowed): any
            // loaded file may have changed.
            for (path, _) in self.manager.loaded_files() {
                self.note_path(&path, Signal::Changed);
            }
        }
        if let Some((signal, paths)) = signal(&event) {
            for path in paths {
                self.note_path(path, signal);
            }
        }
    }

    fn note_path(&mut self, path: &Path, signal: Signal) {
        let now = Instant::now();
        let quiet = Pending {
            due: now + self.options.debounce,
            settled: false,
        };
        let pending = match signal {
            Signal::Settled { rename } => {
                let last = self
                    .settles
                    .insert(path.to_owned(), LastSettle { at: now, rename });
                match last {
                    // The same rename, reported a second time.
                    Some(last) if rename.is_some() && last.rename == rename => return,
                    // Closed or renamed again within the debounce: a burst
                    // of rewrites, looked at once it is over.
                    Some(last)
                        if now.saturating_duration_since(last.at) < self.options.debounce =>
                    {
                        quiet
                    }
                    _ => Pending {
                        due: now,
                        settled: true,
                    },
                }
            }
            Signal::Touched
                if self
                    .pending
                    .get(path)
                    .is_some_and(|pending| pending.due <= now) =>
            {
                return;
            }
            Signal::Touched | Signal::Changed => quiet,
        };
        self.pending.insert(path.to_owned(), pending);
    }

    /// The packs loaded from the file at `path`, and that file's loaded path.
    fn loaded_from(&self, path: &Path) -> Option<(PathBuf, Vec<String>)> {
        self.manager
            .loaded_files()
            .into_iter()
            .find(|(loaded, _)| same_file(loaded, path) || same_file(path, loaded))
    }

    fn retry_later(&mut self, path: &Path, at: Instant) {
        self.pending.insert(
            path.to_owned(),
            Pending {
                due: at,
                settled: false,
            },
        );
    }

    /// Looks at the file at `path` and reloads what changed. `settled`: it
    /// was closed or renamed into place, so it is read without a pause.
    fn look_at(&mut self, path: &Path, settled: bool) -> Vec<ReloadEvent> {
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
        if !settled {
            std::thread::sleep(self.options.settle);
        }
        let hash = content_hash(&loaded_path);
        if fingerprint(&loaded_path) != Some(before) {
            let at = Instant::now() + self.options.debounce;
            self.retry_later(&loaded_path, at);
            return Vec::new();
        }
        let Some(hash) = hash else {
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
        let _together = self.manager.load_together();
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
        if failed.is_some() && fingerprint(&loaded_path) != Some(before) {
            // Rewritten during the reload: the loader may have read other
            // bytes than were hashed, so the failure is not held against
            // this content. The rewrite's events bring the next look.
            return events;
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
