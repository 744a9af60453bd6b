//! Pack authoring through the binary: `chimera pack new` makes a crate that
//! builds, passes its own policy case under `chimera pack test` and `cargo
//! test`, and loads by name; `chimera pack test` shows a unified diff and
//! exits 1 when a decision changed, `--bless` rewrites the golden file, a
//! bad case file is one line with its line number; and a session recorded
//! from a real (mock) provider becomes a case that passes without calling
//! the model.

use chimera_tests::cli::{chimera, command, Ran};
use chimera_tests::http::{Reply, Server};
use chimera_tests::{
    chimera_bin, out_of_tree_dir, out_of_tree_target, profile_args, workspace_root,
};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// `chimera <args>` in `dir` with an empty stdin.
fn run(dir: &Path, args: &[&str]) -> Ran {
    chimera(dir, args, &[], "")
}

/// `chimera <args>` in `dir` with `CARGO_TARGET_DIR` set to `target`, or
/// unset.
fn run_where(dir: &Path, args: &[&str], target: Option<&str>) -> Ran {
    let mut command = command(dir, args, &[]);
    match target {
        Some(target) => command.env("CARGO_TARGET_DIR", target),
        None => command.env_remove("CARGO_TARGET_DIR"),
    };
    Ran {
        output: command.output().expect("chimera runs"),
    }
}

/// `cargo <args>` in `dir` with this run's profile and `env`; panics with
/// everything cargo and the tests printed when it fails.
fn cargo(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let target = out_of_tree_target().display().to_string();
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(dir)
        .args(args)
        .args(["--target-dir", &target])
        .args(profile_args())
        .envs(env.iter().copied())
        .output()
        .expect("run cargo");
    let printed = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "cargo {args:?} failed:\n{printed}");
    printed
}

/// The JSON lines of a golden file.
fn golden_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the golden file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn a_generated_pack_builds_passes_its_case_under_pack_test_and_cargo_test_and_loads_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("my-gate");
    let krate_arg = krate.display().to_string();
    let created = run(
        dir.path(),
        &["pack", "new", "my-gate", "--path", &krate_arg],
    );
    assert_eq!(created.status(), 0, "{}", created.stderr());
    let sdk = workspace_root().join("plugin-api").canonicalize().unwrap();
    assert!(
        created.stdout().contains(&format!(
            "SDK: chimera-plugin-api from {} (this chimera runs from a checkout",
            sdk.display()
        )),
        "{}",
        created.stdout()
    );
    // The next steps it prints are the ones that work where the author stands.
    assert!(
        created.stdout().contains(
            "chimera pack test .        # replay tests/cases/blocks-a-denied-command.toml"
        ),
        "{}",
        created.stdout()
    );
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("crate-type = [\"cdylib\", \"rlib\"]"));

    // Built like the other out-of-tree projects (same target directory and
    // locked versions, so their compiled dependencies are reused).
    let plugins = out_of_tree_dir();
    std::fs::copy(
        workspace_root().join("examples/third-party-pack/Cargo.lock"),
        krate.join("Cargo.lock"),
    )
    .unwrap();
    cargo(&krate, &["build", "--quiet"], &[]);
    let plugins_arg = plugins.display().to_string();

    // `chimera pack test .` where the author stands: cargo says where the
    // library is, with CARGO_TARGET_DIR set and without.
    let target = out_of_tree_target().display().to_string();
    let with_target_dir = run_where(&krate, &["pack", "test", "--isolated", "."], Some(&target));
    // Without it, cargo's default `target/` beside the manifest: a link to
    // the same build, so the crate's dependencies are not built again.
    std::os::unix::fs::symlink(out_of_tree_target(), krate.join("target")).unwrap();
    let in_the_crate = run_where(&krate, &["pack", "test", "--isolated", "."], None);
    for tested in [with_target_dir, in_the_crate] {
        assert_eq!(tested.status(), 0, "{}{}", tested.stdout(), tested.stderr());
        assert!(
            tested
                .stdout()
                .contains("case blocks-a-denied-command ... ok"),
            "{}",
            tested.stdout()
        );
    }

    let chimera = chimera_bin().display().to_string();
    let printed = cargo(&krate, &["test"], &[("CHIMERA", &chimera)]);
    assert!(
        printed.contains("test the_policy_cases_pass ... ok"),
        "{printed}"
    );

    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "rm -rf /srv/data"}}]},
            {"content": "refused"}
        ]})
        .to_string(),
    )
    .unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let loaded = run(
        dir.path(),
        &[
            "run",
            "--json",
            "--plugins-dir",
            &plugins_arg,
            "--pack",
            "my-gate",
            "--script",
            &script.display().to_string(),
            "--workspace",
            &workspace.display().to_string(),
            "clean up",
        ],
    );
    assert_eq!(loaded.status(), 0, "{}", loaded.stderr());
    let blocks = loaded.of_type("interceptor");
    assert_eq!(blocks.len(), 1, "{}", loaded.stdout());
    assert_eq!(blocks[0]["interceptor"], "my-gate/gate");
    assert_eq!(
        blocks[0]["reason"],
        "my-gate: `rm -rf` is not allowed in bash commands; do it another way"
    );
}

