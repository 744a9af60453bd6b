//! The shared store: Redis, through the `redis` crate's synchronous
//! client (a gate's call is synchronous). Each operation is one Lua
//! script, so one round trip, atomic on the server, timed by the server's
//! clock.

use super::{check_rate, window_ms, StateError, StateStore, Take, IDLE_TTL};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// `incr_by` and `get`: the counter of the current window (`@<n>` of the
/// key, `n` = server ms / window), expiring two windows on; a counter with
/// no window lapses `IDLE_TTL` after its last write.
const COUNTER: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
local key = KEYS[1]
if window > 0 then key = key .. '@' .. math.floor(now / window) end
if ARGV[4] == 'get' then return tonumber(redis.call('GET', key) or '0') end
local total = redis.call('INCRBY', key, ARGV[1])
if window > 0 then
  redis.call('PEXPIRE', key, window * 2)
else
  redis.call('PEXPIRE', key, ARGV[3])
end
return total
";

/// `take`: a token bucket kept as `tokens` and `at` (server ms).
const BUCKET: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local n = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local allowed, wait = 0, 0
if tokens >= n then
  tokens = tokens - n
  allowed = 1
else
  wait = math.ceil((n - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {allowed, wait, math.floor(tokens)}
";

/// How long the store counts as down after a failure: operations fail at
/// once meanwhile, then the next one reconnects.
const DOWN_FOR: Duration = Duration::from_secs(1);

/// The most adds a connection carries unanswered before the next use reads
/// their answers.
const MAX_PENDING: u32 = 32;

/// A connection, and how many adds it sent whose answers it has not read.
struct Pooled {
    connection: redis::Connection,
    pending: u32,
}

impl Pooled {
    /// Reads the answers of the adds sent on this connection: a failure of
    /// any is the store's.
    fn settle(&mut self) -> redis::RedisResult<()> {
        while self.pending > 0 {
            self.connection.recv_response()?.extract_error()?;
            self.pending -= 1;
        }
        Ok(())
    }
}

/// A Redis server.
pub struct RedisStore {
    client: redis::Client,
    url: String,
    timeout: Duration,
    /// Idle connections; one is taken per operation and given back, the
    /// most recent first (so an operation follows an add it may read on
    /// the same stream).
    idle: Mutex<Vec<Pooled>>,
    /// Until when the store is down, after a failure.
    down_until: Mutex<Option<Instant>>,
    counter: redis::Script,
    bucket: redis::Script,
}

impl RedisStore {
    /// A store at `url` (`redis://host:port[/db]`); each operation waits at
    /// most `timeout`. Nothing connects until the first operation.
    ///
    /// # Errors
    ///
    /// `StateError::Invalid` when `url` is not a Redis URL.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, StateError> {
        let client = redis::Client::open(url).map_err(|e| {
            StateError::Invalid(format!(
                "{}: not a Redis URL ({e})",
                crate::types::one_line(url)
            ))
        })?;
        Ok(RedisStore {
            client,
            url: shown_url(url),
            timeout,
            idle: Mutex::new(Vec::new()),
            down_until: Mutex::new(None),
            counter: redis::Script::new(COUNTER),
            bucket: redis::Script::new(BUCKET),
        })
    }

    /// Runs `operation` on a connection (an idle one, or a new one); a
    /// failure marks the store down for [`DOWN_FOR`] and drops the
    /// connection.
    fn with<T>(
        &self,
        operation: impl FnOnce(&mut Pooled) -> redis::RedisResult<T>,
    ) -> Result<T, StateError> {
        // A round trip blocks (at most the timeout): off the runtime's
        // workers when called from one.
        crate::runtime::blocking(|| self.with_connection(operation))
    }

    /// [`Self::with`], on the calling thread.
    fn with_connection<T>(
        &self,
        operation: impl FnOnce(&mut Pooled) -> redis::RedisResult<T>,
    ) -> Result<T, StateError> {
        {
            let down = self
                .down_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(until) = *down {
                if Instant::now() < until {
                    return Err(StateError::Unavailable(format!(
                        "{} failed less than {}s ago",
                        self.url,
                        DOWN_FOR.as_secs()
                    )));
                }
            }
        }
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let result = match idle {
            Some(pooled) => Ok(pooled),
            None => self.connect(),
        }
        .and_then(|mut pooled| {
            operation(&mut pooled)
                .map(|value| (value, pooled))
                .map_err(|e| self.failed(&e))
        });
        match result {
            Ok((value, connection)) => {
                *self
                    .down_until
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                self.idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(connection);
                Ok(value)
            }
            Err(error) => {
                *self
                    .down_until
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + DOWN_FOR);
                // The other idle connections are as suspect as this one.
                self.idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
                Err(error)
            }
        }
    }

    fn connect(&self) -> Result<Pooled, StateError> {
        let connection = self
            .client
            .get_connection_with_timeout(self.timeout)
            .map_err(|e| self.failed(&e))?;
        connection
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| connection.set_write_timeout(Some(self.timeout)))
            .map_err(|e| self.failed(&e))?;
        Ok(Pooled {
            connection,
            pending: 0,
        })
    }

    fn failed(&self, error: &redis::RedisError) -> StateError {
        let why = if error.is_timeout() {
            format!("no answer within {} ms", self.timeout.as_millis())
        } else {
            crate::types::one_line(&error.to_string())
        };
        StateError::Unavailable(format!("{}: {why}", self.url))
    }

    fn counter(&self, key: &str, n: i64, window: Duration, get: bool) -> Result<i64, StateError> {
        let idle_ms = u64::try_from(IDLE_TTL.as_millis()).unwrap_or(u64::MAX);
        self.with(|pooled| {
            pooled.settle()?;
            self.counter
                .key(key)
                .arg(n)
                .arg(window_ms(window))
                .arg(idle_ms)
                .arg(if get { "get" } else { "incr" })
                .invoke(&mut pooled.connection)
        })
    }
}

