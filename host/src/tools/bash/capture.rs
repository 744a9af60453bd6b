//! What a `bash` call shows of its output: reader threads drain stdout
//! and stderr, each keeping at most the output cap ([`Captured`]), and
//! [`render`] joins the streams within the cap, ending with the exact
//! truncation note when something is cut.

use std::io::Read;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Instant;

/// What one reader thread captured: the first `cap` bytes and the total.
#[derive(Default)]
pub(super) struct Captured {
    kept: Vec<u8>,
    total: usize,
}

pub(super) type Shared = Arc<Mutex<Captured>>;

/// Drains `pipe` on a thread, keeping at most `cap` bytes; signals `done`
/// at end-of-file. `None` when no thread could be started (the pipe is then
/// closed, and the writer sees a broken pipe).
pub(super) fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    cap: usize,
    done: mpsc::Sender<()>,
) -> Option<Shared> {
    let sink: Shared = Arc::default();
    let shared = Arc::clone(&sink);
    let spawned = thread::Builder::new()
        .name("bash-output".to_owned())
        .spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut captured = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let room = cap.saturating_sub(captured.kept.len());
                        captured.kept.extend_from_slice(&buf[..n.min(room)]);
                        captured.total += n;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        });
    spawned.ok().map(|_| sink)
}

/// Waits until `count` readers have signalled or `deadline` passes; returns
/// how many are still running.
pub(super) fn wait_readers(done: &Receiver<()>, mut count: usize, deadline: Instant) -> usize {
    while count > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(()) => count -= 1,
            Err(mpsc::RecvTimeoutError::Disconnected) => return 0,
            Err(mpsc::RecvTimeoutError::Timeout) => break,
        }
    }
    count
}

/// The streams' text, in order, with a newline between two when the first
/// does not end with one, within `cap` bytes in all. When something does
/// not fit (or a reader kept only part of its stream), the text is cut at
/// a character boundary and ends with `[output truncated: N more bytes]`,
/// N being exactly the bytes of the streams not shown (the separator and
/// the note are not output of the command and are not counted).
pub(super) fn render(cap: usize, streams: &[Captured]) -> String {
    let total: usize = streams.iter().map(|s| s.total).sum();
    let complete = streams.iter().all(|s| s.kept.len() == s.total);
    if complete {
        let mut whole = String::new();
        for stream in streams.iter().filter(|s| !s.kept.is_empty()) {
            if !whole.is_empty() && !whole.ends_with('\n') {
                whole.push('\n');
            }
            whole.push_str(&String::from_utf8_lossy(&stream.kept));
        }
        if whole.len() <= cap {
            return whole;
        }
    }
    // Room for the text: the cap less the longest note it could need (N is
    // at most `total`) and the newline before it.
    let longest_note = note(total).len() + 1;
    let budget = cap.saturating_sub(longest_note);
    let mut text = String::new();
    let mut shown = 0;
    'streams: for stream in streams.iter().filter(|s| !s.kept.is_empty()) {
        let mut separator = !text.is_empty() && !text.ends_with('\n');
        for chunk in stream.kept.utf8_chunks() {
            // Each character stands for its own bytes; each invalid
            // sequence for one replacement character, as in
            // `String::from_utf8_lossy`.
            let invalid = chunk.invalid();
            let units = chunk.valid().chars().map(|c| (c, c.len_utf8())).chain(
                (!invalid.is_empty()).then_some((char::REPLACEMENT_CHARACTER, invalid.len())),
            );
            for (c, raw) in units {
                if text.len() + usize::from(separator) + c.len_utf8() > budget {
                    break 'streams;
                }
                if separator {
                    text.push('\n');
                    separator = false;
                }
                text.push(c);
                shown += raw;
            }
        }
        if stream.kept.len() < stream.total {
            // The reader dropped the rest of this stream: stop here rather
            // than show the next stream as if this one had ended.
            break;
        }
    }
    let more = total - shown;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note(more));
    text
}

