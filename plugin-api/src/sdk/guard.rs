//! Panic containment: nothing unwinds out of pack code.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// The last panic seen by the quiet hook on this thread, with its location.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `body`; a panic becomes `Err("panicked: <message>")`.
pub(crate) fn catch<R>(body: impl FnOnce() -> R) -> Result<R, String> {
    panic::catch_unwind(AssertUnwindSafe(body)).map_err(|payload| {
        let recorded = LAST_PANIC.with(|last| last.borrow_mut().take());
        format!(
            "panicked: {}",
            recorded.unwrap_or_else(|| panic_message(&*payload))
        )
    })
}

/// The message a panic carried: the text of `panic!("…")` (whose payload is
/// a `&str` or a `String`), or `non-string panic payload` for anything else
/// (`std::panic::panic_any` with another type).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Installed once when a pack *library* loads (never when a pack crate is
/// linked into a host as an rlib, where the host owns the hook): a pack's
/// copy of std would otherwise print every contained panic to stderr. The
/// message and location are kept for the error value instead.
pub(crate) fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let text = match info.location() {
                Some(at) => format!(
                    "{} (at {}:{})",
                    panic_message(info.payload()),
                    at.file(),
                    at.line()
                ),
                None => panic_message(info.payload()),
            };
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(text));
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_with_its_message() {
        let result: Result<(), String> = catch(|| panic!("deliberate {}", 42));
        assert_eq!(result.unwrap_err(), "panicked: deliberate 42");
    }

    #[test]
    fn a_normal_return_passes_through() {
        assert_eq!(catch(|| 7), Ok(7));
    }
}
