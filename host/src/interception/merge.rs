//! Merging plugin chains with host chains.

use super::bundle::Interceptors;
use std::sync::Arc;

/// Merges bundles in argument order (callers pass the plugin registry's
/// bundle first, the host's last). Absent and empty bundles are skipped.
///
/// * no contributing bundle → `None`, so the loop runs exactly as a host
///   without interception (byte-identical);
/// * exactly one → **that very bundle** (`Arc::ptr_eq` holds), unmodified;
/// * otherwise a new bundle whose chains are the concatenations, in order.
///   Inputs are never mutated.
///
/// ```
/// use chimera_host::interception::{merge_interceptors, Interceptors, Interceptor, InterceptDecision};
/// use std::sync::Arc;
///
/// let mut host = Interceptors::new();
/// host.tool_call.push(Interceptor::tool_call("host", |_| Ok(InterceptDecision::Allow)));
/// let host = Arc::new(host);
///
/// assert!(merge_interceptors(&[None, None]).is_none());
/// let merged = merge_interceptors(&[None, Some(&host)]).unwrap();
/// assert!(Arc::ptr_eq(&merged, &host));
/// ```
#[must_use]
pub fn merge_interceptors(bundles: &[Option<&Arc<Interceptors>>]) -> Option<Arc<Interceptors>> {
    let contributing: Vec<&Arc<Interceptors>> = bundles
        .iter()
        .flatten()
        .copied()
        .filter(|bundle| !bundle.is_empty())
        .collect();
    match contributing.as_slice() {
        [] => None,
        [only] => Some(Arc::clone(only)),
        many => {
            let mut merged = Interceptors::new();
            for bundle in many {
                merged.extend(bundle);
            }
            Some(Arc::new(merged))
        }
    }
}
