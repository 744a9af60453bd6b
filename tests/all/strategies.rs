//! Every strategy under every seam: a policy that holds in the `ReAct` loop
//! holds in each of the other loops, through the real loop with the
//! fixture pack loaded from its built library (and, at the end, through
//! the `chimera` binary).
//!
//! Long by design: it is the strategies × seams matrix, one test per cell,
//! so a missing cell shows.

use crate::helpers::{manager, run_with_packs};
use chimera_host::agent::{
    AgentEvent, AgentSession, Approver, EventBus, Permission, PermissionPolicy, RunResult,
    Strategy, ToolRules,
};
use chimera_host::interception::{
    EventDecision, InterceptDecision, Interceptor, InterceptorEvent, Interceptors,
};
use chimera_host::plugins::PluginManager;
use chimera_host::providers::{RecordedRequest, ScriptedModel};
use chimera_host::tools::{ToolSet, Workspace};
use chimera_host::types::{Headers, Message, ProviderRequest, Role, ToolCall};
use chimera_tests::tools::{Dangerous, Echo};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// Every strategy, as the table tests run them.
fn strategies() -> [Strategy; 6] {
    [
        Strategy::React,
        Strategy::PlanAndExecute { max_plan_steps: 8 },
        Strategy::Reflexion { reflect_every: 1 },
        Strategy::TreeOfThought { candidates: 2 },
        Strategy::PlanAct,
        Strategy::Retry { attempts: 2 },
    ]
}

/// How the scripted model plays "one tool step (`calls`), then `done`"
/// under `strategy`: a plan first where there is one, a report after each
/// plan step, two alike candidates per tree-of-thought step.
fn scripted(strategy: &Strategy, calls: &Value) -> Vec<Value> {
    let act = json!({ "tool_calls": calls });
    let done = json!({"content": "done"});
    match strategy {
        Strategy::PlanAndExecute { .. } => vec![
            json!({"content": "1. Do the one step"}),
            act,
            json!({"content": "did the step"}),
            done,
        ],
        Strategy::TreeOfThought { .. } => vec![act.clone(), act, done.clone(), done],
        Strategy::PlanAct => vec![json!({"content": "the plan"}), act, done],
        _ => vec![act, done],
    }
}

const GATE_REASON: &str = "writes are gated until a plan exists";

fn gate_dangerous() -> Value {
    json!({"tool_call": {"action": "block", "reason": GATE_REASON, "tools": ["dangerous_delete"]}})
}

fn echo(id: &str, message: &str) -> Value {
    json!({"id": id, "name": "echo", "arguments": {"message": message}})
}

/// How a run is set up beyond its strategy and script.
#[derive(Default)]
struct Setup {
    /// The fixture pack's config (loaded from its library), if any.
    pack: Option<Value>,
    host: Option<Interceptors>,
    tools: Option<ToolSet>,
    headers: Option<Headers>,
    permissions: Option<Arc<dyn PermissionPolicy>>,
    approver: Option<Arc<dyn Approver>>,
    max_steps: Option<usize>,
    /// Run the turn through `run_turn_async` on a Tokio runtime instead of
    /// the blocking `run_turn`.
    asynchronous: bool,
}

impl Setup {
    fn pack(config: Value) -> Self {
        Setup {
            pack: Some(config),
            ..Setup::default()
        }
    }
}

/// A finished turn and what it left.
struct Ran {
    result: RunResult,
    session: AgentSession,
    model: Arc<ScriptedModel>,
    events: Arc<Mutex<Vec<AgentEvent>>>,
    dangerous: Dangerous,
    workspace: tempfile::TempDir,
    _manager: Option<PluginManager>,
}

impl Ran {
    fn requests(&self) -> Vec<RecordedRequest> {
        self.model.recorded()
    }

    fn with_role(&self, role: Role) -> Vec<String> {
        self.session
            .history()
            .iter()
            .filter(|m| m.role == role)
            .map(|m| m.content.clone())
            .collect()
    }

    fn interceptor_events(&self, seam: &str) -> Vec<InterceptorEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Interceptor(e) if e.seam == seam => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
}

