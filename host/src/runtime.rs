//! How the synchronous API drives the one (async) loop.
//!
//! The loop is written once, as `async` code. [`AgentSession::run_turn`]
//! (and the real providers' blocking `complete` and `stream`) run it to the
//! end with [`block_on`], on the calling thread, against one process-wide
//! Tokio runtime kept for the purpose: its single worker thread drives the
//! sockets and timers, and its blocking pool runs the tools. Keeping one
//! runtime for the life of the process (rather than one per call) keeps the
//! HTTP connection pool of a provider valid from one call to the next.
//!
//! Called from inside a Tokio runtime (an `async` task, or a blocking
//! thread of one), a runtime cannot be blocked on there, so the call runs
//! on a fresh thread and the caller's thread waits for it: it is blocked
//! for the length of the turn, exactly as a synchronous call promises.
//! `async` code should call [`AgentSession::run_turn_async`] instead.
//!
//! [`AgentSession::run_turn`]: crate::agent::AgentSession::run_turn
//! [`AgentSession::run_turn_async`]: crate::agent::AgentSession::run_turn_async

use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::{Builder, Handle, Runtime, RuntimeFlavor};

/// The runtime the synchronous API blocks on, built on first use. `None`
/// when the system refused it a thread.
fn runtime() -> Option<&'static Runtime> {
    static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("chimera-sync")
                .enable_all()
                .build()
                .ok()
        })
        .as_ref()
}

/// Runs `future` to completion on the calling thread (see the module docs),
/// or on a thread of its own when the calling thread is inside a runtime. A
/// panic of the future is the caller's panic.
pub(crate) fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if Handle::try_current().is_ok() {
        return std::thread::scope(|scope| {
            scope
                .spawn(|| run(future))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
    }
    run(future)
}

/// Runs `f`, which may block (a call into a pack's own process, an
/// operation on a remote state store), without stalling the runtime it is
/// called from: on a worker of a multi-thread runtime (a server's), the
/// worker hands its other tasks to another thread while `f` runs
/// (`block_in_place`), so accepts, `/healthz` and every other stream go
/// on; anywhere else `f` just runs. The servers bound how many such calls
/// run at once by the requests they admit.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A handle on the shared runtime, for work that outlives one call (the
/// MCP client's connections, which its tools then wait on from blocking
/// threads). `None` when the system refused the runtime a thread.
pub(crate) fn handle() -> Option<Handle> {
    runtime().map(|runtime| runtime.handle().clone())
}

/// Blocks on the shared runtime (outside any runtime).
fn run<F: Future>(future: F) -> F::Output {
    match runtime() {
        Some(runtime) => runtime.block_on(future),
        None => own_runtime(future),
    }
}

/// Blocks on a current-thread runtime made for this one call: the fallback
/// when no thread could be had for the shared one.
fn own_runtime<F: Future>(future: F) -> F::Output {
    // A current-thread runtime needs no thread; its drivers run here.
    #[allow(
        clippy::expect_used,
        reason = "building a current-thread runtime only fails when the system has no file descriptors or memory left for it"
    )]
    let runtime = Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread Tokio runtime");
    runtime.block_on(future)
}

/// Runs a streaming call on a thread of its own: `run` is handed a sink
/// (and blocks on the call with [`block_on`]); each item it sinks reaches
/// `on_item` here, on the calling thread, as it arrives (`on_item` need not
/// be `Send`).
pub(crate) fn block_on_streaming<T: Send, R: Send>(
    run: impl FnOnce(&mut (dyn FnMut(T) + Send)) -> R + Send,
    on_item: &mut dyn FnMut(T),
) -> R {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let mut sink = move |item: T| {
                // The receiver lives until this thread is joined.
                let _ = sender.send(item);
            };
            run(&mut sink)
        });
        for item in receiver {
            on_item(item);
        }
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
