//! The store as gates use it: a failure becomes the gate's policy, an
//! outage is said once, and the operations are counted.

use super::{MemoryStore, StateError, StateStore, Take};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a fail-closed operation says when the store is down: no address,
/// no error of the store's (a pack may pass it on to a client; the
/// operator's log names the store and why).
const UNAVAILABLE: &str = "the shared state store is unavailable";

/// What a gate does when the store fails: `fail_closed` or `fail_open`
/// (in `chimera.toml` and on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
pub enum FailPolicy {
    /// Refuse: the operation fails and the gate blocks with the reason.
    #[default]
    #[serde(rename = "fail_closed")]
    Closed,
    /// Allow: the operation is counted in process instead.
    #[serde(rename = "fail_open")]
    Open,
}

impl FailPolicy {
    /// Its name: `fail_closed` or `fail_open`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FailPolicy::Closed => "fail_closed",
            FailPolicy::Open => "fail_open",
        }
    }
}

impl std::str::FromStr for FailPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "fail_closed" => Ok(FailPolicy::Closed),
            "fail_open" => Ok(FailPolicy::Open),
            other => Err(format!(
                "unknown failure policy `{}` (expected fail_closed or fail_open)",
                crate::types::one_line(other)
            )),
        }
    }
}

/// A counter's total, and whether the shared store counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<T> {
    /// The answer.
    pub value: T,
    /// `false` when the store was down and the process counted it alone.
    pub shared: bool,
}

/// The store's health, as the metrics show it.
#[derive(Debug, Default)]
pub struct Health {
    /// Operations asked of the store.
    pub operations: AtomicU64,
    /// Operations the store failed.
    pub failures: AtomicU64,
    /// Failed operations counted in process instead (`FailPolicy::Open`).
    pub fallbacks: AtomicU64,
    /// Outages begun (each said in one warning).
    pub outages: AtomicU64,
    /// Adds sent to a shared store without waiting for their answer
    /// (operations no caller waited a round trip for).
    pub unawaited: AtomicU64,
    down: AtomicBool,
}

impl Health {
    /// Whether the last operation failed.
    #[must_use]
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }
}

/// A store, a process-local fallback, and the health of the two.
#[derive(Clone)]
pub struct StateService {
    store: Arc<dyn StateStore>,
    local: Arc<MemoryStore>,
    health: Arc<Health>,
    warn: Arc<dyn Fn(&str) + Send + Sync>,
}

impl StateService {
    /// Gate state in `store`; an outage's first and last lines go to `warn`.
    pub fn new(store: Arc<dyn StateStore>, warn: impl Fn(&str) + Send + Sync + 'static) -> Self {
        StateService {
            store,
            local: Arc::new(MemoryStore::new()),
            health: Arc::new(Health::default()),
            warn: Arc::new(warn),
        }
    }

    /// Gate state in this process only (today's behaviour).
    #[must_use]
    pub fn in_process() -> Self {
        Self::new(Arc::new(MemoryStore::new()), |_| {})
    }

    /// The store's counters.
    #[must_use]
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// One line naming the store.
    #[must_use]
    pub fn describe(&self) -> String {
        self.store.describe()
    }