/// One turn of `prompt` under `strategy`, the model playing `responses`,
/// with `echo` and `dangerous_delete` as the tools unless `setup` says.
fn run(strategy: &Strategy, setup: Setup, responses: &[Value], prompt: &str) -> Ran {
    let manager = setup.pack.map(|config| {
        let manager = manager();
        manager
            .load("fixture", &config.to_string())
            .expect("the fixture pack loads");
        manager
    });
    let mut model = ScriptedModel::from_json(&json!({ "responses": responses }).to_string())
        .expect("the script parses");
    if let Some(headers) = setup.headers {
        model = model.with_headers(headers);
    }
    let model = Arc::new(model);
    let dangerous = Dangerous::default();
    let tools = setup.tools.unwrap_or_else(|| {
        let mut tools = ToolSet::new();
        tools.insert(Arc::new(Echo));
        tools.insert(Arc::new(dangerous.clone()));
        tools
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let bus = EventBus::new();
    let sink = Arc::clone(&events);
    bus.subscribe(move |event| sink.lock().unwrap().push(event.clone()));
    let workspace = tempfile::tempdir().expect("a temporary directory");
    let mut builder = AgentSession::builder(
        model.clone(),
        Workspace::new(workspace.path()).expect("a workspace"),
    )
    .system("You are a test agent.")
    .tools(tools)
    .events(bus)
    .strategy(strategy.clone());
    if let Some(manager) = &manager {
        builder = builder.registry(manager.registry().clone());
    }
    if let Some(host) = setup.host {
        builder = builder.interceptors(Arc::new(host));
    }
    if let Some(policy) = setup.permissions {
        builder = builder.permissions(policy);
    }
    if let Some(approver) = setup.approver {
        builder = builder.approver(approver);
    }
    if let Some(steps) = setup.max_steps {
        builder = builder.max_steps(steps);
    }
    let mut session = builder.build();
    let result = if setup.asynchronous {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(session.run_turn_async(prompt))
    } else {
        session.run_turn(prompt)
    };
    Ran {
        result,
        session,
        model,
        events,
        dangerous,
        workspace,
        _manager: manager,
    }
}

#[test]
fn a_tool_call_block_holds_in_every_strategy_while_the_same_run_without_packs_runs_the_tool() {
    let calls = json!([{"id": "d1", "name": "dangerous_delete"}]);
    for strategy in strategies() {
        let script = scripted(&strategy, &calls);
        let gated = run(
            &strategy,
            Setup::pack(gate_dangerous()),
            &script,
            "clean up",
        );
        assert!(!gated.dangerous.ran(), "{strategy}: the tool ran");
        assert_eq!(
            gated.with_role(Role::Tool),
            [format!("Blocked by interceptor: {GATE_REASON}")],
            "{strategy}"
        );
        assert!(gated.result.success, "{strategy}: {:?}", gated.result);
        assert_eq!(gated.result.output, "done", "{strategy}");

        let open = run(&strategy, Setup::default(), &script, "clean up");
        assert!(
            open.dangerous.ran(),
            "{strategy}: without packs the tool runs"
        );
        assert_eq!(
            open.with_role(Role::Tool),
            ["deleted everything"],
            "{strategy}"
        );
    }
}

#[test]
fn every_strategy_runs_alike_through_the_async_entry_point_and_the_blocking_one() {
    let calls = json!([echo("e1", "hi"), {"id": "d1", "name": "dangerous_delete"}]);
    for strategy in strategies() {
        let script = scripted(&strategy, &calls);
        let blocking = run(&strategy, Setup::pack(gate_dangerous()), &script, "go");
        let awaited = run(
            &strategy,
            Setup {
                asynchronous: true,
                ..Setup::pack(gate_dangerous())
            },
            &script,
            "go",
        );
        assert!(awaited.result.success, "{strategy}: {:?}", awaited.result);
        assert_eq!(awaited.result, blocking.result, "{strategy}");
        assert_eq!(
            awaited.session.history(),
            blocking.session.history(),
            "{strategy}"
        );
        assert_eq!(
            awaited.with_role(Role::Tool),
            [
                "Echo: hi".to_owned(),
                format!("Blocked by interceptor: {GATE_REASON}")
            ],
            "{strategy}"
        );
        assert!(!awaited.dangerous.ran(), "{strategy}");
    }
}

#[test]
fn a_tool_result_replacement_is_what_the_model_sees_in_every_strategy() {
    let pack = json!({"tool_result": {"action": "replace", "find": "hello", "with": "[REDACTED]"}});
    for strategy in strategies() {
        let script = scripted(&strategy, &json!([echo("e1", "hello")]));
        let ran = run(&strategy, Setup::pack(pack.clone()), &script, "greet");
        assert_eq!(
            ran.with_role(Role::Tool),
            ["Echo: [REDACTED]"],
            "{strategy}"
        );
        let requests = ran.requests();
        let after_the_tool: Vec<&RecordedRequest> = requests
            .iter()
            .filter(|r| r.messages.iter().any(|m| m.role == Role::Tool))
            .collect();
        assert!(!after_the_tool.is_empty(), "{strategy}");
        for request in after_the_tool {
            let tool = request
                .messages
                .iter()
                .find(|m| m.role == Role::Tool)
                .unwrap();
            assert_eq!(tool.content, "Echo: [REDACTED]", "{strategy}");
        }
        assert!(ran.result.success, "{strategy}");
    }
}

#[test]
fn a_context_rewrite_reaches_every_model_request_while_the_history_keeps_the_original() {
    let pack = json!({"context": {"action": "replace", "find": "SECRETVALUE", "with": "***"}});
    for strategy in strategies() {
        let script = scripted(&strategy, &json!([echo("e1", "ok")]));
        let ran = run(
            &strategy,
            Setup::pack(pack.clone()),
            &script,
            "keep SECRETVALUE safe",
        );
        let requests = ran.requests();
        assert_eq!(
            requests.len(),
            script.len(),
            "{strategy}: every call was made"
        );
        for request in &requests {
            let sent = serde_json::to_string(&request.messages).unwrap();
            assert!(sent.contains("keep *** safe"), "{strategy}: {sent}");
            assert!(!sent.contains("SECRETVALUE"), "{strategy}: {sent}");
        }
        assert_eq!(
            ran.with_role(Role::User)[0],
            "keep SECRETVALUE safe",
            "{strategy}"
        );
    }
}

#[test]
fn a_provider_request_replacement_is_observed_on_every_model_call() {
    let pack =
        json!({"provider_request": {"action": "replace", "set_kwargs": {"temperature": 0.25}}});
    for strategy in strategies() {
        let script = scripted(&strategy, &json!([echo("e1", "ok")]));
        let ran = run(&strategy, Setup::pack(pack.clone()), &script, "go");
        let requests = ran.requests();
        assert_eq!(requests.len(), script.len(), "{strategy}");
        for request in &requests {
            assert_eq!(
                Value::Object(request.kwargs.clone()),
                json!({"temperature": 0.25}),
                "{strategy}"
            );
        }
        assert!(ran.result.success, "{strategy}");
    }
}

#[test]
fn a_provider_request_block_ends_every_strategy_before_the_wire_and_leaves_no_trace() {
    let pack = json!({"provider_request": {"action": "block", "reason": "no wire today"}});
    for strategy in strategies() {
        let script = scripted(&strategy, &json!([echo("e1", "ok")]));
        let ran = run(&strategy, Setup::pack(pack.clone()), &script, "go");
        assert!(
            ran.requests().is_empty(),
            "{strategy}: a model request was made"
        );
        assert!(!ran.result.success, "{strategy}");
        assert_eq!(
            ran.result.error.as_deref(),
            Some("Blocked by interceptor: no wire today"),
            "{strategy}"
        );
        // Neither the input nor a prompt the strategy added stays behind.
        assert_eq!(
            ran.session.history(),
            [Message::system("You are a test agent.")],
            "{strategy}"
        );
    }
}

#[test]
fn model_response_judges_every_reply_and_output_only_the_final_answer_in_every_strategy() {
    let pack = json!({
        "model_response": {"action": "replace", "find": "", "with": " [seen]"},
        "output": {"action": "replace", "find": "done", "with": "done [checked]"}
    });
    for strategy in strategies() {
        let script = scripted(&strategy, &json!([echo("e1", "ok")]));
        let ran = run(&strategy, Setup::pack(pack.clone()), &script, "go");
        assert_eq!(ran.result.output, "done [checked] [seen]", "{strategy}");
        let replies = ran.with_role(Role::Assistant);
        assert!(!replies.is_empty(), "{strategy}");
        for reply in &replies {
            assert!(reply.ends_with(" [seen]"), "{strategy}: {reply:?}");
        }
        assert_eq!(
            ran.interceptor_events("model_response").len(),
            ran.requests().len(),
            "{strategy}: once per conversation call"
        );
        assert_eq!(
            ran.interceptor_events("output").len(),
            1,
            "{strategy}: the final answer only"
        );
    }
}

/// An approver that answers from a list, recording the call ids it was asked.
struct Answers {
    answers: Mutex<Vec<bool>>,
    asked: Mutex<Vec<String>>,
}

impl Approver for Answers {
    fn approve(&self, call: &ToolCall) -> bool {
        self.asked.lock().unwrap().push(call.id.clone());
        let mut answers = self.answers.lock().unwrap();
        !answers.is_empty() && answers.remove(0)
    }
}

#[test]
fn an_approval_covers_exactly_one_call_in_every_strategy() {
    let batch = json!([
        echo("a", "hi"),
        {"id": "b", "name": "dangerous_delete"},
        echo("c", "again")
    ]);
    for strategy in strategies() {
        let answers = Arc::new(Answers {
            answers: Mutex::new(vec![true]),
            asked: Mutex::new(Vec::new()),
        });
        let setup = Setup {
            permissions: Some(Arc::new(
                ToolRules::new(Permission::Allow).set("echo", Permission::Ask),
            )),
            approver: Some(answers.clone()),
            ..Setup::pack(gate_dangerous())
        };
        let ran = run(&strategy, setup, &scripted(&strategy, &batch), "go");
        assert_eq!(*answers.asked.lock().unwrap(), ["a", "c"], "{strategy}");
        assert!(
            !ran.dangerous.ran(),
            "{strategy}: an approval waved a call through"
        );
        let blocked: Vec<(EventDecision, String)> = ran
            .interceptor_events("tool_call")
            .into_iter()
            .map(|e| (e.decision, e.call_id))
            .collect();
        assert_eq!(
            blocked,
            [(EventDecision::Blocked, "b".to_owned())],
            "{strategy}"
        );
        assert_eq!(
            ran.with_role(Role::Tool),
            [
                "Echo: hi".to_owned(),
                format!("Blocked by interceptor: {GATE_REASON}"),
                "Permission denied for echo".to_owned()
            ],
            "{strategy}"
        );
        assert!(ran.result.success, "{strategy}");
    }
}

/// What the recording host interceptors saw: the extra options of every
/// envelope, and every message list the context seam was shown.
#[derive(Default)]
struct Seen {
    kwargs: Mutex<Vec<Value>>,
    messages: Mutex<Vec<Vec<Message>>>,
}

/// Host interceptors that record into `seen`, allowing everything.
fn recorders(seen: &Arc<Seen>) -> Interceptors {
    let mut host = Interceptors::new();
    let sink = Arc::clone(seen);
    host.provider_request.push(Interceptor::provider_request(
        "kwargs",
        move |request: &ProviderRequest| {
            let kwargs = Value::Object(request.kwargs.clone());
            sink.kwargs.lock().unwrap().push(kwargs);
            Ok(InterceptDecision::Allow)
        },
    ));
    let sink = Arc::clone(seen);
    host.context.push(Interceptor::context(
        "messages",
        move |messages: &[Message]| {
            sink.messages.lock().unwrap().push(messages.to_vec());
            Ok(InterceptDecision::Allow)
        },
    ));
    host
}

#[test]
fn tree_of_thought_shows_each_candidate_call_to_the_seams_and_the_evaluator_to_none() {
    let seen = Arc::new(Seen::default());
    let host = recorders(&seen);
    let strategy = Strategy::TreeOfThought { candidates: 2 };
    let script = [
        json!({"content": "Candidate answer A"}),
        json!({"content": "Candidate answer B"}),
        json!({"content": "1"}),
    ];
    let setup = Setup {
        host: Some(host),
        ..Setup::default()
    };
    let ran = run(&strategy, setup, &script, "pick one");
    let requests = ran.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        seen.kwargs.lock().unwrap().len(),
        2,
        "provider_request fired per candidate"
    );
    assert_eq!(
        seen.messages.lock().unwrap().len(),
        2,
        "context fired per candidate"
    );
    for recorded in seen.kwargs.lock().unwrap().iter() {
        assert_eq!(*recorded, json!({"temperature": 0.7}));
    }
    for request in &requests[..2] {
        assert_eq!(
            Value::Object(request.kwargs.clone()),
            json!({"temperature": 0.7})
        );
    }
    let shown = serde_json::to_string(&*seen.messages.lock().unwrap()).unwrap();
    assert!(!shown.to_lowercase().contains("evaluator"), "{shown}");
    assert!(ran.result.success);
    assert_eq!(ran.result.output, "Candidate answer A");

    // What the evaluator call sent: the candidates, and nothing else.
    let evaluator = &requests[2];
    assert_eq!(
        evaluator.messages[0],
        Message::system("You are an evaluator.")
    );
    assert_eq!(evaluator.messages.len(), 2);
    let listed = &evaluator.messages[1].content;
    assert!(
        listed.contains("Candidate 1:\nCandidate answer A"),
        "{listed}"
    );
    assert!(
        listed.contains("Candidate 2:\nCandidate answer B"),
        "{listed}"
    );
    assert!(
        !listed.contains("pick one"),
        "the request is not sent: {listed}"
    );
    assert!(evaluator.tools.is_empty() && evaluator.kwargs.is_empty());
    // Only the chosen reply enters the conversation.
    assert_eq!(ran.with_role(Role::Assistant), ["Candidate answer A"]);
    assert!(!serde_json::to_string(ran.session.history())
        .unwrap()
        .contains("evaluator"));
}

#[test]
fn tree_of_thought_skips_the_evaluator_for_alike_candidates_and_runs_the_first_that_calls_tools() {
    let strategy = Strategy::TreeOfThought { candidates: 2 };
    let alike = [json!({"content": "same"}), json!({"content": "same"})];
    let ran = run(&strategy, Setup::default(), &alike, "go");
    assert_eq!(ran.requests().len(), 2, "no evaluator call");
    assert_eq!(ran.result.output, "same");

    let script = [
        json!({"content": "just talking"}),
        json!({"tool_calls": [echo("p", "picked")]}),
        json!({"content": "done"}),
        json!({"content": "done"}),
    ];
    let ran = run(&strategy, Setup::default(), &script, "go");
    assert_eq!(ran.requests().len(), 4, "no evaluator call");
    assert_eq!(ran.with_role(Role::Tool), ["Echo: picked"]);
    assert_eq!(ran.with_role(Role::Assistant), ["", "done"]);
    assert_eq!(ran.result.output, "done");
}

#[test]
fn the_tree_of_thought_evaluator_goes_out_with_the_headers_the_seams_chose() {
    let pack = json!({"provider_request": {"action": "replace", "set_headers": {"authorization": "[scrubbed]"}}});
    let setup = Setup {
        headers: Some(Headers(vec![(
            "Authorization".to_owned(),
            "Bearer secret-token".to_owned(),
        )])),
        ..Setup::pack(pack)
    };
    let script = [
        json!({"content": "Candidate answer A"}),
        json!({"content": "Candidate answer B"}),
        json!({"content": "2"}),
    ];
    let ran = run(
        &Strategy::TreeOfThought { candidates: 2 },
        setup,
        &script,
        "go",
    );
    let requests = ran.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        let headers = request.headers.as_ref().expect("a header surface");
        assert_eq!(
            headers.0,
            [("Authorization".to_owned(), "[scrubbed]".to_owned())]
        );
    }
    assert_eq!(ran.result.output, "Candidate answer B");
}

