//! `chimera audit verify FILE [--expect-head HASH]`: checks the hash chain
//! of a log `run --audit FILE` wrote. Exit 0 when it is intact (one line:
//! how many lines, and the head to keep for `--expect-head`); 1 with one
//! line naming the first bad line and why; 2 when FILE cannot be read as
//! a log at all.
//!
//! `chimera audit summarise FILE [--json]` verifies the same way (the same
//! exits on a broken or unreadable log), then says per interceptor how
//! many decisions of each kind it made, and how many it would have made
//! in monitor mode.

use super::failure::Failure;
use chimera_host::audit::{summarise_file, verify_file, Summary, VerifyError};
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// `--expect-head`, when given, must look like a head.
fn check_head(expect_head: Option<&str>) -> Result<(), Failure> {
    match expect_head {
        Some(head) if head.len() != 64 || !head.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(Failure::usage(format!(
                "--expect-head '{head}': a head is 64 hex digits, as `chimera audit verify` prints it"
            )))
        }
        _ => Ok(()),
    }
}

/// A log that does not verify: exit 2 when it cannot be read as a log at
/// all, else 1.
fn not_verified(file: &Path, error: VerifyError) -> Failure {
    let shown = file.display();
    match error {
        VerifyError::File(reason) => Failure::usage(format!("{shown}: {reason}")),
        broken => Failure::run_failed(format!("{shown}: {broken}")),
    }
}

/// `intact, N lines, head H` (or `intact, empty`).
fn intact(lines: u64, head: Option<&str>) -> String {
    match head {
        Some(head) => format!("intact, {lines} lines, head {head}"),
        None => "intact, empty".to_owned(),
    }
}

pub(crate) fn verify(file: &Path, expect_head: Option<&str>) -> Result<(), Failure> {
    check_head(expect_head)?;
    let verified = verify_file(file, expect_head).map_err(|e| not_verified(file, e))?;
    println!(
        "{}: {}",
        file.display(),
        intact(verified.lines, verified.head.as_deref())
    );
    Ok(())
}

pub(crate) fn summarise(file: &Path, expect_head: Option<&str>, json: bool) -> Result<(), Failure> {
    check_head(expect_head)?;
    let summary = summarise_file(file, expect_head).map_err(|e| not_verified(file, e))?;
    if json {
        println!("{}", as_json(file, &summary));
    } else {
        print!("{}", as_text(file, &summary));
    }
    Ok(())
}

/// `blocked 2, replaced 1` (in decision order).
fn counts(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(decision, count)| format!("{decision} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The readable summary: the verify line, then per interceptor what it
/// made and what it would have made, then the monitored total.
fn as_text(file: &Path, summary: &Summary) -> String {
    let verified = &summary.verified;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {}",
        file.display(),
        intact(verified.lines, verified.head.as_deref())
    );
    for tally in &summary.interceptors {
        let pack = tally
            .pack
            .as_ref()
            .map_or_else(|| " (host)".to_owned(), |pack| format!(" (pack {pack})"));
        let _ = writeln!(out, "{}{pack}", tally.interceptor);
        if !tally.made.is_empty() {
            let _ = writeln!(out, "  made:       {}", counts(&tally.made));
        }
        if !tally.would_have.is_empty() {
            let _ = writeln!(
                out,
                "  would have: {}  (monitor mode: recorded, not enforced)",
                counts(&tally.would_have)
            );
        }
    }
    if summary.other_lines > 0 {
        let _ = writeln!(
            out,
            "{} lines name no interceptor or decision (not summarised)",
            summary.other_lines
        );
    }
    let would_have = summary.would_have();
    if would_have.is_empty() {
        out.push_str("monitor mode: no decisions recorded\n");
    } else {
        let _ = writeln!(
            out,
            "monitor mode, in all, would have: {}",
            counts(&would_have)
        );
    }
    out
}

/// The summary as one JSON object.
fn as_json(file: &Path, summary: &Summary) -> serde_json::Value {
    json!({
        "file": file.display().to_string(),
        "lines": summary.verified.lines,
        "head": summary.verified.head,
        "interceptors": summary.interceptors,
        "other_lines": summary.other_lines,
        "would_have": summary.would_have(),
    })
}
