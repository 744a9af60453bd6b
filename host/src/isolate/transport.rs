//! The polling transport under the wire: a read polls the socket without
//! blocking for a short while before it blocks, because a reply (or the
//! next call) usually comes sooner than a blocked reader is woken. The
//! host's reader ([`DeadlineRead`]) also bounds a whole frame by the call
//! deadline; the child's ([`Spinning`]) polls between calls.

use rustix::io::Errno;
use rustix::net::RecvFlags;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long the host polls for a reply before it blocks: most calls are
/// answered well within this, and a blocking read that has to be woken
/// costs tens of microseconds on a virtual machine.
const HOST_SPIN: Duration = Duration::from_micros(50);

/// How long the child polls for the next call after each answer before it
/// blocks: the interceptors of one chain run, or of back-to-back seams,
/// then never wait for a wake-up. It is also the most CPU time an idle
/// child burns per call.
pub(crate) const CHILD_SPIN: Duration = Duration::from_micros(100);

/// `wanted`, or nothing on a machine (or a CPU set) of one processor: there
/// a poller only keeps the other side from running.
pub(crate) fn spin_budget(wanted: Duration) -> Duration {
    static SEVERAL_CPUS: OnceLock<bool> = OnceLock::new();
    let several = *SEVERAL_CPUS
        .get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1));
    if several {
        wanted
    } else {
        Duration::ZERO
    }
}

/// Reads what `socket` has without blocking, polling until `until`: what
/// the read returned (`Ok(0)` is the end of the stream), or `None` if
/// nothing arrived by then. Each round is one non-blocking `recv` and a
/// `sched_yield`: a poller gives way to whatever else is runnable on its
/// processor (the other pack hosts of a chain, the host's own threads), so
/// it only uses time nobody else wants.
fn poll_read(socket: impl AsFd, buf: &mut [u8], until: Instant) -> Option<io::Result<usize>> {
    loop {
        match rustix::net::recv(&socket, &mut *buf, RecvFlags::DONTWAIT) {
            Ok((n, _)) => return Some(Ok(n)),
            Err(Errno::AGAIN | Errno::INTR) => {}
            Err(e) => return Some(Err(e.into())),
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::yield_now();
    }
}

/// A socket read that polls for [`Spinning::spin`] before each blocking
/// read: the child's reader between calls.
pub(crate) struct Spinning<S> {
    /// The socket.
    pub(crate) socket: S,
    /// How long each read polls before it blocks.
    pub(crate) spin: Duration,
}

impl<S: AsFd + Read> Read for Spinning<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.spin.is_zero() && !buf.is_empty() {
            if let Some(got) = poll_read(&self.socket, buf, Instant::now() + self.spin) {
                return got;
            }
        }
        self.socket.read(buf)
    }
}

/// Reads with a deadline over the whole frame, not per `read`: the host's
/// reader of a reply.
pub(crate) struct DeadlineRead<'s> {
    socket: &'s mut UnixStream,
    current: &'s mut Option<Duration>,
    until: Instant,
    /// Until when a read polls without blocking (a reply usually comes
    /// sooner than a blocked read is woken).
    spin_until: Instant,
}

impl<'s> DeadlineRead<'s> {
    /// Reads from `socket`, whose read timeout is `current` now (and is
    /// kept up to date), for at most `within` from now, polling for up to
    /// [`HOST_SPIN`] of it first.
    pub(crate) fn new(
        socket: &'s mut UnixStream,
        current: &'s mut Option<Duration>,
        within: Duration,
    ) -> Self {
        let now = Instant::now();
        DeadlineRead {
            socket,
            current,
            until: now + within,
            spin_until: now + spin_budget(HOST_SPIN).min(within),
        }
    }
}

impl Read for DeadlineRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        if Instant::now() < self.spin_until {
            if let Some(got) = poll_read(&*self.socket, buf, self.spin_until) {
                return got;
            }
        }
        // Only shorten the timeout (one syscall) when it would overshoot by
        // more than a millisecond: the common one-read reply sets nothing.
        if self
            .current
            .is_none_or(|t| t > left + Duration::from_millis(1))
        {
            self.socket.set_read_timeout(Some(left))?;
            *self.current = Some(left);
        }
        self.socket.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn polling_reads_what_arrived_gives_up_at_its_deadline_and_sees_the_end() {
        use std::os::unix::net::UnixStream;
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut buf = [0; 8];
        let started = Instant::now();
        let until = started + Duration::from_millis(5);
        assert!(poll_read(&b, &mut buf, until).is_none());
        assert!(started.elapsed() >= Duration::from_millis(5));
        a.write_all(b"hi").unwrap();
        let mut spinning = Spinning {
            socket: b,
            spin: Duration::from_millis(5),
        };
        assert_eq!(spinning.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"hi");
        drop(a);
        assert_eq!(spinning.read(&mut buf).unwrap(), 0);
        // No spin budget at all: a plain blocking read.
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"x").unwrap();
        let mut blocking = Spinning {
            socket: b,
            spin: Duration::ZERO,
        };
        assert_eq!(blocking.read(&mut buf).unwrap(), 1);
    }
}
