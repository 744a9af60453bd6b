//! Status lines for long waits, on stderr, in the readable mode only: a
//! model call that takes a while, a provider retry waiting out
//! `Retry-After`, a prompt waiting for the operator. On a terminal a status
//! line is rewritten in place and erased when the wait ends (`\r`, then
//! erase-line); elsewhere each is printed once, as a line of its own. With
//! `--json` none of this is attached: stdout holds events only, and stderr
//! errors only. The library prints nothing of its own: these are the
//! command line's observers of it.

use chimera_host::agent::{Approver, OperatorAnswer};
use chimera_host::interception::Question;
use chimera_host::providers::{
    ModelResponse, Provider, ProviderCall, ProviderError, RetryObserver, RetryWait, StreamDelta,
};
use chimera_host::types::{terminal_safe, Headers, ToolCall};
use std::io::{IsTerminal, Write};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// How long a model call runs before its status line shows.
const MODEL_WAIT: Duration = Duration::from_secs(1);

/// Whether an erasable status line is on the terminal now.
static SHOWN: Mutex<bool> = Mutex::new(false);

fn stderr_is_terminal() -> bool {
    static TERMINAL: OnceLock<bool> = OnceLock::new();
    *TERMINAL.get_or_init(|| std::io::stderr().is_terminal())
}

/// Shows `text` as the status line: in place of the previous one on a
/// terminal, else as a line of its own.
pub(crate) fn show(text: &str) {
    let mut shown = SHOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let mut stderr = std::io::stderr().lock();
    let text = terminal_safe(text);
    if stderr_is_terminal() {
        let _ = write!(stderr, "\r\x1b[K{text}");
        *shown = true;
    } else {
        let _ = writeln!(stderr, "{text}");
    }
    let _ = stderr.flush();
}

/// Erases the status line, if one is showing (on a terminal).
pub(crate) fn clear() {
    let mut shown = SHOWN.lock().unwrap_or_else(PoisonError::into_inner);
    if *shown {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[K");
        let _ = stderr.flush();
        *shown = false;
    }
}

/// A status line that shows once `delay` has passed, until dropped (which
/// erases it, and any status shown meanwhile).
struct Pending {
    stop: Option<mpsc::Sender<()>>,
    timer: Option<std::thread::JoinHandle<()>>,
}

impl Pending {
    fn after(delay: Duration, text: String) -> Pending {
        let (stop, stopped) = mpsc::channel::<()>();
        let timer = std::thread::spawn(move || {
            if stopped.recv_timeout(delay) == Err(RecvTimeoutError::Timeout) {
                show(&text);
            }
        });
        Pending {
            stop: Some(stop),
            timer: Some(timer),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(timer) = self.timer.take() {
            let _ = timer.join();
        }
        clear();
    }
}

/// `3 s`, `1.5 s` or `250 ms`.
fn duration_text(wait: Duration) -> String {
    if wait < Duration::from_secs(1) {
        format!("{} ms", wait.as_millis())
    } else if wait.subsec_millis() == 0 {
        format!("{} s", wait.as_secs())
    } else {
        format!("{:.1} s", wait.as_secs_f64())
    }
}

/// The status line of a retry wait.
fn retry_text(wait: &RetryWait) -> String {
    format!(
        "the provider answered HTTP {}: retry {} of {} in {}…",
        wait.status,
        wait.retry,
        wait.max_retries,
        duration_text(wait.wait)
    )
}

/// `provider` with its retry waits shown (readable mode only: with `json`
/// it is returned as it is). `attach` is the provider's
/// `with_retry_observer`.
pub(crate) fn observe_retries<P>(provider: P, json: bool, attach: fn(P, RetryObserver) -> P) -> P {
    if json {
        return provider;
    }
    attach(
        provider,
        Arc::new(|wait: &RetryWait| show(&retry_text(wait))),
    )
}

/// `provider` with a status line for each call that is not streamed and
/// takes longer than a second (readable mode only: with `json` it is
/// returned as it is).
pub(crate) fn show_model_waits(provider: Arc<dyn Provider>, json: bool) -> Arc<dyn Provider> {
    if json {
        return provider;
    }
    Arc::new(ShowWaits { inner: provider })
}

/// A provider whose whole-reply calls show `waiting for the model (M)…`.
struct ShowWaits {
    inner: Arc<dyn Provider>,
}

impl Provider for ShowWaits {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn complete(&self, call: &ProviderCall<'_>) -> Result<ModelResponse, ProviderError> {
        let model = call.model.unwrap_or_else(|| self.inner.model());
        let _waiting = Pending::after(MODEL_WAIT, format!("waiting for the model ({model})…"));
        self.inner.complete(call)
    }

    /// A stream shows its text as it comes: no status line.
    fn stream(
        &self,
        call: &ProviderCall<'_>,
        on_delta: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ProviderError> {
        self.inner.stream(call, on_delta)
    }

    fn request_headers(&self) -> Option<Headers> {
        self.inner.request_headers()
    }
}

/// `approver` (the terminal's) saying, before each prompt it shows, that
/// the run waits for an answer, and for how long when the question has a
/// timeout (readable mode only: with `json` it is returned as it is).
pub(crate) fn announce_prompts(approver: Arc<dyn Approver>, json: bool) -> Arc<dyn Approver> {
    if json {
        return approver;
    }
    Arc::new(Announced { inner: approver })
}

/// An approver that announces each wait for the operator.
struct Announced {
    inner: Arc<dyn Approver>,
}

/// The line before a prompt: the run waits, forever or until the timeout.
fn waiting_text(timeout: Option<Duration>, default: &str) -> String {
    match timeout {
        Some(limit) => format!(
            "waiting for your answer: the run is paused; with no answer in {}, {default} stands",
            duration_text(limit)
        ),
        None => "waiting for your answer: the run is paused until you answer".to_owned(),
    }
}

/// Prints `text` on a line of its own before a prompt, when there is a
/// terminal to answer on (the terminal approver asks nothing otherwise).
fn announce(text: &str) {
    if std::io::stdin().is_terminal() {
        clear();
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{}", terminal_safe(text));
        let _ = stderr.flush();
    }
}

impl Approver for Announced {
    fn approve(&self, call: &ToolCall) -> bool {
        announce(&waiting_text(None, "no"));
        self.inner.approve(call)
    }

    fn answer(&self, subject: &str, question: &Question) -> OperatorAnswer {
        let timeout = question.timeout_ms.map(Duration::from_millis);
        announce(&waiting_text(timeout, &question.default));
        self.inner.answer(subject, question)
    }

    fn source(&self) -> &str {
        self.inner.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_wait_reads_as_one_status_line() {
        let wait = RetryWait {
            status: 429,
            retry: 1,
            max_retries: 3,
            wait: Duration::from_secs(2),
        };
        assert_eq!(
            retry_text(&wait),
            "the provider answered HTTP 429: retry 1 of 3 in 2 s…"
        );
        assert_eq!(duration_text(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(duration_text(Duration::from_millis(250)), "250 ms");
    }

    #[test]
    fn a_prompt_with_a_timeout_says_which_answer_stands_and_when() {
        assert_eq!(
            waiting_text(Some(Duration::from_secs(30)), "reject"),
            "waiting for your answer: the run is paused; with no answer in 30 s, reject stands"
        );
        assert!(waiting_text(None, "no").ends_with("until you answer"));
    }
}
