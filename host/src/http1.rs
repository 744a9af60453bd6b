//! HTTP/1.1 message bodies as both relays' ends read them: a length,
//! chunks, or the connection's end, decoded piece by piece as the bytes
//! come (the listener's requests, the upstream's answers; each end
//! parses its own heads with `httparse`, hyper's own parser).
//!
//! Every byte here is hostile until checked: a length is digits only and
//! one value, a chunk's size line is capped ([`MAX_CHUNK_LINE`]) and its
//! size may not overflow, the line breaks are CRLF, and trailers are read
//! and dropped within a cap ([`MAX_TRAILERS`]).

use bytes::{Buf, Bytes, BytesMut};
use std::ops::Range;

/// The room a connection reads into (a head, a stream's events).
pub(crate) const READ_SIZE: usize = 4 << 10;

/// The most header lines a head may have (hyper's own default).
pub(crate) const MAX_HEADERS: usize = 100;

/// Room for a head's header lines, left unwritten until parsed into
/// (httparse's `parse_*_with_uninit_headers`) rather than 3.2 KB zeroed
/// for every head.
pub(crate) fn header_slots<'b>() -> [std::mem::MaybeUninit<httparse::Header<'b>>; MAX_HEADERS] {
    [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS]
}

/// The most bytes a chunk's size line (with its extensions) may take.
const MAX_CHUNK_LINE: usize = 4 << 10;

/// The most bytes of trailers read (and dropped) after the last chunk.
const MAX_TRAILERS: usize = 16 << 10;

/// A `Content-Length` value: digits, or the same digits repeated in a
/// list; `whose`: the message's name in an error (`the answer`).
///
/// # Errors
///
/// A line naming `whose` when the value is not one length.
pub(crate) fn content_length(value: &[u8], whose: &str) -> Result<u64, String> {
    let mut length = None;
    for token in value.split(|&b| b == b',') {
        let token = token.trim_ascii();
        let digits = !token.is_empty() && token.len() <= 19 && token.iter().all(u8::is_ascii_digit);
        let given = digits
            .then(|| std::str::from_utf8(token).ok()?.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| format!("{whose}'s length is not a number"))?;
        if length.is_some_and(|known| known != given) {
            return Err(format!("{whose} gives two lengths"));
        }
        length = Some(given);
    }
    length.ok_or_else(|| format!("{whose}'s length is not a number"))
}

/// The comma-separated tokens of a header value, trimmed, empty ones
/// left out.
pub(crate) fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty())
}

/// Where a parsed head's header lines lie in the bytes it was parsed
/// from, so that once the head is taken off its buffer ([`take_head`])
/// each name and value is read as a slice of the head: no copy a value.
///
/// As many places as the head has lines, not room for [`MAX_HEADERS`]
/// filled first (that was 3.2 KB written for every head).
pub(crate) struct Lines {
    places: Vec<(Range<usize>, Range<usize>)>,
}

impl Lines {
    /// The places of `lines` (parsed out of `read`) in `read`.
    pub(crate) fn of(read: &[u8], lines: &[httparse::Header<'_>]) -> Self {
        Lines {
            places: lines
                .iter()
                .take(MAX_HEADERS)
                .map(|line| (at(read, line.name.as_bytes()), at(read, line.value)))
                .collect(),
        }
    }

    /// Each line's name and value, as slices of `head` (the bytes the
    /// lines were parsed from, frozen).
    pub(crate) fn in_head<'a>(
        &'a self,
        head: &'a Bytes,
    ) -> impl Iterator<Item = (&'a [u8], Bytes)> {
        self.places
            .iter()
            .map(|(name, value)| (&head[name.clone()], head.slice(value.clone())))
    }
}

/// The first `taken` bytes of `read` (a head just parsed), taken off it
/// into an allocation of their own: one copy for the whole head, and the
/// slices made of it (its header values) hold only the head, never the
/// connection's read buffer, however long they live.
pub(crate) fn take_head(read: &mut BytesMut, taken: usize) -> Bytes {
    let head = Bytes::copy_from_slice(&read[..taken]);
    read.advance(taken);
    head
}

/// Where `part`, a slice of `read`, lies in it; an empty range for a
/// part that does not lie in it (a parser's default `""`), never one
/// that would slice past the head.
pub(crate) fn at(read: &[u8], part: &[u8]) -> Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(read.as_ptr() as usize);
    if start <= read.len() && part.len() <= read.len() - start {
        start..start + part.len()
    } else {
        0..0
    }
}

