//! Replaying a case through the real loaded packs and the real agent loop,
//! and judging the run against the case's golden file.

use super::case::{Case, CaseError};
use super::golden::{diff, golden_path, Normaliser};
use super::setup::{load_in_order, session_builder, PackLoadError};
use crate::agent::{read_user_file, AgentEvent, AnswersFile, EventBus};
use crate::interception::{HealthEvent, HealthPolicy, HealthSink};
use crate::plugins::{PluginManager, Registry, SearchDir};
use crate::providers::{Provider, ScriptedModel};
use crate::tools::Workspace;
use crate::types::{terminal_safe, Headers};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest golden file read.
pub const MAX_GOLDEN_BYTES: u64 = 16 << 20;

/// Why a case could not be judged at all (as opposed to a run that
/// disagrees with its golden file, which is a [`Verdict`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The case file is unusable.
    #[error(transparent)]
    Case(#[from] CaseError),
    /// A pack the case names could not be loaded.
    #[error("case {case}: {source} (build the pack, and name its directory with --plugins-dir DIR or the case's `plugins_dirs`)")]
    Pack {
        /// The case's name.
        case: String,
        /// What failed.
        source: PackLoadError,
    },
    /// The golden file exists but cannot be read, or cannot be written.
    #[error("{}: {reason}", path.display())]
    Golden {
        /// The golden file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The scratch workspace could not be made.
    #[error("case {case}: cannot make a scratch workspace: {reason}")]
    Workspace {
        /// The case's name.
        case: String,
        /// Why.
        reason: String,
    },
}

/// Compare with the golden file, or rewrite it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A run that differs from the golden file fails.
    Check,
    /// The golden file is rewritten with what the run produced.
    Bless,
}

/// How one case came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The run produced exactly the golden file's decisions.
    Passed,
    /// It did not; the unified diff from the golden file to the run.
    Differs {
        /// The diff, safe to print.
        diff: String,
    },
    /// The case has no golden file yet.
    MissingGolden,
    /// `--bless` wrote the golden file.
    Blessed {
        /// Whether its contents changed (or it was new).
        changed: bool,
        /// Whether it was new.
        created: bool,
    },
}

/// One judged case.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's name.
    pub case: String,
    /// The case file.
    pub path: PathBuf,
    /// The verdict.
    pub verdict: Verdict,
}

impl Outcome {
    /// Whether this case counts as failed.
    #[must_use]
    pub fn failed(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Differs { .. } | Verdict::MissingGolden
        )
    }
}

impl fmt::Display for Outcome {
    /// `case NAME ... ok` (and the diff, for a failure), ending in a newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let golden = golden_path(&self.path);
        let golden = golden
            .file_name()
            .map_or_else(String::new, |n| terminal_safe(&n.to_string_lossy()));
        let case = terminal_safe(&self.case);
        match &self.verdict {
            Verdict::Passed => writeln!(f, "case {case} ... ok"),
            Verdict::Differs { diff } => {
                writeln!(f, "case {case} ... FAILED: the decisions differ from {golden}")?;
                f.write_str(diff)?;
                if !diff.ends_with('\n') {
                    writeln!(f)?;
                }
                Ok(())
            }
            Verdict::MissingGolden => writeln!(
                f,
                "case {case} ... FAILED: there is no golden file {golden} yet (run with --bless to write it)"
            ),
            Verdict::Blessed { created: true, .. } => {
                writeln!(f, "case {case} ... blessed: {golden} written")
            }
            Verdict::Blessed { changed: true, .. } => {
                writeln!(f, "case {case} ... blessed: {golden} rewritten")
            }
            Verdict::Blessed { changed: false, .. } => {
                writeln!(f, "case {case} ... blessed: {golden} unchanged")
            }
        }
    }
}

/// Every case of a run, in order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The judged cases.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// The cases that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.failed())
    }

    /// Whether every case passed (or was blessed).
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// `N cases: P passed, F failed` (or `N cases blessed`).
    #[must_use]
    pub fn summary(&self) -> String {
        let total = self.outcomes.len();
        let plural = if total == 1 { "case" } else { "cases" };
        let blessed = self
            .outcomes
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Blessed { .. }))
            .count();
        if blessed == total {
            let changed = self
                .outcomes
                .iter()
                .filter(|o| matches!(o.verdict, Verdict::Blessed { changed: true, .. }))
                .count();
            let files = if changed == 1 { "file" } else { "files" };
            return format!("{total} {plural} blessed, {changed} golden {files} changed");
        }
        let failed = self.failures().count();
        format!(
            "{total} {plural}: {} passed, {failed} failed",
            total - failed
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for outcome in &self.outcomes {
            write!(f, "{outcome}")?;
        }
        writeln!(f, "{}", self.summary())
    }
}

/// Replays cases with packs found on a search path.
#[derive(Debug, Clone)]
pub struct Harness {
    search: Vec<SearchDir>,
}

