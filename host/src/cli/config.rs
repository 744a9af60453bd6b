//! `chimera config` (being built).

use super::failure::Failure;

pub(crate) fn show(file: Option<&std::path::Path>, json: bool) -> Result<(), Failure> {
    Err(Failure::usage("not built yet"))
}
