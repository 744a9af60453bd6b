//! The `stream_chunk` seam: every streamed text delta before it is
//! released. Fail-open. The value is the turn's text so far; the facts say
//! how much of it is already shown and how long the new delta is. Answers:
//! allow (release the candidate), hold (withhold its last *n* bytes until
//! the next delta), block (nothing more is published this turn), and a
//! rewrite of the candidate — the text after the released part — alone or
//! with a hold (a redaction). Released text is never rewritten. Packs
//! only: the host has no closure form of this seam.

use super::{empty_input, text_replacement, Invalid, SeamAbi, SeamShape, StreamChunkSeam};
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{SeamInput, SeamValue, SessionView};

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

/// The facts' JSON in fixed columns:
/// `{"released":R,"delta":D,"final":B,"replace":true}` with each number
/// right-aligned in 20 characters (JSON whitespace before a value is
/// allowed); `"replace":true` tells a pack that this host takes a rewrite
/// of the candidate. The layout never moves, so a delta's facts are two
/// numbers written in place on the stack: no allocation, no formatting
/// machinery, no copies of variable length. The SDK reads the columns
/// directly; any JSON reader reads the same object.
pub(crate) const FACTS_TEMPLATE: &[u8; FACTS_LEN] =
    b"{\"released\":                    ,\"delta\":                    ,\"final\":false,\"replace\":true}";

/// The length of the facts' JSON.
pub(crate) const FACTS_LEN: usize = 91;

/// Where the `released` and `delta` columns end, and where `final` starts.
const RELEASED_END: usize = 32;
const DELTA_END: usize = 61;
const FINAL_AT: usize = 70;

fn put_number(json: &mut [u8; FACTS_LEN], end: usize, mut n: usize) {
    let mut at = end;
    loop {
        at -= 1;
        // `n % 10` is a single decimal digit.
        #[allow(clippy::cast_possible_truncation, reason = "a digit, 0..=9")]
        {
            json[at] = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
}

/// [`FACTS_TEMPLATE`] filled in for `facts`.
fn facts_json(facts: &StreamFacts) -> [u8; FACTS_LEN] {
    let mut json = *FACTS_TEMPLATE;
    put_number(&mut json, RELEASED_END, facts.released);
    put_number(&mut json, DELTA_END, facts.delta);
    if facts.last {
        json[FINAL_AT..FINAL_AT + 5].copy_from_slice(b"true ");
    }
    json
}

impl SeamAbi for StreamChunkSeam {
    fn with_input<R>(
        facts: &StreamFacts,
        value: &String,
        session: &SessionView<'_>,
        f: impl FnOnce(&SeamInput<'_>) -> R,
    ) -> R {
        let json = facts_json(facts);
        f(&SeamInput {
            text: RStr::from_str(value),
            // Only ASCII was written.
            extension_json: RStr::from_str(std::str::from_utf8(&json).unwrap_or("{}")),
            ..empty_input(Self::SEAM, session)
        })
    }

    /// The rewritten text: the released part as it is, then the new
    /// candidate.
    fn from_abi(
        facts: &StreamFacts,
        value: SeamValue,
        current: &String,
    ) -> Result<String, Invalid> {
        let candidate = text_replacement(value)?;
        let released = current.get(..facts.released).ok_or_else(|| {
            Invalid::Malformed("the released text is not a prefix of the stream".to_owned())
        })?;
        let mut text = String::with_capacity(released.len() + candidate.len());
        text.push_str(released);
        text.push_str(&candidate);
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_are_json_in_fixed_columns_whatever_the_numbers() {
        for (released, delta, last) in [
            (0, 0, false),
            (12, 4, true),
            (usize::MAX, usize::MAX, false),
        ] {
            let json = facts_json(&StreamFacts {
                released,
                delta,
                last,
            });
            let text = std::str::from_utf8(&json).unwrap();
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(value["released"].as_u64(), u64::try_from(released).ok());
            assert_eq!(value["delta"].as_u64(), u64::try_from(delta).ok());
            assert_eq!(value["final"], last);
        }
    }
}
