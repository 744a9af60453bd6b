//! Shared test support: builds the workspace's pack libraries once per test
//! run and says where they are.

#![allow(
    clippy::must_use_candidate,
    clippy::missing_panics_doc,
    clippy::format_push_string,
    reason = "test support: its helpers panic on a broken set-up by design, and every result is used"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_owned()
}

/// The directory cargo puts this profile's final artifacts in
/// (`target/debug`), found from the running test binary (`target/debug/deps/…`).
pub fn artifact_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in <target>/<profile>/deps")
        .to_owned()
}

/// The built `chimera` binary.
pub fn chimera_bin() -> PathBuf {
    packs_dir().join(format!("chimera{}", std::env::consts::EXE_SUFFIX))
}

fn release() -> bool {
    artifact_dir().file_name().is_some_and(|n| n == "release")
}

/// `<target>/abi-fixtures`: where projects built apart from the workspace go.
fn fixtures_target() -> PathBuf {
    artifact_dir()
        .parent()
        .expect("profile dir has a parent")
        .join("abi-fixtures")
}

/// Runs `cargo build --quiet <args>` in `dir` with this profile; panics
/// with cargo's output when it fails.
fn cargo_build(dir: &Path, args: &[&str], env: &[(&str, &str)], what: &str) {
    cargo(dir, "build", args, env, what);
}

/// Runs `cargo <command> --quiet <args>` in `dir` with this profile;
/// panics with cargo's output when it fails.
fn cargo(dir: &Path, command: &str, args: &[&str], env: &[(&str, &str)], what: &str) {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(dir).args([command, "--quiet"]).args(args);
    if release() {
        cargo.arg("--release");
    }
    for (key, value) in env {
        cargo.env(key, value);
    }
    let output = cargo.output().expect("run cargo build");
    assert!(
        output.status.success(),
        "building {what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds the workspace once per test run, as a user does (`cargo build
/// --workspace`, with this profile; little is left to do after `cargo test
/// --workspace`), and returns the artifact directory: the `chimera` binary
/// and the bundled packs beside it, and no test pack (see
/// [`test_packs_dir`]). One build, before any test runs the binary: a
/// later build with other packages selected could relink what a running
/// test uses.
pub fn packs_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        cargo_build(&workspace_root(), &["--workspace"], &[], "the workspace");
        artifact_dir()
    })
}

/// The test packs: the test double, a pack with load-time code, and a
/// library that is no pack. Workspace members, so they are linted and
/// locked with the rest, but built there as plain Rust libraries only
/// (the fixture is also linked into the tests, to load it in-process):
/// their shared libraries are built by the tests alone, into
/// [`test_packs_dir`], so no release build puts a test pack beside the
/// `chimera` binary.
pub const TEST_PACKS: &[&str] = &[
    "chimera-fixture-pack",
    "chimera-not-a-pack",
    "chimera-hostile-pack",
];

/// Builds the [`TEST_PACKS`]' shared libraries once per test run and
/// returns the directory holding them (under `<target>/abi-fixtures`, where
/// only the tests look).
pub fn test_packs_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = fixtures_output().join("test-packs");
        for package in TEST_PACKS {
            shared_library(package, &[], &dir);
        }
        dir
    })
}

/// Both directories of built packs: the bundled ones and the test packs,
/// for a plugin manager that loads either by name.
pub fn pack_dirs() -> Vec<PathBuf> {
    vec![packs_dir().to_owned(), test_packs_dir().to_owned()]
}

/// Makes a FIFO at `path`: what a hostile file in a path's place looks
/// like (opening it for reading would wait for a writer).
#[cfg(unix)]
pub fn make_fifo(path: impl AsRef<Path>) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path.as_ref(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("make a FIFO");
}

/// The shared library of `package` (`chimera-fixture-pack` → `…/libchimera_fixture_pack.so`):
/// in [`test_packs_dir`] for a test pack, else in [`packs_dir`].
pub fn pack_path(package: &str) -> PathBuf {
    let dir = if TEST_PACKS.contains(&package) {
        test_packs_dir()
    } else {
        packs_dir()
    };
    dir.join(chimera_host::plugins::platform::library_file_name(package))
}

/// `<target>/abi-fixtures/<profile>`: where cargo puts what it builds there.
fn fixtures_output() -> PathBuf {
    fixtures_target().join(if release() { "release" } else { "debug" })
}

