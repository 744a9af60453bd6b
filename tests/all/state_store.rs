//! Gate state in a real `redis-server`: two stores on one server stand for
//! two gateway replicas; counts add up across them, windows and buckets
//! hold across them, nothing is lost or doubled under concurrency, and an
//! outage follows each failure policy and ends when the server returns.

use chimera_host::state::{FailPolicy, RedisStore, StateService, StateStore};
use chimera_tests::redis::RedisServer;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn replica(server: &RedisServer) -> RedisStore {
    RedisStore::new(&server.url(), Duration::from_millis(500)).expect("a Redis URL")
}

#[test]
fn two_replicas_add_into_one_counter_and_200_concurrent_increments_all_count() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let replicas = [Arc::new(replica(&server)), Arc::new(replica(&server))];
    let forever = Duration::ZERO;
    assert_eq!(replicas[0].incr_by("budget", 5, forever).unwrap(), 5);
    assert_eq!(replicas[1].incr_by("budget", 3, forever).unwrap(), 8);
    assert_eq!(replicas[0].get("budget", forever).unwrap(), 8);
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let store = Arc::clone(&replicas[thread % 2]);
            scope.spawn(move || {
                for _ in 0..25 {
                    store.incr_by("busy", 1, forever).unwrap();
                }
            });
        }
    });
    assert_eq!(replicas[1].get("busy", forever).unwrap(), 200);
}

/// `store`'s total of `key` once it reaches `want`, or the last one read
/// after five seconds: an add is written to the server before `add`
/// returns, but Redis promises no order between connections, so another
/// connection sees it once the server has run it.
fn total_once(store: &RedisStore, key: &str, window: Duration, want: i64) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let total = store.get(key, window).unwrap();
        if total >= want || std::time::Instant::now() > deadline {
            return total;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn adds_sent_without_waiting_are_all_counted_once_on_every_replica() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, b) = (replica(&server), replica(&server));
    let forever = Duration::ZERO;
    // Past the connection's cap of unanswered adds, and from threads, so
    // several connections each carry some.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..50 {
                    a.add("spent", 2, forever).unwrap();
                }
            });
        }
    });
    // The other replica sees every add, each counted once.
    assert_eq!(total_once(&b, "spent", forever, 400), 400);
    // And so does the replica that sent them.
    assert_eq!(a.incr_by("spent", 1, forever).unwrap(), 401);
    let day = Duration::from_secs(86_400);
    a.add("today", 7, day).unwrap();
    assert_eq!(total_once(&b, "today", day, 7), 7, "windows as incr_by's");
}

#[test]
fn a_window_and_a_bucket_hold_across_replicas() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (a, b) = (replica(&server), replica(&server));
    let window = Duration::from_millis(400);
    a.incr_by("calls", 1, window).unwrap();
    assert_eq!(b.incr_by("calls", 1, window).unwrap(), 2);
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(
        a.get("calls", window).unwrap(),
        0,
        "a new window counts from 0"
    );
    // A burst of 4 shared by both: exactly 4 takes succeed.
    let allowed = (0..10)
        .filter(|i| {
            let store = if i % 2 == 0 { &a } else { &b };
            store.take("bucket", 1, 0.5, 4).unwrap().allowed
        })
        .count();
    assert_eq!(allowed, 4);
    let refused = b.take("bucket", 1, 0.5, 4).unwrap();
    assert!(!refused.allowed);
    assert!(refused.wait > Duration::from_secs(1), "{:?}", refused.wait);
}

#[test]
fn an_outage_follows_each_policy_is_said_once_and_ends_when_the_server_returns() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let lines = Arc::clone(&said);
    let service = StateService::new(Arc::new(replica(&server)), move |line| {
        lines.lock().unwrap().push(line.to_owned());
    });
    let forever = Duration::ZERO;
    let counted = service
        .incr_by(FailPolicy::Closed, "k", 1, forever)
        .unwrap();
    assert!(counted.shared);
    server.kill();
    let first = service
        .incr_by(FailPolicy::Closed, "k", 1, forever)
        .unwrap_err()
        .to_string();
    // What a gate (and so a client) is told names neither the store nor
    // its error: the operator's line does.
    assert!(
        first.contains("unavailable") && !first.contains(&server.port.to_string()),
        "{first}"
    );
    for _ in 0..20 {
        let refused = service
            .incr_by(FailPolicy::Closed, "k", 1, forever)
            .unwrap_err()
            .to_string();
        assert_eq!(refused, first);
        let open = service.incr_by(FailPolicy::Open, "k", 1, forever).unwrap();
        assert!(!open.shared, "counted in process while the store is down");
    }
    assert!(server.restart());
    std::thread::sleep(Duration::from_millis(1100));
    let back = service
        .incr_by(FailPolicy::Closed, "k", 1, forever)
        .unwrap();
    assert!(back.shared);
    assert_eq!(
        back.value, 1,
        "a restarted (empty) server counts from its own state"
    );
    let said = said.lock().unwrap();
    assert_eq!(
        said.len(),
        2,
        "one line when it went, one when it came back: {said:?}"
    );
    assert!(
        !said[0].contains('\n')
            && said[0].contains("unavailable")
            && said[0].contains(&server.url()),
        "names the store: {}",
        said[0]
    );
}
