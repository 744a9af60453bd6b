//! Trust and fault containment, through the real binary and the real
//! loader: the lock file, the directory policy, the probe, quarantine and
//! the time budget.

use chimera_host::interception::{run_chain, ChainContext, HealthPolicy, SessionFacts};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::types::{ToolCall, ToolResult};
use chimera_tests::cli::Ran;
use chimera_tests::{pack_path, publish};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

fn chimera(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Ran {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    chimera_tests::cli::chimera(dir, args, &env, "")
}

/// A scratch dir with `plugins/` holding the given packages' libraries and a
/// one-response script.
struct Scene {
    root: tempfile::TempDir,
}

impl Scene {
    fn new(packages: &[&str]) -> Scene {
        let root = tempfile::tempdir().unwrap();
        let plugins = root.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        for package in packages {
            publish(
                &plugins,
                &library_file_name(package),
                &std::fs::read(pack_path(package)).unwrap(),
            );
        }
        std::fs::write(
            root.path().join("script.json"),
            json!({"responses": [{"content": "done"}]}).to_string(),
        )
        .unwrap();
        Scene { root }
    }

    fn plugins(&self) -> PathBuf {
        self.root.path().join("plugins")
    }

    fn run(&self, extra: &[&str], env: &[(&str, String)]) -> Ran {
        let plugins = self.plugins().display().to_string();
        let mut args = vec![
            "run",
            "--plugins-dir",
            &plugins,
            "--script",
            "script.json",
            "--json",
        ];
        args.extend_from_slice(extra);
        args.push("hello");
        chimera(self.root.path(), &args, env)
    }

    fn lock(&self) {
        let plugins = self.plugins().display().to_string();
        let run = chimera(
            self.root.path(),
            &["packs", "lock", "--plugins-dir", &plugins],
            &[],
        );
        assert_eq!(run.code(), Some(0), "{}", run.stderr());
    }
}

#[test]
fn a_byte_tampered_after_locking_is_refused_before_loading() {
    let scene = Scene::new(&["chimera-fixture-pack"]);
    scene.lock();
    let lock = std::fs::read_to_string(scene.plugins().join("chimera.lock")).unwrap();
    assert!(
        lock.contains("[[pack]]\nfile = \"libchimera_fixture_pack.so\"\nsha256 = \"")
            && lock.contains("entry_points = [\"fixture\", \"fixture-alt\"]"),
        "{lock}"
    );
    assert_eq!(scene.run(&["--pack", "fixture"], &[]).code(), Some(0));

    let file = scene
        .plugins()
        .join(library_file_name("chimera-fixture-pack"));
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    publish(
        &scene.plugins(),
        &library_file_name("chimera-fixture-pack"),
        &bytes,
    );
    let run = scene.run(&["--pack", "fixture"], &[]);
    assert_eq!(run.code(), Some(3));
    let line = run.error_line();
    assert!(
        line.contains("is not the one chimera.lock pins")
            && line.contains("changed after it was locked"),
        "{line}"
    );

    let plugins = scene.plugins().display().to_string();
    let verify = chimera(
        scene.root.path(),
        &["packs", "verify", "--plugins-dir", &plugins],
        &[],
    );
    assert_eq!(verify.code(), Some(3));
    assert!(String::from_utf8_lossy(&verify.output.stdout)
        .contains("content changed since it was locked"));
}

#[test]
fn load_time_code_never_runs_for_a_pack_the_lock_does_not_pin() {
    let canary_dir = tempfile::tempdir().unwrap();
    let canary = canary_dir.path().join("canary");
    let env = [("CHIMERA_HOSTILE", format!("canary:{}", canary.display()))];

    // Control: with no lock, loading runs the pack's constructor.
    let open = Scene::new(&["chimera-hostile-pack"]);
    assert_eq!(open.run(&["--pack", "hostile"], &env).code(), Some(0));
    assert!(canary.exists(), "the canary mechanism works");
    std::fs::remove_file(&canary).unwrap();

    // A lock that pins another file: the hostile one is refused before dlopen.
    let locked = Scene::new(&["chimera-fixture-pack"]);
    locked.lock();
    publish(
        &locked.plugins(),
        &library_file_name("chimera-hostile-pack"),
        &std::fs::read(pack_path("chimera-hostile-pack")).unwrap(),
    );
    let run = locked.run(&["--pack", "hostile"], &env);
    assert_eq!(run.code(), Some(3));
    assert!(run
        .error_line()
        .contains("does not pin libchimera_hostile_pack.so"));
    assert!(!canary.exists(), "the pack's code never ran");

    // --locked with no lock file at all: refused too.
    let run = open.run(&["--locked", "--pack", "hostile"], &env);
    assert_eq!(run.code(), Some(3));
    assert!(run.error_line().contains("--locked, but"));
    assert!(!canary.exists());
}

#[cfg(unix)]
#[test]
fn a_world_writable_plugins_directory_is_refused_unless_overridden() {
    use std::os::unix::fs::PermissionsExt;
    let scene = Scene::new(&["chimera-fixture-pack"]);
    std::fs::set_permissions(scene.plugins(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = scene.run(&["--pack", "fixture"], &[]);
    assert_eq!(run.code(), Some(3));
    let line = run.error_line();
    assert!(
        line.contains(&scene.plugins().display().to_string()),
        "names the path: {line}"
    );
    assert!(
        line.contains("world-writable") && line.contains("chmod o-w"),
        "names the fix: {line}"
    );
    let run = scene.run(&["--allow-insecure-plugins-dir", "--pack", "fixture"], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(
        run.stderr().contains("loading anyway"),
        "a warning: {}",
        run.stderr()
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_leading_out_of_the_plugins_directory_is_refused() {
    let scene = Scene::new(&[]);
    let elsewhere = tempfile::tempdir().unwrap();
    let real = elsewhere
        .path()
        .join(library_file_name("chimera-fixture-pack"));
    std::fs::write(
        &real,
        std::fs::read(pack_path("chimera-fixture-pack")).unwrap(),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        &real,
        scene
            .plugins()
            .join(library_file_name("chimera-fixture-pack")),
    )
    .unwrap();
    let run = scene.run(&["--pack", "fixture"], &[]);
    assert_eq!(run.code(), Some(3));
    assert!(run
        .error_line()
        .contains("symlink leading out of the plugins directory"));
}

#[test]
fn a_constructor_that_aborts_or_hangs_in_the_probe_never_reaches_the_live_host() {
    let scene = Scene::new(&["chimera-hostile-pack"]);
    let run = scene.run(
        &["--probe", "--pack", "hostile"],
        &[("CHIMERA_HOSTILE", "abort".into())],
    );
    assert_eq!(
        run.code(),
        Some(3),
        "the host exits normally, not by a signal: {}",
        run.stderr()
    );
    assert!(run
        .error_line()
        .contains("the probe crashed while loading it (SIGABRT)"));

    let run = scene.run(
        &["--probe", "--probe-timeout", "1", "--pack", "hostile"],
        &[("CHIMERA_HOSTILE", "hang".into())],
    );
    assert_eq!(run.code(), Some(3));
    assert!(run
        .error_line()
        .contains("did not finish loading it within 1s"));

    // Without the variable the same pack passes the probe and loads.
    assert_eq!(
        scene.run(&["--probe", "--pack", "hostile"], &[]).code(),
        Some(0)
    );
}

#[test]
fn every_pack_taken_from_one_library_is_probed_with_its_own_config() {
    // `fixture` and `fixture-alt` are one library: the second pack loads
    // from bytes already loaded, and its own configuration is still probed
    // before it runs here.
    let scene = Scene::new(&["chimera-fixture-pack"]);
    let refused = json!({"constructor": "error"}).to_string();
    let run = scene.run(
        &[
            "--probe",
            "--pack",
            "fixture",
            "--pack",
            &format!("fixture-alt={refused}"),
        ],
        &[],
    );
    assert_eq!(run.code(), Some(3), "{}", run.stderr());
    assert!(
        run.error_line().contains("the probe refused it"),
        "{}",
        run.stderr()
    );
}

fn tool_calls(n: usize) -> Value {
    let calls: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("c{i}"), "name": "think", "arguments": {"thought": "x"}}))
        .collect();
    json!({"responses": [{"tool_calls": calls}, {"content": "done"}]})
}

#[test]
fn a_pack_is_quarantined_after_n_errors_and_tool_call_then_names_the_quarantine() {
    let scene = Scene::new(&["chimera-fixture-pack"]);
    std::fs::write(
        scene.root.path().join("script.json"),
        tool_calls(5).to_string(),
    )
    .unwrap();
    let pack = format!(
        "fixture={}",
        json!({"tool_call": {"action": "error", "reason": "broken gate"}})
    );
    let run = scene.run(&["--quarantine-after", "3", "--pack", &pack], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let contents: Vec<String> = run
        .of_type("tool_result")
        .iter()
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .collect();
    let quarantined = "Blocked by interceptor: interceptor error: pack 'fixture' is quarantined after 3 interceptor errors within 60s";
    assert_eq!(
        contents,
        [
            "Blocked by interceptor: interceptor error: broken gate",
            "Blocked by interceptor: interceptor error: broken gate",
            "Blocked by interceptor: interceptor error: broken gate",
            quarantined,
            quarantined
        ]
    );
    let events = run.of_type("pack_quarantined");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["name"], "fixture");
    assert!(
        run.stderr().contains("pack quarantined"),
        "a log line: {}",
        run.stderr()
    );
}

#[test]
fn slow_calls_are_reported_and_repeated_overruns_quarantine() {
    let scene = Scene::new(&["chimera-fixture-pack"]);
    std::fs::write(
        scene.root.path().join("script.json"),
        tool_calls(7).to_string(),
    )
    .unwrap();
    let pack = format!(
        "fixture={}",
        json!({"tool_call": {"action": "allow", "sleep_ms": 30}})
    );
    let run = scene.run(&["--call-budget-ms", "10", "--pack", &pack], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let slow = run.of_type("interceptor_slow");
    assert_eq!(slow.len(), 5, "five overruns, then the pack is quarantined");
    assert_eq!(slow[0]["interceptor"], "fixture/tool_call-0");
    assert_eq!(slow[0]["budget_ms"], 10);
    assert!(slow[0]["elapsed_ms"].as_u64().unwrap() >= 10);
    assert_eq!(run.of_type("pack_quarantined").len(), 1);
    let last = run.of_type("tool_result").pop().unwrap();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("calls over its 10ms budget"),
        "{last}"
    );
}

#[test]
fn a_pack_that_panics_on_ten_thousand_calls_leaves_the_host_alive_and_every_call_handled() {
    let manager = PluginManager::new(Arc::new(Registry::new()), chimera_tests::pack_dirs());
    manager.set_health(
        HealthPolicy {
            max_errors: 50,
            ..HealthPolicy::default()
        },
        None,
    );
    manager
        .load("fixture", &json!({"tool_call": {"action": "panic", "reason": "boom"}, "tool_result": {"action": "panic", "reason": "boom"}}).to_string())
        .unwrap();
    let bundle = manager.registry().get_all();
    let facts = SessionFacts::new("panics");
    let cx = ChainContext {
        session: &facts,
        events: None,
    };
    let call = ToolCall::new("c", "bash", json!({}));
    let result = ToolResult::ok("untouched");
    let (mut panicked, mut quarantined) = (0, 0);
    for _ in 0..10_000 {
        let blocked = run_chain(&bundle.tool_call, &(), &call, &cx)
            .blocked
            .expect("tool_call fails closed");
        if blocked.starts_with("interceptor error: panicked: boom") {
            panicked += 1;
        } else {
            assert!(blocked.contains("is quarantined"), "{blocked}");
            quarantined += 1;
        }
        let outcome = run_chain(&bundle.tool_result, &call, &result, &cx);
        assert!(
            outcome.blocked.is_none() && outcome.replaced.is_none(),
            "tool_result fails open"
        );
    }
    // tool_call and tool_result failures share the pack's record: 50 in all.
    assert_eq!((panicked + quarantined, panicked <= 50), (10_000, true));
}

#[test]
fn a_hot_reload_is_probed_and_a_crashing_rebuild_never_reaches_the_live_session() {
    use std::io::Write;
    let scene = Scene::new(&["chimera-fixture-pack"]);
    let turn = |n: u32| json!([{"tool_calls": [{"id": format!("t{n}"), "name": "think", "arguments": {"thought": "x"}}]}, {"content": format!("turn {n} done")}]);
    let responses: Vec<Value> = (1..=2)
        .flat_map(|n| turn(n).as_array().unwrap().clone())
        .collect();
    std::fs::write(
        scene.root.path().join("script.json"),
        json!({"responses": responses}).to_string(),
    )
    .unwrap();
    let plugins = scene.plugins().display().to_string();
    let args = [
        "run",
        "--watch",
        "--turns-from-stdin",
        "--json",
        "--plugins-dir",
        &plugins,
        "--pack",
        "fixture",
        "--script",
        "script.json",
    ];
    let mut child =
        chimera_tests::cli::command(scene.root.path(), &args, &[("CHIMERA_HOSTILE", "abort")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let events = chimera_tests::cli::lines_of(&mut child);
    writeln!(stdin, "one").unwrap();
    chimera_tests::cli::until(&events, "run_end");
    // The rebuild aborts whoever loads it; the probe loads it first, in a child.
    publish(
        &scene.plugins(),
        &library_file_name("chimera-fixture-pack"),
        &std::fs::read(pack_path("chimera-hostile-pack")).unwrap(),
    );
    let failed = chimera_tests::cli::until(&events, "pack_reload_failed");
    let error = failed.last().unwrap()["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("the probe crashed while loading it (SIGABRT)"),
        "{error}"
    );
    writeln!(stdin, "two").unwrap();
    let second = chimera_tests::cli::until(&events, "run_end");
    assert_eq!(
        second.last().unwrap()["output"],
        "turn 2 done",
        "the live session carries on"
    );
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