/// Builds workspace package `package` as a shared library (`cargo rustc
/// --crate-type cdylib`) into `<target>/abi-fixtures` with `env` set, and
/// copies it into `into`; returns the copy. One build at a time: two builds
/// of one package (the fixture and its `v2`) write the same file there.
fn shared_library(package: &str, env: &[(&str, &str)], into: &Path) -> PathBuf {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let target_arg = fixtures_target().display().to_string();
    cargo(
        &workspace_root(),
        "rustc",
        &[
            "-p",
            package,
            "--lib",
            "--crate-type",
            "cdylib",
            "--target-dir",
            &target_arg,
        ],
        env,
        package,
    );
    let file = chimera_host::plugins::platform::library_file_name(package);
    std::fs::create_dir_all(into).expect("create the test packs' directory");
    let copy = into.join(&file);
    let temporary = into.join(format!(".{file}.tmp"));
    std::fs::copy(fixtures_output().join(&file), &temporary).expect("copy the built library");
    std::fs::rename(&temporary, &copy).expect("rename it into place");
    copy
}

/// Projects built outside the workspace, each on its own, into
/// `<target>/abi-fixtures`: packs built against the frozen ABI snapshot, with
/// a deliberately different layout, and the out-of-tree example pack.
pub const OUT_OF_TREE: &[&str] = &[
    "tests/abi-fixtures/frozen-pack",
    "tests/abi-fixtures/mismatch-pack",
    "examples/third-party-pack",
];

/// Builds the [`OUT_OF_TREE`] projects once per test run and returns the
/// directory holding their libraries.
pub fn out_of_tree_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let target = fixtures_target();
        let target_arg = target.display().to_string();
        for project in OUT_OF_TREE {
            cargo_build(
                &workspace_root().join(project),
                &["--target-dir", &target_arg],
                &[],
                project,
            );
        }
        target.join(if release() { "release" } else { "debug" })
    })
}

/// `<target>/abi-fixtures`, for a test that builds a project of its own
/// apart from the workspace: there it shares the compiled dependencies of
/// the [`OUT_OF_TREE`] projects, and its libraries land beside theirs in
/// [`out_of_tree_dir`].
pub fn out_of_tree_target() -> PathBuf {
    fixtures_target()
}

/// The cargo flags that build with this test run's profile (`--release`
/// for a release run, none for a debug one).
pub fn profile_args() -> &'static [&'static str] {
    if release() {
        &["--release"]
    } else {
        &[]
    }
}

pub mod tools {
    //! Tools the scenarios use: `echo`, `dangerous_delete`, and fixed-output tools.

    use chimera_host::tools::{Tool, ToolContext, ToolError};
    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// `echo(message)` → `Echo: <message>`.
    pub struct Echo;

    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "Echoes its message."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})
        }
        fn execute(&self, arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
            Ok(format!(
                "Echo: {}",
                arguments["message"].as_str().unwrap_or_default()
            ))
        }
    }

    /// `dangerous_delete()`: records that it ran, answers `deleted everything`.
    #[derive(Default, Clone)]
    pub struct Dangerous {
        /// Set when it ran.
        pub ran: Arc<AtomicBool>,
    }

    impl Dangerous {
        /// Whether it ran.
        pub fn ran(&self) -> bool {
            self.ran.load(Ordering::SeqCst)
        }
    }

    impl Tool for Dangerous {
        fn name(&self) -> &str {
            "dangerous_delete"
        }
        fn description(&self) -> &str {
            "Deletes everything."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
            self.ran.store(true, Ordering::SeqCst);
            Ok("deleted everything".to_owned())
        }
    }

    /// A tool named `name` that always returns `output`.
    pub struct Fixed {
        /// Tool name.
        pub name: &'static str,
        /// Its output.
        pub output: &'static str,
    }

    impl Tool for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> &str {
            "Returns a fixed text."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        fn execute(&self, _arguments: &Value, _cx: &ToolContext<'_>) -> Result<String, ToolError> {
            Ok(self.output.to_owned())
        }
    }
}

/// The fixture pack rebuilt with `CHIMERA_FIXTURE_TAG=v2`: a second,
/// genuinely different build of the same pack (its `BUILD_TAG` is `v2`),
/// built once per test run into `<target>/abi-fixtures`.
pub fn fixture_v2() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            shared_library(
                "chimera-fixture-pack",
                &[("CHIMERA_FIXTURE_TAG", "v2")],
                &fixtures_output().join("fixture-v2"),
            )
        })
        .clone()
}

