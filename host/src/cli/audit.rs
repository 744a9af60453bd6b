//! `chimera audit` (being built).

use super::failure::Failure;

pub(crate) fn verify(file: &std::path::Path) -> Result<(), Failure> {
    Err(Failure::usage("not built yet"))
}
