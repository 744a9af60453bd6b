//! Server-sent events, fed piece by piece as a body arrives: the framing
//! only (`data:` lines joined, a blank line ends an event). Written by hand:
//! this is the whole of the format the providers use, and the bounds below
//! are what matters.
//!
//! The reader is bounded: it counts every byte it takes from the peer and
//! refuses a body longer than [`Limits::max_bytes`] or a line longer than
//! [`Limits::max_line`], so a peer that never ends a line (or never ends the
//! stream) costs at most those amounts of memory. Lines end at `\r\n`, `\n`
//! or a bare `\r`, as the format allows.

#[cfg(test)]
use std::io::{ErrorKind, Read};

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Event {
    /// The `event:` field (empty when absent).
    pub(crate) kind: String,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
    /// The `id:` field, when the event has one (what a client resumes
    /// from).
    pub(crate) id: Option<String>,
}

impl Event {
    /// Emptied, its buffers kept: nothing of it is seen again.
    fn clear(&mut self) {
        self.kind.clear();
        self.data.clear();
        self.id = None;
    }
}

/// How much of a peer's stream the reader accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of the whole body, line endings included.
    pub(crate) max_bytes: u64,
    /// Bytes of one line, its ending excluded.
    pub(crate) max_line: usize,
}

/// Why reading stopped early.
#[derive(Debug)]
pub(crate) enum SseError {
    /// The body could not be read (what the transport said).
    Io(String),
    /// The body went past [`Limits::max_bytes`] (the limit).
    BodyTooLarge(u64),
    /// A line went past [`Limits::max_line`] (the limit).
    LineTooLong(usize),
}

/// Reads one body's events as its bytes are fed in, within [`Limits`].
pub(crate) struct Reader<F> {
    parser: Parser<F>,
    splitter: Splitter,
    /// Bytes fed so far.
    total: u64,
    max_bytes: u64,
}

impl<F: FnMut(Event) -> bool> Reader<F> {
    /// A reader calling `on_event` for each complete event; `on_event`
    /// returns false to stop.
    pub(crate) fn new(limits: Limits, on_event: F) -> Self {
        Reader {
            parser: Parser {
                on_event,
                event: Event::default(),
                has_data: false,
                delivered: 0,
                first_line: true,
                spares: Vec::new(),
            },
            splitter: Splitter {
                line: Vec::new(),
                after_cr: false,
                max_line: limits.max_line,
            },
            total: 0,
            max_bytes: limits.max_bytes,
        }
    }

    /// Takes the next bytes of the body. `Ok(false)`: `on_event` asked to
    /// stop. The bytes inside the body limit are still read as events, so
    /// what arrived before the limit is delivered before the refusal.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<bool, SseError> {
        let allowed = self.max_bytes.saturating_sub(self.total);
        let within = usize::try_from(allowed).map_or(bytes.len(), |a| a.min(bytes.len()));
        self.total = self.total.saturating_add(bytes.len() as u64);
        let parser = &mut self.parser;
        if !self
            .splitter
            .feed(&bytes[..within], &mut |line| parser.line(line))?
        {
            return Ok(false);
        }
        if self.total > self.max_bytes {
            return Err(SseError::BodyTooLarge(self.max_bytes));
        }
        Ok(true)
    }

    /// The body ended: an event still open is delivered too (servers that
    /// close without the final blank line are common). How many events
    /// were delivered in all.
    pub(crate) fn finish(&mut self) -> u64 {
        if !self.splitter.line.is_empty() {
            let line = std::mem::take(&mut self.splitter.line);
            if !self.parser.line(&line) {
                return self.parser.delivered;
            }
        }
        self.parser.finish();
        self.parser.delivered
    }

    /// How many events were delivered so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.parser.delivered
    }

    /// Takes back an event it delivered, once read, so a later event is
    /// read into its buffers rather than new ones (emptied here: nothing
    /// of it is seen again). At most [`Parser::SPARES`] are kept, none
    /// with more room than [`Parser::SPARE_ROOM`].
    pub(crate) fn recycle(&mut self, mut event: Event) {
        let spares = &mut self.parser.spares;
        if spares.len() >= Parser::<F>::SPARES
            || event.data.capacity() + event.kind.capacity() > Parser::<F>::SPARE_ROOM
        {
            return;
        }
        event.clear();
        spares.push(event);
    }
}