#[test]
fn reflexion_reflects_after_executed_actions_only() {
    let strategy = Strategy::Reflexion { reflect_every: 2 };
    let script = [
        json!({"tool_calls": [{"id": "d1", "name": "dangerous_delete"}]}),
        json!({"tool_calls": [echo("e1", "one")]}),
        json!({"tool_calls": [echo("e2", "two")]}),
        json!({"content": "done"}),
    ];
    let ran = run(&strategy, Setup::pack(gate_dangerous()), &script, "go");
    assert!(ran.result.success);
    let history = ran.session.history();
    let users: Vec<usize> = (0..history.len())
        .filter(|&i| history[i].role == Role::User)
        .collect();
    assert_eq!(users.len(), 2, "the input and one reflection: {history:?}");
    let reflection = users[1];
    assert!(history[reflection].content.starts_with("Pause and reflect"));
    // It follows the second executed action, not the refused one.
    assert_eq!(history[reflection - 1].content, "Echo: two");
    assert_eq!(
        ran.requests()[3].messages.last().map(|m| m.role),
        Some(Role::User)
    );
}

#[test]
fn plan_and_execute_plans_without_tools_then_carries_out_each_step() {
    let strategy = Strategy::PlanAndExecute { max_plan_steps: 8 };
    let script = [
        json!({"content": "My plan:\n1. Echo one\n2. Echo two"}),
        json!({"tool_calls": [echo("e1", "one")]}),
        json!({"content": "echoed one"}),
        json!({"tool_calls": [echo("e2", "two")]}),
        json!({"content": "echoed two"}),
        json!({"content": "done"}),
    ];
    let ran = run(&strategy, Setup::default(), &script, "echo twice");
    assert!(ran.result.success);
    assert_eq!(ran.result.output, "done");
    let requests = ran.requests();
    assert!(
        requests[0].tools.is_empty(),
        "the plan call is offered no tools"
    );
    assert!(requests[1..].iter().all(|r| r.tools.len() == 2));
    let users = ran.with_role(Role::User);
    assert_eq!(users.len(), 5, "{users:?}");
    assert_eq!(users[0], "echo twice");
    assert!(users[1].starts_with("Before you act, write a numbered plan"));
    assert!(users[2].starts_with("Step 1 of 2 of your plan: Echo one\n"));
    assert!(users[3].starts_with("Step 2 of 2 of your plan: Echo two\n"));
    assert!(users[4].starts_with("Every step of the plan is done."));
    assert_eq!(ran.with_role(Role::Tool), ["Echo: one", "Echo: two"]);
}

