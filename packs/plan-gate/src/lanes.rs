//! Per-conversation gate state, bounded.

use std::collections::HashMap;
use std::sync::Mutex;

/// How many conversations are remembered.
pub(crate) const CAPACITY: usize = 256;

#[derive(Default)]
struct Table {
    /// session id → (planned, last write)
    lanes: HashMap<String, (bool, u64)>,
    clock: u64,
}

/// Whether each conversation has planned in its current turn. A
/// conversation with no entry is armed (not planned).
#[derive(Default)]
pub(crate) struct Lanes {
    table: Mutex<Table>,
}

impl Lanes {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_planned(&self, session: &str) -> bool {
        self.table()
            .lanes
            .get(session)
            .is_some_and(|(planned, _)| *planned)
    }

    /// Records `planned` for `session`, evicting the least recently written
    /// conversation when the table is full.
    pub(crate) fn set(&self, session: &str, planned: bool) {
        let mut table = self.table();
        table.clock += 1;
        let stamp = table.clock;
        if let Some(entry) = table.lanes.get_mut(session) {
            *entry = (planned, stamp);
            return;
        }
        if table.lanes.len() >= CAPACITY {
            let oldest = table
                .lanes
                .iter()
                .min_by_key(|(_, (_, stamp))| *stamp)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                table.lanes.remove(&oldest);
            }
        }
        table.lanes.insert(session.to_owned(), (planned, stamp));
    }

    /// The planned conversations (for hot-swap handover).
    pub(crate) fn planned(&self) -> Vec<String> {
        let mut planned: Vec<String> = self
            .table()
            .lanes
            .iter()
            .filter(|(_, (planned, _))| *planned)
            .map(|(id, _)| id.clone())
            .collect();
        planned.sort();
        planned
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table().lanes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_conversations_are_armed_and_conversations_are_independent() {
        let lanes = Lanes::default();
        assert!(!lanes.is_planned("a"));
        lanes.set("a", true);
        assert!(lanes.is_planned("a"));
        assert!(!lanes.is_planned("b"));
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_least_recently_written() {
        let lanes = Lanes::default();
        for i in 0..CAPACITY {
            lanes.set(&format!("s{i}"), true);
        }
        lanes.set("s0", true); // s0 is now the most recent; s1 the oldest
        lanes.set("new", true);
        assert_eq!(lanes.len(), CAPACITY);
        assert!(lanes.is_planned("s0"));
        assert!(!lanes.is_planned("s1"), "evicted, so armed again");
        assert!(lanes.is_planned("new"));
    }
}
