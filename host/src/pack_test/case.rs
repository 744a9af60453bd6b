//! A policy test case: a TOML file naming the packs to load, the user turns
//! and the scripted model's replies (see the [module docs](super) for the
//! format). The file is hostile until checked: a regular file of at most
//! [`MAX_CASE_BYTES`], UTF-8, every key known; each error is one line
//! naming the file and the line.

use crate::agent::read_user_file;
use crate::providers::Usage;
use crate::types::terminal_safe;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The largest case file read.
pub const MAX_CASE_BYTES: u64 = 1 << 20;

/// The extension of case files.
pub const CASE_EXTENSION: &str = "toml";

/// A case file that cannot be used: one line, naming the file and, where
/// the problem is in the text, the line. Text from the file (a key, a
/// value) shows with its control characters escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {}", terminal_safe(&path.display().to_string()), line.map(|l| format!(":{l}")).unwrap_or_default(), terminal_safe(message))]
pub struct CaseError {
    /// The case file (or directory) concerned.
    pub path: PathBuf,
    /// The 1-based line of the problem, when it is in the text.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl CaseError {
    pub(crate) fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        CaseError {
            path: path.to_owned(),
            line,
            message: message.into(),
        }
    }
}

/// One pack a case loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasePack {
    /// The entry-point name.
    pub name: String,
    /// Its configuration as JSON text (empty: the pack's defaults).
    pub config: String,
}

/// A parsed, checked case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case file.
    pub path: PathBuf,
    /// The case's name: the file name without `.toml`.
    pub name: String,
    /// What the case pins, for the reader.
    pub description: Option<String>,
    /// The user turns, in order (at least one).
    pub prompts: Vec<String>,
    /// The packs, in load order.
    pub packs: Vec<CasePack>,
    /// More directories to find packs in, resolved against the case's
    /// directory (searched before the usual search path).
    pub plugins_dirs: Vec<PathBuf>,
    /// The scripted model's script, as the JSON `--script` reads.
    pub script: String,
    /// The operator's answers, as the JSON lines `--approvals` reads.
    pub answers: String,
    /// The model name the session reports (`None`: `scripted`).
    pub model: Option<String>,
    /// The system prompt (`None`: the default one).
    pub system: Option<String>,
    /// Provider calls allowed per turn.
    pub max_steps: usize,
    /// Whether replies stream (each reply's `deltas` are its pieces).
    pub stream: bool,
    /// The scripted model's header surface, sorted by name.
    pub headers: Vec<(String, String)>,
}

