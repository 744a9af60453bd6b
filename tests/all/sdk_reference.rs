//! The reference a third party writes packs from, pinned through the real
//! binary and the real libraries: which SDK versions load, state handover,
//! `chimera --version`, `tools list`, `packs list`.

mod compatibility;
mod events;
mod handover;

use chimera_host::plugins::platform::library_file_name;
use chimera_plugin_api::abi::ABI_REVISION;
use chimera_plugin_api::compatibility::LOADABLE_SDK_VERSIONS;
use chimera_tests::cli::{chimera, Ran};
use chimera_tests::{out_of_tree_dir, publish, stateful_pack_path};
use serde_json::{json, Value};
use std::path::Path;

fn run(cwd: &Path, args: &[&str]) -> Ran {
    chimera(cwd, args, &[], "")
}

#[test]
fn version_names_the_host_the_abi_revision_and_the_sdk_versions_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run(dir.path(), &["--version"]);
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    let stdout = ran.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    // The host and this test crate both take the workspace's version.
    assert_eq!(lines[0], format!("chimera {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(lines[1], format!("ABI revision {ABI_REVISION}"));
    assert!(
        lines[2].starts_with(&format!(
            "loads packs built with chimera-plugin-api {LOADABLE_SDK_VERSIONS} "
        )),
        "{stdout}"
    );
}

#[test]
fn tools_list_shows_exactly_the_tools_and_schemas_a_run_offers_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"content": "done"}]}).to_string(),
    )
    .unwrap();
    let recorded = dir.path().join("requests.jsonl");
    let session = run(
        dir.path(),
        &[
            "run",
            "--script",
            &script.display().to_string(),
            "--record-requests",
            &recorded.display().to_string(),
            "hi",
        ],
    );
    assert_eq!(session.status(), 0, "{}", session.stderr());
    let request: Value = serde_json::from_str(
        std::fs::read_to_string(&recorded)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let offered = request["tools"].as_array().unwrap().clone();

    let listed = run(dir.path(), &["tools", "list", "--json"]);
    assert_eq!(listed.status(), 0, "{}", listed.stderr());
    assert_eq!(listed.events(), offered, "one object per tool, as offered");
    let names: Vec<&str> = offered.iter().filter_map(|t| t["name"].as_str()).collect();
    for tool in ["read_file", "bash", "delegate"] {
        assert!(names.contains(&tool), "{names:?}");
    }

    let readable = run(dir.path(), &["tools", "list"]).stdout();
    for tool in &offered {
        let name = tool["name"].as_str().unwrap();
        assert!(
            readable.lines().any(|line| line == name),
            "{name} heads its entry"
        );
    }
    assert!(
        readable.contains("    command: string, required — "),
        "bash's argument, with its type: {readable}"
    );
}

/// A plugins directory holding the stateful example pack (a pack with
/// manifest details) and the frozen-ABI fixture (one without).
fn plugins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    publish(
        dir.path(),
        &library_file_name("stateful-pack"),
        &std::fs::read(stateful_pack_path()).unwrap(),
    );
    publish(
        dir.path(),
        &library_file_name("frozen-pack"),
        &std::fs::read(out_of_tree_dir().join(library_file_name("frozen-pack"))).unwrap(),
    );
    dir
}

fn listed(ran: &Ran, name: &str) -> Value {
    ran.events()
        .into_iter()
        .find(|pack| pack["name"] == name)
        .unwrap_or_else(|| panic!("{name} is listed: {}", ran.stdout()))
}

#[test]
fn packs_list_shows_seams_and_descriptions_from_the_manifest_and_warns_about_missing_dirs() {
    let plugins = plugins();
    let dir = plugins.path().display().to_string();
    let missing = plugins.path().join("not-there").display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let ran = run(
        cwd.path(),
        &[
            "packs",
            "list",
            "--plugins-dir",
            &dir,
            "--plugins-dir",
            &missing,
            "--json",
        ],
    );
    assert_eq!(ran.status(), 0, "{}", ran.stderr());
    assert_eq!(
        ran.error_line(),
        format!("warning: plugins directory {missing} does not exist")
    );
    let quota = listed(&ran, "call-quota");
    assert_eq!(quota["version"], "1.0.0");
    assert_eq!(quota["seams"], json!(["tool_call"]));
    assert_eq!(
        quota["description"],
        "blocks tool calls past a per-conversation quota; the counts survive hot swaps"
    );
    let frozen = listed(&ran, "frozen-fixture");
    assert_eq!(
        (&frozen["seams"], &frozen["description"]),
        (&Value::Null, &Value::Null),
        "a library built without details says nothing"
    );

    let readable = run(cwd.path(), &["packs", "list", "--plugins-dir", &dir]).stdout();
    assert!(
        readable.lines().any(|line| line.starts_with("call-quota")
            && line.ends_with("[tool_call] blocks tool calls past a per-conversation quota; the counts survive hot swaps")),
        "{readable}"
    );
    assert!(
        readable
            .lines()
            .any(|line| line.starts_with("frozen-fixture")
                && line.ends_with("[seams unknown] (no description in its manifest)")),
        "{readable}"
    );
}

#[test]
fn a_description_crafted_into_a_pack_file_is_shown_escaped_and_bad_details_are_ignored() {
    let plugins = plugins();
    let file = plugins.path().join(library_file_name("stateful-pack"));
    let mut bytes = std::fs::read(&file).unwrap();
    let marker = b"chimera-pack-details/1\ncall-quota\t2\t";
    let at = bytes
        .windows(marker.len())
        .position(|window| window == marker)
        .expect("the details are in the file")
        + marker.len();
    // Same length, so the file stays a complete library.
    bytes[at..at + 6].copy_from_slice(b"\x1b[2J\x07!");
    publish(plugins.path(), &library_file_name("stateful-pack"), &bytes);
    let dir = plugins.path().display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    let readable = run(cwd.path(), &["packs", "list", "--plugins-dir", &dir]).stdout();
    assert!(
        !readable.contains('\x1b') && !readable.contains('\x07'),
        "{readable:?}"
    );
    assert!(
        readable.contains(r"\u{1b}[2J\u{7}! tool calls past"),
        "{readable}"
    );
    let json = run(
        cwd.path(),
        &["packs", "list", "--plugins-dir", &dir, "--json"],
    );
    assert_eq!(
        listed(&json, "call-quota")["description"],
        "\x1b[2J\x07! tool calls past a per-conversation quota; the counts survive hot swaps"
    );

    // Not UTF-8: the details are dropped, the pack is still listed.
    bytes[at] = 0xff;
    publish(plugins.path(), &library_file_name("stateful-pack"), &bytes);
    let json = run(
        cwd.path(),
        &["packs", "list", "--plugins-dir", &dir, "--json"],
    );
    assert_eq!(json.status(), 0);
    assert_eq!(listed(&json, "call-quota")["description"], Value::Null);
}