    /// Whether other processes count into the same store.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.store.is_shared()
    }

    /// `operation` on the store; on a failure, `policy` decides: the error,
    /// or `operation` on the process-local store.
    fn run<T>(
        &self,
        policy: FailPolicy,
        operation: impl Fn(&dyn StateStore) -> Result<T, StateError>,
    ) -> Result<Counted<T>, StateError> {
        self.health.operations.fetch_add(1, Ordering::Relaxed);
        match operation(self.store.as_ref()) {
            Ok(value) => {
                if self.health.down.swap(false, Ordering::Relaxed) {
                    (self.warn)(&format!(
                        "the state store {} answers again; gates count there",
                        self.store.describe()
                    ));
                }
                Ok(Counted {
                    value,
                    shared: true,
                })
            }
            Err(StateError::Unavailable(why)) => {
                self.health.failures.fetch_add(1, Ordering::Relaxed);
                if !self.health.down.swap(true, Ordering::Relaxed) {
                    self.health.outages.fetch_add(1, Ordering::Relaxed);
                    (self.warn)(&format!(
                        "the state store is unavailable ({why}): fail_closed gates refuse, \
                         fail_open gates count in this process until it answers"
                    ));
                }
                match policy {
                    // The operator's line above names the store; what a
                    // pack may pass on to a client does not.
                    FailPolicy::Closed => Err(StateError::Unavailable(UNAVAILABLE.to_owned())),
                    FailPolicy::Open => {
                        self.health.fallbacks.fetch_add(1, Ordering::Relaxed);
                        operation(self.local.as_ref()).map(|value| Counted {
                            value,
                            shared: false,
                        })
                    }
                }
            }
            Err(other) => Err(other),
        }
    }

    /// [`StateStore::incr_by`] under `policy`.
    ///
    /// # Errors
    ///
    /// The store's error under `FailPolicy::Closed`; an invalid argument.
    pub fn incr_by(
        &self,
        policy: FailPolicy,
        key: &str,
        n: i64,
        window: Duration,
    ) -> Result<Counted<i64>, StateError> {
        self.run(policy, |store| store.incr_by(key, n, window))
    }

    /// [`StateStore::add`] under `policy`.
    ///
    /// # Errors
    ///
    /// The store's error under `FailPolicy::Closed`; an invalid argument.
    pub fn add(
        &self,
        policy: FailPolicy,
        key: &str,
        n: i64,
        window: Duration,
    ) -> Result<Counted<()>, StateError> {
        let added = self.run(policy, |store| store.add(key, n, window));
        if added.as_ref().is_ok_and(|counted| counted.shared) && self.store.is_shared() {
            self.health.unawaited.fetch_add(1, Ordering::Relaxed);
        }
        added
    }

    /// [`StateStore::get`] under `policy`.
    ///
    /// # Errors
    ///
    /// The store's error under `FailPolicy::Closed`.
    pub fn get(
        &self,
        policy: FailPolicy,
        key: &str,
        window: Duration,
    ) -> Result<Counted<i64>, StateError> {
        self.run(policy, |store| store.get(key, window))
    }

    /// [`StateStore::take`] under `policy`.
    ///
    /// # Errors
    ///
    /// The store's error under `FailPolicy::Closed`; a rate not above 0.
    pub fn take(
        &self,
        policy: FailPolicy,
        key: &str,
        n: u64,
        rate: f64,
        burst: u64,
    ) -> Result<Counted<Take>, StateError> {
        self.run(policy, |store| store.take(key, n, rate, burst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A store that is down while `down` is set.
    struct Flaky {
        down: AtomicBool,
        inner: MemoryStore,
    }

    impl StateStore for Flaky {
        fn incr_by(&self, key: &str, n: i64, window: Duration) -> Result<i64, StateError> {
            if self.down.load(Ordering::Relaxed) {
                return Err(StateError::Unavailable("flaky: down".into()));
            }
            self.inner.incr_by(key, n, window)
        }
        fn get(&self, key: &str, window: Duration) -> Result<i64, StateError> {
            self.inner.get(key, window)
        }
        fn take(&self, key: &str, n: u64, rate: f64, burst: u64) -> Result<Take, StateError> {
            self.inner.take(key, n, rate, burst)
        }
        fn describe(&self) -> String {
            "flaky".into()
        }
    }

    #[test]
    fn an_outage_follows_each_policy_and_is_said_once_each_way() {
        let store = Arc::new(Flaky {
            down: AtomicBool::new(false),
            inner: MemoryStore::new(),
        });
        let said = Arc::new(Mutex::new(Vec::<String>::new()));
        let lines = Arc::clone(&said);
        let service = StateService::new(Arc::clone(&store) as Arc<dyn StateStore>, move |l| {
            lines.lock().unwrap().push(l.to_owned());
        });
        let w = Duration::ZERO;
        assert!(
            service
                .incr_by(FailPolicy::Closed, "k", 1, w)
                .unwrap()
                .shared
        );
        store.down.store(true, Ordering::Relaxed);
        for _ in 0..5 {
            assert!(service.incr_by(FailPolicy::Closed, "k", 1, w).is_err());
            let open = service.incr_by(FailPolicy::Open, "k", 1, w).unwrap();
            assert!(!open.shared);
        }
        store.down.store(false, Ordering::Relaxed);
        assert_eq!(
            service
                .incr_by(FailPolicy::Closed, "k", 1, w)
                .unwrap()
                .value,
            2
        );
        let said = said.lock().unwrap();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("unavailable"), "{}", said[0]);
        assert!(said[1].contains("answers again"), "{}", said[1]);
        let health = service.health();
        assert_eq!(health.failures.load(Ordering::Relaxed), 10);
        assert_eq!(health.fallbacks.load(Ordering::Relaxed), 5);
        assert_eq!(health.outages.load(Ordering::Relaxed), 1);
    }
}
