//! A client's request head, read: parsed by `httparse` (hyper's own
//! parser) within the head's cap, its body's framing chosen, and what
//! cannot be trusted refused before any service sees it: a body framed
//! two ways (a length and a transfer coding, two different lengths: the
//! shapes of request smuggling), a length that is not digits, a transfer
//! coding other than `chunked` alone, a head that is not HTTP/1.x, a
//! name or value that is not one.

use crate::http1::{
    at, content_length, header_slots, take_head, tokens, Chunk, Framing, Lines, MAX_HEADERS,
};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version};
use bytes::BytesMut;

/// A request's head, read.
pub(super) struct Head {
    pub(super) method: Method,
    pub(super) uri: Uri,
    pub(super) version: Version,
    pub(super) headers: HeaderMap,
    pub(super) body: Framing,
    pub(super) keep_alive: bool,
    pub(super) expects_continue: bool,
}

/// A request refused before it reached the service.
#[derive(Debug)]
pub(super) struct Refusal(pub(super) StatusCode, pub(super) String);

fn bad(why: String) -> Refusal {
    Refusal(StatusCode::BAD_REQUEST, why)
}

/// What a head's header lines say of its body and its connection.
#[derive(Debug, Default)]
struct Fields {
    length: Option<u64>,
    chunked: bool,
    keep_alive: bool,
    expects_continue: bool,
}

impl Fields {
    /// Takes in the header line `name: value` of a request of HTTP/1.1
    /// (`http11`) or 1.0.
    fn read(&mut self, name: &HeaderName, value: &[u8], http11: bool) -> Result<(), Refusal> {
        if *name == header::CONTENT_LENGTH {
            let given = content_length(value, "the request").map_err(bad)?;
            if self.length.is_some_and(|known| known != given) {
                return Err(bad("the request gives two lengths".to_owned()));
            }
            self.length = Some(given);
        } else if *name == header::TRANSFER_ENCODING {
            if !http11 {
                return Err(bad("an HTTP/1.0 request gives a transfer coding".to_owned()));
            }
            let mut codings = tokens(value);
            let chunked_alone = codings
                .next()
                .is_some_and(|coding| coding.eq_ignore_ascii_case(b"chunked"))
                && codings.next().is_none();
            if self.chunked || !chunked_alone {
                return Err(Refusal(
                    StatusCode::NOT_IMPLEMENTED,
                    "the request's transfer coding is not `chunked` alone".to_owned(),
                ));
            }
            self.chunked = true;
        } else if *name == header::CONNECTION {
            for token in tokens(value) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && !http11 {
                    self.keep_alive = true;
                }
            }
        } else if *name == header::EXPECT {
            self.expects_continue = http11 && value.eq_ignore_ascii_case(b"100-continue");
        }
        Ok(())
    }
}

