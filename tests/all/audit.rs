//! `chimera run --audit FILE` and `chimera audit verify FILE`, through the
//! built binary with the real packs: what a line records, that a secret a
//! redactor removed is nowhere in the log, per-turn flushing, the chain
//! across runs, and each kind of tampering `verify` names.

use crate::helpers::run_with_packs;
use chimera_tests::cli::{chimera, command, lines_of, until, Ran};
use chimera_tests::{pack_path, packs_dir};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const SECRET: &str = "sk-live-0123456789abcdef";

/// A turn that reads a file holding the secret (prompted with it too) and
/// tries `bash` before planning, under plan-gate and redactor; the log
/// goes to `dir/audit.jsonl`.
fn secret_run(dir: &Path) -> (Ran, PathBuf) {
    std::fs::write(
        dir.join("notes.txt"),
        format!("the deploy token is {SECRET}, keep it safe\n"),
    )
    .unwrap();
    let audit = dir.join("audit.jsonl");
    let responses = json!([
        {"content": "reading", "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}},
            {"id": "c2", "name": "bash", "arguments": {"command": "echo hi"}}
        ]},
        {"content": "done"}
    ]);
    let prompt = format!("use my key {SECRET} and read notes.txt");
    let ran = run_with_packs(
        dir,
        &[("plan-gate", json!({})), ("redactor", json!({}))],
        &responses,
        &["--audit", audit.to_str().unwrap(), &prompt],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    (ran, audit)
}

/// Each line of the audit log at `path`, as JSON.
pub(crate) fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `chimera audit verify PATH` (and `more`), run in `dir`.
pub(crate) fn verify(dir: &Path, path: &Path, more: &[&str]) -> Ran {
    let mut args = vec!["audit", "verify", path.to_str().unwrap()];
    args.extend_from_slice(more);
    chimera(dir, &args, &[], "")
}

/// The line `audit verify` names on failure (`… line N is broken: …`).
fn broken_line(ran: &Ran) -> (u64, String) {
    assert_eq!(ran.status(), 1, "{}", ran.stderr());
    let line = ran.error_line();
    let number = line
        .split("line ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no line number in: {line}"));
    (number, line)
}

