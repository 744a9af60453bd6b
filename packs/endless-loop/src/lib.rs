//! # endless-loop
//!
//! Caps the model requests of one user turn, on `provider_request`. The
//! count is the host's: the provider calls already made this turn, plus
//! this one; a new user turn starts again from one. A gate retry (the host
//! asking the model again for an `output` gate) is never counted, and
//! neither is it blocked; every other request is (Nexus skipped every
//! request tagged with a source, which its own agent did for its main
//! requests, so the cap never bit).
//!
//! * request `n` with `n > max_iterations`: blocked with
//!   `Maximum iterations reached (<max>)` and the notice
//!   `I've reached the maximum number of iterations (<max>). Stopping to prevent an endless loop.`
//!   — exactly `max_iterations` requests pass per turn;
//! * request `n == warning_at`: the notice
//!   `Warning: <n> iterations used, <max - n> remaining before limit.`,
//!   once per turn (a request the turn re-sends after a pause is the same
//!   request, and is not warned about again).
//!
//! Configuration (JSON, every key optional): `max_iterations` (≥ 1,
//! default 25), `warning_at` (an absolute request number, 1 to
//! `max_iterations`; 0 or absent: no warning). Anything else refuses the
//! load with one line.

mod gate;

pub use gate::{Config, EndlessLoop, Verdict};

chimera_plugin_api::export_packs!(EndlessLoop);
