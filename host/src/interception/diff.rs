//! The compact diff an audit line carries for a replacement: for each
//! changed span of a field, where it starts, how many bytes it removed and
//! the text inserted in its place. The removed text is never kept, so a
//! secret a redactor took out cannot reappear in the log: a span says only
//! that `del` bytes went at `pos`.
//!
//! Spans are found by a Myers diff over words, spaces and punctuation
//! (after the common prefix and suffix are set aside), bounded in edits and
//! in tokens; past the bounds a field's change is one span covering
//! everything between the common prefix and suffix.

use crate::types::{Message, ProviderRequest, ToolCall, ToolResult};
use serde::Serialize;

/// At most this many bytes of inserted text are kept per span.
pub const INSERT_CAP: usize = 1024;
/// At most this many spans are kept per decision; the rest are counted.
pub const SPAN_CAP: usize = 64;
/// Token diffs give up (one span instead) past this many edits...
const EDIT_CAP: usize = 64;
/// ...or when the changed middles hold more tokens than this together.
const TOKEN_CAP: usize = 20_000;

/// One changed span of one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The field: `arguments`, `output`, `text`, `messages[2].content`,
    /// `headers.authorization`, …
    pub at: String,
    /// Byte offset in the field's old text where the span starts.
    pub pos: usize,
    /// Bytes removed there. The removed text itself is never recorded.
    pub del: usize,
    /// The text inserted in their place (at most [`INSERT_CAP`] bytes of it).
    pub ins: String,
    /// The inserted text's whole length, when `ins` was cut short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ins_len: Option<usize>,
    /// `added` or `removed` when the whole field appeared or went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'static str>,
}

/// What a replacement changed: its spans, in field order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The spans kept (at most [`SPAN_CAP`]).
    pub spans: Vec<Change>,
    /// Spans found beyond the cap, counted but not kept.
    pub omitted: usize,
}

/// Collects the changes between two values, field by field.
#[derive(Default)]
pub(crate) struct Differ {
    changes: Changes,
}

impl Differ {
    /// The changes `compare` finds.
    pub(crate) fn of(compare: impl FnOnce(&mut Differ)) -> Changes {
        let mut differ = Differ::default();
        compare(&mut differ);
        differ.changes
    }

    fn push(&mut self, change: Change) {
        if self.changes.spans.len() < SPAN_CAP {
            self.changes.spans.push(change);
        } else {
            self.changes.omitted += 1;
        }
    }

    /// The spans in which `after` differs from `before`, for the field `at`
    /// names (built only when something changed).
    pub(crate) fn text(&mut self, at: impl Fn() -> String, before: &str, after: &str) {
        if before == after {
            return;
        }
        let (start, tail) = common_ends(before, after);
        let old = &before[start..before.len() - tail];
        let new = &after[start..after.len() - tail];
        let old_tokens = tokens(old);
        let new_tokens = tokens(new);
        let hunks = (old_tokens.len() + new_tokens.len() <= TOKEN_CAP)
            .then(|| {
                let a: Vec<&str> = old_tokens.iter().map(|&(s, e)| &old[s..e]).collect();
                let b: Vec<&str> = new_tokens.iter().map(|&(s, e)| &new[s..e]).collect();
                hunks(&a, &b, EDIT_CAP)
            })
            .flatten();
        let Some(hunks) = hunks else {
            self.push(span(at(), start, old.len(), new, None));
            return;
        };
        let offset = |list: &[(usize, usize)], text: &str, index: usize| {
            list.get(index).map_or(text.len(), |&(s, _)| s)
        };
        for hunk in hunks {
            let pos = offset(&old_tokens, old, hunk.old.0);
            let end = offset(&old_tokens, old, hunk.old.1);
            let from = offset(&new_tokens, new, hunk.new.0);
            let to = offset(&new_tokens, new, hunk.new.1);
            self.push(span(at(), start + pos, end - pos, &new[from..to], None));
        }
    }

    /// Like [`text`](Self::text) for a field either side may lack: one that
    /// appeared is `added` (its text inserted), one that went is `removed`
    /// (its length only). An empty field coming or going is not a change.
    pub(crate) fn optional(
        &mut self,
        at: impl Fn() -> String,
        before: Option<&str>,
        after: Option<&str>,
    ) {
        match (before, after) {
            (Some(old), Some(new)) => self.text(at, old, new),
            (None, Some(new)) if !new.is_empty() => {
                self.push(span(at(), 0, 0, new, Some("added")));
            }
            (Some(old), None) if !old.is_empty() => {
                self.push(span(at(), 0, old.len(), "", Some("removed")));
            }
            _ => {}
        }
    }