/// The file's shape; every table refuses keys it does not know.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    description: Option<String>,
    prompts: Spanned<Vec<String>>,
    #[serde(default)]
    packs: Vec<RawPack>,
    #[serde(default)]
    plugins_dirs: Vec<String>,
    #[serde(default)]
    responses: Vec<RawResponse>,
    #[serde(default)]
    answers: Vec<RawAnswer>,
    model: Option<String>,
    system: Option<String>,
    max_steps: Option<Spanned<usize>>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPack {
    name: Spanned<String>,
    config: Option<Spanned<toml::Value>>,
    config_json: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResponse {
    content: Option<String>,
    deltas: Option<Vec<String>>,
    #[serde(default)]
    tool_calls: Vec<RawCall>,
    usage: Option<RawUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    id: Option<String>,
    name: String,
    arguments: Option<Spanned<toml::Value>>,
    arguments_json: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    answer: Spanned<AnswerKind>,
    tool: Option<String>,
    payload: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerKind {
    Allow,
    Reject,
    Edit,
}

/// The default of `max_steps`, as `chimera run --max-steps`.
const DEFAULT_MAX_STEPS: usize = 25;

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

/// Where a problem is found while checking a case's values.
struct Checker<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Checker<'_> {
    fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> CaseError {
        CaseError::new(
            self.path,
            span.map(|span| line_of(self.text, span.start)),
            message,
        )
    }

    /// A TOML value as JSON; dates have no JSON form.
    fn json(&self, value: &Spanned<toml::Value>, what: &str) -> Result<Value, CaseError> {
        to_json(value.get_ref()).ok_or_else(|| {
            self.error(
                Some(value.span()),
                format!("{what} holds a TOML date, which JSON has no form for; quote it"),
            )
        })
    }

    /// Exactly one of a TOML value and a JSON text, as JSON text (neither:
    /// `None`).
    fn one_of(
        &self,
        value: Option<&Spanned<toml::Value>>,
        text: Option<&Spanned<String>>,
        key: &str,
    ) -> Result<Option<String>, CaseError> {
        match (value, text) {
            (Some(_), Some(text)) => Err(self.error(
                Some(text.span()),
                format!("give `{key}` or `{key}_json`, not both"),
            )),
            (Some(value), None) => Ok(Some(self.json(value, &format!("`{key}`"))?.to_string())),
            (None, Some(text)) => match serde_json::from_str::<Value>(text.get_ref()) {
                Ok(_) => Ok(Some(text.get_ref().clone())),
                Err(error) => Err(self.error(
                    Some(text.span()),
                    format!("`{key}_json` is not JSON: {error}"),
                )),
            },
            (None, None) => Ok(None),
        }
    }
}

/// `value` as JSON (`None`: it holds a date).
fn to_json(value: &toml::Value) -> Option<Value> {
    Some(match value {
        toml::Value::String(text) => Value::String(text.clone()),
        toml::Value::Integer(number) => json!(number),
        toml::Value::Float(number) => json!(number),
        toml::Value::Boolean(flag) => Value::Bool(*flag),
        toml::Value::Datetime(_) => return None,
        toml::Value::Array(items) => {
            Value::Array(items.iter().map(to_json).collect::<Option<_>>()?)
        }
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| Some((key.clone(), to_json(value)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

impl Case {
    /// Reads and checks the case file at `path`.
    ///
    /// # Errors
    ///
    /// A `CaseError` naming the file when it cannot be read (not a regular
    /// file, over [`MAX_CASE_BYTES`], not UTF-8), or [`Case::parse`]'s error
    /// for its text.
    pub fn from_file(path: &Path) -> Result<Case, CaseError> {
        let text = read_user_file(path, MAX_CASE_BYTES)
            .map_err(|reason| CaseError::new(path, None, reason))?;
        Case::parse(path, &text)
    }

    /// Checks case `text`, read from `path` (which names the case and
    /// anchors its relative directories).
    ///
    /// # Errors
    ///
    /// A `CaseError` naming the line, when `text` is not TOML of the case
    /// format or breaks one of its rules: an empty `prompts`, a pack without a
    /// name, a value given both as TOML and as `_json` text, `_json` text that
    /// is not JSON, `max_steps` of 0, a `payload` on an answer other than
    /// `edit`.
    pub fn parse(path: &Path, text: &str) -> Result<Case, CaseError> {
        let checker = Checker { path, text };
        let raw: RawCase = toml::from_str(text).map_err(|error| {
            checker.error(error.span(), error.message().trim().replace('\n', " "))
        })?;
        if raw.prompts.get_ref().is_empty() {
            return Err(checker.error(
                Some(raw.prompts.span()),
                "`prompts` is empty: a case needs at least one user turn",
            ));
        }
        let packs = raw
            .packs
            .iter()
            .map(|pack| {
                if pack.name.get_ref().trim().is_empty() {
                    return Err(checker.error(Some(pack.name.span()), "a pack's `name` is empty"));
                }
                let config =
                    checker.one_of(pack.config.as_ref(), pack.config_json.as_ref(), "config")?;
                Ok(CasePack {
                    name: pack.name.get_ref().clone(),
                    config: config.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max_steps = match &raw.max_steps {
            Some(steps) if *steps.get_ref() == 0 => {
                return Err(checker.error(Some(steps.span()), "`max_steps` must be at least 1"))
            }
            Some(steps) => *steps.get_ref(),
            None => DEFAULT_MAX_STEPS,
        };
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        Ok(Case {
            path: path.to_owned(),
            name: case_name(path),
            description: raw.description,
            prompts: raw.prompts.into_inner(),
            packs,
            plugins_dirs: raw.plugins_dirs.iter().map(|dir| base.join(dir)).collect(),
            script: script(&checker, &raw.responses)?,
            answers: answers(&checker, &raw.answers)?,
            model: raw.model,
            system: raw.system,
            max_steps,
            stream: raw.stream,
            headers: raw.headers.into_iter().collect(),
        })
    }
}

/// The scripted model's script, as `--script` reads it.
#[derive(Serialize)]
struct Script<'a> {
    responses: Vec<Reply<'a>>,
}

#[derive(Serialize)]
struct Reply<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deltas: Option<&'a [String]>,
    tool_calls: Vec<Call<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct Call<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    /// The JSON text verbatim, as a model's arguments reach a pack.
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Box<RawValue>>,
}

/// The scripted model's script for `responses`.
fn script(checker: &Checker<'_>, responses: &[RawResponse]) -> Result<String, CaseError> {
    let mut replies = Vec::with_capacity(responses.len());
    for response in responses {
        let mut tool_calls = Vec::with_capacity(response.tool_calls.len());
        for call in &response.tool_calls {
            let arguments = checker
                .one_of(
                    call.arguments.as_ref(),
                    call.arguments_json.as_ref(),
                    "arguments",
                )?
                .map(RawValue::from_string)
                .transpose()
                .map_err(|error| checker.error(None, error.to_string()))?;
            tool_calls.push(Call {
                id: call.id.as_deref(),
                name: &call.name,
                arguments,
            });
        }
        replies.push(Reply {
            content: response.content.as_deref(),
            deltas: response.deltas.as_deref(),
            tool_calls,
            usage: response.usage.as_ref().map(|usage| Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            }),
        });
    }
    serde_json::to_string(&Script { responses: replies })
        .map_err(|error| checker.error(None, error.to_string()))
}

/// The answers-file text for `answers`.
fn answers(checker: &Checker<'_>, answers: &[RawAnswer]) -> Result<String, CaseError> {
    let mut lines = String::new();
    for answer in answers {
        let mut line = serde_json::Map::new();
        let kind = match answer.answer.get_ref() {
            AnswerKind::Allow => "allow",
            AnswerKind::Reject => "reject",
            AnswerKind::Edit => "edit",
        };
        line.insert("answer".into(), json!(kind));
        if let Some(tool) = &answer.tool {
            line.insert("tool".into(), json!(tool));
        }
        match (&answer.payload, answer.answer.get_ref()) {
            (Some(payload), AnswerKind::Edit) => {
                line.insert("payload".into(), checker.json(payload, "`payload`")?);
            }
            (Some(payload), _) => {
                return Err(checker.error(
                    Some(payload.span()),
                    "`payload` goes with `answer = \"edit\"` only",
                ))
            }
            (None, AnswerKind::Edit) => {
                return Err(checker.error(
                    Some(answer.answer.span()),
                    "an `edit` answer needs a `payload`",
                ))
            }
            (None, _) => {}
        }
        lines.push_str(&Value::Object(line).to_string());
        lines.push('\n');
    }
    Ok(lines)
}

/// The case name of the file at `path`: its name without the extension.
fn case_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || "case".to_owned(),
        |stem| stem.to_string_lossy().into_owned(),
    )
}

/// The case files `path` names: the file itself, or every `*.toml` file in
/// the directory, sorted (not recursing).
///
/// # Errors
///
/// A `CaseError` naming `path` when it cannot be read or listed, is neither a
/// file nor a directory, or is a directory without a `*.toml` file.
pub fn case_files(path: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let metadata = std::fs::metadata(path).map_err(|error| {
        CaseError::new(
            path,
            None,
            format!("cannot read it: {error} (name a case file or a directory of them)"),
        )
    })?;
    if metadata.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    if !metadata.is_dir() {
        return Err(CaseError::new(path, None, "not a case file or a directory"));
    }
    let entries = std::fs::read_dir(path)
        .map_err(|error| CaseError::new(path, None, format!("cannot list it: {error}")))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|file| {
            file.extension().is_some_and(|e| e == CASE_EXTENSION)
                && std::fs::metadata(file).is_ok_and(|m| m.is_file())
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(CaseError::new(
            path,
            None,
            format!("no case files (*.{CASE_EXTENSION}) here"),
        ));
    }
    Ok(files)
}

/// Every case `path` names, each read and checked; the first bad file
/// stops (nothing runs with a broken case among them).
///
/// # Errors
///
/// [`case_files`]'s error, or the first file's [`Case::from_file`] error.
pub fn load_cases(path: &Path) -> Result<Vec<Case>, CaseError> {
    case_files(path)?
        .iter()
        .map(|file| Case::from_file(file))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Case, CaseError> {
        Case::parse(Path::new("cases/blocks.toml"), text)
    }

    const GOOD: &str = r#"
description = "a denied command is blocked"
prompts = ["clean up"]
plugins_dirs = ["../target/debug"]

[[packs]]
name = "my-gate"
config = { deny = ["rm -rf"], nested = { on = true } }

[[packs]]
name = "plan-gate"

[[responses]]
content = "on it"
tool_calls = [{ id = "c1", name = "bash", arguments = { command = "rm -rf build" } }]
usage = { input_tokens = 10 }

[[responses]]
tool_calls = [{ name = "write_file", arguments_json = '{"path": null}' }]

[[answers]]
answer = "edit"
payload = { command = "ls" }
"#;

    #[test]
    fn a_case_becomes_the_script_the_packs_and_the_answers_it_names() {
        let case = parse(GOOD).unwrap();
        assert_eq!(case.name, "blocks");
        assert_eq!(case.prompts, ["clean up"]);
        assert_eq!(case.plugins_dirs, [PathBuf::from("cases/../target/debug")]);
        assert_eq!(case.packs[0].name, "my-gate");
        let config: Value = serde_json::from_str(&case.packs[0].config).unwrap();
        assert_eq!(config, json!({"deny": ["rm -rf"], "nested": {"on": true}}));
        assert_eq!(case.packs[1].config, "");
        let script: Value = serde_json::from_str(&case.script).unwrap();
        assert_eq!(
            script,
            json!({"responses": [
                {"content": "on it",
                 "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "rm -rf build"}}],
                 "usage": {"input_tokens": 10, "output_tokens": 0}},
                {"tool_calls": [{"name": "write_file", "arguments": {"path": null}}]}
            ]})
        );
        crate::providers::ScriptedModel::from_json(&case.script).unwrap();
        assert_eq!(
            case.answers,
            "{\"answer\":\"edit\",\"payload\":{\"command\":\"ls\"}}\n"
        );
        crate::agent::AnswersFile::parse(&case.answers).unwrap();
        assert_eq!((case.max_steps, case.stream), (25, false));
    }

    #[test]
    fn an_unknown_key_is_one_line_naming_the_file_and_its_line() {
        let text = "prompts = [\"hi\"]\n\n[[responses]]\ncontnet = \"typo\"\n";
        let error = parse(text).unwrap_err().to_string();
        assert!(
            error.starts_with("cases/blocks.toml:4: unknown field `contnet`"),
            "{error}"
        );
        assert!(!error.contains('\n'), "{error}");
        let error = parse("prompts = [\"hi\"]\n\"\\u001b[2J\" = 1\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `\\u{1b}[2J`"), "{error}");
        assert!(!error.contains('\u{1b}'), "{error}");
    }

    #[test]
    fn each_bad_value_names_its_line() {
        for (text, line, says) in [
            ("prompts = []\n", 1, "`prompts` is empty"),
            ("description = 1\nprompts = [\"a\"]\n", 1, "invalid type"),
            (
                "prompts = [\"a\"]\n[[packs]]\nname = \"p\"\nconfig = {}\nconfig_json = '{}'\n",
                5,
                "not both",
            ),
            (
                "prompts = [\"a\"]\n[[packs]]\nname = \"p\"\nconfig_json = '{'\n",
                4,
                "`config_json` is not JSON",
            ),
            ("prompts = [\"a\"]\nmax_steps = 0\n", 2, "at least 1"),
            (
                "prompts = [\"a\"]\n[[packs]]\nname = \"p\"\nconfig = { when = 1979-05-27 }\n",
                4,
                "TOML date",
            ),
            (
                "prompts = [\"a\"]\n[[answers]]\nanswer = \"allow\"\npayload = {}\n",
                4,
                "goes with",
            ),
            (
                "prompts = [\"a\"]\n[[answers]]\nanswer = \"maybe\"\n",
                3,
                "unknown variant",
            ),
            ("prompts = [\"a\"\n", 1, ""),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(error.line, Some(line), "{text}: {error}");
            assert!(error.message.contains(says), "{text}: {error}");
            assert!(!error.to_string().contains('\n'), "{error}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_an_oversized_or_binary_case_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.toml");
        crate::test_support::make_fifo(&fifo);
        let big = dir.path().join("big.toml");
        std::fs::write(
            &big,
            vec![b'#'; usize::try_from(MAX_CASE_BYTES).unwrap() + 1],
        )
        .unwrap();
        let binary = dir.path().join("binary.toml");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        for (file, says) in [
            (&fifo, "not a regular file"),
            (&big, "larger than"),
            (&binary, "not UTF-8"),
        ] {
            let error = Case::from_file(file).unwrap_err();
            assert!(error.message.contains(says), "{error}");
        }
        // A directory lists only regular *.toml files: the FIFO is left out.
        std::fs::write(dir.path().join("b.toml"), "prompts = [\"x\"]").unwrap();
        std::fs::write(dir.path().join("a.toml"), "prompts = [\"x\"]").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        let names: Vec<_> = case_files(dir.path())
            .unwrap()
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.toml", "b.toml", "big.toml", "binary.toml"]);
    }

    #[test]
    fn an_empty_directory_or_a_missing_path_says_what_to_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(case_files(dir.path())
            .unwrap_err()
            .message
            .contains("no case files"));
        assert!(case_files(&dir.path().join("missing"))
            .unwrap_err()
            .message
            .contains("name a case file or a directory"));
    }
}