/// What `chimera packs check --json` says a pack file's SHA-256 is.
fn checked_sha256(dir: &Path, package: &str) -> String {
    let file = pack_path(package);
    let ran = chimera(
        dir,
        &["packs", "check", file.to_str().unwrap(), "--json"],
        &[],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    ran.events()[0]["sha256"].as_str().unwrap().to_owned()
}

#[test]
fn each_decision_is_one_line_with_its_pack_hash_and_the_log_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (ran, audit) = secret_run(dir.path());
    let log = lines(&audit);
    let decisions: Vec<(String, String, String)> = log
        .iter()
        .map(|l| {
            (
                l["seam"].as_str().unwrap().to_owned(),
                l["interceptor"].as_str().unwrap().to_owned(),
                l["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let has = |seam: &str, interceptor: &str, decision: &str| {
        decisions
            .iter()
            .any(|(s, i, d)| s == seam && i.starts_with(interceptor) && d == decision)
    };
    assert!(has("context", "plan-gate/", "allowed"), "{decisions:?}");
    assert!(has("tool_call", "plan-gate/", "allowed"), "{decisions:?}");
    assert!(has("tool_call", "plan-gate/", "blocked"), "{decisions:?}");
    assert!(
        has("provider_request", "redactor/", "replaced"),
        "{decisions:?}"
    );
    assert!(has("tool_result", "redactor/", "replaced"), "{decisions:?}");
    // The transcript's interceptor events are in the log too, one for one.
    let shown = ran.of_type("interceptor").len();
    let logged = log
        .iter()
        .filter(|l| ["blocked", "replaced", "error"].contains(&l["decision"].as_str().unwrap()))
        .count();
    assert_eq!(shown, logged);

    let redactor = checked_sha256(dir.path(), "redactor");
    let session = log[0]["session"].as_str().unwrap();
    assert_eq!(session.len(), 32);
    assert!(session.bytes().all(|b| b.is_ascii_hexdigit()));
    for (at, line) in log.iter().enumerate() {
        assert_eq!(line["seq"], at as u64 + 1);
        assert_eq!(line["session"], session);
        assert_eq!(line["turn"], 0);
        let time = line["time"].as_str().unwrap();
        assert!(
            time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T",
            "{time}"
        );
        let interceptor = line["interceptor"].as_str().unwrap();
        let pack = interceptor.split('/').next().unwrap();
        assert_eq!(line["pack"], pack, "{line}");
        if pack == "redactor" {
            assert_eq!(line["sha256"], redactor.as_str());
        }
        if line["seam"] == "tool_call" || line["seam"] == "tool_result" {
            assert!(["c1", "c2"].contains(&line["call_id"].as_str().unwrap()));
        } else {
            assert!(line["call_id"].is_null());
        }
    }
    let result = log
        .iter()
        .find(|l| l["seam"] == "tool_result" && l["decision"] == "replaced")
        .unwrap();
    assert_eq!(result["call_id"], "c1");
    let change = &result["change"][0];
    assert_eq!(change["at"], "output");
    assert_eq!(change["del"], SECRET.len());
    assert_eq!(change["ins"], "[redacted]");
    let pos = usize::try_from(change["pos"].as_u64().unwrap()).unwrap();
    assert_eq!(pos, "the deploy token is ".len());

    let verified = verify(dir.path(), &audit, &[]);
    assert_eq!(verified.status(), 0, "{}", verified.stderr());
    let head = log.last().unwrap()["hash"].as_str().unwrap();
    assert_eq!(
        verified.stdout().trim_end(),
        format!(
            "{}: intact, {} lines, head {head}",
            audit.display(),
            log.len()
        )
    );
}

#[test]
fn a_secret_the_redactor_removed_is_nowhere_in_the_audit_log_or_the_transcripts_events() {
    let dir = tempfile::tempdir().unwrap();
    let (ran, audit) = secret_run(dir.path());
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(text.contains("\"decision\":\"replaced\""), "{text}");
    assert!(
        !text.contains(SECRET),
        "the secret leaked into the log:\n{text}"
    );
    assert!(!text.contains("0123456789abcdef"), "{text}");
    // The transcript's interceptor events carry no before/after either.
    for event in ran.of_type("interceptor") {
        let mut keys: Vec<&str> = event
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "call_id",
                "decision",
                "interceptor",
                "reason",
                "seam",
                "tool_name",
                "type"
            ],
            "{event}"
        );
    }
    // The mode is the owner's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&audit).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn a_sub_agents_decisions_are_recorded_under_its_delegating_call() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let responses = json!([
        {"content": "", "tool_calls": [
            {"id": "c1", "name": "delegate", "arguments": {"task": format!("check {SECRET}")}}
        ]},
        {"content": "sub-agent done"},
        {"content": "done"}
    ]);
    let ran = run_with_packs(
        dir.path(),
        &[("redactor", json!({}))],
        &responses,
        &["--audit", audit.to_str().unwrap(), "delegate it"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let log = lines(&audit);
    let nested: Vec<&Value> = log.iter().filter(|l| l["depth"] == 1).collect();
    assert!(
        nested
            .iter()
            .any(|l| l["seam"] == "provider_request" && l["decision"] == "replaced"),
        "{log:?}"
    );
    assert!(nested.iter().all(|l| l["parent_call_id"] == "c1"));
    assert!(log.iter().any(|l| l.get("depth").is_none()));
    assert!(!std::fs::read_to_string(&audit).unwrap().contains(SECRET));
}

#[test]
fn a_packs_question_and_the_operators_answer_are_both_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let responses = json!([
        {"content": "", "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "hm"}}]},
        {"content": "done"}
    ]);
    let ran = run_with_packs(
        dir.path(),
        &[(
            "approval-policy",
            json!({"rules": [{"match": {"tool": "think"}, "prompt": "think about {args.thought}?"}]}),
        )],
        &responses,
        &["--audit", audit.to_str().unwrap(), "--yes", "go"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let log = lines(&audit);
    let ask = log
        .iter()
        .position(|l| l["decision"] == "ask")
        .expect("asked");
    assert_eq!(log[ask]["reason"], "think about hm?");
    assert_eq!(log[ask]["call_id"], "c1");
    let answer = &log[ask + 1];
    assert_eq!(answer["decision"], "answered");
    assert_eq!(answer["answer"], "allow");
    assert_eq!(answer["pack"], "approval-policy");
    assert_eq!(answer["call_id"], "c1");
}

#[test]
fn each_turns_lines_are_written_when_it_ends_and_a_second_run_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"content": "one"}, {"content": "two"}]}).to_string(),
    )
    .unwrap();
    let plugins = packs_dir().display().to_string();
    let args = [
        "run",
        "--json",
        "--plugins-dir",
        &plugins,
        "--pack",
        "redactor",
        "--script",
        script.to_str().unwrap(),
        "--audit",
        audit.to_str().unwrap(),
        "--turns-from-stdin",
    ];
    let mut child = command(dir.path(), &args, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let events = lines_of(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "first turn").unwrap();
    until(&events, "run_end");
    // The process now waits for its next turn on stdin: the first turn's
    // lines must reach the file without it (polled, as the write follows
    // the transcript's `run_end` on another subscriber).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let first = loop {
        let first = if audit.exists() {
            lines(&audit)
        } else {
            Vec::new()
        };
        if !first.is_empty() || std::time::Instant::now() > deadline {
            break first;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        !first.is_empty(),
        "the first turn's lines were written while the run waited"
    );
    assert!(first.iter().all(|l| l["turn"] == 0), "{first:?}");
    writeln!(stdin, "second turn").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let both = lines(&audit);
    assert!(both.iter().any(|l| l["turn"] == 1));

    let again = run_with_packs(
        dir.path(),
        &[("redactor", json!({}))],
        &json!([{"content": "three"}]),
        &["--audit", audit.to_str().unwrap(), "third run"],
        "",
    );
    assert_eq!(again.status(), 0, "{}", again.stderr());
    let all = lines(&audit);
    assert!(all.len() > both.len());
    let next = &all[both.len()];
    assert_eq!(next["seq"], both.len() as u64 + 1);
    assert_eq!(next["prev"], both.last().unwrap()["hash"]);
    assert_ne!(next["session"], both[0]["session"]);
    assert_eq!(verify(dir.path(), &audit, &[]).status(), 0);
}

