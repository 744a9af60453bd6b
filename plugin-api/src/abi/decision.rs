//! What an interceptor answers.

use super::values::SeamValue;
use abi_stable::std_types::{RBox, ROption, RString};
use abi_stable::StableAbi;

/// The kind of a [`Decision`]: an open integer set, like [`Seam`](super::Seam).
#[repr(transparent)]
#[derive(StableAbi, Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct DecisionKind(pub u32);

impl DecisionKind {
    /// Pass the value through unchanged. Later interceptors still run.
    pub const ALLOW: DecisionKind = DecisionKind(0);
    /// Substitute `value`; later interceptors see the substitute.
    pub const REPLACE: DecisionKind = DecisionKind(1);
    /// Stop the chain with `reason`; the seam decides what a block means.
    pub const BLOCK: DecisionKind = DecisionKind(2);
    /// The interceptor failed (returned an error or panicked): `reason` says
    /// why. The seam's failure policy applies.
    pub const ERROR: DecisionKind = DecisionKind(3);
    /// Ask the model to try again (`output`), with `reason` as feedback;
    /// the bound and the outcome on exhaustion travel in the value (see
    /// [`Decision::retry`]).
    pub const RETRY: DecisionKind = DecisionKind(4);
    /// Ask a human operator (`tool_call`, `provider_request`), with
    /// `reason` as the prompt; the choices, the timeout and the default
    /// answer travel in the value (see [`Decision::ask`]).
    pub const ASK: DecisionKind = DecisionKind(5);

    /// The first of the `stream_chunk` hold kinds: `HOLD_BASE + n` withholds
    /// the last `n` bytes of the candidate text and re-offers them with the
    /// next delta. The count is in the kind itself, so a hold — answered on
    /// every delta by a scanning gate — allocates nothing.
    pub const HOLD_BASE: u32 = 0x4000_0000;
    /// The largest count a hold kind carries (just under 1 GiB).
    pub const HOLD_MAX: u32 = 0x3FFF_FFFF;

    /// Withhold the last `bytes` bytes of the candidate (clamped to
    /// [`HOLD_MAX`](Self::HOLD_MAX)).
    #[must_use]
    pub const fn hold(bytes: usize) -> DecisionKind {
        let n = if bytes > Self::HOLD_MAX as usize {
            Self::HOLD_MAX
        } else {
            // Checked just above: fits.
            #[allow(
                clippy::cast_possible_truncation,
                reason = "bounded by HOLD_MAX on the line above"
            )]
            {
                bytes as u32
            }
        };
        DecisionKind(Self::HOLD_BASE + n)
    }

    /// For a hold kind, how many trailing bytes it withholds.
    #[must_use]
    pub const fn held_bytes(self) -> Option<usize> {
        if self.0 >= Self::HOLD_BASE && self.0 - Self::HOLD_BASE <= Self::HOLD_MAX {
            Some((self.0 - Self::HOLD_BASE) as usize)
        } else {
            None
        }
    }
}

/// The notice part of a decision value's `extension_json`.
#[derive(serde::Deserialize)]
struct Noticed {
    notice: Option<String>,
}

/// An interceptor's answer for one value.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct Decision {
    /// What to do.
    pub kind: DecisionKind,
    /// Block reason, error text, or the payload of a later kind; empty otherwise.
    pub reason: RString,
    /// The replacement for [`DecisionKind::REPLACE`]; `RNone` otherwise, so an
    /// allow allocates nothing.
    pub value: ROption<RBox<SeamValue>>,
}

impl Decision {
    /// Pass through.
    #[must_use]
    pub fn allow() -> Decision {
        Decision::with_reason(DecisionKind::ALLOW, RString::new())
    }

    /// Substitute `value`.
    #[must_use]
    pub fn replace(value: SeamValue) -> Decision {
        Decision {
            kind: DecisionKind::REPLACE,
            reason: RString::new(),
            value: ROption::RSome(RBox::new(value)),
        }
    }

    /// Stop the chain with a reason.
    pub fn block(reason: impl Into<RString>) -> Decision {
        Decision::with_reason(DecisionKind::BLOCK, reason.into())
    }

