//! The gate: one word set, judged on four seams.

use crate::config::{Config, Named};
use crate::tokens::{hold_from, is_word_byte, scan_from, tokens};
use chimera_plugin_api::prelude::*;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// How many streamed bytes the gate takes per judgement
/// (`Registrar::stream_window`): the call and the look-behind to the
/// straddling word are paid once per window instead of once per delta. The
/// host still offers sooner when text has waited 25 ms.
pub(crate) const STREAM_WINDOW: usize = 1024;

/// A banned word found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    /// The word as configured (lower-cased unless case-sensitive).
    pub word: &'a str,
    /// The name it was given (in `words`, or with its `word_files` entry).
    pub name: Option<&'a str>,
}

/// What a reason shows: the name when there is one, else the word quoted.
impl fmt::Display for Found<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            Some(name) => f.write_str(name),
            None => write!(f, "\"{}\"", self.word),
        }
    }
}

/// The loaded gate.
#[derive(Debug)]
pub struct StopWords {
    /// Each banned word (lower-cased unless case-sensitive), with its name.
    words: HashMap<String, Option<String>>,
    /// The length of the longest word (all are ASCII: bytes are characters).
    longest: usize,
    /// The length of the shortest word: a token of another length is no
    /// banned word, and is neither lower-cased nor hashed.
    shortest: usize,
    case_sensitive: bool,
    message: String,
    scan_responses: bool,
    scan_stream: bool,
}

impl StopWords {
    /// The first banned word in `text`, as configured (lower-cased unless
    /// case-sensitive), and its name.
    #[must_use]
    pub fn find(&self, text: &str) -> Option<Found<'_>> {
        let mut lowered = String::new();
        let (shortest, longest) = (self.shortest, self.longest);
        tokens(text).find_map(|token| {
            if token.len() < shortest || token.len() > longest {
                return None;
            }
            let key = if self.case_sensitive {
                token
            } else {
                lowered.clear();
                lowered.push_str(token);
                lowered.make_ascii_lowercase();
                lowered.as_str()
            };
            self.words.get_key_value(key).map(|(word, name)| Found {
                word,
                name: name.as_deref(),
            })
        })
    }

    /// A block of `found` in `what` (`Input`, `Output`, `Response`), with
    /// the notice.
    fn block<T>(&self, session: Session<'_>, what: &str, found: Found<'_>) -> Decision<T> {
        session.notice(self.message.as_str());
        Decision::Block(reason(what, found))
    }

    /// The stream verdict on one offer.
    #[must_use]
    pub fn judge_stream(&self, full: &str, released: usize) -> StreamDecision {
        let from = scan_from(full, released, self.longest);
        match self.find(&full[from..]) {
            Some(found) => StreamDecision::Block(reason("Response", found)),
            None => StreamDecision::HoldFrom(hold_from(full, self.longest)),
        }
    }
}

/// `Input contains prohibited term: "forbidden"`, or with the word's name
/// (unquoted) when it has one: `Input contains prohibited term: codename`.
fn reason(what: &str, found: Found<'_>) -> String {
    format!("{what} contains prohibited term: {found}")
}

