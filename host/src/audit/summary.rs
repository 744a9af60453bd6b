//! Summarising a log (`chimera audit summarise`): per interceptor, how many
//! decisions of each kind it made, and how many it *would* have made —
//! the lines it wrote in monitor mode (`"monitor": true`), recorded and
//! not enacted. Read in the very pass that verifies the chain: a log that
//! does not verify is not summarised.

use super::verify::{verify_each, Verified, VerifyError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What one interceptor decided over a log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Tally {
    /// The interceptor (`<pack>/<name>`, or a host interceptor's name such
    /// as `permission-policy`).
    pub interceptor: String,
    /// Its pack, when it came from one.
    pub pack: Option<String>,
    /// The decisions it made (enacted), by decision: `allowed`, `blocked`,
    /// `replaced`, `error`, `ask`, `answered`, `retry`, `pause`, `hold`,
    /// `hold_end`.
    pub made: BTreeMap<String, u64>,
    /// The decisions it made in monitor mode, by decision: what it would
    /// have done, had it been enforced.
    pub would_have: BTreeMap<String, u64>,
}

/// A verified log, summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The log's line count and head, as `audit verify` reports them.
    pub verified: Verified,
    /// One tally per interceptor, by name.
    pub interceptors: Vec<Tally>,
    /// Lines that verify but name no interceptor or decision (not written
    /// by chimera): counted, not summarised.
    pub other_lines: u64,
}

impl Summary {
    /// Over every interceptor: what monitor mode recorded and did not
    /// enact, by decision.
    #[must_use]
    pub fn would_have(&self) -> BTreeMap<String, u64> {
        let mut total = BTreeMap::new();
        for tally in &self.interceptors {
            for (decision, count) in &tally.would_have {
                *total.entry(decision.clone()).or_default() += count;
            }
        }
        total
    }
}

/// The part of a line a summary reads.
#[derive(Deserialize)]
struct Line {
    interceptor: Option<String>,
    pack: Option<String>,
    decision: Option<String>,
    #[serde(default)]
    monitor: bool,
}

/// Verifies the log at `path` (with `expect_head`, as
/// [`verify_file`](super::verify_file) does) and summarises it.
///
/// # Errors
///
/// What [`verify_file`](super::verify_file) fails with: the log is
/// unreadable, too large, broken at a line, or lacks the expected head.
pub fn summarise_file(path: &Path, expect_head: Option<&str>) -> Result<Summary, VerifyError> {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut other_lines = 0;
    let verified = verify_each(path, expect_head, |bytes| {
        let Ok(Line {
            interceptor: Some(interceptor),
            pack,
            decision: Some(decision),
            monitor,
        }) = serde_json::from_slice::<Line>(bytes)
        else {
            other_lines += 1;
            return;
        };
        let tally = tallies
            .entry(interceptor)
            .or_insert_with_key(|interceptor| Tally {
                interceptor: interceptor.clone(),
                pack,
                ..Tally::default()
            });
        let counts = if monitor {
            &mut tally.would_have
        } else {
            &mut tally.made
        };
        *counts.entry(decision).or_default() += 1;
    })?;
    Ok(Summary {
        verified,
        interceptors: tallies.into_values().collect(),
        other_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::super::line::{seal, GENESIS};
    use super::*;
    use serde_json::json;

    /// A sealed log of `bodies` (each without seq, prev and hash).
    fn log(bodies: &[serde_json::Value]) -> String {
        let mut prev = GENESIS.to_owned();
        let mut text = String::new();
        for (seq, body) in (1u64..).zip(bodies) {
            let mut body = body.clone();
            let object = body.as_object_mut().unwrap();
            object.insert("seq".into(), json!(seq));
            object.insert("prev".into(), json!(prev));
            let (line, hash) = seal(&body.to_string());
            text.push_str(&line);
            text.push('\n');
            prev = hash;
        }
        text
    }

    #[test]
    fn decisions_are_tallied_per_interceptor_made_apart_from_would_have() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let line = |interceptor: &str, pack: Option<&str>, decision: &str, monitor: bool| {
            let mut body = json!({"pack": pack, "interceptor": interceptor, "decision": decision});
            if monitor {
                body["monitor"] = json!(true);
            }
            body
        };
        std::fs::write(
            &path,
            log(&[
                line("redactor/scrub", Some("redactor"), "replaced", false),
                line("redactor/scrub", Some("redactor"), "allowed", false),
                line("gate/judge", Some("gate"), "blocked", true),
                line("gate/judge", Some("gate"), "blocked", true),
                line("gate/judge", Some("gate"), "allowed", true),
                line("permission-policy", None, "ask", false),
                json!({"note": "not chimera's"}),
            ]),
        )
        .unwrap();
        let summary = summarise_file(&path, None).unwrap();
        assert_eq!(summary.verified.lines, 7);
        assert_eq!(summary.other_lines, 1);
        let names: Vec<&str> = summary
            .interceptors
            .iter()
            .map(|t| t.interceptor.as_str())
            .collect();
        assert_eq!(names, ["gate/judge", "permission-policy", "redactor/scrub"]);
        let gate = &summary.interceptors[0];
        assert_eq!(gate.pack.as_deref(), Some("gate"));
        assert!(gate.made.is_empty());
        assert_eq!(gate.would_have["blocked"], 2);
        assert_eq!(gate.would_have["allowed"], 1);
        let redactor = &summary.interceptors[2];
        assert_eq!(redactor.made["replaced"], 1);
        assert!(redactor.would_have.is_empty());
        assert_eq!(summary.would_have()["blocked"], 2);
    }

    #[test]
    fn a_broken_log_is_not_summarised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let text = log(&[json!({"interceptor": "a/b", "decision": "blocked", "monitor": true})]);
        std::fs::write(&path, text.replace("blocked", "allowed")).unwrap();
        assert!(matches!(
            summarise_file(&path, None),
            Err(VerifyError::Broken { line: 1, .. })
        ));
    }
}
