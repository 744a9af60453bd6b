//! What a model reads of an MCP message: its texts in order, each knowing
//! where it lives in the message, joined into the one text the seams
//! judge. `chimera run`'s MCP tools record a result as this text, and
//! `chimera mcp guard` judges the same text before it forwards the
//! message, so both judge the same thing.
//!
//! | in a tool result | read as |
//! |---|---|
//! | a `text` item | its text |
//! | an `image` / `audio` item | `[image MIME, N bytes of base64]` |
//! | an embedded `resource` | `[resource URI]`, then its text (a blob: named by kind and size) |
//! | a `resource_link` | `[resource link URI]`, then its name, title and description |
//! | an item of a kind not known | every string of it |
//! | `structuredContent` | its JSON |
//!
//! Items are joined by a newline. Any other message (a `resources/read`
//! or `prompts/get` answer, an error answer, a server's request or
//! notification) is read as every string it holds, but for the fields
//! that are no text (base64 data, MIME types, cursors, the protocol's own
//! names).

use crate::jsondoc::{parse, Kind, Limits, Node};
use std::ops::Range;

/// One piece of a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A JSON string of the message, decoded: judged, and written back
    /// where it lives.
    Text {
        /// The string literal's span.
        span: Range<usize>,
        /// Its text.
        text: String,
    },
    /// A JSON value read as its JSON text (`structuredContent`); written
    /// back only as JSON of the same kind.
    Json {
        /// The value's span.
        span: Range<usize>,
        /// Its bytes as written.
        text: String,
    },
    /// Text of the view's own (a label, a separator): not in the message.
    Literal(String),
}

impl Piece {
    /// Its text, as the view reads it.
    pub(crate) fn text(&self) -> &str {
        match self {
            Piece::Text { text, .. } | Piece::Json { text, .. } | Piece::Literal(text) => text,
        }
    }

    /// Whether it is the message's own text (judged, written back).
    pub(crate) fn is_judged(&self) -> bool {
        !matches!(self, Piece::Literal(_))
    }
}

/// A message's texts in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// The pieces, separators included.
    pub(crate) pieces: Vec<Piece>,
}

/// Fields whose strings are no text a model reads: base64 payloads, the
/// protocol's own names and tokens.
const NOT_TEXT: &[&str] = &[
    "blob",
    "mimeType",
    "jsonrpc",
    "protocolVersion",
    "cursor",
    "nextCursor",
    "progressToken",
    "type",
    "role",
    "resultType",
];

/// Whether member `key` holds no text (see [`NOT_TEXT`]).
fn is_keyword(src: &[u8], key: &crate::jsondoc::Key) -> bool {
    NOT_TEXT.iter().any(|name| key.is(src, name))
}

impl View {
    /// The text the seams judge: every piece, in order.
    pub(crate) fn text(&self) -> String {
        self.pieces.iter().map(Piece::text).collect()
    }

    /// Whether it holds any of the message's own text.
    pub(crate) fn is_empty(&self) -> bool {
        !self.pieces.iter().any(Piece::is_judged)
    }

    fn literal(&mut self, text: impl Into<String>) {
        self.pieces.push(Piece::Literal(text.into()));
    }

    fn string(&mut self, src: &[u8], node: &Node) {
        if let Some(text) = node.text(src) {
            self.pieces.push(Piece::Text {
                span: node.span.clone(),
                text: text.into_owned(),
            });
        }
    }

    /// Starts a new item: a newline unless it is the first.
    fn item(&mut self) {
        if !self.pieces.is_empty() {
            self.literal("\n");
        }
    }

    /// The view of a `tools/call` result, as the guard judges it: its
    /// structured content too, which a client may show instead of its
    /// content.
    pub(crate) fn tool_result(src: &[u8], result: &Node) -> View {
        Self::result_view(src, result, true)
    }

    /// The view of a `tools/call` result as `chimera run` records it: its
    /// structured content only when it has no content (which, as the
    /// specification asks, then repeats it).
    pub(crate) fn recorded_result(src: &[u8], result: &Node) -> View {
        Self::result_view(src, result, false)
    }