#[test]
fn pack_test_on_a_crate_that_is_not_a_built_pack_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    // A crate that builds no cdylib.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(plain.join("src")).unwrap();
    std::fs::write(
        plain.join("Cargo.toml"),
        "[package]\nname = \"plain\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(plain.join("src/lib.rs"), "").unwrap();
    let ran = run_where(&plain, &["pack", "test", "."], None);
    assert_eq!(ran.status(), 2, "{}", ran.stderr());
    assert_eq!(
        ran.stderr().trim(),
        "error: .: not a pack crate (its Cargo.toml builds no cdylib library)"
    );
    // A pack crate not built yet.
    let fresh = dir.path().join("fresh-gate");
    let fresh_arg = fresh.display().to_string();
    let created = run(
        dir.path(),
        &["pack", "new", "fresh-gate", "--path", &fresh_arg],
    );
    assert_eq!(created.status(), 0, "{}", created.stderr());
    let ran = run_where(dir.path(), &["pack", "test", &fresh_arg], None);
    assert_eq!(ran.status(), 2, "{}", ran.stderr());
    let line = ran.stderr().trim().to_owned();
    assert!(
        line.contains("libfresh_gate.so is not built in") && line.contains("run `cargo build`"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
    // A manifest cargo cannot read.
    std::fs::write(plain.join("Cargo.toml"), "[package\n").unwrap();
    let ran = run_where(&plain, &["pack", "test", "."], None);
    assert_eq!(ran.status(), 2, "{}", ran.stderr());
    assert_eq!(ran.stderr().trim().lines().count(), 1, "{}", ran.stderr());
}

#[test]
fn pack_new_refuses_a_bad_name_and_a_non_empty_directory_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = run(dir.path(), &["pack", "new", "My Gate"]);
    assert_eq!(bad.status(), 2);
    assert!(
        bad.error_line().contains("use lowercase letters"),
        "{}",
        bad.stderr()
    );
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine").unwrap();
    let refused = run(
        dir.path(),
        &[
            "pack",
            "new",
            "gate",
            "--path",
            &taken.display().to_string(),
        ],
    );
    assert_eq!(refused.status(), 2);
    assert!(
        refused
            .error_line()
            .contains("already exists and is not an empty directory"),
        "{}",
        refused.stderr()
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["taken"], "nothing half-written beside it");
    assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 1);
}

/// A case loading plan-gate (bundled beside the binary): a shell call
/// before any plan is blocked.
const PLAN_CASE: &str = r#"description = "a shell call before a plan is blocked"
prompts = ["tidy up"]

[[packs]]
name = "plan-gate"

[[responses]]
tool_calls = [{ id = "c1", name = "bash", arguments = { command = "ls" } }]

[[responses]]
content = "planned nothing"
"#;

#[test]
fn a_changed_decision_is_a_unified_diff_and_exit_1_and_bless_rewrites_the_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("plan.toml"), PLAN_CASE).unwrap();
    let golden = cases.join("plan.golden.jsonl");
    let test = |extra: &[&str]| {
        let mut args = vec!["pack", "test", "--isolated", "cases"];
        args.extend_from_slice(extra);
        run(dir.path(), &args)
    };

    let missing = test(&[]);
    assert_eq!(missing.status(), 1);
    assert!(
        missing
            .stdout()
            .contains("there is no golden file plan.golden.jsonl yet (run with --bless"),
        "{}",
        missing.stdout()
    );
    assert!(missing.error_line().contains("--bless"));

    let blessed = test(&["--bless"]);
    assert_eq!(blessed.status(), 0, "{}", blessed.stderr());
    assert!(blessed
        .stdout()
        .contains("case plan ... blessed: plan.golden.jsonl written"));
    let lines = golden_lines(&golden);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "interceptor", "run_end"]);
    assert_eq!(lines[1]["interceptor"], "plan-gate/gate");
    assert_eq!(lines[1]["decision"], "blocked");
    let text = std::fs::read_to_string(&golden).unwrap();
    assert!(
        !text.contains(&dir.path().display().to_string()) && !text.contains("/tmp"),
        "no paths: {text}"
    );
    assert_eq!(test(&[]).status(), 0);

    // Someone's golden file says the gate allowed the call: the run
    // disagrees, and says how.
    let expected: String = text
        .lines()
        .filter(|line| !line.contains("\"interceptor\""))
        .flat_map(|line| [line, "\n"])
        .collect();
    std::fs::write(&golden, &expected).unwrap();
    let differs = test(&[]);
    assert_eq!(differs.status(), 1);
    let stdout = differs.stdout();
    assert!(
        stdout.contains("case plan ... FAILED: the decisions differ from plan.golden.jsonl"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--- plan.golden.jsonl (expected)"),
        "{stdout}"
    );
    assert!(stdout.contains("+++ plan (this run)"), "{stdout}");
    assert!(
        stdout.contains("\n+{\"type\":\"interceptor\",\"call_id\":\"c1\",\"decision\":\"blocked\""),
        "{stdout}"
    );
    assert!(
        differs.error_line().contains("1 of 1 cases failed"),
        "{}",
        differs.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(&golden).unwrap(),
        expected,
        "a check writes nothing"
    );

    let rewritten = test(&["--bless"]);
    assert!(
        rewritten.stdout().contains("rewritten"),
        "{}",
        rewritten.stdout()
    );
    assert_eq!(std::fs::read_to_string(&golden).unwrap(), text);
    let again = test(&["--bless"]);
    assert!(again
        .stdout()
        .contains("blessed: plan.golden.jsonl unchanged"));
}

