//! # rate-limiter
//!
//! Keeps provider calls within `requests_per_minute` per sliding window of
//! `window_seconds` by *pausing* the turn, not failing it.
//!
//! * `provider_request` (a gate that answers retry-after): a request that
//!   fits the window is admitted and counted. A request that finds it full
//!   is given the earliest slot that keeps the limit, and the gate answers
//!   "retry after" the wait until that slot: the host pauses the turn
//!   (`turn_paused`; it caps one pause and the pauses per call), then
//!   rebuilds the request and offers it again. The re-offered request takes
//!   the slot reserved for it — it is not counted a second time — so every
//!   paused request is admitted when its slot comes, and the window never
//!   holds more than the limit. (Nexus counted the resumed request on top of
//!   its own reservation, so a conversation on its own could never get
//!   through again: a livelock for any limit that was ever reached.)
//!
//! Texts. A pause's reason is `Rate limited: retry in <s>s` (queue mode:
//! `Rate limited (queued): retry in ~<s>s`) and its notice is
//! `pause_message` with `{seconds}` replaced by `<s>`, the wait in whole
//! seconds plus one. In queue mode a request that finds `queue.max_pending`
//! requests already waiting is blocked: reason
//! `Rate limited: queue full (max_pending=<n>)`, notice
//! `Rate limit queue full (<n> pending). Request rejected.`
//!
//! Modes. `reject` (the default) gives every refused request its slot.
//! `queue` bounds how many wait at once (`queue.max_pending`) and drains
//! them one per `window_seconds / requests_per_minute`.
//!
//! Scope. With `scope = "global"` (the default) state is per process: one
//! window shared by every conversation of the process, since a rate limit
//! protects the provider they all call. With `scope = "key"` each client
//! has a window of its own — behind `chimera serve`, each client key
//! (requests that present none share one); elsewhere, each session — and
//! a full window reserves one slot per client at a time, so one client
//! past its limit never delays another. Behind `chimera serve` a pause is
//! not waited out while the client waits: the gateway answers 429 with
//! `retry-after` (or, configured so, holds the request for a bounded
//! while without a concurrency slot).
//!
//! With `scope = "global"`, reservations are keyed by conversation (the
//! session id): the next request of the conversation a slot was reserved
//! for takes it. A reservation whose conversation does not come back
//! before the slot leaves the window lapses; a conversation that comes
//! back too early (a pause the host cut short) is paused again until the
//! same slot. Every provider call counts, the host's gate retries
//! included. A hot swap hands the windows, reservations included, to the
//! new build.
//!
//! With a host whose gate state is shared (`chimera serve --state-redis`),
//! every replica counts in that store instead, with the same limit: at
//! most `requests_per_minute` requests in any `window_seconds`-long span,
//! whichever replicas they reach. The store keeps `requests_per_minute`
//! slots, each admitting one request per window; a request draws a ticket
//! (one atomic increment) that names its slot, and takes the slot's token
//! (one atomic take): two round trips a request. A request whose slot is
//! taken is paused until the slot is free again, and keeps its ticket
//! when it is offered again (queue mode: refused as a full queue when that
//! is more than `queue.max_pending` drains away). A store that is down
//! follows the host's policy for this pack: the request is refused with
//! the store's line, or counted in the process alone.
//!
//! Configuration (JSON, every key optional): `mode` (`reject` | `queue`,
//! default `reject`), `scope` (`global` | `key`, default `global`),
//! `requests_per_minute` (per window, ≥ 1, default 60),
//! `window_seconds` (> 0, fractions allowed, default 60), `pause_message`
//! (default `Rate limit reached. Pausing for {seconds}s...`) and
//! `queue: {"max_pending": n}` (≥ 1, default 100). Anything else, or a value
//! out of range, refuses the load with one line.
//!
//! ```
//! use chimera_plugin_api::prelude::Pack;
//! use rate_limiter::{Answer, RateLimiter};
//!
//! let config = serde_json::from_str(r#"{"requests_per_minute": 1, "window_seconds": 30.5}"#)?;
//! let gate = RateLimiter::new(config).map_err(|e| e.to_string())?;
//! assert_eq!(gate.judge("conversation-1"), Answer::Admit);
//! let Answer::Pause { reason, notice, .. } = gate.judge("conversation-1") else {
//!     unreachable!("the window holds one request")
//! };
//! // A wait of just under 30.5 s: whole seconds plus one.
//! assert_eq!(reason, "Rate limited: retry in 31s");
//! assert_eq!(notice, "Rate limit reached. Pausing for 31s...");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod limiter;
mod shared;
mod window;

pub use config::{Config, Mode, Queue, Scope};
pub use limiter::{bucket, Answer, Clock, RateLimiter, SystemClock};
pub use window::{Handover, Verdict, Window};

chimera_plugin_api::export_packs!(RateLimiter);
