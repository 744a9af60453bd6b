//! The trust model under attack, through the built binary: where packs are
//! searched, names two files claim (within one precedence level: refused;
//! a chosen copy over a bundled one: shadowing, said so), locks kept
//! elsewhere and their own file
//! policy, a plugins directory swapped while it loads, approvals that cover
//! one call, the delegate sub-agent under its parent's policy, and hostile
//! text and input at the command line.
//!
//! One file for the trust model so every attack on it reads together; each
//! test builds its own directories and shares no state.

use chimera_host::plugins::platform::library_file_name;
use chimera_tests::cli::Ran;
use chimera_tests::{pack_path, packs_dir, publish};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn chimera(cwd: &Path, args: &[&str], env: &[(&str, String)], stdin: impl AsRef<[u8]>) -> Ran {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    chimera_tests::cli::chimera(cwd, args, &env, stdin)
}

fn script(dir: &Path, responses: Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.display().to_string()
}

/// `dir/<name>` holding `package`'s library under its own file name.
fn plant(dir: &Path, package: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    publish(
        dir,
        &library_file_name(package),
        &std::fs::read(pack_path(package)).unwrap(),
    )
}

fn canary_env(canary: &Path) -> Vec<(&'static str, String)> {
    vec![("CHIMERA_HOSTILE", format!("canary:{}", canary.display()))]
}

