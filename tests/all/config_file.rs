//! `chimera.toml` through the binary: it reproduces a set-up with no pack
//! flags, flags override it, a project file runs nothing until trusted, and
//! a broken or hostile file is one line.

use chimera_host::plugins::platform::library_file_name;
use chimera_tests::cli::{chimera, Ran};
use chimera_tests::{pack_path, publish, workspace_root};
use serde_json::Value;
use std::path::Path;

const DEMO_PROMPT: &str = "Set up the demo project. My deploy key is sk-demo-0123456789abcdef.";

/// `chimera <args>` in `cwd` with its own per-user config directory `home`.
fn run_in(cwd: &Path, home: &Path, args: &[&str]) -> Ran {
    let config_home = home.display().to_string();
    chimera(cwd, args, &[("XDG_CONFIG_HOME", config_home.as_str())], "")
}

/// What a transcript decided: every event but `pack_loaded` (the demo
/// loads its packs before it runs, so the two transcripts order it apart).
fn decisions(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| !matches!(e["type"].as_str(), Some("pack_loaded")))
        .cloned()
        .collect()
}

#[test]
fn the_demo_project_file_reproduces_the_demo_with_no_pack_flags() {
    let home = tempfile::tempdir().unwrap();
    let project = workspace_root().join("examples/demo-project");
    let workspace = tempfile::tempdir().unwrap();
    let demo = run_in(project.as_path(), home.path(), &["demo", "--json"]);
    assert_eq!(demo.code(), Some(0), "{}", demo.stderr());

    let workspace = workspace.path().display().to_string();
    let run_demo_prompt = || {
        run_in(
            &project,
            home.path(),
            &["run", "--json", "--workspace", &workspace, DEMO_PROMPT],
        )
    };
    let untrusted = run_demo_prompt();
    assert_eq!(untrusted.code(), Some(2));
    assert!(
        untrusted.error_line().contains("is not trusted yet"),
        "{}",
        untrusted.stderr()
    );

    let trusted = run_in(&project, home.path(), &["config", "trust"]);
    assert_eq!(trusted.code(), Some(0), "{}", trusted.stderr());
    let run = run_demo_prompt();
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let loaded: Vec<Value> = run
        .events()
        .iter()
        .filter(|e| e["type"] == "pack_loaded")
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(loaded, ["plan-gate", "redactor", "delegate-spawner"]);
    assert_eq!(decisions(&run.events()), decisions(&demo.events()));
    assert!(
        run.events()
            .iter()
            .any(|e| e["type"] == "interceptor" && e["decision"] == "blocked"),
        "the plan gate blocked a call, as in the demo"
    );
}

#[test]
fn flags_override_the_file_and_config_show_says_where_each_value_came_from() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("team.toml");
    std::fs::write(
        &file,
        "[[packs]]\nname = \"redactor\"\n[session]\nmax_steps = 1\n[trust]\ncall_budget_ms = 7\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let show = run_in(
        dir.path(),
        home.path(),
        &["--config", &file, "config", "show", "--json"],
    );
    assert_eq!(show.code(), Some(0), "{}", show.stderr());
    let shown: Value = serde_json::from_str(&show.stdout()).unwrap();
    assert_eq!(shown["file"], file.as_str());
    assert_eq!(shown["settings"]["session.max_steps"]["value"], 1);
    assert_eq!(
        shown["settings"]["session.max_steps"]["source"],
        file.as_str()
    );
    assert_eq!(shown["settings"]["trust.call_budget_ms"]["value"], 7);
    assert_eq!(
        shown["settings"]["trust.probe_timeout"]["source"],
        "default"
    );
    assert_eq!(shown["settings"]["packs"]["value"][0], "redactor");

    // The file allows one step; a tool call needs two. The flag wins.
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"responses": [{"content": "", "tool_calls": [{"id": "c1", "name": "think", "arguments": {"thought": "x"}}]}, {"content": "done"}]}"#,
    )
    .unwrap();
    let script = script.display().to_string();
    let args = |steps: Option<&'static str>| {
        let mut args = vec![
            "--config",
            file.as_str(),
            "run",
            "--json",
            "--script",
            script.as_str(),
        ];
        if let Some(steps) = steps {
            args.extend(["--max-steps", steps]);
        }
        args.push("go");
        args
    };
    let capped = run_in(dir.path(), home.path(), &args(None));
    assert_eq!(capped.code(), Some(1), "max_steps = 1 from the file");
    assert!(
        capped.error_line().contains("max_steps"),
        "{}",
        capped.stderr()
    );
    let overridden = run_in(dir.path(), home.path(), &args(Some("5")));
    assert_eq!(overridden.code(), Some(0), "{}", overridden.stderr());
    let redactor = overridden
        .events()
        .into_iter()
        .find(|e| e["type"] == "pack_loaded")
        .expect("the file's pack loads");
    assert_eq!(redactor["name"], "redactor");
}