    /// Report an interceptor failure.
    pub fn error(reason: impl Into<RString>) -> Decision {
        Decision::with_reason(DecisionKind::ERROR, reason.into())
    }

    /// Ask the model again (`output` only), with `feedback` as the user
    /// message of the retry request. At most `max` retries for this
    /// interceptor per answer; then `exhausted_block` decides: `None`
    /// accepts the last answer, `Some(reason)` blocks with `reason`. Carried
    /// as `{"retry":{"max":N,"exhausted":"allow"|"block","reason":"…"}}` in
    /// the value's `extension_json`.
    #[must_use]
    pub fn retry(feedback: &str, max: u32, exhausted_block: Option<&str>) -> Decision {
        let exhausted = match exhausted_block {
            None => serde_json::json!({"max": max, "exhausted": "allow"}),
            Some(reason) => serde_json::json!({"max": max, "exhausted": "block", "reason": reason}),
        };
        Decision {
            kind: DecisionKind::RETRY,
            reason: feedback.into(),
            value: ROption::RSome(RBox::new(SeamValue {
                extension_json: ROption::RSome(
                    serde_json::json!({ "retry": exhausted }).to_string().into(),
                ),
                ..SeamValue::default()
            })),
        }
    }

    /// Ask an operator: `prompt`, the `choices` offered (`allow`, `reject`,
    /// and `edit` when the operator may hand back a replacement), how long
    /// to wait (`None`: as long as it takes) and the answer a timeout gives.
    /// Carried as `{"ask":{"choices":[…],"timeout_ms":N|null,"default":"…"}}`
    /// in the value's `extension_json`.
    #[must_use]
    pub fn ask(prompt: &str, choices: &[&str], timeout_ms: Option<u64>, default: &str) -> Decision {
        let ask = serde_json::json!({
            "ask": {"choices": choices, "timeout_ms": timeout_ms, "default": default}
        });
        Decision {
            kind: DecisionKind::ASK,
            reason: prompt.into(),
            value: ROption::RSome(RBox::new(SeamValue {
                extension_json: ROption::RSome(ask.to_string().into()),
                ..SeamValue::default()
            })),
        }
    }

    /// Allow, and the call must finish within `within_ms` (`tool_call`
    /// only): past it the host records `on_timeout` as the call's error
    /// result, drops the late result and stops the tool. A host that does
    /// not know deadlines sees a plain allow.
    #[must_use]
    pub fn allow_within(within_ms: u64, on_timeout: &str) -> Decision {
        Decision {
            kind: DecisionKind::ALLOW,
            reason: RString::new(),
            value: ROption::RSome(RBox::new(SeamValue {
                extension_json: ROption::RSome(
                    serde_json::json!({ "deadline_ms": within_ms, "on_timeout": on_timeout })
                        .to_string()
                        .into(),
                ),
                ..SeamValue::default()
            })),
        }
    }

    /// Block, asking the host to compact the conversation and send the
    /// request again (`provider_request` only: a context-window gate). A
    /// host that cannot compact sees a plain block.
    #[must_use]
    pub fn compact(reason: &str) -> Decision {
        Decision {
            kind: DecisionKind::BLOCK,
            reason: reason.into(),
            value: ROption::RSome(RBox::new(SeamValue {
                extension_json: ROption::RSome(RString::from("{\"compact\":true}")),
                ..SeamValue::default()
            })),
        }
    }

    /// Pause the turn (`provider_request` only: a rate limiter): the host
    /// waits `wait_ms` (bounded by the host), then rebuilds the request from
    /// the history and runs the seams again. `reason` is shown. Carried as
    /// `{"retry_after_ms": N}` in the value's `extension_json`.
    #[must_use]
    pub fn retry_after(wait_ms: u64, reason: &str) -> Decision {
        Decision {
            kind: DecisionKind::RETRY,
            reason: reason.into(),
            value: ROption::RSome(RBox::new(SeamValue {
                extension_json: ROption::RSome(
                    serde_json::json!({ "retry_after_ms": wait_ms })
                        .to_string()
                        .into(),
                ),
                ..SeamValue::default()
            })),
        }
    }

