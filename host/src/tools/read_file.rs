//! `read_file`: a text file's contents, or a range of its lines.
//!
//! The file is read as a stream: lines before `offset` are skipped as they
//! go by, at most [`MAX_BYTES`] of the selected lines are kept, and reading
//! stops as soon as the selection ends — or, when it was cut, once the
//! truncation note has counted up to [`TRUNCATION_LOOKAHEAD`] more bytes. A
//! huge file costs what is returned, not its size. Every byte read is
//! checked for text (UTF-8, no NUL byte).

use super::args::optional_whole;
use super::workspace::Access;
use super::{ToolContext, ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fmt::Write as _;
use std::io::{self, Read};

/// At most this many bytes of text are returned.
const MAX_BYTES: usize = 100_000;

/// How far past the returned text the reader goes to count what was cut: a
/// selection whose rest ends within this many bytes gets the exact count in
/// its `[truncated: N more bytes]` note; a longer one is noted as
/// `[truncated: more than 1048576 more bytes]`, without reading further.
const TRUNCATION_LOOKAHEAD: usize = 1 << 20;

/// The size of one read.
const CHUNK: usize = 8 * 1024;

/// `read_file`: reads a UTF-8 text file inside the workspace, optionally a
/// range of lines (`offset` is 1-based, `limit` a line count). Output over
/// 100 000 bytes is truncated with a final `[truncated: N more bytes]` line
/// (`[truncated: more than 1048576 more bytes]` past the look-ahead). Only
/// as much of the file is read as the answer needs.
pub struct ReadFileTool;

/// The arguments of `read_file` (the field docs are what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// File path, relative to the workspace root.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default, deserialize_with = "optional_whole")]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Maximum number of lines to return (default: to the end).
    #[serde(default, deserialize_with = "optional_whole")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

impl TypedTool for ReadFileTool {
    /// Inline under a deadline: it a capped local read (FIFOs are refused).
    fn stops_by_deadline(&self) -> bool {
        true
    }

    type Args = ReadFileArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a UTF-8 text file in the workspace. Paths are relative to the workspace root \
         (absolute paths must be inside it). Optionally read only `limit` lines starting at \
         line `offset` (1-based). Output longer than 100000 bytes is cut, ending with a \
         `[truncated: N more bytes]` line (`more than N` when the rest is over a MiB); use \
         offset/limit to read further. Binary files (a NUL byte, or not UTF-8) are refused."
    }

    fn run(&self, arguments: ReadFileArgs, cx: &ToolContext<'_>) -> Result<String, ToolError> {
        let (offset, limit) = (arguments.offset, arguments.limit);
        if offset == Some(0) {
            return Err(ToolError::invalid(
                "offset",
                "argument `offset` is 1-based: use 1 for the first line",
            ));
        }
        if limit == Some(0) {
            return Err(ToolError::invalid(
                "limit",
                "argument `limit` must be at least 1",
            ));
        }
        let file = cx.workspace.open(&arguments.path, Access::Read)?;
        let lines = Lines {
            first: offset.unwrap_or(1),
            count: limit,
        };
        read_lines(file, &arguments.path, lines)
    }
}

/// Which lines to return: `count` of them (all when `None`) from line
/// `first` (1-based).
#[derive(Debug, Clone, Copy)]
struct Lines {
    first: u64,
    count: Option<u64>,
}

/// Reads `lines` of the text `reader` yields (`path` is for messages): the
/// selection, cut to [`MAX_BYTES`] on a character boundary with a note.
/// Pulls no more than the bytes up to the end of the selection plus one
/// [`CHUNK`]; when the selection is cut, no more than [`MAX_BYTES`] +
/// [`TRUNCATION_LOOKAHEAD`] + one [`CHUNK`] past its start.
fn read_lines<R: Read>(mut reader: R, path: &str, lines: Lines) -> Result<String, ToolError> {
    let mut selection = Selection::new(lines);
    let mut buffer = vec![0; CHUNK];
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => return selection.finish_at_end(path),
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ToolError::io(path, "read", e)),
        };
        match selection.feed(&buffer[..read]) {
            Ok(Flow::More) => {}
            Ok(Flow::Complete) => return selection.finish(path, Rest::Counted),
            Ok(Flow::Enough) => return selection.finish(path, Rest::Unknown),
            Err(not_text) => return Err(not_text.error(path)),
        }
    }
}