/// A real run's log, its lines as text.
fn real_log(dir: &Path) -> (PathBuf, Vec<String>) {
    let (_, audit) = secret_run(dir);
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines.len() >= 4, "{text}");
    (audit, lines)
}

fn rewrite(path: &Path, lines: &[String]) {
    let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_deleted_line_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, mut lines) = real_log(dir.path());
    lines.remove(2);
    rewrite(&audit, &lines);
    let (number, line) = broken_line(&verify(dir.path(), &audit, &[]));
    assert_eq!(number, 3, "{line}");
    assert!(line.contains("deleted"), "{line}");
}

#[test]
fn an_edited_line_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, mut lines) = real_log(dir.path());
    let at = lines
        .iter()
        .position(|l| l.contains("\"decision\":\"blocked\""))
        .unwrap();
    lines[at] = lines[at].replace("\"decision\":\"blocked\"", "\"decision\":\"allowed\"");
    rewrite(&audit, &lines);
    let (number, line) = broken_line(&verify(dir.path(), &audit, &[]));
    assert_eq!(number, at as u64 + 1, "{line}");
    assert!(line.contains("edited"), "{line}");
}

#[test]
fn an_edit_that_recomputes_its_hash_breaks_the_next_lines_link() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, mut lines) = real_log(dir.path());
    // Re-seal line 2 after an edit, as a forger who knows the format would.
    let mut value: serde_json::Map<String, Value> = serde_json::from_str(&lines[1]).unwrap();
    value.remove("hash");
    value.insert("reason".to_owned(), json!("nothing to see"));
    let (resealed, _) = chimera_host::audit::seal(&serde_json::to_string(&value).unwrap());
    lines[1] = resealed;
    rewrite(&audit, &lines);
    let (number, line) = broken_line(&verify(dir.path(), &audit, &[]));
    assert_eq!(number, 3, "{line}");
    assert!(line.contains("prev"), "{line}");
}

