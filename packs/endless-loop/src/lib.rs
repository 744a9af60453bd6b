//! # endless-loop
//!
//! Caps the model requests of one user turn, on `provider_request`. A
//! request's number is counted from the host's facts: the provider calls
//! already made this turn, less those the host made for itself, plus one;
//! a new user turn starts again from one. The host's own calls — a gate
//! retry (the host asking the model again for an `output` gate) and a
//! compaction summary — are never counted nor blocked, and a request the
//! host builds again (after a pause, or after a compaction) keeps its
//! number. Nexus skipped every request tagged with a source, which its own
//! agent did for its main requests, so its cap never bit.
//!
//! * request `n` with `n > max_iterations`: blocked with
//!   `Maximum iterations reached (<max>)` and the notice
//!   `I've reached the maximum number of iterations (<max>). Stopping to prevent an endless loop.`
//!   — exactly `max_iterations` requests pass per turn;
//! * request `n == warning_at`: the notice
//!   `Warning: <n> iterations used, <max - n> remaining before limit.`,
//!   once per turn.
//!
//! With a host whose gate state is shared (`chimera serve --state-redis`),
//! the count is kept there instead, so a client's turn may span requests
//! and replicas: the turn is named by the number of user messages in the
//! request, and each agent request of it adds one to the conversation's
//! counter for that turn (a request offered again after a pause keeps its
//! number). Behind a gateway that caps a client's own agent loop — its
//! requests with tool results since its last user message — on every
//! replica at once. A store that is down follows the host's policy for
//! this pack: the request is refused with the store's line, or counted in
//! the process alone.
//!
//! Configuration (JSON, every key optional): `max_iterations` (≥ 1,
//! default 25), `warning_at` (an absolute request number, 1 to
//! `max_iterations`; 0 or absent: no warning). Anything else refuses the
//! load with one line.

mod gate;
mod shared;

pub use gate::{request_number, Config, EndlessLoop, Verdict};

chimera_plugin_api::export_packs!(EndlessLoop);
