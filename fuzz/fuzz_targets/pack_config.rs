//! Pack configuration JSON → constructor, for the three bundled packs.
//! Any panic (even one the SDK would contain) is a finding: libFuzzer's
//! panic hook aborts.
#![no_main]

use chimera_plugin_api::sdk::instantiate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(config) = std::str::from_utf8(data) {
        let _ = instantiate::<plan_gate::PlanGate>(config);
        let _ = instantiate::<redactor::Redactor>(config);
        let _ = instantiate::<delegate_spawner::DelegateSpawner>(config);
    }
});