/// What [`Selection::feed`] needs next.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    /// More bytes.
    More,
    /// None: the selection has ended.
    Complete,
    /// None: the selection was cut and the look-ahead is used up.
    Enough,
}

/// Whether the bytes cut from the selection were all counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    Counted,
    Unknown,
}

/// The lines being collected from a stream.
struct Selection {
    /// The first line returned.
    first: u64,
    /// The first line not returned (`u64::MAX`: to the end).
    end: u64,
    /// The line the next byte belongs to.
    line: u64,
    /// The last byte consumed.
    last: Option<u8>,
    /// Whether any byte of the selection was seen.
    started: bool,
    /// The selected bytes kept, at most [`MAX_BYTES`].
    kept: Vec<u8>,
    /// Selected bytes seen past those kept.
    cut: usize,
    check: TextCheck,
}

impl Selection {
    fn new(lines: Lines) -> Self {
        Selection {
            first: lines.first,
            end: lines
                .count
                .map_or(u64::MAX, |count| lines.first.saturating_add(count)),
            line: 1,
            last: None,
            started: false,
            kept: Vec::new(),
            cut: 0,
            check: TextCheck::default(),
        }
    }

    /// Consumes `bytes` one line piece at a time, until the selection ends
    /// or the look-ahead is used up.
    fn feed(&mut self, mut bytes: &[u8]) -> Result<Flow, NotText> {
        while !bytes.is_empty() {
            if self.line >= self.end {
                return Ok(Flow::Complete);
            }
            let piece_len = bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            let (piece, rest) = bytes.split_at(piece_len);
            bytes = rest;
            self.check.feed(piece)?;
            if self.line >= self.first {
                self.keep(piece);
            }
            self.last = piece.last().copied();
            if self.last == Some(b'\n') {
                self.line += 1;
            }
            if self.cut > TRUNCATION_LOOKAHEAD {
                return Ok(Flow::Enough);
            }
        }
        Ok(if self.line >= self.end {
            Flow::Complete
        } else {
            Flow::More
        })
    }

    fn keep(&mut self, piece: &[u8]) {
        self.started = true;
        let room = MAX_BYTES - self.kept.len();
        let taken = room.min(piece.len());
        self.kept.extend_from_slice(&piece[..taken]);
        self.cut += piece.len() - taken;
    }

    /// The result once the stream has ended.
    fn finish_at_end(self, path: &str) -> Result<String, ToolError> {
        self.check.finish().map_err(|e| e.error(path))?;
        if !self.started {
            let total = match self.last {
                None => 0,
                Some(b'\n') => self.line - 1,
                Some(_) => self.line,
            };
            if total == 0 && self.first == 1 {
                return Ok(String::new());
            }
            return Err(ToolError::invalid(
                "offset",
                format!(
                    "offset {} is past the end of {path}, which has {total} lines",
                    self.first
                ),
            ));
        }
        self.finish(path, Rest::Counted)
    }

    /// The kept text, with a truncation note when some was cut.
    fn finish(mut self, path: &str, rest: Rest) -> Result<String, ToolError> {
        if self.cut > 0 {
            // Cut on a character boundary: what was read is UTF-8, so only
            // a character split by the cap can be incomplete.
            let boundary = match std::str::from_utf8(&self.kept) {
                Ok(_) => self.kept.len(),
                Err(e) => e.valid_up_to(),
            };
            self.cut += self.kept.len() - boundary;
            self.kept.truncate(boundary);
        }
        let mut text = String::from_utf8(self.kept).map_err(|_| NotText::NotUtf8.error(path))?;
        if self.cut > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            let _ = match rest {
                Rest::Counted => write!(text, "[truncated: {} more bytes]", self.cut),
                Rest::Unknown => {
                    write!(
                        text,
                        "[truncated: more than {TRUNCATION_LOOKAHEAD} more bytes]"
                    )
                }
            };
        }
        Ok(text)
    }
}

