//! Hostile isolated packs through the binary: `chimera run --isolate
//! fixture` with the fixture pack's `tool_call` interceptor crashing,
//! hanging, eating memory or trying to leave its sandbox. The host lives
//! through each: the call is refused (the `tool_call` seam fails closed),
//! one stderr line says what happened, and the session goes on. The crash
//! costs that one call: the next one waits for the restarted pack host and
//! is judged by it; only a pack that keeps crashing backs off and is
//! quarantined.

use super::helpers::run_with_packs;
use chimera_tests::cli::Ran;
use serde_json::{json, Value};
use std::io::BufRead as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One `write_file` step, then a plain answer.
fn write_then_done() -> Value {
    json!([
        {"tool_calls": [{"id": "w1", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"content": "done"}
    ])
}

/// `chimera run --isolate fixture` with the fixture doing `behaviour` on
/// every `write_file` call, over [`write_then_done`], with `more` flags.
fn run_isolated(dir: &Path, behaviour: Value, more: &[&str]) -> Ran {
    let workspace = dir.display().to_string();
    let mut args = vec!["--isolate", "fixture", "--workspace", workspace.as_str()];
    args.extend_from_slice(more);
    args.push("write it");
    run_with_packs(
        dir,
        &[("fixture", json!({ "tool_call": behaviour }))],
        &write_then_done(),
        &args,
        "",
    )
}

/// The `write_file` call was refused and the model's next step ran: the
/// host lived through whatever the pack did.
fn assert_refused_and_run_went_on(dir: &Path, ran: &Ran) {
    assert_eq!(ran.code(), Some(0), "the host lived: {}", ran.stderr());
    assert!(
        !dir.join("out.txt").exists(),
        "the refused write ran anyway"
    );
    let results = ran.of_type("tool_result");
    let result = results
        .iter()
        .find(|r| r["call_id"] == "w1")
        .unwrap_or_else(|| panic!("no result for the call: {}", ran.stdout()));
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Blocked")),
        "refused, fail-closed: {result}"
    );
    let end = ran.of_type("run_end");
    assert_eq!(end.len(), 1, "{}", ran.stdout());
    assert_eq!(end[0]["success"], true, "{}", ran.stdout());
    assert_eq!(end[0]["output"], "done", "the next step ran");
}

/// Exactly one stderr line tells of `what`, and it names the pack.
fn assert_one_line_about(ran: &Ran, what: &str) -> String {
    let stderr = ran.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(what)).collect();
    assert_eq!(lines.len(), 1, "one line about {what:?}, got:\n{stderr}");
    assert!(
        lines[0].contains("fixture"),
        "the line names the pack: {}",
        lines[0]
    );
    lines[0].to_owned()
}

#[test]
fn an_isolated_pack_that_segfaults_costs_one_refused_call_and_one_line_naming_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_isolated(dir.path(), json!({"action": "segfault"}), &[]);
    assert_refused_and_run_went_on(dir.path(), &ran);
    assert_one_line_about(&ran, "SIGSEGV");
}

#[test]
fn an_isolated_pack_that_aborts_costs_one_refused_call_and_one_line_naming_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_isolated(dir.path(), json!({"action": "abort"}), &[]);
    assert_refused_and_run_went_on(dir.path(), &ran);
    assert_one_line_about(&ran, "SIGABRT");
}

#[test]
fn an_isolated_pack_that_exits_costs_one_refused_call_and_one_line_naming_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_isolated(dir.path(), json!({"action": "exit"}), &[]);
    assert_refused_and_run_went_on(dir.path(), &ran);
    let line = assert_one_line_about(&ran, "status 3");
    assert!(line.contains("exit"), "{line}");
}

#[test]
fn an_isolated_pack_that_eats_memory_hits_its_limit_and_costs_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // A budget long enough for the memory limit, not the deadline, to end
    // the call: filling 1 GiB page by page takes seconds in a small VM.
    let ran = run_isolated(
        dir.path(),
        json!({"action": "allocate"}),
        &["--call-budget-ms", "60000"],
    );
    assert_refused_and_run_went_on(dir.path(), &ran);
    assert_one_line_about(&ran, "memory");
}

