//! A slow dependency never stalls the gateway: with the state store hung
//! (`SIGSTOP`) or a pack's own process hung, the requests that wait on it
//! wait alone, and `/healthz`, `/v1/models` and new connections are
//! answered meanwhile. (Each of these is ordered, not timed: the probes
//! are answered while every request waiting on the hung part is still
//! waiting, which a server whose workers block on it cannot do.)

use super::{chat, exchange, serve, user, Gateway};
use chimera_tests::http::{Reply, Server};
use chimera_tests::redis::RedisServer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// More requests than the gateway has workers (one per core).
const WAITING: usize = 8;

/// Sends [`WAITING`] requests at once, which `hung` says will wait on a
/// hung part; once they are under way, probes the gateway's other routes
/// and asserts each is answered while none of the waiting requests is;
/// then `release` lets the hung part go on.
fn probes_answer_while_requests_wait(gateway: &Gateway, hung: &str, release: impl FnOnce()) {
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..WAITING {
            scope.spawn(|| {
                let _ = chat(gateway, &user("hello there"));
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        // Under way: each request is read and waits on the hung part.
        std::thread::sleep(Duration::from_millis(500));
        for _ in 0..20 {
            let (status, body) = exchange(gateway, "GET", "/healthz", &[], "");
            assert_eq!((status, body.as_str()), (200, "ok"));
        }
        let (status, models) = exchange(gateway, "GET", "/v1/models", &[], "");
        assert_eq!(status, 200, "{models}");
        assert_eq!(
            done.load(Ordering::SeqCst),
            0,
            "the probes were answered only once requests waiting on {hung} were"
        );
        release();
    });
    assert_eq!(done.load(Ordering::SeqCst), WAITING);
}

#[test]
fn a_hung_state_store_stalls_only_the_requests_that_wait_on_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let url = redis.url();
    let gateway = serve(
        &upstream,
        &[
            "--pack",
            r#"rate-limiter={"requests_per_minute":1000}"#,
            "--state-redis",
            &url,
            "--state-timeout-ms",
            "5000",
        ],
    );
    assert_eq!(chat(&gateway, &user("warm")).0, 200);
    redis.hang();
    probes_answer_while_requests_wait(&gateway, "the store", || redis.resume());
}

#[test]
fn a_hung_pack_process_stalls_only_the_requests_that_wait_on_it() {
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(
        &upstream,
        &[
            "--pack",
            "redactor",
            "--isolate",
            "redactor",
            "--call-budget-ms",
            "5000",
        ],
    );
    assert_eq!(chat(&gateway, &user("warm")).0, 200);
    let hosts = children(gateway.pid());
    assert_eq!(hosts.len(), 1, "one pack host: {hosts:?}");
    signal("-STOP", hosts[0]);
    // Past its deadline the pack host is killed and restarted, and the
    // requests that waited on it are refused or judged by the new one.
    probes_answer_while_requests_wait(&gateway, "the pack's process", || {
        signal("-CONT", hosts[0]);
    });
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc");
    for task in tasks.map_while(Result::ok) {
        let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(
            listed
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// `kill SIGNAL pid`.
fn signal(signal: &str, pid: u32) {
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|status| status.success());
    assert!(sent, "kill {signal} {pid}");
}

#[test]
fn an_isolated_pack_with_two_processes_answers_while_one_is_hung() {
    let upstream = Server::start_concurrent(vec![Reply::Model(vec!["ok".into()], Duration::ZERO)]);
    let gateway = serve(
        &upstream,
        &[
            "--pack",
            "redactor",
            "--isolate",
            "redactor",
            "--isolate-processes",
            "2",
            "--call-budget-ms",
            "30000",
        ],
    );
    assert_eq!(chat(&gateway, &user("warm")).0, 200);
    let hosts = children(gateway.pid());
    assert_eq!(hosts.len(), 2, "two pack hosts: {hosts:?}");
    signal("-STOP", hosts[0]);
    // The first call that reaches the stopped process waits in it, which
    // holds it; every later call goes to the other process.
    let answered = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                let (status, reply) = chat(&gateway, &user("deploy with sk-live1234567890abcdef"));
                assert_eq!(status, 200, "{reply}");
                answered.fetch_add(1, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(200));
        }
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while answered.load(Ordering::SeqCst) < 5 {
            assert!(
                std::time::Instant::now() < until,
                "only {} of 6 answered beside the hung process",
                answered.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            answered.load(Ordering::SeqCst),
            5,
            "one waits in the hung process"
        );
        signal("-CONT", hosts[0]);
    });
    assert_eq!(answered.load(Ordering::SeqCst), 6);
    for request in upstream.requests() {
        assert!(
            !request.body.contains("sk-live"),
            "judged by either process"
        );
    }
}