#[test]
fn plan_act_offers_only_the_read_only_tools_while_planning() {
    let strategy = Strategy::PlanAct;
    let write = |id: &str, path: &str| json!({"id": id, "name": "write_file", "arguments": {"path": path, "content": "x"}});
    let script = [
        json!({"tool_calls": [write("w1", "plan.txt"), {"id": "t1", "name": "think", "arguments": {"thought": "look first"}}]}),
        json!({"content": "the plan: write act.txt"}),
        json!({"tool_calls": [write("w2", "act.txt")]}),
        json!({"content": "done"}),
    ];
    let setup = Setup {
        tools: Some(ToolSet::standard()),
        ..Setup::default()
    };
    let ran = run(&strategy, setup, &script, "write a file");
    assert!(ran.result.success);
    let requests = ran.requests();
    let offered =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(offered(0), ["read_file", "think", "todo"]);
    assert_eq!(offered(1), ["read_file", "think", "todo"]);
    assert!(offered(2).contains(&"write_file".to_owned()));
    let tool_messages = ran.with_role(Role::Tool);
    assert_eq!(tool_messages[0], "Unknown tool: write_file");
    assert!(!ran.workspace.path().join("plan.txt").exists());
    assert!(ran.workspace.path().join("act.txt").exists());
}

#[test]
fn retry_runs_a_failed_attempt_again_fresh_under_the_same_policy() {
    let dangerous = json!({"tool_calls": [{"id": "d1", "name": "dangerous_delete"}]});
    let script = [
        dangerous.clone(),
        dangerous,
        json!({"tool_calls": [{"id": "d2", "name": "dangerous_delete"}, echo("e1", "hi")]}),
        json!({"content": "done"}),
    ];
    let setup = Setup {
        permissions: Some(Arc::new(
            ToolRules::new(Permission::Allow).set("echo", Permission::Deny),
        )),
        max_steps: Some(2),
        ..Setup::pack(gate_dangerous())
    };
    let ran = run(&Strategy::Retry { attempts: 3 }, setup, &script, "clean up");
    assert!(ran.result.success, "{:?}", ran.result);
    assert_eq!(ran.result.output, "done");
    let fresh = "clean up\n\nPrevious attempt (#1) scored 0%. Output was: \
                 stopped after 2 provider calls without a final answer"
        .to_owned();
    // The second attempt starts from the original request alone.
    assert_eq!(
        ran.requests()[2].messages,
        [
            Message::system("You are a test agent."),
            Message::user(fresh.clone())
        ]
    );
    assert_eq!(ran.with_role(Role::User), [fresh]);
    // The pack and the permission policy hold in the fresh attempt too.
    assert!(!ran.dangerous.ran());
    assert_eq!(
        ran.with_role(Role::Tool),
        [
            format!("Blocked by interceptor: {GATE_REASON}"),
            "Permission denied for echo".to_owned()
        ]
    );
}

