//! Which SDK versions load into this host, through the real loader: the
//! frozen-ABI fixture rebuilt as if its snapshot had been released as
//! another `chimera-plugin-api` version (same layout, another crate version).

use crate::helpers::run;
use chimera_host::plugins::{LoadError, PluginManager, Registry};
use chimera_host::types::ToolCall;
use chimera_plugin_api::compatibility::{LOADABLE_SDK_VERSIONS, SDK_VERSION};
use chimera_tests::frozen_pack_released_as;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn load(library: &Path, name: &str) -> (PluginManager, Result<(), LoadError>) {
    let manager = PluginManager::new(Arc::new(Registry::new()), Vec::new());
    let outcome = manager.load_file(library, Some(name), "").map(|_| ());
    (manager, outcome)
}

#[test]
fn this_host_is_a_0_1_host() {
    // The tests below pin the rule for a 0.1 host; a host on another line
    // needs them rewritten for its own range.
    assert_eq!(LOADABLE_SDK_VERSIONS, "0.1.x");
    assert!(SDK_VERSION.starts_with("0.1."));
}

#[test]
fn a_pack_built_against_a_later_0_1_release_loads_and_gates() {
    let library = frozen_pack_released_as("0.1.9");
    let (manager, outcome) = load(&library, "frozen-fixture-0-1-9");
    outcome.expect("a 0.1.9 pack loads into a 0.1.0 host");
    let chain = manager.registry().get_all().tool_call;
    let (outcome, _) = run(&chain, &(), &ToolCall::new("c1", "bash", json!({})));
    assert_eq!(
        outcome.blocked.as_deref(),
        Some("frozen-fixture-0-1-9: bash blocked by a pack built against ABI revision 1")
    );
}

#[test]
fn a_pack_built_against_0_2_is_refused_with_one_line_even_with_the_same_layout() {
    let library = frozen_pack_released_as("0.2.0");
    let (manager, outcome) = load(&library, "frozen-fixture-0-2-0");
    let line = outcome.unwrap_err().to_string();
    assert!(!line.contains('\n'), "{line}");
    let versions = format!("incompatible package versions (expected {SDK_VERSION}, found 0.2.0)");
    for fragment in ["incompatible pack ABI", &versions, "rebuild the pack"] {
        assert!(line.contains(fragment), "{line:?} lacks {fragment:?}");
    }
    assert!(manager.registry().get_all().is_empty());
}