/// The size of one read from the peer.
#[cfg(test)]
const CHUNK: usize = 8 * 1024;

/// [`Reader`] over a blocking body, reading at most one byte past the body
/// limit: the unit tests' way in.
#[cfg(test)]
fn read_events(
    mut reader: impl Read,
    limits: Limits,
    on_event: impl FnMut(Event) -> bool,
) -> Result<u64, SseError> {
    let mut events = Reader::new(limits, on_event);
    let mut buffer = vec![0u8; CHUNK];
    loop {
        // Never ask for more than one byte past the limit: enough to know
        // the body is too long.
        let room = limits
            .max_bytes
            .saturating_sub(events.total)
            .saturating_add(1);
        let want = usize::try_from(room).map_or(CHUNK, |room| room.min(CHUNK));
        let read = match reader.read(&mut buffer[..want]) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(SseError::Io(error.to_string())),
        };
        if !events.feed(&buffer[..read])? {
            return Ok(events.delivered());
        }
    }
    Ok(events.finish())
}

/// Cuts bytes into lines at `\r\n`, `\n` and bare `\r`, holding at most one
/// line (of at most `max_line` bytes).
struct Splitter {
    line: Vec<u8>,
    /// The last byte seen was a `\r`: a `\n` right after it belongs to it.
    after_cr: bool,
    max_line: usize,
}

impl Splitter {
    /// Feeds `bytes`, calling `on_line` per complete line; false from
    /// `on_line` stops (and is returned).
    fn feed(
        &mut self,
        mut bytes: &[u8],
        on_line: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, SseError> {
        if std::mem::take(&mut self.after_cr) && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) {
            let keep_going = if self.line.is_empty() {
                // A line whole in these bytes is read where it is.
                self.fits(at)?;
                on_line(&bytes[..at])
            } else {
                self.push(&bytes[..at])?;
                let line = std::mem::take(&mut self.line);
                let keep_going = on_line(&line);
                // Reuse the allocation for the next line.
                self.line = line;
                self.line.clear();
                keep_going
            };
            let ending = if bytes[at] == b'\r' {
                match bytes.get(at + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => {
                        self.after_cr = true;
                        1
                    }
                }
            } else {
                1
            };
            bytes = &bytes[at + ending..];
            if !keep_going {
                return Ok(false);
            }
        }
        self.push(bytes)?;
        Ok(true)
    }

    fn push(&mut self, piece: &[u8]) -> Result<(), SseError> {
        self.fits(piece.len())?;
        self.line.extend_from_slice(piece);
        Ok(())
    }

    /// Whether the line held so far and `more` bytes of it are within
    /// the line limit.
    fn fits(&self, more: usize) -> Result<(), SseError> {
        if self.line.len() + more > self.max_line {
            return Err(SseError::LineTooLong(self.max_line));
        }
        Ok(())
    }
}

/// Turns lines into events.
struct Parser<F> {
    on_event: F,
    event: Event,
    has_data: bool,
    delivered: u64,
    first_line: bool,
    /// Emptied events given back ([`Reader::recycle`]), the next ones'
    /// buffers.
    spares: Vec<Event>,
}

impl<F> Parser<F> {
    /// The most emptied events kept for reuse.
    const SPARES: usize = 8;
    /// The most room (bytes) an emptied event may hold to be kept: a
    /// large event's buffers are let go, not held for the stream's life.
    const SPARE_ROOM: usize = 16 * 1024;
}

