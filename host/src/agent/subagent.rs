//! The sub-agent behind the `delegate` tool: a fresh conversation on the
//! same provider, under the delegating session's policy.
//!
//! A session hands an [`Inherited`] down with every tool call (in
//! [`ToolContext::extensions`]). The sub-agent runs under it: the parent
//! turn's merged chains (the very same bundle), the permission policy, the
//! approver and the hooks. Its events reach the parent's bus nested
//! ([`AgentEvent::Nested`]: `depth` and `parent_call_id`), so a reader can
//! tell them apart. A delegated call can therefore never do what the same
//! call made by the parent could not.

use super::events::{AgentEvent, EventBus};
use super::hooks::Hooks;
use super::permission::{Approver, PermissionPolicy};
use super::session::AgentSession;
use crate::interception::Interceptors;
use crate::plugins::Registry;
use crate::providers::Provider;
use crate::tools::{SubAgent, ToolContext, ToolSet, Workspace};
use std::sync::Arc;

/// What a session hands down with each tool call: the policy a sub-agent
/// started by that call runs under.
#[derive(Clone)]
pub(crate) struct Inherited {
    /// The delegating turn's merged chains.
    pub(crate) bundle: Option<Arc<Interceptors>>,
    pub(crate) permissions: Option<Arc<dyn PermissionPolicy>>,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) hooks: Hooks,
    /// The delegating session's bus; the sub-agent publishes on it nested.
    pub(crate) bus: EventBus,
    /// The delegating session's depth (0: the top-level session).
    pub(crate) depth: u32,
}

/// Runs delegated tasks as one-turn sessions. It shares the provider (with
/// the scripted model, the sub-agent draws the next responses of the same
/// script) and the workspace. Its tools are the parent's minus `delegate`: a
/// sub-agent does not delegate further.
///
/// Called by a session, it runs under that session's policy (see the module
/// docs). Called any other way, it merges chains from its own registry and
/// host chains and denies every `Ask`.
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

    /// Outside a session: merge plugin chains from `registry`.
    #[must_use]
    pub fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Outside a session: these host chains.
    #[must_use]
    pub fn interceptors(mut self, host: Arc<Interceptors>) -> Self {
        self.host = Some(host);
        self
    }

    /// Provider calls allowed per delegated task.
    #[must_use]
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps;
        self
    }
}

impl SubAgent for SessionSubAgent {
    fn run(&self, task: &str, cx: &ToolContext<'_>) -> Result<String, (String, String)> {
        let mut tools = self.tools.clone();
        tools.remove("delegate");
        let mut builder = AgentSession::builder(Arc::clone(&self.provider), self.workspace.clone())
            .system(self.system.clone())
            .tools(tools)
            .max_steps(self.max_steps);
        if let Some(parent) = cx.extensions.downcast_ref::<Inherited>() {
            let depth = parent.depth + 1;
            builder = builder
                .hooks(parent.hooks.clone())
                .approver(Arc::clone(&parent.approver))
                .events(parent.bus.nested(depth, cx.call_id))
                .depth(depth);
            if let Some(bundle) = &parent.bundle {
                // Host chains only: the merge hands back this very bundle.
                builder = builder.interceptors(Arc::clone(bundle));
            }
            if let Some(policy) = &parent.permissions {
                builder = builder.permissions(Arc::clone(policy));
            }
        } else {
            if let Some(registry) = &self.registry {
                builder = builder.registry(Arc::clone(registry));
            }
            if let Some(host) = &self.host {
                builder = builder.interceptors(Arc::clone(host));
            }
        }
        let result = builder.build().run_turn(task);
        if result.success {
            Ok(result.output)
        } else {
            let error = result.error.unwrap_or_else(|| result.reason.to_string());
            Err((result.output, format!("sub-agent failed: {error}")))
        }
    }
}

impl EventBus {
    /// A bus whose events reach this one as [`AgentEvent::Nested`] at
    /// `depth`, under the call `parent_call_id`, on the same channel (the
    /// audit channel's only when this bus has one). Events that are
    /// already nested (from deeper sessions) pass through as they are.
    pub(crate) fn nested(&self, depth: u32, parent_call_id: &str) -> EventBus {
        let parent = self.clone();
        let parent_call_id = parent_call_id.to_owned();
        let bus = EventBus::new();
        if self.is_audited() {
            let parent = self.clone();
            let parent_call_id = parent_call_id.clone();
            bus.subscribe_audit(move |record| {
                parent.publish_audit(record.nested(depth, &parent_call_id));
            });
        }
        bus.subscribe(move |event| {
            parent.publish(match event {
                AgentEvent::Nested(_) => event.clone(),
                other => AgentEvent::nested(depth, &parent_call_id, other.clone()),
            });
        });
        bus
    }
}
