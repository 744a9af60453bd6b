//! # tool-filter
//!
//! Offers the model only some of the tools: those an `include` list names,
//! or all but those an `exclude` list names.
//!
//! * `provider_request`: the request's tool schemas are filtered by name
//!   before they go on the wire. A request with no tools, or one the filter
//!   leaves whole, passes untouched (no decision, no event); otherwise the
//!   request is replaced by the same request with fewer tool schemas. The
//!   gate never blocks and shows no notice.
//!
//! Configuration (JSON, every key optional): `include` (tool-name patterns
//! to keep; when given, nothing else is offered) or `exclude` (tool-name
//! patterns to drop). Patterns are globs (`*` any run of characters, `?`
//! one character, `[abc]` a class, `{a,b}` alternatives, `\` escapes the
//! next character); a plain name matches exactly that name. Giving both
//! lists is a load error — Nexus warned and let `include` win, which
//! silently ignores half of what was asked; here the user is told at load,
//! in one line. An invalid pattern is a load error too. Neither list:
//! every tool is offered.
//!
//! Interplay with other interceptors. The envelope has no separate "tool
//! filter" field (Nexus kept one, and a request that already carried a
//! filter kept it instead of this gate's): here an earlier interceptor
//! filters by handing on a shorter tool list, and this gate filters what it
//! is given, so the tools offered are those every filter keeps. Call
//! options (`kwargs`) are never read or changed.
//!
//! What it does not do: it hides tools from the model; it does not refuse a
//! call to a hidden tool that the model makes anyway (gate calls on
//! `tool_call` for that, e.g. with the permission policy's `--deny`).
//!
//! ```
//! use chimera_plugin_api::prelude::Pack;
//! use tool_filter::ToolFilter;
//!
//! let config = serde_json::from_str(r#"{"include": ["bash", "read_*"]}"#)?;
//! let filter = ToolFilter::new(config).map_err(|e| e.to_string())?;
//! let tools = r#"[{"name": "bash"}, {"name": "read_file"}, {"name": "web_search"}]"#;
//! assert_eq!(
//!     filter.filtered(tools)?.as_deref(),
//!     Some(r#"[{"name": "bash"},{"name": "read_file"}]"#)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod filter;

pub use filter::{Config, ToolFilter};

chimera_plugin_api::export_packs!(ToolFilter);
