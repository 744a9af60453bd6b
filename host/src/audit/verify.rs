//! Checking a whole log (`chimera audit verify`): every line on its own,
//! then its place in the chain, stopping at the first that fails.

use super::line::{self, Link, LINE_CAP};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The largest log `verify` reads (and the writer appends to), in bytes.
pub const FILE_CAP: u64 = 1 << 30;

/// An intact log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many lines it holds.
    pub lines: u64,
    /// The hash of its last line (`None` for an empty log): record it
    /// somewhere the log's writers cannot reach, and pass it back as
    /// `--expect-head` to detect lines cut from the end.
    pub head: Option<String>,
}

/// Why a log does not verify. Displays as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The file cannot be read as a log at all (missing, unreadable, not
    /// a regular file).
    #[error("{0}")]
    File(String),
    /// The file is larger than [`FILE_CAP`]: it is not read.
    #[error("larger than {FILE_CAP} bytes: not read (start a new log well before that)")]
    TooLarge,
    /// The first line that fails, and why.
    #[error("line {line} is broken: {reason}")]
    Broken {
        /// Its 1-based number.
        line: u64,
        /// Why.
        reason: String,
    },
    /// Every line checks, but the head recorded earlier is not among them.
    #[error(
        "the expected head {0} is not in the log: lines were cut from its end, or it was rewritten"
    )]
    HeadMissing(String),
}

/// Verifies the log at `path`; with `expect_head`, also that a line with
/// that hash is still in it.
///
/// # Errors
///
/// `VerifyError::File` when the file cannot be opened or read, or is not a
/// regular file; `VerifyError::TooLarge` over [`FILE_CAP`];
/// `VerifyError::Broken` for the first line that is too long, cut off, or does
/// not check or follow the one before it; `VerifyError::HeadMissing` when no
/// line has `expect_head`.
pub fn verify_file(path: &Path, expect_head: Option<&str>) -> Result<Verified, VerifyError> {
    verify_each(path, expect_head, |_| {})
}

/// [`verify_file`], handing each line that checks (its bytes, without the
/// newline) to `visit` as it is read: what reads a log reads only what
/// verifies, in the same pass. A later broken line still fails the whole.
pub(crate) fn verify_each(
    path: &Path,
    expect_head: Option<&str>,
    mut visit: impl FnMut(&[u8]),
) -> Result<Verified, VerifyError> {
    let file = open(path)?;
    let mut reader = BufReader::new(file);
    let mut previous: Option<Link> = None;
    let mut found = expect_head.is_none();
    let mut bytes = Vec::new();
    let mut number = 0u64;
    loop {
        bytes.clear();
        let complete = read_line(&mut reader, &mut bytes)
            .map_err(|e| VerifyError::File(format!("cannot read it: {e}")))?;
        if bytes.is_empty() && complete.is_none() {
            break;
        }
        number += 1;
        let broken = |reason: String| VerifyError::Broken {
            line: number,
            reason,
        };
        match complete {
            Some(true) => {}
            Some(false) => return Err(broken(format!("longer than {LINE_CAP} bytes"))),
            None => {
                return Err(broken(
                    "incomplete (no newline at its end): the log was cut off mid-line".to_owned(),
                ))
            }
        }
        let link = line::check(&bytes).map_err(broken)?;
        line::follows(&link, number, previous.as_ref()).map_err(broken)?;
        found = found || expect_head.is_some_and(|head| head.eq_ignore_ascii_case(&link.hash));
        visit(&bytes);
        previous = Some(link);
    }
    if !found {
        return Err(VerifyError::HeadMissing(
            expect_head.unwrap_or_default().to_owned(),
        ));
    }
    Ok(Verified {
        lines: number,
        head: previous.map(|link| link.hash),
    })
}

/// Opens a log for reading as hostile input: never waiting on a FIFO, a
/// regular file only, at most [`FILE_CAP`] bytes.
fn open(path: &Path) -> Result<std::fs::File, VerifyError> {
    let unreadable = |e: std::io::Error| VerifyError::File(format!("cannot read it: {e}"));
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0));
    }
    let file = options.open(path).map_err(unreadable)?;
    let metadata = file.metadata().map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(VerifyError::File("not a regular file".to_owned()));
    }
    if metadata.len() > FILE_CAP {
        return Err(VerifyError::TooLarge);
    }
    Ok(file)
}

