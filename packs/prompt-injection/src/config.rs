//! prompt-injection's configuration: the default patterns, the configured
//! ones and their names.

use serde::Deserialize;

/// A default pattern: the name reasons show, and its regular expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPattern {
    /// The name shown in block reasons (kebab-case, stable).
    pub name: &'static str,
    /// The regular expression.
    pub pattern: &'static str,
}

/// The patterns every load judges by, in list order.
pub const DEFAULT_PATTERNS: [DefaultPattern; 15] = [
    DefaultPattern {
        name: "ignore-previous-instructions",
        pattern: r"(?i)ignore\s+(all\s+)?(previous|prior|above)\s+instructions",
    },
    DefaultPattern {
        name: "you-are-now",
        pattern: r"(?i)you\s+are\s+now\s+",
    },
    DefaultPattern {
        name: "system-prompt",
        pattern: r"(?i)system\s+prompt\s*:",
    },
    DefaultPattern {
        name: "disregard-previous",
        pattern: r"(?i)disregard\s+(all\s+)?(previous|prior|earlier)",
    },
    DefaultPattern {
        name: "new-instructions",
        pattern: r"(?i)new\s+instructions?\s*:",
    },
    DefaultPattern {
        name: "override-safety",
        pattern: r"(?i)override\s+(system|safety|previous)",
    },
    DefaultPattern {
        name: "inst-token",
        pattern: r"\[INST\]",
    },
    DefaultPattern {
        name: "im-start-token",
        pattern: r"<\|im_start\|>",
    },
    DefaultPattern {
        name: "system-token",
        pattern: r"<\|system\|>",
    },
    DefaultPattern {
        name: "pretend-you-are",
        pattern: r"(?i)pretend\s+you\s+are",
    },
    DefaultPattern {
        name: "no-restrictions",
        pattern: r"(?i)act\s+as\s+if\s+you\s+(have\s+)?no\s+(restrictions|rules|guidelines)",
    },
    // What tool poisoning hides in an MCP tool's description: tags that
    // mark instructions for the model, a request to keep something from
    // the user, a request to read credentials.
    DefaultPattern {
        name: "hidden-instructions",
        pattern: r"(?i)<\s*/?\s*(important|system|secret|hidden|instructions?)\s*>",
    },
    DefaultPattern {
        name: "conceal-from-user",
        pattern: r"(?i)\b(do\s+not|don't|never)\s+(tell|mention|inform|reveal|show|notify)\b[^.\n]{0,60}\b(user|human)",
    },
    DefaultPattern {
        name: "read-credentials",
        pattern: r"(?i)\b(read|cat|open|send|include|pass|upload|attach)\b[^\n]{0,80}(~/\.ssh|id_rsa|id_ed25519|\.aws/credentials|mcp\.json|/etc/passwd|\.netrc)",
    },
    // Text a reader cannot see: Unicode tag characters (ASCII written
    // invisibly) and bidirectional controls (text shown in another order
    // than it is read). The tag sequences of the three subdivision flags
    // are not matched (see `gate::visible`).
    DefaultPattern {
        name: "invisible-characters",
        pattern: r"[\x{202A}-\x{202E}\x{2066}-\x{2069}\x{E0000}-\x{E007F}]",
    },
];

/// The notice of a block, by default.
pub const DEFAULT_MESSAGE: &str = "Input blocked: potential prompt injection detected.";

/// The notice in warn mode.
pub const WARNING: &str = "Warning: potential prompt injection detected in input.";

/// What a match does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Block the request.
    #[default]
    Block,
    /// Let it go, with a notice.
    Warn,
}

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Block or warn.
    pub action: Action,
    /// The notice of a block.
    pub message: String,
    /// Extra patterns: one, or a list; each a regular expression or a
    /// table `{pattern, name}`.
    #[serde(deserialize_with = "one_or_many")]
    pub patterns: Vec<CustomPattern>,
    /// A file of extra regular expressions, one per line (named as bare
    /// `patterns` entries, continuing their numbering).
    pub patterns_file: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            action: Action::Block,
            message: DEFAULT_MESSAGE.to_owned(),
            patterns: Vec::new(),
            patterns_file: None,
        }
    }
}

/// A configured pattern: its regular expression and, optionally, the name
/// reasons show (a bare string has none: it is named by its position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomPattern {
    /// The regular expression.
    pub pattern: String,
    /// The name given (`None`: `custom-<position>`).
    pub name: Option<String>,
}

impl<'de> Deserialize<'de> for CustomPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PatternVisitor)
    }
}

/// A string, or a map of `pattern` and an optional `name` (never a
/// sequence: serde would read `["a", "b"]` as `{pattern: a, name: b}`).
struct PatternVisitor;

impl<'de> serde::de::Visitor<'de> for PatternVisitor {
    type Value = CustomPattern;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a pattern: a regular expression, or a table {pattern, name}")
    }

    fn visit_str<E: serde::de::Error>(self, pattern: &str) -> Result<CustomPattern, E> {
        Ok(CustomPattern {
            pattern: pattern.to_owned(),
            name: None,
        })
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<CustomPattern, A::Error> {
        use serde::de::Error;
        let (mut pattern, mut name) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "pattern" if pattern.is_none() => pattern = Some(map.next_value::<String>()?),
                "name" if name.is_none() => name = Some(map.next_value::<String>()?),
                "pattern" | "name" => return Err(A::Error::duplicate_field("pattern or name")),
                other => return Err(A::Error::unknown_field(other, &["pattern", "name"])),
            }
        }
        let pattern = pattern.ok_or_else(|| A::Error::missing_field("pattern"))?;
        Ok(CustomPattern { pattern, name })
    }
}

/// The name of an unnamed configured pattern, by its 1-based position
/// among the configured ones (`patterns`, then `patterns_file`'s lines).
#[must_use]
pub fn custom_name(position: usize) -> String {
    format!("custom-{position}")
}

/// One pattern or a list of them (`"patterns": "(?i)sudo"` is one); an
/// entry's own error (an unknown key, a missing `pattern`) is kept.
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<CustomPattern>, D::Error> {
    struct OneOrMany;
    impl<'de> serde::de::Visitor<'de> for OneOrMany {
        type Value = Vec<CustomPattern>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a regular expression, a table {pattern, name}, or a list of them")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            PatternVisitor.visit_str(text).map(|one| vec![one])
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            PatternVisitor.visit_map(map).map(|one| vec![one])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut all = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(one) = seq.next_element::<CustomPattern>()? {
                all.push(one);
            }
            Ok(all)
        }
    }
    deserializer.deserialize_any(OneOrMany)
}

/// A pattern's name must read well in one line: 1 to 64 of
/// `A-Z a-z 0-9 _ - .`, and not a default pattern's.
///
/// # Errors
///
/// One line saying which rule `name` breaks.
pub fn check_name(name: &str) -> Result<(), String> {
    gate_kit::check_name("pattern name", name)?;
    if DEFAULT_PATTERNS.iter().any(|d| d.name == name) {
        return Err(format!("pattern name {name:?} is a default pattern's name"));
    }
    Ok(())
}
