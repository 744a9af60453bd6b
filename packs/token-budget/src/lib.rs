//! # token-budget
//!
//! Caps what a session spends — tokens and dollars — before each provider
//! call (`provider_request`), from what the host reports in the session
//! facts: the provider-reported tokens per call source and their price.
//!
//! A *ceiling* names a dimension, a window, an action and at least one
//! limit:
//!
//! * `dimension`: `session` (everything the session spent; the default) or
//!   `source_plugin` (what one call source spent — `agent`, `gate_retry` or
//!   `compaction`, chosen by `match` — checked only on calls from that
//!   source). Nexus's `tenant` dimension has no counterpart here and is
//!   refused at load.
//! * `window`: `session` (the default) or `day` (what was spent since UTC
//!   midnight; `max_usd_per_day` implies it).
//! * limits: `max_input_tokens`, `max_output_tokens`, `max_total_tokens`,
//!   `max_usd`, `max_usd_per_session`, `max_usd_per_day`. A limit is
//!   inclusive: reaching it counts as exceeded.
//! * `on_exceed`: `block` (the default, or the top-level `on_exceed`),
//!   `warn` (a notice, the call goes) or `downgrade-model` (the call goes
//!   to the cheapest of `downgrade_candidates` other than its model, by the
//!   host's price table overlaid with `pricing`; the host emits
//!   `model_changed`; with no candidate the call is left alone).
//! * `message`: the notice of a block (default: the reason).
//!
//! The check compares the *projected* totals: what was spent, plus this
//! call's estimate — its message characters / 4 × `estimate_factor`
//! (default 1.5) input tokens, and its `max_tokens` option as output. The
//! totals are the host's own figures, so nothing is reserved and nothing
//! leaks (Nexus's reservations without a request id were never released).
//! A bucket at 80 % or more of a limit gets one notice per session,
//! `Warning: <dimension> budget at <pct>%`.
//!
//! Reasons: `<dimension> budget exceeded (input <n>/<max> tokens)`,
//! `… (output <n>/<max> tokens)`, `… (<n>/<max> tokens)`,
//! `… ($<x> / $<max>)` (four decimals). The legacy top-level `max_tokens`
//! is a session total-token block ceiling whose notice is `message`
//! (default `Token budget exhausted for this session.`).
//!
//! With a host whose gate state is shared (`chimera serve --state-redis`),
//! the spending is counted there instead: each reply adds its call's
//! charge (on `model_response`) to the conversation's counters, and each
//! call reads them, so every replica of a gateway enforces one budget per
//! conversation. A store that is down follows the host's policy for this
//! pack: refused (the call is blocked with the store's line) or counted
//! in the process alone until it answers.
//!
//! Nexus's `warning_threshold` key was never read; here it is an unknown
//! key and refused, like any other.

mod budget;
mod config;
mod shared;

pub use budget::TokenBudget;
pub use config::{Action, Ceiling, Config, Dimension, Window};

chimera_plugin_api::export_packs!(TokenBudget);