/// Checks a byte stream, fed in pieces, for text: UTF-8 with no NUL byte.
#[derive(Debug, Default)]
struct TextCheck {
    /// The start of a character split by the end of the last piece.
    pending: Vec<u8>,
    /// Bytes checked so far.
    checked: u64,
}

/// Why a stream is not text.
#[derive(Debug, PartialEq, Eq)]
enum NotText {
    /// A NUL byte, at this offset.
    Nul(u64),
    /// Bytes that are not UTF-8.
    NotUtf8,
}

impl NotText {
    fn error(self, path: &str) -> ToolError {
        let path = path.to_owned();
        match self {
            NotText::Nul(offset) => ToolError::NulByte { path, offset },
            NotText::NotUtf8 => ToolError::NotUtf8 { path },
        }
    }
}

impl TextCheck {
    /// Checks the next piece; the first offending byte decides the error.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), NotText> {
        let nul = bytes.iter().position(|&b| b == 0);
        self.utf8(&bytes[..nul.unwrap_or(bytes.len())])?;
        if let Some(at) = nul {
            if !self.pending.is_empty() {
                return Err(NotText::NotUtf8);
            }
            return Err(NotText::Nul(self.checked + at as u64));
        }
        self.checked += bytes.len() as u64;
        Ok(())
    }

    /// Checks that `bytes` continue the stream as UTF-8, keeping a
    /// character split at their end for the next piece.
    fn utf8(&mut self, mut bytes: &[u8]) -> Result<(), NotText> {
        if let Some(&lead) = self.pending.first() {
            let width = utf8_width(lead);
            let (head, rest) = bytes.split_at((width - self.pending.len()).min(bytes.len()));
            self.pending.extend_from_slice(head);
            if self.pending.len() < width {
                return Ok(());
            }
            std::str::from_utf8(&self.pending).map_err(|_| NotText::NotUtf8)?;
            self.pending.clear();
            bytes = rest;
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                self.pending = bytes[e.valid_up_to()..].to_vec();
                Ok(())
            }
            Err(_) => Err(NotText::NotUtf8),
        }
    }

    /// At the end of the stream: a character may not be left unfinished.
    fn finish(&self) -> Result<(), NotText> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(NotText::NotUtf8)
        }
    }
}