/// How a message's body is framed, and how much of it is still to come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// This many bytes more.
    Length(u64),
    /// Chunks, at this point of one.
    Chunked(Chunk),
    /// Everything up to the connection's end.
    UntilClose,
}

/// Where a chunked body's reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// At a chunk's size line.
    Size,
    /// Within a chunk's data: this many bytes more.
    Data(u64),
    /// At the line break after a chunk's data.
    DataEnd,
    /// After the last chunk, at the trailers: this many read.
    Trailers(usize),
    /// The body ended.
    Done,
}

/// What a body's bytes read so far give.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A piece of the body.
    Data(Bytes),
    /// Nothing until more is read.
    More,
    /// The body ended.
    End,
}

impl Framing {
    /// The next piece of the body out of `read` (what is taken is
    /// removed from it).
    ///
    /// # Errors
    ///
    /// A line for the operator when the chunks are malformed.
    pub(crate) fn next(&mut self, read: &mut BytesMut) -> Result<Piece, String> {
        match self {
            Framing::Length(0) => Ok(Piece::End),
            Framing::Length(left) => {
                if read.is_empty() {
                    return Ok(Piece::More);
                }
                let take = usize::try_from(*left).map_or(read.len(), |left| left.min(read.len()));
                *left -= take as u64;
                Ok(Piece::Data(read.split_to(take).freeze()))
            }
            Framing::UntilClose => {
                if read.is_empty() {
                    return Ok(Piece::More);
                }
                Ok(Piece::Data(read.split().freeze()))
            }
            Framing::Chunked(chunk) => chunk.next(read),
        }
    }

    /// Whether the connection's end ends the body (else the answer was
    /// cut short).
    pub(crate) fn ends_at_close(&self) -> bool {
        matches!(self, Framing::UntilClose)
    }

    /// How much room to read into next: [`READ_SIZE`], or for a large
    /// remaining length larger pieces (a stream's events are small: its
    /// read buffer is what a concurrent stream costs here).
    pub(crate) fn read_size(&self) -> usize {
        const LARGE: usize = 64 << 10;
        match self {
            Framing::Length(left) => {
                usize::try_from(*left).map_or(LARGE, |left| left.clamp(READ_SIZE, LARGE))
            }
            _ => READ_SIZE,
        }
    }
}

