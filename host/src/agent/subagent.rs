//! The sub-agent behind the `delegate` tool: a fresh conversation on the
//! same provider, with the same merged interceptors.

use super::session::AgentSession;
use crate::interception::Interceptors;
use crate::plugins::Registry;
use crate::providers::Provider;
use crate::tools::{SubAgent, ToolSet, Workspace};
use std::sync::Arc;

/// Runs delegated tasks as one-turn sessions. It shares the provider (with
/// the scripted model, the sub-agent draws the next responses of the same
/// script), the registry and the host chains (so the sub-agent runs under
/// the same merged interceptors), and the workspace. Its tools are the
/// parent's minus `delegate`: a sub-agent does not delegate further.
pub struct SessionSubAgent {
    provider: Arc<dyn Provider>,
    registry: Option<Arc<Registry>>,
    host: Option<Arc<Interceptors>>,
    workspace: Workspace,
    tools: ToolSet,
    system: String,
    max_steps: usize,
}

impl SessionSubAgent {
    /// A sub-agent on `provider` in `workspace`, with `tools`.
    pub fn new(provider: Arc<dyn Provider>, workspace: Workspace, tools: ToolSet) -> Self {
        SessionSubAgent {
            provider,
            registry: None,
            host: None,
            workspace,
            tools,
            system:
                "You are a sub-agent. Complete the task you are given and answer with the result."
                    .to_owned(),
            max_steps: 25,
        }
    }

    /// Merge plugin chains from `registry`, as the parent does.
    pub fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The parent's host chains.
    pub fn interceptors(mut self, host: Arc<Interceptors>) -> Self {
        self.host = Some(host);
        self
    }

    /// Provider calls allowed per delegated task.
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps;
        self
    }
}

impl SubAgent for SessionSubAgent {
    fn run(&self, task: &str) -> Result<String, (String, String)> {
        let mut tools = self.tools.clone();
        tools.remove("delegate");
        let mut builder = AgentSession::builder(Arc::clone(&self.provider), self.workspace.clone())
            .system(self.system.clone())
            .tools(tools)
            .max_steps(self.max_steps);
        if let Some(registry) = &self.registry {
            builder = builder.registry(Arc::clone(registry));
        }
        if let Some(host) = &self.host {
            builder = builder.interceptors(Arc::clone(host));
        }
        let result = builder.build().run_turn(task);
        if result.success {
            Ok(result.output)
        } else {
            let error = result.error.unwrap_or_else(|| result.reason.clone());
            Err((result.output, format!("sub-agent failed: {error}")))
        }
    }
}
