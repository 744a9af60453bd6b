//! What a new user meets first, through the built `chimera` binary: help
//! and usage errors, a mistyped pack name, the missing `--model`, status
//! lines for long waits, the readable transcript saying each thing once,
//! token usage at the end of a run, the kept demo workspace, the prompt of
//! `--turns-from-stdin` — and no test pack beside the binary.

use chimera_host::plugins::platform::library_file_name;
use chimera_tests::cli::{command, Ran};
use chimera_tests::http::{Reply, Server};
use chimera_tests::{chimera_bin, test_packs_dir, TEST_PACKS};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

fn chimera(cwd: &Path, args: &[&str], stdin: &str) -> Ran {
    chimera_tests::cli::chimera(cwd, args, &[], stdin)
}

fn write_script(dir: &Path, responses: &Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.display().to_string()
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// A pseudo-terminal: `terminal` becomes a child's stdin (a terminal to
/// it), and what the test writes to `keyboard` is typed on it.
struct Pty {
    keyboard: std::fs::File,
    terminal: std::fs::File,
}

fn pty() -> Pty {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let keyboard = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("open a pty");
    grantpt(&keyboard).expect("grantpt");
    unlockpt(&keyboard).expect("unlockpt");
    let name = ptsname(&keyboard, Vec::new()).expect("ptsname");
    let no_controlling_terminal = i32::try_from(rustix::fs::OFlags::NOCTTY.bits()).unwrap();
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(no_controlling_terminal)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
        .expect("open the pty's terminal side");
    Pty {
        keyboard: keyboard.into(),
        terminal,
    }
}

/// `chimera <args>` in `cwd` with a terminal for stdin on which `typed` is
/// typed (`\x04`, Ctrl-D, ends the input), run to completion.
pub(crate) fn chimera_on_a_terminal(cwd: &Path, args: &[&str], typed: &str) -> Ran {
    let Pty {
        mut keyboard,
        terminal,
    } = pty();
    let child = command(cwd, args, &[])
        .stdin(Stdio::from(terminal))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chimera");
    keyboard.write_all(typed.as_bytes()).expect("type");
    let output = child.wait_with_output().expect("chimera runs");
    drop(keyboard);
    Ran { output }
}

#[test]
fn a_bare_chimera_prints_its_help_on_stderr_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let ran = chimera(dir.path(), &[], "");
    assert_eq!(ran.status(), 2);
    assert!(ran.stdout().is_empty(), "{}", ran.stdout());
    let help = ran.stderr();
    assert!(
        help.starts_with("Chimera runs an AI coding agent"),
        "{help}"
    );
    for expected in ["chimera demo", "Usage: chimera", "run ", "packs "] {
        assert!(help.contains(expected), "missing {expected:?} in:\n{help}");
    }
}

#[test]
fn help_opens_with_what_chimera_is_and_the_commands_to_start_with() {
    let dir = tempfile::tempdir().unwrap();
    let ran = chimera(dir.path(), &["--help"], "");
    assert_eq!(ran.status(), 0);
    let help = ran.stdout();
    let first = help.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Chimera runs an AI coding agent") && first.contains("packs"),
        "{first}"
    );
    for start in [
        "chimera demo",
        "chimera packs list",
        "chimera run --provider openai",
    ] {
        assert!(help.contains(start), "missing {start:?} in:\n{help}");
    }
}

#[test]
fn a_mistyped_flag_or_command_gets_clap_s_whole_error_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let flag = chimera(dir.path(), &["run", "--scirpt", "x.json", "hi"], "");
    assert_eq!(flag.status(), 2);
    let line = flag.error_line();
    assert!(
        line.starts_with("error: unexpected argument '--scirpt' found"),
        "{line}"
    );
    assert!(
        line.contains("tip: a similar argument exists: '--script'"),
        "{line}"
    );
    assert!(line.ends_with("(see chimera run --help)"), "{line}");

    let subcommand = chimera(dir.path(), &["dmeo"], "");
    assert_eq!(subcommand.status(), 2);
    let line = subcommand.error_line();
    assert!(
        line.contains("tip: a similar subcommand exists: 'demo'"),
        "{line}"
    );
}

