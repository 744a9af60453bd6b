//! The async HTTP transport real providers share (reqwest over rustls, on
//! Tokio): JSON POSTs with
//! bounded retries on 429 and 5xx that honour `Retry-After` (seconds or an
//! HTTP date) and otherwise back off exponentially with jitter, bounded
//! reads of every body, no redirects, and one-line errors that never show a
//! credential.
//!
//! Everything a provider says about a failed call goes through here, so the
//! masking is done once: the values of credential-bearing headers (and of
//! any userinfo in the URL) become `***` in every error text, and URLs are
//! shown with their userinfo replaced (`http://***@host/v1`).
//!
//! Long with its tests: the code is its first 632 lines, and the last 196
//! are the tests that pin it, kept beside it.

use super::sse::{self, Event, Limits, SseError};
use super::ProviderError;
use crate::types::{error_chain, one_line};
use reqwest::header::HeaderMap;
use reqwest::{Client, Response};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// When and how often to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The back-off of the first retry when the server gives no
    /// `Retry-After`; doubles per retry. The wait is drawn between half the
    /// back-off and all of it (jitter), so clients that failed together do
    /// not all retry together.
    pub base: Duration,
    /// The longest single wait, `Retry-After` and back-off alike.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        }
    }
}

/// A retry the transport is about to wait for: what failed, and how long
/// the wait before the next attempt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryWait {
    /// The HTTP status being retried (429 or a 5xx).
    pub status: u16,
    /// Which retry comes after the wait (1 for the first).
    pub retry: u32,
    /// The retries allowed in all.
    pub max_retries: u32,
    /// The wait (`Retry-After`, else the back-off).
    pub wait: Duration,
}

/// Told of each [`RetryWait`] before the wait begins (the wait itself is
/// asynchronous): a status line, a log. Providers have none unless given one, so
/// the library prints nothing of its own.
pub type RetryObserver = Arc<dyn Fn(&RetryWait) + Send + Sync>;

/// Timeouts, retries and size limits of a provider's HTTP client.
#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    /// How long establishing a connection may take (10 s by default).
    pub connect_timeout: Duration,
    /// Waiting for the response headers, and then for the whole body.
    pub read_timeout: Duration,
    /// Which failures are retried, how often and how long to wait.
    pub retry: RetryPolicy,
    /// The most bytes of one response body the client reads, streamed or
    /// not; a longer body is an error (64 MiB by default).
    pub max_body_bytes: u64,
    /// The longest line of a streamed response, in bytes; a longer line is
    /// an error (1 MiB by default).
    pub max_line_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            max_body_bytes: 64 * MIB,
            max_line_bytes: 1 << 20,
        }
    }
}

const MIB: u64 = 1 << 20;

/// How much of an error body is read (its message is shown, shortened).
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

/// The most characters of a peer-supplied text (an error body, a
/// `Location`) an error line shows.
const SHOWN_CHARS: usize = 300;

/// An async client that retries, bounds what it reads and masks secrets in
/// every error it reports.
pub(crate) struct Transport {
    /// The client, or why none could be built (said by every call).
    client: Result<Client, String>,
    retry: RetryPolicy,
    limits: Limits,
    /// Told of each retry wait.
    on_retry: Option<RetryObserver>,
}

/// A 2xx response, with what is needed to read its body safely: the limits,
/// and the secrets to keep out of any error about it.
pub(crate) struct Reply {
    response: Response,
    secrets: Secrets,
    limits: Limits,
}

impl Transport {
    pub(crate) fn new(settings: HttpSettings) -> Self {
        let client = Client::builder()
            .use_rustls_tls()
            // A redirect would carry the credentials to wherever it points;
            // a 3xx is answered as an error instead.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(settings.connect_timeout)
            // Each wait for the peer: for the response headers, and for
            // every piece of the body.
            .read_timeout(settings.read_timeout)
            .build()
            .map_err(|error| {
                format!(
                    "cannot set up the HTTP client: {}",
                    one_line(&error_chain(&error))
                )
            });
        Transport {
            client,
            retry: settings.retry,
            limits: Limits {
                max_bytes: settings.max_body_bytes,
                max_line: settings.max_line_bytes,
            },
            on_retry: None,
        }
    }