impl Harness {
    /// A harness finding packs on `search` (after each case's own
    /// `plugins_dirs`).
    #[must_use]
    pub fn new(search: Vec<SearchDir>) -> Self {
        Harness { search }
    }

    /// Runs `case` in a scratch workspace, with a fresh registry and fresh
    /// pack instances, and returns its golden text.
    ///
    /// # Errors
    ///
    /// `HarnessError::Workspace` when the scratch workspace cannot be made;
    /// `HarnessError::Pack` when a pack the case names does not load;
    /// `HarnessError::Case` when the case's responses or answers are not a
    /// script or an answers file.
    pub fn run(&self, case: &Case) -> Result<String, HarnessError> {
        let scratch = tempfile::Builder::new()
            .prefix("chimera-case-")
            .tempdir()
            .map_err(|e| workspace_error(case, &e))?;
        let workspace = Workspace::new(scratch.path()).map_err(|e| workspace_error(case, &e))?;
        let search: Vec<SearchDir> = case
            .plugins_dirs
            .iter()
            .cloned()
            .map(SearchDir::all)
            .chain(self.search.iter().cloned())
            .collect();
        let mut normaliser = Normaliser::new()
            .replace(workspace.root(), "<workspace>")
            .replace(scratch.path(), "<workspace>")
            .replace(case.path.parent().unwrap_or(Path::new(".")), "<cases>")
            .replace(&std::env::temp_dir(), "<tmp>");
        for dir in &search {
            normaliser = normaliser.replace(&dir.path, "<plugins>");
        }

        let bus = EventBus::new();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        bus.subscribe(move |event: &AgentEvent| {
            sink.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(event.clone());
        });
        let registry = Arc::new(Registry::new());
        let manager = PluginManager::with_search_path(Arc::clone(&registry), search);
        // No call budget: whether a call is slow depends on the machine,
        // and a golden file must not.
        let quarantines = bus.clone();
        let health: HealthSink = Arc::new(move |event| {
            if let HealthEvent::Quarantined { pack, reason } = event {
                quarantines.publish(AgentEvent::PackQuarantined { name: pack, reason });
            }
        });
        manager.set_health(
            HealthPolicy {
                call_budget: None,
                ..HealthPolicy::default()
            },
            Some(health),
        );
        let packs: Vec<(String, String)> = case
            .packs
            .iter()
            .map(|p| (p.name.clone(), p.config.clone()))
            .collect();
        load_in_order(&manager, &packs, &bus).map_err(|source| HarnessError::Pack {
            case: case.name.clone(),
            source,
        })?;

        let mut model = ScriptedModel::from_json(&case.script)
            .map_err(|e| CaseError::new(&case.path, None, e.to_string()))?;
        if !case.headers.is_empty() {
            model = model.with_headers(Headers(case.headers.clone()));
        }
        if let Some(name) = &case.model {
            model = model.with_model(name.clone());
        }
        let provider: Arc<dyn Provider> = Arc::new(model);
        let answers = AnswersFile::parse(&case.answers)
            .map_err(|e| CaseError::new(&case.path, None, format!("answers: {e}")))?;
        let mut builder = session_builder(
            provider,
            workspace,
            registry,
            bus,
            case.max_steps,
            true,
            &[],
        )
        .session_id(format!("case-{}", case.name))
        .approver(Arc::new(answers))
        .stream(case.stream);
        if let Some(system) = &case.system {
            builder = builder.system(system.clone());
        }
        let mut session = builder.build();
        for prompt in &case.prompts {
            session.run_turn(prompt);
        }
        drop(session);
        let events = events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Ok(normaliser.golden(&events))
    }

    /// Runs `case` and judges it against its golden file (or rewrites it).
    ///
    /// # Errors
    ///
    /// [`Harness::run`]'s errors; `HarnessError::Golden` when the golden file
    /// exists but cannot be read, or (blessing) cannot be written.
    pub fn check(&self, case: &Case, mode: Mode) -> Result<Outcome, HarnessError> {
        let actual = self.run(case)?;
        let path = golden_path(&case.path);
        let expected = read_golden(&path)?;
        let verdict = match (mode, expected) {
            (Mode::Bless, expected) => {
                let changed = expected.as_deref() != Some(actual.as_str());
                if changed {
                    write_golden(&path, &actual)?;
                }
                Verdict::Blessed {
                    changed,
                    created: expected.is_none(),
                }
            }
            (Mode::Check, None) => Verdict::MissingGolden,
            (Mode::Check, Some(expected)) if expected == actual => Verdict::Passed,
            (Mode::Check, Some(expected)) => {
                let golden = path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                Verdict::Differs {
                    diff: diff(&golden, &case.name, &expected, &actual),
                }
            }
        };
        Ok(Outcome {
            case: case.name.clone(),
            path: case.path.clone(),
            verdict,
        })
    }

