//! A plain shared library with one exported function and no pack manifest.

/// Adds one. Exported so the library has a symbol table worth reading.
#[must_use]
pub fn add_one(x: u32) -> u32 {
    x + 1
}
