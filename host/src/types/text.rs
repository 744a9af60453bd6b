//! Text that came from elsewhere — models, tools, packs, other programs —
//! made safe to show: on a terminal, and on one line.

/// `text` made safe to print on a terminal: control characters (other than
/// newline and tab), escape sequences, C1 controls and bidirectional
/// overrides are shown escaped (`\u{1b}[2J`), never interpreted. Model,
/// tool and pack text is hostile until shown this way.
pub fn terminal_safe(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// `text` on one line: every run of whitespace, line breaks included,
/// becomes one space, and the ends are trimmed. For messages from elsewhere
/// (a dynamic loader, a library's error, a child process) that end up in a
/// one-line error.
#[must_use]
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `error` and its causes, `: `-joined (a cause whose text the line
/// already holds is not repeated).
#[must_use]
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{error_chain, one_line, terminal_safe as clean};

    /// An error whose message does not repeat its cause's.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the call failed")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_chain_names_each_cause_once() {
        let inner = std::io::Error::other("refused");
        let outer = std::io::Error::other(inner);
        assert_eq!(error_chain(&outer), "refused");
        let chained = Outer(std::io::Error::other("refused"));
        assert_eq!(error_chain(&chained), "the call failed: refused");
    }

    #[test]
    fn escape_sequences_are_shown_escaped_not_interpreted() {
        assert_eq!(clean("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(clean("\u{1b}[2Jgone"), "\\u{1b}[2Jgone");
        assert_eq!(clean("a\rb\u{7}"), "a\\u{d}b\\u{7}");
        assert_eq!(clean("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(clean("abc\u{202e}fed"), "abc\\u{202e}fed");
    }

    #[test]
    fn line_breaks_and_runs_of_spaces_become_single_spaces() {
        assert_eq!(
            one_line("  first line\n\n  second\tline \r\n"),
            "first line second line"
        );
        assert_eq!(one_line(""), "");
    }
}