impl<F: FnMut(Event) -> bool> Parser<F> {
    /// Takes one line; false when `on_event` asked to stop.
    fn line(&mut self, bytes: &[u8]) -> bool {
        let mut bytes = bytes;
        if std::mem::take(&mut self.first_line) {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        if bytes.is_empty() {
            return self.dispatch();
        }
        if bytes.starts_with(b":") {
            return true;
        }
        // The field is what stands before the first colon (the whole line
        // when it has none), the value what follows it, one space dropped.
        let (field, value) = match memchr::memchr(b':', bytes) {
            Some(at) => (&bytes[..at], &bytes[at + 1..]),
            None => (bytes, &b""[..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        // A colon is never part of a longer character, so the value reads
        // as it did within its line.
        let text = || crate::jsondoc::utf8(value);
        match field {
            b"data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(&text());
                self.has_data = true;
            }
            b"event" => (*text()).clone_into(&mut self.event.kind),
            b"id" if !value.contains(&0) => self.event.id = Some(text().into_owned()),
            _ => {}
        }
        true
    }

    /// Delivers the open event, if it has data; false when `on_event` asked
    /// to stop.
    fn dispatch(&mut self) -> bool {
        if !std::mem::take(&mut self.has_data) {
            // Not delivered, and nothing of it carries over.
            self.event.clear();
            return true;
        }
        let next = self.spares.pop().unwrap_or_default();
        let event = std::mem::replace(&mut self.event, next);
        self.delivered += 1;
        (self.on_event)(event)
    }

    fn finish(&mut self) {
        self.dispatch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: Limits = Limits {
        max_bytes: 1 << 20,
        max_line: 1 << 10,
    };

    fn events(bytes: &[u8], limits: Limits) -> Result<Vec<Event>, SseError> {
        let mut seen = Vec::new();
        read_events(bytes, limits, |e| {
            seen.push(e);
            true
        })?;
        Ok(seen)
    }

    fn event(kind: &str, data: &str) -> Event {
        Event {
            kind: kind.into(),
            data: data.into(),
            id: None,
        }
    }

    #[test]
    fn an_event_read_into_a_recycled_one_keeps_nothing_of_it() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let into = std::rc::Rc::clone(&seen);
        let mut reader = Reader::new(ROOMY, move |event| {
            into.borrow_mut().push(event);
            true
        });
        let mut got = Vec::new();
        for piece in [
            &b"event: big\nid: 7\ndata: a longer first event\n\n"[..],
            b"data: b\n\n",
            // Read into the first event's buffers: nothing of it shows.
            b"data: c1\ndata: c2\n\n",
            // Not delivered, and nothing of it carries over.
            b"event: no data\nid: 9\n\ndata: d\n\n",
        ] {
            reader.feed(piece).unwrap();
            let events: Vec<Event> = seen.borrow_mut().drain(..).collect();
            for event in events {
                got.push(event.clone());
                reader.recycle(event);
            }
        }
        assert_eq!(
            got,
            [
                Event {
                    kind: "big".into(),
                    data: "a longer first event".into(),
                    id: Some("7".into())
                },
                event("", "b"),
                event("", "c1\nc2"),
                event("", "d"),
            ]
        );
        // None larger than this is kept, and at most this many.
        reader.parser.spares.clear();
        reader.recycle(event("", &"x".repeat(Parser::<()>::SPARE_ROOM + 1)));
        assert!(reader.parser.spares.is_empty());
        for _ in 0..20 {
            reader.recycle(event("k", "x"));
        }
        assert_eq!(reader.parser.spares.len(), Parser::<()>::SPARES);
    }

    #[test]
    fn an_event_keeps_its_id() {
        let seen = events(b"id: 7\ndata: x\n\ndata: y\n\nid: a\0b\ndata: z\n\n", ROOMY).unwrap();
        let ids: Vec<Option<&str>> = seen.iter().map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, [Some("7"), None, None]);
    }

    /// A reader that hands out its bytes `step` at a time, so line endings
    /// fall on read boundaries.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(self.bytes.len()).min(buffer.len());
            buffer[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn events_are_framed_by_blank_lines_and_data_lines_join() {
        let text =
            ": comment\r\ndata: one\r\n\r\nevent: delta\ndata: two\ndata: three\n\ndata:four";
        assert_eq!(
            events(text.as_bytes(), ROOMY).unwrap(),
            [
                event("", "one"),
                event("delta", "two\nthree"),
                event("", "four")
            ]
        );
    }

    #[test]
    fn a_bare_carriage_return_ends_a_line_like_a_line_feed() {
        let text = "event: a\rdata: one\rdata: two\r\rdata: three\r\n\r\ndata: four\n\n";
        assert_eq!(
            events(text.as_bytes(), ROOMY).unwrap(),
            [
                event("a", "one\ntwo"),
                event("", "three"),
                event("", "four")
            ]
        );
    }

    #[test]
    fn line_endings_split_across_reads_are_one_ending_each() {
        let text = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n";
        for step in 1..text.len() {
            let mut seen = Vec::new();
            read_events(Trickle { bytes: text, step }, ROOMY, |e| {
                seen.push(e);
                true
            })
            .unwrap();
            assert_eq!(
                seen,
                [event("", "one"), event("", "two"), event("", "three")],
                "reads of {step} bytes"
            );
        }
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_dropped() {
        assert_eq!(
            events(b"\xEF\xBB\xBFdata: x\n\n", ROOMY).unwrap(),
            [event("", "x")]
        );
    }

    #[test]
    fn a_line_longer_than_the_line_limit_is_refused_before_it_is_held() {
        let limits = Limits {
            max_bytes: 1 << 20,
            max_line: 16,
        };
        let exactly = format!("data: {}\n\n", "x".repeat(10));
        assert_eq!(
            events(exactly.as_bytes(), limits).unwrap(),
            [event("", &"x".repeat(10))]
        );
        let over = format!("data: {}\n\n", "x".repeat(11));
        assert!(matches!(
            events(over.as_bytes(), limits),
            Err(SseError::LineTooLong(16))
        ));
        let unterminated = "x".repeat(100_000);
        let mut trickle = Trickle {
            bytes: unterminated.as_bytes(),
            step: 7,
        };
        let result = read_events(&mut trickle, limits, |_| true);
        assert!(matches!(result, Err(SseError::LineTooLong(16))));
        assert!(trickle.bytes.len() > 99_000, "stopped reading at the limit");
    }

    #[test]
    fn a_body_longer_than_the_byte_limit_is_refused_and_reading_stops_there() {
        let body = "data: x\n\n".repeat(1000);
        let limits = Limits {
            max_bytes: 90,
            max_line: 1 << 10,
        };
        let mut reader = body.as_bytes();
        let mut delivered = 0;
        let result = read_events(&mut reader, limits, |_| {
            delivered += 1;
            true
        });
        assert!(matches!(result, Err(SseError::BodyTooLarge(90))));
        assert_eq!(delivered, 10, "the events inside the limit were delivered");
        assert_eq!(
            reader.len(),
            body.len() - 91,
            "read one byte past the limit"
        );
        let exactly = &body.as_bytes()[..90];
        assert_eq!(events(exactly, limits).unwrap().len(), 10);
    }

    #[test]
    fn a_stream_without_data_lines_delivers_no_events() {
        let count = read_events(
            &b": keep-alive\n\nevent: ping\n\nretry: 10\n\n"[..],
            ROOMY,
            |_| true,
        )
        .unwrap();
        assert_eq!(count, 0);
        assert_eq!(read_events(&b""[..], ROOMY, |_| true).unwrap(), 0);
    }

    #[test]
    fn returning_false_stops_at_that_event() {
        let mut seen = 0;
        let count = read_events(&b"data: 1\n\ndata: 2\n\ndata: 3\n\n"[..], ROOMY, |_| {
            seen += 1;
            seen < 2
        })
        .unwrap();
        assert_eq!((seen, count), (2, 2));
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            events(b"data: a\xFFb\n\n", ROOMY).unwrap(),
            [event("", "a\u{FFFD}b")]
        );
        // A stray byte in a field's name makes it no field; a colon in a
        // value, or a value with no space after the colon, reads as written.
        assert_eq!(
            events(b"dat\xC3: x\ndata:a:\xC3\nevent:k\xFF\n\n", ROOMY).unwrap(),
            [event("k\u{FFFD}", "a:\u{FFFD}")]
        );
    }
}
