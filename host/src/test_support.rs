//! What the unit tests share.

use std::path::Path;

/// Makes a FIFO at `path`: what a hostile file in a path's place looks like
/// (opening it for reading would wait for a writer).
#[cfg(unix)]
pub(crate) fn make_fifo(path: impl AsRef<Path>) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path.as_ref(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("make a FIFO");
}
