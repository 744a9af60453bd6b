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

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Group>> {
        self.groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let mut all = Interceptors::new();
        for group in self.read().iter() {
            all.extend(&group.chains);
        }
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