    /// Tells `observer` of every retry wait from now on.
    pub(crate) fn observe_retries(&mut self, observer: RetryObserver) {
        self.on_retry = Some(observer);
    }

    /// POSTs `body` to `url`; retries 429 and 5xx; returns the first 2xx
    /// response. Everything else is one line, with the credentials in
    /// `headers` (see [`is_secret_header`]) and in the URL masked.
    pub(crate) async fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &serde_json::Value,
    ) -> Result<Reply, ProviderError> {
        let client = self.client.as_ref().map_err(ProviderError::msg)?;
        let secrets = Secrets::new(url, headers);
        let payload = body.to_string();
        let mut attempt = 0;
        loop {
            let mut request = client.post(url).header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let mut response = request
                .body(payload.clone())
                .send()
                .await
                .map_err(|error| transport_error(url, &error, &secrets))?;
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(Reply {
                    response,
                    secrets,
                    limits: self.limits,
                });
            }
            let reason = response.status().canonical_reason().unwrap_or("");
            if (300..400).contains(&status) {
                return Err(redirect_error(status, reason, response.headers(), &secrets));
            }
            let retryable = status == 429 || status >= 500;
            if retryable && attempt < self.retry.max_retries {
                let told = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok());
                let wait = retry_wait(
                    &self.retry,
                    attempt,
                    told,
                    SystemTime::now(),
                    fastrand::f64(),
                );
                attempt += 1;
                if let Some(observer) = &self.on_retry {
                    observer(&RetryWait {
                        status,
                        retry: attempt,
                        max_retries: self.retry.max_retries,
                        wait,
                    });
                }
                tokio::time::sleep(wait).await;
                continue;
            }
            // A body that breaks off is shown as far as it came.
            let (text, _) = read_up_to(&mut response, ERROR_BODY_LIMIT).await;
            let detail = error_detail(&String::from_utf8_lossy(&text), &secrets);
            let message = if retryable {
                format!(
                    "the provider kept failing: HTTP {status} {reason} after {} retries{detail}",
                    self.retry.max_retries
                )
            } else {
                format!("the provider refused the request: HTTP {status} {reason}{detail}")
            };
            return Err(ProviderError::http(
                status,
                retryable,
                secrets.mask(&message),
            ));
        }
    }
}

/// Reads `response`'s body, at most `limit` bytes of it (the rest is not
/// read), with the error that stopped it early, if one did.
async fn read_up_to(response: &mut Response, limit: u64) -> (Vec<u8>, Option<reqwest::Error>) {
    let mut bytes = Vec::new();
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    while bytes.len() < limit {
        match response.chunk().await {
            Ok(Some(piece)) => {
                let room = limit - bytes.len();
                bytes.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            Ok(None) => break,
            Err(error) => return (bytes, Some(error)),
        }
    }
    (bytes, None)
}

/// The wait before retry number `attempt` (0 for the first retry): what a
/// readable `Retry-After` value says, else the exponential back-off with
/// equal jitter (half the back-off, plus `unit` — a number in `[0, 1)` — of
/// the other half); never more than the policy's `max_wait`. `now` dates a
/// `Retry-After` given as an HTTP date.
fn retry_wait(
    policy: &RetryPolicy,
    attempt: u32,
    retry_after: Option<&str>,
    now: SystemTime,
    unit: f64,
) -> Duration {
    if let Some(told) = retry_after.and_then(|value| parse_retry_after(value, now)) {
        return told.min(policy.max_wait);
    }
    let backoff = policy
        .base
        .saturating_mul(1 << attempt.min(16))
        .min(policy.max_wait);
    let half = backoff / 2;
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.0
    };
    half + backoff.checked_sub(half).unwrap().mul_f64(unit)
}

