//! The shipped packs' one-library build (`libchimera_packs`) through the
//! binary: every shipped pack found in it by name, a pack's own file beside
//! it outranking it, and all fifteen judging the gateway's traffic from one
//! sealed copy of it.

use super::{chat, serve, user};
use chimera_tests::http::{Reply, Server};
use chimera_tests::{pack_path, SHIPPED_PACKS};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A directory holding a copy of the one library (and nothing else yet),
/// and the copy's path.
fn one_library_copy() -> (tempfile::TempDir, PathBuf) {
    let (dir, file, _) = crate::helpers::one_library_dir();
    let copy = dir.path().join(file);
    (dir, copy)
}

/// `chimera packs list --json --plugins-dir dir`: each entry, and stderr.
fn packs_list(dir: &Path) -> (Vec<Value>, String) {
    let plugins = dir.display().to_string();
    let output = chimera_tests::cli::command(
        dir,
        &["packs", "list", "--json", "--plugins-dir", &plugins],
        &[],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let entries = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (entries, stderr)
}

/// The entries of `listed` found in `dir` (the chosen level), by name.
fn chosen<'l>(listed: &'l [Value], name: &str) -> Vec<&'l Value> {
    listed
        .iter()
        .filter(|entry| entry["name"] == name && entry["level"] == "chosen")
        .collect()
}

#[test]
fn the_one_library_provides_every_shipped_pack_and_a_packs_own_file_beside_it_outranks_it() {
    let (dir, copy) = one_library_copy();
    let (listed, stderr) = packs_list(dir.path());
    let mut names: Vec<&str> = listed
        .iter()
        .filter(|entry| entry["level"] == "chosen")
        .map(|entry| {
            assert_eq!(entry["path"], json!(copy), "{entry}");
            entry["name"].as_str().unwrap()
        })
        .collect();
    names.sort_unstable();
    let mut shipped = SHIPPED_PACKS.to_vec();
    shipped.sort_unstable();
    assert_eq!(names, shipped, "{stderr}");

    // A pack rebuilt on its own, beside the library: its file is the one
    // loaded by its name, no conflict; the rest still come from the library.
    let own = dir.path().join(pack_path("redactor").file_name().unwrap());
    std::fs::copy(pack_path("redactor"), &own).unwrap();
    let (listed, stderr) = packs_list(dir.path());
    assert!(!stderr.contains("provided by two files"), "{stderr}");
    let redactor = chosen(&listed, "redactor");
    assert_eq!(redactor.len(), 2, "{listed:?}");
    let alone = redactor.iter().find(|e| e["path"] == json!(own)).unwrap();
    let shared = redactor.iter().find(|e| e["path"] == json!(copy)).unwrap();
    assert_eq!(alone["shadowed_by"], Value::Null, "{alone}");
    assert!(
        alone["shadows"].as_array().unwrap().contains(&json!(copy)),
        "{alone}"
    );
    assert_eq!(shared["shadowed_by"], json!(own), "{shared}");
    let gate = chosen(&listed, "stop-words");
    assert_eq!(gate.len(), 1, "{listed:?}");
    assert_eq!(gate[0]["shadowed_by"], Value::Null, "{}", gate[0]);
}

/// What `gateway` in front of `upstream` did with a chat carrying a
/// secret: the redactor (`who`) scrubbed it before the upstream saw it, and
/// the gateway holds one sealed copy, the one library's. The reply.
fn scrubs_from_one_copy(upstream: &Server, gateway: &super::Gateway, who: &str) -> Value {
    let (status, reply) = chat(gateway, &user("my key is sk-abcdefghijklmnop, keep it"));
    assert_eq!(status, 200, "{reply}");
    let asked = upstream.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        !asked[0].body.contains("sk-abcdefghijklmnop") && asked[0].body.contains("[redacted]"),
        "{who} scrubs the wire: {}",
        asked[0].body
    );
    if cfg!(target_os = "linux") {
        let copies = sealed_copies(gateway.pid());
        assert_eq!(copies.len(), 1, "one sealed copy: {copies:?}");
        assert!(copies[0].contains("chimera_packs"), "{copies:?}");
    }
    reply
}

/// The sealed in-memory pack copies process `pid` holds: their names.
fn sealed_copies(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.starts_with("/memfd:"))
        .collect()
}

#[test]
fn every_shipped_pack_judges_the_gateways_traffic_from_one_sealed_copy_of_the_one_library() {
    let answer = r#"{"status":"all clear"}"#;
    let upstream = Server::start(vec![Reply::Model(vec![answer.into()], Duration::ZERO)]);
    let (dir, _copy) = one_library_copy();
    let plugins = dir.path().display().to_string();
    let schema = json!({"schema": {"type": "object", "required": ["status"]}}).to_string();
    let json_schema = format!("json-schema={schema}");
    let mut args = vec!["--plugins-dir", plugins.as_str(), "--pack", &json_schema];
    for pack in SHIPPED_PACKS.iter().filter(|&&p| p != "json-schema") {
        args.extend(["--pack", pack]);
    }
    let gateway = serve(&upstream, &args);
    let reply = scrubs_from_one_copy(&upstream, &gateway, "the redactor from the one library");
    assert_eq!(reply["choices"][0]["message"]["content"], answer);
}

#[test]
fn isolated_packs_of_the_one_library_run_from_one_sealed_copy_of_it() {
    let upstream = Server::start(vec![Reply::Model(vec!["fine".into()], Duration::ZERO)]);
    let (dir, _copy) = one_library_copy();
    let plugins = dir.path().display().to_string();
    let args = [
        "--plugins-dir",
        plugins.as_str(),
        "--pack",
        "redactor",
        "--pack",
        "stop-words",
        "--isolate",
        "redactor",
        "--isolate",
        "stop-words",
    ];
    let gateway = serve(&upstream, &args);
    scrubs_from_one_copy(&upstream, &gateway, "the isolated redactor");
}