/// Publishes `bytes` as `dir/name` the way a careful writer does: write a
/// temporary file, then rename it into place.
pub fn publish(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let target = dir.join(name);
    let temporary = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temporary, bytes).expect("write the temporary file");
    std::fs::rename(&temporary, &target).expect("rename into place");
    target
}

pub mod http {
    //! A loopback HTTP/1.1 server for provider tests: scripted replies,
    //! recorded requests, no outside network.

    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// One request as it reached the wire.
    #[derive(Debug, Clone)]
    pub struct Request {
        /// `POST` …
        pub method: String,
        /// The path.
        pub path: String,
        /// Header names lower-cased, in order.
        pub headers: Vec<(String, String)>,
        /// The body.
        pub body: String,
    }

    impl Request {
        /// The first header named `name` (lower-case).
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        }

        /// The body as JSON.
        pub fn json(&self) -> serde_json::Value {
            serde_json::from_str(&self.body).expect("a JSON body")
        }
    }

    /// One scripted reply.
    #[derive(Debug, Clone)]
    pub enum Reply {
        /// A complete response.
        Body {
            /// Status code.
            status: u16,
            /// Extra headers.
            headers: Vec<(String, String)>,
            /// Body text.
            body: String,
        },
        /// A server-sent-event stream, one chunk per item, flushed apart.
        Stream(Vec<String>),
        /// A server-sent-event stream, one chunk per item, each flushed
        /// this long after the one before (a model at reading pace).
        Paced(Vec<String>, Duration),
        /// An `OpenAI`-compatible model answering with the text `deltas`:
        /// streamed, one event per delta `pace` apart, when the request
        /// asks for `"stream": true`; otherwise one JSON completion.
        Model(Vec<String>, Duration),
        /// A server-sent-event stream made on the fly, never held whole:
        /// `first`, then `repeat` over and over until at least `bytes` bytes
        /// of body went out (or the client hung up).
        Generated {
            /// The body's beginning.
            first: String,
            /// What follows, repeated.
            repeat: String,
            /// How long the body gets, at least.
            bytes: u64,
        },
    }

    impl Reply {
        /// 200 with a JSON body.
        pub fn json(body: serde_json::Value) -> Reply {
            Reply::Body {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: body.to_string(),
            }
        }

        /// A status with a body and extra headers.
        pub fn status(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
            Reply::Body {
                status,
                headers: headers
                    .iter()
                    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                    .collect(),
                body: body.to_owned(),
            }
        }

        /// A redirect (`status`, e.g. 302) to `location`, with no body.
        pub fn redirect(status: u16, location: &str) -> Reply {
            Reply::status(status, &[("location", location)], "")
        }
    }

    /// The server: replies in order (the last one repeats), records requests.
    pub struct Server {
        /// `http://127.0.0.1:PORT`.
        pub url: String,
        requests: Arc<Mutex<Vec<Request>>>,
        sent: Arc<AtomicU64>,
    }

    impl Server {
        /// Starts serving `replies` on a free loopback port.
        pub fn start(replies: Vec<Reply>) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            let url = format!("http://{}", listener.local_addr().expect("address"));
            let requests = Arc::new(Mutex::new(Vec::new()));
            let seen = Arc::clone(&requests);
            let sent = Arc::new(AtomicU64::new(0));
            let counter = Arc::clone(&sent);
            std::thread::spawn(move || {
                let mut next = 0;
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let reply = replies[next.min(replies.len() - 1)].clone();
                    next += 1;
                    serve(stream, &reply, &seen, &counter);
                }
            });
            Server {
                url,
                requests,
                sent,
            }
        }

        /// Every request so far.
        pub fn requests(&self) -> Vec<Request> {
            self.requests.lock().unwrap().clone()
        }

        /// Body bytes of [`Reply::Generated`] replies the client accepted
        /// so far (the kernel's socket buffers included).
        pub fn generated_bytes_sent(&self) -> u64 {
            self.sent.load(Ordering::SeqCst)
        }
    }

    /// Writes `bytes` as one chunk of a chunked body.
    fn write_chunk(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
        stream.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
        stream.write_all(bytes)?;
        stream.write_all(b"\r\n")
    }

    /// Sends a [`Reply::Generated`] body, counting what went out into `sent`.
    fn generate(
        stream: &mut TcpStream,
        first: &str,
        repeat: &str,
        bytes: u64,
        sent: &AtomicU64,
    ) -> std::io::Result<()> {
        let mut total = 0u64;
        if !first.is_empty() {
            write_chunk(stream, first.as_bytes())?;
            total += first.len() as u64;
            sent.fetch_add(first.len() as u64, Ordering::SeqCst);
        }
        if !repeat.is_empty() {
            // About 64 KiB of whole repeats per chunk.
            let block = repeat.repeat((64 * 1024 / repeat.len()).max(1));
            while total < bytes {
                write_chunk(stream, block.as_bytes())?;
                total += block.len() as u64;
                sent.fetch_add(block.len() as u64, Ordering::SeqCst);
            }
        }
        stream.write_all(b"0\r\n\r\n")
    }

    /// Sends an event-stream body of `chunks`, `pace` apart.
    fn paced(stream: &mut TcpStream, chunks: &[String], pace: Duration) {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        );
        for chunk in chunks {
            let _ = stream.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
            let _ = stream.flush();
            std::thread::sleep(pace);
        }
        let _ = stream.write_all(b"0\r\n\r\n");
    }

    /// The `OpenAI` chat-completions stream of `deltas` (text only), as the
    /// event-stream chunks [`Reply::Stream`] and [`Reply::Paced`] send.
    pub fn openai_text_stream(deltas: &[&str]) -> Vec<String> {
        let mut events: Vec<String> = deltas
            .iter()
            .map(|text| {
                let chunk =
                    serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]});
                format!("data: {chunk}\n\n")
            })
            .collect();
        events.push("data: [DONE]\n\n".to_owned());
        events
    }

    /// Reads one request, records it (before replying, so a client that
    /// has its answer never races the record), then replies.
    fn serve(
        mut stream: TcpStream,
        reply: &Reply,
        seen: &Mutex<Vec<Request>>,
        sent: &AtomicU64,
    ) -> Option<()> {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let mut reader = BufReader::new(stream.try_clone().ok()?);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).ok()?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':')?;
            headers.push((name.trim().to_lowercase(), value.trim().to_owned()));
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        seen.lock().unwrap().push(Request {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        match reply {
            Reply::Body {
                status,
                headers,
                body,
            } => {
                let mut head = format!(
                    "HTTP/1.1 {status} Reply\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                let _ = stream.write_all(format!("{head}\r\n{body}").as_bytes());
            }
            Reply::Stream(chunks) => paced(&mut stream, chunks, Duration::from_millis(5)),
            Reply::Paced(chunks, pace) => paced(&mut stream, chunks, *pace),
            Reply::Model(deltas, pace) => {
                let asked: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
                if asked["stream"] == true {
                    paced(&mut stream, &openai_text_stream(&deltas), *pace);
                } else {
                    let whole = serde_json::json!({
                        "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": deltas.concat()}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
                    })
                    .to_string();
                    let _ = stream.write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{whole}",
                            whole.len()
                        )
                        .as_bytes(),
                    );
                }
            }
            Reply::Generated {
                first,
                repeat,
                bytes,
            } => {
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                );
                // The client hanging up ends the body early; that is the
                // point of most tests that use this.
                let _ = generate(&mut stream, first, repeat, *bytes, sent);
            }
        }
        let _ = stream.flush();
        Some(())
    }
}

