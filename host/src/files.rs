//! Files a user names (a price table, an answers file, a configuration
//! file) and the files the host writes for them (a trust store, a lock
//! file). What is read is hostile until checked. Opening never blocks (a FIFO in the path's place
//! is refused, not waited on), only a regular file is read, its size is
//! capped, and it must be UTF-8. Every failure is one line.

use std::io::Read;
use std::path::Path;

/// The text of the regular file at `path`, at most `limit` bytes; the
/// error is the reason, for the caller to put after the path.
///
/// # Errors
///
/// `cannot read it: …` when the file cannot be opened or read,
/// `not a regular file` (a directory, a FIFO, …), `larger than LIMIT bytes`, or
/// `not UTF-8 text`.
pub fn read_user_file(path: &Path, limit: u64) -> Result<String, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading would wait for a writer.
        options.custom_flags(i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0));
    }
    let file = options
        .open(path)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !metadata.is_file() {
        return Err("not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// Writes `text` to `path` by writing a temporary file beside it (random
/// name, created exclusively, mode 0644 set on the descriptor) and renaming
/// it into place, so a reader never sees half a file.
///
/// # Errors
///
/// The I/O error when the temporary file cannot be created, written or given
/// its mode, or cannot be renamed over `path`; `path` is then as it was.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temporary = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temporary, text.as_bytes())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temporary
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_directory_an_oversized_or_binary_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        crate::test_support::make_fifo(&fifo);
        assert_eq!(
            read_user_file(&fifo, 100).unwrap_err(),
            "not a regular file"
        );
        assert_eq!(
            read_user_file(dir.path(), 100).unwrap_err(),
            "not a regular file"
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 101]).unwrap();
        assert_eq!(
            read_user_file(&big, 100).unwrap_err(),
            "larger than 100 bytes"
        );
        let binary = dir.path().join("binary");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        assert_eq!(read_user_file(&binary, 100).unwrap_err(), "not UTF-8 text");
        let fine = dir.path().join("fine");
        std::fs::write(&fine, "{}").unwrap();
        assert_eq!(read_user_file(&fine, 100).unwrap(), "{}");
        assert!(read_user_file(&dir.path().join("missing"), 100)
            .unwrap_err()
            .starts_with("cannot read it:"));
    }
}
