//! A server's lanes: its connections spread over one runtime per CPU,
//! each with a single worker thread, instead of one work-stealing runtime
//! whose workers share every connection.
//!
//! Why: with the work-stealing runtime's workers, a task woken on one
//! worker wakes another to steal it (a futex wake and a context switch a
//! request more than a single-threaded server). On a quiet server every
//! such wake-up is an idle CPU's: the gateway's bench
//! (`--bench gateway -- profile`, 100 requests a second) measured 0.17
//! ms of CPU a request and a p50 of 0.32–0.45 ms with two workers, 0.09–
//! 0.11 ms and 0.17–0.20 ms with one. A lane keeps that single worker's
//! cost and a server still uses every CPU: the listening socket is shared
//! by the lanes (each accepts from it), and a connection stays on the lane
//! that accepted it with every socket and timer of its requests.
//!
//! - **A lane never stalls on a blocking call.** Its runtime is a
//!   multi-thread one with one worker, so a call that blocks (into an
//!   isolated pack's own process, to a remote state store) hands the
//!   lane's other connections to another thread (`block_in_place`, see
//!   `runtime::blocking`) as before.
//! - **Sockets stay on their lane.** A socket is driven by the runtime
//!   that registered it; a connection pool keeps each idle connection for
//!   the lane that made it ([`current`]), so a request never waits on
//!   another lane's driver.
//! - **Fewer lanes, never none.** A lane whose thread the system refuses
//!   is not started; the first lane runs on the calling thread.

use std::cell::Cell;
use std::future::Future;
use tokio::runtime::{Builder, Runtime};

thread_local! {
    /// The lane this thread serves (0 outside any lane).
    static LANE: Cell<usize> = const { Cell::new(0) };
}

/// The lane the current thread serves: 0 for the first lane and for any
/// thread outside a server's lanes.
#[must_use]
pub fn current() -> usize {
    LANE.with(Cell::get)
}

/// How many lanes a server runs: `asked` when given (at least one), else
/// one per CPU this process may use.
#[must_use]
pub fn count(asked: Option<usize>) -> usize {
    asked
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1)
}

/// Runs `serve(lane)` on each of `count` lanes until every one has
/// returned; their outputs, first lane first. A panic of a lane's work
/// is the caller's (once the other lanes have returned).
///
/// # Errors
///
/// When the first lane's runtime cannot be built (the system has no
/// thread or descriptor left for it): then nothing was started. A later
/// lane's runtime or thread refused is left out, with a warning.
pub fn run<F, Fut>(count: usize, serve: F) -> std::io::Result<Vec<Fut::Output>>
where
    F: Fn(usize) -> Fut + Sync,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let first = runtime(0)?;
    let mut later = Vec::new();
    for lane in 1..count {
        match runtime(lane) {
            Ok(runtime) => later.push((lane, runtime)),
            Err(error) => tracing::warn!("lane {lane} not started: {error}"),
        }
    }
    let serve = &serve;
    Ok(std::thread::scope(|scope| {
        let mut running = Vec::new();
        for (lane, runtime) in later {
            let spawned = std::thread::Builder::new()
                .name(format!("chimera-lane-{lane}"))
                .spawn_scoped(scope, move || run_lane(lane, &runtime, serve));
            match spawned {
                Ok(thread) => running.push(thread),
                Err(error) => tracing::warn!("lane {lane} not started: {error}"),
            }
        }
        let mut outputs: Vec<_> = run_lane(0, &first, serve).into_iter().collect();
        for thread in running {
            match thread.join() {
                Ok(output) => outputs.extend(output),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        outputs
    }))
}

/// One lane's runtime: a multi-thread runtime with one worker, its
/// threads knowing their lane.
fn runtime(lane: usize) -> std::io::Result<Runtime> {
    Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(format!("chimera-lane-{lane}"))
        .on_thread_start(move || LANE.with(|current| current.set(lane)))
        .enable_all()
        .build()
}

/// `serve(lane)` run on `runtime`'s worker to its end (not on the calling
/// thread, which only waits); `None` if it was cancelled (only a runtime
/// shut down cancels it, and this one is not until it returns).
fn run_lane<F, Fut>(lane: usize, runtime: &Runtime, serve: &F) -> Option<Fut::Output>
where
    F: Fn(usize) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    LANE.with(|current| current.set(lane));
    match runtime.block_on(async { tokio::spawn(serve(lane)).await }) {
        Ok(output) => Some(output),
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_runs_its_work_on_its_own_thread_knowing_its_lane() {
        let outputs = run(3, |lane| async move {
            let before = current();
            // Threads a task moves to within the lane know it too.
            let inside = tokio::task::spawn_blocking(current)
                .await
                .unwrap_or(usize::MAX);
            (lane, before, inside, std::thread::current().id())
        })
        .unwrap_or_default();
        assert_eq!(outputs.len(), 3);
        for (at, (lane, before, inside, _)) in outputs.iter().enumerate() {
            assert_eq!((*lane, *before, *inside), (at, at, at));
        }
        let threads: std::collections::BTreeSet<_> = outputs
            .iter()
            .map(|(.., thread)| format!("{thread:?}"))
            .collect();
        assert_eq!(threads.len(), 3, "each lane on a thread of its own");
    }

    #[test]
    fn a_lane_count_is_at_least_one() {
        assert_eq!(count(Some(0)), 1);
        assert_eq!(count(Some(3)), 3);
        assert!(count(None) >= 1);
    }
}