    /// Reads every case `path` names (a case file or a directory of them;
    /// all are checked before any runs), runs each and judges it.
    ///
    /// # Errors
    ///
    /// `HarnessError::Case` when a case file cannot be found, read or checked,
    /// before any case runs; then the first [`Harness::check`] error, which
    /// stops the run.
    pub fn check_path(&self, path: &Path, mode: Mode) -> Result<Report, HarnessError> {
        let cases = super::case::load_cases(path)?;
        let mut report = Report::default();
        for case in &cases {
            report.outcomes.push(self.check(case, mode)?);
        }
        Ok(report)
    }
}

fn workspace_error(case: &Case, error: &std::io::Error) -> HarnessError {
    HarnessError::Workspace {
        case: case.name.clone(),
        reason: error.to_string(),
    }
}

/// The golden file's text, line ends as `\n` (a checkout that turned them
/// into `\r\n` still compares equal); `None` when there is none.
fn read_golden(path: &Path) -> Result<Option<String>, HarnessError> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    read_user_file(path, MAX_GOLDEN_BYTES)
        .map(|text| Some(text.replace("\r\n", "\n")))
        .map_err(|reason| HarnessError::Golden {
            path: path.to_owned(),
            reason,
        })
}

/// Writes the golden file whole or not at all: a temporary file beside it,
/// renamed into place.
fn write_golden(path: &Path, text: &str) -> Result<(), HarnessError> {
    let error = |reason: String| HarnessError::Golden {
        path: path.to_owned(),
        reason,
    };
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.is_file() {
            return Err(error("not a regular file; refusing to replace it".into()));
        }
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temporary = tempfile::Builder::new()
        .prefix(".golden-")
        .tempfile_in(dir)
        .map_err(|e| error(format!("cannot write it: {e}")))?;
    std::io::Write::write_all(&mut temporary, text.as_bytes())
        .map_err(|e| error(format!("cannot write it: {e}")))?;
    #[cfg(unix)]
    {
        // A golden file is a source file, not a secret.
        use std::os::unix::fs::PermissionsExt;
        temporary
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(|e| error(format!("cannot write it: {e}")))?;
    }
    temporary
        .persist(path)
        .map_err(|e| error(format!("cannot write it: {}", e.error)))?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_golden_file_that_is_a_fifo_or_a_directory_is_refused_never_waited_on_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("pipe.golden.jsonl");
        crate::test_support::make_fifo(&pipe);
        let error = read_golden(&pipe).unwrap_err().to_string();
        assert!(error.ends_with("not a regular file"), "{error}");
        let error = write_golden(&pipe, "{}\n").unwrap_err().to_string();
        assert!(error.contains("refusing to replace it"), "{error}");
        let folder = dir.path().join("folder.golden.jsonl");
        std::fs::create_dir(&folder).unwrap();
        assert!(read_golden(&folder).is_err());
        assert_eq!(
            read_golden(&dir.path().join("none.golden.jsonl")).unwrap(),
            None
        );
        let big = dir.path().join("big.golden.jsonl");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_GOLDEN_BYTES + 1).unwrap();
        assert!(read_golden(&big)
            .unwrap_err()
            .to_string()
            .contains("larger than"));
    }

    #[test]
    fn a_golden_file_is_written_whole_and_readable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.golden.jsonl");
        write_golden(&path, "{\"type\":\"user\"}\n").unwrap();
        assert_eq!(
            read_golden(&path).unwrap().as_deref(),
            Some("{\"type\":\"user\"}\n")
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }
}

#[cfg(test)]
mod replay {
    use super::*;

    #[test]
    fn a_streamed_case_with_no_pack_replays_in_process_and_blesses_then_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streamed.toml");
        let text = r#"
prompts = ["say hello", "again"]
model = "gpt-test"
stream = true

[[responses]]
deltas = ["hel", "lo"]

[[responses]]
content = "bye"
"#;
        std::fs::write(&path, text).unwrap();
        let case = Case::from_file(&path).unwrap();
        let harness = Harness::new(Vec::new());
        let golden = harness.run(&case).unwrap();
        assert_eq!(
            golden,
            concat!(
                "{\"type\":\"user\",\"content\":\"say hello\"}\n",
                "{\"type\":\"run_end\",\"output\":\"hello\",\"reason\":\"completed\",\"success\":true}\n",
                "{\"type\":\"user\",\"content\":\"again\"}\n",
                "{\"type\":\"run_end\",\"output\":\"bye\",\"reason\":\"completed\",\"success\":true}\n",
            )
        );
        let report = harness.check_path(dir.path(), Mode::Check).unwrap();
        assert_eq!(report.outcomes[0].verdict, Verdict::MissingGolden);
        assert!(!report.passed());
        let blessed = harness.check(&case, Mode::Bless).unwrap();
        assert_eq!(
            blessed.verdict,
            Verdict::Blessed {
                changed: true,
                created: true
            }
        );
        // A checkout that turned line ends into CRLF still passes.
        let golden_file = golden_path(&path);
        let crlf = std::fs::read_to_string(&golden_file)
            .unwrap()
            .replace('\n', "\r\n");
        std::fs::write(&golden_file, crlf).unwrap();
        assert!(harness.check_path(&path, Mode::Check).unwrap().passed());
    }
}
