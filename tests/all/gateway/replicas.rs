//! Two `chimera serve` replicas sharing one real `redis-server`, behind
//! the tests' own round-robin client: one token budget, one rate limit and
//! one call quota across both, exactly; and an outage of the store that
//! follows each pack's policy and ends when the store returns. Without
//! `redis-server` (which `.ci/run` installs) each test says so and skips.

use super::{chat_with, costly_upstream, serve, tool_call_upstream, user, Gateway};
use chimera_tests::http::{Reply, Server};
use chimera_tests::redis::RedisServer;
use chimera_tests::serve::Served;
use chimera_tests::{chimera_bin, publish, stateful_pack_path};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The one key every request of these tests is sent with: one
/// conversation (`key-<hash>`) on every replica.
const KEY: &str = "authorization: Bearer sk-shared";

/// Two gateways in front of `upstream`, each with `flags`.
fn replicas(upstream: &Server, flags: &[&str]) -> [Gateway; 2] {
    [serve(upstream, flags), serve(upstream, flags)]
}

/// The tests' load balancer: request `i` goes to replica `i % 2`.
struct RoundRobin<'a> {
    replicas: &'a [Gateway; 2],
    next: AtomicUsize,
}

impl<'a> RoundRobin<'a> {
    fn new(replicas: &'a [Gateway; 2]) -> Self {
        RoundRobin {
            replicas,
            next: AtomicUsize::new(0),
        }
    }

    /// One chat request with the shared key: status and reply.
    fn chat(&self, body: &Value) -> (u16, Value) {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        chat_with(&self.replicas[i % 2], &[KEY], body)
    }
}

#[test]
fn a_budget_of_n_across_two_replicas_lets_exactly_n_through() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let upstream = costly_upstream("ok");
    let budget = r#"token-budget={"max_tokens":300}"#;
    let url = redis.url();
    // Five replies spend the 300 tokens: the sixth request is refused,
    // whichever replica it reaches.
    let shared = replicas(&upstream, &["--pack", budget, "--state-redis", &url]);
    let client = RoundRobin::new(&shared);
    let statuses: Vec<u16> = (0..8).map(|_| client.chat(&user("hi")).0).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 403, 403, 403]);
    let (_, refused) = client.chat(&user("hi"));
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("budget exceeded (300/300 tokens)"),
        "{message}"
    );
    // Each replica counting alone lets all eight through: what the shared
    // store is for.
    let alone = replicas(&upstream, &["--pack", budget]);
    let client = RoundRobin::new(&alone);
    let statuses: Vec<u16> = (0..8).map(|_| client.chat(&user("hi")).0).collect();
    assert_eq!(statuses, [200; 8]);
}

#[test]
fn a_reply_a_gate_blocks_is_still_charged_to_the_shared_budget() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // Every reply costs 60 tokens and says a banned word: stop-words,
    // loaded first, blocks each one. The budget still counts what it cost.
    let upstream = costly_upstream("a forbidden answer");
    let url = redis.url();
    let shared = replicas(
        &upstream,
        &[
            "--pack",
            r#"stop-words={"words":["forbidden"],"scan_llm_responses":true}"#,
            "--pack",
            r#"token-budget={"max_tokens":300}"#,
            "--state-redis",
            &url,
        ],
    );
    let client = RoundRobin::new(&shared);
    let answers: Vec<(u16, Value)> = (0..7).map(|_| client.chat(&user("hi"))).collect();
    // The first five were within the budget: each reached the upstream and
    // came back answered, with the banned reply blocked.
    let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 403, 403], "{answers:?}");
    for (_, reply) in &answers[..5] {
        let text = reply["choices"][0]["message"]["content"]
            .as_str()
            .expect("an answer with a message");
        assert!(!text.contains("forbidden"), "the gate blocked it: {reply}");
    }
    // The two over the budget never reached it.
    assert_eq!(upstream.requests().len(), 5);
}

