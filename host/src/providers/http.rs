//! The blocking HTTP transport real providers share: JSON POSTs with
//! bounded retries on 429 and 5xx that honour `Retry-After`, and one-line
//! errors.

use super::ProviderError;
use std::time::Duration;
use ureq::http::Response;
use ureq::{Agent, Body};

/// When and how often to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first wait when the server gives no `Retry-After`; doubles per retry.
    pub base: Duration,
    /// The longest single wait, `Retry-After` included.
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

/// Timeouts and retries of a provider's HTTP client.
#[derive(Debug, Clone, Copy)]
pub struct HttpSettings {
    /// Connecting.
    pub connect_timeout: Duration,
    /// Waiting for the response (and, between chunks, for the body).
    pub read_timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
        }
    }
}

/// A blocking client.
pub(crate) struct Transport {
    agent: Agent,
    retry: RetryPolicy,
}

impl Transport {
    pub(crate) fn new(settings: HttpSettings) -> Self {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(settings.connect_timeout))
            .timeout_recv_response(Some(settings.read_timeout))
            .timeout_recv_body(Some(settings.read_timeout))
            .build();
        Transport {
            agent: config.into(),
            retry: settings.retry,
        }
    }

    /// POSTs `body` to `url`; retries 429 and 5xx; returns the first 2xx
    /// response. Everything else is one line.
    pub(crate) fn post(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &serde_json::Value,
    ) -> Result<Response<Body>, ProviderError> {
        let payload = body.to_string();
        let mut attempt = 0;
        loop {
            let mut request = self
                .agent
                .post(url)
                .header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let mut response = request
                .send(payload.as_str())
                .map_err(|error| transport_error(url, &error))?;
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(response);
            }
            let retryable = status == 429 || status >= 500;
            if retryable && attempt < self.retry.max_retries {
                std::thread::sleep(self.wait(attempt, &response));
                attempt += 1;
                continue;
            }
            let text = response
                .body_mut()
                .with_config()
                .limit(64 * 1024)
                .read_to_string()
                .unwrap_or_default();
            let detail = error_message(&text);
            let reason = response.status().canonical_reason().unwrap_or("");
            return Err(ProviderError::msg(if retryable {
                format!(
                    "the provider kept failing: HTTP {status} {reason} after {} retries{detail}",
                    self.retry.max_retries
                )
            } else {
                format!("the provider refused the request: HTTP {status} {reason}{detail}")
            }));
        }
    }

    /// `Retry-After` (seconds) when given, else exponential back-off; capped.
    fn wait(&self, attempt: u32, response: &Response<Body>) -> Duration {
        let told = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        told.unwrap_or_else(|| self.retry.base * 2u32.saturating_pow(attempt.min(16)))
            .min(self.retry.max_wait)
    }
}

/// The error message inside a JSON error body (`{"error": {"message": …}}`),
/// as `: <message>`; empty when there is none.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v["error"]["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .or_else(|| v["message"].as_str())
            .map(str::to_owned)
    });
    match message {
        Some(message) => format!(": {}", one_line(&message)),
        None if !body.trim().is_empty() => format!(
            ": {}",
            one_line(&body.chars().take(200).collect::<String>())
        ),
        None => String::new(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn transport_error(url: &str, error: &ureq::Error) -> ProviderError {
    let detail = match error {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused (is the server running?)".to_owned()
        }
        ureq::Error::ConnectionFailed => "the connection failed".to_owned(),
        ureq::Error::HostNotFound => "host not found".to_owned(),
        ureq::Error::Timeout(what) => format!("timed out ({what})"),
        other => one_line(&other.to_string()),
    };
    ProviderError::msg(format!("cannot reach {url}: {detail}"))
}

/// Reads a whole JSON response body; a body that is not JSON is one line.
pub(crate) fn read_json(mut response: Response<Body>) -> Result<serde_json::Value, ProviderError> {
    let text = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| {
            ProviderError::msg(format!(
                "cannot read the provider's response: {}",
                one_line(&e.to_string())
            ))
        })?;
    serde_json::from_str(&text).map_err(|error| {
        ProviderError::msg(format!(
            "malformed response from the provider (not JSON: {error})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::error_message;

    #[test]
    fn error_bodies_become_one_line_details() {
        assert_eq!(
            error_message(r#"{"error": {"message": "bad\nkey"}}"#),
            ": bad key"
        );
        assert_eq!(error_message(""), "");
        assert_eq!(error_message("plain text"), ": plain text");
    }
}
