//! `chimera pack_test` (being built).

use super::failure::Failure;

pub(crate) fn test(args: super::args::PackTestArgs) -> Result<(), Failure> {
    Err(Failure::usage("not built yet"))
}
