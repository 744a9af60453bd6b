//! The `output` seam: the final answer before the user sees it — the
//! readable transcript, `run_end.output`, the embedding API's result.
//! Fail-open. A replacement redacts; a block shows the notice (or the
//! reason), never the text. A reply the `model_response` seam substituted
//! is not judged again here.

use super::{empty_input, text_replacement, Invalid, OutputSeam, SeamAbi, SeamShape};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{SeamInput, SeamValue, SessionView};

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

    fn changes(before: &String, after: &String) -> crate::interception::Changes {
        crate::interception::Differ::text_changes(before, after)
    }

    fn from_abi(
        _lead: &Self::Lead,
        value: SeamValue,
        _current: &String,
    ) -> Result<String, Invalid> {
        text_replacement(value)
    }
}
