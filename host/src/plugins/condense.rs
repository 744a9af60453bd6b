//! `abi_stable`'s library errors condensed into values that display as
//! one line: its layout dump (hundreds of lines) cut to the mismatching
//! type and its first differences.

use super::errors::{AbiMismatch, FileError, RootModuleFailure};
use abi_stable::library::LibraryError;

/// Turns `abi_stable`'s error (up to hundreds of lines of layout dump) into
/// values that display as one line.
pub(super) fn condense(error: LibraryError) -> FileError {
    match error {
        LibraryError::OpenError { err, .. } => FileError::Open(err),
        LibraryError::GetSymbolError { .. } => RootModuleFailure::Missing.into(),
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => FileError::VersionMismatch {
            expected: expected_version.to_string(),
            found: actual_version.to_string(),
        },
        LibraryError::RootModule { err, .. } => RootModuleFailure::Failed(err.to_string()).into(),
        LibraryError::AbiInstability(err) => layout_summary(&err.to_string()).into(),
        LibraryError::InvalidAbiHeader(_) | LibraryError::InvalidCAbi { .. } => {
            AbiMismatch::Header.into()
        }
        LibraryError::ParseVersionError(error) => AbiMismatch::Version(error.to_string()).into(),
        LibraryError::Many(errors) => match errors.into_iter().next() {
            Some(first) => condense(first),
            None => AbiMismatch::Unknown.into(),
        },
    }
}

/// How many of a layout dump's differences are kept.
const DIFFERENCES_KEPT: usize = 2;

/// Condenses `abi_stable`'s layout dump (only its text survives into
/// [`LibraryError::AbiInstability`]) into the mismatching type and its first
/// differences: `ToolCallView<'a>: incompatible type size (expected 48,
/// found 56); too many fields (expected 3, found 4)`.
fn layout_summary(dump: &str) -> AbiMismatch {
    let lines: Vec<&str> = dump.lines().map(str::trim).collect();
    let after = |at: usize, label: &str| {
        let offset = lines[at..].iter().position(|l| *l == label)?;
        lines.get(at + offset + 1).copied()
    };
    let mut type_name = None;
    let mut differences: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line == "Layout of found type:" {
            type_name = lines[i..]
                .iter()
                .find_map(|l| l.strip_prefix("type:"))
                .map(str::to_owned);
        }
        if let Some(what) = line.strip_prefix("Error:") {
            let difference = match (after(i, "Expected:"), after(i, "Found:")) {
                (Some(expected), Some(found)) if expected.len() < 60 && found.len() < 60 => {
                    format!("{what} (expected {expected}, found {found})")
                }
                _ => what.to_owned(),
            };
            if !differences.contains(&difference) {
                differences.push(difference);
            }
        }
    }
    differences.truncate(DIFFERENCES_KEPT);
    if differences.is_empty() {
        let extra = lines
            .iter()
            .position(|l| *l == "Extra:")
            .and_then(|at| lines[at + 1..].iter().find(|l| !l.is_empty()));
        differences.push(extra.map_or("the type layouts differ", |l| l).to_owned());
    }
    AbiMismatch::Layout {
        type_name,
        differences,
    }
}

#[cfg(test)]
mod tests {
    use super::{condense, layout_summary};
    use crate::plugins::errors::{AbiMismatch, FileError};
    use abi_stable::library::LibraryError;
    use abi_stable::std_types::RBoxError;

    #[test]
    fn a_layout_dump_condenses_to_the_type_and_its_first_errors() {
        let dump = "\
Layout of expected type:
    --- Type Layout ---
    type:ToolCallView<'a>
Layout of found type:
    --- Type Layout ---
    type:ToolCallView<'a>
    size:56 align:8

Error:incompatible type size
Expected:
    48
Found:
    56

Error:too many fields
Expected:
    3
Found:
    4
";
        assert_eq!(
            layout_summary(dump).to_string(),
            "ToolCallView<'a>: incompatible type size (expected 48, found 56); too many fields (expected 3, found 4)"
        );
    }

    /// Two versions of one type, as a host and a pack built against another
    /// ABI would see it.
    #[allow(
        unsafe_code,
        reason = "the StableAbi derive implements an unsafe trait; no unsafe code is written here"
    )]
    mod versions {
        /// Module `$name` with a `View` of the given fields, held by a
        /// `Root` (as a pack's root module holds the ABI's types).
        macro_rules! version {
            ($name:ident: $($field:ty),*) => {
                pub(in super::super) mod $name {
                    #[repr(C)]
                    #[derive(abi_stable::StableAbi)]
                    pub(crate) struct View($($field),*);

                    #[repr(C)]
                    #[derive(abi_stable::StableAbi)]
                    pub(crate) struct Root(View);
                }
            };
        }

        version!(host: u64, u64, u64);
        version!(pack: u64, u64, u64, u64);
    }

    #[test]
    fn a_real_layout_error_from_this_abi_stable_condenses_to_one_line() {
        use abi_stable::abi_stability::abi_checking::check_layout_compatibility;
        use abi_stable::StableAbi;
        let errors = check_layout_compatibility(
            <versions::host::Root as StableAbi>::LAYOUT,
            <versions::pack::Root as StableAbi>::LAYOUT,
        )
        .unwrap_err();
        // What `LibHeader` hands the loader: the errors, formatted.
        let error = LibraryError::AbiInstability(RBoxError::from_fmt(&errors));
        let FileError::AbiMismatch(AbiMismatch::Layout {
            type_name,
            differences,
        }) = condense(error)
        else {
            panic!("a layout mismatch");
        };
        assert_eq!(type_name.as_deref(), Some("View"));
        assert_eq!(
            differences,
            [
                "incompatible type size (expected 24, found 32)",
                "too many fields (expected 3, found 4)"
            ]
        );
    }
}
