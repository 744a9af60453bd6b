//! Merge pins: nothing → none; one bundle → that very
//! object; otherwise plugins first in load order, host last; loads and
//! unloads between merges show in the next merge.

use crate::helpers::{manager, run};
use chimera_host::interception::*;
use chimera_host::types::ToolCall;
use serde_json::json;
use std::sync::Arc;

fn host_bundle() -> Arc<Interceptors> {
    let mut host = Interceptors::new();
    host.tool_call
        .push(Interceptor::tool_call("host", |c: &ToolCall| {
            let m = c.arguments.get_str("message").unwrap_or_default();
            Ok(InterceptDecision::Replace(ToolCall::new(
                "",
                &c.name,
                json!({"message": format!("{m}+host")}),
            )))
        }));
    Arc::new(host)
}

#[test]
fn nothing_registered_and_no_host_chains_merge_to_none() {
    let manager = manager();
    assert!(manager.registry().snapshot().is_none());
    assert!(merge_interceptors(&[manager.registry().snapshot().as_ref(), None]).is_none());
    let empty = Arc::new(Interceptors::new());
    assert!(
        merge_interceptors(&[None, Some(&empty)]).is_none(),
        "empty bundles do not contribute"
    );
}

#[test]
fn host_chains_alone_merge_to_the_very_same_object() {
    let manager = manager();
    let host = host_bundle();
    let merged =
        merge_interceptors(&[manager.registry().snapshot().as_ref(), Some(&host)]).unwrap();
    assert!(Arc::ptr_eq(&merged, &host));
}

#[test]
fn plugins_run_first_in_load_order_and_the_host_last() {
    let manager = manager();
    manager
        .load(
            "fixture-alt",
            &json!({"tool_call": {"action": "replace", "with": "+alt"}}).to_string(),
        )
        .unwrap();
    manager
        .load(
            "fixture",
            &json!({"tool_call": {"action": "replace", "with": "+main"}}).to_string(),
        )
        .unwrap();
    let host = host_bundle();
    let plugins = manager.registry().snapshot();
    let merged = merge_interceptors(&[plugins.as_ref(), Some(&host)]).unwrap();
    assert!(!Arc::ptr_eq(&merged, &host));
    assert_eq!(host.tool_call.len(), 1, "inputs are never mutated");
    let call = ToolCall::new("c1", "echo", json!({"message": "one"}));
    let (outcome, _) = run(&merged.tool_call, &(), &call);
    assert_eq!(
        outcome
            .replaced
            .unwrap()
            .arguments
            .get_str("message")
            .unwrap(),
        "one+alt+main+host"
    );
}

#[test]
fn a_pack_loaded_or_unloaded_between_merges_shows_in_the_next_merge() {
    let manager = manager();
    let host = host_bundle();
    let merge =
        || merge_interceptors(&[manager.registry().snapshot().as_ref(), Some(&host)]).unwrap();
    assert_eq!(merge().tool_call.len(), 1);
    manager.load("fixture", r#"{"tool_call": {}}"#).unwrap();
    let names: Vec<String> = merge()
        .tool_call
        .iter()
        .map(|i| i.name().to_owned())
        .collect();
    assert_eq!(names, ["fixture/tool_call-0", "host"]);
    manager.unload("fixture").unwrap();
    assert!(Arc::ptr_eq(&merge(), &host));
}

#[test]
fn plugin_only_snapshots_are_fresh_every_time() {
    let manager = manager();
    manager.load("fixture", r#"{"tool_call": {}}"#).unwrap();
    let (first, second) = (
        manager.registry().snapshot().unwrap(),
        manager.registry().snapshot().unwrap(),
    );
    assert!(!Arc::ptr_eq(&first, &second));
    let merged = merge_interceptors(&[Some(&first), None]).unwrap();
    assert!(Arc::ptr_eq(&merged, &first));
    assert_eq!(merged.tool_call.len(), 1);
}