/// `url` without its password, for lines a user reads.
fn shown_url(url: &str) -> String {
    let shown = match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://…@{}", &url[at + 1..]),
        _ => url.to_owned(),
    };
    crate::types::one_line(&shown)
}

impl StateStore for RedisStore {
    fn incr_by(&self, key: &str, n: i64, window: Duration) -> Result<i64, StateError> {
        self.counter(key, n, window, false)
    }

    fn get(&self, key: &str, window: Duration) -> Result<i64, StateError> {
        self.counter(key, 0, window, true)
    }

    fn take(&self, key: &str, n: u64, rate: f64, burst: u64) -> Result<Take, StateError> {
        check_rate(rate)?;
        let lapse_ms = u64::try_from(IDLE_TTL.as_millis()).unwrap_or(u64::MAX);
        let (allowed, wait, remaining): (i64, i64, i64) = self.with(|pooled| {
            pooled.settle()?;
            self.bucket
                .key(key)
                .arg(n)
                .arg(rate)
                .arg(burst)
                .arg(lapse_ms)
                .invoke(&mut pooled.connection)
        })?;
        Ok(Take {
            allowed: allowed == 1,
            wait: Duration::from_millis(u64::try_from(wait).unwrap_or(0)),
            remaining: u64::try_from(remaining).unwrap_or(0),
        })
    }

    /// Sends the add without waiting for its answer (read on the
    /// connection's next use): it is on the wire before this returns, so it
    /// is counted before anything its caller does next can be read, and
    /// costs the caller no round trip. An add whose answer later shows a
    /// failure is lost, and counted as the store's failure then. `EVAL`
    /// with the script's text, not its digest: a server that restarted
    /// meanwhile has forgotten every script, and there is no answer to
    /// look at before the next one is sent.
    fn add(&self, key: &str, n: i64, window: Duration) -> Result<(), StateError> {
        let idle_ms = u64::try_from(IDLE_TTL.as_millis()).unwrap_or(u64::MAX);
        let command = redis::cmd("EVAL")
            .arg(COUNTER)
            .arg(1)
            .arg(key)
            .arg(n)
            .arg(window_ms(window))
            .arg(idle_ms)
            .arg("incr")
            .get_packed_command();
        self.with(|pooled| {
            if pooled.pending >= MAX_PENDING {
                pooled.settle()?;
            }
            pooled.connection.send_packed_command(&command)?;
            pooled.pending += 1;
            Ok(())
        })
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            shown_url("redis://user:secret@10.0.0.1:6379/2"),
            "redis://…@10.0.0.1:6379/2"
        );
        assert_eq!(
            shown_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn a_bad_url_is_one_line_and_nothing_connects() {
        let error = RedisStore::new("http://nope", Duration::from_millis(50))
            .err()
            .expect("refused");
        assert!(error.to_string().contains("not a Redis URL"), "{error}");
        assert!(RedisStore::new("redis://127.0.0.1:1", Duration::from_millis(50)).is_ok());
    }
}