/// The request's head at the start of `read`, taken from it once it is
/// all there (at most `max` bytes). Its target and header values are
/// slices of the head's own bytes, not copies.
pub(super) fn head(read: &mut BytesMut, max: usize) -> Result<Option<Head>, Refusal> {
    let too_long = || {
        Refusal(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request's head is over {max} bytes"),
        )
    };
    let mut slots = header_slots();
    let mut request = httparse::Request::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut request,
        read,
        &mut slots,
    );
    let taken = match parsed {
        Ok(httparse::Status::Complete(taken)) if taken > max => return Err(too_long()),
        Ok(httparse::Status::Complete(taken)) => taken,
        Ok(httparse::Status::Partial) if read.len() > max => return Err(too_long()),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refusal(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("the request has over {MAX_HEADERS} headers"),
            ))
        }
        Err(httparse::Error::Version) => {
            return Err(Refusal(
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                "the request is not HTTP/1.x".to_owned(),
            ))
        }
        Err(error) => return Err(bad(format!("the request's head cannot be read: {error}"))),
    };
    let method = Method::from_bytes(request.method.unwrap_or_default().as_bytes())
        .map_err(|_| bad("the request's method is not one".to_owned()))?;
    let http11 = request.version == Some(1);
    // Where the target and each line lie in `read`, so they can be taken
    // as slices of the head once it is taken off.
    let target = at(read, request.path.unwrap_or_default().as_bytes());
    let lines = Lines::of(read, request.headers);
    let count = request.headers.len();
    let head = take_head(read, taken);
    let uri = Uri::from_maybe_shared(head.slice(target))
        .map_err(|_| bad("the request's target is not a URI".to_owned()))?;
    let mut headers = HeaderMap::with_capacity(count);
    let mut fields = Fields {
        keep_alive: http11,
        ..Fields::default()
    };
    for (name, value) in lines.in_head(&head) {
        let name = HeaderName::from_bytes(name).map_err(|_| {
            bad(format!(
                "the request's header name {:?} is not one",
                String::from_utf8_lossy(name)
            ))
        })?;
        let value = HeaderValue::from_maybe_shared(value)
            .map_err(|_| bad(format!("the request's {name} header cannot be read")))?;
        fields.read(&name, value.as_bytes(), http11)?;
        headers.append(name, value);
    }
    let Fields {
        length,
        chunked,
        keep_alive,
        expects_continue,
    } = fields;
    let body = match (chunked, length) {
        (true, Some(_)) => {
            return Err(bad(
                "the request gives both a length and a transfer coding".to_owned()
            ))
        }
        (true, None) => Framing::Chunked(Chunk::Size),
        (false, length) => Framing::Length(length.unwrap_or(0)),
    };
    Ok(Some(Head {
        method,
        uri,
        version: if http11 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        },
        headers,
        body,
        keep_alive,
        expects_continue,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `head` takes of `read`: how many bytes, and the head.
    fn parsed(read: &str) -> Result<Option<(usize, Head)>, Refusal> {
        let mut buffer = BytesMut::from(read);
        let head = head(&mut buffer, 1024)?;
        Ok(head.map(|head| (read.len() - buffer.len(), head)))
    }

    fn whole(read: &str) -> Head {
        match parsed(read) {
            Ok(Some((_, head))) => head,
            Ok(None) => panic!("partial: {read:?}"),
            Err(refusal) => panic!("{refusal:?}"),
        }
    }

    fn refused(read: &str) -> StatusCode {
        match parsed(read) {
            Err(Refusal(status, _)) => status,
            Ok(_) => panic!("taken: {read:?}"),
        }
    }

    #[test]
    fn a_request_head_is_read_whole_with_its_body_framing() {
        assert!(matches!(parsed("POST /v1 HTTP/1.1\r\nA: b\r\n"), Ok(None)));
        let (taken, head) = parsed("POST /v1?x=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap()
            .unwrap();
        assert_eq!(taken, 44);
        assert_eq!(head.method, Method::POST);
        assert_eq!(head.uri, "/v1?x=1");
        assert_eq!(head.body, Framing::Length(3));
        assert!(head.keep_alive && !head.expects_continue);
        let head =
            whole("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
        assert_eq!(head.body, Framing::Chunked(Chunk::Size));
        assert!(head.expects_continue);
        assert_eq!(whole("GET / HTTP/1.1\r\n\r\n").body, Framing::Length(0));
        assert!(!whole("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!whole("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(whole("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
    }

    #[test]
    fn a_request_framed_two_ways_or_not_http_1_is_refused() {
        let bad_request = StatusCode::BAD_REQUEST;
        for (request, status) in [
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", bad_request),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", bad_request),
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", bad_request),
            ("POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n", bad_request),
            ("POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n", bad_request),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", bad_request),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", StatusCode::NOT_IMPLEMENTED),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", StatusCode::NOT_IMPLEMENTED),
            ("GET / HTTP/2.0\r\n\r\n", StatusCode::HTTP_VERSION_NOT_SUPPORTED),
            ("GET /\x01 HTTP/1.1\r\n\r\n", bad_request),
            ("G(T / HTTP/1.1\r\n\r\n", bad_request),
        ] {
            assert_eq!(refused(request), status, "{request:?}");
        }
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(1024));
        assert_eq!(refused(&long), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        let many = "X: a\r\n".repeat(MAX_HEADERS + 1);
        assert_eq!(
            head(
                &mut BytesMut::from(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
                1 << 20
            )
            .err()
            .map(|r| r.0),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
    }
}
