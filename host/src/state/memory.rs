//! The in-process store: today's behaviour and speed, one process's view.

use super::{check_rate, window_ms, StateError, StateStore, Take, IDLE_TTL};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A counter or a bucket, with when it lapses.
enum Entry {
    Counter {
        window: u64,
        index: u64,
        total: i64,
        lapses: Instant,
    },
    Bucket {
        tokens: f64,
        at: Instant,
        lapses: Instant,
    },
}

/// Counters and buckets in this process's memory.
pub struct MemoryStore {
    started: Instant,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            started: Instant::now(),
            entries: Mutex::new(HashMap::new()),
        }
    }
}

/// Past this many entries, the lapsed ones are swept on the next write.
const SWEEP_AT: usize = 100_000;

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of the current window of `window` ms (0: no window).
    fn index(&self, now: Instant, window: u64) -> u64 {
        if window == 0 {
            return 0;
        }
        u64::try_from(now.duration_since(self.started).as_millis()).unwrap_or(u64::MAX) / window
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() > SWEEP_AT {
            let now = Instant::now();
            entries.retain(|_, entry| match entry {
                Entry::Counter { lapses, .. } | Entry::Bucket { lapses, .. } => *lapses > now,
            });
        }
        entries
    }
}

/// How long a counter of `window` ms lives after its last write.
fn lifetime(window: u64) -> Duration {
    if window == 0 {
        IDLE_TTL
    } else {
        Duration::from_millis(window.saturating_mul(2))
    }
}

impl StateStore for MemoryStore {
    fn incr_by(&self, key: &str, n: i64, window: Duration) -> Result<i64, StateError> {
        let now = Instant::now();
        let window = window_ms(window);
        let index = self.index(now, window);
        let mut entries = self.entries();
        let entry = entries.entry(key.to_owned()).or_insert(Entry::Counter {
            window,
            index,
            total: 0,
            lapses: now,
        });
        let fresh = Entry::Counter {
            window,
            index,
            total: 0,
            lapses: now,
        };
        match entry {
            Entry::Counter {
                window: w,
                index: i,
                lapses,
                ..
            } if *w != window || *i != index || *lapses < now => *entry = fresh,
            Entry::Bucket { .. } => *entry = fresh,
            Entry::Counter { .. } => {}
        }
        let Entry::Counter { total, lapses, .. } = entry else {
            unreachable!("made a counter above")
        };
        *total = total.saturating_add(n);
        *lapses = now + lifetime(window);
        Ok(*total)
    }

    fn get(&self, key: &str, window: Duration) -> Result<i64, StateError> {
        let now = Instant::now();
        let window = window_ms(window);
        let index = self.index(now, window);
        let entries = self.entries();
        Ok(match entries.get(key) {
            Some(Entry::Counter {
                window: w,
                index: i,
                total,
                lapses,
            }) if *w == window && *i == index && *lapses >= now => *total,
            _ => 0,
        })
    }

    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "token counts are far below 2^52 and never negative (refills are capped at the burst)"
    )]
    fn take(&self, key: &str, n: u64, rate: f64, burst: u64) -> Result<Take, StateError> {
        check_rate(rate)?;
        let now = Instant::now();
        let burst_f = burst as f64;
        let mut entries = self.entries();
        let entry = entries.entry(key.to_owned()).or_insert(Entry::Bucket {
            tokens: burst_f,
            at: now,
            lapses: now + IDLE_TTL,
        });
        if !matches!(entry, Entry::Bucket { .. }) {
            *entry = Entry::Bucket {
                tokens: burst_f,
                at: now,
                lapses: now,
            };
        }
        let Entry::Bucket { tokens, at, lapses } = entry else {
            unreachable!("made a bucket above")
        };
        let refilled = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(burst_f);
        let wanted = n as f64;
        let take = if refilled >= wanted {
            *tokens = refilled - wanted;
            Take {
                allowed: true,
                wait: Duration::ZERO,
                remaining: tokens.floor() as u64,
            }
        } else {
            *tokens = refilled;
            Take {
                allowed: false,
                wait: Duration::from_secs_f64((wanted - refilled) / rate),
                remaining: refilled.floor() as u64,
            }
        };
        *at = now;
        *lapses = now + IDLE_TTL;
        Ok(take)
    }

    fn describe(&self) -> String {
        "in process".to_owned()
    }

    fn is_shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_adds_up_within_its_window_and_starts_again_in_the_next() {
        let store = MemoryStore::new();
        let window = Duration::from_millis(200);
        assert_eq!(store.incr_by("k", 2, window).unwrap(), 2);
        assert_eq!(store.incr_by("k", 3, window).unwrap(), 5);
        assert_eq!(store.get("k", window).unwrap(), 5);
        assert_eq!(store.get("other", window).unwrap(), 0);
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(store.get("k", window).unwrap(), 0);
        assert_eq!(store.incr_by("k", 1, window).unwrap(), 1);
        assert_eq!(store.incr_by("forever", 7, Duration::ZERO).unwrap(), 7);
        assert_eq!(store.get("forever", Duration::ZERO).unwrap(), 7);
    }

    #[test]
    fn a_bucket_gives_its_burst_then_says_how_long_to_wait() {
        let store = MemoryStore::new();
        for left in (0..3).rev() {
            let take = store.take("b", 1, 2.0, 3).unwrap();
            assert!(take.allowed);
            assert_eq!(take.remaining, left);
        }
        let refused = store.take("b", 1, 2.0, 3).unwrap();
        assert!(!refused.allowed);
        assert!(
            refused.wait <= Duration::from_millis(500),
            "{:?}",
            refused.wait
        );
        assert!(
            refused.wait > Duration::from_millis(400),
            "{:?}",
            refused.wait
        );
        assert!(store.take("b", 1, 0.0, 3).is_err());
    }
}