#[test]
fn a_mistyped_pack_name_suggests_the_closest_pack_and_packs_list() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), &json!([{"content": "done"}]));
    let typo = chimera(
        dir.path(),
        &["run", "--pack", "plan-gat", "--script", &script, "hi"],
        "",
    );
    assert_eq!(typo.status(), 3);
    let line = typo.error_line();
    assert!(
        line.contains("no pack entry point named 'plan-gat'"),
        "{line}"
    );
    assert!(line.contains("did you mean 'plan-gate'?"), "{line}");
    assert!(line.contains("`chimera packs list`"), "{line}");

    let nothing_close = chimera(
        dir.path(),
        &["run", "--pack", "zzzzzzzzzz", "--script", &script, "hi"],
        "",
    );
    assert_eq!(nothing_close.status(), 3);
    let line = nothing_close.error_line();
    assert!(!line.contains("did you mean"), "{line}");
    assert!(line.contains("`chimera packs list`"), "{line}");
}

#[test]
fn a_provider_without_a_model_names_the_missing_model_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    // No prompt, no key, a missing workspace and a malformed header: the
    // model is what is asked for first.
    for provider in ["openai", "anthropic"] {
        let ran = chimera(
            dir.path(),
            &[
                "run",
                "--provider",
                provider,
                "--workspace",
                "/nonexistent/chimera-workspace",
                "--header",
                "not a header",
            ],
            "",
        );
        assert_eq!(ran.status(), 2);
        assert_eq!(
            ran.error_line(),
            format!("error: --provider {provider} needs --model M")
        );
    }
}

/// An OpenAI-compatible server that answers 429 with `Retry-After: 3`
/// once, then `done` with a usage of 20 in / 2 out.
fn slow_server() -> Server {
    Server::start(vec![
        Reply::status(429, &[("retry-after", "3")], "slow down"),
        Reply::json(json!({
            "choices": [{"message": {"role": "assistant", "content": "done"}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 2}
        })),
    ])
}

fn spawn_against(server: &Server, dir: &Path, json_mode: bool) -> Child {
    let base = format!("{}/v1", server.url);
    let mut args = vec![
        "run",
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--model",
        "gpt-x",
    ];
    if json_mode {
        args.push("--json");
    }
    args.push("hi");
    command(dir, &args, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chimera")
}

#[test]
fn a_retry_wait_and_a_slow_model_call_show_status_lines_on_stderr_in_readable_mode_only() {
    let dir = tempfile::tempdir().unwrap();
    // Both runs wait out the same three seconds side by side.
    let (readable_server, json_server) = (slow_server(), slow_server());
    let readable = spawn_against(&readable_server, dir.path(), false);
    let json_mode = spawn_against(&json_server, dir.path(), true);
    let readable = Ran {
        output: readable.wait_with_output().unwrap(),
    };
    let json_mode = Ran {
        output: json_mode.wait_with_output().unwrap(),
    };

    assert_eq!(readable.status(), 0, "{}", readable.stderr());
    let status = readable.stderr();
    assert!(
        status.contains("the provider answered HTTP 429: retry 1 of 3 in 3 s…"),
        "{status}"
    );
    // The call took three seconds at least: past the one the line waits for.
    assert!(
        status.contains("waiting for the model (gpt-x)…"),
        "{status}"
    );
    let transcript = readable.stdout();
    assert!(
        !transcript.contains("HTTP 429") && !transcript.contains("waiting for"),
        "status lines stay off stdout: {transcript}"
    );
    assert!(
        transcript.contains("✓ done · tokens: 20 in / 2 out"),
        "{transcript}"
    );

    assert_eq!(json_mode.status(), 0, "{}", json_mode.stderr());
    assert!(
        json_mode.stderr().is_empty(),
        "no status lines with --json: {}",
        json_mode.stderr()
    );
    let end = json_mode.of_type("run_end").pop().expect("run_end");
    assert_eq!(end["usage"]["turn"]["input_tokens"], 20);
    assert_eq!(end["usage"]["turn"]["output_tokens"], 2);
    assert_eq!(json_server.requests().len(), 2, "one retry");
}

/// A script that calls `think` once, then answers `done`.
fn think_then_done(dir: &Path) -> String {
    write_script(
        dir,
        &json!([
            {"tool_calls": [{"id": "t1", "name": "think", "arguments": {"thought": "plan"}}]},
            {"content": "done"}
        ]),
    )
}

#[test]
fn an_approval_prompt_on_a_terminal_says_the_run_waits_for_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let script = think_then_done(dir.path());
    let readable = chimera_on_a_terminal(
        dir.path(),
        &["run", "--ask", "think", "--script", &script, "hi"],
        "y\n",
    );
    assert_eq!(readable.status(), 0, "{}", readable.stderr());
    let stderr = readable.stderr();
    let waiting = "waiting for your answer: the run is paused until you answer\n";
    assert_eq!(count(&stderr, waiting), 1, "{stderr}");
    assert!(
        stderr.find(waiting) < stderr.find("allow think("),
        "the waiting line comes before the prompt: {stderr}"
    );
    assert!(
        readable.stdout().contains("← think [t1]"),
        "approved: {}",
        readable.stdout()
    );

    let json_mode = chimera_on_a_terminal(
        dir.path(),
        &["run", "--json", "--ask", "think", "--script", &script, "hi"],
        "y\n",
    );
    assert_eq!(json_mode.status(), 0, "{}", json_mode.stderr());
    let stderr = json_mode.stderr();
    assert!(stderr.contains("allow think("), "{stderr}");
    assert!(!stderr.contains("waiting for"), "{stderr}");
}

#[test]
fn turns_from_stdin_prompt_on_a_terminal_and_not_from_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let responses = json!([{"content": "one"}, {"content": "two"}]);
    let script = write_script(dir.path(), &responses);
    let args = ["run", "--turns-from-stdin", "--script", &script];

    let piped = chimera(dir.path(), &args, "first\nsecond\n");
    assert_eq!(piped.status(), 0, "{}", piped.stderr());
    assert!(!piped.stderr().contains("> "), "{}", piped.stderr());
    assert_eq!(count(&piped.stdout(), "» user:"), 2);

    // One prompt before each line read: "first", then the end of input.
    let typed = chimera_on_a_terminal(dir.path(), &args, "first\n\u{4}");
    assert_eq!(typed.status(), 0, "{}", typed.stderr());
    assert_eq!(count(&typed.stderr(), "> "), 2, "{:?}", typed.stderr());
    assert_eq!(count(&typed.stdout(), "» user: first"), 1);
}

