//! `no-rm-rf`: a third-party policy pack. Blocks shell calls whose command
//! contains a configured pattern (default `rm -rf`).
//!
//! Build it on its own (`cargo build --release`), copy the library into a
//! plugins directory and load it by name: `chimera run --pack no-rm-rf …`.

use chimera_plugin_api::prelude::*;
use serde::Deserialize;
use std::sync::Arc;

/// Configuration: `{"pattern": "rm -rf", "tools": ["bash"]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Text that makes a command dangerous.
    pub pattern: String,
    /// Tools whose `command` argument is checked.
    pub tools: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pattern: "rm -rf".to_owned(),
            tools: vec!["bash".to_owned()],
        }
    }
}

/// The pack.
pub struct NoRmRf {
    config: Config,
}

impl Pack for NoRmRf {
    const NAME: &'static str = "no-rm-rf";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "blocks shell commands containing a pattern (default `rm -rf`)";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        if config.pattern.is_empty() {
            return Err(PackError::msg("pattern must not be empty"));
        }
        Ok(NoRmRf { config })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.tool_call("gate", move |_session, call| {
            if !self.config.tools.iter().any(|t| t == call.name()) {
                return Ok(Decision::Allow);
            }
            let command = call.arguments()?["command"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if command.contains(&self.config.pattern) {
                return Ok(Decision::block(format!(
                    "no-rm-rf: `{}` is not allowed in {} commands",
                    self.config.pattern,
                    call.name()
                )));
            }
            Ok(Decision::Allow)
        });
    }
}

chimera_plugin_api::export_packs!(NoRmRf);
