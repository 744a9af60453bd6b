//! HTTP/1.1 as a relay speaks it to its upstream, and nothing more: a
//! request written in one piece, an answer's head parsed (by `httparse`,
//! hyper's own parser) and its body's framing decoded — a length, chunks,
//! or the connection's end.
//!
//! Every byte here comes from the upstream and is hostile until checked:
//! the head is capped ([`MAX_HEAD`], [`MAX_HEADERS`]), a length is digits
//! only and one value, an answer that gives both a length and chunks is
//! refused (the shape of response splitting), a chunk's size line is
//! capped and its size may not overflow, and trailers are read and
//! dropped within a cap.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use bytes::{Buf, BytesMut};

/// The most bytes an answer's head may take.
pub(super) const MAX_HEAD: usize = 64 << 10;

/// The room a connection reads into (a head, a stream's events).
pub(super) const READ_SIZE: usize = 4 << 10;

/// The most header lines an answer's head may have.
const MAX_HEADERS: usize = 100;

/// The most bytes a chunk's size line (with its extensions) may take.
const MAX_CHUNK_LINE: usize = 4 << 10;

/// The most bytes of trailers read (and dropped) after the last chunk.
const MAX_TRAILERS: usize = 16 << 10;

/// The request's own headers, which the relay writes itself: whatever a
/// caller passed under these names is not sent.
const FRAMING: &[HeaderName] = &[
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// `method` on `target` (an origin-form path and query, already
/// checked) to `host`, with `headers` and `body`: the bytes to write.
///
/// Header names and values cannot carry a line break (`HeaderName` and
/// `HeaderValue` refuse one), so nothing a caller passes can start a
/// header or a request of its own.
pub(super) fn request(
    method: &Method,
    target: &str,
    host: &HeaderValue,
    headers: &HeaderMap,
    body: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + target.len() + 64 * headers.len() + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if FRAMING.contains(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let bodiless = matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
    );
    if !(body.is_empty() && bodiless) {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(body.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// An answer's head.
#[derive(Debug)]
pub(super) struct Head {
    /// Its status.
    pub(super) status: StatusCode,
    /// Its headers.
    pub(super) headers: HeaderMap,
    /// How its body is framed.
    pub(super) framing: Framing,
    /// Whether the connection may carry another request once the body
    /// was read to its end.
    pub(super) keep_alive: bool,
}

/// What the bytes read so far hold.
#[derive(Debug)]
pub(super) enum Parsed {
    /// Not the whole head yet.
    Partial,
    /// An interim (1xx) answer of this many bytes, to skip.
    Interim(usize),
    /// The head, and how many bytes it took.
    Head(usize, Head),
}

/// The answer's head at the start of `read`, if it is all there;
/// `bodiless`: the request was one whose answer has no body (`HEAD`).
///
/// # Errors
///
/// A line for the operator when the head is not HTTP/1.x, too long, or
/// frames its body in a way that cannot be trusted.
pub(super) fn head(read: &[u8], bodiless: bool) -> Result<Parsed, String> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let taken = match response.parse(read) {
        Ok(httparse::Status::Complete(taken)) => taken,
        Ok(httparse::Status::Partial) if read.len() > MAX_HEAD => {
            return Err(format!("the answer's head is over {MAX_HEAD} bytes"));
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(format!("the answer has over {MAX_HEADERS} headers"));
        }
        Err(error) => return Err(format!("the answer's head is not HTTP/1.1: {error}")),
    };
    if taken > MAX_HEAD {
        return Err(format!("the answer's head is over {MAX_HEAD} bytes"));
    }
    let code = response.code.unwrap_or_default();
    let status =
        StatusCode::from_u16(code).map_err(|_| format!("the answer's status {code} is not one"))?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err("the upstream switched protocols, which was not asked".to_owned());
    }
    if status.is_informational() {
        return Ok(Parsed::Interim(taken));
    }
    let http11 = response.version == Some(1);
    let mut headers = HeaderMap::with_capacity(response.headers.len());
    let mut length: Option<u64> = None;
    let mut chunked: Option<bool> = None;
    let mut keep_alive = http11;
    for line in &*response.headers {
        let name = HeaderName::from_bytes(line.name.as_bytes())
            .map_err(|_| format!("the answer's header name {:?} is not one", line.name))?;
        let value = HeaderValue::from_bytes(line.value)
            .map_err(|_| format!("the answer's {name} header cannot be read"))?;
        if name == header::CONTENT_LENGTH {
            let given = content_length(line.value)?;
            if length.is_some_and(|known| known != given) {
                return Err("the answer gives two lengths".to_owned());
            }
            length = Some(given);
        } else if name == header::TRANSFER_ENCODING {
            let last = tokens(line.value).last().unwrap_or_default();
            chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
        } else if name == header::CONNECTION {
            for token in tokens(line.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && !http11 {
                    keep_alive = true;
                }
            }
        }
        headers.append(name, value);
    }
    let framing =
        if bodiless || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
            Framing::Length(0)
        } else {
            match (chunked, length) {
                (Some(_), Some(_)) => {
                    return Err("the answer gives both a length and a transfer coding".to_owned());
                }
                (Some(true), None) if http11 => Framing::Chunked(Chunk::Size),
                (Some(_) | None, None) => {
                    // Framed by the connection's end: nothing after it.
                    keep_alive = false;
                    Framing::UntilClose
                }
                (None, Some(length)) => Framing::Length(length),
            }
        };
    Ok(Parsed::Head(
        taken,
        Head {
            status,
            headers,
            framing,
            keep_alive,
        },
    ))
}

/// A `Content-Length` value: digits, or the same digits repeated in a
/// list.
fn content_length(value: &[u8]) -> Result<u64, String> {
    let mut length = None;
    for token in value.split(|&b| b == b',') {
        let token = token.trim_ascii();
        let digits = !token.is_empty() && token.len() <= 19 && token.iter().all(u8::is_ascii_digit);
        let given = digits
            .then(|| std::str::from_utf8(token).ok()?.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| "the answer's length is not a number".to_owned())?;
        if length.is_some_and(|known| known != given) {
            return Err("the answer gives two lengths".to_owned());
        }
        length = Some(given);
    }
    length.ok_or_else(|| "the answer's length is not a number".to_owned())
}

/// The comma-separated tokens of a header value, trimmed, empty ones
/// left out.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty())
}

