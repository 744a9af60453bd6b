//! The interceptor registry: where plugins put their chains.

use super::errors::RegistryError;
use crate::interception::{AnyInterceptor, Interceptors, SeamName};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Identifies what registered an interceptor, so unloading withdraws exactly
/// its chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerId(u64);

/// A run of registrations by one owner (or by nobody), kept in load order.
#[derive(Debug)]
struct Group {
    owner: Option<OwnerId>,
    chains: Interceptors,
}

/// The process's (or host's) interceptor registry.
///
/// Chains are kept in groups in registration order; an owner's group stays
/// at its place when its chains are swapped ([`Registry::replace_owner`]), so
/// a hot-swapped pack keeps its load-order position. Seam names arriving as
/// strings are validated on every operation.
#[derive(Debug, Default)]
pub struct Registry {
    groups: RwLock<Vec<Group>>,
    /// Every seam's chain as [`get_all`](Registry::get_all) builds it,
    /// built once per change of the groups ([`Registry::current`]):
    /// cleared by every writer while it holds the groups, stored only by a
    /// reader holding them, so it never outlives the groups it was built
    /// from.
    merged: RwLock<Option<Arc<Interceptors>>>,
    next_owner: AtomicU64,
}

impl Registry {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Registry::default()
    }

    /// A fresh owner id.
    pub fn new_owner(&self) -> OwnerId {
        OwnerId(self.next_owner.fetch_add(1, Ordering::Relaxed))
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<Group>> {
        self.groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The groups, to change: the merged bundle is cleared first.
    fn write(&self) -> RwLockWriteGuard<'_, Vec<Group>> {
        let groups = self
            .groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *self
            .merged
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        groups
    }

    /// Checks that `interceptor` belongs on `seam`.
    pub(crate) fn validate(
        seam: &str,
        interceptor: &AnyInterceptor,
    ) -> Result<SeamName, RegistryError> {
        let seam = SeamName::parse(seam)?;
        if interceptor.seam() != seam {
            return Err(RegistryError::SeamMismatch {
                name: interceptor.name().to_owned(),
                requested: seam.to_string(),
                actual: interceptor.seam().to_string(),
            });
        }
        Ok(seam)
    }

    /// Appends an owner-less interceptor (never withdrawn by an unload).
    /// Duplicates are allowed; registration order is preserved.
    ///
    /// # Errors
    ///
    /// `RegistryError::UnknownSeam` when `seam` is not a seam name;
    /// `RegistryError::SeamMismatch` when `interceptor` was built for another
    /// seam.
    pub fn register(
        &self,
        seam: &str,
        interceptor: impl Into<AnyInterceptor>,
    ) -> Result<(), RegistryError> {
        let interceptor = interceptor.into();
        Self::validate(seam, &interceptor)?;
        let mut groups = self.write();
        match groups.last_mut() {
            Some(group) if group.owner.is_none() => group.chains.push(interceptor),
            _ => {
                let mut chains = Interceptors::new();
                chains.push(interceptor);
                groups.push(Group {
                    owner: None,
                    chains,
                });
            }
        }
        Ok(())
    }

    /// Adds `chains` as `owner`'s, after everything registered so far, in one
    /// step: no reader ever sees part of them.
    pub(crate) fn commit(&self, owner: OwnerId, chains: Interceptors) {
        self.write().push(Group {
            owner: Some(owner),
            chains,
        });
    }

    /// Replaces `owner`'s chains in place (same load-order position), in one
    /// step. Returns false (and changes nothing) for an unknown owner.
    pub fn replace_owner(&self, owner: OwnerId, chains: Interceptors) -> bool {
        let mut groups = self.write();
        match groups.iter_mut().find(|g| g.owner == Some(owner)) {
            Some(group) => {
                group.chains = chains;
                true
            }
            None => false,
        }
    }

    /// Removes the first registration equal to `interceptor` on `seam`;
    /// absent is a silent no-op.
    ///
    /// # Errors
    ///
    /// `RegistryError::UnknownSeam` when `seam` is not a seam name.
    pub fn unregister(
        &self,
        seam: &str,
        interceptor: &AnyInterceptor,
    ) -> Result<(), RegistryError> {
        let seam = SeamName::parse(seam)?;
        if interceptor.seam() != seam {
            return Ok(());
        }
        let mut groups = self.write();
        for group in groups.iter_mut() {
            if group.chains.remove(interceptor) {
                break;
            }
        }
        groups.retain(|g| g.owner.is_some() || !g.chains.is_empty());
        Ok(())
    }

    /// Withdraws everything `owner` registered, on every seam. Returns how
    /// many interceptors were removed (0 for an unknown owner).
    pub fn unregister_owner(&self, owner: OwnerId) -> usize {
        let mut groups = self.write();
        let mut removed = 0;
        groups.retain(|g| {
            if g.owner == Some(owner) {
                removed += g.chains.len();
                false
            } else {
                true
            }
        });
        removed
    }

    /// A copy of one seam's chain, in registration order.
    ///
    /// # Errors
    ///
    /// `RegistryError::UnknownSeam` when `seam` is not a seam name.
    pub fn get(&self, seam: &str) -> Result<Vec<AnyInterceptor>, RegistryError> {
        let seam = SeamName::parse(seam)?;
        Ok(self
            .read()
            .iter()
            .flat_map(|g| g.chains.chain(seam))
            .collect())
    }

    /// A fresh, detached bundle of every seam (empty chains when nothing is registered).
    pub fn get_all(&self) -> Interceptors {
        merge(&self.read())
    }

    /// Every seam's chain as registered now, shared: built once after each
    /// change and handed out until the next, for readers that only run the
    /// chains (a relay judging each message) and need no bundle of their
    /// own.
    pub(crate) fn current(&self) -> Arc<Interceptors> {
        let cached = self
            .merged
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(merged) = cached {
            return merged;
        }
        let groups = self.read();
        let all = Arc::new(merge(&groups));
        *self
            .merged
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&all));
        drop(groups);
        all
    }

    /// The plugin bundle to merge at the start of a turn: `None` when nothing
    /// is registered, else a fresh bundle (never the same object twice).
    pub fn snapshot(&self) -> Option<Arc<Interceptors>> {
        let all = self.get_all();
        (!all.is_empty()).then(|| Arc::new(all))
    }

    /// Clears every chain and owner.
    pub fn reset(&self) {
        self.write().clear();
    }
}

