//! A client's JSON document as it was written: parsed once into a tree of
//! byte spans, read through views of it, and edited by splicing
//! replacements in at exact spans, every other byte (unknown fields, key
//! order, numbers as written, whitespace) left as it came.
//!
//! What is judged must be what is forwarded, so a document the parser
//! cannot read completely is refused, never passed on: a repeated key,
//! which parsers resolve differently (`serde_json` takes the last, others
//! the first), is refused always; so is anything outside RFC 8259.
//! Whatever [`parse`] accepts with nesting below 128 and
//! [`Numbers::InRange`], `serde_json` accepts and reads the same value
//! (checked by the tests here and by the `jsondoc` fuzz target). By
//! default a number too large for a float (`1e400`, which `serde_json`
//! refuses) is accepted and kept as written: it holds no text to judge,
//! and a relay keeps it. [`Surrogates::Keep`] relaxes one more rule for
//! peers that are permissive themselves (lone surrogate escapes, kept as
//! written).
//!
//! - `parse`: [`parse`]: the one-pass parser, its arrays and objects;
//!   `scalar`: its strings, numbers and literals.
//! - `limits`: [`Limits`], [`Surrogates`], [`Numbers`]: how strict, how
//!   deep.
//! - `node`: [`Node`], [`Kind`], [`Key`]: the tree and its accessors
//!   (strings decoded on demand, borrowed when they hold no escape).
//! - `error`: [`ParseError`], [`ParseErrorKind`]: why, and at which byte.
//! - `splice`: [`Splice`], [`SpliceError`], [`string_literal`],
//!   [`array_from`], [`object_from`]: edits on the source, and the pieces
//!   to write them with.
//!
//! ```
//! use chimera_host::jsondoc::{parse, string_literal, Limits, Splice};
//!
//! let src = br#"{"messages": [{"role": "user", "content": "call 555-0100"}], "x-keep": 1.50}"#;
//! let root = parse(src, &Limits::default())?;
//! let content = root.get(src, "messages").and_then(|m| m.index(0))
//!     .and_then(|m| m.get(src, "content")).unwrap();
//! assert_eq!(content.text(src).unwrap(), "call 555-0100");
//!
//! let mut splice = Splice::new();
//! splice.replace(content.span.clone(), string_literal("call [PHONE]"));
//! let out = splice.render(src)?;
//! assert_eq!(out, br#"{"messages": [{"role": "user", "content": "call [PHONE]"}], "x-keep": 1.50}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod limits;
mod node;
mod parse;
mod scalar;
mod splice;

#[cfg(test)]
mod properties;

pub use error::{ParseError, ParseErrorKind};
pub use limits::{Limits, Numbers, Surrogates};
pub use node::{utf8, Key, Kind, Node};
pub use parse::{parse, parse_str};
pub use splice::{array_from, object_from, string_literal, Splice, SpliceError};
