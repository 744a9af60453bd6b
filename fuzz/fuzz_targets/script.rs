//! The scripted-model file: parse it, then replay every response.
#![no_main]

use chimera_host::providers::{Provider, ProviderCall, ScriptedModel};
use chimera_host::types::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(model) = ScriptedModel::from_json(text) else {
        return;
    };
    let messages = [Message::user("fuzz")];
    let kwargs = Default::default();
    let call = ProviderCall {
        messages: &messages,
        tools: &[],
        kwargs: &kwargs,
        headers: None,
    };
    while model.remaining() > 0 {
        let response = model.complete(&call).expect("a response while any remain");
        for tool_call in &response.tool_calls {
            let _ = tool_call.arguments.parse();
            let _ = serde_json_len(&tool_call.arguments);
        }
    }
    assert!(model.complete(&call).is_err(), "running out is an error");
});

fn serde_json_len(arguments: &chimera_host::types::Arguments) -> usize {
    arguments.as_str().len()
}
