//! Loading packs from files: the happy path, and one test per way loading
//! fails. The host survives each and reports one line.

use crate::helpers::{loaded_hashes, manager, one_library_dir, run};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::plugins::{discover, FileError, LoadError, PluginManager, Registry};
use chimera_host::types::{ToolCall, ToolResult};
use chimera_tests::{out_of_tree_dir, pack_path, packs_dir, publish, test_packs_dir};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Asserts the error is one line containing every fragment.
fn one_line(error: &LoadError, fragments: &[&str]) {
    let text = error.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    for fragment in fragments {
        assert!(text.contains(fragment), "{text:?} lacks {fragment:?}");
    }
}

fn fixture() -> PathBuf {
    pack_path("chimera-fixture-pack")
}

#[test]
fn the_fixture_pack_loads_by_entry_point_name_from_the_search_path() {
    let manager = manager();
    let info = manager
        .load(
            "fixture",
            r#"{"tool_call": {"action": "block", "reason": "no"}}"#,
        )
        .unwrap();
    assert_eq!(info.name, "fixture");
    assert_eq!(info.version, "0.1.0");
    assert_eq!(info.path(), Some(fixture().as_path()));
    let chain = manager.registry().get("tool_call").unwrap();
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0].name(), "fixture/tool_call-0");
    assert_eq!(manager.list(), [info]);
}

#[test]
fn discovery_indexes_names_from_manifests_and_reports_files_that_are_not_packs() {
    let discovery = discover(&[test_packs_dir().to_owned()]);
    let fixture_entry = discovery
        .find("fixture")
        .expect("one file provides it")
        .expect("fixture indexed");
    assert_eq!(fixture_entry.path, fixture());
    assert!(
        discovery.find("fixture-alt").unwrap().is_some(),
        "both packs of one library are indexed"
    );
    assert!(discovery.problems.iter().any(|(path, problem)| {
        path.ends_with(library_file_name("chimera-not-a-pack"))
            && matches!(problem, FileError::NotAPack)
    }));
}

#[test]
fn an_unknown_name_is_an_error_that_names_the_search_path() {
    let error = manager().load("no-such-pack", "").unwrap_err();
    one_line(
        &error,
        &[
            "no pack entry point named 'no-such-pack'",
            &packs_dir().display().to_string(),
        ],
    );
}

#[test]
fn a_missing_file_is_one_line() {
    let error = manager()
        .load_file(Path::new("/nonexistent/libnothing.so"), None, "")
        .unwrap_err();
    one_line(&error, &["/nonexistent/libnothing.so", "no such file"]);
}

#[test]
fn a_file_that_is_not_a_shared_library_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("libgarbage.so");
    std::fs::write(&garbage, "this is text, not machine code\n".repeat(40)).unwrap();
    let error = manager().load_file(&garbage, None, "").unwrap_err();
    one_line(&error, &["libgarbage.so", "not a shared library"]);
}

#[test]
fn a_shared_library_that_is_not_a_pack_is_one_line() {
    let error = manager()
        .load_file(&pack_path("chimera-not-a-pack"), None, "")
        .unwrap_err();
    one_line(&error, &["not a chimera pack", "export_packs!"]);
}

