//! The pack host's wire: compact, versioned, length-prefixed binary frames
//! over a Unix socket pair.
//!
//! ```text
//!  frame   = len:u32 LE (of kind + payload, at most MAX_FRAME) · kind:u8 · payload
//!  str     = len:u32 · UTF-8 bytes          opt<T> = 0 | 1 · T
//!  list<T> = count:u32 · T…                 (a count is checked against the bytes left)
//! ```
//!
//! Child → host: `Hello` (once, first), `Reply`, `State`, `Imported`,
//! `Failed` (the child could not start; one line), and inside a call
//! `StateOp` (an interceptor asks the host's gate state; a bounded number
//! per call). Host → child: `Call`, `Export`, `Import`, `Shutdown`, and
//! `StateAnswer` to each `StateOp`.
//!
//! A call carries only the input slots the seam filled: a presence byte
//! says which of messages, request, tool call, tool result, text and
//! extension JSON follow. Every length is bounded before anything is
//! allocated, every string is checked UTF-8, and an unknown kind is an
//! error: the other side may be hostile, and a bad frame is an error value,
//! never a panic.
//!
//! - [`frame`]: the length prefix, its bound, the kinds, the errors, the
//!   field writer and reader, and whole frames on a stream;
//! - [`value`]: the ABI's values (messages, requests, tool calls and
//!   results, decisions);
//! - [`input`]: a call's input, slot by slot, and the owned input the child
//!   lends its interceptors;
//! - [`message`]: the protocol's messages, their encoders and decoders.
//!
//! The polling reads under it are in [`super::transport`].

mod frame;
mod input;
mod message;
#[cfg(test)]
mod tests;
mod value;

pub(crate) use frame::{read_frame, write_frame, ReadError, WIRE_VERSION};
pub(crate) use message::{
    call, decode_from_child, decode_from_host, export, failed, hello, import, imported, reply,
    shutdown, state, state_answer, state_op, FromChild, FromHost, Hello, StateAnswer, StateOp,
};
