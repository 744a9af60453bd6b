//! One framed MCP message read whole: parsed by the permissive, exact
//! parser ([`crate::jsondoc`]: lone surrogate escapes taken, nesting up to
//! [`MAX_DEPTH`], a repeated key refused), its lone surrogates written as
//! U+FFFD (so what is judged is what is forwarded), and each JSON-RPC
//! message of it (one, or a batch's members) told apart.

use crate::jsondoc::{parse, string_literal, Kind, Limits, Node, Splice, Surrogates};

/// How deep a message may nest (`[[]]` is 2 deep). A message deeper than
/// this is refused, never forwarded: servers built on `serde_json` stop at
/// 128, Python's `json` near 1 000; the guard reads what the model's own
/// arguments reasonably hold and refuses the rest.
pub const MAX_DEPTH: usize = 512;

/// A parsed frame: its bytes (lone surrogates already replaced) and its
/// tree.
pub(super) struct Parsed {
    /// The message's bytes, on one line.
    pub(super) src: Vec<u8>,
    /// Its tree over `src`.
    pub(super) root: Node,
}

impl Parsed {
    /// Parses `frame`: every lone surrogate escape is rewritten as
    /// `\ufffd` (the text the guard judges) and raw line breaks between
    /// tokens become spaces (the stdio transport is one message a line).
    ///
    /// # Errors
    ///
    /// One line saying why it is not a message the guard can read whole.
    pub(super) fn of(mut frame: Vec<u8>) -> Result<Parsed, String> {
        let limits = Limits::new()
            .with_max_depth(MAX_DEPTH)
            .with_surrogates(Surrogates::Keep);
        // A raw line break cannot be inside a JSON string: it is
        // whitespace between tokens.
        for byte in &mut frame {
            if matches!(byte, b'\n' | b'\r') {
                *byte = b' ';
            }
        }
        let root = parse(&frame, &limits).map_err(|e| format!("not JSON the guard reads: {e}"))?;
        let mut splice = Splice::new();
        lone_surrogates(&frame, &root, &mut splice);
        if splice.is_empty() {
            return Ok(Parsed { src: frame, root });
        }
        let src = splice
            .render(&frame)
            .map_err(|e| format!("cannot rewrite its surrogates: {e}"))?;
        let root = parse(&src, &limits).map_err(|e| format!("not JSON the guard reads: {e}"))?;
        Ok(Parsed { src, root })
    }

    /// The messages it holds: a batch's members, or itself.
    pub(super) fn messages(&self) -> Vec<&Node> {
        match &self.root.kind {
            Kind::Array(items) => items.iter().collect(),
            _ => vec![&self.root],
        }
    }

    /// Whether it is a batch.
    pub(super) fn is_batch(&self) -> bool {
        matches!(self.root.kind, Kind::Array(_))
    }
}

/// Each string and key of `node` whose escapes decode to U+FFFD (a lone
/// surrogate, or an escaped U+FFFD: the same text), rewritten as its text.
fn lone_surrogates(src: &[u8], node: &Node, splice: &mut Splice) {
    match &node.kind {
        Kind::String { escaped: true } => {
            if let Some(text) = node.text(src).filter(|t| t.contains('\u{fffd}')) {
                splice.replace(node.span.clone(), string_literal(&text));
            }
        }
        Kind::Array(items) => items.iter().for_each(|n| lone_surrogates(src, n, splice)),
        Kind::Object(members) => {
            for (key, value) in members {
                if key.has_escapes() && key.text(src).contains('\u{fffd}') {
                    splice.replace(key.span.clone(), string_literal(&key.text(src)));
                }
                lone_surrogates(src, value, splice);
            }
        }
        _ => {}
    }
}

/// What one JSON-RPC message is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Shape<'n> {
    /// A request (`method` and `id`): its method and id.
    Request {
        /// The method.
        method: String,
        /// The id's node.
        id: &'n Node,
    },
    /// A notification (`method`, no `id`).
    Notification {
        /// The method.
        method: String,
    },
    /// A response (`id`, and `result` or `error`, no `method`).
    Response {
        /// The id's node.
        id: &'n Node,
    },
    /// Not a JSON-RPC message: why.
    Invalid(&'static str),
}