/// How an answer's body is framed, and how much of it is still to come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// This many bytes more.
    Length(u64),
    /// Chunks, at this point of one.
    Chunked(Chunk),
    /// Everything up to the connection's end.
    UntilClose,
}

/// Where a chunked body's reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
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
pub(super) enum Piece {
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
    pub(super) fn next(&mut self, read: &mut BytesMut) -> Result<Piece, String> {
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
    pub(super) fn ends_at_close(&self) -> bool {
        matches!(self, Framing::UntilClose)
    }

    /// How much room to read into next: [`READ_SIZE`], or for a large
    /// remaining length larger pieces (a stream's events are small: its
    /// read buffer is what a concurrent stream costs here).
    pub(super) fn read_size(&self) -> usize {
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
                    let Some(line) = line(read, MAX_CHUNK_LINE, "a chunk's size line")? else {
                        return Ok(Piece::More);
                    };
                    let size = chunk_size(&line)?;
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
                    let Some(line) = line(read, left, "the trailers")? else {
                        return Ok(Piece::More);
                    };
                    if line.is_empty() {
                        *self = Chunk::Done;
                    } else {
                        *seen += line.len() + 2;
                    }
                }
            }
        }
    }
}

/// The next line of `read` without its line break, taken out of it
/// (`None`: not all there yet); a line over `cap` bytes is an error
/// naming `what`.
fn line(read: &mut BytesMut, cap: usize, what: &str) -> Result<Option<BytesMut>, String> {
    let Some(end) = read.iter().take(cap + 2).position(|&b| b == b'\n') else {
        if read.len() > cap + 1 {
            return Err(format!("{what} is over {cap} bytes"));
        }
        return Ok(None);
    };
    let mut line = read.split_to(end + 1);
    line.truncate(end);
    if line.last() == Some(&b'\r') {
        line.truncate(end - 1);
    } else {
        return Err(format!("{what} does not end in CRLF"));
    }
    if line.len() > cap {
        return Err(format!("{what} is over {cap} bytes"));
    }
    Ok(Some(line))
}