#[test]
fn the_readable_transcript_says_a_block_and_the_final_answer_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &json!([
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
            {"content": "all done here"}
        ]),
    );
    let ran = chimera(
        dir.path(),
        &["run", "--pack", "plan-gate", "--script", &script, "go"],
        "",
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let stdout = ran.stdout();
    assert_eq!(count(&stdout, "no plan recorded this turn"), 1, "{stdout}");
    assert_eq!(count(&stdout, "all done here"), 1, "{stdout}");
    assert_eq!(stdout.lines().last(), Some("✓ done"), "{stdout}");

    // A turn blocked before the model: the reason once on stdout; the
    // closing line names who blocked it.
    let reason = "Input contains prohibited term: \"forbidden\"";
    let blocked = chimera(
        dir.path(),
        &[
            "run",
            "--pack",
            r#"stop-words={"words": ["forbidden"]}"#,
            "--script",
            &script,
            "say forbidden",
        ],
        "",
    );
    assert_eq!(blocked.status(), 1);
    let stdout = blocked.stdout();
    assert_eq!(count(&stdout, reason), 1, "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("✗ failed: blocked by stop-words/")),
        "{stdout}"
    );
    let line = blocked.error_line();
    assert_eq!(count(&line, reason), 1, "{line}");
}

#[test]
fn run_end_reports_the_turn_s_and_the_session_s_token_usage_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &json!([
            {"content": "one", "usage": {"input_tokens": 100, "output_tokens": 10}},
            {"content": "two", "usage": {"input_tokens": 200, "output_tokens": 20}}
        ]),
    );
    let prices = dir.path().join("prices.json");
    std::fs::write(&prices, r#"{"scripted": {"input": 1.0, "output": 2.0}}"#).unwrap();
    let prices = prices.display().to_string();
    let args = [
        "run",
        "--script",
        &script,
        "--prices",
        &prices,
        "--turns-from-stdin",
        "first",
    ];

    let mut json_args = args.to_vec();
    json_args.insert(1, "--json");
    let ran = chimera(dir.path(), &json_args, "second\n");
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let usage: Vec<Value> = ran
        .of_type("run_end")
        .into_iter()
        .map(|end| end["usage"].clone())
        .collect();
    let tokens = |u: &Value| {
        (
            u["input_tokens"].as_u64().unwrap(),
            u["output_tokens"].as_u64().unwrap(),
        )
    };
    let cost = |u: &Value| u["cost_usd"].as_f64().unwrap();
    assert_eq!(usage.len(), 2);
    assert_eq!(tokens(&usage[0]["turn"]), (100, 10));
    assert_eq!(tokens(&usage[0]["session"]), (100, 10));
    assert_eq!(tokens(&usage[1]["turn"]), (200, 20));
    assert_eq!(tokens(&usage[1]["session"]), (300, 30));
    // USD per million tokens: 100 × 1 + 10 × 2, then 200 × 1 + 20 × 2.
    assert!((cost(&usage[0]["turn"]) - 120e-6).abs() < 1e-12);
    assert!((cost(&usage[1]["turn"]) - 240e-6).abs() < 1e-12);
    assert!((cost(&usage[1]["session"]) - 360e-6).abs() < 1e-12);

    let readable = chimera(dir.path(), &args, "second\n");
    assert_eq!(readable.status(), 0, "{}", readable.stderr());
    let closing: Vec<String> = readable
        .stdout()
        .lines()
        .filter(|l| l.starts_with('✓'))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        closing,
        [
            "✓ done · tokens: 100 in / 10 out · $0.0001",
            "✓ done · tokens: 200 in / 20 out · $0.0002 (session: 300 in / 30 out · $0.0004)"
        ]
    );
}