pub mod slow_http {
    //! A loopback HTTP/1.1 server, async, that answers every request after
    //! a fixed delay and serves many connections at once: the model for
    //! tests and benchmarks of many concurrent sessions. It plays an
    //! OpenAI-compatible chat model: while the conversation it is sent has
    //! fewer than `tool_rounds` tool results, it calls `echo`; then it
    //! answers `done: <the first user message>`.

    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// The server (it serves until the process ends).
    pub struct SlowServer {
        /// `http://127.0.0.1:PORT`.
        pub url: String,
        answered: Arc<AtomicU64>,
    }

    impl SlowServer {
        /// Starts serving on a free loopback port, on a thread of its own.
        pub fn start(delay: Duration, tool_rounds: usize) -> SlowServer {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            listener
                .set_nonblocking(true)
                .expect("a non-blocking socket");
            let url = format!("http://{}", listener.local_addr().expect("address"));
            let answered = Arc::new(AtomicU64::new(0));
            let counter = Arc::clone(&answered);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the server's runtime");
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("a Tokio listener");
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let counter = Arc::clone(&counter);
                        tokio::spawn(async move {
                            if serve(stream, delay, tool_rounds).await.is_some() {
                                counter.fetch_add(1, Ordering::SeqCst);
                            }
                        });
                    }
                });
            });
            SlowServer { url, answered }
        }

        /// Requests answered so far.
        pub fn answered(&self) -> u64 {
            self.answered.load(Ordering::SeqCst)
        }
    }

    /// The reply to one chat request.
    fn reply(request: &Value, tool_rounds: usize) -> Value {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let results = messages.iter().filter(|m| m["role"] == "tool").count();
        let first_user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let message = if results < tool_rounds {
            let arguments = json!({"message": format!("{first_user} #{results}")});
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{results}"),
                "type": "function",
                "function": {"name": "echo", "arguments": arguments.to_string()}
            }]})
        } else {
            json!({"role": "assistant", "content": format!("done: {first_user}")})
        };
        json!({"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
    }

    /// Reads one request, waits `delay`, answers it and closes.
    async fn serve(mut stream: TcpStream, delay: Duration, tool_rounds: usize) -> Option<()> {
        let mut received = Vec::new();
        let mut buffer = [0u8; 8192];
        let head_end = loop {
            let read = stream.read(&mut buffer).await.ok()?;
            if read == 0 {
                return None;
            }
            received.extend_from_slice(&buffer[..read]);
            if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        while received.len() < head_end + length {
            let read = stream.read(&mut buffer).await.ok()?;
            if read == 0 {
                return None;
            }
            received.extend_from_slice(&buffer[..read]);
        }
        let request: Value = serde_json::from_slice(&received[head_end..head_end + length]).ok()?;
        tokio::time::sleep(delay).await;
        let body = reply(&request, tool_rounds).to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await.ok()?;
        stream.shutdown().await.ok()
    }
}

pub mod cli {
    //! Running the built `chimera` binary in tests: a clean environment, and
    //! the transcript and exit status read back.

    use serde_json::Value;
    use std::io::Write;
    use std::path::Path;
    use std::process::{Child, Command, Output, Stdio};
    use std::sync::mpsc::{self, Receiver};
    use std::time::Duration;

    /// Environment variables the binary reads that a test must not inherit.
    const INHERITED: &[&str] = &[
        "CHIMERA_PLUGIN_PATH",
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "CHIMERA_HOSTILE",
        "CHIMERA_LOG",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ];

    /// `chimera <args>` in `cwd`, with `env` set on a clean environment.
    pub fn command(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(super::chimera_bin());
        command.args(args).current_dir(cwd).env("NO_COLOR", "1");
        for name in INHERITED {
            command.env_remove(name);
        }
        // No per-user packs: a test names every plugins directory it uses.
        command.env("XDG_DATA_HOME", "/nonexistent/chimera-tests-data");
        // No per-user chimera.toml or trust store unless a test makes one.
        command.env("XDG_CONFIG_HOME", "/nonexistent/chimera-tests-config");
        for (key, value) in env {
            command.env(key, value);
        }
        command
    }

    /// A finished run.
    pub struct Ran {
        /// What the process left.
        pub output: Output,
    }

    impl Ran {
        /// The exit code (`None`: killed by a signal).
        pub fn code(&self) -> Option<i32> {
            self.output.status.code()
        }

        /// The exit code; panics when a signal ended the process.
        pub fn status(&self) -> i32 {
            self.code().expect("exited, not killed by a signal")
        }

        /// Standard output.
        pub fn stdout(&self) -> String {
            String::from_utf8_lossy(&self.output.stdout).into_owned()
        }

        /// Standard error.
        pub fn stderr(&self) -> String {
            String::from_utf8_lossy(&self.output.stderr).into_owned()
        }

        /// The single line on stderr (asserted single).
        pub fn error_line(&self) -> String {
            let stderr = self.stderr();
            assert_eq!(
                stderr.lines().count(),
                1,
                "one line on stderr, got: {stderr}"
            );
            stderr.trim_end().to_owned()
        }

        /// Every stdout line, parsed as JSON (panics on a line that is not).
        pub fn events(&self) -> Vec<Value> {
            self.stdout()
                .lines()
                .map(|line| {
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
                })
                .collect()
        }

        /// The events of one `type`.
        pub fn of_type(&self, kind: &str) -> Vec<Value> {
            self.events()
                .into_iter()
                .filter(|e| e["type"] == kind)
                .collect()
        }
    }

    /// Runs `chimera <args>` to completion, feeding `stdin`.
    pub fn chimera(
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: impl AsRef<[u8]>,
    ) -> Ran {
        let mut child = command(cwd, args, env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn chimera");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_ref())
            .expect("write stdin");
        Ran {
            output: child.wait_with_output().expect("chimera runs"),
        }
    }

    /// Reads a live child's stdout line by line (JSON, else the raw line).
    pub fn lines_of(child: &mut Child) -> Receiver<Value> {
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = sender.send(serde_json::from_str(&line).unwrap_or(Value::String(line)));
            }
        });
        receiver
    }

    /// Collects events up to and including the next one of `kind`.
    pub fn until(events: &Receiver<Value>, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = events
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no {kind} event; saw {seen:?}"));
            let done = event["type"] == kind;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// The stateful example pack (`examples/stateful-pack`, entry point
/// `call-quota`), built once per test run beside the other packs.
pub fn stateful_pack_path() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = packs_dir();
            cargo_build(
                &workspace_root(),
                &["-p", "stateful-pack"],
                &[],
                "the stateful example pack",
            );
            dir.join(chimera_host::plugins::platform::library_file_name(
                "stateful-pack",
            ))
        })
        .clone()
}

