//! The messages of the protocol: child → host `Hello` (once, first),
//! `Reply`, `State`, `Imported`, `Failed` and, inside a call, `StateOp`;
//! host → child `Call`, `Export`, `Import`, `Shutdown` and `StateAnswer`. One encoder per message, one decoder
//! per direction; an unknown kind, or one for the other direction, is an
//! error.

use super::frame::{kind, Dec, Frame, WireError};
use super::input::OwnedInput;
pub(crate) use crate::state::{StateAnswer, StateKind};
use chimera_plugin_api::abi::{Decision, SeamInput};

/// The child's first frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    /// [`WIRE_VERSION`](super::WIRE_VERSION) as the child speaks it.
    pub(crate) wire_version: u8,
    /// The pack's entry-point name.
    pub(crate) name: String,
    /// Its declared version.
    pub(crate) version: String,
    /// Its one-line description.
    pub(crate) description: String,
    /// `(seam, name)` of each interceptor, in registration order.
    pub(crate) registrations: Vec<(u32, String)>,
    /// Its answer to the failure-policy extension (empty: none).
    pub(crate) policy_json: String,
    /// One line per sandbox feature this kernel lacks.
    pub(crate) warnings: Vec<String>,
}

/// A message from the child.
#[derive(Debug)]
pub(crate) enum FromChild {
    /// The pack is loaded and ready.
    Hello(Hello),
    /// The pack could not be loaded; one line.
    Failed(String),
    /// The answer to call `seq`: `allowed` interceptors allowed, then
    /// `decision` (when one answered something else).
    Reply {
        seq: u64,
        allowed: u32,
        decision: Option<Decision>,
    },
    /// The exported state (empty: none).
    State { seq: u64, json: String },
    /// The import's outcome.
    Imported {
        seq: u64,
        outcome: Result<(), String>,
    },
    /// Inside call `seq`: an interceptor asks the host's gate state.
    StateOp { seq: u64, op: StateOp },
}

/// A gate-state operation an isolated pack asks of the host (the
/// arguments of `StateServiceAbi`'s methods): where, and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateOp {
    pub(crate) scope: u8,
    pub(crate) conversation: String,
    pub(crate) key: String,
    pub(crate) kind: StateKind,
}

/// A message from the host.
#[derive(Debug)]
pub(crate) enum FromHost {
    /// Run interceptors `indices` in order on `input`.
    Call {
        seq: u64,
        seam: u32,
        indices: Vec<u32>,
        input: Box<OwnedInput>,
    },
    /// Export the pack's state.
    Export { seq: u64 },
    /// Import state.
    Import { seq: u64, json: String },
    /// Exit.
    Shutdown,
    /// The answer to the child's last [`StateOp`].
    StateAnswer(StateAnswer),
}

/// The hello frame.
pub(crate) fn hello<'b>(buf: &'b mut Vec<u8>, hello: &Hello) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::HELLO);
    f.u8(hello.wire_version);
    f.str(&hello.name);
    f.str(&hello.version);
    f.str(&hello.description);
    f.len(hello.registrations.len());
    for (seam, name) in &hello.registrations {
        f.u32(*seam);
        f.str(name);
    }
    f.str(&hello.policy_json);
    f.len(hello.warnings.len());
    for w in &hello.warnings {
        f.str(w);
    }
    f.finish()
}

/// The frame saying the child could not start.
pub(crate) fn failed<'b>(buf: &'b mut Vec<u8>, line: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::FAILED);
    f.str(line);
    f.finish()
}

/// A call frame: interceptors `indices` on `input`. Only the slots `input`
/// fills travel.
pub(crate) fn call<'b>(
    buf: &'b mut Vec<u8>,
    seq: u64,
    indices: &[u32],
    input: &SeamInput<'_>,
) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::CALL);
    f.u64(seq);
    f.u32(input.seam.0);
    f.len(indices.len());
    for i in indices {
        f.u32(*i);
    }
    f.input(input);
    f.finish()
}

/// A reply frame.
pub(crate) fn reply<'b>(
    buf: &'b mut Vec<u8>,
    seq: u64,
    allowed: u32,
    decision: Option<&Decision>,
) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::REPLY);
    f.u64(seq);
    f.u32(allowed);
    f.opt(decision, Frame::decision);
    f.finish()
}

/// Asks for the pack's state.
pub(crate) fn export(buf: &mut Vec<u8>, seq: u64) -> &[u8] {
    let mut f = Frame::start(buf, kind::EXPORT);
    f.u64(seq);
    f.finish()
}

/// The pack's state.
pub(crate) fn state<'b>(buf: &'b mut Vec<u8>, seq: u64, json: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::STATE);
    f.u64(seq);
    f.str(json);
    f.finish()
}

/// Hands the pack state.
pub(crate) fn import<'b>(buf: &'b mut Vec<u8>, seq: u64, json: &str) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::IMPORT);
    f.u64(seq);
    f.str(json);
    f.finish()
}

/// The import's outcome.
pub(crate) fn imported<'b>(buf: &'b mut Vec<u8>, seq: u64, outcome: Result<(), &str>) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::IMPORTED);
    f.u64(seq);
    f.opt_str(outcome.err());
    f.finish()
}

/// Asks the child to exit.
pub(crate) fn shutdown(buf: &mut Vec<u8>) -> &[u8] {
    Frame::start(buf, kind::SHUTDOWN).finish()
}