/// The directory a `Workspace kept at`-style `line` names, checked to be
/// the demo's workspace (it holds the file the demo writes).
fn kept_workspace(line: &str) -> PathBuf {
    let (_, path) = line
        .split_once(" kept at ")
        .unwrap_or_else(|| panic!("no path in {line:?}"));
    let path = PathBuf::from(path);
    assert!(path.join("config.txt").is_file(), "{}", path.display());
    path
}

#[test]
fn demo_keep_workspace_names_the_kept_directory_with_and_without_json() {
    let dir = tempfile::tempdir().unwrap();
    let readable = chimera(dir.path(), &["demo", "--keep-workspace"], "");
    assert_eq!(readable.status(), 0, "{}", readable.stderr());
    let stdout = readable.stdout();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Workspace kept at "))
        .unwrap_or_else(|| panic!("no kept path in:\n{stdout}"));
    std::fs::remove_dir_all(kept_workspace(line)).unwrap();

    let json_mode = chimera(dir.path(), &["demo", "--json", "--keep-workspace"], "");
    assert_eq!(json_mode.status(), 0, "{}", json_mode.stderr());
    assert!(!json_mode.events().is_empty(), "stdout is JSON lines only");
    let stderr = json_mode.stderr();
    let line = stderr
        .lines()
        .find(|l| l.starts_with("workspace kept at "))
        .unwrap_or_else(|| panic!("no kept path on stderr:\n{stderr}"));
    std::fs::remove_dir_all(kept_workspace(line)).unwrap();
}

#[test]
fn no_test_pack_lies_beside_the_chimera_binary_after_a_workspace_build() {
    // `chimera_bin` is in the directory the workspace build filled.
    let beside = chimera_bin().parent().unwrap().to_owned();
    assert!(
        beside.join(library_file_name("plan-gate")).is_file(),
        "the bundled packs are beside the binary: {}",
        beside.display()
    );
    for package in TEST_PACKS {
        let file = library_file_name(package);
        assert!(
            !beside.join(&file).exists(),
            "{file} beside {}",
            beside.display()
        );
        assert!(
            test_packs_dir().join(&file).is_file(),
            "{file} is built where the tests look"
        );
    }
}