#[test]
fn an_isolated_pack_that_hangs_is_cut_off_at_the_call_budget_and_the_next_turn_runs() {
    const BUDGET_MS: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"id": "w1", "name": "write_file",
                             "arguments": {"path": "out.txt", "content": "x"}}]},
            {"content": "done"},
            {"content": "second turn"}
        ]})
        .to_string(),
    )
    .unwrap();
    let plugins = chimera_tests::test_packs_dir().display().to_string();
    let pack = format!("fixture={}", json!({"tool_call": {"action": "hang"}}));
    let budget = BUDGET_MS.to_string();
    let mut child = chimera_tests::cli::command(
        dir.path(),
        &[
            "run",
            "--json",
            "--plugins-dir",
            &plugins,
            "--script",
            &script.display().to_string(),
            "--pack",
            &pack,
            "--isolate",
            "fixture",
            "--call-budget-ms",
            &budget,
            "--workspace",
            &dir.path().display().to_string(),
            "--turns-from-stdin",
            "write it",
        ],
        &[],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn chimera");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"and again\n").unwrap();
    }
    // Each stdout event with the moment it arrived.
    let stdout = child.stdout.take().unwrap();
    let mut events: Vec<(Instant, Value)> = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let event = serde_json::from_str(&line).unwrap_or(Value::String(line));
        events.push((Instant::now(), event));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let all: Vec<&Value> = events.iter().map(|(_, e)| e).collect();
    assert_eq!(output.status.code(), Some(0), "{stderr}\n{all:?}");
    let at = |pred: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .find(|(_, e)| pred(e))
            .map_or_else(|| panic!("event missing in {all:?}"), |(t, _)| *t)
    };
    let asked = at(&|e| e["type"] == "assistant" && e["tool_calls"][0]["id"] == "w1");
    let answered = at(&|e| e["type"] == "tool_result" && e["call_id"] == "w1");
    let step = answered - asked;
    assert!(
        step <= Duration::from_millis(BUDGET_MS + 100),
        "the tool step took {step:?} (budget {BUDGET_MS} ms)"
    );
    let result = events
        .iter()
        .find(|(_, e)| e["type"] == "tool_result")
        .map(|(_, e)| e)
        .unwrap();
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "the refused write ran anyway"
    );
    let ends: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|e| e["type"] == "run_end")
        .collect();
    assert_eq!(ends.len(), 2, "both turns ran: {all:?}");
    assert_eq!(ends[0]["output"], "done");
    assert_eq!(ends[1]["output"], "second turn");
    // One line: the kill, not also an over-budget warning for the same call.
    let about: Vec<&str> = stderr.lines().filter(|l| l.contains("fixture")).collect();
    assert_eq!(about.len(), 1, "one line about the hang:\n{stderr}");
    assert!(about[0].contains("killed"), "{}", about[0]);
}

/// `chimera run --isolate fixture` over a `think` call, then a
/// `write_file` call, then a plain answer, with the fixture doing
/// `action` on `think` only and a call budget of `budget_ms` (the wait for
/// the restarted pack host is at most that long: generous, so a slow start
/// on a loaded machine is still in time).
fn crash_on_think_then_write(dir: &Path, action: &str, budget_ms: u64) -> Ran {
    let workspace = dir.display().to_string();
    let budget = budget_ms.to_string();
    run_with_packs(
        dir,
        &[(
            "fixture",
            json!({"tool_call": {"action": action, "tools": ["think"]}}),
        )],
        &json!([
            {"tool_calls": [{"id": "t1", "name": "think", "arguments": {"thought": "plan"}}]},
            {"tool_calls": [{"id": "w1", "name": "write_file",
                             "arguments": {"path": "out.txt", "content": "x"}}]},
            {"content": "done"}
        ]),
        &[
            "--isolate",
            "fixture",
            "--call-budget-ms",
            &budget,
            "--workspace",
            &workspace,
            "write it",
        ],
        "",
    )
}

/// The `think` call was refused with one line about `what`, and the
/// `write_file` call after it was judged by the restarted pack host: it
/// was not refused (the seam fails closed, so a pack host still down
/// would have blocked it) and the file is written.
fn assert_only_the_crashing_call_was_refused(dir: &Path, ran: &Ran, what: &str) {
    assert_eq!(ran.code(), Some(0), "the host lived: {}", ran.stderr());
    let results = ran.of_type("tool_result");
    let result = |id: &str| {
        results
            .iter()
            .find(|r| r["call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {}", ran.stdout()))
            .clone()
    };
    let think = result("t1");
    assert_eq!(
        think["is_error"], true,
        "the crashing call is refused: {think}"
    );
    let write = result("w1");
    assert_eq!(
        write["is_error"], false,
        "the next call is judged by the restarted pack host: {write}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).ok().as_deref(),
        Some("x"),
        "the next call wrote the file"
    );
    let decisions = ran.of_type("interceptor");
    assert!(
        decisions.iter().all(|d| d["call_id"] != "w1"),
        "no interceptor error for the next call: {decisions:?}"
    );
    let line = assert_one_line_about(ran, what);
    assert!(
        line.ends_with("; restarting"),
        "the first restart after a healthy spell is immediate: {line}"
    );
    assert!(
        !ran.stderr().contains("is restarting"),
        "no call was refused for a pack host still down: {}",
        ran.stderr()
    );
    let end = ran.of_type("run_end");
    assert_eq!(end.len(), 1, "{}", ran.stdout());
    assert_eq!(end[0]["output"], "done", "the run went on");
}

#[test]
fn after_an_isolated_pack_segfaults_on_think_the_next_call_is_judged_by_its_restarted_host_and_writes_the_file(
) {
    let dir = tempfile::tempdir().unwrap();
    let ran = crash_on_think_then_write(dir.path(), "segfault", 1000);
    assert_only_the_crashing_call_was_refused(dir.path(), &ran, "SIGSEGV");
}

