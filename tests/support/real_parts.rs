//! What a test does when a real part it drives cannot be had here: a
//! `redis-server` ([`redis`](super::redis)), the official Python SDKs and
//! the servers installed beside them ([`python`](super::python)), the
//! reference MCP servers from npm ([`mcp`](super::mcp)).
//!
//! By default the test says so in one line on stderr and skips, so a
//! local `cargo test` passes on a machine without them. With
//! `CHIMERA_REQUIRE_REAL_PARTS` set (to anything but empty or `0`), the
//! test fails instead, with that one line as its panic: `.ci/run` installs
//! every part and sets it, so CI never passes by skipping what it claims
//! to test.

/// The variable that turns a missing real part from a skip into a failure.
pub const REQUIRE: &str = "CHIMERA_REQUIRE_REAL_PARTS";

/// Whether [`REQUIRE`] is set (to anything but empty or `0`).
pub fn required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|value| !value.is_empty() && value != "0")
}

/// A real part is missing; `what` says which and why, in one line. With
/// [`REQUIRE`] set this panics with that line; otherwise, when `tell`, it
/// says on stderr that the test skips (a caller that has said it once
/// passes `false` after), and the caller skips.
///
/// # Panics
///
/// When [`REQUIRE`] is set.
#[track_caller]
pub fn missing(what: &str, tell: bool) {
    assert!(!required(), "{REQUIRE} is set and {what}");
    if tell {
        eprintln!("skipping: {what} ({REQUIRE} unset)");
    }
}