impl<'n> Shape<'n> {
    /// What `message` (a member of `src`) is.
    pub(super) fn of(src: &[u8], message: &'n Node) -> Shape<'n> {
        if message.as_object().is_none() {
            return Shape::Invalid("a JSON-RPC message is an object");
        }
        let id = message.get(src, "id");
        match message.get(src, "method") {
            Some(method) => match (method.text(src), id) {
                (None, _) => Shape::Invalid("its method is not a string"),
                (Some(method), Some(id)) if !id.is_null() => Shape::Request {
                    method: method.into_owned(),
                    id,
                },
                (Some(method), _) => Shape::Notification {
                    method: method.into_owned(),
                },
            },
            None => match id {
                Some(id)
                    if message.get(src, "result").is_some()
                        || message.get(src, "error").is_some() =>
                {
                    Shape::Response { id }
                }
                _ => Shape::Invalid("it has neither a method nor an id with a result or error"),
            },
        }
    }
}

/// An id as a key of the calls in flight: its kind and its value as the
/// guard reads it (a number as written, a string decoded), so a server
/// answering `"5"` for the call `5` answers none.
pub(super) fn id_key(src: &[u8], id: &Node) -> String {
    match &id.kind {
        Kind::String { .. } => format!("s:{}", id.text(src).unwrap_or_default()),
        Kind::Number => format!("n:{}", id.number_text(src).unwrap_or_default()),
        _ => format!("v:{}", String::from_utf8_lossy(id.raw(src))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Parsed {
        Parsed::of(text.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn a_lone_surrogate_is_read_and_forwarded_as_the_replacement_character() {
        let message =
            parsed(r#"{"method":"tools/call","params":{"name":"ech\ud800o","\udc00":1}}"#);
        let src = String::from_utf8(message.src.clone()).unwrap();
        assert_eq!(
            src,
            "{\"method\":\"tools/call\",\"params\":{\"name\":\"ech\u{fffd}o\",\"\u{fffd}\":1}}"
        );
        // A pair is a character, left as written.
        let pair = parsed(r#"{"a":"\ud83d\ude00"}"#);
        assert_eq!(pair.src, br#"{"a":"\ud83d\ude00"}"#);
    }

    #[test]
    fn deep_nesting_is_read_up_to_the_cap_and_refused_past_it() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(Parsed::of(deep(MAX_DEPTH).into_bytes()).is_ok());
        let refused = Parsed::of(deep(MAX_DEPTH + 1).into_bytes()).err().unwrap();
        assert!(refused.starts_with("not JSON the guard reads"), "{refused}");
    }

    #[test]
    fn a_repeated_key_is_refused_and_line_breaks_become_spaces() {
        assert!(Parsed::of(br#"{"id":1,"id":2}"#.to_vec()).is_err());
        assert!(Parsed::of(br#"{"id":1,"\u0069d":2}"#.to_vec()).is_err());
        assert_eq!(parsed("{\n\"a\":\r\n1}").src, b"{ \"a\":  1}");
    }

    #[test]
    fn each_message_is_told_apart() {
        let batch = parsed(
            r#"[{"jsonrpc":"2.0","id":"7","method":"tools/call"},
                {"jsonrpc":"2.0","method":"tools/call"},
                {"jsonrpc":"2.0","id":null,"method":"x"},
                {"jsonrpc":"2.0","id":3,"result":{}},
                {"jsonrpc":"2.0","id":3},
                5]"#,
        );
        assert!(batch.is_batch());
        let shapes: Vec<String> = batch
            .messages()
            .into_iter()
            .map(|m| match Shape::of(&batch.src, m) {
                Shape::Request { method, id } => {
                    format!("request {method} {}", id_key(&batch.src, id))
                }
                Shape::Notification { method } => format!("notification {method}"),
                Shape::Response { id } => format!("response {}", id_key(&batch.src, id)),
                Shape::Invalid(_) => "invalid".to_owned(),
            })
            .collect();
        assert_eq!(
            shapes,
            [
                "request tools/call s:7",
                "notification tools/call",
                "notification x",
                "response n:3",
                "invalid",
                "invalid"
            ]
        );
    }
}
