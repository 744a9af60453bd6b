//! The gate: one word set, judged on four seams.

use crate::config::Config;
use crate::tokens::{hold_from, is_word_byte, scan_from, tokens};
use chimera_plugin_api::prelude::*;
use std::collections::HashSet;
use std::sync::Arc;

/// How many streamed bytes the gate takes per judgement
/// (`Registrar::stream_window`): the call and the look-behind to the
/// straddling word are paid once per window instead of once per delta. The
/// host still offers sooner when text has waited 25 ms.
pub(crate) const STREAM_WINDOW: usize = 1024;

/// The loaded gate.
#[derive(Debug)]
pub struct StopWords {
    words: HashSet<String>,
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
    /// case-sensitive).
    #[must_use]
    pub fn find(&self, text: &str) -> Option<&str> {
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
            self.words.get(key).map(String::as_str)
        })
    }

    /// The first banned word in any of `texts`.
    fn find_in<'t>(&self, texts: impl IntoIterator<Item = &'t str>) -> Option<&str> {
        texts.into_iter().find_map(|text| self.find(text))
    }

    /// A block of `word` found in `what` (`Input`, `Output`, `Response`),
    /// with the notice.
    fn block<T>(&self, session: Session<'_>, what: &str, word: &str) -> Decision<T> {
        session.notice(self.message.as_str());
        Decision::Block(reason(what, word))
    }

    /// The stream verdict on one offer.
    #[must_use]
    pub fn judge_stream(&self, full: &str, released: usize) -> StreamDecision {
        let from = scan_from(full, released, self.longest);
        match self.find(&full[from..]) {
            Some(word) => StreamDecision::Block(reason("Response", word)),
            None => StreamDecision::HoldFrom(hold_from(full, self.longest)),
        }
    }
}

fn reason(what: &str, word: &str) -> String {
    format!("{what} contains prohibited term: \"{word}\"")
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
        for path in &config.word_files {
            let text = gate_kit::read_config_file("word_files", path)?;
            listed.extend(gate_kit::config_lines(&text).map(str::to_owned));
        }
        let mut words = HashSet::with_capacity(listed.len());
        for word in listed {
            if word.is_empty() || !word.bytes().all(is_word_byte) {
                return Err(PackError::msg(format!(
                    "{word:?} can never match: a word is one token of ASCII letters, digits, ', _ and -"
                )));
            }
            words.insert(if config.case_sensitive {
                word
            } else {
                word.to_ascii_lowercase()
            });
        }
        Ok(StopWords {
            longest: words.iter().map(String::len).max().unwrap_or(0),
            shortest: words.iter().map(String::len).min().unwrap_or(0),
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
            if !gate_kit::is_agent_call(session) {
                return Ok(Decision::Allow);
            }
            let texts = gate_kit::new_input(request.messages()).flat_map(gate_kit::message_texts);
            Ok(match gate.find_in(texts) {
                Some(word) => gate.block(session, "Input", word),
                None => Decision::Allow,
            })
        });
        let gate = Arc::clone(&self);
        registrar.output("output", move |session, answer| {
            Ok(match gate.find(answer) {
                Some(word) => gate.block(session, "Output", word),
                None => Decision::Allow,
            })
        });
        let mut names = vec!["input", "output"];
        if self.scan_responses {
            let gate = Arc::clone(&self);
            registrar.model_response("response", move |session, reply| {
                Ok(match gate.find(reply.content()) {
                    Some(word) => gate.block(session, "Response", word),
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

    #[test]
    fn a_word_matches_whole_tokens_only() {
        let gate = gate(serde_json::json!({"words": ["forbidden"]}));
        assert_eq!(gate.find("a FORBIDDEN kingdom."), Some("forbidden"));
        assert_eq!(gate.find("FORBIDDEN_WORD and forbid"), None);
        assert_eq!(gate.find("unforbidden-ness"), None);
    }

    #[test]
    fn case_sensitive_words_match_their_case_only() {
        let gate = gate(serde_json::json!({"words": "FORBIDDEN", "case_sensitive": true}));
        assert_eq!(gate.find("forbidden"), None);
        assert_eq!(gate.find("so FORBIDDEN"), Some("FORBIDDEN"));
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
