//! Snapshot of `chimera-plugin-api`'s `abi` module at ABI revision 1.
#![allow(missing_docs, unreachable_pub, reason = "test fixture")]

pub mod abi;