/// A `Retry-After` value as a wait from `now`: seconds (`120`, or `1.5`), or
/// an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`; one already past is no
/// wait). `None` when it is neither.
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

impl Reply {
    /// Reads the whole body as JSON, at most the body limit of it; a body
    /// that is longer, breaks off or is not JSON is one line.
    pub(crate) async fn json(mut self) -> Result<serde_json::Value, ProviderError> {
        let limit = self.limits.max_bytes;
        let too_large = || {
            ProviderError::msg(format!(
                "the provider's response exceeded the body limit of {}",
                size(limit)
            ))
        };
        if self
            .response
            .content_length()
            .is_some_and(|length| length > limit)
        {
            return Err(too_large());
        }
        let (bytes, problem) = read_up_to(&mut self.response, limit.saturating_add(1)).await;
        if let Some(error) = problem {
            return Err(ProviderError::msg(self.secrets.mask(&format!(
                "cannot read the provider's response: {}",
                one_line(&error_chain(&error))
            )))
            .with_retryable(true));
        }
        if bytes.len() as u64 > limit {
            return Err(too_large());
        }
        serde_json::from_slice(&bytes).map_err(|error| {
            ProviderError::msg(format!(
                "malformed response from the provider (not JSON: {error})"
            ))
        })
    }

    /// Reads the body as server-sent events within the body and line
    /// limits, calling `on_event` per event: `Ok(true)` goes on, `Ok(false)`
    /// stops, an error stops with that error. A stream that carries no event
    /// at all is an error, as is one that breaks off or passes a limit.
    pub(crate) async fn events(
        mut self,
        mut on_event: impl FnMut(Event) -> Result<bool, ProviderError> + Send,
    ) -> Result<(), ProviderError> {
        let content_type = self
            .response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| one_line(v).chars().take(80).collect::<String>());
        // The header values are slices of the connection's read buffer:
        // kept while the stream lasts, they would pin that buffer and make
        // the connection allocate another for the events.
        drop(std::mem::take(self.response.headers_mut()));
        let mut problem = None;
        let mut reader = sse::Reader::new(self.limits, |event| match on_event(event) {
            Ok(go_on) => go_on,
            Err(error) => {
                problem = Some(error);
                false
            }
        });
        let read = loop {
            match self.response.chunk().await {
                Ok(Some(piece)) => match reader.feed(&piece) {
                    Ok(true) => {}
                    Ok(false) => break Ok(reader.delivered()),
                    Err(error) => break Err(error),
                },
                Ok(None) => break Ok(reader.finish()),
                Err(error) => break Err(SseError::Io(error_chain(&error))),
            }
        };
        drop(reader);
        let secrets = &self.secrets;
        let mask = |error: ProviderError| ProviderError {
            message: secrets.mask(error.message()),
            ..error
        };
        if let Some(error) = problem {
            return Err(mask(error));
        }
        match read {
            Ok(0) => {
                let hint = match content_type {
                    Some(kind) if !kind.starts_with("text/event-stream") => {
                        format!(" (the response was {kind}, not text/event-stream)")
                    }
                    _ => String::new(),
                };
                Err(ProviderError::msg(format!(
                    "the stream carried no events{hint}"
                )))
            }
            Ok(_) => Ok(()),
            Err(SseError::BodyTooLarge(limit)) => Err(ProviderError::msg(format!(
                "the provider's stream exceeded the body limit of {}",
                size(limit)
            ))),
            Err(SseError::LineTooLong(limit)) => Err(ProviderError::msg(format!(
                "a line of the provider's stream exceeded the line limit of {}",
                size(limit as u64)
            ))),
            Err(SseError::Io(error)) => Err(mask(
                ProviderError::msg(format!("the stream broke off: {}", one_line(&error)))
                    .with_retryable(true),
            )),
        }
    }
}

