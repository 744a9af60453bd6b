//! A scripted session, assembled the way the binary assembles one, for the
//! scenario tests: a script, tools, host chains, a registry, a permission
//! policy; then the transcript, the recorded requests and the events.

use chimera_host::agent::{
    AgentEvent, AgentSession, Approver, EventBus, Hooks, PermissionPolicy, RunResult,
};
use chimera_host::interception::{EventDecision, InterceptorEvent, Interceptors};
use chimera_host::plugins::Registry;
use chimera_host::providers::{RecordedRequest, ScriptedModel};
use chimera_host::tools::{Tool, ToolSet, Workspace};
use chimera_host::types::{Headers, Message, Role};
use chimera_tests::tools::Echo;
use std::sync::{Arc, Mutex};

pub(crate) struct Harness {
    script: serde_json::Value,
    host: Option<Arc<Interceptors>>,
    registry: Option<Arc<Registry>>,
    tools: ToolSet,
    permissions: Option<Arc<dyn PermissionPolicy>>,
    approver: Option<Arc<dyn Approver>>,
    headers: Option<Headers>,
    header_surface: bool,
    hooks: Option<Hooks>,
    pub(crate) workspace: tempfile::TempDir,
}

/// A finished run and everything it left behind.
pub(crate) struct Run {
    pub(crate) result: RunResult,
    pub(crate) session: AgentSession,
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) events: Arc<Mutex<Vec<AgentEvent>>>,
    pub(crate) workspace: tempfile::TempDir,
}

impl Harness {
    pub(crate) fn new(script: serde_json::Value) -> Self {
        let mut tools = ToolSet::new();
        tools.insert(Arc::new(Echo));
        Harness {
            script,
            host: None,
            registry: None,
            tools,
            permissions: None,
            approver: None,
            headers: None,
            header_surface: true,
            hooks: None,
            workspace: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn host(mut self, bundle: Interceptors) -> Self {
        self.host = Some(Arc::new(bundle));
        self
    }

    pub(crate) fn host_arc(mut self, bundle: Arc<Interceptors>) -> Self {
        self.host = Some(bundle);
        self
    }

    pub(crate) fn registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    pub(crate) fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.insert(tool);
        self
    }

    pub(crate) fn tools(mut self, tools: ToolSet) -> Self {
        self.tools = tools;
        self
    }

    pub(crate) fn permissions(mut self, policy: Arc<dyn PermissionPolicy>) -> Self {
        self.permissions = Some(policy);
        self
    }

    pub(crate) fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    pub(crate) fn headers(mut self, headers: &[(&str, &str)]) -> Self {
        self.headers = Some(Headers(
            headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        ));
        self
    }

    pub(crate) fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    pub(crate) fn without_header_surface(mut self) -> Self {
        self.header_surface = false;
        self
    }

    /// Builds the session without running it.
    pub(crate) fn session(
        self,
    ) -> (
        AgentSession,
        Arc<ScriptedModel>,
        Arc<Mutex<Vec<AgentEvent>>>,
        tempfile::TempDir,
    ) {
        let mut model = ScriptedModel::from_json(&self.script.to_string()).expect("script parses");
        if let Some(headers) = self.headers {
            model = model.with_headers(headers);
        }
        if !self.header_surface {
            model = model.without_header_surface();
        }
        let model = Arc::new(model);
        let events = Arc::new(Mutex::new(Vec::new()));
        let bus = EventBus::new();
        let sink = Arc::clone(&events);
        bus.subscribe(move |event| sink.lock().unwrap().push(event.clone()));
        let workspace = Workspace::new(self.workspace.path()).expect("workspace");
        let mut builder = AgentSession::builder(model.clone(), workspace)
            .system("You are a test agent.")
            .tools(self.tools)
            .events(bus);
        if let Some(host) = self.host {
            builder = builder.interceptors(host);
        }
        if let Some(registry) = self.registry {
            builder = builder.registry(registry);
        }
        if let Some(policy) = self.permissions {
            builder = builder.permissions(policy);
        }
        if let Some(approver) = self.approver {
            builder = builder.approver(approver);
        }
        if let Some(hooks) = self.hooks {
            builder = builder.hooks(hooks);
        }
        (builder.build(), model, events, self.workspace)
    }

    pub(crate) fn run(self, prompt: &str) -> Run {
        let (mut session, model, events, workspace) = self.session();
        let result = session.run_turn(prompt);
        Run {
            result,
            session,
            model,
            events,
            workspace,
        }
    }
}

impl Run {
    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.model.recorded()
    }

    pub(crate) fn tool_messages(&self) -> Vec<String> {
        self.session
            .history()
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.clone())
            .collect()
    }

    pub(crate) fn history(&self) -> &[Message] {
        self.session.history()
    }

    pub(crate) fn interceptor_events(&self) -> Vec<InterceptorEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Interceptor(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn seam_decisions(&self) -> Vec<(String, EventDecision)> {
        self.interceptor_events()
            .into_iter()
            .map(|e| (e.seam.to_owned(), e.decision))
            .collect()
    }

    /// Every text a reader of the transcript could see: history and events.
    pub(crate) fn everything(&self) -> String {
        format!(
            "{}\n{}",
            serde_json::to_string(self.history()).unwrap(),
            serde_json::to_string(&*self.events.lock().unwrap()).unwrap()
        )
    }
}

/// `{"responses": [...]}`.
pub(crate) fn script(responses: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "responses": responses })
}