#[test]
fn a_bad_case_file_is_one_line_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("bad.toml");
    std::fs::write(
        &case,
        "prompts = [\"hi\"]\n\n[[packs]]\nname = \"plan-gate\"\nconfg = { gated_tools = [] }\n",
    )
    .unwrap();
    let ran = run(dir.path(), &["pack", "test", "bad.toml"]);
    assert_eq!(ran.status(), 2);
    let line = ran.error_line();
    assert!(
        line.starts_with("error: bad.toml:5: unknown field `confg`"),
        "{line}"
    );
    assert!(ran.stdout().is_empty(), "nothing ran: {}", ran.stdout());
}

/// An `OpenAI` chat-completions reply calling `name` with `arguments`.
fn tool_call_reply(id: &str, name: &str, arguments: &Value) -> Reply {
    Reply::json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5}
    }))
}

#[test]
fn a_recorded_provider_session_becomes_a_case_that_passes_without_calling_the_model() {
    let server = Server::start(vec![
        tool_call_reply("call_1", "bash", &json!({"command": "rm -rf build"})),
        Reply::json(json!({
            "choices": [{"message": {"role": "assistant", "content": "I will plan first."}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 4}
        })),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let base = format!("{}/v1", server.url);
    let recorded = chimera(
        dir.path(),
        &[
            "run",
            "--json",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "gpt-test",
            "--api-key-env",
            "TEST_KEY",
            "--header",
            "X-Trace: trace-7",
            "--header",
            "X-Api-Key: sk-header-secret-4242",
            "--pack",
            "plan-gate",
            "--record",
            "session.jsonl",
            "--workspace",
            &workspace.display().to_string(),
            "tidy up the build",
        ],
        &[("TEST_KEY", "sk-bearer-key-000111")],
        "",
    );
    assert_eq!(recorded.status(), 0, "{}", recorded.stderr());
    assert_eq!(server.requests().len(), 2);
    let recording = std::fs::read_to_string(dir.path().join("session.jsonl")).unwrap();
    for secret in ["sk-bearer-key-000111", "sk-header-secret-4242"] {
        assert!(!recording.contains(secret), "{secret} recorded");
    }
    assert!(recording.contains("trace-7"), "the other headers are kept");
    let kinds: Vec<String> = recording
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "\"session\"",
            "\"user\"",
            "\"request\"",
            "\"reply\"",
            "\"request\"",
            "\"reply\""
        ]
    );

    let converted = run(
        dir.path(),
        &[
            "pack",
            "test",
            "--isolated",
            "--from-record",
            "session.jsonl",
            "--name",
            "recorded",
            "cases",
        ],
    );
    assert_eq!(converted.status(), 0, "{}", converted.stderr());
    assert!(
        converted
            .stdout()
            .contains("wrote cases/recorded.toml (1 user turn, 2 model replies)"),
        "{}",
        converted.stdout()
    );
    let case = std::fs::read_to_string(dir.path().join("cases/recorded.toml")).unwrap();
    assert!(case.contains("model = \"gpt-test\""), "{case}");
    assert!(case.contains("X-Trace = \"trace-7\""), "{case}");

    let replayed = run(dir.path(), &["pack", "test", "--isolated", "cases"]);
    assert_eq!(
        replayed.status(),
        0,
        "{}{}",
        replayed.stdout(),
        replayed.stderr()
    );
    assert!(replayed.stdout().contains("case recorded ... ok"));
    assert_eq!(server.requests().len(), 2, "the replays called no model");

    // The replay decided what the live session decided.
    let live: Vec<Value> = recorded.of_type("interceptor");
    let golden: Vec<Value> = golden_lines(&dir.path().join("cases/recorded.golden.jsonl"))
        .into_iter()
        .filter(|l| l["type"] == "interceptor")
        .collect();
    assert_eq!(live.len(), 1, "{}", recorded.stdout());
    assert_eq!(golden.len(), 1);
    for field in [
        "seam",
        "decision",
        "reason",
        "tool_name",
        "call_id",
        "interceptor",
    ] {
        assert_eq!(golden[0][field], live[0][field], "{field}");
    }
}