/// A byte count as people read limits: `64 MiB`, `512 KiB`, `1000 bytes`.
fn size(bytes: u64) -> String {
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// Whether a header carries a credential, by its name: `Authorization`,
/// `Proxy-Authorization`, `Cookie`, `x-api-key`, `api-key`, and any name
/// mentioning a key, token, secret, password or session.
pub(crate) fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth", "cookie", "key", "token", "secret", "password", "session",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// Values shorter than this are not masked: they cannot be guessed-at
/// secrets, and masking them would garble the message.
const MIN_SECRET: usize = 4;

/// The credentials of one call, to be masked in any text about it.
#[derive(Debug, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    /// The secret header values (whole, and without an auth scheme such as
    /// `Bearer `) and the URL's userinfo (whole, and its password).
    pub(crate) fn new(url: &str, headers: &[(String, String)]) -> Secrets {
        let mut secrets = Vec::new();
        for (name, value) in headers {
            if !is_secret_header(name) {
                continue;
            }
            let value = value.trim();
            secrets.push(value.to_owned());
            if let Some((_scheme, credential)) = value.split_once(' ') {
                secrets.push(credential.trim().to_owned());
            }
        }
        if let Some(userinfo) = userinfo(url) {
            secrets.push(userinfo.to_owned());
            match userinfo.split_once(':') {
                Some((_user, password)) => secrets.push(password.to_owned()),
                // `https://TOKEN@host`: the user part is the credential.
                None => secrets.push(userinfo.to_owned()),
            }
        }
        secrets.retain(|s| s.len() >= MIN_SECRET);
        // Longest first, so a whole `Bearer …` value goes before its token.
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Secrets(secrets)
    }

    /// `text` with every secret replaced by `***` and URLs shown without
    /// their userinfo.
    pub(crate) fn mask(&self, text: &str) -> String {
        let mut masked = hide_userinfo(text);
        for secret in &self.0 {
            if masked.contains(secret.as_str()) {
                masked = masked.replace(secret.as_str(), "***");
            }
        }
        masked
    }
}

/// The userinfo of `url` (`user:pass` in `http://user:pass@host/`), if any.
fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    authority.rfind('@').map(|at| &authority[..at])
}

