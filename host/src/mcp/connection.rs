//! A connected server as its tools hold it: the client's end of the
//! session, and whether (and why) the server went away.

use rmcp::service::{Peer, RoleClient, RunningServiceCancellationToken};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tokio::runtime::Handle;

/// A connected server, as its tools hold it.
pub(crate) struct Server {
    /// Its name.
    pub(crate) name: String,
    /// The client's end of the session.
    pub(crate) peer: Peer<RoleClient>,
    /// See [`ServerSpec::call_timeout`].
    pub(crate) call_timeout: Duration,
    /// The runtime its connection lives on, which calls wait on.
    pub(crate) handle: Handle,
    /// Why it went away, once it has.
    gone: OnceLock<String>,
    /// Set when the session ends: stopping then is said by nobody.
    quiet: AtomicBool,
    /// Stops the connection (taken by the first stop).
    stop: Mutex<Option<RunningServiceCancellationToken>>,
}

impl Server {
    /// A server named `name` on `peer`, stopped by `stop`.
    pub(crate) fn new(
        name: String,
        peer: Peer<RoleClient>,
        call_timeout: Duration,
        handle: Handle,
        stop: RunningServiceCancellationToken,
    ) -> Self {
        Server {
            name,
            peer,
            call_timeout,
            handle,
            gone: OnceLock::new(),
            quiet: AtomicBool::new(false),
            stop: Mutex::new(Some(stop)),
        }
    }

    /// Takes the server away without a line: the session is ending.
    pub(crate) fn go_quietly(&self, why: &str) {
        self.quiet.store(true, Ordering::Relaxed);
        self.go(why);
    }

    /// Why the server went away, or `None` while it is there.
    pub(crate) fn gone(&self) -> Option<&str> {
        self.gone.get().map(String::as_str)
    }

    /// Why the server went away, waiting up to `within` for whoever
    /// watches its connection to say (a call that failed because the
    /// connection ended leaves the reason to what saw it end).
    pub(crate) fn gone_within(&self, within: Duration) -> Option<&str> {
        let until = std::time::Instant::now() + within;
        while self.gone().is_none() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.gone()
    }

    /// Takes the server away for `why` (the first reason is kept): one
    /// warning line, unless the session is ending, and its connection is
    /// stopped.
    pub(crate) fn go(&self, why: impl Into<String>) {
        if self.gone.set(why.into()).is_ok() && !self.quiet.load(Ordering::Relaxed) {
            if let Some(why) = self.gone() {
                tracing::warn!(
                    "MCP server {}: {why}; its tools are no longer offered",
                    self.name
                );
            }
        }
        self.stop_connection();
    }

    fn stop_connection(&self) {
        let token = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(token) = token {
            token.cancel();
        }
    }
}
