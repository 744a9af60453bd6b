//! Where the JSON is in an answer.

use regex::Regex;
use std::sync::LazyLock;

/// A fenced block: the fence's info string, then its body.
static FENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)```([^\n`]*)\n(.*?)```").unwrap_or_else(|e| unreachable!("{e}"))
});

/// The JSON text of `answer`: the body of its first fenced block tagged
/// `json`, else of its first fenced block, else the answer itself, trimmed.
#[must_use]
pub fn extract(answer: &str) -> &str {
    let mut first = None;
    for block in FENCE.captures_iter(answer) {
        let (info, body) = (&block[1], block.get(2).map_or("", |b| b.as_str()));
        if info.trim().eq_ignore_ascii_case("json") {
            return body.trim();
        }
        first.get_or_insert(body);
    }
    first.unwrap_or(answer).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_json_fence_wins_then_the_first_fence_then_the_text() {
        assert_eq!(
            extract("a\n```text\nplain\n```\nb\n```json\n{\"a\":1}\n```\n```json\n[2]\n```"),
            "{\"a\":1}"
        );
        assert_eq!(extract("here:\n```\n [1, 2] \n```\ndone"), "[1, 2]");
        assert_eq!(extract("  {\"name\":\"x\"}\n"), "{\"name\":\"x\"}");
        assert_eq!(extract("```json\nnever closed"), "```json\nnever closed");
    }
}