    /// The changes of a reply or answer text (the field `text`).
    pub(crate) fn text_changes(before: &str, after: &str) -> Changes {
        Differ::of(|d| d.text(|| "text".to_owned(), before, after))
    }

    /// A tool call's name and arguments (the id never changes).
    pub(crate) fn tool_call(&mut self, before: &ToolCall, after: &ToolCall) {
        self.text(|| "name".to_owned(), &before.name, &after.name);
        self.text(
            || "arguments".to_owned(),
            before.arguments.as_str(),
            after.arguments.as_str(),
        );
    }

    /// A tool result's output, error and metadata.
    pub(crate) fn tool_result(&mut self, before: &ToolResult, after: &ToolResult) {
        self.text(|| "output".to_owned(), &before.output, &after.output);
        self.optional(
            || "error".to_owned(),
            before.error.as_deref(),
            after.error.as_deref(),
        );
        self.optional(|| "metadata".to_owned(), metadata(before), metadata(after));
    }

    /// A message list, index by index (`messages[i]…`); equal messages
    /// are skipped without looking inside.
    pub(crate) fn messages(&mut self, before: &[Message], after: &[Message]) {
        for index in 0..before.len().max(after.len()) {
            let (old, new) = (before.get(index), after.get(index));
            if old != new {
                self.message(&format!("messages[{index}]"), old, new);
            }
        }
    }

    fn message(&mut self, at: &str, before: Option<&Message>, after: Option<&Message>) {
        let field = |name: &str| {
            let path = format!("{at}.{name}");
            move || path.clone()
        };
        self.optional(
            field("role"),
            before.map(|m| m.role.as_str()),
            after.map(|m| m.role.as_str()),
        );
        self.optional(
            field("content"),
            before.map(|m| m.content.as_str()),
            after.map(|m| m.content.as_str()),
        );
        let blocks = |m: Option<&Message>| m.map_or(0, |m| m.blocks.len());
        for j in 0..blocks(before).max(blocks(after)) {
            let (old, new) = (
                before.and_then(|m| m.blocks.get(j)),
                after.and_then(|m| m.blocks.get(j)),
            );
            self.optional(
                field(&format!("blocks[{j}].text")),
                old.map(|b| b.text.as_str()),
                new.map(|b| b.text.as_str()),
            );
            self.optional(
                field(&format!("blocks[{j}].data")),
                old.and_then(|b| b.data.as_deref().map(serde_json::value::RawValue::get)),
                new.and_then(|b| b.data.as_deref().map(serde_json::value::RawValue::get)),
            );
        }
        let calls = |m: Option<&Message>| m.map_or(0, |m| m.tool_calls.len());
        for j in 0..calls(before).max(calls(after)) {
            let (old, new) = (
                before.and_then(|m| m.tool_calls.get(j)),
                after.and_then(|m| m.tool_calls.get(j)),
            );
            for (name, part) in [
                (
                    "id",
                    (|c: &ToolCall| c.id.as_str()) as fn(&ToolCall) -> &str,
                ),
                ("name", |c| c.name.as_str()),
                ("arguments", |c| c.arguments.as_str()),
            ] {
                self.optional(
                    field(&format!("tool_calls[{j}].{name}")),
                    old.map(part),
                    new.map(part),
                );
            }
        }
        self.optional(
            field("tool_call_id"),
            before.and_then(|m| m.tool_call_id.as_deref()),
            after.and_then(|m| m.tool_call_id.as_deref()),
        );
        self.optional(
            field("name"),
            before.and_then(|m| m.name.as_deref()),
            after.and_then(|m| m.name.as_deref()),
        );
    }

