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
    /// Reserved: ask the model to try again, with `reason` as feedback.
    pub const RETRY: DecisionKind = DecisionKind(4);
    /// Reserved: ask a human, with `reason` as the prompt.
    pub const ASK: DecisionKind = DecisionKind(5);
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

    fn with_reason(kind: DecisionKind, reason: RString) -> Decision {
        Decision {
            kind,
            reason,
            value: ROption::RNone,
        }
    }
}
