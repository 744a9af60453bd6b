//! Why a document was refused, and where.

use std::fmt;

/// The longest key a [`ParseErrorKind::DuplicateKey`] line quotes, in
/// characters; a longer one is cut and ends in `…`.
const KEY_SHOWN: usize = 64;

/// A document [`parse`](super::parse) refused: what was wrong, and the
/// byte offset in the source where it was found.
///
/// Its `Display` is one lowercase line a client can act on, such as
/// `duplicate key "messages" at byte 57` or
/// `nesting deeper than 256 at byte 1200`. Text taken from the document
/// (a key, a character) is quoted with its control and non-printing
/// characters escaped, so the line stays one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}")]
pub struct ParseError {
    kind: ParseErrorKind,
    offset: usize,
}

impl ParseError {
    pub(super) fn new(kind: ParseErrorKind, offset: usize) -> Self {
        Self { kind, offset }
    }

    /// What was wrong.
    #[must_use]
    pub fn kind(&self) -> &ParseErrorKind {
        &self.kind
    }

    /// The byte offset in the source where it was found.
    #[must_use]
    pub fn offset(&self) -> usize {
        self.offset
    }
}

/// What was wrong with a document.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// Something other than the grammar allows here: `expected` names what
    /// would have been, `found` is the character found (`None`: the input
    /// ended). Covers `+1`, `NaN`, comments, single quotes, a missing
    /// `:` or `,`, a misspelt `true`, and an empty document.
    Expected {
        /// What the grammar allows here ("a value", "',' or ']'", ...).
        expected: &'static str,
        /// The character found instead; `None` when the input ended.
        found: Option<char>,
    },
    /// A `,` followed by `]` or `}` (the offset is the comma's).
    TrailingComma,
    /// Something other than whitespace after the document's value.
    TrailingCharacters {
        /// The first such character.
        found: char,
    },
    /// An object names the same key twice (compared after decoding
    /// escapes, so `"a"` and `"\u0061"` are the same key); the offset is
    /// the second one's. Refused always: parsers disagree on which one wins.
    DuplicateKey {
        /// The key, decoded.
        key: String,
    },
    /// Arrays and objects nested deeper than the limit (the offset is the
    /// bracket that went one too deep).
    TooDeep {
        /// The limit.
        max_depth: usize,
    },
    /// A character below U+0020 inside a string, where JSON requires an
    /// escape.
    ControlCharacter {
        /// The byte.
        byte: u8,
    },
    /// A backslash followed by something other than `"\/bfnrtu`.
    InvalidEscape {
        /// What followed it; `None` when the input ended.
        found: Option<char>,
    },
    /// `\u` not followed by four hexadecimal digits.
    InvalidUnicodeEscape,
    /// A `\u` escape of a UTF-16 surrogate that is not part of a pair
    /// (refused under [`Surrogates::Refuse`](super::Surrogates::Refuse)).
    LoneSurrogate {
        /// The escaped code unit.
        code_unit: u16,
    },
    /// Bytes that are not UTF-8.
    InvalidUtf8,
    /// A number that starts with `0` followed by a digit (`01`, `-007`).
    LeadingZero,
    /// A number too large for a 64-bit float (`1e400`), refused under
    /// [`Numbers::InRange`](super::Numbers::InRange) as `serde_json`
    /// refuses it.
    NumberOutOfRange,
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expected { expected, found } => {
                write!(f, "expected {expected}, found ")?;
                match found {
                    Some(c) => write!(f, "{c:?}"),
                    None => f.write_str("the end of the input"),
                }
            }
            Self::TrailingComma => f.write_str("trailing comma"),
            Self::TrailingCharacters { found } => {
                write!(f, "unexpected {found:?} after the json value")
            }
            Self::DuplicateKey { key } => {
                let mut shown: String = key.chars().take(KEY_SHOWN).collect();
                if shown.len() < key.len() {
                    shown.push('…');
                }
                write!(f, "duplicate key {shown:?}")
            }
            Self::TooDeep { max_depth } => write!(f, "nesting deeper than {max_depth}"),
            Self::ControlCharacter { byte } => {
                write!(f, "unescaped control character U+{byte:04X} in a string")
            }
            Self::InvalidEscape { found: Some(c) } => {
                write!(f, "invalid escape: backslash followed by {c:?}")
            }
            Self::InvalidEscape { found: None } => {
                f.write_str("invalid escape: backslash at the end of the input")
            }
            Self::InvalidUnicodeEscape => {
                f.write_str("invalid \\u escape (four hexadecimal digits expected)")
            }
            Self::LoneSurrogate { code_unit } => {
                write!(f, "unpaired surrogate escape \\u{code_unit:04x}")
            }
            Self::InvalidUtf8 => f.write_str("invalid utf-8"),
            Self::LeadingZero => f.write_str("number with a leading zero"),
            Self::NumberOutOfRange => f.write_str("number out of range"),
        }
    }
}
