//! Isolated packs (`chimera run --isolate NAME`): the same pack file run in
//! a child process gives the same transcript as in-process, a call past
//! the budget is refused within it, and hot reloads start new children
//! without growing the host.

use super::helpers::run_with_packs;
use chimera_host::interception::{
    run_chain, ChainContext, HealthPolicy, SessionFacts, ToolCallSeam,
};
use chimera_host::isolate::Isolation;
use chimera_host::plugins::{PluginManager, Registry, ReloadOutcome};
use chimera_host::types::ToolCall;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The transcript's events without what differs between two runs anyway
/// (timings, paths of temporary directories).
fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|mut event| {
            if let Some(object) = event.as_object_mut() {
                object.retain(|key, _| {
                    !(key.ends_with("_ms") || key == "elapsed" || key == "duration")
                });
            }
            event
        })
        .collect()
}

/// Runs one scenario in-process and isolated; both transcripts, compared.
fn same_both_ways(name: &str, config: &Value, responses: &Value, extra: &[&str]) {
    let inproc_dir = tempfile::tempdir().unwrap();
    let isolated_dir = tempfile::tempdir().unwrap();
    let run = |dir: &Path, isolate: bool| {
        let workspace = dir.display().to_string();
        let mut args = vec!["--workspace", workspace.as_str()];
        if isolate {
            args.extend(["--isolate", "fixture"]);
        }
        args.extend_from_slice(extra);
        args.push("go");
        run_with_packs(dir, &[("fixture", config.clone())], responses, &args, "")
    };
    let inproc = run(inproc_dir.path(), false);
    let isolated = run(isolated_dir.path(), true);
    assert_eq!(
        inproc.code(),
        isolated.code(),
        "{name}: exit status\nin-process: {}\nisolated: {}",
        inproc.stderr(),
        isolated.stderr()
    );
    let (a, b) = (events(&inproc.stdout()), events(&isolated.stdout()));
    assert!(!a.is_empty(), "{name}: no events: {}", inproc.stderr());
    assert_eq!(
        a,
        b,
        "{name}: transcripts differ\nin-process stderr: {}\nisolated stderr: {}",
        inproc.stderr(),
        isolated.stderr()
    );
}

/// A write, a read of it, then a final answer.
fn write_read_done() -> Value {
    json!([
        {"tool_calls": [{"id": "w1", "name": "write_file",
                         "arguments": {"path": "a.txt", "content": "hello world"}}]},
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"content": "all done: hello"}
    ])
}

