//! The three Chimera packs through the real loaded `.so` and the real loop.

use crate::harness::{script, Harness, Run};
use crate::helpers::manager;
use chimera_host::agent::AgentEvent;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::tools::{DelegateTool, SubAgent, ToolContext, ToolSet};
use chimera_host::types::Role;
use chimera_tests::tools::Fixed;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const BLOCK_WRITE: &str = "Blocked by interceptor: plan-gate: no plan recorded this turn — call one of [think, todo] to record a plan before using write_file";

fn with_packs(packs: &[(&str, &str)]) -> PluginManager {
    let manager = manager();
    for (name, config) in packs {
        manager
            .load(name, config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    manager
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// Every `tool_result` event: (call id, tool name, content, `is_error`).
fn results(run: &Run) -> Vec<(String, String, String, bool)> {
    run.events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => Some((call_id.clone(), name.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_bundled_packs_are_discoverable_and_load_by_name() {
    let manager = manager();
    let discovery = manager.discover();
    for name in ["plan-gate", "redactor", "delegate-spawner"] {
        assert!(
            discovery.find(name).unwrap().is_some(),
            "{name} not discovered"
        );
    }
    manager.load("plan-gate", "").unwrap();
    let all = manager.registry().get_all();
    assert_eq!(
        (all.tool_call.len(), all.context.len(), all.len()),
        (1, 1, 2)
    );
    manager.unload("plan-gate").unwrap();
    assert!(manager.registry().get_all().is_empty());

    for name in ["plan-gate", "redactor", "delegate-spawner"] {
        manager.load(name, "").unwrap();
    }
    let all = manager.registry().get_all();
    assert_eq!(
        (
            all.tool_call.len(),
            all.provider_request.len(),
            all.tool_result.len(),
            all.context.len()
        ),
        (2, 1, 1, 1)
    );
    assert!(manager
        .load("redactor", "")
        .unwrap_err()
        .to_string()
        .contains("already loaded"));
    for name in ["plan-gate", "redactor", "delegate-spawner"] {
        manager.unload(name).unwrap();
    }
    assert!(manager.registry().get_all().is_empty());
}

fn plan_gated(responses: Value) -> Harness {
    let manager = with_packs(&[("plan-gate", "")]);
    Harness::new(script(responses))
        .tools(ToolSet::standard())
        .registry(Arc::clone(manager.registry()))
}

#[test]
fn plan_gate_blocks_edits_until_a_plan_is_issued() {
    let run = plan_gated(json!([
        {"content": "editing right away", "tool_calls": [call("w1", "write_file", json!({"path": "hello.txt", "content": "early"}))]},
        {"tool_calls": [call("p1", "think", json!({"thought": "plan: write hello.txt"}))]},
        {"tool_calls": [call("w2", "write_file", json!({"path": "hello.txt", "content": "planned"}))]},
        {"content": "done"}
    ]))
    .run("create hello.txt");
    assert!(run.result.success);
    let writes: Vec<_> = results(&run)
        .into_iter()
        .filter(|r| r.1 == "write_file")
        .collect();
    assert_eq!(writes.len(), 2);
    assert_eq!((writes[0].2.as_str(), writes[0].3), (BLOCK_WRITE, true));
    assert!(!writes[1].3, "the planned write succeeds: {}", writes[1].2);
    assert_eq!(
        std::fs::read_to_string(run.workspace.path().join("hello.txt")).unwrap(),
        "planned"
    );
}

#[test]
fn plan_gate_re_arms_on_the_next_user_turn() {
    let (mut session, _model, events, workspace) = plan_gated(json!([
        {"tool_calls": [call("p1", "think", json!({"thought": "plan"}))]},
        {"tool_calls": [call("w1", "write_file", json!({"path": "one.txt", "content": "1"}))]},
        {"content": "turn one done"},
        {"tool_calls": [call("w2", "write_file", json!({"path": "two.txt", "content": "2"}))]},
        {"content": "turn two done"}
    ]))
    .session();
    assert!(session.run_turn("create one.txt").success);
    assert!(session.run_turn("now create two.txt").success);
    assert!(workspace.path().join("one.txt").exists());
    assert!(!workspace.path().join("two.txt").exists());
    let last = events.lock().unwrap().iter().rev().find_map(|e| match e {
        AgentEvent::ToolResult { content, .. } => Some(content.clone()),
        _ => None,
    });
    assert!(last.unwrap().contains("plan-gate"));
}

#[test]
fn plan_gate_counts_a_proposed_plan_matches_names_exactly_and_lets_ungated_tools_pass() {
    let mut no_think = ToolSet::standard();
    no_think.remove("think");
    let manager = with_packs(&[("plan-gate", "")]);
    let run = Harness::new(script(json!([
        {"tool_calls": [call("p", "think", json!({"thought": "x"}))]},
        {"tool_calls": [call("w", "write_file", json!({"path": "out.txt", "content": "ok"}))]},
        {"content": "done"}
    ])))
    .tools(no_think)
    .registry(Arc::clone(manager.registry()))
    .run("go");
    assert!(results(&run)[0].2.contains("Unknown tool"));
    assert_eq!(
        std::fs::read_to_string(run.workspace.path().join("out.txt")).unwrap(),
        "ok"
    );

    let manager = with_packs(&[(
        "plan-gate",
        r#"{"gated_tools": ["deploy"], "plan_tools": ["outline"]}"#,
    )]);
    let run = Harness::new(script(json!([
        {"tool_calls": [call("d1", "deploy", json!({}))]},
        {"tool_calls": [call("o1", "outline", json!({}))]},
        {"tool_calls": [call("d2", "deploy", json!({}))]},
        {"content": "done"}
    ])))
    .tool(Arc::new(Fixed {
        name: "deploy",
        output: "deployed",
    }))
    .tool(Arc::new(Fixed {
        name: "outline",
        output: "outlined",
    }))
    .registry(Arc::clone(manager.registry()))
    .run("ship it");
    let contents: Vec<String> = results(&run).into_iter().map(|r| r.2).collect();
    assert!(
        contents[0].contains("plan-gate")
            && contents[0].ends_with("[outline] to record a plan before using deploy")
    );
    assert_eq!(contents[1..], ["outlined", "deployed"]);

    let run = plan_gated(json!([
        {"tool_calls": [call("r", "read_file", json!({"path": "missing.txt"}))]},
        {"content": "done"}
    ]))
    .run("read");
    assert!(
        !results(&run)[0].2.contains("plan-gate"),
        "read_file is not gated"
    );
}

/// A provider wrapper that holds one call until told to go on.
struct Held {
    inner: Arc<chimera_host::providers::ScriptedModel>,
    hold_call: usize,
    calls: Mutex<usize>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
    reached: std::sync::mpsc::SyncSender<()>,
}

impl chimera_host::providers::Provider for Held {
    fn model(&self) -> &str {
        "held"
    }
    fn complete(
        &self,
        call: &chimera_host::providers::ProviderCall<'_>,
    ) -> Result<chimera_host::providers::ModelResponse, chimera_host::providers::ProviderError>
    {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        if n == self.hold_call {
            self.reached.send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        self.inner.complete(call)
    }
}

#[test]
fn plan_gate_keeps_conversations_independent_across_threads_and_interleavings() {
    let manager = with_packs(&[("plan-gate", "")]);
    let registry = Arc::clone(manager.registry());
    let session = |responses: Value| {
        Harness::new(script(responses))
            .tools(ToolSet::standard())
            .registry(Arc::clone(&registry))
            .session()
    };
    // B plans and writes; a fresh conversation A on another thread does not inherit B's plan.
    let (mut b, _, _, b_dir) = session(json!([
        {"tool_calls": [call("p", "think", json!({"thought": "plan"}))]},
        {"tool_calls": [call("w", "write_file", json!({"path": "b.txt", "content": "b"}))]},
        {"content": "b done"},
        {"tool_calls": [call("p2", "think", json!({"thought": "plan again"}))]},
        {"tool_calls": [call("w2", "write_file", json!({"path": "b2.txt", "content": "b"}))]},
        {"content": "b done again"}
    ]));
    std::thread::spawn(move || {
        assert!(b.run_turn("write b").success);
        assert!(b.run_turn("write b2").success);
    })
    .join()
    .unwrap();
    assert!(b_dir.path().join("b.txt").exists() && b_dir.path().join("b2.txt").exists());
    let (mut a, _, _, a_dir) = session(json!([
        {"tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "a"}))]},
        {"content": "a done"}
    ]));
    let handle = std::thread::spawn(move || a.run_turn("write a"));
    assert!(handle.join().unwrap().success);
    assert!(!a_dir.path().join("a.txt").exists(), "A never planned");

    // Interleaved: B plans; A (longer, unplanned) takes a model step; then B writes.
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let (reached_tx, reached_rx) = std::sync::mpsc::sync_channel(1);
    let b_model = Arc::new(
        chimera_host::providers::ScriptedModel::from_json(
            &script(json!([
                {"tool_calls": [call("p", "think", json!({"thought": "plan"}))]},
                {"tool_calls": [call("w", "write_file", json!({"path": "b.txt", "content": "b"}))]},
                {"content": "b done"}
            ]))
            .to_string(),
        )
        .unwrap(),
    );
    let held = Arc::new(Held {
        inner: b_model,
        hold_call: 2,
        calls: Mutex::new(0),
        release: Mutex::new(release_rx),
        reached: reached_tx,
    });
    let b_dir = tempfile::tempdir().unwrap();
    let mut b = chimera_host::agent::AgentSession::builder(
        held,
        chimera_host::tools::Workspace::new(b_dir.path()).unwrap(),
    )
    .tools(ToolSet::standard())
    .registry(Arc::clone(&registry))
    .build();
    let b_thread = std::thread::spawn(move || b.run_turn("write b"));
    reached_rx.recv().unwrap(); // B planned, its watcher ran, its next call is held
    let (mut a, _, _, a_dir) = session(json!([
        {"content": "thinking"},
        {"tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "a"}))]},
        {"content": "a done"}
    ]));
    assert!(a.run_turn("first turn of A").success);
    assert!(a.run_turn("write a").success);
    release_tx.send(()).unwrap();
    assert!(b_thread.join().unwrap().success);
    assert!(
        b_dir.path().join("b.txt").exists(),
        "A's watcher never re-armed B"
    );
    assert!(
        !a_dir.path().join("a.txt").exists(),
        "A's unplanned write is blocked"
    );
}

fn redacting(config: &str) -> PluginManager {
    with_packs(&[("redactor", config)])
}

#[test]
fn redactor_scrubs_results_durably_and_the_wire_ephemerally() {
    let manager = redacting("");
    let run = Harness::new(script(json!([
        {"tool_calls": [call("l", "leak", json!({}))]},
        {"content": "done"}
    ])))
    .tool(Arc::new(Fixed {
        name: "leak",
        output: "connected using sk-livekey12345678 just fine",
    }))
    .registry(Arc::clone(manager.registry()))
    .run("leak it");
    let leak = &results(&run)[0].2;
    assert!(
        leak.contains("[redacted]") && !leak.contains("sk-livekey12345678"),
        "{leak}"
    );
    assert!(run
        .tool_messages()
        .iter()
        .all(|m| !m.contains("sk-livekey12345678")));

    let run = Harness::new(script(json!([{"content": "done"}])))
        .registry(Arc::clone(manager.registry()))
        .run("authenticate with sk-livekey12345678 please");
    let wire = serde_json::to_string(&run.requests()).unwrap();
    assert!(!wire.contains("sk-livekey12345678") && wire.contains("[redacted]"));
    assert_eq!(
        run.history()[1].content,
        "authenticate with sk-livekey12345678 please"
    );
}

#[test]
fn redactor_scrubs_nested_arguments_and_headers_and_leaves_the_rest_of_the_envelope_alone() {
    let manager = redacting("");
    let assistant_args = json!({"cmd": "curl -H 'X-Key: sk-livekey12345678'", "depth": 2, "flags": ["--token=sk-livekey12345678", "--verbose"]});
    let run = Harness::new(script(json!([
        {"tool_calls": [call("c1", "echo", json!({"message": "hi"})), call("c2", "noop", assistant_args.clone())]},
        {"content": "done"}
    ])))
    .tool(Arc::new(Fixed { name: "noop", output: "ok" }))
    .headers(&[("authorization", "Bearer something-live"), ("X-Trace", "trace sk-livekey12345678"), ("X-Keep", "plain")])
    .registry(Arc::clone(manager.registry()))
    .run("go");
    let requests = run.requests();
    let headers = requests[1].headers.clone().unwrap();
    assert_eq!(
        headers.0,
        [
            ("authorization".to_owned(), "[redacted]".to_owned()),
            ("X-Trace".to_owned(), "trace [redacted]".to_owned()),
            ("X-Keep".to_owned(), "plain".to_owned())
        ]
    );
    let sent = requests[1]
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(
        sent.tool_calls[1].arguments.parse(),
        json!({"cmd": "curl -H 'X-Key: [redacted]'", "depth": 2, "flags": ["--token=[redacted]", "--verbose"]})
    );
    assert_eq!(
        sent.tool_calls[0].arguments.as_str(),
        r#"{"message":"hi"}"#,
        "unchanged text is kept verbatim"
    );
    let durable = run
        .history()
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(
        durable.tool_calls[1].arguments.parse(),
        assistant_args,
        "the original is unchanged"
    );
    let after = chimera_host::providers::Provider::request_headers(run.model.as_ref()).unwrap();
    assert_eq!(after.get("authorization"), Some("Bearer something-live"));

    // Nothing to scrub: the envelope passes identically, with no event.
    let clean = Harness::new(script(json!([{"content": "done"}])))
        .registry(Arc::clone(manager.registry()))
        .without_header_surface()
        .run("hello");
    let bare = Harness::new(script(json!([{"content": "done"}])))
        .without_header_surface()
        .run("hello");
    assert!(clean.interceptor_events().is_empty());
    assert_eq!(
        serde_json::to_string(&clean.requests()).unwrap(),
        serde_json::to_string(&bare.requests()).unwrap()
    );

    // Error text is scrubbed too.
    struct Failing;
    impl chimera_host::tools::Tool for Failing {
        fn name(&self) -> &str {
            "auth"
        }
        fn description(&self) -> &str {
            "fails"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn execute(
            &self,
            _: &Value,
            _: &ToolContext<'_>,
        ) -> Result<String, chimera_host::tools::ToolError> {
            Err(chimera_host::tools::ToolError::failed(
                "auth failed for sk-livekey12345678",
            ))
        }
    }
    let run = Harness::new(script(
        json!([{"tool_calls": [call("a", "auth", json!({}))]}, {"content": "done"}]),
    ))
    .tool(Arc::new(Failing))
    .registry(Arc::clone(manager.registry()))
    .run("auth");
    assert_eq!(results(&run)[0].2, "auth failed for [redacted]");

    // A custom pattern and replacement.
    let custom = redacting(r#"{"pattern": "acme-[0-9]{4}", "replacement": "<hidden>"}"#);
    let run = Harness::new(script(json!([{"content": "done"}])))
        .registry(Arc::clone(custom.registry()))
        .run("acme-1234 and sk-livekey12345678");
    let user = run.requests()[0]
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .unwrap()
        .content
        .clone();
    assert_eq!(user, "<hidden> and sk-livekey12345678");

    // An invalid pattern fails at load.
    let error = manager_for_failure()
        .load("redactor", r#"{"pattern": "("}"#)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("redactor: invalid pattern:") && !error.contains('\n'),
        "{error}"
    );
}

fn manager_for_failure() -> PluginManager {
    PluginManager::new(
        Arc::new(Registry::new()),
        vec![chimera_tests::packs_dir().to_owned()],
    )
}

/// A sub-agent that records its tasks and answers `sub-agent finished: <task>`.
#[derive(Default)]
struct RecordingSubAgent {
    tasks: Mutex<Vec<String>>,
}

impl SubAgent for RecordingSubAgent {
    fn run(&self, task: &str, _cx: &ToolContext<'_>) -> Result<String, (String, String)> {
        self.tasks.lock().unwrap().push(task.to_owned());
        Ok(format!("sub-agent finished: {task}"))
    }
}

fn spawning(config: &str, tool: Option<&str>, calls: Vec<Value>) -> (Run, Arc<RecordingSubAgent>) {
    let manager = with_packs(&[("delegate-spawner", config)]);
    let agent = Arc::new(RecordingSubAgent::default());
    let mut harness = Harness::new(script(json!([{"tool_calls": calls}, {"content": "done"}])))
        .tool(Arc::new(Fixed {
            name: "write_file",
            output: "written",
        }))
        .registry(Arc::clone(manager.registry()));
    if let Some(name) = tool {
        harness = harness.tool(Arc::new(DelegateTool::named(name, agent.clone())));
    }
    (harness.run("go"), agent)
}

#[test]
fn delegate_spawner_routes_matching_calls_to_the_sub_agent() {
    let (run, agent) = spawning(
        "",
        Some("delegate"),
        vec![call(
            "s1",
            "spawn_research",
            json!({"task": "count the beans"}),
        )],
    );
    assert_eq!(*agent.tasks.lock().unwrap(), ["count the beans"]);
    assert_eq!(
        results(&run)[0],
        (
            "s1".to_owned(),
            "delegate".to_owned(),
            "sub-agent finished: count the beans".to_owned(),
            false
        )
    );

    let (_, agent) = spawning(
        "",
        Some("delegate"),
        vec![call(
            "s2",
            "spawn_lookup",
            json!({"query": "bean varieties"}),
        )],
    );
    assert_eq!(
        *agent.tasks.lock().unwrap(),
        [r#"spawn_lookup: {"query": "bean varieties"}"#]
    );

    let (run, _) = spawning(
        "",
        None,
        vec![call("s3", "spawn_research", json!({"task": "x"}))],
    );
    assert!(run.result.success);
    assert_eq!(results(&run)[0].2, "Unknown tool: delegate");

    let named = r#"{"prefix": "", "names": ["research"]}"#;
    let (run, agent) = spawning(
        named,
        Some("delegate"),
        vec![
            call("r1", "research", json!({"task": "dig"})),
            call("w1", "write_file", json!({"path": "x", "content": "y"})),
            call("d1", "delegate", json!({"task": "already"})),
        ],
    );
    assert_eq!(*agent.tasks.lock().unwrap(), ["dig", "already"]);
    let names: Vec<(String, String)> = results(&run).into_iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        names,
        [
            ("r1".into(), "delegate".into()),
            ("w1".into(), "write_file".into()),
            ("d1".into(), "delegate".into())
        ]
    );
    assert_eq!(
        run.seam_decisions().len(),
        1,
        "only the rewritten call produces an event; untouched calls pass with no decision"
    );

    let (_, agent) = spawning(
        "",
        Some("delegate"),
        vec![call("v", "spawn_review", json!({"prompt": "review it"}))],
    );
    assert_eq!(*agent.tasks.lock().unwrap(), ["review it"]);

    let (run, agent) = spawning(
        r#"{"prefix": ""}"#,
        Some("delegate"),
        vec![call("n", "spawn_research", json!({"task": "x"}))],
    );
    assert!(agent.tasks.lock().unwrap().is_empty());
    assert_eq!(results(&run)[0].2, "Unknown tool: spawn_research");

    let (run, agent) = spawning(
        r#"{"delegate_tool": "worker"}"#,
        Some("worker"),
        vec![call("f", "spawn_fix", json!({"task": "fix"}))],
    );
    assert_eq!(*agent.tasks.lock().unwrap(), ["fix"]);
    assert_eq!(results(&run)[0].1, "worker");
}

#[test]
fn packs_linked_into_the_host_work_without_the_plugin_system() {
    use chimera_host::plugins::interceptors_of;
    let mut bundle = interceptors_of::<plan_gate::PlanGate>("").unwrap();
    bundle.tool_call.extend(
        interceptors_of::<delegate_spawner::DelegateSpawner>("")
            .unwrap()
            .tool_call,
    );
    let redactor = interceptors_of::<redactor::Redactor>("").unwrap();
    bundle.extend(&redactor);
    let agent = Arc::new(RecordingSubAgent::default());
    let run = Harness::new(script(json!([
        {"tool_calls": [call("w", "write_file", json!({"path": "x.txt", "content": "x"}))]},
        {"tool_calls": [call("s", "spawn_research", json!({"task": "beans sk-livekey12345678"}))]},
        {"content": "done"}
    ])))
    .tools(ToolSet::standard())
    .tool(Arc::new(DelegateTool::new(agent.clone())))
    .host(bundle)
    .run("go");
    let all = results(&run);
    assert_eq!(all[0].2, BLOCK_WRITE);
    assert_eq!(all[1].1, "delegate");
    assert_eq!(
        all[1].2, "sub-agent finished: beans [redacted]",
        "the result is scrubbed durably"
    );
}

/// Every pack crate under `packs/` (a `cdylib`) is a shipped pack or the
/// one-library build that links every shipped pack in, and the workspace's
/// release profile strips its symbols: a shipped pack is kept in memory
/// whole (its sealed copy), symbol table included, so one that misses its
/// entry costs memory silently.
#[test]
fn every_pack_crate_is_shipped_and_stripped_in_the_release_profile() {
    use chimera_tests::{workspace_root, SHIPPED_PACKS};
    let root = workspace_root();
    let profile = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
    let mut packs = Vec::new();
    for entry in std::fs::read_dir(root.join("packs")).expect("packs/") {
        let manifest = entry.expect("an entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if !text.contains("\"cdylib\"") {
            continue;
        }
        let name = text
            .lines()
            .find_map(|line| line.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{}: no package name", manifest.display()));
        assert!(
            profile.contains(&format!(
                "[profile.release.package.{name}]\nstrip = \"symbols\""
            )),
            "Cargo.toml: no `[profile.release.package.{name}]` with `strip = \"symbols\"`"
        );
        if name == "chimera-packs" {
            // The one-library build links every shipped pack in.
            for pack in SHIPPED_PACKS {
                assert!(
                    text.contains(&format!("\n{pack} = {{ path = \"../{pack}\" }}")),
                    "{}: the one library does not link in {pack}",
                    manifest.display()
                );
            }
            continue;
        }
        packs.push(name.to_owned());
    }
    packs.sort();
    let mut shipped: Vec<String> = SHIPPED_PACKS.iter().map(|&p| p.to_owned()).collect();
    shipped.sort();
    assert_eq!(packs, shipped, "the pack crates are the shipped packs");
}
