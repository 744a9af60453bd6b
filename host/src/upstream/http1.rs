//! HTTP/1.1 as a relay speaks it to its upstream, and nothing more: a
//! request written in one piece, an answer's head parsed (by `httparse`,
//! hyper's own parser) and its body's framing chosen (decoded by
//! [`crate::http1`]: a length, chunks, or the connection's end).
//!
//! Every byte here comes from the upstream and is hostile until checked:
//! the head is capped ([`MAX_HEAD`], [`MAX_HEADERS`]), a length is digits
//! only and one value, and an answer that gives both a length and chunks
//! is refused (the shape of response splitting).

use crate::http1::{
    content_length, header_slots, take_head, tokens, Chunk, Framing, Lines, MAX_HEADERS,
};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use bytes::{Buf, BytesMut};

/// The most bytes an answer's head may take.
pub(super) const MAX_HEAD: usize = 64 << 10;

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
    /// Not the whole head yet (nothing taken).
    Partial,
    /// An interim (1xx) answer, taken and skipped.
    Interim,
    /// The head.
    Head(Head),
}

/// The answer's head at the start of `read`, taken off it once it is all
/// there (an interim answer is taken and skipped); `bodiless`: the
/// request was one whose answer has no body (`HEAD`). Header values are
/// slices of the head's own bytes, not copies.
///
/// # Errors
///
/// A line for the operator when the head is not HTTP/1.x, too long, or
/// frames its body in a way that cannot be trusted.
pub(super) fn head(read: &mut BytesMut, bodiless: bool) -> Result<Parsed, String> {
    let mut slots = header_slots();
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        read,
        &mut slots,
    );
    let taken = match parsed {
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
        read.advance(taken);
        return Ok(Parsed::Interim);
    }
    let http11 = response.version == Some(1);
    let lines = Lines::of(read, response.headers);
    let count = response.headers.len();
    let head = take_head(read, taken);
    let mut headers = HeaderMap::with_capacity(count);
    let mut length: Option<u64> = None;
    let mut chunked: Option<bool> = None;
    let mut keep_alive = http11;
    for (name, value) in lines.in_head(&head) {
        let name = HeaderName::from_bytes(name).map_err(|_| {
            format!(
                "the answer's header name {:?} is not one",
                String::from_utf8_lossy(name)
            )
        })?;
        let value = HeaderValue::from_maybe_shared(value)
            .map_err(|_| format!("the answer's {name} header cannot be read"))?;
        if name == header::CONTENT_LENGTH {
            let given = content_length(value.as_bytes(), "the answer")?;
            if length.is_some_and(|known| known != given) {
                return Err("the answer gives two lengths".to_owned());
            }
            length = Some(given);
        } else if name == header::TRANSFER_ENCODING {
            let last = tokens(value.as_bytes()).last().unwrap_or_default();
            chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
        } else if name == header::CONNECTION {
            for token in tokens(value.as_bytes()) {
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
    Ok(Parsed::Head(Head {
        status,
        headers,
        framing,
        keep_alive,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(read: &str) -> Result<Parsed, String> {
        taken(read).1
    }

    /// How many bytes `head` takes of `read`, and what it says.
    fn taken(read: &str) -> (usize, Result<Parsed, String>) {
        let mut buffer = BytesMut::from(read);
        let parsed = head(&mut buffer, false);
        (read.len() - buffer.len(), parsed)
    }

    fn whole(read: &str) -> (usize, Head) {
        match taken(read) {
            (taken, Ok(Parsed::Head(head))) => (taken, head),
            other => panic!("{other:?}"),
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
            taken("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"),
            (25, Ok(Parsed::Interim))
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
}
