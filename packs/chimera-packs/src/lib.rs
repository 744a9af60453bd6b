//! # chimera-packs
//!
//! The fifteen shipped packs (the three Chimera packs and the twelve
//! gates) in one shared library, `libchimera_packs`.
//!
//! Each pack crate is also a library of its own; linked here as rlibs, each
//! brings its root module and manifest under names unique to its crate
//! (`_chimera_pack_root_<crate>`, `CHIMERA_PACK_MANIFEST_<crate>`), so the
//! host finds all fifteen in this one file, by entry-point name, exactly as
//! it finds them in fifteen. What they share is then mapped once: std,
//! `abi_stable`, serde, `serde_json` and regex, which each of the fifteen
//! files carries a copy of. Loaded from its sealed in-memory copy, the one
//! library is a quarter of the fifteen (BENCHMARKS.md, "One library for the
//! shipped packs").
//!
//! Within a directory, a pack's own file outranks this library, so a pack
//! rebuilt on its own beside it is the one loaded.

// Naming a crate is what links it in: its exported statics (root module and
// manifest) are then kept by the linker as the library's exports.
use approval_policy as _;
use content_safety as _;
use context_window as _;
use delegate_spawner as _;
use endless_loop as _;
use json_schema as _;
use output_length as _;
use plan_gate as _;
use prompt_injection as _;
use rate_limiter as _;
use redactor as _;
use stop_words as _;
use token_budget as _;
use tool_filter as _;
use tool_timeout as _;
