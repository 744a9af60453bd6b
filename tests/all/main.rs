//! One integration-test binary: every test here drives the real loader, the
//! real chain runner, the real loop and the real built pack libraries.

#![allow(
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::default_trait_access,
    clippy::cast_possible_truncation,
    reason = "a scenario test reads top to bottom: set-up (with the doubles it needs, \
              where it needs them), action and every check"
)]

mod abi;
mod async_sessions;
mod audit;
mod chains;
mod cli;
mod cli_papercuts;
mod clients;
mod config_file;
mod content_safety;
mod gateway;
mod harness;
mod helpers;
mod host_gates;
mod hot_swap;
mod isolation;
mod isolation_crash;
mod isolation_secrets;
mod loading;
mod mcp;
mod mcp_attacks;
mod mcp_pins;
mod mcp_remote;
mod mcp_tools;
mod merge;
mod mockllm;
mod monitor;
mod outward_seams;
mod pack_authoring;
mod packs;
mod permission_questions;
mod plugins_in_the_loop;
mod providers;
mod registry;
mod sdk_reference;
mod seams_in_the_loop;
mod state_store;
mod strategies;
mod streamed_gates;
mod text_gates;
mod tool_gates;
mod trust;
mod trust_model;