/// Writes `text` to `path` unless it already holds exactly that (so cargo
/// sees an unchanged file as unchanged).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))
            .expect("create the directory");
        std::fs::write(path, text).expect("write the file");
    }
}

/// Copies every file under `from` to the same place under `to`, leaving
/// files that already match alone.
fn copy_sources(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read the source directory") {
        let path = entry.expect("a directory entry").path();
        let target = to.join(path.file_name().expect("a named entry"));
        if path.is_dir() {
            copy_sources(&path, &target);
        } else {
            write_if_changed(
                &target,
                &std::fs::read_to_string(&path).expect("a source file"),
            );
        }
    }
}

/// The frozen-ABI fixture pack as if its snapshot had been released as
/// `chimera-plugin-api` `version`: the same sources, so the same layout;
/// only the crate version (recorded in the root module and in every type's
/// layout) differs. Its entry point is `frozen-fixture-<version>` with the
/// dots as dashes (`frozen-fixture-0-1-9`), so it never clashes with the
/// fixture itself. Built once per version per test run into
/// `<target>/abi-fixtures`; returns the library.
pub fn frozen_pack_released_as(version: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(v, _)| v == version) {
        return path.clone();
    }
    let slug = version.replace('.', "-");
    let fixtures = workspace_root().join("tests/abi-fixtures");
    let root = fixtures_target().join("released").join(&slug);
    let read = |path: &str| std::fs::read_to_string(fixtures.join(path)).expect("fixture file");
    copy_sources(
        &fixtures.join("frozen-api/src"),
        &root.join("frozen-api/src"),
    );
    let api_manifest = read("frozen-api/Cargo.toml");
    assert!(api_manifest.contains("\nversion = \"0.1.0\"\n"));
    write_if_changed(
        &root.join("frozen-api/Cargo.toml"),
        &api_manifest.replace(
            "\nversion = \"0.1.0\"\n",
            &format!("\nversion = \"{version}\"\n"),
        ),
    );
    let pack_source = read("pack.rs");
    assert!(pack_source.contains("\"frozen-fixture\""));
    write_if_changed(
        &root.join("pack/pack.rs"),
        &pack_source.replace("\"frozen-fixture\"", &format!("\"frozen-fixture-{slug}\"")),
    );
    let package = format!("frozen-pack-{slug}");
    write_if_changed(
        &root.join("pack/Cargo.toml"),
        &format!(
            "[package]\nname = \"{package}\"\nversion = \"1.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [workspace]\n\n[lib]\ncrate-type = [\"cdylib\"]\npath = \"pack.rs\"\n\n\
             [dependencies]\nchimera-plugin-api = {{ path = \"../frozen-api\" }}\nabi_stable = \"0.11.3\"\n"
        ),
    );
    // The fixture's own lock: the same dependency versions, already built.
    if !root.join("pack/Cargo.lock").exists() {
        std::fs::copy(
            fixtures.join("frozen-pack/Cargo.lock"),
            root.join("pack/Cargo.lock"),
        )
        .expect("copy the fixture's lock file");
    }
    let target = fixtures_target();
    cargo_build(
        &root.join("pack"),
        &["--target-dir", &target.display().to_string()],
        &[],
        &format!("the frozen fixture released as {version}"),
    );
    let path = target
        .join(if release() { "release" } else { "debug" })
        .join(chimera_host::plugins::platform::library_file_name(&package));
    built.push((version.to_owned(), path.clone()));
    path
}
