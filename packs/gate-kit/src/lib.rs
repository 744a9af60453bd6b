//! # gate-kit
//!
//! The pieces the gate packs that read requests and answers (`stop-words`,
//! `prompt-injection`, `endless-loop`, `output-length`, `json-schema`,
//! `token-budget`, `context-window`) share, so each gate's crate holds
//! only its own policy:
//!
//! * [`read_config_file`] / [`config_lines`]: a file a gate's configuration
//!   names is hostile input — its size is capped, it must be UTF-8, and any
//!   failure is one line naming the key and the path;
//! * [`is_agent_call`]: whether a provider request is the loop's own (not
//!   a call the host makes for itself: a gate retry, a compaction summary);
//! * [`new_input`]: the user messages of a request that the user typed this
//!   turn (those after the last assistant message), so an input gate never
//!   re-judges the history;
//! * [`PerTurn`]: a small per-conversation, per-turn state (retries asked
//!   for, a warning given), reset when the turn changes;
//! * [`message_texts`] / [`text_chars`]: the texts of a message, and the
//!   characters of a request's texts (what size estimates count);
//! * [`render`]: one-pass `{name}` template substitution;
//! * [`one_or_many`]: a list key that also takes a single string;
//! * [`find_in_request`]: what an input gate finds in a request's texts;
//! * [`check_name`]: a configured pattern's name.

use chimera_plugin_api::prelude::{MessageRef, Messages, PackError, RequestRef, Session};
use serde::{Deserialize, Deserializer};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The largest configuration file a gate reads (1 MiB).
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// The most retries this host grants one `output` interceptor for one
/// answer: a gate's own bound is capped at it, so the gate's count and the
/// host's agree.
pub const HOST_MAX_RETRIES: u32 = 10;

/// `~/` at the start of `path` is the home directory (`$HOME`).
#[must_use]
pub fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Reads the file the configuration key `key` names: a regular file (never
/// a FIFO or a device, which could stall or flood the load), at most
/// [`MAX_CONFIG_FILE_BYTES`], UTF-8. Every failure is one line:
/// `<key>: cannot read <path>: <why>`.
///
/// # Errors
///
/// A `PackError`, that line, when the file is missing or unreadable, not a
/// regular file, over [`MAX_CONFIG_FILE_BYTES`], or not UTF-8.
pub fn read_config_file(key: &str, path: &str) -> Result<String, PackError> {
    let full = expand_home(path);
    let fail = |why: &dyn std::fmt::Display| {
        PackError::msg(format!("{key}: cannot read {}: {why}", full.display()))
    };
    if !std::fs::metadata(&full).map_err(|e| fail(&e))?.is_file() {
        return Err(fail(&"not a regular file"));
    }
    let file = std::fs::File::open(&full).map_err(|e| fail(&e))?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(&e))?;
    if bytes.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(fail(&format_args!(
            "larger than {MAX_CONFIG_FILE_BYTES} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|_| fail(&"not UTF-8 text"))
}

/// The entries of a one-per-line file: trimmed, blank lines and `#`
/// comment lines skipped.
pub fn config_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// True when the provider request being prepared is the agent loop's own
/// call, driven by the user's input; false for the calls the host makes
/// for itself — a gate retry (the user message is a gate's feedback) and a
/// compaction summary (the user message is the history's transcript) —
/// which a gate that counts or judges the user's requests skips.
#[must_use]
pub fn is_agent_call(session: Session<'_>) -> bool {
    session.source() == "agent" && !session.is_gate_retry()
}

/// The new input of the turn: the user messages after the last assistant
/// message (all of them when there is none). Earlier user messages were
/// judged on the request that first carried them.
pub fn new_input(messages: Messages<'_>) -> impl Iterator<Item = MessageRef<'_>> + '_ {
    let start = messages
        .iter()
        .rposition(|m| m.role() == "assistant")
        .map_or(0, |i| i + 1);
    messages.iter().skip(start).filter(|m| m.role() == "user")
}

/// The texts an input gate judges on a `provider_request`: the new input
/// of the turn ([`new_input`]: its user messages' texts) — or, when the
/// host relays a conversation it did not run ([`Session::is_relayed`]: a
/// gateway, where the client wrote the whole history and any of it may
/// carry an injection), every text of every message of every role, then
/// each tool's name and description.
pub fn input_texts<'a>(session: Session<'_>, request: RequestRef<'a>) -> Vec<&'a str> {
    if !session.is_relayed() {
        return new_input(request.messages())
            .flat_map(message_texts)
            .collect();
    }
    request.messages().iter().flat_map(message_texts).collect()
}

/// The names and descriptions of the tools of `tools_json` (the
/// envelope's `[{"name", "description", "parameters"}]`), as owned texts.
#[must_use]
pub fn tool_texts(tools_json: &str) -> Vec<String> {
    let Ok(serde_json::Value::Array(tools)) = serde_json::from_str(tools_json) else {
        return Vec::new();
    };
    tools
        .iter()
        .flat_map(|tool| {
            ["name", "description"].map(|key| tool[key].as_str().unwrap_or_default().to_owned())
        })
        .filter(|text| !text.is_empty())
        .collect()
}

/// What `find` first finds in the texts an input gate judges on a
/// `provider_request` ([`input_texts`], then, when the host relays the
/// conversation, [`tool_texts`] of the request's tools); `None` when it
/// finds nothing, or when the request is not the loop's own call
/// ([`is_agent_call`]).
pub fn find_in_request<T>(
    session: Session<'_>,
    request: RequestRef<'_>,
    mut find: impl FnMut(&str) -> Option<T>,
) -> Option<T> {
    if !is_agent_call(session) {
        return None;
    }
    let tools = if session.is_relayed() {
        tool_texts(request.tools_json())
    } else {
        Vec::new()
    };
    input_texts(session, request)
        .into_iter()
        .chain(tools.iter().map(String::as_str))
        .find_map(&mut find)
}

/// A configured check's or pattern's name reads well in one line: 1 to 64
/// of `A-Z a-z 0-9 _ - .`.
///
/// # Errors
///
/// One line naming the rule, headed by `what` (`pattern name`).
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let fits = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?} must be 1 to 64 of A-Z, a-z, 0-9, '_', '-', '.'"
        ))
    }
}

