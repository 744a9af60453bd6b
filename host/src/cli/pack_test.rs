//! `chimera pack test [DIR] [--bless]`: replays policy test cases (DIR: a
//! case file, a directory of them, or a pack crate's directory) through
//! the real loaded packs and the real loop (`chimera_host::pack_test`),
//! printing each verdict and the diff of each mismatch; exit 1 when a case
//! fails. `--from-record FILE --name CASE` turns a `run --record` recording
//! into a case and writes its golden file. Also the `run --record` hook.

use super::args::{PackTestArgs, RunArgs, SearchArgs};
use super::failure::Failure;
use super::pack_crate::{pack_crate, PackCrate};
use super::spec::parse_pack_spec;
use chimera_host::agent::{Approver, EventBus};
use chimera_host::pack_test::{
    golden_path, load_cases, Case, Harness, HarnessError, Mode, RecordedPack, Recorder, Recording,
    Report, SessionInfo, Verdict, RECORDING_FORMAT,
};
use chimera_host::plugins::{Level, SearchDir};
use chimera_host::providers::Provider;
use chimera_host::types::terminal_safe;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where cases are looked for when no DIR is given.
const DEFAULT_DIR: &str = "tests/cases";

pub(crate) fn test(mut args: PackTestArgs) -> Result<(), Failure> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    // A pack crate's directory: its cases, and its built library searched
    // first.
    let dir = match pack_crate(&dir)? {
        Some(PackCrate { cases, built }) => {
            args.search.plugins_dirs.insert(0, built);
            cases
        }
        None => dir,
    };
    let harness = Harness::new(search(&args.search, args.isolated));
    if let (Some(recording), Some(name)) = (&args.from_record, &args.name) {
        return from_record(&harness, recording, name, &dir);
    }
    let cases = load_cases(&dir).map_err(|e| Failure::usage(e.to_string()))?;
    let mode = if args.bless { Mode::Bless } else { Mode::Check };
    let mut report = Report::default();
    for case in &cases {
        let outcome = harness.check(case, mode).map_err(failure)?;
        print!("{outcome}");
        let _ = std::io::stdout().flush();
        report.outcomes.push(outcome);
    }
    println!("{}", report.summary());
    let failed = report.failures().count();
    if failed == 0 {
        return Ok(());
    }
    let missing = report
        .failures()
        .filter(|o| o.verdict == Verdict::MissingGolden)
        .count();
    let total = report.outcomes.len();
    Err(Failure::run_failed(if missing == failed {
        format!("{missing} of {total} cases have no golden file: run `chimera pack test --bless` to write them")
    } else {
        format!("{failed} of {total} cases failed: fix the pack, or accept the new decisions with `chimera pack test --bless` and review the golden files' diff")
    }))
}

/// The usual search path; `isolated`: only the named directories and the
/// bundled packs.
fn search(args: &SearchArgs, isolated: bool) -> Vec<SearchDir> {
    let mut dirs = chimera_host::config::search_path(&args.plugins_dirs);
    if isolated {
        dirs.retain(|dir| dir.level == Level::Bundled || args.plugins_dirs.contains(&dir.path));
    }
    dirs
}

/// The exit status for a case that could not be judged: 3 for a pack that
/// would not load, 2 for the rest.
fn failure(error: HarnessError) -> Failure {
    match error {
        HarnessError::Pack { .. } => Failure::pack(error.to_string()),
        _ => Failure::usage(error.to_string()),
    }
}

/// A case name `--name` may give: a file name, nothing more.
fn check_case_name(name: &str) -> Result<(), Failure> {
    let fine = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fine {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "--name '{}': a case name holds letters, digits, '-' and '_' only (it becomes NAME.toml)",
            terminal_safe(name)
        )))
    }
}

/// Writes the case `recording` becomes as `dir/name.toml`, replays it and
/// writes its golden file. Nothing is left behind when the replay cannot run.
fn from_record(harness: &Harness, recording: &Path, name: &str, dir: &Path) -> Result<(), Failure> {
    check_case_name(name)?;
    let recording = Recording::from_file(recording).map_err(|e| Failure::usage(e.to_string()))?;
    let case_path = dir.join(format!("{name}.toml"));
    let golden = golden_path(&case_path);
    for path in [&case_path, &golden] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Failure::usage(format!(
                "{} already exists; choose another --name",
                terminal_safe(&path.display().to_string())
            )));
        }
    }
    let text = recording.to_case();
    let case = Case::parse(&case_path, &text).map_err(|e| Failure::usage(e.to_string()))?;
    let shown = terminal_safe(&case_path.display().to_string());
    let cannot = |e: std::io::Error| Failure::usage(format!("cannot write {shown}: {e}"));
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&case_path)
        .map_err(cannot)?;
    let written = file.write_all(text.as_bytes()).map_err(cannot);
    let blessed = written.and_then(|()| harness.check(&case, Mode::Bless).map_err(failure));
    if let Err(failure) = blessed {
        let _ = std::fs::remove_file(&case_path);
        return Err(failure);
    }
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    println!(
        "wrote {shown} ({}, {}) and {}",
        count(case.prompts.len(), "user turn", "user turns"),
        count(recording.replies.len(), "model reply", "model replies"),
        terminal_safe(&golden.display().to_string())
    );
    if recording.failed_call.is_some() {
        println!("note: a provider call failed in the recording; the case's script ends before it");
    }
    Ok(())
}

/// The provider and the approver a session runs with.
type Operators = (Arc<dyn Provider>, Arc<dyn Approver>);

/// `run --record FILE`: records the session's packs, user turns, provider
/// requests and replies and the answers to packs' questions. Returns the
/// provider and approver to run the session with.
pub(crate) fn record_hook(
    args: &RunArgs,
    bus: &EventBus,
    provider: Arc<dyn Provider>,
    approver: Arc<dyn Approver>,
) -> Result<Operators, Failure> {
    let Some(path) = &args.record else {
        return Ok((provider, approver));
    };
    let packs = args
        .load
        .pack
        .packs
        .iter()
        .map(|spec| {
            let (name, config) = parse_pack_spec(spec)?;
            let config = serde_json::from_str(&config).unwrap_or(serde_json::Value::Null);
            Ok(RecordedPack { name, config })
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let info = SessionInfo {
        format: RECORDING_FORMAT,
        chimera: env!("CARGO_PKG_VERSION").to_owned(),
        model: provider.model().to_owned(),
        packs,
        system: args.session.system.clone(),
        stream: args.provider.stream,
        max_steps: args.session.max_steps,
        headers: provider.request_headers().unwrap_or_default(),
    };
    let recorder = Recorder::create(path, &info).map_err(|reason| {
        Failure::usage(format!(
            "--record {}: {reason}",
            terminal_safe(&path.display().to_string())
        ))
    })?;
    recorder.follow(bus);
    Ok((recorder.provider(provider), recorder.approver(approver)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_name_is_a_plain_file_name() {
        for name in ["", "../up", ".hidden", "-flag", "a/b", "a b"] {
            assert_eq!(check_case_name(name).unwrap_err().status, 2, "{name}");
        }
        for name in ["tidy-up", "case_2"] {
            check_case_name(name).unwrap();
        }
    }
}