#[test]
fn reordered_foreign_binary_oversize_and_cut_logs_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, lines) = real_log(dir.path());
    let mut swapped = lines.clone();
    swapped.swap(1, 2);
    let mut not_json = lines.clone();
    not_json.insert(1, "not json at all".to_owned());
    let mut oversize = lines.clone();
    oversize.push("x".repeat(chimera_host::audit::LINE_CAP + 1));
    let cases: [(&str, Vec<String>, u64, &str); 3] = [
        ("reordered", swapped, 2, "seq"),
        ("not JSON", not_json, 2, "not JSON"),
        ("oversize", oversize, lines.len() as u64 + 1, "longer than"),
    ];
    for (what, tampered, expected, says) in cases {
        rewrite(&audit, &tampered);
        let (number, line) = broken_line(&verify(dir.path(), &audit, &[]));
        assert_eq!(number, expected, "{what}: {line}");
        assert!(line.contains(says), "{what}: {line}");
    }
    rewrite(&audit, &lines);
    let binary = [std::fs::read(&audit).unwrap(), vec![0xff, 0xfe, b'\n']].concat();
    std::fs::write(&audit, binary).unwrap();
    let (number, line) = broken_line(&verify(dir.path(), &audit, &[]));
    assert_eq!(number, lines.len() as u64 + 1);
    assert!(line.contains("UTF-8"), "{line}");

    // Cutting lines off the end leaves a valid chain: only the head kept
    // from before tells.
    rewrite(&audit, &lines);
    let head = serde_json::from_str::<Value>(lines.last().unwrap()).unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        verify(dir.path(), &audit, &["--expect-head", &head]).status(),
        0
    );
    rewrite(&audit, &lines[..lines.len() - 1]);
    assert_eq!(verify(dir.path(), &audit, &[]).status(), 0);
    let cut = verify(dir.path(), &audit, &["--expect-head", &head]);
    assert_eq!(cut.status(), 1);
    assert!(
        cut.error_line().contains("cut from its end"),
        "{}",
        cut.stderr()
    );
    let bad = verify(dir.path(), &audit, &["--expect-head", "abc"]);
    assert_eq!(bad.status(), 2);
    assert!(bad.error_line().contains("64 hex digits"));
}

#[test]
fn a_run_refuses_a_log_with_a_broken_tail_and_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (audit, _) = real_log(dir.path());
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&audit)
        .unwrap();
    file.write_all(b"{\"half a line").unwrap();
    drop(file);
    let before = std::fs::read(&audit).unwrap();
    let ran = run_with_packs(
        dir.path(),
        &[("redactor", json!({}))],
        &json!([{"content": "done"}]),
        &["--audit", audit.to_str().unwrap(), "go"],
        "",
    );
    assert_eq!(ran.status(), 2);
    let line = ran.error_line();
    assert!(line.contains("chimera audit verify"), "{line}");
    assert_eq!(std::fs::read(&audit).unwrap(), before, "nothing appended");
}

#[cfg(unix)]
#[test]
fn a_symlink_a_directory_or_a_fifo_as_the_log_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.jsonl");
    std::fs::write(&target, "").unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = dir.path().join("fifo");
    chimera_tests::make_fifo(&fifo);
    for (path, says) in [
        (&link, "symlink"),
        (&dir.path().to_owned(), "not a regular file"),
        (&fifo, "not a regular file"),
    ] {
        let ran = run_with_packs(
            dir.path(),
            &[],
            &json!([{"content": "done"}]),
            &["--audit", path.to_str().unwrap(), "go"],
            "",
        );
        assert_eq!(ran.status(), 2, "{}", ran.stderr());
        assert!(ran.error_line().contains(says), "{}", ran.stderr());
        let checked = verify(dir.path(), path, &[]);
        if path != &link {
            assert_eq!(checked.status(), 2, "{}", checked.stderr());
            assert!(checked.error_line().contains("not a regular file"));
        }
    }
}
