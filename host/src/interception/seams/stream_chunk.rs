//! The `stream_chunk` seam: every streamed text delta before it is
//! released. Fail-open. The value is the turn's text so far; the facts say
//! how much of it is already shown and how long the new delta is. Answers:
//! allow (release the candidate), hold (withhold its last *n* bytes until
//! the next delta), block (nothing more is published this turn). There is
//! no replacement. Packs only: the host has no closure form of this seam.

use super::{empty_input, Invalid, SeamAbi, SeamSpec};
use crate::interception::InterceptResult;
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{self, SeamInput, SeamValue, SessionView};
use std::fmt::Write as _;

/// Marker for the `stream_chunk` seam.
pub struct StreamChunkSeam;

/// Where one offer stands in the turn's text.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamFacts {
    /// Bytes already released (shown).
    pub released: usize,
    /// Length of the new delta, at the end of the text.
    pub delta: usize,
    /// The final check at the end of the stream (holds are ignored).
    pub last: bool,
}

/// Never constructed: the seam has no host closures.
type HostFn = dyn Fn(&StreamFacts, &str) -> InterceptResult<String> + Send + Sync;

impl SeamSpec for StreamChunkSeam {
    const NAME: &'static str = "stream_chunk";
    const FAIL_CLOSED: bool = false;
    const HOLDS: bool = true;
}

/// A small buffer on the stack for the facts' JSON (no allocation per delta).
struct FactsJson {
    bytes: [u8; 96],
    len: usize,
}

impl std::fmt::Write for FactsJson {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl SeamAbi for StreamChunkSeam {
    const SEAM: abi::Seam = abi::Seam::STREAM_CHUNK;
    const EXPECTED: &'static str = "nothing (stream_chunk has no replacement)";
    type Value = String;
    type Lead = StreamFacts;
    type HostFn = HostFn;

    fn call_host(f: &HostFn, facts: &StreamFacts, value: &String) -> InterceptResult<String> {
        f(facts, value)
    }

    fn with_input<R>(
        facts: &StreamFacts,
        value: &String,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let mut json = FactsJson {
            bytes: [0; 96],
            len: 0,
        };
        // Two numbers of at most 20 digits and the fixed keys fit in 96 bytes.
        let _ = write!(
            json,
            r#"{{"released":{},"delta":{},"final":{}}}"#,
            facts.released, facts.delta, facts.last
        );
        let text = std::str::from_utf8(&json.bytes[..json.len]).unwrap_or("{}");
        f(&SeamInput {
            text: RStr::from_str(value),
            extension_json: RStr::from_str(text),
            ..empty_input(Self::SEAM, session)
        })
    }

    fn from_abi(_value: SeamValue, _current: &String) -> Result<String, Invalid> {
        Err(Invalid::Malformed(
            "stream_chunk takes no replacement (answer allow, hold or block)".to_owned(),
        ))
    }
}
