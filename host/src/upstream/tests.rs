//! The pool's lanes: an idle connection is reused on the lane that made it.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A keep-alive server answering every request `ok`, on a loopback
/// port; how many connections it accepted.
fn counting_server() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("its address").to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("a second handle");
                let mut lines = BufReader::new(stream).lines();
                while let Some(Ok(line)) = lines.next() {
                    if line.is_empty()
                        && writer
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (address, accepted)
}

/// One GET, its body read to the end (its connection given back).
async fn fetch(client: &Client) {
    let mut reply = client
        .request(Method::GET, "/", None, HeaderMap::new(), Bytes::new())
        .await
        .expect("an answer");
    assert_eq!(reply.status, StatusCode::OK);
    while reply.body.chunk().await.expect("its body").is_some() {}
}

#[test]
fn an_idle_connection_is_reused_on_the_lane_that_made_it_only() {
    let (address, accepted) = counting_server();
    let timeout = Some(Duration::from_secs(5));
    let client = Arc::new(
        Client::new(
            &format!("http://{address}"),
            Duration::from_secs(5),
            timeout,
        )
        .expect("a client"),
    );
    let first_done = Arc::new(tokio::sync::watch::channel(false).0);
    let second_done = Arc::new(tokio::sync::watch::channel(false).0);
    crate::lanes::run(2, |lane| {
        let client = Arc::clone(&client);
        let (first_done, second_done) = (Arc::clone(&first_done), Arc::clone(&second_done));
        async move {
            if lane == 1 {
                fetch(&client).await;
                first_done.send_replace(true);
                // Its runtime (and so its idle connection) lives on
                // while lane 0 asks.
                let _ = second_done.subscribe().wait_for(|done| *done).await;
            } else {
                let _ = first_done.subscribe().wait_for(|done| *done).await;
                // Lane 1's idle connection is not this lane's: a new
                // one, then that one again.
                fetch(&client).await;
                fetch(&client).await;
                second_done.send_replace(true);
            }
        }
    })
    .expect("two lanes");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}
