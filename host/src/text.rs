//! Text helpers shared across the host.

/// `text` on one line: every run of whitespace, line breaks included,
/// becomes one space, and the ends are trimmed. For messages from elsewhere
/// (a dynamic loader, a library's error, a child process) that end up in a
/// one-line error.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn line_breaks_and_runs_of_spaces_become_single_spaces() {
        assert_eq!(
            one_line("  first line\n\n  second\tline \r\n"),
            "first line second line"
        );
        assert_eq!(one_line(""), "");
    }
}