#[test]
fn chimera_run_strategy_runs_tree_of_thought_through_the_seams_of_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = dir.path().join("requests.jsonl");
    let ran = run_with_packs(
        dir.path(),
        &[(
            "fixture",
            json!({"model_response": {"action": "replace", "find": "answer", "with": "ANSWER"}}),
        )],
        &json!([
            {"content": "Candidate answer A"},
            {"content": "Candidate answer B"},
            {"content": "1"}
        ]),
        &[
            "--strategy",
            "tree-of-thought",
            "--strategy-config",
            r#"{"candidates": 2}"#,
            "--record-requests",
            recorded.to_str().unwrap(),
            "pick one",
        ],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let requests: Vec<Value> = std::fs::read_to_string(&recorded)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kwargs: Vec<&Value> = requests.iter().map(|r| &r["kwargs"]).collect();
    assert_eq!(
        kwargs,
        [
            &json!({"temperature": 0.7}),
            &json!({"temperature": 0.7}),
            &json!({})
        ]
    );
    let end = ran.of_type("run_end");
    assert_eq!(end[0]["output"], "Candidate ANSWER A");
    assert_eq!(
        ran.of_type("interceptor").len(),
        2,
        "model_response, per candidate"
    );
}

#[test]
fn chimera_run_strategy_keeps_plan_gate_closed_in_plan_and_execute() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_with_packs(
        dir.path(),
        &[("plan-gate", json!({}))],
        &json!([
            {"content": "1. Write the file"},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}]},
            {"content": "could not write"},
            {"content": "done"}
        ]),
        &["--strategy", "plan-and-execute", "write out.txt"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert!(!dir.path().join("out.txt").exists());
    let results = ran.of_type("tool_result");
    assert_eq!(results.len(), 1);
    assert!(results[0]["content"]
        .as_str()
        .unwrap()
        .starts_with("Blocked by interceptor: plan-gate: no plan recorded this turn"));
}

