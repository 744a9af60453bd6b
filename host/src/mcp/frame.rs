//! Framing a stdio MCP stream the way its most permissive peer reads it:
//! a stream of JSON values, each an object or an array, with any
//! whitespace (newlines included) between them. The stdio transport asks
//! for one message a line, but a server that reads a stream of values
//! (Go's `json.Decoder`, for one) also takes a message written over
//! several lines, or two on one line: the guard frames them as such a
//! server would, so every message it could run is judged.
//!
//! A frame ends where its value closes (brackets counted outside
//! strings). What does not start with `{` or `[` is garbage up to the end
//! of its line; so is a value the stream ends inside. The guard refuses
//! garbage: it is never forwarded.

use super::error::{GuardError, MAX_LINE};
use std::io::BufRead;

/// One framed piece of the stream.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Frame {
    /// The bytes of one JSON value (whether it parses is the reader's
    /// business), from its opening bracket to its closing one.
    Value(Vec<u8>),
    /// Bytes that cannot start a message: up to the end of their line, or
    /// a value the stream ended inside.
    Garbage(Vec<u8>),
}

/// Where the scan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between frames: whitespace is skipped.
    Between,
    /// Inside a value: the depth of open brackets, whether inside a
    /// string, whether the last byte was a backslash in one.
    Value {
        depth: usize,
        in_string: bool,
        escaped: bool,
    },
    /// Inside garbage, until the end of the line.
    Garbage,
}

/// What one byte does to the frame.
enum Step {
    /// Not part of any frame (whitespace between frames).
    Skip,
    /// Part of the frame, which goes on.
    Take,
    /// Part of the frame, which ends with it.
    End,
    /// Ends the frame, without being part of it (the newline after
    /// garbage).
    EndBefore,
}

impl State {
    fn step(&mut self, byte: u8) -> Step {
        match self {
            State::Between => match byte {
                b' ' | b'\t' | b'\r' | b'\n' => Step::Skip,
                b'{' | b'[' => {
                    *self = State::Value {
                        depth: 1,
                        in_string: false,
                        escaped: false,
                    };
                    Step::Take
                }
                _ => {
                    *self = State::Garbage;
                    Step::Take
                }
            },
            State::Garbage if byte == b'\n' => Step::EndBefore,
            State::Garbage => Step::Take,
            State::Value {
                depth,
                in_string,
                escaped,
            } => {
                if *in_string {
                    if *escaped {
                        *escaped = false;
                    } else if byte == b'\\' {
                        *escaped = true;
                    } else if byte == b'"' {
                        *in_string = false;
                    }
                    return Step::Take;
                }
                match byte {
                    b'"' => *in_string = true,
                    b'{' | b'[' => *depth += 1,
                    b'}' | b']' => {
                        *depth -= 1;
                        if *depth == 0 {
                            return Step::End;
                        }
                    }
                    _ => {}
                }
                Step::Take
            }
        }
    }
}

/// Reads frames from a stream.
pub(super) struct Framer<R> {
    reader: R,
    from: &'static str,
}

impl<R: BufRead> Framer<R> {
    /// Frames of `reader`, the stream of `from` (`client` or `server`,
    /// for error lines).
    pub(super) fn new(reader: R, from: &'static str) -> Self {
        Framer { reader, from }
    }

    /// The next frame; `None` at the end of the stream.
    ///
    /// # Errors
    ///
    /// `TooLong` when a frame runs past [`MAX_LINE`] bytes; `Io` when the
    /// stream fails.
    pub(super) fn next_frame(&mut self) -> Result<Option<Frame>, GuardError> {
        let mut state = State::Between;
        let mut frame = Vec::new();
        loop {
            let available = self
                .reader
                .fill_buf()
                .map_err(|e| GuardError::Io(self.from, e))?;
            if available.is_empty() {
                return Ok(match state {
                    State::Between => None,
                    _ => Some(Frame::Garbage(frame)),
                });
            }
            let mut used = 0;
            let mut ended = false;
            for &byte in available {
                match state.step(byte) {
                    Step::Skip => used += 1,
                    Step::Take => {
                        used += 1;
                        frame.push(byte);
                    }
                    Step::End => {
                        used += 1;
                        frame.push(byte);
                        ended = true;
                    }
                    Step::EndBefore => {
                        used += 1;
                        ended = true;
                    }
                }
                if ended || frame.len() > MAX_LINE {
                    break;
                }
            }
            self.reader.consume(used);
            if frame.len() > MAX_LINE {
                return Err(GuardError::TooLong { from: self.from });
            }
            if ended {
                return Ok(Some(match state {
                    State::Garbage => Frame::Garbage(frame),
                    _ => Frame::Value(frame),
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(stream: &str) -> Vec<Frame> {
        let mut framer = Framer::new(stream.as_bytes(), "client");
        let mut out = Vec::new();
        while let Some(frame) = framer.next_frame().unwrap() {
            out.push(frame);
        }
        out
    }

    fn value(text: &str) -> Frame {
        Frame::Value(text.as_bytes().to_vec())
    }

    #[test]
    fn one_message_a_line_two_on_a_line_and_one_over_several_lines_are_each_a_frame() {
        let stream =
            "{\"a\":1}\n{\"b\":\"}{\\\"]\"} [1,{\"c\":[]}]\n{\n \"method\":\n \"tools/call\"\n}\n";
        assert_eq!(
            frames(stream),
            vec![
                value("{\"a\":1}"),
                value("{\"b\":\"}{\\\"]\"}"),
                value("[1,{\"c\":[]}]"),
                value("{\n \"method\":\n \"tools/call\"\n}"),
            ]
        );
    }

    #[test]
    fn what_cannot_start_a_message_is_garbage_to_the_end_of_its_line() {
        assert_eq!(
            frames("Server started\n{\"a\":1}trailing\n42\n{\"open\":"),
            vec![
                Frame::Garbage(b"Server started".to_vec()),
                value("{\"a\":1}"),
                Frame::Garbage(b"trailing".to_vec()),
                Frame::Garbage(b"42".to_vec()),
                Frame::Garbage(b"{\"open\":".to_vec()),
            ]
        );
    }

    #[test]
    fn a_frame_past_the_cap_ends_the_stream() {
        let huge = format!("[\"{}\"]", "x".repeat(MAX_LINE));
        let mut framer = Framer::new(huge.as_bytes(), "server");
        assert!(matches!(
            framer.next_frame(),
            Err(GuardError::TooLong { from: "server" })
        ));
    }
}