impl Chunk {
    /// The next piece of a chunked body out of `read`.
    fn next(&mut self, read: &mut BytesMut) -> Result<Piece, String> {
        loop {
            match self {
                Chunk::Done => return Ok(Piece::End),
                Chunk::Size => {
                    let Some((length, taken)) = line(read, MAX_CHUNK_LINE, "a chunk's size line")?
                    else {
                        return Ok(Piece::More);
                    };
                    let size = chunk_size(&read[..length])?;
                    read.advance(taken);
                    *self = if size == 0 {
                        Chunk::Trailers(0)
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    if read.is_empty() {
                        return Ok(Piece::More);
                    }
                    let take =
                        usize::try_from(*left).map_or(read.len(), |left| left.min(read.len()));
                    *left -= take as u64;
                    if *left == 0 {
                        *self = Chunk::DataEnd;
                    }
                    return Ok(Piece::Data(read.split_to(take).freeze()));
                }
                Chunk::DataEnd => {
                    if read.len() < 2 {
                        return Ok(Piece::More);
                    }
                    if &read[..2] != b"\r\n" {
                        return Err("a chunk's data runs past its size".to_owned());
                    }
                    read.advance(2);
                    *self = Chunk::Size;
                }
                Chunk::Trailers(seen) => {
                    let left = MAX_TRAILERS.saturating_sub(*seen);
                    let Some((length, taken)) = line(read, left, "the trailers")? else {
                        return Ok(Piece::More);
                    };
                    read.advance(taken);
                    if length == 0 {
                        *self = Chunk::Done;
                    } else {
                        *seen += length + 2;
                    }
                }
            }
        }
    }
}

/// The next line at the start of `read`: its length without its line
/// break, and its length with it (what the caller takes out of `read`
/// once it has read the line); `None`: not all there yet. A line over
/// `cap` bytes is an error naming `what`.
fn line(read: &[u8], cap: usize, what: &str) -> Result<Option<(usize, usize)>, String> {
    let Some(end) = read.iter().take(cap + 2).position(|&b| b == b'\n') else {
        if read.len() > cap + 1 {
            return Err(format!("{what} is over {cap} bytes"));
        }
        return Ok(None);
    };
    if end == 0 || read[end - 1] != b'\r' {
        return Err(format!("{what} does not end in CRLF"));
    }
    let length = end - 1;
    if length > cap {
        return Err(format!("{what} is over {cap} bytes"));
    }
    Ok(Some((length, end + 1)))
}

/// A chunk's size from its size line: hex digits, then optional
/// whitespace and extensions (ignored).
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = line[digits..].trim_ascii_start();
    if digits == 0 || digits > 16 || !(rest.is_empty() || rest[0] == b';') {
        return Err("a chunk's size is not a hex number".to_owned());
    }
    // At most 16 hex digits: 64 bits, no overflow.
    Ok(line[..digits].iter().fold(0, |size, &digit| {
        size << 4 | u64::from(char::from(digit).to_digit(16).unwrap_or(0))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_placed_in_its_head_and_a_stranger_nowhere() {
        let read = b"GET /x HTTP/1.1\r\n".to_vec();
        assert_eq!(at(&read, &read[4..6]), 4..6);
        assert_eq!(at(&read, &read[read.len()..]), read.len()..read.len());
        let elsewhere = b"/elsewhere".to_vec();
        assert_eq!(at(&read, &elsewhere), 0..0);
        assert_eq!(at(&read, b""), 0..0);
    }

    /// Every piece of `body` under `framing`, until its end or `More`.
    fn pieces(mut framing: Framing, body: &str) -> (Vec<String>, Result<Piece, String>) {
        let mut read = BytesMut::from(body);
        let mut out = Vec::new();
        loop {
            match framing.next(&mut read) {
                Ok(Piece::Data(bytes)) => out.push(String::from_utf8_lossy(&bytes).into_owned()),
                other => return (out, other),
            }
        }
    }

    #[test]
    fn a_length_is_digits_and_one_value() {
        assert_eq!(content_length(b"4", "it"), Ok(4));
        assert_eq!(content_length(b"4, 4", "it"), Ok(4));
        for refused in [
            &b"4, 5"[..],
            b"+4",
            b"",
            b" ",
            b"0x4",
            b"99999999999999999999",
        ] {
            assert!(content_length(refused, "it").is_err(), "{refused:?}");
        }
        assert_eq!(
            content_length(b"4,5", "the request"),
            Err("the request gives two lengths".to_owned())
        );
    }

    #[test]
    fn chunks_are_decoded_piece_by_piece_and_end_after_their_trailers() {
        let chunked = Framing::Chunked(Chunk::Size);
        let (out, end) = pieces(chunked, "3;x=y\r\nabc\r\n2 \r\nde\r\n0\r\nT: 1\r\n\r\n");
        assert_eq!(out, ["abc", "de"]);
        assert_eq!(end, Ok(Piece::End));
        // Sizes in either case of hex.
        let long = "x".repeat(0x1f);
        let body = format!("A\r\n0123456789\r\n1f\r\n{long}\r\n0\r\n\r\n");
        let (out, end) = pieces(chunked, &body);
        assert_eq!(out, ["0123456789", long.as_str()]);
        assert_eq!(end, Ok(Piece::End));
        let (out, end) = pieces(chunked, "5\r\nab");
        assert_eq!(out, ["ab"]);
        assert_eq!(end, Ok(Piece::More));
        let (out, end) = pieces(Framing::Length(3), "abcdef");
        assert_eq!((out, end), (vec!["abc".to_owned()], Ok(Piece::End)));
    }

    #[test]
    fn malformed_chunks_are_refused() {
        let chunked = Framing::Chunked(Chunk::Size);
        for refused in [
            "g\r\n",
            "\r\n",
            "3\r\nabcX\r\n",
            "11111111111111111\r\n",
            "3\nabc\r\n",
            "-1\r\n",
        ] {
            assert!(pieces(chunked, refused).1.is_err(), "{refused:?}");
        }
        let long_line = format!("1;{}\r\n", "x".repeat(MAX_CHUNK_LINE));
        assert!(pieces(chunked, &long_line).1.is_err());
        let no_end = "1".repeat(MAX_CHUNK_LINE + 2);
        assert!(pieces(chunked, &no_end).1.is_err());
        let trailers = format!("0\r\n{}", "T: a\r\n".repeat(MAX_TRAILERS));
        assert!(pieces(chunked, &trailers).1.is_err());
    }
}
