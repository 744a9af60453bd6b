//! `chimera pack_new` (being built).

use super::failure::Failure;

pub(crate) fn new(args: super::args::PackNewArgs) -> Result<(), Failure> {
    Err(Failure::usage("not built yet"))
}
