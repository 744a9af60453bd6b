//! stop-words' configuration.

use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;

/// The notice (and substitute reply) of every block, by default.
pub const DEFAULT_MESSAGE: &str = "Content blocked: contains prohibited terms.";

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Banned words: one, or a list; each a word or a table `{word, name}`.
    #[serde(deserialize_with = "words")]
    pub words: Vec<Named>,
    /// Files of banned words, one per line: one, or a list; each a path or
    /// a table `{path, name}` (the name then stands for every word in it).
    #[serde(deserialize_with = "word_files")]
    pub word_files: Vec<Named>,
    /// Match case exactly.
    pub case_sensitive: bool,
    /// The notice of every block.
    pub message: String,
    /// Also judge each model reply (`model_response`).
    pub scan_llm_responses: bool,
    /// Also judge streamed text (`stream_chunk`); `None`: as
    /// `scan_llm_responses`.
    pub scan_stream: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            words: Vec::new(),
            word_files: Vec::new(),
            case_sensitive: false,
            message: DEFAULT_MESSAGE.to_owned(),
            scan_llm_responses: false,
            scan_stream: None,
        }
    }
}

/// A `words` or `word_files` entry: the word (or path), and the name
/// reasons show instead of the word, if one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The word, or the path of a word file.
    pub value: String,
    /// The name reasons show instead of the word.
    pub name: Option<String>,
}

impl Named {
    /// An entry without a name.
    #[must_use]
    pub fn bare(value: &str) -> Self {
        Named {
            value: value.to_owned(),
            name: None,
        }
    }
}

/// A name must read well in one line: 1 to 64 of `A-Z a-z 0-9 _ - .`.
///
/// # Errors
///
/// One line saying so.
pub fn check_name(name: &str) -> Result<(), String> {
    gate_kit::check_name("name", name)
}

fn words<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Named>, D::Error> {
    deserializer.deserialize_any(OneOrMany(Entry("word")))
}

fn word_files<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Named>, D::Error> {
    deserializer.deserialize_any(OneOrMany(Entry("path")))
}

/// One entry: a string, or a map of the key it names and an optional
/// `name` (never a sequence), its name checked.
#[derive(Clone, Copy)]
struct Entry(&'static str);

impl<'de> DeserializeSeed<'de> for Entry {
    type Value = Named;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Named, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Entry {
    type Value = Named;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {0}, or a table {{{0}, name}}", self.0)
    }

    fn visit_str<E: Error>(self, value: &str) -> Result<Named, E> {
        Ok(Named::bare(value))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Named, A::Error> {
        let (mut value, mut name) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            if key == self.0 && value.is_none() {
                value = Some(map.next_value::<String>()?);
            } else if key == "name" && name.is_none() {
                let given = map.next_value::<String>()?;
                check_name(&given).map_err(A::Error::custom)?;
                name = Some(given);
            } else if key == self.0 || key == "name" {
                return Err(A::Error::custom(format_args!("`{key}` is given twice")));
            } else {
                return Err(A::Error::custom(format_args!(
                    "unknown field `{key}`, expected `{}` or `name`",
                    self.0
                )));
            }
        }
        let value = value.ok_or_else(|| A::Error::custom(format_args!("missing `{}`", self.0)))?;
        Ok(Named { value, name })
    }
}

/// One entry, or a list of them.
struct OneOrMany(Entry);

impl<'de> Visitor<'de> for OneOrMany {
    type Value = Vec<Named>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a {0}, a table {{{0}, name}}, or a list of them",
            self.0 .0
        )
    }

    fn visit_str<E: Error>(self, value: &str) -> Result<Vec<Named>, E> {
        Ok(vec![Named::bare(value)])
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<Named>, A::Error> {
        self.0.visit_map(map).map(|one| vec![one])
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Named>, A::Error> {
        let mut all = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(one) = seq.next_element_seed(self.0)? {
            all.push(one);
        }
        Ok(all)
    }
}
