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
//! (default 1.5) input tokens, and its `max_tokens` option as output.
//! A bucket at 80 % or more of a limit gets one notice per session,
//! `Warning: <dimension> budget at <pct>%`.
//!
//! Reasons: `<dimension> budget exceeded (input <n>/<max> tokens)`,
//! `… (output <n>/<max> tokens)`, `… (<n>/<max> tokens)`,
//! `… ($<x> / $<max>)` (four decimals). The legacy top-level `max_tokens`
//! is a session total-token block ceiling whose notice is `message`
//! (default `Token budget exhausted for this session.`).
//!
//! Behind a gateway (`chimera serve`: the host relays a client's
//! requests, so several of one conversation may run at once), and with
//! any host whose gate state is shared (`--state-redis`), the spending is
//! counted in the host's store, by reservation: each call adds its
//! estimate to the conversation's counters before it goes (one atomic
//! add a counter), and the limits judge the totals — spent, held by the
//! calls under way, and this call's estimate —, so concurrent calls of a
//! conversation see each other, in process and across replicas alike. A
//! blocked call gives its estimate back at once. When the call ends its
//! reservation is settled (on `model_response`, as an observer: behind a
//! gateway, once per upstream call, however its exchange ended): to what
//! the provider reported — a client that leaves before the reply is done
//! is charged what the reply reports, since the gateway reads it to its
//! end —, given back when nothing was billed (blocked after this gate,
//! the upstream refused or unreachable), and kept when what was billed is
//! not known (a reply that broke off, or a stream that reports no usage:
//! then the estimate is the charge). Nexus's reservations without a
//! request id were never released; these are keyed by the host's call id.
//! A store that is down follows the host's policy for this pack: refused
//! (the call is blocked with the store's line) or counted in the process
//! alone until it answers. A session the host runs itself, one call at a
//! time (`chimera run`), is judged on the host's own figures instead.
//!
//! Nexus's `warning_threshold` key was never read; here it is an unknown
//! key and refused, like any other.

mod budget;
mod config;
mod shared;
mod spent;

pub use budget::TokenBudget;
pub use config::{Action, Ceiling, Config, Dimension, Window};

chimera_plugin_api::export_packs!(TokenBudget);
