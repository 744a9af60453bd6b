//! The `output` seam: the final answer before the user sees it — the
//! readable transcript, `run_end.output`, the embedding API's result.
//! Fail-open. A replacement redacts; a block shows the notice (or the
//! reason), never the text. A reply the `model_response` seam substituted
//! is not judged again here.

use super::{empty_input, OutputSeam, SeamAbi, SeamShape};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{SeamInput, SessionView};

impl SeamAbi for OutputSeam {
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
}