/// Every text of a message a content gate reads: its content, then its
/// text blocks.
pub fn message_texts(message: MessageRef<'_>) -> impl Iterator<Item = &str> + '_ {
    std::iter::once(message.content()).chain(
        message
            .blocks()
            .filter(|b| b.kind() == "text")
            .map(|b| b.text()),
    )
}

/// The characters of every text in `messages` (contents and text blocks,
/// as [`message_texts`] reads them): what size estimates count.
#[must_use]
pub fn text_chars(messages: Messages<'_>) -> usize {
    messages
        .iter()
        .flat_map(message_texts)
        .map(|text| text.chars().count())
        .sum()
}

/// At most this many conversations are remembered by a [`PerTurn`]; a
/// new one beyond it forgets the others (they start their turn afresh).
const MAX_CONVERSATIONS: usize = 256;

/// A value per conversation that lives for one user turn: read in another
/// turn it is the default again.
#[derive(Debug, Default)]
pub struct PerTurn<T> {
    state: Mutex<HashMap<String, (u64, T)>>,
}

impl<T: Default + Clone> PerTurn<T> {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        PerTurn {
            state: Mutex::new(HashMap::new()),
        }
    }

    /// This turn's value (the default when none was set this turn).
    pub fn get(&self, session: Session<'_>) -> T {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state
            .get(session.id())
            .filter(|(turn, _)| *turn == session.turn_index())
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    }

    /// Changes this turn's value with `change`, and returns the new value.
    pub fn update(&self, session: Session<'_>, change: impl FnOnce(&mut T)) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.len() >= MAX_CONVERSATIONS && !state.contains_key(session.id()) {
            state.clear();
        }
        let turn = session.turn_index();
        let entry = state
            .entry(session.id().to_owned())
            .or_insert_with(|| (turn, T::default()));
        if entry.0 != turn {
            *entry = (turn, T::default());
        }
        change(&mut entry.1);
        entry.1.clone()
    }
}

/// `template` with every `{name}` of `vars` replaced by its value, in one
/// pass: a value that itself contains `{name}` is not expanded again, and
/// an unknown `{word}` stays as it is.
#[must_use]
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = after.find('}').and_then(|close| {
            let name = &after[..close];
            vars.iter()
                .find(|(var, _)| *var == name)
                .map(|(_, value)| (*value, close))
        });
        if let Some((value, close)) = known {
            out.push_str(value);
            rest = &after[close + 1..];
        } else {
            out.push('{');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Deserializes a list of strings that may also be given as one string
/// (`"words": "forbidden"` is `["forbidden"]`).
///
/// # Errors
///
/// The deserializer's error when the value is neither a string nor a list of
/// strings.
pub fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_rendered_in_one_pass() {
        let vars = [("error", "bad {content}"), ("content", "x")];
        assert_eq!(
            render("{error} / {content} / {other} / {", &vars),
            "bad {content} / x / {other} / {"
        );
        assert_eq!(render("{{content}}", &vars), "{x}");
    }

    #[test]
    fn config_lines_skip_blanks_and_comments() {
        let lines: Vec<&str> = config_lines("one\n\n  # note\n two \r\n#x\nthree").collect();
        assert_eq!(lines, ["one", "two", "three"]);
    }

    #[test]
    fn a_config_file_is_capped_and_must_be_text() {
        let dir = std::env::temp_dir().join(format!("gate-kit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big");
        std::fs::write(
            &big,
            vec![b'a'; usize::try_from(MAX_CONFIG_FILE_BYTES).unwrap() + 1],
        )
        .unwrap();
        let binary = dir.join("binary");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        let error = |path: &Path| {
            read_config_file("word_files", path.to_str().unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(
            error(&big).ends_with("larger than 1048576 bytes"),
            "{}",
            error(&big)
        );
        assert!(error(&binary).ends_with("not UTF-8 text"));
        assert!(error(&dir).ends_with("not a regular file"));
        assert!(error(Path::new("/dev/zero")).ends_with("not a regular file"));
        let missing = error(&dir.join("missing"));
        assert!(missing.starts_with("word_files: cannot read "), "{missing}");
        assert!(!missing.contains('\n'));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_string_is_a_list_of_one() {
        #[derive(Deserialize)]
        struct C {
            #[serde(deserialize_with = "one_or_many")]
            words: Vec<String>,
        }
        let one: C = serde_json_from(r#"{"words":"a"}"#);
        let many: C = serde_json_from(r#"{"words":["a","b"]}"#);
        assert_eq!(one.words, ["a"]);
        assert_eq!(many.words, ["a", "b"]);
    }

    fn serde_json_from<T: serde::de::DeserializeOwned>(text: &str) -> T {
        serde_json::from_str(text).unwrap()
    }
}