    /// Withhold the last `bytes` bytes of a `stream_chunk` candidate.
    #[must_use]
    pub fn hold(bytes: usize) -> Decision {
        Decision::with_reason(DecisionKind::hold(bytes), RString::new())
    }

    /// Rewrite a `stream_chunk` candidate (the text after the released
    /// part) to `candidate`, withholding its last `bytes` bytes. Carried in
    /// the existing slots: `REPLACE` (nothing held) or a hold kind, with the
    /// new candidate in the value's `text`. Only for a host whose stream
    /// facts say `"replace":true`: an older host would read the hold and
    /// ignore the text.
    #[must_use]
    pub fn hold_replacing(candidate: RString, bytes: usize) -> Decision {
        let kind = if bytes == 0 {
            DecisionKind::REPLACE
        } else {
            DecisionKind::hold(bytes)
        };
        Decision {
            kind,
            reason: RString::new(),
            value: ROption::RSome(RBox::new(SeamValue {
                text: ROption::RSome(candidate),
                ..SeamValue::default()
            })),
        }
    }

    /// This decision with a user-facing notice attached: the host shows it
    /// (a `notice` event, a line of its own in the readable transcript) and
    /// never sends it to the model. It travels as data in the value's
    /// `extension_json` (`{"notice": "…"}`, merged into what is there), so an
    /// allow or a block that carries one has a value.
    #[must_use]
    pub fn with_notice(mut self, notice: &str) -> Decision {
        let entry = serde_json::to_string(notice).unwrap_or_else(|_| "\"\"".to_owned());
        let mut value = match self.value.into_option() {
            Some(boxed) => RBox::into_inner(boxed),
            None => SeamValue::default(),
        };
        let merged = match value.extension_json.into_option() {
            Some(existing) => match existing.as_str().trim_end().strip_suffix('}') {
                Some(open) if open.trim_end().ends_with('{') => {
                    format!("{open}\"notice\":{entry}}}")
                }
                Some(open) => format!("{open},\"notice\":{entry}}}"),
                None => format!("{{\"notice\":{entry}}}"),
            },
            None => format!("{{\"notice\":{entry}}}"),
        };
        value.extension_json = ROption::RSome(merged.into());
        self.value = ROption::RSome(RBox::new(value));
        self
    }

    /// The notice attached with [`with_notice`](Self::with_notice), if any.
    #[must_use]
    pub fn notice(&self) -> Option<String> {
        let value = self.value.as_ref().into_option()?;
        let json = value.extension_json.as_ref().into_option()?;
        if !json.as_str().contains("\"notice\"") {
            return None;
        }
        serde_json::from_str::<Noticed>(json.as_str())
            .ok()
            .and_then(|n| n.notice)
    }

    fn with_reason(kind: DecisionKind, reason: RString) -> Decision {
        Decision {
            kind,
            reason,
            value: ROption::RNone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_rides_on_any_decision_and_merges_with_what_the_value_carries() {
        assert_eq!(Decision::allow().notice(), None);
        let allow = Decision::allow().with_notice("heads up: \"quoted\"");
        assert_eq!(allow.kind, DecisionKind::ALLOW);
        assert_eq!(allow.notice().as_deref(), Some("heads up: \"quoted\""));
        let retry = Decision::retry("again", 2, None).with_notice("n");
        let json = retry
            .value
            .as_ref()
            .into_option()
            .unwrap()
            .extension_json
            .clone();
        let parsed: serde_json::Value =
            serde_json::from_str(json.into_option().unwrap().as_str()).unwrap();
        assert_eq!(parsed["retry"]["max"], 2);
        assert_eq!(parsed["notice"], "n");
    }

    #[test]
    fn a_hold_kind_carries_its_count_and_is_clamped() {
        assert_eq!(DecisionKind::hold(7).held_bytes(), Some(7));
        assert_eq!(
            DecisionKind::hold(usize::MAX).held_bytes(),
            Some(DecisionKind::HOLD_MAX as usize)
        );
        assert_eq!(DecisionKind::ALLOW.held_bytes(), None);
        assert_eq!(DecisionKind::RETRY.held_bytes(), None);
    }
}