#[test]
fn every_seam_and_decision_gives_the_same_transcript_isolated_as_in_process() {
    let scenarios: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "allow everywhere",
            json!({
                "context": {}, "provider_request": {}, "tool_call": {"count": 3},
                "tool_result": {}, "model_response": {}, "output": {}
            }),
            vec![],
        ),
        (
            "tool_call block with notice",
            json!({
                "tool_call": {"action": "block", "reason": "no writes", "notice": "blocked a write",
                              "tools": ["write_file"]}
            }),
            vec![],
        ),
        (
            "tool_call replace chains into the next",
            json!({
                "tool_call": {"action": "replace", "find": "hello", "with": "bye", "count": 2}
            }),
            vec![],
        ),
        (
            "tool_call error fails closed",
            json!({
                "tool_call": {"action": "error", "reason": "broken"}
            }),
            vec![],
        ),
        (
            "tool_call panic fails closed",
            json!({
                "tool_call": {"action": "panic", "reason": "boom"}
            }),
            vec![],
        ),
        (
            "tool_call invalid replacement",
            json!({
                "tool_call": {"action": "invalid"}
            }),
            vec![],
        ),
        (
            "tool_result replace",
            json!({
                "tool_result": {"action": "replace", "find": "hello", "with": "[REDACTED]"}
            }),
            vec![],
        ),
        (
            "tool_result block",
            json!({
                "tool_result": {"action": "block", "reason": "no results"}
            }),
            vec![],
        ),
        (
            "tool_result error skips",
            json!({
                "tool_result": {"action": "error", "reason": "flaky"}
            }),
            vec![],
        ),
        (
            "context replace",
            json!({
                "context": {"action": "replace", "with": " (edited)"}
            }),
            vec![],
        ),
        (
            "context error skips",
            json!({
                "context": {"action": "error", "reason": "nope"}
            }),
            vec![],
        ),
        (
            "provider_request headers",
            json!({
                "provider_request": {"action": "replace", "set_headers": {"x-pack": "1"}}
            }),
            vec![],
        ),
        (
            "provider_request block",
            json!({
                "provider_request": {"action": "block", "reason": "no more calls"}
            }),
            vec![],
        ),
        (
            "model_response replace",
            json!({
                "model_response": {"action": "replace", "find": "hello", "with": "HELLO"}
            }),
            vec![],
        ),
        (
            "model_response block with notice",
            json!({
                "model_response": {"action": "block", "reason": "bad reply", "notice": "replaced"}
            }),
            vec![],
        ),
        (
            "output replace",
            json!({
                "output": {"action": "replace", "find": "hello", "with": "[x]"}
            }),
            vec![],
        ),
        (
            "output block",
            json!({
                "output": {"action": "block", "reason": "not shown"}
            }),
            vec![],
        ),
        (
            "mixed: replace, then allow, then block on the same seam",
            json!({
                "tool_call": {"action": "replace", "find": "world", "with": "there"},
                "tool_result": {"action": "block", "reason": "stop {tag}"}
            }),
            vec![],
        ),
        (
            "stream_chunk ban",
            json!({
                "stream_chunk": {"ban": "hello", "reason": "banned word"}
            }),
            vec!["--stream"],
        ),
        (
            "stream_chunk holds and releases",
            json!({
                "stream_chunk": {"ban": "forbidden"}
            }),
            vec!["--stream"],
        ),
    ];
    for (name, config, extra) in &scenarios {
        same_both_ways(name, config, &write_read_done(), extra);
    }
}

#[test]
fn isolate_names_a_loaded_pack_or_is_one_line_of_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_with_packs(
        dir.path(),
        &[("fixture", json!({}))],
        &json!([{"content": "hi"}]),
        &["--isolate", "fixtrue", "go"],
        "",
    );
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr());
    let line = ran.error_line();
    assert!(line.contains("--isolate fixtrue"), "{line}");
    assert_eq!(ran.stderr().trim().lines().count(), 1, "{}", ran.stderr());
}

/// A manager over a fresh registry isolating `fixture`, with pack hosts
/// started from the built binary.
fn isolating_manager(dirs: Vec<std::path::PathBuf>, budget_ms: u64) -> PluginManager {
    let manager = PluginManager::new(Arc::new(Registry::new()), dirs);
    manager.set_health(
        HealthPolicy {
            call_budget: Some(Duration::from_millis(budget_ms)),
            ..HealthPolicy::default()
        },
        None,
    );
    manager.set_isolation(Some(Isolation {
        packs: vec!["fixture".to_owned()],
        all: false,
        program: chimera_tests::chimera_bin(),
        start_timeout: Duration::from_secs(20),
        processes: 1,
    }));
    manager
}

#[test]
fn an_isolated_pack_counts_in_the_hosts_state_and_one_that_floods_it_is_refused() {
    let facts = SessionFacts::new("s");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let call = ToolCall::new("c1", "bash", json!({"command": "true"}));
    let block = |ops: u32| {
        json!({"tool_call": {"action": "block", "reason": "total {total}"}, "state_ops": ops})
            .to_string()
    };
    // Three adds a call, answered by the host over the pack host's socket:
    // the counts are the host's, and go on from call to call.
    let manager = isolating_manager(chimera_tests::pack_dirs(), 5_000);
    manager.load("fixture", &block(3)).unwrap();
    let chains = manager.registry().get_all();
    let reasons: Vec<Option<String>> = (0..2)
        .map(|_| run_chain::<ToolCallSeam>(&chains.tool_call, &(), &call, &cx).blocked)
        .collect();
    assert_eq!(reasons, [Some("total 3".into()), Some("total 6".into())]);
    let operations = manager
        .state()
        .service()
        .health()
        .operations
        .load(Ordering::Relaxed);
    assert_eq!(operations, 6, "every add reached the host's store");
    // A child that asks more than a call may is refused, and restarted.
    let manager = isolating_manager(chimera_tests::pack_dirs(), 5_000);
    manager.load("fixture", &block(100)).unwrap();
    let chains = manager.registry().get_all();
    let refused = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &call, &cx)
        .blocked
        .expect("a flooding child is blocked (tool_call fails closed)");
    assert!(
        refused.contains("state operations beyond the 64 a call may ask"),
        "{refused}"
    );
}

