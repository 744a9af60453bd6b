//! Isolated packs: a pack run in a sandboxed child process (the pack host).

pub(crate) mod sandbox;
