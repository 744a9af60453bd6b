//! Loading packs from files: the happy path and every way it fails.

use chimera_host::plugins::{PluginManager, Registry};
use chimera_tests::{pack_path, packs_dir};
use std::sync::Arc;

fn manager() -> PluginManager {
    PluginManager::new(Arc::new(Registry::new()), vec![packs_dir().to_owned()])
}

#[test]
fn the_fixture_pack_loads_by_entry_point_name() {
    let manager = manager();
    let info = manager
        .load(
            "fixture",
            r#"{"tool_call": {"action": "block", "reason": "no"}}"#,
        )
        .unwrap();
    assert_eq!(info.name, "fixture");
    assert_eq!(
        info.path(),
        Some(pack_path("chimera-fixture-pack").as_path())
    );
    let chain = manager.registry().get("tool_call").unwrap();
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0].name(), "fixture/tool_call-0");
}