#[test]
fn a_cloned_repository_with_a_plugins_directory_runs_none_of_its_code() {
    let clone = tempfile::tempdir().unwrap();
    let plugins = clone.path().join("plugins");
    plant(&plugins, "chimera-hostile-pack");
    // The clone ships a lock pinning its own impostor: no help to it.
    let locked = chimera(
        clone.path(),
        &["packs", "lock", "--plugins-dir", "plugins"],
        &[],
        "",
    );
    assert_eq!(locked.code(), Some(0), "{}", locked.stderr());
    let canary = clone.path().join("canary");
    let env = canary_env(&canary);
    let script = script(clone.path(), json!([{"content": "done"}]));

    let run = chimera(
        clone.path(),
        &[
            "run",
            "--pack",
            "plan-gate",
            "--script",
            &script,
            "--json",
            "hi",
        ],
        &env,
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let loaded = run.of_type("pack_loaded");
    assert_eq!(
        loaded[0]["path"],
        packs_dir()
            .join(library_file_name("plan-gate"))
            .display()
            .to_string(),
        "the bundled plan-gate, from beside the executable"
    );
    let run = chimera(
        clone.path(),
        &["run", "--pack", "hostile", "--script", &script, "hi"],
        &env,
        "",
    );
    assert_eq!(run.code(), Some(3), "./plugins is not on the search path");
    assert!(run
        .error_line()
        .contains("no pack entry point named 'hostile'"));
    let demo = chimera(clone.path(), &["demo", "--json"], &env, "");
    assert_eq!(demo.code(), Some(0), "{}", demo.stderr());
    let listed = chimera(clone.path(), &["packs", "list"], &env, "");
    assert!(!listed.stdout().contains("hostile"), "{}", listed.stdout());
    assert!(!canary.exists(), "the clone's pack never ran");

    // Named explicitly, the same directory is searched (and its code runs).
    let run = chimera(
        clone.path(),
        &[
            "run",
            "--plugins-dir",
            "plugins",
            "--pack",
            "hostile",
            "--script",
            &script,
            "hi",
        ],
        &env,
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(canary.exists(), "the canary mechanism works");
}

#[test]
fn a_name_two_chosen_directories_claim_is_refused_naming_both_and_never_first_wins() {
    let scene = tempfile::tempdir().unwrap();
    let first = plant(&scene.path().join("one"), "chimera-fixture-pack");
    let second = plant(&scene.path().join("two"), "chimera-fixture-pack");
    let script = script(scene.path(), json!([{"content": "done"}]));
    let one = scene.path().join("one").display().to_string();
    let two = scene.path().join("two").display().to_string();
    let check = |run: Ran| {
        assert_eq!(run.code(), Some(3), "{}", run.stderr());
        let line = run.error_line();
        assert!(
            line.contains("provided by two files")
                && line.contains(&first.display().to_string())
                && line.contains(&second.display().to_string()),
            "{line}"
        );
        assert!(
            !line.contains("packs lock"),
            "never suggest pinning: {line}"
        );
    };
    check(chimera(
        scene.path(),
        &[
            "run",
            "--plugins-dir",
            &one,
            "--plugins-dir",
            &two,
            "--pack",
            "fixture",
            "--script",
            &script,
            "hi",
        ],
        &[],
        "",
    ));
    // Across the flag and the environment alike.
    check(chimera(
        scene.path(),
        &[
            "run",
            "--plugins-dir",
            &one,
            "--pack",
            "fixture",
            "--script",
            &script,
            "hi",
        ],
        &[("CHIMERA_PLUGIN_PATH", two.clone())],
        "",
    ));
    // `packs list` still lists both, and warns of the conflict in one line
    // per name (the file exports `fixture` and `fixture-alt`).
    let listed = chimera(
        scene.path(),
        &[
            "packs",
            "list",
            "--plugins-dir",
            &one,
            "--plugins-dir",
            &two,
        ],
        &[],
        "",
    );
    assert_eq!(listed.code(), Some(0), "{}", listed.stderr());
    let stderr = listed.stderr();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("pack 'fixture' "))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("provided by two files")
            && warnings[0].contains(&first.display().to_string())
            && warnings[0].contains(&second.display().to_string()),
        "{stderr}"
    );
    // Two chosen copies of a bundled pack: the two chosen files are named,
    // the bundled one below them decides nothing.
    let mine = plant(&scene.path().join("mine"), "plan-gate");
    let ours = plant(&scene.path().join("ours"), "plan-gate");
    let run = chimera(
        scene.path(),
        &[
            "run",
            "--plugins-dir",
            &mine.parent().unwrap().display().to_string(),
            "--pack",
            "plan-gate",
            "--script",
            &script,
            "hi",
        ],
        &[(
            "CHIMERA_PLUGIN_PATH",
            ours.parent().unwrap().display().to_string(),
        )],
        "",
    );
    assert_eq!(run.code(), Some(3), "{}", run.stderr());
    let line = run.error_line();
    assert!(
        line.contains("provided by two files")
            && line.contains(&mine.display().to_string())
            && line.contains(&ours.display().to_string()),
        "{line}"
    );
    // The same directory named twice is one directory, not a conflict.
    let run = chimera(
        scene.path(),
        &[
            "run",
            "--plugins-dir",
            &one,
            "--plugins-dir",
            &format!("{one}/."),
            "--pack",
            "fixture",
            "--script",
            &script,
            "hi",
        ],
        &[],
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
}

/// The bundled copy of `plan-gate`, beside the `chimera` binary.
fn bundled_plan_gate() -> PathBuf {
    packs_dir().join(library_file_name("plan-gate"))
}

/// `chimera run --json --pack plan-gate` with `flags` before it and
/// `env` set (info lines on stderr): the file it was loaded from, and the
/// stderr lines saying what it shadows.
fn load_plan_gate(scene: &Path, flags: &[&str], env: &[(&str, String)]) -> (String, Vec<String>) {
    let script = script(scene, json!([{"content": "done"}]));
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(flags);
    args.extend(["--pack", "plan-gate", "--script", &script, "hi"]);
    let mut env = env.to_vec();
    env.push(("CHIMERA_LOG", "info".to_owned()));
    let run = chimera(scene, &args, &env, "");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let loaded = run.of_type("pack_loaded");
    assert_eq!(loaded.len(), 1, "{}", run.stdout());
    let path = loaded[0]["path"].as_str().unwrap_or_default().to_owned();
    let shadowing = run
        .stderr()
        .lines()
        .filter(|line| line.contains("shadowing"))
        .map(str::to_owned)
        .collect();
    (path, shadowing)
}

#[test]
fn a_pinned_copy_of_a_bundled_pack_in_a_chosen_directory_is_loaded_instead_and_says_so() {
    let scene = tempfile::tempdir().unwrap();
    let pinned = plant(&scene.path().join("pinned"), "plan-gate");
    let dir = pinned.parent().unwrap().display().to_string();
    let (path, shadowing) = load_plan_gate(scene.path(), &["--plugins-dir", &dir], &[]);
    assert_eq!(path, pinned.display().to_string(), "the chosen copy");
    assert_eq!(shadowing.len(), 1, "one info line: {shadowing:?}");
    assert!(
        shadowing[0].contains("plan-gate")
            && shadowing[0].contains(&pinned.display().to_string())
            && shadowing[0].contains(&format!("bundled {}", bundled_plan_gate().display())),
        "names the pack, the chosen file and the bundled one: {}",
        shadowing[0]
    );
    // The same from $CHIMERA_PLUGIN_PATH and from a configuration file.
    let (path, _) = load_plan_gate(scene.path(), &[], &[("CHIMERA_PLUGIN_PATH", dir.clone())]);
    assert_eq!(path, pinned.display().to_string());
    let config = scene.path().join("pins.toml");
    std::fs::write(&config, format!("plugins_dirs = [{dir:?}]\n")).unwrap();
    let config = config.display().to_string();
    let (path, _) = load_plan_gate(scene.path(), &["--config", &config], &[]);
    assert_eq!(path, pinned.display().to_string());

    // `packs list` says which copy is used and what it shadows.
    let listed = chimera(
        scene.path(),
        &["packs", "list", "--plugins-dir", &dir, "--json"],
        &[],
        "",
    );
    assert_eq!(listed.code(), Some(0), "{}", listed.stderr());
    assert_eq!(listed.stderr(), "", "shadowing is no conflict");
    let copies: Vec<Value> = listed
        .events()
        .into_iter()
        .filter(|pack| pack["name"] == "plan-gate")
        .collect();
    // Beside the binary: plan-gate's own file and the shipped packs' one
    // library (which the own file outranks there); the pinned copy both.
    assert_eq!(copies.len(), 3, "every copy is listed: {copies:?}");
    let bundled = bundled_plan_gate().display().to_string();
    let library = packs_dir()
        .join(library_file_name("chimera-packs"))
        .display()
        .to_string();
    let chosen = &copies[0];
    assert_eq!(chosen["path"], pinned.display().to_string());
    assert_eq!(chosen["level"], "chosen");
    assert_eq!(chosen["shadows"], json!([library, bundled]));
    assert_eq!(chosen["shadowed_by"], Value::Null);
    for (below, path) in copies[1..].iter().zip([&library, &bundled]) {
        assert_eq!(below["path"], *path);
        assert_eq!(below["level"], "bundled");
        assert_eq!(below["shadows"], json!([]));
        assert_eq!(below["shadowed_by"], pinned.display().to_string());
    }
    let readable = chimera(
        scene.path(),
        &["packs", "list", "--plugins-dir", &dir],
        &[],
        "",
    );
    assert!(
        readable.stdout().lines().any(|line| line.trim_start()
            == format!(
                "{} (shadows bundled {library}) (shadows bundled {bundled})",
                pinned.display()
            )),
        "{}",
        readable.stdout()
    );
}

#[test]
fn the_per_user_directory_shadows_the_bundled_packs_and_a_chosen_directory_shadows_both() {
    let scene = tempfile::tempdir().unwrap();
    let data = scene.path().join("data");
    let user = plant(&data.join("chimera/plugins"), "plan-gate");
    let env = [("XDG_DATA_HOME", data.display().to_string())];
    let (path, shadowing) = load_plan_gate(scene.path(), &[], &env);
    assert_eq!(path, user.display().to_string(), "the per-user copy");
    assert_eq!(shadowing.len(), 1, "{shadowing:?}");
    assert!(
        shadowing[0].contains(&format!("bundled {}", bundled_plan_gate().display())),
        "{}",
        shadowing[0]
    );

    let chosen = plant(&scene.path().join("chosen"), "plan-gate");
    let dir = chosen.parent().unwrap().display().to_string();
    let (path, shadowing) = load_plan_gate(scene.path(), &["--plugins-dir", &dir], &env);
    assert_eq!(path, chosen.display().to_string(), "the chosen copy");
    assert_eq!(shadowing.len(), 1, "{shadowing:?}");
    assert!(
        shadowing[0].contains(&format!("per-user {}", user.display()))
            && shadowing[0].contains(&format!("bundled {}", bundled_plan_gate().display())),
        "names both copies below: {}",
        shadowing[0]
    );
}

#[test]
fn packs_in_the_per_user_data_directory_are_found_by_name() {
    let scene = tempfile::tempdir().unwrap();
    plant(
        &scene.path().join("data/chimera/plugins"),
        "chimera-fixture-pack",
    );
    let script = script(scene.path(), json!([{"content": "done"}]));
    let env = [(
        "XDG_DATA_HOME",
        scene.path().join("data").display().to_string(),
    )];
    let run = chimera(
        scene.path(),
        &["run", "--pack", "fixture", "--script", &script, "hi"],
        &env,
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
}

#[test]
fn a_lock_kept_outside_the_plugins_directory_is_enforced() {
    let scene = tempfile::tempdir().unwrap();
    // A space in the path: the lock pins it like any other.
    let plugins = scene.path().join("my plugins");
    plant(&plugins, "chimera-fixture-pack");
    let keep = scene.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    let lock = keep.join("pins.lock").display().to_string();
    let dir = plugins.display().to_string();
    let written = chimera(
        scene.path(),
        &["packs", "lock", "--plugins-dir", &dir, "--lock", &lock],
        &[],
        "",
    );
    assert_eq!(written.code(), Some(0), "{}", written.stderr());
    assert!(!plugins.join("chimera.lock").exists());
    let text = std::fs::read_to_string(&lock).unwrap();
    let pinned = plugins
        .canonicalize()
        .unwrap()
        .join(library_file_name("chimera-fixture-pack"));
    assert!(text.contains(&pinned.display().to_string()), "{text}");

    let script = script(scene.path(), json!([{"content": "done"}]));
    let run_with = |extra: &[&str], env: &[(&str, String)]| {
        let mut args = vec!["run", "--plugins-dir", &dir, "--lock", &lock];
        args.extend_from_slice(extra);
        args.extend(["--script", &script, "hi"]);
        chimera(scene.path(), &args, env, "")
    };
    assert_eq!(run_with(&["--pack", "fixture"], &[]).code(), Some(0));
    let verify = chimera(
        scene.path(),
        &["packs", "verify", "--plugins-dir", &dir, "--lock", &lock],
        &[],
        "",
    );
    assert_eq!(verify.code(), Some(0), "{}", verify.stdout());

    // A pack the external lock does not pin never runs, even though a
    // chimera.lock in the directory pins it: only --lock FILE counts.
    plant(&plugins, "chimera-hostile-pack");
    let inside = chimera(
        scene.path(),
        &["packs", "lock", "--plugins-dir", &dir],
        &[],
        "",
    );
    assert_eq!(inside.code(), Some(0));
    let canary = scene.path().join("canary");
    let run = run_with(&["--pack", "hostile"], &canary_env(&canary));
    assert_eq!(run.code(), Some(3));
    assert!(
        run.error_line().contains("does not pin"),
        "{}",
        run.stderr()
    );
    assert!(!canary.exists());

    // A tampered pack is refused.
    let file = plugins.join(library_file_name("chimera-fixture-pack"));
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    publish(&plugins, &library_file_name("chimera-fixture-pack"), &bytes);
    let run = run_with(&["--pack", "fixture"], &[]);
    assert_eq!(run.code(), Some(3));
    assert!(run.error_line().contains("changed after it was locked"));
}

#[cfg(unix)]
#[test]
fn a_lock_file_that_is_a_symlink_a_fifo_or_writable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let scene = tempfile::tempdir().unwrap();
    let plugins = scene.path().join("plugins");
    plant(&plugins, "chimera-fixture-pack");
    let dir = plugins.display().to_string();
    let script = script(scene.path(), json!([{"content": "done"}]));
    let run = || {
        chimera(
            scene.path(),
            &[
                "run",
                "--plugins-dir",
                &dir,
                "--pack",
                "fixture",
                "--script",
                &script,
                "hi",
            ],
            &[],
            "",
        )
    };
    let written = chimera(
        scene.path(),
        &["packs", "lock", "--plugins-dir", &dir],
        &[],
        "",
    );
    assert_eq!(written.code(), Some(0));
    assert_eq!(run().code(), Some(0));
    let lock = plugins.join("chimera.lock");
    let real = scene.path().join("real.lock");
    std::fs::rename(&lock, &real).unwrap();

    std::os::unix::fs::symlink(&real, &lock).unwrap();
    let refused = run();
    assert_eq!(refused.code(), Some(3));
    assert!(
        refused.error_line().contains("it is a symlink"),
        "{}",
        refused.stderr()
    );
    std::fs::remove_file(&lock).unwrap();

    chimera_tests::make_fifo(&lock);
    let refused = run();
    assert_eq!(refused.code(), Some(3), "a FIFO never blocks the load");
    assert!(refused.error_line().contains("not a regular file"));
    std::fs::remove_file(&lock).unwrap();

    std::fs::copy(&real, &lock).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let refused = run();
    assert_eq!(refused.code(), Some(3));
    let line = refused.error_line();
    assert!(
        line.contains("lock file") && line.contains("world-writable"),
        "{line}"
    );
}

/// The old loader checked the directory by path and then read the pack by
/// path again. A racer flipping the directory between a private one and a
/// world-writable one holding an impostor won that race; the directory is
/// now opened once and everything is checked and read through the handle.
#[cfg(unix)]
#[test]
fn a_plugins_directory_swapped_while_loading_never_runs_the_impostor() {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let scene = tempfile::tempdir().unwrap();
    let good = scene.path().join("good");
    let evil = scene.path().join("evil");
    let name = "libpack.so";
    std::fs::create_dir(&good).unwrap();
    std::fs::create_dir(&evil).unwrap();
    publish(
        &good,
        name,
        &std::fs::read(pack_path("chimera-fixture-pack")).unwrap(),
    );
    publish(
        &evil,
        name,
        &std::fs::read(pack_path("chimera-hostile-pack")).unwrap(),
    );
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o777)).unwrap();
    let plugins = scene.path().join("plugins");
    std::fs::rename(&good, &plugins).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = Arc::clone(&stop);
        let (plugins, evil) = (plugins.clone(), evil.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Swap the two directories' names atomically.
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &plugins,
                    rustix::fs::CWD,
                    &evil,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                flips += 1;
            }
            flips
        })
    };
    let canary = scene.path().join("canary");
    let env = canary_env(&canary);
    let file = plugins.join(name).display().to_string();
    let mut loaded = 0;
    for _ in 0..150 {
        let run = chimera(scene.path(), &["packs", "check", &file], &env, "");
        if run.code() == Some(0) {
            loaded += 1;
        }
        assert!(!canary.exists(), "the impostor's code ran");
    }
    stop.store(true, Ordering::Relaxed);
    let flips = racer.join().unwrap();
    assert!(flips > 150, "the racer raced ({flips} flips)");
    assert!(loaded > 0, "the genuine pack still loads between flips");
}

