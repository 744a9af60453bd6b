//! `chimera run --provider anthropic` against a real `mockllm` server (the
//! Python package, pinned in the SDK venv: see `chimera_tests::python`), a
//! mock model server users point agents at in their own tests. Its Anthropic stream
//! ends with `data: [DONE]`, as the chat-completions stream does, which
//! the Messages API never sends.

use chimera_tests::cli::{chimera, Ran};
use serde_json::Value;
use std::fs::File;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the mock answers the prompt `say hi` with.
const RESPONSES: &str = r#"responses:
  "say hi": "Hello from the mock."
"#;

/// A model name `mockllm` counts tokens for without asking the network
/// for an encoding (it knows no Claude model, and falls back to words).
const MODEL: &str = "claude-3-haiku-20240307";

/// A `mockllm` server on a loopback port of its own, killed when dropped.
struct MockLlm {
    child: Child,
    url: String,
}

impl MockLlm {
    /// Starts one in `dir` answering from [`RESPONSES`]; `None` (said in one
    /// line) when the venv cannot be had here. Run as `mockllm start`
    /// runs it (`uvicorn` on `mockllm.server:app`, the responses file
    /// named by `MOCKLLM_RESPONSES_FILE`), without the reloader that
    /// command cannot turn off.
    fn start(dir: &Path) -> Option<MockLlm> {
        let python = chimera_tests::python::sdk_python()?;
        let responses = dir.join("responses.yml");
        std::fs::write(&responses, RESPONSES).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let log = dir.join("mockllm.log");
        let output = File::create(&log).unwrap();
        let mut child = Command::new(python)
            .args(["-m", "uvicorn", "mockllm.server:app", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .env("MOCKLLM_RESPONSES_FILE", &responses)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .expect("the venv's python runs");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = child.try_wait().unwrap();
            assert!(
                exited.is_none() && started.elapsed() < Duration::from_secs(30),
                "mockllm did not listen on port {port} ({exited:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(MockLlm {
            child,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// `chimera run --provider anthropic` against it, `say hi`, with
    /// `extra` flags.
    fn run(&self, dir: &Path, extra: &[&str]) -> Ran {
        let mut args = vec![
            "run",
            "--provider",
            "anthropic",
            "--base-url",
            &self.url,
            "--model",
            MODEL,
            "--json",
        ];
        args.extend(extra);
        args.push("say hi");
        chimera(dir, &args, &[("ANTHROPIC_API_KEY", "mock-key")], "")
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_end(ran: &Ran) -> Value {
    ran.of_type("run_end").pop().expect("a run_end event")
}

#[test]
fn a_streamed_run_against_mockllm_ends_at_its_done_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mock) = MockLlm::start(dir.path()) else {
        return;
    };
    // The whole reply: the mock answers the prompt, so it is the one asked.
    let whole = mock.run(dir.path(), &[]);
    assert_eq!(whole.status(), 0, "{}", whole.stderr());
    assert_eq!(run_end(&whole)["output"], "Hello from the mock.");

    let streamed = mock.run(dir.path(), &["--stream"]);
    assert_eq!(
        streamed.status(),
        0,
        "{}\n{}",
        streamed.stdout(),
        streamed.stderr()
    );
    let end = run_end(&streamed);
    assert_eq!(end["success"], true, "{end}");
    assert_eq!(end["reason"], "completed", "{end}");
    // mockllm 0.0.8 sends each piece of its streamed text as a
    // `content_block_delta` wrapped in a `message_delta`, under no event
    // name: no Messages event carries text that way, and the official
    // `anthropic` SDK reads no event of that stream either. What this
    // run shows is that the stream, `[DONE]` and all, is read to its end
    // without an error.
    assert_eq!(end["output"], "", "{end}");
    assert!(streamed.stderr().is_empty(), "{}", streamed.stderr());
}