#[test]
fn a_truncated_pack_is_refused_before_it_is_mapped() {
    let bytes = std::fs::read(fixture()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for keep in [bytes.len() / 2, bytes.len() - 1, 4096, 64, 0] {
        let cut = dir.path().join(format!("libcut{keep}.so"));
        std::fs::write(&cut, &bytes[..keep]).unwrap();
        let error = manager().load_file(&cut, Some("fixture"), "").unwrap_err();
        one_line(&error, &["incomplete"]);
    }
}

#[test]
fn a_pack_built_against_a_different_abi_layout_is_one_line() {
    let mismatch = out_of_tree_dir().join(library_file_name("mismatch-pack"));
    let manager = PluginManager::new(
        Arc::new(Registry::new()),
        vec![out_of_tree_dir().to_owned()],
    );
    let error = manager.load("mismatch-fixture", "").unwrap_err();
    one_line(
        &error,
        &[
            "incompatible pack ABI",
            "ToolCallView",
            "too many fields (expected 3, found 4)",
            "rebuild the pack",
        ],
    );
    assert!(matches!(&error, LoadError::File { path, .. } if path == &mismatch));
    assert!(manager.registry().get_all().is_empty());
}

#[test]
fn a_constructor_error_is_one_line_naming_the_pack() {
    let error = manager()
        .load("fixture", r#"{"constructor": "error"}"#)
        .unwrap_err();
    one_line(&error, &["fixture: constructor refused on purpose"]);
}

#[test]
fn a_constructor_panic_is_one_line_and_the_host_carries_on() {
    let manager = manager();
    let error = manager
        .load("fixture", r#"{"constructor": "panic"}"#)
        .unwrap_err();
    one_line(
        &error,
        &["fixture: constructor panicked: constructor panicked on purpose"],
    );
    manager
        .load("fixture", r#"{"tool_call": {}}"#)
        .expect("the same pack loads fine afterwards");
}

#[test]
fn a_bad_configuration_is_one_line() {
    for (config, fragment) in [
        (
            r#"{"tool_call": 12}"#,
            "fixture: bad config: invalid type: integer `12`",
        ),
        (
            r#"{"tool_cal": {}}"#,
            "fixture: bad config: unknown field `tool_cal`",
        ),
        ("{not json", "fixture: bad config: key must be a string"),
    ] {
        let error = manager().load("fixture", config).unwrap_err();
        one_line(&error, &[fragment]);
    }
}

#[test]
fn an_interceptor_panic_becomes_an_error_and_the_host_survives() {
    let manager = manager();
    manager
        .load(
            "fixture",
            &json!({"tool_result": {"action": "panic", "reason": "deliberate"}}).to_string(),
        )
        .unwrap();
    let chain = manager.registry().get_all().tool_result;
    let call = ToolCall::new("c", "echo", json!({}));
    let (outcome, events) = run(&chain, &call, &ToolResult::ok("fine"));
    assert!(
        outcome.blocked.is_none() && outcome.replaced.is_none(),
        "fail-open: skipped"
    );
    assert!(
        events[0]
            .reason
            .starts_with("fixture/tool_result-0: panicked: deliberate"),
        "{}",
        events[0].reason
    );
}

#[test]
fn asking_a_library_for_an_entry_point_it_lacks_is_one_line() {
    let error = manager()
        .load_file(&fixture(), Some("redactor"), "")
        .unwrap_err();
    one_line(
        &error,
        &["provides no pack named 'redactor'", "fixture, fixture-alt"],
    );
}

#[test]
fn packs_loaded_together_from_one_library_come_from_one_read_of_it() {
    let (dir, file, built) = one_library_dir();
    let manager = PluginManager::new(Arc::new(Registry::new()), vec![dir.path().to_owned()]);
    let together = manager.load_together();
    manager.load("redactor", "").unwrap();
    // The library changes between two loads of one batch (the same code in
    // other bytes): the second pack still comes from the first read.
    let mut rebuilt = built;
    rebuilt.extend_from_slice(b"rebuilt");
    publish(dir.path(), &file, &rebuilt);
    manager.load("stop-words", "").unwrap();
    drop(together);
    // Out of the batch, a load reads the file again.
    manager.load("tool-filter", "").unwrap();
    let hashes = loaded_hashes(&manager);
    assert_eq!(
        hashes[0].1, hashes[1].1,
        "one read for the batch: {hashes:?}"
    );
    assert_ne!(hashes[1].1, hashes[2].1, "read again after it: {hashes:?}");
}

#[test]
fn two_packs_from_one_library_share_one_mapping() {
    let manager = manager();
    let first = manager.load("fixture", r#"{"tool_call": {}}"#).unwrap();
    let second = manager.load("fixture-alt", r#"{"tool_call": {}}"#).unwrap();
    assert_eq!(first.source, second.source, "same file, same content hash");
    assert_eq!(manager.registry().get_all().tool_call.len(), 2);
}

#[test]
fn in_process_packs_load_through_the_same_path() {
    let manager = manager();
    let info = manager
        .load_pack::<chimera_fixture_pack::FixturePack>(
            r#"{"tool_call": {"action": "block", "reason": "in-process"}}"#,
        )
        .unwrap();
    assert_eq!(info.path(), None);
    let (outcome, _) = run(
        &manager.registry().get_all().tool_call,
        &(),
        &ToolCall::new("c", "echo", json!({})),
    );
    assert_eq!(outcome.blocked.as_deref(), Some("in-process"));
}