/// The length of the UTF-8 sequence a (valid) lead byte starts.
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Workspace;
    use crate::types::ToolResult;
    use serde_json::json;
    use std::fs;
    use std::io::Read;

    fn run(ws: &Workspace, args: serde_json::Value) -> ToolResult {
        crate::tools::testing::run(&ReadFileTool, ws, args)
    }

    use crate::tools::testing::setup;

    #[test]
    fn the_schema_offered_describes_each_argument_with_its_bounds() {
        assert_eq!(
            crate::tools::Tool::parameters(&ReadFileTool),
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "File path, relative to the workspace root."
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "First line to return, 1-based (default 1)."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Maximum number of lines to return (default: to the end)."
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn reads_whole_file_and_ranges() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        let r = run(&ws, json!({"path": "a.txt"}));
        assert_eq!(r.error, None);
        assert_eq!(r.output, "one\ntwo\nthree\nfour\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 2, "limit": 2}));
        assert_eq!(r.output, "two\nthree\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 3}));
        assert_eq!(r.output, "three\nfour\n");
        let r = run(&ws, json!({"path": "a.txt", "limit": 1}));
        assert_eq!(r.output, "one\n");
        let r = run(&ws, json!({"path": "a.txt", "offset": 9}));
        assert!(r.error.unwrap().contains("past the end"));
        let r = run(&ws, json!({"path": "a.txt", "offset": 0}));
        assert!(r.error.unwrap().contains("1-based"));
    }

    #[test]
    fn ill_formed_arguments_are_refused_with_one_line_naming_the_argument() {
        let (_dir, ws) = setup();
        let error = |args| run(&ws, args).error.unwrap();
        assert_eq!(
            error(json!({})),
            "missing required argument `path` (a string)"
        );
        assert_eq!(
            error(json!({"path": "x", "offset": "a"})),
            "argument `offset` must be a non-negative integer, got \"a\""
        );
        assert_eq!(
            error(json!({"pathh": "x"})),
            "unknown argument `pathh`; expected one of `path`, `offset`, `limit`"
        );
        assert_eq!(
            error(json!("nope")),
            "arguments must be a JSON object, got a string"
        );
        assert_eq!(
            error(json!({"path": "x", "limit": 0})),
            "argument `limit` must be at least 1"
        );
        // An integral float counts as the integer.
        fs::write(ws.root().join("two"), "one\ntwo\n").unwrap();
        assert_eq!(
            run(&ws, json!({"path": "two", "offset": 2.0})).output,
            "two\n"
        );
        assert!(run(&ws, json!({"path": "missing.txt"}))
            .error
            .unwrap()
            .contains("no such file"));
    }

    #[test]
    fn refuses_directories_and_binary() {
        let (_dir, ws) = setup();
        fs::create_dir(ws.root().join("d")).unwrap();
        fs::write(ws.root().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        assert!(run(&ws, json!({"path": "d"}))
            .error
            .unwrap()
            .contains("is a directory"));
        assert!(run(&ws, json!({"path": "bin"}))
            .error
            .unwrap()
            .contains("not valid UTF-8"));
    }

    #[test]
    fn truncates_large_files() {
        let (_dir, ws) = setup();
        let line = "x".repeat(99) + "\n";
        fs::write(ws.root().join("big"), line.repeat(1500)).unwrap();
        let r = run(&ws, json!({"path": "big"}));
        assert_eq!(r.error, None);
        assert!(r.output.ends_with("[truncated: 50000 more bytes]"));
        assert!(r.output.len() < MAX_BYTES + 40);
    }

    /// A reader that counts the bytes pulled from it.
    struct Counting<R> {
        inner: R,
        pulled: usize,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let read = self.inner.read(buf)?;
            self.pulled += read;
            Ok(read)
        }
    }

    fn counting<R: Read>(inner: R) -> Counting<R> {
        Counting { inner, pulled: 0 }
    }

    /// A reader that yields one byte per read.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&byte, rest)), Some(slot)) => {
                    *slot = byte;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn lines(first: u64, count: Option<u64>) -> Lines {
        Lines { first, count }
    }

    #[test]
    fn reading_stops_once_the_selected_lines_are_read() {
        let mut source = counting(io::Cursor::new("first\n").chain(io::repeat(b'y')));
        let text = read_lines(&mut source, "endless", lines(1, Some(1))).unwrap();
        assert_eq!(text, "first\n");
        assert!(
            source.pulled <= "first\n".len() + CHUNK,
            "{}",
            source.pulled
        );

        let head = "ab\n".repeat(10_000);
        let mut source = counting(io::Cursor::new(head.clone()).chain(io::repeat(b'z')));
        let text = read_lines(&mut source, "endless", lines(1000, Some(2))).unwrap();
        assert_eq!(text, "ab\nab\n");
        assert!(source.pulled <= 1001 * 3 + CHUNK, "{}", source.pulled);
    }

    #[test]
    fn a_cut_selection_is_read_no_further_than_the_look_ahead() {
        let note = "\n[truncated: more than 1048576 more bytes]";
        let mut source = counting(io::repeat(b'x'));
        let text = read_lines(&mut source, "endless", lines(1, None)).unwrap();
        assert!(text.ends_with(note), "{}", &text[MAX_BYTES - 10..]);
        assert_eq!(text.len(), MAX_BYTES + note.len());
        assert!(
            source.pulled <= MAX_BYTES + TRUNCATION_LOOKAHEAD + CHUNK,
            "{}",
            source.pulled
        );
        // Within the look-ahead the count is exact.
        let text = "x".repeat(MAX_BYTES + TRUNCATION_LOOKAHEAD);
        let read = read_lines(text.as_bytes(), "big", lines(1, None)).unwrap();
        assert!(read.ends_with("\n[truncated: 1048576 more bytes]"));
    }

    #[test]
    fn a_sparse_gigabyte_file_is_read_only_as_far_as_needed() {
        use std::io::Write;
        let (_dir, ws) = setup();
        let mut file = fs::File::create(ws.root().join("huge")).unwrap();
        file.write_all(b"first line\n").unwrap();
        file.set_len(1 << 30).unwrap();
        drop(file);
        let r = run(&ws, json!({"path": "huge", "limit": 1}));
        assert_eq!(r.error, None);
        assert_eq!(r.output, "first line\n");
        let r = run(&ws, json!({"path": "huge"}));
        assert_eq!(
            r.error.as_deref(),
            Some("huge contains a NUL byte at byte 11 (binary file?); only text files can be read")
        );
    }

    #[test]
    fn binary_content_is_detected_in_what_is_read() {
        let read = |bytes: &[u8], lines: Lines| read_lines(bytes, "f", lines);
        let nul = read(b"ab\ncd\0", lines(1, None)).unwrap_err().to_string();
        assert!(nul.starts_with("f contains a NUL byte at byte 5"), "{nul}");
        for bad in [&b"ab\xff"[..], b"\xc3(", b"ends mid-character \xe2\x82"] {
            let error = read(bad, lines(1, None)).unwrap_err().to_string();
            assert!(error.contains("not valid UTF-8"), "{bad:?}: {error}");
        }
        // Skipped lines are read, so they are checked too.
        assert!(read(b"\0\nok\n", lines(2, None)).is_err());
        // What lies past the selection is not read.
        assert_eq!(read(b"one\n\xff\0", lines(1, Some(1))).unwrap(), "one\n");
        // A character split between reads is still text.
        let text = "é€😀\n".repeat(3);
        assert_eq!(
            read_lines(Trickle(text.as_bytes()), "f", lines(1, None)).unwrap(),
            text
        );
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let (_dir, ws) = setup();
        let text = format!("a{}", "é".repeat(60_000));
        fs::write(ws.root().join("wide"), &text).unwrap();
        let r = run(&ws, json!({"path": "wide"}));
        assert_eq!(r.error, None);
        let expected = format!("{}\n[truncated: 20002 more bytes]", &text[..MAX_BYTES - 1]);
        assert_eq!(r.output, expected);
    }

    #[test]
    fn empty_files_and_offsets_past_the_end() {
        let (_dir, ws) = setup();
        fs::write(ws.root().join("empty"), "").unwrap();
        fs::write(ws.root().join("two"), "one\ntwo").unwrap();
        assert_eq!(run(&ws, json!({"path": "empty"})).output, "");
        assert_eq!(run(&ws, json!({"path": "empty", "offset": 1})).output, "");
        assert_eq!(
            run(&ws, json!({"path": "empty", "offset": 2}))
                .error
                .as_deref(),
            Some("offset 2 is past the end of empty, which has 0 lines")
        );
        assert_eq!(run(&ws, json!({"path": "two", "offset": 2})).output, "two");
        assert_eq!(
            run(&ws, json!({"path": "two", "offset": 3}))
                .error
                .as_deref(),
            Some("offset 3 is past the end of two, which has 2 lines")
        );
    }
}
