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

/// Where a stream scan starts: `released` moved back to the start of the
/// token that straddles it, so that token is judged whole and the tokens
/// before it, already released, are never judged again.
#[must_use]
pub fn scan_from(full: &str, released: usize) -> usize {
    run_start(full, released.min(full.len()), 0)
}

/// Where the hold starts: the trailing run of token bytes of `full`, which
/// the next delta may extend (as far back as the released part, which the
/// host clamps to).
#[must_use]
pub fn hold_from(full: &str) -> usize {
    run_start(full, full.len(), 0)
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
        assert_eq!(hold_from("say forb"), 4);
        assert_eq!(hold_from("hello "), 6);
        assert_eq!(hold_from("abcdef"), 0);
        assert_eq!(hold_from(""), 0);
        assert_eq!(hold_from("né"), 3);
    }

    #[test]
    fn the_scan_starts_at_the_token_straddling_the_released_boundary() {
        // `say ` released, `forbidden now` offered.
        assert_eq!(scan_from("say forbidden now", 4), 4);
        // `hello wo` released mid-word: the whole word is judged.
        assert_eq!(scan_from("hello world", 8), 6);
        assert_eq!(scan_from("hello world", 0), 0);
        assert_eq!(scan_from("abc", 99), 0);
    }
}
