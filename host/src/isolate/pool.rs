//! Several processes of one isolated pack, so its calls run side by side:
//! a pack host answers one call at a time, and behind a server one slow
//! or hung call would otherwise make every other request wait for it.
//!
//! A call goes to the first process (round robin from a moving start)
//! that no other call holds; when every one is busy it waits for the one
//! at the start. Each process restarts on its own after a failure, so
//! one killed for its deadline leaves the others answering. They share
//! the pack's health (one record, one quarantine).
//!
//! Each process has its own memory: a pack whose decisions depend on
//! what earlier calls left behind must keep that in the host's gate
//! state (`Session::state`), which every process shares, or run in one
//! process (the default). State handed over on a reload is the first
//! process's, given to every new one.

use super::host::{IsolatedPack, Spawner};
use super::wire::Hello;
use crate::interception::{PackHealth, RemotePack};
use chimera_plugin_api::abi::{Decision, SeamInput};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The processes of one isolated pack.
#[derive(Debug)]
pub(crate) struct IsolatedPool {
    /// At least one; the first answers for the pack (its hello, its
    /// state).
    members: Vec<Arc<IsolatedPack>>,
    /// Where the next call starts looking.
    next: AtomicUsize,
}

impl IsolatedPool {
    /// Starts `processes` (at least one) pack hosts of `spawner`'s pack,
    /// one after the other; an error is the first one's line (the others
    /// started are ended).
    pub(crate) fn start(
        spawner: Spawner,
        health: &Arc<PackHealth>,
        processes: usize,
    ) -> Result<Arc<Self>, String> {
        let spawner = Arc::new(spawner);
        let members = (0..processes.max(1))
            .map(|_| IsolatedPack::start(Arc::clone(&spawner), Arc::clone(health)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(IsolatedPool {
            members,
            next: AtomicUsize::new(0),
        }))
    }

    /// The first process.
    fn first(&self) -> &IsolatedPack {
        &self.members[0]
    }

    /// What the pack said about itself (the first process's hello; every
    /// other said the same or would not have started: the same file).
    pub(crate) fn hello(&self) -> &Hello {
        self.first().hello()
    }

    /// The first process's state, if it answers within the budget.
    pub(crate) fn export_state(&self) -> Option<String> {
        self.first().export_state()
    }

    /// Hands every process the state exported by an earlier build; the
    /// first refusal is the answer.
    pub(crate) fn import_state(&self, json: &str) -> Result<(), String> {
        self.members
            .iter()
            .try_for_each(|member| member.import_state(json))
    }
}

impl RemotePack for IsolatedPool {
    fn health(&self) -> &Arc<PackHealth> {
        self.first().health()
    }

    fn call(
        &self,
        indices: &[u32],
        input: &SeamInput<'_>,
    ) -> Result<(usize, Option<Decision>), String> {
        let count = self.members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let order = (0..count).map(|i| &self.members[(start + i) % count]);
        for member in order {
            if let Some(answer) = member.try_call(indices, input) {
                return answer;
            }
        }
        self.members[start].call(indices, input)
    }
}
