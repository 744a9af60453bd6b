//! How `chimera.toml`'s text is read: a regular file (never a FIFO), at
//! most 1 MiB, UTF-8, TOML; an error names its line. The keys it may hold
//! are the command line's settings (each declared once, beside its flag),
//! which check them and name a wrong key's line ([`line_of_key`]); the
//! tables that have no flag of their own, a `[[packs]]` entry and an
//! `[mcp.servers.NAME]` server, are read here.

use super::ConfigError;
use crate::files::read_user_file;
use serde::Deserialize;
use std::path::Path;

/// The file's name, in the project directory and the user config directory.
pub const FILE_NAME: &str = "chimera.toml";

/// Configuration files and the trust store are small; anything larger is
/// refused rather than read.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// `[mcp.servers.NAME]`: one server, either a `command` started in the
/// workspace and spoken to on its standard input and output, or the `url`
/// of a streamable-HTTP endpoint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// The program (looked up on `PATH` when it has no `/`).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Option<Vec<String>>,
    /// Variables added to the environment it inherits.
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// The streamable-HTTP endpoint, instead of a command.
    pub url: Option<String>,
    /// The environment variable holding a token sent as
    /// `Authorization: Bearer …` to `url`.
    pub bearer_token_env: Option<String>,
    /// How long it may take to start and list its tools, in seconds.
    pub startup_timeout_secs: Option<u64>,
    /// How long one call may wait for its answer, in seconds; past it the
    /// server is stopped and its tools go away.
    pub call_timeout_secs: Option<u64>,
}

/// `[[packs]]`: one pack, by entry-point name, with its config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackEntry {
    /// The entry-point name.
    pub name: String,
    /// The pack's config, written as a TOML table (handed over as JSON).
    pub config: Option<toml::Table>,
    /// Run it in a sandboxed child process of its own (`--isolate NAME`).
    pub isolate: Option<bool>,
    /// `enforce` (the default) or `monitor`: its decisions recorded but
    /// never enforced (`--monitor NAME`).
    pub mode: Option<crate::interception::PackMode>,
    /// In a server (`chimera serve`): `fail_closed` (the default) refuses
    /// what this pack cannot judge (an error, a call past its deadline,
    /// its process restarting); `fail_open` lets each seam's own policy
    /// decide instead (`--fail-open NAME`).
    pub on_unavailable: Option<crate::state::FailPolicy>,
}

/// What names a gateway conversation (`[serve] session_scope`,
/// `chimera serve --session-scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionScope {
    /// The `x-chimera-session` header within the client's key, else the
    /// key: a client may start a fresh conversation (and so a fresh
    /// per-conversation budget) by naming one.
    #[default]
    Header,
    /// The client's key alone; the header is ignored, so a per-session
    /// budget is a per-key budget no client can step out of.
    Key,
}

impl std::str::FromStr for SessionScope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "header" => Ok(SessionScope::Header),
            "key" => Ok(SessionScope::Key),
            other => Err(format!(
                "unknown session scope `{}` (expected header or key)",
                crate::types::one_line(other)
            )),
        }
    }
}

/// Reads the user-named file at `path` as configuration text.
pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    read_user_file(path, MAX_FILE_BYTES).map_err(|reason| ConfigError::Read {
        path: path.to_owned(),
        reason,
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

/// Parses `text` (read from `path`) as TOML; an error names the line and
/// the problem. What the keys may be is the reader's business (the
/// command line's settings check them, naming the line with
/// [`line_of_key`]).
///
/// # Errors
///
/// `ConfigError::Parse` when `text` is not TOML.
pub fn parse(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|error| ConfigError::Parse {
        path: path.to_owned(),
        line: error.span().map(|span| line_of(text, span.start)),
        message: error.message().trim().to_owned(),
    })
}

/// The 1-based line where `text` (a TOML document) writes the key at
/// `path` (`["trust", "probe"]`; a number steps into an array of tables),
/// or the nearest enclosing key it writes; `None` when it writes none of
/// them or is not TOML.
#[must_use]
pub fn line_of_key(text: &str, path: &[String]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let document = DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut line = None;
    let mut steps = path.iter().peekable();
    while let Some(step) = steps.next() {
        let Some((key, value)) = table.iter().find(|(key, _)| key.get_ref() == step) else {
            break;
        };
        line = Some(line_of(text, key.span().start));
        let mut value = value.get_ref();
        if let (DeValue::Array(items), Some(index)) =
            (value, steps.peek().and_then(|s| s.parse::<usize>().ok()))
        {
            steps.next();
            match items.get(index) {
                Some(item) => {
                    line = Some(line_of(text, item.span().start));
                    value = item.get_ref();
                }
                None => break,
            }
        }
        match value {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<toml::Table, String> {
        parse(Path::new("chimera.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn text_that_is_not_toml_is_refused_with_its_line() {
        let error = parsed("[trust]\nprobe = true\nprobe =\n").unwrap_err();
        assert!(error.starts_with("chimera.toml line 3: "), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    #[test]
    fn a_key_s_line_is_found_in_sections_and_arrays_of_tables() {
        let text = "packs = []\n\n[trust]\nprobe = true\nprobbe = true\n[[serve.x]]\na = 1\n[[serve.x]]\nb = 2\n";
        let path = |keys: &[&str]| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        assert_eq!(line_of_key(text, &path(&["trust", "probbe"])), Some(5));
        assert_eq!(line_of_key(text, &path(&["trust", "nope"])), Some(3));
        assert_eq!(line_of_key(text, &path(&["serve", "x", "1", "b"])), Some(9));
        assert_eq!(line_of_key(text, &path(&["nope"])), None);
    }
}