/// `text` with the userinfo of every URL in it replaced by `***`
/// (`http://user:pass@host/v1` → `http://***@host/v1`).
pub(crate) fn hide_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(sign) => {
                out.push_str("***");
                out.push_str(&authority[sign..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The detail of an error body, as `: <message>`: the message inside a JSON
/// error body (`{"error": {"message": …}}`), else the body's text; masked,
/// on one line and shortened. Empty when the body is.
fn error_detail(body: &str, secrets: &Secrets) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v["error"]["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .or_else(|| v["message"].as_str())
            .map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| body.to_owned());
    // Masked before shortening, so a secret cut in half cannot show.
    let text = one_line(&secrets.mask(&text));
    if text.is_empty() {
        return String::new();
    }
    format!(": {}", shorten(&text))
}

/// At most [`SHOWN_CHARS`] characters, `…` marking a cut.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A 3xx answer: not followed, since the request's credentials would go
/// wherever it points.
fn redirect_error(
    status: u16,
    reason: &str,
    headers: &HeaderMap,
    secrets: &Secrets,
) -> ProviderError {
    let target = match headers.get("location") {
        Some(location) => {
            let location = String::from_utf8_lossy(location.as_bytes());
            // Masked before shortening, so a secret cut in half cannot show.
            format!(
                "a redirect to {}",
                shorten(&one_line(&secrets.mask(&location)))
            )
        }
        None => "a redirect without a Location".to_owned(),
    };
    ProviderError::http(
        status,
        false,
        format!(
            "the provider answered HTTP {status} {reason}, {target}; redirects are not \
             followed for API calls: point the base URL at the final address"
        ),
    )
}

/// A request that got no HTTP answer: refused, timed out, unreachable.
fn transport_error(url: &str, error: &reqwest::Error, secrets: &Secrets) -> ProviderError {
    let refused = io_kind(error) == Some(std::io::ErrorKind::ConnectionRefused);
    let (detail, retryable) = if refused {
        (
            "connection refused (is the server running?)".to_owned(),
            true,
        )
    } else if error.is_timeout() {
        ("timed out".to_owned(), true)
    } else if error.is_connect() {
        (
            format!("the connection failed ({})", innermost(error)),
            true,
        )
    } else if error.is_builder() {
        (
            format!("the request cannot be sent ({})", innermost(error)),
            false,
        )
    } else {
        (innermost(error), error.is_request() || error.is_body())
    };
    ProviderError::msg(secrets.mask(&format!("cannot reach {url}: {}", one_line(&detail))))
        .with_retryable(retryable)
}

/// The kind of the I/O error under `error`, if one is.
fn io_kind(error: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        next = current.source();
    }
    None
}

/// The text of the deepest cause of `error` (the one that says what went
/// wrong, without the URL the outer ones repeat).
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn error_bodies_become_one_line_details() {
        let none = Secrets::default();
        assert_eq!(
            error_detail(r#"{"error": {"message": "bad\nkey"}}"#, &none),
            ": bad key"
        );
        assert_eq!(error_detail("", &none), "");
        assert_eq!(error_detail("plain text", &none), ": plain text");
        let long = "x".repeat(1000);
        assert_eq!(
            error_detail(&long, &none),
            format!(": {}…", "x".repeat(SHOWN_CHARS))
        );
    }

    #[test]
    fn credential_headers_are_recognised_by_name() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "x-api-key",
            "api-key",
            "Cookie",
            "X-Auth-Token",
            "X-Client-Secret",
        ] {
            assert!(is_secret_header(name), "{name}");
        }
        for name in ["X-Title", "anthropic-version", "content-type", "X-Trace"] {
            assert!(!is_secret_header(name), "{name}");
        }
    }

    #[test]
    fn secret_header_values_are_masked_whole_and_without_their_scheme() {
        let secrets = Secrets::new(
            "http://h/v1",
            &headers(&[
                ("Authorization", "Bearer sk-live-123456"),
                ("x-api-key", "ak-7890abcd"),
                ("X-Title", "chimera"),
            ]),
        );
        assert_eq!(
            secrets
                .mask("got Bearer sk-live-123456, key sk-live-123456 and ak-7890abcd for chimera"),
            "got ***, key *** and *** for chimera"
        );
    }

    #[test]
    fn short_values_are_not_masked() {
        let secrets = Secrets::new("http://h", &headers(&[("Authorization", "x")]));
        assert_eq!(secrets.mask("a text with x in it"), "a text with x in it");
    }

    #[test]
    fn a_secret_cut_by_the_shortening_does_not_show_half() {
        let key = "sk-cut-in-half-000000000";
        let secrets = Secrets::new("http://h", &headers(&[("x-api-key", key)]));
        let body = format!("{}{key}", "y".repeat(SHOWN_CHARS - 5));
        let detail = error_detail(&body, &secrets);
        assert!(!detail.contains("sk-cut"), "{detail}");
    }

    #[test]
    fn userinfo_is_hidden_in_urls_and_its_password_masked_anywhere() {
        assert_eq!(
            hide_userinfo("cannot reach http://user:pass@host:80/v1/x: refused"),
            "cannot reach http://***@host:80/v1/x: refused"
        );
        assert_eq!(
            hide_userinfo("a https://token@h?q=a@b and http://plain/a@b"),
            "a https://***@h?q=a@b and http://plain/a@b"
        );
        assert_eq!(hide_userinfo("no url here"), "no url here");
        let secrets = Secrets::new("http://user:s3cr3t-pw@h/v1", &[]);
        assert_eq!(
            secrets.mask("http://user:s3cr3t-pw@h/v1 said s3cr3t-pw"),
            "http://***@h/v1 said ***"
        );
        let token = Secrets::new("https://tok-abcdef@h/v1", &[]);
        assert_eq!(token.mask("echo tok-abcdef"), "echo ***");
    }

    #[test]
    fn limits_are_named_in_readable_units() {
        assert_eq!(size(64 * MIB), "64 MiB");
        assert_eq!(size(1 << 20), "1 MiB");
        assert_eq!(size(512 * 1024), "512 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        }
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn the_back_off_doubles_per_retry_and_its_jitter_spans_the_upper_half() {
        let now = SystemTime::UNIX_EPOCH;
        let wait = |attempt, unit| retry_wait(&policy(), attempt, None, now, unit);
        assert_eq!((wait(0, 0.0), wait(0, 0.5)), (ms(250), ms(375)));
        assert_eq!((wait(1, 0.0), wait(2, 0.0)), (ms(500), ms(1000)));
        assert!(wait(0, 0.999_999) < ms(500) && wait(0, 0.999_999) > ms(499));
        for attempt in 0..6 {
            let backoff = ms(500) * 2u32.pow(attempt);
            for _ in 0..200 {
                let drawn = retry_wait(&policy(), attempt, None, now, fastrand::f64());
                assert!(
                    drawn >= backoff.min(policy().max_wait) / 2 && drawn <= backoff,
                    "attempt {attempt}: {drawn:?}"
                );
            }
        }
    }

    #[test]
    fn the_back_off_is_capped_however_many_retries_and_whatever_the_random_number() {
        let now = SystemTime::UNIX_EPOCH;
        for attempt in [6, 16, 100, u32::MAX] {
            for unit in [0.0, 0.5, 1.0, 7.0, -1.0, f64::NAN] {
                let wait = retry_wait(&policy(), attempt, None, now, unit);
                assert!(
                    wait >= Duration::from_secs(15) && wait <= Duration::from_secs(30),
                    "attempt {attempt}, unit {unit}: {wait:?}"
                );
            }
        }
        let huge = RetryPolicy {
            base: Duration::MAX,
            max_wait: Duration::MAX,
            ..policy()
        };
        assert!(retry_wait(&huge, 3, None, now, 0.0) >= Duration::MAX / 2);
    }

    #[test]
    fn retry_after_in_seconds_is_honoured_exactly_up_to_the_cap() {
        let now = SystemTime::UNIX_EPOCH;
        let wait = |value| retry_wait(&policy(), 2, Some(value), now, 0.5);
        assert_eq!(wait("0"), Duration::ZERO);
        assert_eq!(wait(" 7 "), Duration::from_secs(7));
        assert_eq!(wait("1.5"), ms(1500));
        assert_eq!(wait("3600"), Duration::from_secs(30), "capped");
        assert_eq!(
            wait("1e300"),
            Duration::from_secs(30),
            "capped, no overflow"
        );
        for unreadable in ["-1", "soon", "inf", "NaN", ""] {
            assert_eq!(wait(unreadable), ms(1500), "{unreadable:?}: the back-off");
        }
    }

    #[test]
    fn retry_after_as_an_http_date_waits_until_then_and_a_past_date_not_at_all() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let wait = |value| retry_wait(&policy(), 0, Some(value), now, 0.0);
        assert_eq!(
            wait("Wed, 21 Oct 2015 07:28:12 GMT"),
            Duration::from_secs(12)
        );
        assert_eq!(
            wait("Wednesday, 21-Oct-15 07:28:05 GMT"),
            Duration::from_secs(5)
        );
        assert_eq!(wait("Wed Oct 21 07:28:02 2015"), Duration::from_secs(2));
        assert_eq!(wait("Wed, 21 Oct 2015 07:27:00 GMT"), Duration::ZERO);
        assert_eq!(
            wait("Thu, 22 Oct 2015 07:28:00 GMT"),
            Duration::from_secs(30),
            "capped"
        );
        assert_eq!(wait("Wed, 21 Oct 2015 25:00:00 GMT"), ms(250), "unreadable");
    }
}
