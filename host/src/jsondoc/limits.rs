//! How strict [`parse`](super::parse) is, and how deep it goes.

/// What [`parse`](super::parse) accepts beyond the strict grammar, and
/// how deep.
///
/// Duplicate keys are refused always: parsers disagree on which of two
/// wins, so what was judged could differ from what the upstream reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// How deep arrays and objects may nest: `[[]]` is 2 deep, a scalar
    /// alone 0. Deeper is refused with
    /// [`ParseErrorKind::TooDeep`](super::ParseErrorKind::TooDeep). The
    /// parser itself does not recurse, but
    /// [`Node::to_value`](super::Node::to_value) and dropping a tree do,
    /// one frame a level: keep this in the hundreds. (`serde_json` refuses
    /// 128 and deeper.)
    pub max_depth: usize,
    /// What to do with a `\u` escape of a lone UTF-16 surrogate.
    pub surrogates: Surrogates,
    /// What to do with a number a 64-bit float cannot hold (`1e400`).
    pub numbers: Numbers,
}

impl Limits {
    /// The default [`max_depth`](Self::max_depth).
    pub const DEFAULT_MAX_DEPTH: usize = 256;

    /// The defaults: nesting up to 256, lone surrogates refused, numbers
    /// kept as written whatever their size.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            surrogates: Surrogates::Refuse,
            numbers: Numbers::Keep,
        }
    }

    /// These limits with another nesting cap.
    #[must_use]
    pub const fn with_max_depth(self, max_depth: usize) -> Self {
        Self { max_depth, ..self }
    }

    /// These limits with another rule for lone surrogates.
    #[must_use]
    pub const fn with_surrogates(self, surrogates: Surrogates) -> Self {
        Self { surrogates, ..self }
    }

    /// These limits with another rule for numbers out of range.
    #[must_use]
    pub const fn with_numbers(self, numbers: Numbers) -> Self {
        Self { numbers, ..self }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::new()
    }
}

/// What to do with a `\u` escape of a UTF-16 surrogate that is not half
/// of a pair (`"\ud800"`): RFC 8259 allows it, but it is no character.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Surrogates {
    /// Refuse the document, as `serde_json` does
    /// ([`ParseErrorKind::LoneSurrogate`](super::ParseErrorKind::LoneSurrogate)).
    #[default]
    Refuse,
    /// Accept it, as permissive servers do: the source's bytes are kept
    /// as written and decoded text has U+FFFD in its place.
    Keep,
}

/// What to do with a number too large for a 64-bit float (`1e400`,
/// `-1E+400`): RFC 8259 allows it and it is forwarded as written, but
/// `serde_json` refuses a document that holds one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Numbers {
    /// Accept it: the source's bytes are kept as written (what is judged
    /// is texts, and a number's bytes go on unchanged), and
    /// [`Node::to_value`](super::Node::to_value) gives the nearest value
    /// `serde_json` holds, `f64::MAX` or `-f64::MAX`.
    #[default]
    Keep,
    /// Refuse the document
    /// ([`ParseErrorKind::NumberOutOfRange`](super::ParseErrorKind::NumberOutOfRange)),
    /// as `serde_json` does: then `serde_json` reads every document
    /// accepted (nesting below 128, lone surrogates refused).
    InRange,
}
