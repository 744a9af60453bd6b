//! Tokens of `[A-Za-z0-9'_-]` and the stream offsets built on them.

/// True for the bytes a token is made of: ASCII letters, digits, `'`, `_`, `-`.
#[must_use]
pub fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'\'' | b'_' | b'-')
}

/// The tokens of `text`, in order.
pub fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii() || !is_word_byte(c as u8))
        .filter(|token| !token.is_empty())
}

/// Where the token run ending at `end` starts, going back no further than
/// `floor`.
fn run_start(text: &str, end: usize, floor: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = end;
    while start > floor && is_word_byte(bytes[start - 1]) {
        start -= 1;
    }
    start
}

/// Where the token run ending at `end` starts, looking back at most
/// `longest + 1` bytes; `None` when it is longer than `longest` bytes (it
/// can equal no word, now or once extended).
fn bounded_run(text: &str, end: usize, longest: usize) -> Option<usize> {
    let floor = end.saturating_sub(longest + 1);
    let start = run_start(text, end, floor);
    (end - start <= longest).then_some(start)
}

/// Where a stream scan starts, with `released` bytes of `full` shown and
/// no word longer than `longest`: `released` moved back to the start of the
/// token that straddles it, so that token is judged whole and the tokens
/// before it, already released, are never judged again. A straddling token
/// already longer than any word is skipped to its end instead. Either way
/// the cost is bounded by the candidate and `longest`, never by the text
/// already released.
#[must_use]
pub fn scan_from(full: &str, released: usize, longest: usize) -> usize {
    let released = released.min(full.len());
    bounded_run(full, released, longest).unwrap_or_else(|| {
        let rest = &full.as_bytes()[released..];
        released + rest.iter().take_while(|&&b| is_word_byte(b)).count()
    })
}

/// Where the hold starts, with no word longer than `longest`: the trailing
/// token run of `full`, which the next delta may extend — unless it is
/// already longer than any word, when nothing need be held (the end).
#[must_use]
pub fn hold_from(full: &str, longest: usize) -> usize {
    bounded_run(full, full.len(), longest).unwrap_or(full.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_runs_of_letters_digits_apostrophes_underscores_and_dashes() {
        let found: Vec<&str> = tokens("It's a FORBIDDEN_WORD, re-run #42 café!").collect();
        assert_eq!(
            found,
            ["It's", "a", "FORBIDDEN_WORD", "re-run", "42", "caf"]
        );
    }

    #[test]
    fn the_hold_is_the_trailing_token_run() {
        assert_eq!(hold_from("say forb", 9), 4);
        assert_eq!(hold_from("hello ", 9), 6);
        assert_eq!(hold_from("abcdef", 9), 0);
        assert_eq!(hold_from("", 9), 0);
        assert_eq!(hold_from("né", 9), 3);
        // A run longer than any word can never become one: nothing held.
        assert_eq!(hold_from("say abcdefghij", 9), 14);
        assert_eq!(hold_from("say abcdefghi", 9), 4);
    }

    #[test]
    fn the_scan_starts_at_the_token_straddling_the_released_boundary() {
        // `say ` released, `forbidden now` offered.
        assert_eq!(scan_from("say forbidden now", 4, 9), 4);
        // `hello wo` released mid-word: the whole word is judged.
        assert_eq!(scan_from("hello world", 8, 9), 6);
        assert_eq!(scan_from("hello world", 0, 9), 0);
        assert_eq!(scan_from("abc", 99, 9), 0);
        // Released inside a run longer than any word: the run's end.
        assert_eq!(scan_from("a xxxxxxxxxxxxyy forbidden", 14, 9), 16);
    }
}