#[test]
fn one_approval_lets_exactly_one_call_through_the_binary() {
    let ws = tempfile::tempdir().unwrap();
    let write = |id: &str, path: &str| json!({"id": id, "name": "write_file", "arguments": {"path": path, "content": "x"}});
    let script = script(
        ws.path(),
        json!([
            {"tool_calls": [write("w1", "one.txt"), write("w2", "two.txt")]},
            {"content": "done"}
        ]),
    );
    let answers = ws.path().join("answers.jsonl");
    std::fs::write(
        &answers,
        "{\"answer\": \"allow\", \"tool\": \"write_file\"}\n",
    )
    .unwrap();
    let run = chimera(
        ws.path(),
        &[
            "run",
            "--ask",
            "write_file",
            "--approvals",
            &answers.display().to_string(),
            "--script",
            &script,
            "--json",
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(ws.path().join("one.txt").exists());
    assert!(
        !ws.path().join("two.txt").exists(),
        "the approval covered one call"
    );
    let results = run.of_type("tool_result");
    assert_eq!(results[1]["content"], "Permission denied for write_file");
}

#[test]
fn ask_without_a_terminal_is_refused_at_start_up_saying_how_to_answer() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(ws.path(), json!([{"content": "done"}]));
    let run = chimera(
        ws.path(),
        &["run", "--ask", "bash", "--script", &script, "go"],
        &[],
        "",
    );
    assert_eq!(run.code(), Some(2));
    let line = run.error_line();
    assert!(
        line.contains("--ask needs a terminal")
            && line.contains("--yes")
            && line.contains("--approvals FILE"),
        "{line}"
    );
}

#[test]
fn a_tool_denied_to_the_parent_stays_denied_inside_delegate_and_its_events_are_nested() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(
        ws.path(),
        json!([
            {"tool_calls": [{"id": "d1", "name": "delegate", "arguments": {"task": "clean up"}}]},
            {"tool_calls": [{"id": "s1", "name": "bash", "arguments": {"command": "touch pwned"}}]},
            {"content": "sub-agent gave up"},
            {"content": "done"}
        ]),
    );
    let plugins = packs_dir().display().to_string();
    let run = chimera(
        ws.path(),
        &[
            "run",
            "--plugins-dir",
            &plugins,
            "--pack",
            "plan-gate",
            "--deny",
            "bash",
            "--script",
            &script,
            "--json",
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(!ws.path().join("pwned").exists(), "bash never ran");
    let nested: Vec<Value> = run
        .events()
        .into_iter()
        .filter(|e| e.get("depth").is_some())
        .collect();
    assert!(
        nested
            .iter()
            .all(|e| e["depth"] == 1 && e["parent_call_id"] == "d1"),
        "{nested:?}"
    );
    // The sub-agent's call met the same merged chains first (plan-gate
    // blocks an unplanned bash before the permission policy is asked).
    let sub_result = nested
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "s1")
        .expect("the sub-agent's tool result is published, nested");
    assert_eq!(sub_result["is_error"], true);
    assert!(nested
        .iter()
        .any(|e| e["type"] == "interceptor" && e["call_id"] == "s1"));
    let top: Vec<Value> = run
        .of_type("tool_result")
        .into_iter()
        .filter(|e| e.get("depth").is_none())
        .collect();
    assert_eq!(top.len(), 1, "one top-level result: the delegate call's");
}

#[test]
fn a_permission_denial_reaches_into_delegate_without_any_pack() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(
        ws.path(),
        json!([
            {"tool_calls": [{"id": "d1", "name": "delegate", "arguments": {"task": "write"}}]},
            {"tool_calls": [{"id": "s1", "name": "write_file", "arguments": {"path": "pwned", "content": "x"}}]},
            {"content": "could not"},
            {"content": "done"}
        ]),
    );
    let run = chimera(
        ws.path(),
        &[
            "run",
            "--deny",
            "write_file",
            "--script",
            &script,
            "--json",
            "go",
        ],
        &[],
        "",
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(!ws.path().join("pwned").exists());
    let denied = run
        .of_type("tool_result")
        .into_iter()
        .find(|e| e["call_id"] == "s1")
        .expect("nested result");
    assert_eq!(denied["content"], "Permission denied for write_file");
    assert_eq!(denied["depth"], 1);
}

#[test]
fn an_escape_sequence_from_the_model_is_shown_escaped_in_the_readable_transcript() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(
        ws.path(),
        json!([{"content": "fine\u{1b}[2J\u{1b}]0;pwned\u{7}\r\u{9b}31mred"}]),
    );
    let run = chimera(ws.path(), &["run", "--script", &script, "go"], &[], "");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let out = &run.output.stdout;
    assert!(
        !out.contains(&0x1b),
        "no raw escape byte reached the terminal"
    );
    assert!(
        !out.windows(2).any(|w| w == [0xc2, 0x9b]),
        "no raw C1 control"
    );
    assert!(!out.contains(&b'\r'));
    let text = run.stdout();
    assert!(text.contains("fine\\u{1b}[2J"), "{text}");
}

#[test]
fn a_header_with_a_line_break_is_a_usage_error_at_start_up() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(ws.path(), json!([{"content": "done"}]));
    for header in ["X-Test: a\r\nInjected: 1", "X-Test: a\nb", "Bad Name: v"] {
        let run = chimera(
            ws.path(),
            &["run", "--header", header, "--script", &script, "go"],
            &[],
            "",
        );
        assert_eq!(run.code(), Some(2), "{header:?}");
        let line = run.error_line();
        assert!(line.starts_with("error: --header"), "{line}");
    }
}

#[test]
fn a_stdin_turn_that_is_not_utf8_is_one_line_and_the_session_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let script = script(
        ws.path(),
        json!([{"content": "first"}, {"content": "second"}]),
    );
    let mut stdin = b"hello\n".to_vec();
    stdin.extend_from_slice(b"\xff\xfe bad\n");
    stdin.extend_from_slice(b"again\n");
    let run = chimera(
        ws.path(),
        &["run", "--turns-from-stdin", "--script", &script, "--json"],
        &[],
        stdin,
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(run.of_type("run_end").len(), 2, "both good turns ran");
    let line = run.error_line();
    assert!(
        line.contains("line 2 of standard input is not valid UTF-8"),
        "{line}"
    );
}
