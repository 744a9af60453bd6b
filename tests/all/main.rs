//! One integration-test binary: every test here drives the real loader, the
//! real chain runner and the real built pack libraries.

mod abi;
mod chains;
mod helpers;
mod loading;
mod merge;
mod registry;
