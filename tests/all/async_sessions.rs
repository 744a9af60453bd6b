//! The async entry point: many sessions at once on one multi-threaded Tokio
//! runtime, over the real OpenAI-compatible provider (its async HTTP
//! client) against a loopback server, sharing one registry with one real
//! stateful pack loaded from its `.so`; and the blocking API called from
//! inside a runtime.

use chimera_host::agent::{AgentSession, RunResult};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::providers::{HttpSettings, OpenAiConfig, OpenAiProvider, Provider};
use chimera_host::tools::{ToolSet, Workspace};
use chimera_host::types::{Headers, Message, Role};
use chimera_tests::slow_http::SlowServer;
use chimera_tests::stateful_pack_path;
use chimera_tests::tools::Echo;
use std::sync::Arc;
use std::time::Duration;

const SESSIONS: usize = 100;

fn provider(server: &SlowServer) -> Arc<dyn Provider> {
    Arc::new(OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1", server.url),
        model: "m".into(),
        api_key: Some("sk-async-key-000111".into()),
        headers: Headers::default(),
        http: HttpSettings::default(),
    }))
}

fn session(
    provider: &Arc<dyn Provider>,
    workspace: &Workspace,
    registry: &Arc<Registry>,
    n: usize,
) -> AgentSession {
    let mut tools = ToolSet::new();
    tools.insert(Arc::new(Echo));
    AgentSession::builder(Arc::clone(provider), workspace.clone())
        .tools(tools)
        .registry(Arc::clone(registry))
        .session_id(format!("conversation-{n}"))
        .build()
}

fn tool_results(history: &[Message]) -> Vec<String> {
    history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

#[test]
fn a_hundred_concurrent_async_sessions_share_one_loaded_pack_and_each_keeps_its_own_quota() {
    // Each conversation calls `echo` three times; call-quota allows two per
    // conversation. Its counts are per-conversation state inside the one
    // loaded pack: were they shared, the quota would be spent after two
    // calls in all, and nearly every call would be blocked.
    let server = SlowServer::start(Duration::from_millis(5), 3);
    let registry = Arc::new(Registry::new());
    PluginManager::new(Arc::clone(&registry), Vec::new())
        .load_file(&stateful_pack_path(), None, r#"{"max_calls": 2}"#)
        .expect("the stateful pack loads");
    let provider = provider(&server);
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let finished: Vec<(usize, RunResult, Vec<Message>)> = runtime.block_on(async {
        let running: Vec<_> = (0..SESSIONS)
            .map(|n| {
                let mut session = session(&provider, &workspace, &registry, n);
                tokio::spawn(async move {
                    let result = session.run_turn_async(&format!("task {n}")).await;
                    (n, result, session.history().to_vec())
                })
            })
            .collect();
        let mut finished = Vec::new();
        for handle in running {
            finished.push(handle.await.expect("the session's task"));
        }
        finished
    });
    assert_eq!(finished.len(), SESSIONS);
    for (n, result, history) in finished {
        assert!(result.success, "session {n}: {result:?}");
        assert_eq!(result.output, format!("done: task {n}"));
        let results = tool_results(&history);
        assert_eq!(results.len(), 3, "session {n}: {results:?}");
        assert_eq!(
            results[..2],
            [format!("Echo: task {n} #0"), format!("Echo: task {n} #1")],
            "session {n}: its first two calls are within its own quota"
        );
        assert!(
            results[2].starts_with("Blocked by interceptor: call-quota"),
            "session {n}: its third call is past its own quota: {}",
            results[2]
        );
    }
    assert_eq!(server.answered(), (SESSIONS * 4) as u64);
}

#[test]
fn the_blocking_api_called_inside_a_runtime_runs_the_turn_and_returns_its_result() {
    let server = SlowServer::start(Duration::ZERO, 1);
    let registry = Arc::new(Registry::new());
    let provider = provider(&server);
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let mut session = session(&provider, &workspace, &registry, 0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async { session.run_turn("inside") });
    assert!(result.success, "{result:?}");
    assert_eq!(result.output, "done: inside");
    assert_eq!(tool_results(session.history()), ["Echo: inside #0"]);
}