/// A client's agent loop: its user message, then `steps` rounds of a
/// tool call and its result, sent back as one request.
fn agent_loop(users: &[&str], steps: usize) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for user in users {
        messages.push(json!({"role": "user", "content": user}));
    }
    for step in 0..steps {
        let id = format!("call_{step}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "a.txt"}));
    }
    json!({"model": "m", "messages": messages})
}

#[test]
fn an_iteration_cap_spans_a_clients_turn_across_two_replicas() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let url = redis.url();
    let cap = r#"endless-loop={"max_iterations":3}"#;
    let shared = replicas(&upstream, &["--pack", cap, "--state-redis", &url]);
    let client = RoundRobin::new(&shared);
    // The client's loop: three requests of one turn pass, the fourth is
    // the cap's, whichever replica each reaches.
    let statuses: Vec<u16> = (0..4)
        .map(|steps| client.chat(&agent_loop(&["list the files"], steps)).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 403]);
    let (_, refused) = client.chat(&agent_loop(&["list the files"], 4));
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Maximum iterations reached (3)"),
        "{message}"
    );
    // A new user message is a new turn.
    let next = agent_loop(&["list the files", "and now the dirs"], 0);
    assert_eq!(client.chat(&next).0, 200);

    // A request a rate limiter pauses is offered to the cap again when
    // the pause ends: it keeps its number, so two requests are two.
    let paced = replicas(
        &upstream,
        &[
            "--pack",
            r#"endless-loop={"max_iterations":2}"#,
            "--pack",
            r#"rate-limiter={"requests_per_minute":1,"window_seconds":1}"#,
            "--state-redis",
            &url,
            // Held through the pause, not answered 429.
            "--rate-limit-hold",
            "10",
        ],
    );
    let client = RoundRobin::new(&paced);
    // (A turn of its own: three user messages, which no request above had.)
    let turn = ["read the notes", "all of them", "now"];
    let statuses: Vec<u16> = (0..2)
        .map(|steps| client.chat(&agent_loop(&turn, steps)).0)
        .collect();
    assert_eq!(
        statuses,
        [200, 200],
        "the second was paused once, then sent"
    );
}

#[test]
fn a_call_quota_counts_every_one_of_200_concurrent_requests_once() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let plugins = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(stateful_pack_path()).unwrap();
    let file = chimera_host::plugins::platform::library_file_name("call-quota");
    publish(plugins.path(), &file, &bytes);
    let plugins = plugins.path().display().to_string();
    let upstream = tool_call_upstream("echo", "{}");
    let url = redis.url();
    let shared = replicas(
        &upstream,
        &[
            "--pack",
            r#"call-quota={"max_calls":150}"#,
            "--plugins-dir",
            &plugins,
            "--state-redis",
            &url,
        ],
    );
    let client = RoundRobin::new(&shared);
    let (kept, blocked) = (Mutex::new(0), Mutex::new(0));
    std::thread::scope(|scope| {
        for _ in 0..20 {
            scope.spawn(|| {
                for _ in 0..10 {
                    let (status, reply) = client.chat(&user("go"));
                    assert_eq!(status, 200, "{reply}");
                    let message = &reply["choices"][0]["message"];
                    if message["tool_calls"]
                        .as_array()
                        .is_some_and(|c| !c.is_empty())
                    {
                        *kept.lock().unwrap() += 1;
                    } else {
                        let content = message["content"].as_str().unwrap_or_default();
                        assert!(content.contains("call-quota"), "{reply}");
                        *blocked.lock().unwrap() += 1;
                    }
                }
            });
        }
    });
    // Every call counted once: exactly the quota kept, the rest refused.
    assert_eq!((*kept.lock().unwrap(), *blocked.lock().unwrap()), (150, 50));
}