impl Pack for StopWords {
    const NAME: &'static str = "stop-words";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "blocks banned words in input, answers, model replies and streamed text";
    const SEAMS: &'static [SeamKind] = &[
        SeamKind::ProviderRequest,
        SeamKind::Output,
        SeamKind::ModelResponse,
        SeamKind::StreamChunk,
    ];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let mut listed = config.words;
        for file in &config.word_files {
            let text = gate_kit::read_config_file("word_files", &file.value)?;
            listed.extend(gate_kit::config_lines(&text).map(|word| Named {
                value: word.to_owned(),
                name: file.name.clone(),
            }));
        }
        let mut words: HashMap<String, Option<String>> = HashMap::with_capacity(listed.len());
        for Named { value: word, name } in listed {
            if word.is_empty() || !word.bytes().all(is_word_byte) {
                return Err(PackError::msg(format!(
                    "{word:?} can never match: a word is one token of ASCII letters, digits, ', _ and -"
                )));
            }
            let word = if config.case_sensitive {
                word
            } else {
                word.to_ascii_lowercase()
            };
            match words.get(&word) {
                Some(before) if *before != name => {
                    let shown = |name: &Option<String>| {
                        name.as_deref()
                            .map_or("no name".to_owned(), |n| format!("name {n:?}"))
                    };
                    return Err(PackError::msg(format!(
                        "{word:?} is listed twice, with {} and with {}",
                        shown(before),
                        shown(&name)
                    )));
                }
                Some(_) => {}
                None => {
                    words.insert(word, name);
                }
            }
        }
        Ok(StopWords {
            longest: words.keys().map(String::len).max().unwrap_or(0),
            shortest: words.keys().map(String::len).min().unwrap_or(0),
            words,
            case_sensitive: config.case_sensitive,
            message: config.message,
            scan_responses: config.scan_llm_responses,
            scan_stream: config.scan_stream.unwrap_or(config.scan_llm_responses),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        if self.words.is_empty() {
            return;
        }
        let gate = Arc::clone(&self);
        registrar.provider_request("input", move |session, request| {
            Ok(
                match gate_kit::find_in_request(session, request, |text| gate.find(text)) {
                    Some(found) => gate.block(session, "Input", found),
                    None => Decision::Allow,
                },
            )
        });
        let gate = Arc::clone(&self);
        registrar.output("output", move |session, answer| {
            Ok(match gate.find(answer) {
                Some(found) => gate.block(session, "Output", found),
                None => Decision::Allow,
            })
        });
        let mut names = vec!["input", "output"];
        if self.scan_responses {
            let gate = Arc::clone(&self);
            registrar.model_response("response", move |session, reply| {
                Ok(match gate.find(reply.content()) {
                    Some(found) => gate.block(session, "Response", found),
                    None => Decision::Allow,
                })
            });
            names.push("response");
        }
        if self.scan_stream {
            let gate = Arc::clone(&self);
            registrar.stream_chunk("stream", move |session, segment| {
                let decision = gate.judge_stream(segment.full(), segment.released_offset());
                if matches!(decision, StreamDecision::Block(_)) {
                    session.notice(gate.message.as_str());
                }
                Ok(decision)
            });
            registrar.stream_window("stream", STREAM_WINDOW);
            names.push("stream");
        }
        for name in names {
            registrar.fail_closed(name);
            registrar.judges(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(config: serde_json::Value) -> StopWords {
        StopWords::new(serde_json::from_value(config).unwrap()).unwrap()
    }

    /// The word found in `text`, as configured.
    fn word<'g>(gate: &'g StopWords, text: &str) -> Option<&'g str> {
        gate.find(text).map(|found| found.word)
    }

    /// The reason's end for what is found in `text`.
    fn shown(gate: &StopWords, text: &str) -> Option<String> {
        gate.find(text).map(|found| found.to_string())
    }

    fn load_error(config: serde_json::Value) -> String {
        match serde_json::from_value::<Config>(config) {
            Ok(config) => StopWords::new(config).unwrap_err().to_string(),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_word_matches_whole_tokens_only() {
        let gate = gate(serde_json::json!({"words": ["forbidden"]}));
        assert_eq!(word(&gate, "a FORBIDDEN kingdom."), Some("forbidden"));
        assert_eq!(word(&gate, "FORBIDDEN_WORD and forbid"), None);
        assert_eq!(word(&gate, "unforbidden-ness"), None);
    }

    #[test]
    fn case_sensitive_words_match_their_case_only() {
        let gate = gate(serde_json::json!({"words": "FORBIDDEN", "case_sensitive": true}));
        assert_eq!(word(&gate, "forbidden"), None);
        assert_eq!(word(&gate, "so FORBIDDEN"), Some("FORBIDDEN"));
    }

    #[test]
    fn a_bare_word_is_shown_quoted_and_a_named_word_by_its_name_only() {
        let named = gate(serde_json::json!({"words": [
            "forbidden",
            {"word": "ProjectX", "name": "codename"},
            {"word": "projecty", "name": "codename"},
            {"word": "hush"},
        ]}));
        assert_eq!(
            shown(&named, "a FORBIDDEN word").as_deref(),
            Some("\"forbidden\"")
        );
        assert_eq!(shown(&named, "about projectx").as_deref(), Some("codename"));
        assert_eq!(shown(&named, "about PROJECTY").as_deref(), Some("codename"));
        assert_eq!(shown(&named, "hush now").as_deref(), Some("\"hush\""));
        assert_eq!(
            reason("Input", named.find("about projectx").unwrap()),
            "Input contains prohibited term: codename"
        );
        assert_eq!(
            named.judge_stream("so projectx ", 0),
            StreamDecision::Block("Response contains prohibited term: codename".into())
        );
        // One table is a list of one.
        let one = gate(serde_json::json!({"words": {"word": "x", "name": "n"}}));
        assert_eq!(shown(&one, "x").as_deref(), Some("n"));
    }

    #[test]
    fn a_named_word_file_names_every_word_in_it() {
        let dir = std::env::temp_dir().join(format!("stop-words-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret.txt");
        std::fs::write(&secret, "# confidential\nprojectx\n\n  ProjectY \n").unwrap();
        let plain = dir.join("plain.txt");
        std::fs::write(&plain, "forbidden\n").unwrap();
        let gate = gate(serde_json::json!({"word_files": [
            {"path": secret.display().to_string(), "name": "confidential"},
            plain.display().to_string(),
        ]}));
        assert_eq!(shown(&gate, "projectx").as_deref(), Some("confidential"));
        assert_eq!(shown(&gate, "so projecty").as_deref(), Some("confidential"));
        assert_eq!(shown(&gate, "forbidden").as_deref(), Some("\"forbidden\""));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_name_or_a_word_named_two_ways_refuses_the_load_in_one_line() {
        let cases = [
            (
                serde_json::json!({"words": [{"word": "x", "name": "two words"}]}),
                "name \"two words\" must be 1 to 64 of A-Z, a-z, 0-9, '_', '-', '.'",
            ),
            (
                serde_json::json!({"words": [{"word": "x", "name": ""}]}),
                "must be 1 to 64",
            ),
            (
                serde_json::json!({"words": [{"word": "x", "name": "y".repeat(65)}]}),
                "must be 1 to 64",
            ),
            (
                serde_json::json!({"words": [{"word": "x", "label": "y"}]}),
                "unknown field `label`, expected `word` or `name`",
            ),
            (
                serde_json::json!({"words": [{"name": "y"}]}),
                "missing `word`",
            ),
            (
                serde_json::json!({"word_files": [{"path": "p", "name": "bad name"}]}),
                "name \"bad name\" must be",
            ),
            (
                serde_json::json!({"words": [["x", "y"]]}),
                "a word, or a table {word, name}",
            ),
            (
                serde_json::json!({"words": ["x", {"word": "X", "name": "y"}]}),
                "\"x\" is listed twice, with no name and with name \"y\"",
            ),
            (
                serde_json::json!({"words": [{"word": "x", "name": "a"}, {"word": "x", "name": "b"}]}),
                "\"x\" is listed twice, with name \"a\" and with name \"b\"",
            ),
        ];
        for (config, expected) in cases {
            let error = load_error(config.clone());
            assert!(error.contains(expected), "{config}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
        // The same word twice, the same way, is one word.
        let twice = gate(
            serde_json::json!({"words": ["x", "X", {"word": "y", "name": "n"}, {"word": "y", "name": "n"}]}),
        );
        assert_eq!(shown(&twice, "X").as_deref(), Some("\"x\""));
    }

    #[test]
    fn a_word_that_is_not_one_token_refuses_the_load() {
        for word in ["two words", "café", ""] {
            let config = serde_json::from_value(serde_json::json!({ "words": [word] })).unwrap();
            let error = StopWords::new(config).unwrap_err().to_string();
            assert!(error.contains("can never match"), "{error}");
        }
    }

    /// Runs the stream verdicts the host would ask for over `deltas`: the
    /// released pieces, and whether the stream was blocked.
    fn stream(gate: &StopWords, deltas: &[&str]) -> (Vec<String>, bool) {
        let mut full = String::new();
        let mut released = 0;
        let mut shown = Vec::new();
        let last = [""];
        for (i, delta) in deltas.iter().chain(&last).enumerate() {
            let is_final = i == deltas.len();
            full.push_str(delta);
            match gate.judge_stream(&full, released) {
                StreamDecision::Block(_) => return (shown, true),
                StreamDecision::HoldFrom(from) if !is_final => {
                    let end = from.max(released);
                    if end > released {
                        shown.push(full[released..end].to_owned());
                        released = end;
                    }
                }
                _ => {
                    if full.len() > released {
                        shown.push(full[released..].to_owned());
                        released = full.len();
                    }
                }
            }
        }
        (shown, false)
    }

    #[test]
    fn a_streamed_banned_word_is_never_released() {
        let gate = gate(serde_json::json!({"words": ["forbidden"]}));
        let cases: [(&[&str], &[&str], bool); 6] = [
            (&["this is ", "forbidden ", "text"], &["this is "], true),
            (&["say forb", "idden now"], &["say "], true),
            (&["ends with forbidden"], &[], true),
            (&["hello wor"], &["hello ", "wor"], false),
            (
                &["hello wor", "ld there"],
                &["hello ", "world ", "there"],
                false,
            ),
            (
                &["a perfectly ", "ordinary ", "answer"],
                &["a perfectly ", "ordinary ", "answer"],
                false,
            ),
        ];
        for (deltas, expected, blocked) in cases {
            assert_eq!(
                stream(&gate, deltas),
                (to_strings(expected), blocked),
                "{deltas:?}"
            );
        }
    }

    #[test]
    fn a_stream_of_one_long_token_is_released_as_it_comes() {
        let gate = gate(serde_json::json!({"words": ["ab"]}));
        let (shown, blocked) = stream(&gate, &["xxxx", "xxxx", " ab"]);
        assert_eq!((shown, blocked), (to_strings(&["xxxx", "xxxx"]), true));
        // A banned word inside a longer token never matches.
        let (shown, blocked) = stream(&gate, &["a", "bab", "ab"]);
        assert_eq!((shown.concat(), blocked), ("ababab".to_owned(), false));
    }

    fn to_strings(pieces: &[&str]) -> Vec<String> {
        pieces.iter().map(|p| (*p).to_owned()).collect()
    }
}