    fn result_view(src: &[u8], result: &Node, always_structured: bool) -> View {
        let mut view = View::default();
        let content = result
            .get(src, "content")
            .and_then(Node::as_array)
            .unwrap_or_default();
        for item in content {
            view.item();
            view.content_item(src, item);
        }
        let structured = result
            .get(src, "structuredContent")
            .filter(|_| always_structured || content.is_empty());
        if let Some(structured) = structured {
            view.item();
            view.pieces.push(Piece::Json {
                span: structured.span.clone(),
                text: String::from_utf8_lossy(structured.raw(src)).into_owned(),
            });
        }
        // Anything else a server put in it (the input requests of an
        // `input_required` result, fields a client may show): its strings.
        for (key, value) in result.as_object().unwrap_or_default() {
            let known = ["content", "structuredContent", "isError"];
            if !known.iter().any(|name| key.is(src, name)) && !is_keyword(src, key) {
                view.strings_of(src, value);
            }
        }
        view
    }

    fn content_item(&mut self, src: &[u8], item: &Node) {
        let kind = item.get(src, "type").and_then(|t| t.text(src));
        let field = |name: &str| item.get(src, name);
        match kind.as_deref() {
            Some("text") if field("text").is_some_and(|t| t.text(src).is_some()) => {
                self.string(src, field("text").unwrap_or(item));
            }
            Some(media @ ("image" | "audio")) => {
                let mime = field("mimeType")
                    .and_then(|m| m.text(src))
                    .unwrap_or_default();
                let size = field("data").map_or(0, |d| d.raw(src).len().saturating_sub(2));
                self.literal(format!("[{media} {mime}, {size} bytes of base64]"));
            }
            Some("resource") if field("resource").is_some() => {
                let resource = field("resource").unwrap_or(item);
                self.labelled(src, "[resource ", resource.get(src, "uri"), "]");
                if let Some(text) = resource.get(src, "text") {
                    self.literal("\n");
                    self.string(src, text);
                } else if let Some(blob) = resource.get(src, "blob") {
                    let mime = resource
                        .get(src, "mimeType")
                        .and_then(|m| m.text(src))
                        .unwrap_or_default();
                    let size = blob.raw(src).len().saturating_sub(2);
                    self.literal(format!(" ({mime}, {size} bytes of base64)"));
                }
            }
            Some("resource_link") => {
                self.labelled(src, "[resource link ", field("uri"), "]");
                for name in ["name", "title", "description"] {
                    if let Some(text) = field(name).filter(|n| n.text(src).is_some()) {
                        self.literal("\n");
                        self.string(src, text);
                    }
                }
            }
            _ => self.strings_of(src, item),
        }
    }

    /// `before`, the string `node`, `after`.
    fn labelled(&mut self, src: &[u8], before: &str, node: Option<&Node>, after: &str) {
        self.literal(before);
        if let Some(node) = node {
            self.string(src, node);
        }
        self.literal(after);
    }

    /// The view of any message: every string it holds that is text.
    pub(crate) fn strings(src: &[u8], node: &Node) -> View {
        let mut view = View::default();
        view.strings_of(src, node);
        view
    }

    fn strings_of(&mut self, src: &[u8], node: &Node) {
        match &node.kind {
            Kind::String { .. } => {
                if self
                    .pieces
                    .last()
                    .is_some_and(|p| !p.text().ends_with('\n'))
                {
                    self.literal("\n");
                }
                self.string(src, node);
            }
            Kind::Array(items) => items.iter().for_each(|n| self.strings_of(src, n)),
            Kind::Object(members) => {
                let media = node
                    .get(src, "type")
                    .and_then(|t| t.text(src))
                    .is_some_and(|t| t == "image" || t == "audio");
                for (key, value) in members {
                    let opaque = is_keyword(src, key) || (media && key.is(src, "data"));
                    if !opaque {
                        self.strings_of(src, value);
                    }
                }
            }
            _ => {}
        }
    }

    /// The text of each judged piece, in order.
    pub(crate) fn judged_texts(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter(|p| p.is_judged())
            .map(Piece::text)
            .collect()
    }

