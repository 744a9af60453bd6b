//! Elsewhere than Linux there is no sandbox: the pack runs in its own
//! process, unconfined, and one warning says so.

use super::limits::Limits;

pub(super) fn confine(_limits: &Limits) -> Vec<String> {
    vec![
        "no sandbox on this system: the pack runs in its own process, unconfined (Landlock \
         and seccomp exist only on Linux)"
            .to_owned(),
    ]
}