#[test]
fn a_tool_call_past_the_budget_is_blocked_within_it_and_the_next_call_runs() {
    let manager = isolating_manager(chimera_tests::pack_dirs(), 100);
    let config = json!({"tool_call": {"sleep_ms": 10_000, "tools": ["bash"]}});
    manager.load("fixture", &config.to_string()).unwrap();
    let chains = manager.registry().get_all();
    let facts = SessionFacts::new("s");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let slow = ToolCall::new("c1", "bash", json!({"command": "true"}));
    let started = Instant::now();
    let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &slow, &cx);
    let took = started.elapsed();
    let blocked = outcome.blocked.expect("a call past its budget is blocked");
    assert!(
        took < Duration::from_millis(200),
        "refused after {took:?}, budget 100 ms"
    );
    assert!(
        blocked.contains("pack 'fixture' (isolated) did not answer within 100 ms: killed"),
        "{blocked}"
    );
    // The next call waits for the restarted child (at most the budget) and
    // is judged by it; one that comes before it is back fails fast.
    let quick = ToolCall::new("c2", "write_file", json!({"path": "a", "content": "b"}));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let started = Instant::now();
        let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &quick, &cx);
        assert!(started.elapsed() < Duration::from_millis(200));
        match outcome.blocked {
            None => break,
            Some(reason) => {
                assert!(reason.contains("is restarting"), "{reason}");
                assert!(Instant::now() < deadline, "the pack host never came back");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn an_isolated_pack_that_keeps_crashing_is_quarantined_and_refused_from_then_on() {
    let manager = isolating_manager(chimera_tests::pack_dirs(), 2_000);
    manager.set_health(
        HealthPolicy {
            max_errors: 2,
            call_budget: Some(Duration::from_secs(2)),
            ..HealthPolicy::default()
        },
        None,
    );
    let config = json!({"tool_call": {"action": "segfault"}});
    manager.load("fixture", &config.to_string()).unwrap();
    let chains = manager.registry().get_all();
    let facts = SessionFacts::new("s");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let call = ToolCall::new("c1", "bash", json!({"command": "true"}));
    let mut crashes = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    let quarantined = loop {
        assert!(Instant::now() < deadline, "never quarantined");
        let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &call, &cx);
        let reason = outcome.blocked.expect("every call is refused");
        if reason.contains("SIGSEGV") {
            crashes += 1;
        } else if reason.contains("quarantined") {
            break reason;
        } else {
            // Restarting: wait for the pack host to be back.
            assert!(reason.contains("is restarting"), "{reason}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(crashes, 2, "quarantined after two failures: {quarantined}");
    // Quarantine is final: later calls are refused without a crash.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &call, &cx);
        let reason = outcome.blocked.expect("refused");
        assert!(reason.contains("quarantined"), "{reason}");
    }
}

/// This process's resident set, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Children of this process that are zombies.
fn zombies() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str())
        })
        .count()
}

/// Set in the child process the reload test measures itself in.
const RSS_CHILD: &str = "CHIMERA_TEST_ISOLATED_RSS_CHILD";

