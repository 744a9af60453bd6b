//! The count when the host's gate state is shared (the replicas of a
//! gateway): a client's turn may span requests — its agent sends the tool
//! results back, request after request — and any replica may serve each.
//!
//! A turn is named by the number of user messages in the request (a new
//! user message starts the next one), and each agent request of it adds
//! one to the conversation's counter `turn:<users>:requests` in the
//! store: the total is the request's number in its turn, whichever
//! replica counted the others. A request the host offers again (after a
//! pause, or a compaction) keeps its call id, and with it the number it
//! was given: it is not counted twice.

use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::{Scope, State, StateError, Window};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Numbers remembered (one per call being prepared) before the memory is
/// cleared.
const REMEMBERED: usize = 4096;

/// The numbers given to the calls being prepared, by (conversation, call).
#[derive(Debug, Default)]
pub(crate) struct Numbered(Mutex<HashMap<(String, u64), u64>>);

impl Numbered {
    /// The number of `request` (of `session`) in its turn, counted in the
    /// shared store.
    pub(crate) fn number(
        &self,
        state: &State,
        session: Session<'_>,
        request: RequestRef<'_>,
    ) -> Result<u64, StateError> {
        let call = session
            .call_id()
            .map(|call| (session.id().to_owned(), call));
        if let Some(n) = call
            .as_ref()
            .and_then(|call| self.lock().get(call).copied())
        {
            return Ok(n);
        }
        let users = request
            .messages()
            .iter()
            .filter(|message| message.role() == "user")
            .count();
        let total = state.incr_by(
            Scope::conversation(&session),
            &format!("turn:{users}:requests"),
            1,
            Window::None,
        )?;
        let n = u64::try_from(total).unwrap_or(0);
        if let Some(call) = call {
            let mut numbered = self.lock();
            if numbered.len() >= REMEMBERED {
                numbered.clear();
            }
            numbered.insert(call, n);
        }
        Ok(n)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), u64>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
