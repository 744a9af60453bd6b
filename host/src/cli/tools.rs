//! `chimera tools` (being built).

use super::failure::Failure;

pub(crate) fn list(json: bool) -> Result<(), Failure> {
    Err(Failure::usage("not built yet"))
}