#[test]
fn a_hundred_hot_reloads_of_an_isolated_pack_keep_the_host_from_growing() {
    if std::env::var_os(RSS_CHILD).is_none() {
        // Measured in a process of its own: the other tests of this binary
        // allocate (and keep arenas) in this one.
        let ran = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "isolation::a_hundred_hot_reloads_of_an_isolated_pack_keep_the_host_from_growing",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(RSS_CHILD, "1")
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "{}{}",
            String::from_utf8_lossy(&ran.stdout),
            String::from_utf8_lossy(&ran.stderr)
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v1 = std::fs::read(chimera_tests::pack_path("chimera-fixture-pack")).unwrap();
    let v2 = std::fs::read(chimera_tests::fixture_v2()).unwrap();
    let file = format!(
        "libchimera_fixture_pack.{}",
        std::env::consts::DLL_EXTENSION
    );
    chimera_tests::publish(dir.path(), &file, &v1);
    let manager = isolating_manager(vec![dir.path().to_owned()], 2_000);
    let config = json!({"tool_call": {"action": "block", "reason": "build {tag}"}});
    manager.load("fixture", &config.to_string()).unwrap();
    let facts = SessionFacts::new("s");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let call = ToolCall::new("c", "bash", json!({"command": "true"}));
    let reload = |round: usize| {
        let (bytes, tag) = if round % 2 == 0 {
            (&v2, "v2")
        } else {
            (&v1, "v1")
        };
        chimera_tests::publish(dir.path(), &file, bytes);
        let outcome = manager.reload("fixture").unwrap();
        assert!(matches!(outcome, ReloadOutcome::Reloaded(_)), "{outcome:?}");
        let chains = manager.registry().get_all();
        let outcome = run_chain::<ToolCallSeam>(&chains.tool_call, &(), &call, &cx);
        assert_eq!(
            outcome.blocked.as_deref(),
            Some(format!("build {tag}").as_str())
        );
    };
    for round in 0..10 {
        reload(round);
    }
    let before = rss();
    for round in 10..110 {
        reload(round);
    }
    let grown = rss().saturating_sub(before);
    println!("host RSS grew by {grown} bytes over 100 isolated reloads");
    assert!(
        grown < v1.len() as u64,
        "the host grew by {grown} bytes over 100 reloads (the pack file is {} bytes)",
        v1.len()
    );
    // The old children are gone, reaped.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(zombies(), 0);
}

#[test]
fn isolate_true_on_a_pack_entry_isolates_it_and_config_show_says_so() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("team.toml");
    std::fs::write(
        &file,
        "[[packs]]\nname = \"fixture\"\nisolate = true\n[packs.config.tool_call]\naction = \"exit\"\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let config_home = home.path().display().to_string();
    let env = [("XDG_CONFIG_HOME", config_home.as_str())];
    let show = chimera_tests::cli::chimera(
        dir.path(),
        &["--config", &file, "config", "show", "--json"],
        &env,
        "",
    );
    assert_eq!(show.code(), Some(0), "{}", show.stderr());
    let shown: Value = serde_json::from_str(&show.stdout()).unwrap();
    assert_eq!(shown["settings"]["isolate"]["value"], json!(["fixture"]));
    assert_eq!(shown["settings"]["isolate"]["source"], file.as_str());
    // And the run isolates it: the pack's `exit` ends its pack host, not
    // the run, and the call is refused saying so.
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"id": "w1", "name": "write_file",
                             "arguments": {"path": "a.txt", "content": "x"}}]},
            {"content": "done"}
        ]})
        .to_string(),
    )
    .unwrap();
    let plugins = chimera_tests::test_packs_dir().display().to_string();
    let workspace = dir.path().display().to_string();
    let script = script.display().to_string();
    let ran = chimera_tests::cli::chimera(
        dir.path(),
        &[
            "--config",
            &file,
            "run",
            "--json",
            "--plugins-dir",
            &plugins,
            "--script",
            &script,
            "--workspace",
            &workspace,
            "go",
        ],
        &[
            ("XDG_CONFIG_HOME", config_home.as_str()),
            ("CHIMERA_LOG", "warn"),
        ],
        "",
    );
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr());
    assert!(
        ran.stdout()
            .contains("pack 'fixture' (isolated) crashed: exited with status 3"),
        "{}",
        ran.stdout()
    );
    assert!(!dir.path().join("a.txt").exists());
}