/// Every group's chains, seam by seam, in load order.
fn merge(groups: &[Group]) -> Interceptors {
    let mut all = Interceptors::new();
    for group in groups {
        all.extend(&group.chains);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interception::{InterceptDecision, Interceptor};
    use crate::types::ToolCall;

    fn gate(name: &str) -> AnyInterceptor {
        Interceptor::tool_call(name.to_owned(), |_: &ToolCall| Ok(InterceptDecision::Allow)).into()
    }

    fn names(all: &Interceptors) -> Vec<String> {
        all.tool_call.iter().map(|i| i.name().to_owned()).collect()
    }

    #[test]
    fn the_current_bundle_is_shared_until_a_change_and_follows_every_change() {
        let registry = Registry::new();
        assert!(registry.current().is_empty());
        let a = gate("A");
        registry.register("tool_call", a.clone()).unwrap();
        let first = registry.current();
        assert_eq!(names(&first), ["A"]);
        assert!(Arc::ptr_eq(&first, &registry.current()), "built again");
        let owner = registry.new_owner();
        let mut chains = Interceptors::new();
        chains.push(gate("B"));
        registry.commit(owner, chains);
        assert_eq!(names(&registry.current()), ["A", "B"]);
        let mut swapped = Interceptors::new();
        swapped.push(gate("C"));
        assert!(registry.replace_owner(owner, swapped));
        assert_eq!(names(&registry.current()), ["A", "C"]);
        registry.unregister("tool_call", &a).unwrap();
        assert_eq!(names(&registry.current()), ["C"]);
        assert_eq!(registry.unregister_owner(owner), 1);
        assert!(registry.current().is_empty());
        registry.register("tool_call", gate("D")).unwrap();
        registry.reset();
        assert!(registry.current().is_empty());
        // The bundle handed out before a change is the caller's to keep.
        assert_eq!(names(&first), ["A"]);
    }
}
