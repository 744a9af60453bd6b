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

/// The facts' JSON, written into a buffer on the stack (no allocation and
/// no formatting machinery per delta): `{"released":R,"delta":D,"final":B}`.
struct FactsJson {
    bytes: [u8; 96],
    len: usize,
}

impl FactsJson {
    fn new(facts: &StreamFacts) -> FactsJson {
        let mut json = FactsJson {
            bytes: [0; 96],
            len: 0,
        };
        json.push(br#"{"released":"#);
        json.number(facts.released);
        json.push(br#","delta":"#);
        json.number(facts.delta);
        json.push(if facts.last {
            br#","final":true}"#
        } else {
            br#","final":false}"#
        });
        json
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn number(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            // `n % 10` is a single decimal digit.
            #[allow(clippy::cast_possible_truncation, reason = "a digit, 0..=9")]
            {
                digits[at] = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    fn as_str(&self) -> &str {
        // Only ASCII was written.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("{}")
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
        // Two numbers of at most 20 digits and the fixed keys fit in 96 bytes.
        let json = FactsJson::new(facts);
        f(&SeamInput {
            text: RStr::from_str(value),
            extension_json: RStr::from_str(json.as_str()),
            ..empty_input(Self::SEAM, session)
        })
    }

    fn from_abi(_value: SeamValue, _current: &String) -> Result<String, Invalid> {
        Err(Invalid::Malformed(
            "stream_chunk takes no replacement (answer allow, hold or block)".to_owned(),
        ))
    }
}