/// Reads one line (without its newline) into `out`, keeping at most
/// [`LINE_CAP`] + 1 bytes of it. `Some(true)`: a whole line within the
/// cap; `Some(false)`: a line over the cap; `None`: the file ended before
/// a newline (`out` empty: at the very end).
fn read_line(reader: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    let mut over = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(None);
        }
        let (chunk, newline) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        let room = (LINE_CAP + 1).saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        over = over || chunk.len() > room || out.len() > LINE_CAP;
        let used = chunk.len() + usize::from(newline);
        reader.consume(used);
        if newline {
            return Ok(Some(!over));
        }
    }
}

/// The last line of a log of `len` bytes read through `file`, checked on
/// its own: the link the next line must follow. `Ok(None)` for an empty
/// log. The error is why the tail is broken.
pub(crate) fn tail(file: &mut std::fs::File, len: u64) -> Result<Option<Link>, String> {
    use std::io::{Seek, SeekFrom};
    if len == 0 {
        return Ok(None);
    }
    let window = len.min(LINE_CAP as u64 + 2);
    file.seek(SeekFrom::Start(len - window))
        .map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    file.take(window)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err("its last line is incomplete (no newline at its end)".to_owned());
    };
    let last = match body.iter().rposition(|&b| b == b'\n') {
        Some(at) => &body[at + 1..],
        None if window == len => body,
        None => return Err(format!("its last line is longer than {LINE_CAP} bytes")),
    };
    line::check(last)
        .map(Some)
        .map_err(|reason| format!("its last line is {reason}"))
}

#[cfg(test)]
mod tests {
    use super::super::line::{seal, GENESIS};
    use super::*;

    /// A log of `n` sealed lines, as text.
    fn log(n: u64) -> Vec<String> {
        let mut prev = GENESIS.to_owned();
        (1..=n)
            .map(|seq| {
                let body = serde_json::json!({"seq": seq, "prev": prev, "n": seq}).to_string();
                let (line, hash) = seal(&body);
                prev = hash;
                line
            })
            .collect()
    }

    fn verify_lines(lines: &[String]) -> Result<Verified, VerifyError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
        std::fs::write(&path, text).unwrap();
        verify_file(&path, None)
    }

    fn broken_at(result: Result<Verified, VerifyError>) -> (u64, String) {
        match result {
            Err(VerifyError::Broken { line, reason }) => (line, reason),
            other => panic!("expected a broken line, got {other:?}"),
        }
    }

    #[test]
    fn an_intact_log_verifies_with_its_count_and_head() {
        let lines = log(3);
        let verified = verify_lines(&lines).unwrap();
        assert_eq!(verified.lines, 3);
        let head = line::check(lines[2].as_bytes()).unwrap().hash;
        assert_eq!(verified.head, Some(head));
        assert_eq!(verify_lines(&[]).unwrap().lines, 0);
    }

    #[test]
    fn deletions_reorderings_and_cuts_name_the_first_bad_line() {
        let lines = log(4);
        let deleted = [&lines[..1], &lines[2..]].concat();
        assert!(broken_at(verify_lines(&deleted)).0 == 2);
        let first_gone = lines[1..].to_vec();
        assert_eq!(broken_at(verify_lines(&first_gone)).0, 1);
        let mut swapped = lines.clone();
        swapped.swap(1, 2);
        assert_eq!(broken_at(verify_lines(&swapped)).0, 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.jsonl");
        std::fs::write(&path, format!("{}\n{}", lines[0], &lines[1][..20])).unwrap();
        let (line, reason) = broken_at(verify_file(&path, None));
        assert_eq!(line, 2);
        assert!(reason.starts_with("incomplete"), "{reason}");
    }

    #[test]
    fn an_oversize_line_is_refused_without_reading_it_whole() {
        let lines = log(1);
        let huge = "x".repeat(LINE_CAP + 10);
        let (line, reason) = broken_at(verify_lines(&[lines[0].clone(), huge]));
        assert_eq!(line, 2);
        assert!(reason.starts_with("longer than"), "{reason}");
    }

    #[test]
    fn the_tail_is_the_last_line_checked_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let lines = log(2);
        std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[1])).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let link = tail(&mut file, len).unwrap().unwrap();
        assert_eq!(link.seq, 2);
        std::fs::write(&path, format!("{}\n{}", lines[0], lines[1])).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(tail(&mut file, len).unwrap_err().contains("incomplete"));
        std::fs::write(&path, format!("{}\n{{}}\n", lines[0])).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(tail(&mut file, len)
            .unwrap_err()
            .contains("not an audit record"));
    }
}