    /// A provider request: model, messages, tools, kwargs, headers (by
    /// name, case-insensitively, as `headers.<name>`).
    pub(crate) fn request(&mut self, before: &ProviderRequest, after: &ProviderRequest) {
        self.text(|| "model".to_owned(), &before.model, &after.model);
        self.messages(&before.messages, &after.messages);
        self.text(
            || "tools".to_owned(),
            before.tools.json(),
            after.tools.json(),
        );
        if before.kwargs != after.kwargs {
            let json = |r: &ProviderRequest| serde_json::to_string(&r.kwargs).unwrap_or_default();
            self.text(|| "kwargs".to_owned(), &json(before), &json(after));
        }
        if before.headers != after.headers {
            let mut names: Vec<String> = Vec::new();
            for headers in [&before.headers, &after.headers].into_iter().flatten() {
                for (name, _) in headers.iter() {
                    let name = name.to_ascii_lowercase();
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            let value = |r: &'_ ProviderRequest, name: &str| -> Option<String> {
                r.headers.as_ref()?.get(name).map(str::to_owned)
            };
            for name in names {
                let (old, new) = (value(before, &name), value(after, &name));
                self.optional(|| format!("headers.{name}"), old.as_deref(), new.as_deref());
            }
        }
    }
}

/// A tool result's metadata, as JSON text.
fn metadata(result: &ToolResult) -> Option<&str> {
    result
        .metadata
        .as_deref()
        .map(serde_json::value::RawValue::get)
}

/// A span, its inserted text cut to [`INSERT_CAP`] bytes (at a character
/// boundary) with the whole length kept beside it.
fn span(at: String, pos: usize, del: usize, ins: &str, field: Option<&'static str>) -> Change {
    let (ins, ins_len) = if ins.len() > INSERT_CAP {
        let mut cut = INSERT_CAP;
        while !ins.is_char_boundary(cut) {
            cut -= 1;
        }
        (ins[..cut].to_owned(), Some(ins.len()))
    } else {
        (ins.to_owned(), None)
    };
    Change {
        at,
        pos,
        del,
        ins,
        ins_len,
        field,
    }
}

/// The byte lengths of the common prefix and the common suffix of two
/// different strings (not overlapping, both at character boundaries).
fn common_ends(a: &str, b: &str) -> (usize, usize) {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let mut start = x.iter().zip(y).take_while(|(p, q)| p == q).count();
    // Equal bytes up to a boundary of `a` are whole characters in `b` too.
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    let room = x.len().min(y.len()) - start;
    let mut tail = x
        .iter()
        .rev()
        .zip(y.iter().rev())
        .take(room)
        .take_while(|(p, q)| p == q)
        .count();
    while !a.is_char_boundary(a.len() - tail) {
        tail -= 1;
    }
    (start, tail)
}

/// `text` cut into tokens, as byte ranges: runs of word characters, runs
/// of whitespace, and every other character on its own.
fn tokens(text: &str) -> Vec<(usize, usize)> {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Word,
        Space,
        Other,
    }
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            Class::Word
        } else if c.is_whitespace() {
            Class::Space
        } else {
            Class::Other
        }
    };
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut last: Option<Class> = None;
    for (at, c) in text.char_indices() {
        let now = class(c);
        match out.last_mut() {
            Some(token) if last == Some(now) && now != Class::Other => token.1 = at + c.len_utf8(),
            _ => out.push((at, at + c.len_utf8())),
        }
        last = Some(now);
    }
    out
}

/// A run of edits: tokens `old.0..old.1` of the old list replaced by
/// tokens `new.0..new.1` of the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hunk {
    old: (usize, usize),
    new: (usize, usize),
}