#[test]
fn a_rate_limit_holds_across_two_replicas() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let url = redis.url();
    // Two requests a minute, shared: of six sent at once, two go upstream
    // and the other four wait for a token (half a minute and more).
    let limit = r#"rate-limiter={"requests_per_minute":2,"window_seconds":60}"#;
    // Held through their pauses, not answered 429.
    let shared = replicas(
        &upstream,
        &[
            "--pack",
            limit,
            "--state-redis",
            &url,
            "--rate-limit-hold",
            "300",
        ],
    );
    let (answered, answers) = std::sync::mpsc::channel();
    for i in 0..6 {
        let (address, answered) = (shared[i % 2].address.clone(), answered.clone());
        // Not joined: the four that wait end when the gateways do.
        std::thread::spawn(move || {
            let body = user("hi").to_string();
            let sent = std::panic::catch_unwind(|| {
                super::exchange_at(&address, "POST", "/v1/chat/completions", &[KEY], &body)
            });
            let _ = answered.send(sent.map(|(status, _)| status).ok());
        });
    }
    let bound = Duration::from_secs(20);
    for _ in 0..2 {
        assert_eq!(answers.recv_timeout(bound).unwrap(), Some(200));
    }
    // A request the limiter lets through reaches the upstream in well
    // under a second; a held one waits half a minute. After a second, the
    // two answered are all the upstream saw: the others are held, on both
    // replicas (each counting alone would have let four through).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(upstream.requests().len(), 2);
    assert!(answers.try_recv().is_err(), "the other four still wait");
}

/// A gateway in front of `upstream` with `flags`, its stderr lines
/// collected.
fn watched(upstream: &Server, flags: &[&str]) -> (Gateway, Arc<Mutex<Vec<String>>>) {
    let mut command = Command::new(chimera_bin());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--model", "m"])
        .args(["--upstream", &format!("{}/v1", upstream.url)])
        .args(flags);
    let mut gateway = Served::start(command, Stdio::piped());
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stderr = gateway.child().stderr.take().expect("its stderr");
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    (gateway, lines)
}

/// The lines of `lines` that contain `text`.
fn said(lines: &Mutex<Vec<String>>, text: &str) -> usize {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(text))
        .count()
}

#[test]
fn an_outage_of_the_store_follows_each_packs_policy_is_said_once_and_ends_when_it_returns() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let upstream = Server::start(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let url = redis.url();
    let limit = r#"rate-limiter={"requests_per_minute":1000}"#;
    let (closed, closed_said) = watched(&upstream, &["--pack", limit, "--state-redis", &url]);
    let (open, open_said) = watched(
        &upstream,
        &[
            "--pack",
            limit,
            "--state-redis",
            &url,
            "--state-policy",
            "rate-limiter=fail_open",
        ],
    );
    let ask = |gateway: &Gateway| chat_with(gateway, &[KEY], &user("hi"));
    assert_eq!(ask(&closed).0, 200);
    assert_eq!(ask(&open).0, 200);

    redis.kill();
    for _ in 0..3 {
        let (status, refused) = ask(&closed);
        assert_eq!(status, 403, "fail_closed refuses: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("rate-limiter: cannot count this request")
                && message.contains("unavailable"),
            "{message}"
        );
        // The store's address is the operator's (in the log), not a client's.
        assert!(
            !refused.to_string().contains(&redis.port.to_string())
                && !refused.to_string().contains("redis://"),
            "{refused}"
        );
        assert_eq!(ask(&open).0, 200, "fail_open counts in process");
    }
    for lines in [&closed_said, &open_said] {
        assert_eq!(said(lines, "is unavailable"), 1, "{:?}", lines.lock());
        assert_eq!(
            said(lines, &format!(":{}", redis.port)),
            1,
            "{:?}",
            lines.lock()
        );
    }

    assert!(redis.restart());
    let back = Instant::now();
    while ask(&closed).0 != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the gateway reconnects once the store is back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(ask(&open).0, 200);
    assert_eq!(said(&closed_said, "answers again"), 1);
    let (_, metrics) = super::exchange(&closed, "GET", "/metrics", &[], "");
    let store = format!("store=\"redis://127.0.0.1:{}\"", redis.port);
    assert!(
        metrics.contains(&format!("chimera_state_outages_total{{{store}}} 1")),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("chimera_state_up{{{store}}} 1")));
}
