//! The registry and plugin lifecycle.

use crate::helpers::manager;
use chimera_host::interception::*;
use chimera_host::plugins::{LoadError, Plugin, PluginError, PluginRegistrar, Registry};
use chimera_host::types::{Message, ProviderRequest, ToolCall, ToolResult};
use serde_json::json;
use std::sync::Arc;

fn gate(name: &str) -> ToolCallInterceptor {
    Interceptor::tool_call(name.to_owned(), |_: &ToolCall| Ok(InterceptDecision::Allow))
}

#[test]
fn seam_names_are_validated_on_register_get_and_unregister() {
    let registry = Registry::new();
    let expected = "unknown interceptor seam 'tool_cal'; expected one of ('provider_request', 'tool_call', 'tool_result', 'context', 'model_response', 'output', 'stream_chunk')";
    assert_eq!(
        registry
            .register("tool_cal", gate("A"))
            .unwrap_err()
            .to_string(),
        expected
    );
    assert!(registry
        .get("toolcall")
        .unwrap_err()
        .to_string()
        .contains("unknown interceptor seam 'toolcall'"));
    assert!(registry
        .unregister("nope", &gate("A").into())
        .unwrap_err()
        .to_string()
        .contains("unknown interceptor seam"));
    assert!(registry.get_all().is_empty());
    let wrong_seam = registry
        .register("context", gate("A"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        wrong_seam,
        "interceptor 'A' runs on tool_call, not on context"
    );
}

#[test]
fn registration_order_is_kept_reads_are_copies_and_seams_are_independent() {
    let registry = Registry::new();
    let (a, b) = (gate("A"), gate("B"));
    registry.register("tool_call", a.clone()).unwrap();
    registry.register("tool_call", b.clone()).unwrap();
    let mut read = registry.get("tool_call").unwrap();
    assert_eq!(
        read,
        [
            AnyInterceptor::from(a.clone()),
            AnyInterceptor::from(b.clone())
        ]
    );
    assert!(registry.get("context").unwrap().is_empty());
    read.clear();
    assert_eq!(
        registry.get("tool_call").unwrap().len(),
        2,
        "clearing a copy changes nothing"
    );
    let mut all = registry.get_all();
    all.tool_call.clear();
    assert_eq!(
        registry.get_all().tool_call.len(),
        2,
        "the bundle is detached"
    );
    registry
        .unregister("tool_call", &gate("absent").into())
        .unwrap();
    registry.unregister("tool_call", &a.clone().into()).unwrap();
    assert_eq!(
        registry.get("tool_call").unwrap(),
        [AnyInterceptor::from(b)]
    );
}

/// An allowing interceptor for `seam` (a `tool_call` one for unknown names, so
/// the seam-name check is what refuses it).
fn allow_on(seam: &str, name: &str) -> AnyInterceptor {
    let name = name.to_owned();
    match seam {
        "context" => {
            Interceptor::context(name, |_: &[Message]| Ok(InterceptDecision::Allow)).into()
        }
        "tool_result" => Interceptor::tool_result(name, |_: &ToolCall, _: &ToolResult| {
            Ok(InterceptDecision::Allow)
        })
        .into(),
        "provider_request" => {
            Interceptor::provider_request(name, |_: &ProviderRequest| Ok(InterceptDecision::Allow))
                .into()
        }
        _ => gate(&name).into(),
    }
}

/// A plugin whose activation and deactivation can be told to misbehave.
struct Scripted {
    name: &'static str,
    seams: Vec<&'static str>,
    fail_activation: Option<&'static str>,
    deactivate: Option<&'static str>,
}

impl Plugin for Scripted {
    fn name(&self) -> &str {
        self.name
    }

    fn activate(&self, registrar: &mut PluginRegistrar) -> Result<(), PluginError> {
        for seam in &self.seams {
            registrar.register(seam, allow_on(seam, self.name))?;
        }
        match self.fail_activation {
            Some(reason) => Err(reason.into()),
            None => Ok(()),
        }
    }

    fn deactivate(&self) -> Result<(), PluginError> {
        match self.deactivate {
            Some("panic") => panic!("deactivate panicked"),
            Some(reason) => Err(reason.into()),
            None => Ok(()),
        }
    }
}

fn scripted(name: &'static str, seams: Vec<&'static str>) -> Scripted {
    Scripted {
        name,
        seams,
        fail_activation: None,
        deactivate: None,
    }
}

#[test]
fn a_failed_activation_leaves_the_registry_exactly_as_it_was() {
    let manager = manager();
    manager
        .registry()
        .register("tool_call", gate("host"))
        .unwrap();
    let dies = Scripted {
        fail_activation: Some("dies before the second seam lands"),
        ..scripted("half", vec!["tool_call"])
    };
    let error = manager.load_plugin(Arc::new(dies)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "half: activation failed: dies before the second seam lands"
    );
    assert!(manager.list().is_empty());
    assert_eq!(
        manager.registry().get_all().len(),
        1,
        "only the host's interceptor"
    );

    let typo = scripted("typo", vec!["tool_call", "tool_cal"]);
    let error = manager.load_plugin(Arc::new(typo)).unwrap_err().to_string();
    assert!(
        error.contains("unknown interceptor seam 'tool_cal'"),
        "{error}"
    );
    assert_eq!(manager.registry().get_all().len(), 1);
}

#[test]
fn unload_withdraws_every_chain_even_when_deactivate_forgets_or_fails() {
    let manager = manager();
    manager
        .load_plugin(Arc::new(scripted(
            "forgetful",
            vec!["tool_call", "context"],
        )))
        .unwrap();
    assert_eq!(manager.registry().get_all().len(), 2);
    manager.unload("forgetful").unwrap();
    assert!(manager.registry().get_all().is_empty());

    for how in ["deactivate died", "panic"] {
        let failing = Scripted {
            deactivate: Some(how),
            ..scripted("failing", vec!["tool_result"])
        };
        manager.load_plugin(Arc::new(failing)).unwrap();
        let error = manager.unload("failing").unwrap_err().to_string();
        assert!(error.starts_with("failing: deactivate failed: "), "{error}");
        assert!(manager.registry().get_all().is_empty());
        assert!(manager.list().is_empty());
    }
    assert!(matches!(
        manager.unload("failing"),
        Err(LoadError::NotLoaded(_))
    ));
    assert_eq!(
        manager.unload("failing").unwrap_err().to_string(),
        "pack 'failing' is not loaded"
    );
}

#[test]
fn the_fixture_pack_registers_one_interceptor_per_configured_seam_and_unloads_them_all() {
    let manager = manager();
    manager
        .registry()
        .register("tool_call", gate("owner-less"))
        .unwrap();
    manager
        .load(
            "fixture",
            &json!({"context": {}, "provider_request": {}, "tool_call": {"count": 2}, "tool_result": {}}).to_string(),
        )
        .unwrap();
    let all = manager.registry().get_all();
    assert_eq!(
        (
            all.context.len(),
            all.provider_request.len(),
            all.tool_call.len(),
            all.tool_result.len()
        ),
        (1, 1, 3, 1)
    );
    let error = manager.load("fixture", "").unwrap_err().to_string();
    assert!(error.contains("already loaded"), "{error}");
    manager.unload("fixture").unwrap();
    let left = manager.registry().get_all();
    assert_eq!(left.len(), 1, "owner-less registrations survive an unload");
    assert_eq!(left.tool_call[0].name(), "owner-less");
}

#[test]
fn a_pack_whose_constructor_fails_leaves_the_registry_untouched() {
    let manager = manager();
    manager.load("fixture-alt", r#"{"tool_call": {}}"#).unwrap();
    let before = manager.registry().get_all().len();
    assert!(manager
        .load("fixture", r#"{"constructor": "error", "tool_call": {}}"#)
        .is_err());
    assert_eq!(manager.registry().get_all().len(), before);
    assert_eq!(manager.list().len(), 1);
}
