//! Response chains: which conversation a Responses response id belongs
//! to, so a request continuing it (`previous_response_id`) resumes that
//! conversation's pack state and budgets.
//!
//! | the request | its conversation |
//! |---|---|
//! | names one (the session header, or a key: see [`sessions`](super::sessions)) | that one |
//! | none, but continues a response the gateway relayed | that response's |
//! | none, and continues none | a new one, `chain/<request id>` |
//!
//! A client that sends no key and no session header therefore stays in
//! one conversation for as long as it continues its own chain; starting a
//! new chain (no `previous_response_id`) starts a new conversation, as a
//! new conversation with the upstream would. Past the cap (the gateway's
//! conversation cap), the oldest ids are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Response ids and their conversations, the oldest forgotten first.
pub(super) struct Chains {
    kept: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    cap: usize,
}

impl Chains {
    /// Keeps at most `cap` response ids (at least one).
    pub(super) fn new(cap: usize) -> Self {
        Chains {
            kept: Mutex::new((HashMap::new(), VecDeque::new())),
            cap: cap.max(1),
        }
    }

    /// The conversation response `id` belongs to, when it is kept.
    pub(super) fn conversation(&self, id: &str) -> Option<String> {
        let guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        guard.0.get(id).cloned()
    }

    /// Response `id` belongs to `conversation`.
    pub(super) fn record(&self, id: String, conversation: String) {
        let mut guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, order) = &mut *guard;
        if kept.insert(id.clone(), conversation).is_none() {
            order.push_back(id);
        }
        while order.len() > self.cap {
            if let Some(oldest) = order.pop_front() {
                kept.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Chains;

    #[test]
    fn a_chain_is_remembered_until_the_cap_forgets_its_oldest_ids() {
        let chains = Chains::new(2);
        chains.record("resp_1".into(), "chain/a".into());
        chains.record("resp_2".into(), "chain/a".into());
        assert_eq!(chains.conversation("resp_1").as_deref(), Some("chain/a"));
        chains.record("resp_3".into(), "chain/b".into());
        assert_eq!(chains.conversation("resp_1"), None);
        assert_eq!(chains.conversation("resp_3").as_deref(), Some("chain/b"));
    }
}
