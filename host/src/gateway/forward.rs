//! The upstream call as the gateway makes it: the client's body (with
//! what the gates changed spliced in), the client's headers less its key,
//! its hop-by-hop headers and `accept-encoding` (the gateway reads what it
//! judges), plus the gateway's own key; the upstream's answer as it came —
//! status, headers and body — read within the configured limits.
//!
//! There is no retry here by default: a 429 or a 5xx goes back to the
//! client with its `retry-after`, and the client's SDK retries as it
//! would against the upstream itself. `[serve] upstream_retries` (or
//! `--upstream-retries N`) retries a 429 / 5xx itself up to N times,
//! honouring `retry-after` within the read timeout; each retry is counted
//! in `/metrics`.

use crate::providers::HttpSettings;
use crate::upstream::{header_map, Client, ClientError, Reply, ReplyBody};
use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue};
use std::time::Duration;

/// The connection's own headers (hop-by-hop): never passed on, either
/// way.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
];

/// Whether a request header is one the gateway writes itself, whatever a
/// gate set: the connection's (see [`HOP_BY_HOP`]) and the body's framing
/// (`name` in lower case).
fn framing(name: &str) -> bool {
    HOP_BY_HOP.contains(&name) || matches!(name, "host" | "content-length")
}

/// Request headers that never go upstream besides the [`framing`] ones
/// (recomputed): the client's credentials, the gateway's session header,
/// and `accept-encoding` (the gateway reads the reply it judges, so it
/// asks for it uncompressed).
const NOT_FORWARDED: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
    "cookie",
    "accept-encoding",
    super::sessions::SESSION_HEADER,
];

/// Reply headers that never go back to the client as they came besides
/// the [`HOP_BY_HOP`] ones: the body's framing (the gateway frames what it
/// sends; a body it rewrote has another length) and `set-cookie`.
const NOT_RETURNED: &[&str] = &["content-length", "content-encoding", "set-cookie"];

/// Which headers carry the gateway's key for one wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyStyle {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// `x-api-key: KEY` (and `anthropic-version` when the client gave none).
    Anthropic,
}

/// The client of one upstream.
pub(super) struct Forwarder {
    client: Result<Client, ClientError>,
    key: Option<HeaderValue>,
    style: KeyStyle,
    retries: u32,
    max_body: u64,
}

/// Why the upstream gave no answer: the line, and whether the request
/// may have reached it (`false`: no connection was made, so nothing was
/// billed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct ForwardError(pub(super) String, pub(super) bool);

impl Forwarder {
    /// A client for the upstream at `url` (its base URL: each request
    /// names its endpoint under it), sending `key` the way `style` says.
    pub(super) fn new(
        url: &str,
        key: Option<String>,
        style: KeyStyle,
        http: &HttpSettings,
        retries: u32,
    ) -> Self {
        let key = key.and_then(|key| {
            let value = match style {
                KeyStyle::Bearer => format!("Bearer {key}"),
                KeyStyle::Anthropic => key,
            };
            let mut value = HeaderValue::from_str(&value).ok()?;
            value.set_sensitive(true);
            Some(value)
        });
        Forwarder {
            client: Client::new(url, http.connect_timeout, Some(http.read_timeout)),
            key,
            style,
            retries,
            max_body: http.max_body_bytes,
        }
    }

    /// The most bytes of a reply body read.
    pub(super) fn max_body(&self) -> u64 {
        self.max_body
    }

    /// The headers that go upstream for a client's `headers` (its key and
    /// the headers above dropped; `overrides` — what a gate set — win).
    pub(super) fn upstream_headers(headers: &HeaderMap) -> Vec<(String, String)> {
        headers
            .iter()
            .filter(|(name, _)| !NOT_FORWARDED.contains(&name.as_str()) && !framing(name.as_str()))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect()
    }

    /// The request's headers: `headers` as judged, the content type, and
    /// the gateway's key the way the wire carries it.
    fn request_headers(&self, headers: &[(String, String)]) -> Result<HeaderMap, ClientError> {
        let mut map = header_map(
            headers
                .iter()
                .filter(|(name, _)| {
                    !name.eq_ignore_ascii_case("content-type")
                        && !framing(&name.to_ascii_lowercase())
                })
                .map(|(name, value)| (name.as_str(), value.as_str())),
        )?;
        map.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        match (self.style, &self.key) {
            (KeyStyle::Bearer, Some(key)) => {
                map.insert(header::AUTHORIZATION, key.clone());
            }
            (KeyStyle::Anthropic, key) => {
                if let Some(key) = key {
                    map.insert("x-api-key", key.clone());
                }
                if !map.contains_key("anthropic-version") {
                    map.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
                }
            }
            (KeyStyle::Bearer, None) => {}
        }
        Ok(map)
    }