#[test]
fn chimera_run_refuses_an_unknown_strategy_or_a_bad_setting_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (args, names) in [
        (
            &["--strategy", "tree"][..],
            "react, plan-and-execute, reflexion, tree-of-thought, plan-act, retry",
        ),
        (
            &[
                "--strategy",
                "tree-of-thought",
                "--strategy-config",
                r#"{"candidates": 0}"#,
            ][..],
            "{\"candidates\": 1 to 16}",
        ),
        (
            &["--strategy-config", r#"{"candidates": 2}"#][..],
            "it takes no settings",
        ),
    ] {
        let ran = run_with_packs(
            dir.path(),
            &[],
            &json!([{"content": "never"}]),
            &[args, &["go"][..]].concat(),
            "",
        );
        assert_eq!(ran.status(), 2, "{args:?}: {}", ran.stderr());
        let line = ran.error_line();
        assert!(line.contains(names), "{args:?}: {line}");
        assert!(ran.of_type("run_end").is_empty(), "{args:?}: nothing ran");
    }
}

/// The command-line arguments choosing every strategy, with the model's
/// part of "one tool step (`calls`), then `done`" under each.
fn cli_strategies(calls: &Value) -> Vec<(Vec<&'static str>, Vec<Value>)> {
    [
        ("react", Strategy::React),
        (
            "plan-and-execute",
            Strategy::PlanAndExecute { max_plan_steps: 8 },
        ),
        ("reflexion", Strategy::Reflexion { reflect_every: 3 }),
        ("tree-of-thought", Strategy::TreeOfThought { candidates: 2 }),
        ("plan-act", Strategy::PlanAct),
        ("retry", Strategy::Retry { attempts: 2 }),
    ]
    .into_iter()
    .map(|(name, strategy)| {
        let mut args = vec!["--strategy", name];
        if name == "tree-of-thought" {
            args.extend(["--strategy-config", r#"{"candidates": 2}"#]);
        }
        (args, scripted(&strategy, calls))
    })
    .collect()
}

/// The requests the scripted model received, as `--record-requests` wrote them.
fn requests_in(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn chimera_run_holds_all_four_seams_from_the_loaded_pack_in_every_strategy() {
    let calls = json!([
        {"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x"}},
        {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}
    ]);
    let policy = json!({
        "tool_call": {"action": "block", "reason": GATE_REASON, "tools": ["write_file"]},
        "tool_result": {"action": "replace", "find": "hello", "with": "[REDACTED]", "tools": ["read_file"]},
        "context": {"action": "replace", "find": "SECRETVALUE", "with": "***"},
        "provider_request": {"action": "replace", "set_kwargs": {"temperature": 0.25}}
    });
    for (strategy, responses) in cli_strategies(&calls) {
        let name = strategy[1];
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello world").unwrap();
        let recorded = dir.path().join("requests.jsonl");
        let mut args = strategy.clone();
        args.extend([
            "--workspace",
            dir.path().to_str().unwrap(),
            "--record-requests",
            recorded.to_str().unwrap(),
            "the key is SECRETVALUE",
        ]);
        let ran = run_with_packs(
            dir.path(),
            &[("fixture", policy.clone())],
            &Value::Array(responses),
            &args,
            "",
        );
        assert_eq!(ran.status(), 0, "{name}: {}", ran.stderr());
        assert!(
            !dir.path().join("out.txt").exists(),
            "{name}: the write ran"
        );
        let results = ran.of_type("tool_result");
        let content = |id: &str| {
            results
                .iter()
                .find(|r| r["call_id"] == id)
                .map(|r| r["content"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default()
        };
        assert_eq!(
            content("w1"),
            format!("Blocked by interceptor: {GATE_REASON}"),
            "{name}"
        );
        assert!(
            content("r1").contains("[REDACTED] world"),
            "{name}: {}",
            content("r1")
        );
        let requests = requests_in(&recorded);
        assert!(!requests.is_empty(), "{name}");
        for request in &requests {
            let text = request["messages"].to_string();
            if text.contains("You are an evaluator.") {
                continue;
            }
            assert!(
                !text.contains("SECRETVALUE") && text.contains("***"),
                "{name}: {text}"
            );
            assert!(
                !text.contains("hello world"),
                "{name}: the model saw the raw result"
            );
            assert_eq!(request["kwargs"], json!({"temperature": 0.25}), "{name}");
        }
    }
}

#[test]
fn chimera_run_sends_nothing_when_provider_request_blocks_in_every_strategy() {
    let calls = json!([{"id": "t1", "name": "think", "arguments": {"thought": "x"}}]);
    for (strategy, responses) in cli_strategies(&calls) {
        let name = strategy[1];
        let dir = tempfile::tempdir().unwrap();
        let recorded = dir.path().join("requests.jsonl");
        let mut args = strategy.clone();
        args.extend(["--record-requests", recorded.to_str().unwrap(), "go"]);
        let ran = run_with_packs(
            dir.path(),
            &[(
                "fixture",
                json!({"provider_request": {"action": "block", "reason": "no wire today"}}),
            )],
            &Value::Array(responses),
            &args,
            "",
        );
        assert_eq!(ran.status(), 1, "{name}: {}", ran.stderr());
        assert!(
            requests_in(&recorded).is_empty(),
            "{name}: a request went out"
        );
        let end = ran.of_type("run_end");
        assert_eq!(
            end.last().unwrap()["output"],
            "Blocked by interceptor: no wire today",
            "{name}"
        );
    }
}
