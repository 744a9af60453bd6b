//! What a host interceptor returns: the very vocabulary packs use
//! (`chimera_plugin_api::sdk`), so a policy reads the same on either side of
//! the boundary.
//!
//! | variant | the value | later interceptors | event |
//! |---|---|---|---|
//! | `Allow` | unchanged (the very same value) | run | none |
//! | `Replace(v)` | becomes `v` | run, and see `v` | `replaced` |
//! | `Block(reason)` | — | never run | `blocked` |
//! | `Err(InterceptError)` | the seam's failure policy | fail-open: run; `tool_call`: never | `error` |
//!
//! What a block *means* is the seam's: a denied tool call, a withheld tool
//! result, or a run that ends before the provider is called. An empty block
//! reason reads `blocked by interceptor`.

pub use chimera_plugin_api::sdk::{Decision as InterceptDecision, InterceptError, InterceptResult};
