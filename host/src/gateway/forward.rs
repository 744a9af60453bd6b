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
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;

/// Request headers that never go upstream: the client's credentials,
/// the connection's own headers, the body's framing (recomputed), the
/// gateway's session header, and `accept-encoding` (the gateway reads
/// the reply it judges, so it asks for it uncompressed).
const NOT_FORWARDED: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
    "cookie",
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "content-length",
    "accept-encoding",
    super::sessions::SESSION_HEADER,
];

/// Reply headers that never go back to the client as they came: the
/// connection's own and the body's framing (the gateway frames what it
/// sends; a body it rewrote has another length).
const NOT_RETURNED: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "content-length",
    "content-encoding",
    "set-cookie",
];

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
    client: Result<reqwest::Client, String>,
    url: String,
    key: Option<String>,
    style: KeyStyle,
    retries: u32,
    max_body: u64,
    /// Each endpoint's URL, parsed the first time it is asked for.
    parsed: std::sync::Mutex<std::collections::HashMap<String, reqwest::Url>>,
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
        url: String,
        key: Option<String>,
        style: KeyStyle,
        http: &HttpSettings,
        retries: u32,
    ) -> Self {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(http.connect_timeout)
            .read_timeout(http.read_timeout)
            .no_gzip()
            .build()
            .map_err(|e| format!("cannot set up the upstream client: {e}"));
        Forwarder {
            client,
            url,
            key,
            style,
            retries,
            max_body: http.max_body_bytes,
            parsed: std::sync::Mutex::default(),
        }
    }

    /// The URL of endpoint `path` (with the client's `query`): parsed
    /// once per endpoint, not once per request.
    fn url(&self, path: &str, query: Option<&str>) -> Result<reqwest::Url, ForwardError> {
        let parse = |text: String| {
            reqwest::Url::parse(&text).map_err(|e| {
                ForwardError(format!("the upstream URL {text} is not a URL: {e}"), false)
            })
        };
        if let Some(query) = query.filter(|q| !q.is_empty()) {
            return parse(format!("{}{path}?{query}", self.url));
        }
        let mut parsed = self
            .parsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(url) = parsed.get(path) {
            return Ok(url.clone());
        }
        let url = parse(format!("{}{path}", self.url))?;
        parsed.insert(path.to_owned(), url.clone());
        Ok(url)
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
            .filter(|(name, _)| !NOT_FORWARDED.contains(&name.as_str()))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect()
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
    ) -> Result<reqwest::Response, ForwardError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ForwardError(e.clone(), false))?;
        let url = self.url(path, query)?;
        let mut attempt = 0;
        loop {
            let mut request = client
                .post(url.clone())
                .header("content-type", "application/json");
            for (name, value) in headers {
                if name.eq_ignore_ascii_case("content-type") {
                    continue;
                }
                request = request.header(name.as_str(), value.as_str());
            }
            match (self.style, &self.key) {
                (KeyStyle::Bearer, Some(key)) => request = request.bearer_auth(key),
                (KeyStyle::Anthropic, key) => {
                    if let Some(key) = key {
                        request = request.header("x-api-key", key.as_str());
                    }
                    if !headers
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case("anthropic-version"))
                    {
                        request = request.header("anthropic-version", "2023-06-01");
                    }
                }
                (KeyStyle::Bearer, None) => {}
            }
            let response = request.body(body.clone()).send().await.map_err(|e| {
                ForwardError(
                    format!(
                        "the upstream did not answer: {}",
                        crate::types::one_line(&error_chain(&e))
                    ),
                    !e.is_connect(),
                )
            })?;
            let status = response.status().as_u16();
            let retryable = status == 429 || status >= 500;
            if !retryable || attempt >= self.retries {
                return Ok(response);
            }
            attempt += 1;
            on_retry(status, attempt);
            let wait = response
                .headers()
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

/// The reply headers that go back to the client (see [`NOT_RETURNED`]).
pub(super) fn returned_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        if NOT_RETURNED.contains(&name.as_str()) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append(name, value);
        }
    }
    out
}

/// Reads a whole reply body, at most `limit` bytes.
///
/// # Errors
///
/// One line when it is longer or breaks off.
pub(super) async fn read_body(
    mut response: reqwest::Response,
    limit: u64,
) -> Result<Bytes, ForwardError> {
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(piece)) => {
                if (bytes.len() + piece.len()) as u64 > limit {
                    return Err(ForwardError(
                        format!("the upstream's reply is over the limit of {limit} bytes"),
                        true,
                    ));
                }
                bytes.extend_from_slice(&piece);
            }
            Ok(None) => return Ok(Bytes::from(bytes)),
            Err(e) => {
                return Err(ForwardError(
                    format!(
                        "the upstream's reply broke off: {}",
                        crate::types::one_line(&error_chain(&e))
                    ),
                    true,
                ))
            }
        }
    }
}

/// An error and its causes, joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = cause_of(source);
    }
    text
}

fn cause_of<'a>(
    error: Option<&'a (dyn std::error::Error + 'static)>,
) -> Option<&'a (dyn std::error::Error + 'static)> {
    error.and_then(std::error::Error::source)
}
