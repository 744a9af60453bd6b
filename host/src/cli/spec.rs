//! `--pack NAME[=JSON]` as the command line reads it: the library's
//! parsing, its error a usage error (a leaf).

use super::failure::Failure;

/// Splits `NAME[=JSON]` into the name and the JSON text (empty: defaults).
pub(crate) fn parse_pack_spec(spec: &str) -> Result<(String, String), Failure> {
    chimera_host::config::parse_pack_spec(spec)
        .map(|spec| (spec.name, spec.config))
        .map_err(Failure::usage)
}
