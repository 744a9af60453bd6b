//! Hot swap through the real watcher, the real loader and real rebuilt
//! packs: a new build takes effect on the next turn, every failure keeps the
//! running version, bursts settle into one reload, a turn in flight finishes
//! on the version it started with, a replaced library of several packs
//! reloads each pack taken from it; through the binary, a writer's close
//! settles its file.

use crate::harness::script;
use crate::helpers::{loaded_hashes, one_library_dir};
use chimera_host::interception::{run_chain, ChainContext, SessionFacts, ToolCallInterceptor};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{
    watch, PluginManager, Registry, ReloadEvent, ReloadOutcome, WatchOptions, Watcher,
};
use chimera_host::types::ToolCall;
use chimera_tests::cli::{command, lines_of, until};
use chimera_tests::{fixture_v2, out_of_tree_dir, pack_path, publish};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn fixture_name() -> String {
    library_file_name("chimera-fixture-pack")
}

fn v1() -> Vec<u8> {
    std::fs::read(pack_path("chimera-fixture-pack")).unwrap()
}

fn v2() -> Vec<u8> {
    std::fs::read(fixture_v2()).unwrap()
}

/// A plugins directory holding the v1 fixture, a manager that loaded it with
/// a `tool_call` block whose reason names the build, and a watcher.
struct Live {
    dir: tempfile::TempDir,
    manager: Arc<PluginManager>,
    events: Receiver<ReloadEvent>,
    _watcher: Watcher,
}

fn live(config: Value, options: WatchOptions) -> Live {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), &fixture_name(), &v1());
    let manager = Arc::new(PluginManager::new(
        Arc::new(Registry::new()),
        vec![dir.path().to_owned()],
    ));
    manager.load("fixture", &config.to_string()).unwrap();
    let (sender, events) = mpsc::channel();
    let watcher = watch(Arc::clone(&manager), options, move |event| {
        let _ = sender.send(event);
    })
    .unwrap();
    Live {
        dir,
        manager,
        events,
        _watcher: watcher,
    }
}

fn says_no() -> Value {
    json!({"tool_call": {"action": "block", "reason": "{tag} says no"}})
}

impl Live {
    fn path(&self) -> PathBuf {
        self.dir.path().join(fixture_name())
    }

    fn publish(&self, bytes: &[u8]) {
        publish(self.dir.path(), &fixture_name(), bytes);
    }

    fn next_event(&self) -> ReloadEvent {
        self.events.recv_timeout(WAIT).expect("a watcher event")
    }

    /// What the current chains say about a bash call.
    fn verdict(&self) -> Option<String> {
        verdict(&self.manager.registry().get_all().tool_call)
    }
}

fn verdict(chain: &[ToolCallInterceptor]) -> Option<String> {
    let facts = SessionFacts::new("hot");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    run_chain(chain, &(), &ToolCall::new("c", "bash", json!({})), &cx).blocked
}

#[test]
fn a_rebuilt_pack_is_swapped_in_at_the_same_position_and_the_next_turn_runs_it() {
    let live = live(says_no(), WatchOptions::default());
    let other = out_of_tree_dir().join(library_file_name("no-rm-rf"));
    publish(
        live.dir.path(),
        &library_file_name("no-rm-rf"),
        &std::fs::read(other).unwrap(),
    );
    live.manager.load("no-rm-rf", "").unwrap();
    assert_eq!(live.verdict().as_deref(), Some("v1 says no"));

    live.publish(&v2());
    match live.next_event() {
        ReloadEvent::Reloaded(info) => assert_eq!(info.name, "fixture"),
        other => panic!("expected a reload, got {other:?}"),
    }
    assert_eq!(live.verdict().as_deref(), Some("v2 says no"));
    let names: Vec<String> = live
        .manager
        .registry()
        .get_all()
        .tool_call
        .iter()
        .map(|i| i.name().to_owned())
        .collect();
    assert_eq!(
        names,
        ["fixture/tool_call-0", "no-rm-rf/gate"],
        "same load-order position"
    );
    assert_eq!(
        live.manager.list()[0].config,
        says_no().to_string(),
        "same configuration"
    );

    assert_eq!(
        live.manager.reload("fixture").unwrap(),
        ReloadOutcome::Unchanged
    );
    live.publish(&v2());
    assert!(
        live.events.recv_timeout(Duration::from_secs(1)).is_err(),
        "unchanged content: nothing happens"
    );
}