    /// When the view has one judged piece: the texts around it, which a
    /// judged text must keep for its middle to be that piece's new text.
    pub(crate) fn single(&self) -> Option<(usize, String, String)> {
        let mut judged = self
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_judged());
        let (at, _) = judged.next()?;
        if judged.next().is_some() {
            return None;
        }
        let before: String = self.pieces[..at].iter().map(Piece::text).collect();
        let after: String = self.pieces[at + 1..].iter().map(Piece::text).collect();
        Some((at, before, after))
    }

    /// The edits writing `texts` (one for each judged piece, in order:
    /// `None` where it is unchanged) where the pieces live.
    ///
    /// # Errors
    ///
    /// Why it cannot be written: a piece read as JSON whose new text is
    /// not JSON of the same kind.
    pub(crate) fn write(
        &self,
        texts: &[Option<String>],
        splice: &mut crate::jsondoc::Splice,
    ) -> Result<(), String> {
        let judged = self.pieces.iter().filter(|p| p.is_judged());
        for (piece, text) in judged.zip(texts) {
            let Some(text) = text else { continue };
            match piece {
                Piece::Text { span, .. } => {
                    splice.replace(span.clone(), crate::jsondoc::string_literal(text));
                }
                Piece::Json { span, text: old } => {
                    let kind = |t: &str| {
                        parse(t.as_bytes(), &Limits::default())
                            .ok()
                            .map(|n| n.kind_name())
                    };
                    if kind(text).is_none() || kind(text) != kind(old) {
                        return Err("the packs changed its structured content into \
                                    something that is not the same kind of JSON"
                            .to_owned());
                    }
                    splice.replace(span.clone(), text.as_bytes().to_vec());
                }
                Piece::Literal(_) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsondoc::Splice;

    fn view_of(text: &str) -> (Vec<u8>, View) {
        let src = text.as_bytes().to_vec();
        let root = parse(&src, &Limits::default()).unwrap();
        let view = View::tool_result(&src, &root);
        (src, view)
    }

    #[test]
    fn every_item_a_model_reads_is_in_the_view_in_order() {
        let (_, view) = view_of(
            r#"{"content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "two", "mimeType": "text/plain"}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "aGk=", "mimeType": "x/y"}},
                {"type": "resource_link", "uri": "file:///c", "name": "three", "description": "four"},
                {"type": "future", "what": "five", "type2": 1}
              ],
              "structuredContent": {"six": 6},
              "resultType": "input_required",
              "inputRequests": {"a": {"method": "elicitation/create", "params": {"message": "seven"}}}}"#,
        );
        assert_eq!(
            view.text(),
            "one\n[image image/png, 4 bytes of base64]\n[resource file:///a]\ntwo\n\
             [resource file:///b] (x/y, 4 bytes of base64)\n[resource link file:///c]\nthree\nfour\n\
             five\n{\"six\": 6}\nelicitation/create\nseven"
        );
        assert_eq!(
            view.judged_texts(),
            [
                "one",
                "file:///a",
                "two",
                "file:///b",
                "file:///c",
                "three",
                "four",
                "five",
                "{\"six\": 6}",
                "elicitation/create",
                "seven"
            ]
        );
    }

    #[test]
    fn texts_are_written_back_where_they_live_and_structured_content_only_as_json() {
        let (src, view) = view_of(
            r#"{"content":[{"type":"text","text":"a secret"}],"structuredContent":{"k":"a secret"}}"#,
        );
        let mut splice = Splice::new();
        view.write(
            &[
                Some("a [x]".to_owned()),
                Some(r#"{"k":"a [x]"}"#.to_owned()),
            ],
            &mut splice,
        )
        .unwrap();
        assert_eq!(
            splice.render(&src).unwrap(),
            br#"{"content":[{"type":"text","text":"a [x]"}],"structuredContent":{"k":"a [x]"}}"#
        );
        let refused = view.write(&[None, Some("not json".to_owned())], &mut Splice::new());
        assert!(refused.is_err());
    }

    #[test]
    fn any_other_message_is_its_strings_but_the_ones_that_are_no_text() {
        let src = br#"{"jsonrpc":"2.0","id":1,"result":{"contents":[{"uri":"u","mimeType":"text/plain","text":"t"},{"uri":"v","blob":"QUJD"}],"nextCursor":"c"}}"#;
        let root = parse(src, &Limits::default()).unwrap();
        assert_eq!(View::strings(src, &root).judged_texts(), ["u", "t", "v"]);
        let (_, one) = view_of(r#"{"content":[{"type":"text","text":"only"}]}"#);
        assert_eq!(one.single(), Some((0, String::new(), String::new())));
    }
}
