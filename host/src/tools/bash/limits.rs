//! The limits of a `bash` call: the default and largest timeouts, the
//! smallest output cap, and the checks on the `timeout_secs` a call asks
//! for.

use crate::tools::ToolError;
use std::time::Duration;

/// The default largest `timeout_secs` a call may ask for.
pub(super) const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The smallest output cap: room for the longest truncation note.
pub(super) const MIN_OUTPUT_CAP: usize = 64;

/// The largest `timeout_secs` a call may ask for, in whole seconds (at
/// least 1), given the tool's `max_timeout`.
pub(super) fn max_secs(max_timeout: Duration) -> u64 {
    max_timeout.as_secs().max(1)
}

/// The timeout of a call that asks for `timeout_secs`: `default` when it
/// asks for none; refused when it asks for 0 s or more than `max_timeout`
/// allows (see [`max_secs`]), naming the maximum.
pub(super) fn call_timeout(
    timeout_secs: Option<u64>,
    default: Duration,
    max_timeout: Duration,
) -> Result<Duration, ToolError> {
    let max = max_secs(max_timeout);
    match timeout_secs {
        None => Ok(default),
        Some(0) => Err(ToolError::invalid(
            "timeout_secs",
            "argument `timeout_secs` must be at least 1",
        )),
        Some(secs) if secs > max => Err(ToolError::invalid(
            "timeout_secs",
            format!(
                "argument `timeout_secs` is {secs}, above the maximum of {max}: \
                 give at most {max}"
            ),
        )),
        Some(secs) => Ok(Duration::from_secs(secs)),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::super::BashTool;
    use crate::tools::testing::{run, setup};
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn a_timeout_above_the_maximum_is_refused_naming_the_maximum() {
        let (_dir, ws) = setup();
        let tool = BashTool::default();
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 601}));
        assert_eq!(
            r.error.as_deref(),
            Some("argument `timeout_secs` is 601, above the maximum of 600: give at most 600")
        );
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 600}));
        assert_eq!(r.error, None);
        let tool = BashTool::default().max_timeout(Duration::from_secs(5));
        let r = run(&tool, &ws, json!({"command": "true", "timeout_secs": 6}));
        assert!(r.error.unwrap().contains("maximum of 5"));
    }
}