#[test]
fn after_an_isolated_pack_aborts_on_think_the_next_call_is_judged_by_its_restarted_host_and_writes_the_file(
) {
    let dir = tempfile::tempdir().unwrap();
    let ran = crash_on_think_then_write(dir.path(), "abort", 1000);
    assert_only_the_crashing_call_was_refused(dir.path(), &ran, "SIGABRT");
}

#[test]
fn after_an_isolated_pack_runs_out_of_memory_on_think_the_next_call_is_judged_by_its_restarted_host_and_writes_the_file(
) {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for the memory limit, not the deadline, to end the call.
    let ran = crash_on_think_then_write(dir.path(), "allocate", 60_000);
    assert_only_the_crashing_call_was_refused(dir.path(), &ran, "memory");
}

#[test]
fn after_an_isolated_pack_hangs_on_think_and_is_killed_the_next_call_is_judged_by_its_restarted_host_and_writes_the_file(
) {
    let dir = tempfile::tempdir().unwrap();
    // The hang costs the whole budget (the pack spins until it is killed);
    // the budget is also the wait for the restarted pack host, which must
    // cover a start on a loaded machine.
    let ran = crash_on_think_then_write(dir.path(), "hang", 5_000);
    assert_only_the_crashing_call_was_refused(dir.path(), &ran, "killed");
}

#[test]
fn an_isolated_pack_that_crashes_on_every_call_backs_off_after_the_first_restart_and_is_quarantined(
) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().display().to_string();
    let write = |id: &str| {
        json!({"tool_calls": [{"id": id, "name": "write_file",
                               "arguments": {"path": "out.txt", "content": "x"}}]})
    };
    let ran = run_with_packs(
        dir.path(),
        &[("fixture", json!({"tool_call": {"action": "segfault"}}))],
        &json!([write("w1"), write("w2"), write("w3"), {"content": "done"}]),
        &[
            "--isolate",
            "fixture",
            "--call-budget-ms",
            "60000",
            "--quarantine-after",
            "2",
            "--workspace",
            &workspace,
            "write it",
        ],
        "",
    );
    assert_eq!(ran.code(), Some(0), "the host lived: {}", ran.stderr());
    assert!(!dir.path().join("out.txt").exists(), "a refused write ran");
    let results = ran.of_type("tool_result");
    assert_eq!(results.len(), 3, "{}", ran.stdout());
    assert!(
        results.iter().all(|r| r["is_error"] == true),
        "every call is refused: {results:?}"
    );
    let crashes: Vec<String> = ran
        .stderr()
        .lines()
        .filter(|l| l.contains("SIGSEGV"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        crashes.len(),
        2,
        "the second call waited for the restarted pack host and crashed it too, \
         the third met the quarantine: {}",
        ran.stderr()
    );
    assert!(crashes[0].ends_with("; restarting"), "{}", crashes[0]);
    assert!(
        crashes[1].ends_with("; restarting in 50 ms"),
        "a crash right after a restart backs off: {}",
        crashes[1]
    );
    let last = results[2]["content"].as_str().unwrap_or_default();
    assert!(last.contains("quarantined"), "{last}");
    assert_eq!(ran.of_type("pack_quarantined").len(), 1, "{}", ran.stdout());
}

/// The outcome of one `escape` run: the block reason, whether the canary
/// was written, how many connections the listener took.
fn escape(dir: &Path, isolated: bool) -> (String, bool, usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let canary = dir.join(if isolated {
        "isolated-canary"
    } else {
        "in-process-canary"
    });
    let behaviour = json!({
        "action": "escape",
        "with": canary.display().to_string(),
        "find": listener.local_addr().unwrap().to_string(),
        "tools": ["write_file"],
    });
    let workspace = dir.display().to_string();
    let mut args = vec!["--workspace", workspace.as_str(), "write it"];
    if isolated {
        args.splice(0..0, ["--isolate", "fixture"]);
    }
    let ran = run_with_packs(
        dir,
        &[("fixture", json!({ "tool_call": behaviour }))],
        &write_then_done(),
        &args,
        "",
    );
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr());
    let reason = ran
        .of_type("interceptor")
        .iter()
        .find(|e| e["seam"] == "tool_call")
        .and_then(|e| e["reason"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no tool_call decision: {}", ran.stdout()));
    let mut accepted = 0;
    while listener.accept().is_ok() {
        accepted += 1;
    }
    (reason, canary.exists(), accepted)
}

#[test]
fn an_isolated_pack_can_neither_write_a_file_nor_reach_a_listener_that_it_reaches_in_process() {
    let dir = tempfile::tempdir().unwrap();
    // In process, the same pack and config can: the test can fail.
    let (reason, wrote, accepted) = escape(dir.path(), false);
    assert_eq!(reason, "write: ok; connect: ok");
    assert!(wrote, "in process the canary is written");
    assert_eq!(accepted, 1, "in process the listener is reached");

    let (reason, wrote, accepted) = escape(dir.path(), true);
    assert!(
        reason.contains("write: denied") && reason.contains("connect: denied"),
        "{reason}"
    );
    assert!(!wrote, "the isolated pack wrote the canary: {reason}");
    assert_eq!(accepted, 0, "the isolated pack reached the listener");
}