    /// POSTs `body` with `headers` (and `query`, as the client sent it) to
    /// the upstream's endpoint `path`: its response, whatever the status. 429 and 5xx are
    /// retried only as configured, `on_retry` told of each (the status, and
    /// which retry it is).
    ///
    /// # Errors
    ///
    /// [`ForwardError`] when no response came (the connection failed or
    /// timed out), in one line.
    pub(super) async fn send(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &[(String, String)],
        body: Bytes,
        on_retry: &(dyn Fn(u16, u32) + Send + Sync),
    ) -> Result<Reply, ForwardError> {
        let unsent = |error: &ClientError| ForwardError(error.to_string(), false);
        let client = self.client.as_ref().map_err(unsent)?;
        let headers = self.request_headers(headers).map_err(|e| unsent(&e))?;
        let mut attempt = 0;
        loop {
            let response = client
                .post(path, query, headers.clone(), body.clone())
                .await
                .map_err(|e| {
                    ForwardError(
                        format!("the upstream did not answer: {e}"),
                        e.may_have_reached(),
                    )
                })?;
            let status = response.status.as_u16();
            let retryable = status == 429 || status >= 500;
            if !retryable || attempt >= self.retries {
                return Ok(response);
            }
            attempt += 1;
            on_retry(status, attempt);
            let wait = response
                .headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(
                    Duration::from_millis(500 << attempt.min(6)),
                    Duration::from_secs_f64,
                )
                .min(Duration::from_secs(30));
            tokio::time::sleep(wait).await;
        }
    }
}

/// The reply headers that go back to the client (see [`NOT_RETURNED`]
/// and [`HOP_BY_HOP`]).
pub(super) fn returned_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if NOT_RETURNED.contains(&name.as_str()) || HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        // A value is a slice of the upstream's head: shared, not copied.
        out.append(name.clone(), value.clone());
    }
    out
}

/// Reads a whole reply body, at most `limit` bytes.
///
/// # Errors
///
/// One line when it is longer or breaks off.
pub(super) async fn read_body(mut body: ReplyBody, limit: u64) -> Result<Bytes, ForwardError> {
    let mut bytes = Vec::new();
    loop {
        match body.chunk().await {
            Ok(Some(piece)) => {
                if (bytes.len() + piece.len()) as u64 > limit {
                    return Err(ForwardError(
                        format!("the upstream's reply is over the limit of {limit} bytes"),
                        true,
                    ));
                }
                if bytes.is_empty() {
                    bytes.reserve(piece.len());
                }
                bytes.extend_from_slice(&piece);
            }
            Ok(None) => return Ok(Bytes::from(bytes)),
            Err(error) => {
                return Err(ForwardError(
                    format!("the upstream's reply broke off: {error}"),
                    true,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderName;

    fn map(names: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for name in names {
            map.insert(
                HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                HeaderValue::from_static("v"),
            );
        }
        map
    }

    #[test]
    fn credentials_the_connection_s_and_the_framing_headers_stay_behind() {
        let sent = Forwarder::upstream_headers(&map(&[
            "authorization",
            "x-api-key",
            "cookie",
            "host",
            "connection",
            "te",
            "content-length",
            "accept-encoding",
            super::super::sessions::SESSION_HEADER,
            "anthropic-version",
            "x-custom",
        ]));
        let names: Vec<&str> = sent.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["anthropic-version", "x-custom"]);
        assert!(framing("host") && framing("proxy-connection") && !framing("x-custom"));
    }

    #[test]
    fn the_reply_s_framing_and_cookies_are_not_returned() {
        let back = returned_headers(&map(&[
            "connection",
            "transfer-encoding",
            "content-length",
            "content-encoding",
            "set-cookie",
            "retry-after",
            "x-request-id",
        ]));
        let mut names: Vec<&str> = back.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["retry-after", "x-request-id"]);
    }
}