/// An interceptor's state operation, inside call `seq`.
pub(crate) fn state_op<'b>(buf: &'b mut Vec<u8>, seq: u64, op: &StateOp) -> &'b [u8] {
    let signed = |n: i64| u64::from_le_bytes(n.to_le_bytes());
    let mut f = Frame::start(buf, kind::STATE_OP);
    f.u64(seq);
    f.u8(op.kind.code());
    f.u8(op.scope);
    f.str(&op.conversation);
    f.str(&op.key);
    match op.kind {
        StateKind::Incr { n, window_ms } | StateKind::Add { n, window_ms } => {
            f.u64(signed(n));
            f.u64(window_ms);
        }
        StateKind::Get { window_ms } => f.u64(window_ms),
        StateKind::Take { n, rate, burst } => {
            f.u64(n);
            f.u64(rate.to_bits());
            f.u64(burst);
        }
    }
    f.finish()
}

/// The host's answer to a state operation.
pub(crate) fn state_answer<'b>(buf: &'b mut Vec<u8>, answer: &StateAnswer) -> &'b [u8] {
    let mut f = Frame::start(buf, kind::STATE_ANSWER);
    match answer {
        StateAnswer::Total(total) => {
            f.u8(0);
            f.u64(u64::from_le_bytes(total.to_le_bytes()));
        }
        StateAnswer::Taken {
            allowed,
            wait_ms,
            remaining,
        } => {
            f.u8(1);
            f.u8(u8::from(*allowed));
            f.u64(*wait_ms);
            f.u64(*remaining);
        }
        StateAnswer::Refused(line) => {
            f.u8(2);
            f.str(line);
        }
        StateAnswer::Added => f.u8(3),
    }
    f.finish()
}

/// A [`StateOp`]'s fields after its kind byte.
fn decode_state_op(d: &mut Dec<'_>) -> Result<StateOp, WireError> {
    let code = d.u8()?;
    let (scope, conversation, key) = (d.u8()?, d.str()?, d.str()?);
    let kind = match code {
        0 => StateKind::Incr {
            n: i64::from_le_bytes(d.u64()?.to_le_bytes()),
            window_ms: d.u64()?,
        },
        1 => StateKind::Get {
            window_ms: d.u64()?,
        },
        2 => StateKind::Take {
            n: d.u64()?,
            rate: f64::from_bits(d.u64()?),
            burst: d.u64()?,
        },
        3 => StateKind::Add {
            n: i64::from_le_bytes(d.u64()?.to_le_bytes()),
            window_ms: d.u64()?,
        },
        other => return Err(WireError::Kind(other)),
    };
    Ok(StateOp {
        scope,
        conversation,
        key,
        kind,
    })
}

/// Decodes a frame (kind and payload, without the length) from the child.
pub(crate) fn decode_from_child(frame: &[u8]) -> Result<FromChild, WireError> {
    let (k, mut d) = Dec::open(frame)?;
    let message = match k {
        kind::HELLO => FromChild::Hello(Hello {
            wire_version: d.u8()?,
            name: d.str()?,
            version: d.str()?,
            description: d.str()?,
            registrations: d.list(8, |d| Ok((d.u32()?, d.str()?)))?,
            policy_json: d.str()?,
            warnings: d.list(4, Dec::str)?,
        }),
        kind::FAILED => FromChild::Failed(d.str()?),
        kind::REPLY => FromChild::Reply {
            seq: d.u64()?,
            allowed: d.u32()?,
            decision: d.opt(Dec::decision)?,
        },
        kind::STATE => FromChild::State {
            seq: d.u64()?,
            json: d.str()?,
        },
        kind::IMPORTED => FromChild::Imported {
            seq: d.u64()?,
            outcome: match d.opt_str()? {
                None => Ok(()),
                Some(error) => Err(error),
            },
        },
        kind::STATE_OP => FromChild::StateOp {
            seq: d.u64()?,
            op: decode_state_op(&mut d)?,
        },
        other => return Err(WireError::Kind(other)),
    };
    d.end()?;
    Ok(message)
}

/// Decodes a frame (kind and payload, without the length) from the host.
pub(crate) fn decode_from_host(frame: &[u8]) -> Result<FromHost, WireError> {
    let (k, mut d) = Dec::open(frame)?;
    let message = match k {
        kind::CALL => FromHost::Call {
            seq: d.u64()?,
            seam: d.u32()?,
            indices: d.list(4, Dec::u32)?,
            input: d.input()?,
        },
        kind::EXPORT => FromHost::Export { seq: d.u64()? },
        kind::IMPORT => FromHost::Import {
            seq: d.u64()?,
            json: d.str()?,
        },
        kind::SHUTDOWN => FromHost::Shutdown,
        kind::STATE_ANSWER => FromHost::StateAnswer(match d.u8()? {
            0 => StateAnswer::Total(i64::from_le_bytes(d.u64()?.to_le_bytes())),
            1 => StateAnswer::Taken {
                allowed: d.flag()?,
                wait_ms: d.u64()?,
                remaining: d.u64()?,
            },
            2 => StateAnswer::Refused(d.str()?),
            3 => StateAnswer::Added,
            other => return Err(WireError::Kind(other)),
        }),
        other => return Err(WireError::Kind(other)),
    };
    d.end()?;
    Ok(message)
}
