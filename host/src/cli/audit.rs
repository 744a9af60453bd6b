//! `chimera audit verify FILE [--expect-head HASH]`: checks the hash chain
//! of a log `run --audit FILE` wrote. Exit 0 when it is intact (one line:
//! how many lines, and the head to keep for `--expect-head`); 1 with one
//! line naming the first bad line and why; 2 when FILE cannot be read as
//! a log at all.

use super::failure::Failure;
use chimera_host::audit::{verify_file, VerifyError};
use std::path::Path;

pub(crate) fn verify(file: &Path, expect_head: Option<&str>) -> Result<(), Failure> {
    if let Some(head) = expect_head {
        if head.len() != 64 || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Failure::usage(format!(
                "--expect-head '{head}': a head is 64 hex digits, as `chimera audit verify` prints it"
            )));
        }
    }
    let shown = file.display();
    match verify_file(file, expect_head) {
        Ok(verified) => {
            match verified.head {
                Some(head) => println!("{shown}: intact, {} lines, head {head}", verified.lines),
                None => println!("{shown}: intact, empty"),
            }
            Ok(())
        }
        Err(VerifyError::File(reason)) => Err(Failure::usage(format!("{shown}: {reason}"))),
        Err(broken) => Err(Failure::run_failed(format!("{shown}: {broken}"))),
    }
}