fn failure_keeps_the_old_version(config: Value, bad: Vec<u8>, fragment: &str) {
    let live = live(config, WatchOptions::default());
    live.publish(&bad);
    match live.next_event() {
        ReloadEvent::Failed { name, error, .. } => {
            assert_eq!(name, "fixture");
            let error = error.to_string();
            assert!(error.contains(fragment), "{error:?} lacks {fragment:?}");
            assert!(!error.contains('\n'), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(
        live.verdict().as_deref(),
        Some("v1 says no"),
        "the old chains keep running"
    );
    live.publish(&v2());
    assert!(
        matches!(live.next_event(), ReloadEvent::Reloaded(_)),
        "a good build after a bad one loads"
    );
}

#[test]
fn replacing_the_one_library_reloads_every_pack_taken_from_it() {
    let (dir, file, built) = one_library_dir();
    let manager = Arc::new(PluginManager::new(
        Arc::new(Registry::new()),
        vec![dir.path().to_owned()],
    ));
    manager.load("redactor", "").unwrap();
    manager.load("stop-words", "").unwrap();
    let before = loaded_hashes(&manager);
    assert_eq!(
        before[0].1, before[1].1,
        "both from the one file: {before:?}"
    );
    let (sender, events) = mpsc::channel();
    let _watcher = watch(
        Arc::clone(&manager),
        WatchOptions::default(),
        move |event| {
            let _ = sender.send(event);
        },
    )
    .unwrap();

    // A rebuild: the same code in other bytes (a note after the end of the
    // library, which nothing maps).
    let mut rebuilt = built;
    rebuilt.extend_from_slice(b"rebuilt");
    publish(dir.path(), &file, &rebuilt);
    let mut reloaded: Vec<String> = (0..2)
        .map(|_| match events.recv_timeout(WAIT) {
            Ok(ReloadEvent::Reloaded(info)) => info.name,
            other => panic!("expected a reload, got {other:?}"),
        })
        .collect();
    reloaded.sort();
    assert_eq!(reloaded, ["redactor", "stop-words"]);
    let after = loaded_hashes(&manager);
    assert_eq!(
        after
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["redactor", "stop-words"],
        "same load order"
    );
    assert!(
        after
            .iter()
            .all(|(_, sha256)| *sha256 != before[0].1 && *sha256 == after[0].1),
        "both from the new bytes: {before:?} then {after:?}"
    );
}

#[test]
fn a_truncated_file_fails_the_reload_and_keeps_the_old_version() {
    let v2 = v2();
    failure_keeps_the_old_version(says_no(), v2[..v2.len() / 2].to_vec(), "incomplete");
}

#[test]
fn garbage_fails_the_reload_and_keeps_the_old_version() {
    failure_keeps_the_old_version(
        says_no(),
        b"not a library at all".repeat(100),
        "not a shared library",
    );
}

#[test]
fn an_abi_mismatch_fails_the_reload_and_keeps_the_old_version() {
    let mismatch =
        std::fs::read(out_of_tree_dir().join(library_file_name("mismatch-pack"))).unwrap();
    failure_keeps_the_old_version(says_no(), mismatch, "incompatible pack ABI");
}

#[test]
fn a_constructor_error_fails_the_reload_and_keeps_the_old_version() {
    let mut config = says_no();
    config["refuse_tags"] = json!(["v2"]);
    let live = live(config, WatchOptions::default());
    live.publish(&v2());
    match live.next_event() {
        ReloadEvent::Failed { error, .. } => assert!(
            error
                .to_string()
                .contains("fixture: build v2 refuses this configuration"),
            "{error}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(live.verdict().as_deref(), Some("v1 says no"));
}

#[test]
fn a_constructor_panic_fails_the_reload_and_keeps_the_old_version() {
    let mut config = says_no();
    config["panic_tags"] = json!(["v2"]);
    let live = live(config, WatchOptions::default());
    live.publish(&v2());
    match live.next_event() {
        ReloadEvent::Failed { error, .. } => assert!(
            error
                .to_string()
                .contains("constructor panicked: build v2 panics"),
            "{error}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(live.verdict().as_deref(), Some("v1 says no"));
}

#[test]
fn a_changed_entry_point_name_fails_the_reload_and_keeps_the_old_version() {
    let other = std::fs::read(out_of_tree_dir().join(library_file_name("no-rm-rf"))).unwrap();
    failure_keeps_the_old_version(
        says_no(),
        other,
        "provides no pack named 'fixture' (it has: no-rm-rf)",
    );
}

#[test]
fn repeated_failures_back_off_and_known_bad_content_is_not_retried() {
    let options = WatchOptions {
        backoff: Duration::from_secs(3600),
        ..WatchOptions::default()
    };
    let live = live(says_no(), options);
    live.publish(b"bad one".repeat(10).as_slice());
    assert!(matches!(live.next_event(), ReloadEvent::Failed { .. }));
    live.publish(b"bad one".repeat(10).as_slice());
    assert!(
        live.events.recv_timeout(Duration::from_secs(1)).is_err(),
        "the same bad content is not retried"
    );
    live.publish(b"bad two".repeat(10).as_slice());
    assert!(
        matches!(live.next_event(), ReloadEvent::Failed { .. }),
        "a second, different failure"
    );
    live.publish(&v2());
    assert!(
        live.events.recv_timeout(Duration::from_secs(2)).is_err(),
        "after repeated failures the watcher waits out its back-off"
    );
    assert_eq!(
        live.manager
            .reload("fixture")
            .map(|o| matches!(o, ReloadOutcome::Reloaded(_)))
            .ok(),
        Some(true),
        "an explicit reload does not wait"
    );
}

#[test]
fn a_burst_of_fifty_rewrites_gives_one_reload_per_settled_content() {
    let live = live(says_no(), WatchOptions::default());
    let (one, two) = (v1(), v2());
    let path = live.path();
    for i in 0..50 {
        // In place, as a careless writer would: the host must not care.
        std::fs::write(&path, if i % 2 == 0 { &one } else { &two }).unwrap();
    }
    // The burst is coalesced: the watcher acts on settled content. On a
    // loaded machine a 20 MB in-place write can outlast the debounce, so
    // the watcher may also see (and refuse) a half-written file, or settle
    // once mid-burst; what must hold is that it never reloads per write,
    // ends on the final content, and then stays quiet.
    let mut events = vec![live.next_event()];
    while let Ok(event) = live.events.recv_timeout(Duration::from_secs(2)) {
        events.push(event);
    }
    let reloads = events
        .iter()
        .filter(|e| matches!(e, ReloadEvent::Reloaded(_)))
        .count();
    assert!(
        matches!(events.last(), Some(ReloadEvent::Reloaded(_))),
        "the settled content is loaded last: {events:?}"
    );
    assert!(
        reloads < 5,
        "a reload per write, not per settled content: {events:?}"
    );
    assert_eq!(live.verdict().as_deref(), Some("v2 says no"));
}

#[test]
fn a_pack_written_in_place_in_chunks_and_then_closed_is_reloaded_once_on_its_final_content() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let path = publish(&plugins, &fixture_name(), &v1());
    let bash_turn = |n: u32| {
        [
            json!({"tool_calls": [{"id": format!("b{n}"), "name": "bash", "arguments": {"command": "true"}}]}),
            json!({"content": format!("turn {n} done")}),
        ]
    };
    let responses = [bash_turn(1), bash_turn(2)].concat();
    std::fs::write(
        dir.path().join("script.json"),
        json!({ "responses": responses }).to_string(),
    )
    .unwrap();
    let plugins_arg = plugins.display().to_string();
    let pack = format!("fixture={}", says_no());
    let args = [
        "run",
        "--watch",
        "--turns-from-stdin",
        "--json",
        "--plugins-dir",
        &plugins_arg,
        "--pack",
        &pack,
        "--script",
        "script.json",
    ];
    let mut child = command(dir.path(), &args, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let events = lines_of(&mut child);
    let blocked = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["type"] == "tool_result")
            .and_then(|e| e["content"].as_str().map(str::to_owned))
    };
    let reloads = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["type"] == "pack_reloaded" || e["type"] == "pack_reload_failed")
            .cloned()
            .collect::<Vec<_>>()
    };
    writeln!(stdin, "one").unwrap();
    let first = until(&events, "run_end");
    assert_eq!(
        blocked(&first).as_deref(),
        Some("Blocked by interceptor: v1 says no")
    );

    // A writer at work: the file open, in place, written in eight chunks
    // with pauses well inside the debounce, then closed.
    let v2 = v2();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    for chunk in v2.chunks(v2.len().div_ceil(8)) {
        file.write_all(chunk).unwrap();
        std::thread::sleep(WatchOptions::default().debounce / 20);
    }
    drop(file);
    let seen = until(&events, "pack_reloaded");
    assert_eq!(
        reloads(&seen).len(),
        1,
        "no look at the half-written file: {seen:?}"
    );
    assert_eq!(seen.last().unwrap()["name"], "fixture");

    writeln!(stdin, "two").unwrap();
    let second = until(&events, "run_end");
    assert_eq!(
        blocked(&second).as_deref(),
        Some("Blocked by interceptor: v2 says no"),
        "the final content is active"
    );
    assert_eq!(reloads(&second), Vec::<Value>::new());
    assert!(
        events.recv_timeout(Duration::from_secs(1)).is_err(),
        "one reload, then quiet"
    );
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_deleted_pack_file_unloads_nothing() {
    let live = live(says_no(), WatchOptions::default());
    std::fs::remove_file(live.path()).unwrap();
    match live.next_event() {
        ReloadEvent::Removed { names, .. } => assert_eq!(names, ["fixture"]),
        other => panic!("expected a removal, got {other:?}"),
    }
    assert_eq!(live.verdict().as_deref(), Some("v1 says no"));
    assert_eq!(live.manager.list().len(), 1);
}

#[test]
fn a_new_file_is_loadable_by_name_at_once() {
    let live = live(says_no(), WatchOptions::default());
    assert!(live.manager.load("plan-gate", "").is_err());
    publish(
        live.dir.path(),
        &library_file_name("plan-gate"),
        &std::fs::read(pack_path("plan-gate")).unwrap(),
    );
    live.manager
        .load("plan-gate", "")
        .expect("loadable without a restart");
}

#[test]
fn plan_gate_hands_its_planned_turns_to_the_new_build() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(pack_path("plan-gate")).unwrap();
    let file = library_file_name("plan-gate");
    publish(dir.path(), &file, &original);
    let manager = PluginManager::new(Arc::new(Registry::new()), vec![dir.path().to_owned()]);
    manager.load("plan-gate", "").unwrap();
    let think = ToolCall::new("p", "think", json!({}));
    let write = ToolCall::new("w", "write_file", json!({}));
    let facts = SessionFacts::new("planned-session");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    assert!(
        run_chain(&manager.registry().get_all().tool_call, &(), &think, &cx)
            .blocked
            .is_none()
    );
    // The same pack, republished with different bytes (a rebuild): the
    // conversation that planned stays planned in the new build.
    let mut rebuilt = original.clone();
    rebuilt.extend_from_slice(b"rebuilt");
    publish(dir.path(), &file, &rebuilt);
    assert!(matches!(
        manager.reload("plan-gate").unwrap(),
        ReloadOutcome::Reloaded(_)
    ));
    assert!(
        run_chain(&manager.registry().get_all().tool_call, &(), &write, &cx)
            .blocked
            .is_none()
    );
    let other = SessionFacts::new("unplanned-session");
    let cx = ChainContext {
        session: &other,
        events: None,
    };
    assert!(
        run_chain(&manager.registry().get_all().tool_call, &(), &write, &cx)
            .blocked
            .is_some()
    );
}

/// Holds the second provider call until released.
struct Hold {
    inner: chimera_host::providers::ScriptedModel,
    reached: std::sync::Mutex<mpsc::SyncSender<()>>,
    release: std::sync::Mutex<Receiver<()>>,
    calls: std::sync::atomic::AtomicUsize,
}

impl chimera_host::providers::Provider for Hold {
    fn model(&self) -> &str {
        "hold"
    }
    fn complete(
        &self,
        call: &chimera_host::providers::ProviderCall<'_>,
    ) -> Result<chimera_host::providers::ModelResponse, chimera_host::providers::ProviderError>
    {
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            self.reached.lock().unwrap().send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        self.inner.complete(call)
    }
}

#[test]
fn a_turn_in_flight_finishes_on_the_version_it_started_with() {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), &fixture_name(), &v1());
    let manager = Arc::new(PluginManager::new(
        Arc::new(Registry::new()),
        vec![dir.path().to_owned()],
    ));
    manager.load("fixture", &says_no().to_string()).unwrap();
    let (reached_tx, reached_rx) = mpsc::sync_channel(1);
    let (release_tx, release_rx) = mpsc::channel();
    let model = chimera_host::providers::ScriptedModel::from_json(
        &script(json!([
            {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "true"}}]},
            {"content": "first done"},
            {"tool_calls": [{"id": "b2", "name": "bash", "arguments": {"command": "true"}}]},
            {"content": "second done"}
        ]))
        .to_string(),
    )
    .unwrap();
    let provider = Arc::new(Hold {
        inner: model,
        reached: std::sync::Mutex::new(reached_tx),
        release: std::sync::Mutex::new(release_rx),
        calls: Default::default(),
    });
    let workspace = tempfile::tempdir().unwrap();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let bus = chimera_host::agent::EventBus::new();
    bus.subscribe(move |e| {
        if let chimera_host::agent::AgentEvent::ToolResult { content, .. } = e {
            sink.lock().unwrap().push(content.clone());
        }
    });
    let mut session = chimera_host::agent::AgentSession::builder(
        provider,
        chimera_host::tools::Workspace::new(workspace.path()).unwrap(),
    )
    .tools(chimera_host::tools::ToolSet::standard())
    .registry(Arc::clone(manager.registry()))
    .events(bus)
    .build();
    let turn = std::thread::spawn(move || {
        session.run_turn("first");
        session
    });
    reached_rx.recv_timeout(WAIT).unwrap();
    publish(dir.path(), &fixture_name(), &v2());
    assert!(matches!(
        manager.reload("fixture").unwrap(),
        ReloadOutcome::Reloaded(_)
    ));
    release_tx.send(()).unwrap();
    let mut session = turn.join().unwrap();
    session.run_turn("second");
    assert_eq!(
        *events.lock().unwrap(),
        [
            "Blocked by interceptor: v1 says no",
            "Blocked by interceptor: v2 says no"
        ]
    );
}