#[test]
fn a_cloned_repository_s_chimera_toml_runs_none_of_its_code_until_trusted_and_again_after_a_change()
{
    let home = tempfile::tempdir().unwrap();
    let clone = tempfile::tempdir().unwrap();
    let plugins = clone.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    publish(
        &plugins,
        &library_file_name("chimera-hostile-pack"),
        &std::fs::read(pack_path("chimera-hostile-pack")).unwrap(),
    );
    std::fs::write(
        clone.path().join("chimera.toml"),
        "plugins_dirs = [\"plugins\"]\n[[packs]]\nname = \"hostile\"\n",
    )
    .unwrap();
    std::fs::write(
        clone.path().join("script.json"),
        r#"{"responses": [{"content": "done"}]}"#,
    )
    .unwrap();
    let canary = clone.path().join("canary");
    let hostile = format!("canary:{}", canary.display());
    let config_home = home.path().display().to_string();
    let env = [
        ("XDG_CONFIG_HOME", config_home.as_str()),
        ("CHIMERA_HOSTILE", hostile.as_str()),
    ];
    for args in [
        &["run", "--script", "script.json", "hi"][..],
        &["packs", "list"][..],
        &["config", "show"][..],
    ] {
        let refused = chimera(clone.path(), args, &env, "");
        assert_eq!(refused.code(), Some(2), "{args:?}: {}", refused.stderr());
        assert!(refused.error_line().contains("chimera config trust"));
    }
    assert!(!canary.exists(), "nothing of the clone ran");

    let trusted = chimera(clone.path(), &["config", "trust"], &env, "");
    assert_eq!(trusted.code(), Some(0), "{}", trusted.stderr());
    let listed = chimera(clone.path(), &["packs", "list"], &env, "");
    assert!(listed.stdout().contains("hostile"), "{}", listed.stdout());

    std::fs::write(
        clone.path().join("chimera.toml"),
        "plugins_dirs = [\"plugins\"]\n[[packs]]\nname = \"hostile\"\n[trust]\nprobe = false\n",
    )
    .unwrap();
    let changed = chimera(
        clone.path(),
        &["run", "--script", "script.json", "hi"],
        &env,
        "",
    );
    assert_eq!(changed.code(), Some(2));
    assert!(
        changed
            .error_line()
            .contains("changed since it was trusted"),
        "{}",
        changed.stderr()
    );
    assert!(!canary.exists(), "nothing of the clone ran");
}

#[test]
fn a_broken_file_is_one_line_naming_the_key_and_its_line() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 4] = [
        (
            "[[packs]]\nname = \"redactor\"\n\n[trust]\nprobbe = true\n",
            &["line 5", "probbe"],
        ),
        ("[session]\nmax_steps = \"many\"\n", &["line 2"]),
        ("packs = [\n", &["line"]),
        (
            "[approvals]\nanswer = \"yes\"\nanswers_file = \"a.jsonl\"\n",
            &["keep one"],
        ),
    ];
    for (text, expected) in cases {
        let file = dir.path().join("chimera.toml");
        std::fs::write(&file, text).unwrap();
        let shown = run_in(
            dir.path(),
            home.path(),
            &["--config", &file.display().to_string(), "config", "show"],
        );
        assert_eq!(shown.code(), Some(2), "{text}");
        let line = shown.error_line();
        for part in expected {
            assert!(line.contains(part), "{text:?}: {line}");
        }
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_directory_in_the_file_s_place_is_refused_without_waiting() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("chimera.toml");
    chimera_tests::make_fifo(&fifo);
    let shown = run_in(
        dir.path(),
        home.path(),
        &["--config", &fifo.display().to_string(), "config", "show"],
    );
    assert_eq!(shown.code(), Some(2));
    assert!(
        shown.error_line().contains("not a regular file"),
        "{}",
        shown.stderr()
    );
    let trusting = run_in(dir.path(), home.path(), &["config", "trust"]);
    assert_eq!(trusting.code(), Some(2));
    assert!(trusting.error_line().contains("not a regular file"));
    let shown = run_in(
        dir.path(),
        home.path(),
        &[
            "--config",
            &dir.path().display().to_string(),
            "config",
            "show",
        ],
    );
    assert!(shown.error_line().contains("not a regular file"));
}

#[test]
fn the_readme_s_example_file_is_accepted_as_written() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("```toml\nplugins_dirs")
        .expect("the README shows a chimera.toml")
        + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chimera.toml");
    std::fs::write(&file, &readme[start..end]).unwrap();
    let shown = run_in(
        dir.path(),
        home.path(),
        &[
            "--config",
            &file.display().to_string(),
            "config",
            "show",
            "--json",
        ],
    );
    assert_eq!(shown.code(), Some(0), "{}", shown.stderr());
    let shown: Value = serde_json::from_str(&shown.stdout()).unwrap();
    assert_eq!(shown["settings"]["approvals.answer"]["value"], "no");
    assert_eq!(shown["settings"]["session.max_steps"]["value"], 40);
}
