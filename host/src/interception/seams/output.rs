//! The `output` seam: the final answer before the user sees it — the
//! readable transcript, `run_end.output`, the embedding API's result.
//! Fail-open. A replacement redacts; a block shows the notice (or the
//! reason), never the text. A reply the `model_response` seam substituted
//! is not judged again here.

use super::{describe, empty_input, text_from_abi, Invalid, SeamAbi, SeamSpec};
use crate::interception::{InterceptResult, Interceptor};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};

/// Marker for the `output` seam.
pub struct OutputSeam;

type HostFn = dyn Fn(&str) -> InterceptResult<String> + Send + Sync;

impl SeamSpec for OutputSeam {
    const NAME: &'static str = "output";
    const FAIL_CLOSED: bool = false;
    const RETRIES: bool = true;
}

impl SeamAbi for OutputSeam {
    const SEAM: abi::Seam = abi::Seam::OUTPUT;
    const EXPECTED: &'static str = "Text";
    type Value = String;
    type Lead = ();
    type HostFn = HostFn;

    fn call_host(f: &HostFn, _lead: &(), value: &String) -> InterceptResult<String> {
        f(value)
    }

    fn with_input<R>(
        _lead: &(),
        value: &String,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        f(&SeamInput {
            text: RStr::from_str(value),
            extension_json: RStr::from_str("{}"),
            ..empty_input(Self::SEAM, session)
        })
    }

    fn changes(before: &String, after: &String) -> crate::audit::Changes {
        crate::audit::Differ::text_changes(before, after)
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        _current: &String,
    ) -> Result<String, Invalid> {
        let described = describe(&value);
        text_from_abi(value).ok_or(Invalid::WrongType(described))
    }
}

impl Interceptor<OutputSeam> {
    /// A host interceptor on `output`.
    pub fn output<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&str) -> InterceptResult<String> + Send + Sync + 'static,
    {
        let f: Box<HostFn> = Box::new(f);
        Interceptor::host(name, f)
    }
}