fn note(more: usize) -> String {
    format!("[output truncated: {more} more bytes]")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::bash::tests::output_with_cap;

    #[test]
    fn output_is_capped() {
        assert_eq!(
            output_with_cap(100, "head -c 5000 /dev/zero | tr '\\0' a"),
            // 100 bytes in all: 64 shown, a newline, and the 35-byte note.
            format!("{}\n[output truncated: 4936 more bytes]", "a".repeat(64))
        );
    }

    fn captured(bytes: &[u8]) -> Captured {
        Captured {
            kept: bytes.to_vec(),
            total: bytes.len(),
        }
    }

    #[test]
    fn output_that_fits_is_shown_whole_with_a_newline_between_the_streams() {
        let out = render(64, &[captured(b"out"), captured(b"err\n")]);
        assert_eq!(out, "out\nerr\n");
    }

    #[test]
    fn the_note_counts_the_bytes_of_multibyte_text_not_shown() {
        // 200 bytes; the longest note ("... 200 more bytes]", 34 bytes) and
        // its newline leave 29 bytes: 14 two-byte characters.
        let out = render(64, &[captured("é".repeat(100).as_bytes())]);
        assert_eq!(
            out,
            format!("{}\n[output truncated: 172 more bytes]", "é".repeat(14))
        );
        assert!(out.len() <= 64);
    }

    #[test]
    fn the_note_counts_invalid_bytes_as_written_not_as_replaced() {
        // 40 invalid bytes become 40 three-byte replacement characters; 30
        // bytes of room show 10 of them, standing for 10 bytes.
        let out = render(64, &[captured(&[0xff; 40])]);
        assert_eq!(
            out,
            format!(
                "{}\n[output truncated: 30 more bytes]",
                "\u{FFFD}".repeat(10)
            )
        );
        assert_eq!(out.len(), 64);
    }

    #[test]
    fn the_separator_between_stdout_and_stderr_is_not_counted() {
        // 70 bytes; the longest note (33 bytes) and its newline leave 30
        // bytes of room: 10 of stdout, the separator, 19 of stderr. 29
        // bytes of output shown, 41 not; 64 bytes in all.
        let out = render(64, &[captured(&[b'a'; 10]), captured(&[b'b'; 60])]);
        assert_eq!(
            out,
            format!(
                "{}\n{}\n[output truncated: 41 more bytes]",
                "a".repeat(10),
                "b".repeat(19)
            )
        );
        assert_eq!(out.len(), 64);
    }

    #[test]
    fn stderr_is_not_shown_after_a_stream_the_reader_cut() {
        let stdout = Captured {
            kept: vec![b'a'; 20],
            total: 5000,
        };
        let out = render(64, &[stdout, captured(b"err")]);
        assert_eq!(
            out,
            format!("{}\n[output truncated: 4983 more bytes]", "a".repeat(20))
        );
    }

    #[test]
    fn truncated_stdout_and_stderr_of_a_real_command_give_the_exact_note() {
        assert_eq!(
            output_with_cap(
                64,
                "head -c 10 /dev/zero | tr '\\0' a; head -c 60 /dev/zero | tr '\\0' b >&2"
            ),
            format!(
                "{}\n{}\n[output truncated: 41 more bytes]",
                "a".repeat(10),
                "b".repeat(19)
            )
        );
    }

    #[test]
    fn truncated_multibyte_output_of_a_real_command_gives_the_exact_note() {
        assert_eq!(
            output_with_cap(64, "for _ in $(seq 100); do printf 'é'; done"),
            format!("{}\n[output truncated: 172 more bytes]", "é".repeat(14))
        );
    }

    #[test]
    fn the_whole_output_with_its_note_fits_the_default_cap() {
        let output = output_with_cap(30_000, "head -c 100000 /dev/zero | tr '\\0' a");
        // 100 000 bytes: the longest note is 37 bytes, so 29 962 are shown.
        assert_eq!(
            output,
            format!(
                "{}\n[output truncated: 70038 more bytes]",
                "a".repeat(29_962)
            )
        );
        assert!(output.len() <= 30_000);
    }
}