/// The hunks of a shortest edit script from `a` to `b` (Myers), or `None`
/// when it takes more than `max` insertions and deletions.
#[allow(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "indices are bounded by TOKEN_CAP and EDIT_CAP, far from the limits"
)]
#[allow(
    clippy::many_single_char_names,
    reason = "the names of Myers's paper (a, b, n, m, d, k, v, x, y), which this is read against"
)]
fn hunks(a: &[&str], b: &[&str], max: usize) -> Option<Vec<Hunk>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let offset = max as isize + 1;
    let at = |k: isize| (k + offset) as usize;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'search: for d in 0..=max as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let mut x = if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) {
                v[at(k + 1)]
            } else {
                v[at(k - 1)] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[at(k)] = x;
            if x >= n && y >= m {
                break 'search;
            }
            k += 2;
        }
        if d == max as isize {
            return None;
        }
    }
    // Walk back from the end: each step of d is one insertion or deletion,
    // after the diagonal (equal tokens) that followed it.
    let (mut x, mut y) = (n, m);
    let mut edits: Vec<(isize, isize, bool)> = Vec::new();
    for (d, v) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let k = x - y;
        let prev_k = if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = v[at(prev_k)];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            // true: a deletion of a[prev_x]; false: an insertion of b[prev_y].
            edits.push((prev_x, prev_y, x != prev_x));
        }
        x = prev_x;
        y = prev_y;
    }
    edits.reverse();
    let mut out: Vec<Hunk> = Vec::new();
    for (x, y, deletion) in edits {
        let (x, y) = (x as usize, y as usize);
        let (old_end, new_end) = if deletion { (x + 1, y) } else { (x, y + 1) };
        match out.last_mut() {
            Some(hunk) if hunk.old.1 == x && hunk.new.1 == y => {
                hunk.old.1 = old_end;
                hunk.new.1 = new_end;
            }
            _ => out.push(Hunk {
                old: (x, old_end),
                new: (y, new_end),
            }),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(before: &str, after: &str) -> Vec<(usize, usize, String)> {
        Differ::of(|d| d.text(|| "text".to_owned(), before, after))
            .spans
            .into_iter()
            .map(|c| (c.pos, c.del, c.ins))
            .collect()
    }

    /// Applies spans (positions in the old text) to `before`.
    fn apply(before: &str, spans: &[(usize, usize, String)]) -> String {
        let mut out = String::new();
        let mut at = 0;
        for (pos, del, ins) in spans {
            out.push_str(&before[at..*pos]);
            out.push_str(ins);
            at = pos + del;
        }
        out.push_str(&before[at..]);
        out
    }

    #[test]
    fn each_redacted_secret_is_its_own_span_without_the_secret() {
        let before =
            "first sk-AAAAAAAAAAAA then a long stretch of ordinary text and sk-BBBBBBBBBBBB end";
        let after = "first [redacted] then a long stretch of ordinary text and [redacted] end";
        let spans = diff(before, after);
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!(apply(before, &spans), after);
        for (_, _, ins) in &spans {
            assert!(!ins.contains("sk-"), "{ins}");
            assert!(
                !ins.contains("ordinary"),
                "unchanged text is not carried: {ins}"
            );
        }
        assert_eq!(spans[0].0, 6);
        assert_eq!(spans[0].1, "sk-AAAAAAAAAAAA".len());
    }

    #[test]
    fn spans_reproduce_the_new_text_for_any_edit() {
        let cases = [
            ("", "new"),
            ("old", ""),
            ("same prefix, different end", "same prefix, other end!"),
            ("a b c d e f", "a c d x f g"),
            ("héllo wörld", "hello world"),
            ("日本語のテキスト", "日本語テキスト"),
            ("x", "y"),
            ("aaaa", "aaaaaa"),
        ];
        for (before, after) in cases {
            let spans = diff(before, after);
            assert_eq!(
                apply(before, &spans),
                after,
                "{before:?} → {after:?}: {spans:?}"
            );
        }
    }

    #[test]
    fn past_the_edit_bound_one_span_covers_the_change() {
        let words = |prefix: char| {
            (0..200)
                .map(|i| format!("{prefix}{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (before, after) = (words('w'), words('v'));
        let spans = diff(&before, &after);
        assert_eq!(spans.len(), 1);
        assert_eq!(apply(&before, &spans), after);
    }

    #[test]
    fn inserted_text_is_capped_and_its_length_kept() {
        let after = "é".repeat(INSERT_CAP);
        let changes = Differ::of(|d| d.text(|| "text".to_owned(), "", &after));
        let change = &changes.spans[0];
        assert!(change.ins.len() <= INSERT_CAP);
        assert_eq!(change.ins_len, Some(after.len()));
    }

    #[test]
    fn a_removed_field_keeps_only_its_length_and_spans_past_the_cap_are_counted() {
        let changes = Differ::of(|d| {
            d.optional(
                || "headers.authorization".to_owned(),
                Some("Bearer sk-secret"),
                None,
            );
            for i in 0..SPAN_CAP + 3 {
                d.text(|| format!("f{i}"), "a", "b");
            }
        });
        let removed = &changes.spans[0];
        assert_eq!(
            (removed.del, removed.ins.as_str(), removed.field),
            ("Bearer sk-secret".len(), "", Some("removed"))
        );
        assert_eq!(changes.spans.len(), SPAN_CAP);
        assert_eq!(changes.omitted, 4);
    }

    #[test]
    fn messages_are_compared_index_by_index() {
        let before = vec![Message::system("sys"), Message::user("my key-1234567890")];
        let mut after = before.clone();
        after[1].content = "my [redacted]".to_owned();
        after.push(Message::user("added"));
        let changes = Differ::of(|d| d.messages(&before, &after));
        let at: Vec<String> = changes.spans.into_iter().map(|c| c.at).collect();
        assert_eq!(
            at,
            [
                "messages[1].content",
                "messages[2].role",
                "messages[2].content"
            ]
        );
    }
}