/// A chunk's size from its size line: hex digits, then optional
/// whitespace and extensions (ignored).
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = line[digits..].trim_ascii_start();
    if digits == 0 || digits > 16 || !(rest.is_empty() || rest[0] == b';') {
        return Err("a chunk's size is not a hex number".to_owned());
    }
    let text = std::str::from_utf8(&line[..digits]).map_err(|e| e.to_string())?;
    u64::from_str_radix(text, 16).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(read: &str) -> Result<Parsed, String> {
        head(read.as_bytes(), false)
    }

    fn whole(read: &str) -> (usize, Head) {
        match parsed(read) {
            Ok(Parsed::Head(taken, head)) => (taken, head),
            other => panic!("{other:?}"),
        }
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
    fn a_request_is_written_with_its_length_and_without_the_callers_framing() {
        let mut headers = HeaderMap::new();
        headers.insert("x-a", HeaderValue::from_static("1"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("999"));
        headers.insert(header::HOST, HeaderValue::from_static("evil"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        let host = HeaderValue::from_static("h:1");
        let out = request(&Method::POST, "/v1/x?q=1", &host, &headers, b"{}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /v1/x?q=1 HTTP/1.1\r\nhost: h:1\r\nx-a: 1\r\ncontent-length: 2\r\n\r\n{}"
        );
        let out = request(&Method::GET, "/", &host, &HeaderMap::new(), b"");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET / HTTP/1.1\r\nhost: h:1\r\n\r\n"
        );
    }

    #[test]
    fn a_head_is_parsed_once_whole_and_interim_answers_are_skipped() {
        assert!(matches!(
            parsed("HTTP/1.1 200 OK\r\nA: b\r\n"),
            Ok(Parsed::Partial)
        ));
        assert!(matches!(
            parsed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"),
            Ok(Parsed::Interim(25))
        ));
        let (taken, head) = whole("HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX: y\r\n\r\nabc");
        assert_eq!(taken, 49);
        assert_eq!(head.status, StatusCode::CREATED);
        assert_eq!(head.headers["x"], "y");
        assert_eq!(head.framing, Framing::Length(3));
        assert!(head.keep_alive);
    }

    #[test]
    fn framing_follows_the_head_and_a_doubtful_one_is_refused() {
        let framing = |text: &str| whole(text).1.framing;
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Framing::Chunked(Chunk::Size)
        );
        assert_eq!(framing("HTTP/1.1 200 OK\r\n\r\n"), Framing::UntilClose);
        assert!(!whole("HTTP/1.1 200 OK\r\n\r\n").1.keep_alive);
        assert!(
            !whole("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                .1
                .keep_alive
        );
        assert!(
            !whole("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
                .1
                .keep_alive
        );
        assert_eq!(
            framing("HTTP/1.1 204 No Content\r\n\r\n"),
            Framing::Length(0)
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 4, 4\r\n\r\n"),
            Framing::Length(4)
        );
        for refused in [
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 4, 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "HTTP/1.1 2000 Odd\r\n\r\n",
            "SMTP ready\r\n\r\n",
        ] {
            assert!(parsed(refused).is_err(), "{refused}");
        }
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
        assert!(parsed(&long).is_err());
        let many = "X: a\r\n".repeat(MAX_HEADERS + 1);
        assert!(parsed(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")).is_err());
    }

    #[test]
    fn chunks_are_decoded_piece_by_piece_and_end_after_their_trailers() {
        let chunked = Framing::Chunked(Chunk::Size);
        let (out, end) = pieces(chunked, "3;x=y\r\nabc\r\n2 \r\nde\r\n0\r\nT: 1\r\n\r\n");
        assert_eq!(out, ["abc", "de"]);
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
