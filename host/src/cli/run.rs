//! `chimera run`: an agent session on the command line.

use super::args::{RunArgs, TrustArgs};
use super::failure::Failure;
use super::render::Renderer;
use super::search_path::search_path;
use crate::agent::{
    AgentEvent, AgentSession, AnswersFile, ApproveAll, Approver, EventBus, Permission, RunResult,
    SessionSubAgent, TerminalApprover, ToolRules,
};
use crate::interception::{HealthEvent, HealthPolicy, HealthSink};
use crate::plugins::trust::{Probe, TrustSettings};
use crate::plugins::{watch, PackInfo, PluginManager, Registry, ReloadEvent, WatchOptions};
use crate::providers::{
    AnthropicConfig, AnthropicProvider, HttpSettings, OpenAiConfig, OpenAiProvider, Provider,
    ScriptedModel,
};
use crate::tools::{BashTool, DelegateTool, ToolSet, Workspace};
use crate::types::Headers;
use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The default system prompt.
pub(crate) const SYSTEM_PROMPT: &str =
    "You are Chimera, a coding agent. Work inside the workspace with the tools provided; plan before you change files.";

/// Splits `NAME[=JSON]`; the JSON must parse (a config error otherwise).
pub(crate) fn parse_pack_spec(spec: &str) -> Result<(String, String), Failure> {
    let (name, config) = match spec.split_once('=') {
        Some((name, config)) => (name.trim(), config.trim()),
        None => (spec.trim(), ""),
    };
    if name.is_empty() {
        return Err(Failure::usage(format!(
            "--pack '{spec}': the pack name is empty"
        )));
    }
    if !config.is_empty() {
        serde_json::from_str::<serde_json::Value>(config).map_err(|error| {
            Failure::usage(format!("--pack {name}: the config is not JSON: {error}"))
        })?;
    }
    Ok((name.to_owned(), config.to_owned()))
}

/// Parses `K: V` or `K:V`. The name must be an HTTP token and the value may
/// not hold control characters (a CR or LF would start a header of its own).
fn parse_header(spec: &str) -> Result<(String, String), Failure> {
    let shown = crate::types::terminal_safe(spec);
    let Some((name, value)) = spec
        .split_once(':')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, _)| !n.is_empty())
    else {
        return Err(Failure::usage(format!(
            "--header '{shown}': expected `Name: value`"
        )));
    };
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.chars().all(token) {
        return Err(Failure::usage(format!(
            "--header '{shown}': the name may hold only letters, digits and !#$%&'*+-.^_`|~"
        )));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(Failure::usage(format!(
            "--header '{shown}': the value holds a control character (CR, LF, …); a header is one line"
        )));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// Who answers `--ask`: `--yes`, an answers file, or the terminal, which
/// must then be there: a prompt nobody can answer is refused at start-up
/// rather than silently denied.
fn approver(args: &RunArgs) -> Result<Arc<dyn Approver>, Failure> {
    if args.yes {
        return Ok(Arc::new(ApproveAll));
    }
    if let Some(path) = &args.approvals {
        return AnswersFile::from_file(path)
            .map(|answers| Arc::new(answers) as Arc<dyn Approver>)
            .map_err(|e| Failure::usage(format!("--approvals {}: {e}", path.display())));
    }
    if !args.ask.is_empty() && !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "--ask needs a terminal to answer on, and stdin is not one: pass --yes to approve every ask, or --approvals FILE to answer from a file",
        ));
    }
    Ok(Arc::new(TerminalApprover))
}

/// Each line of standard input as a user turn. A line that is not UTF-8 is
/// skipped with one line on stderr; the session goes on.
fn stdin_turns(session: &mut AgentSession, last: &mut Option<RunResult>) -> Result<(), Failure> {
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = stdin
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
        if read == 0 {
            break;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            eprintln!("warning: line {number} of standard input is not valid UTF-8; skipped");
            continue;
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        *last = Some(session.run_turn(text));
    }
    Ok(())
}

/// The event published when a pack loads.
pub(crate) fn loaded_event(info: &PackInfo) -> AgentEvent {
    AgentEvent::PackLoaded {
        name: info.name.clone(),
        version: info.version.clone(),
        path: info.path().map(|p| p.display().to_string()),
    }
}

/// Applies the trust and containment flags to `manager`; quarantines and
/// budget overruns are published on `bus`.
pub(crate) fn configure_trust(
    manager: &PluginManager,
    args: &TrustArgs,
    bus: &EventBus,
) -> Result<(), Failure> {
    let probe =
        Probe::current_exe(Duration::from_secs(args.probe_timeout.max(1))).map_err(|e| {
            Failure::usage(format!(
                "cannot locate the chimera executable for probing: {e}"
            ))
        })?;
    manager.set_trust(TrustSettings {
        locked: args.locked || args.lock.is_some(),
        lock_file: args.lock.clone(),
        allow_insecure: args.allow_insecure,
        probe_on_load: args.probe.then(|| probe.clone()),
        probe_on_reload: (!args.no_probe_on_reload).then_some(probe),
    });
    let policy = HealthPolicy {
        max_errors: args.quarantine_after.max(1),
        window: Duration::from_secs(args.quarantine_window),
        call_budget: (args.call_budget_ms > 0).then(|| Duration::from_millis(args.call_budget_ms)),
        ..HealthPolicy::default()
    };
    let events = bus.clone();
    let sink: HealthSink = Arc::new(move |event| {
        events.publish(match event {
            HealthEvent::Quarantined { pack, reason } => {
                AgentEvent::PackQuarantined { name: pack, reason }
            }
            HealthEvent::OverBudget {
                interceptor,
                seam,
                elapsed,
                budget,
                ..
            } => AgentEvent::InterceptorSlow {
                seam: seam.to_owned(),
                interceptor,
                elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
            },
        })
    });
    manager.set_health(policy, Some(sink));
    Ok(())
}

/// The transcript event for a watcher event (a removed file is only logged).
fn reload_event(event: ReloadEvent) -> Option<AgentEvent> {
    match event {
        ReloadEvent::Reloaded(info) => Some(AgentEvent::PackReloaded {
            name: info.name.clone(),
            version: info.version.clone(),
            path: info.path().map(|p| p.display().to_string()),
        }),
        ReloadEvent::Failed { name, error, .. } => Some(AgentEvent::PackReloadFailed {
            name,
            error: error.to_string(),
        }),
        ReloadEvent::Removed { .. } => None,
    }
}

/// Loads `--pack` specs in order, publishing `pack_loaded` for each; the
/// first failure is exit 3.
pub(crate) fn load_packs(
    manager: &PluginManager,
    specs: &[String],
    bus: &EventBus,
) -> Result<(), Failure> {
    let parsed = specs
        .iter()
        .map(|spec| parse_pack_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    for (name, config) in parsed {
        let info = manager
            .load(&name, &config)
            .map_err(|error| Failure::pack(format!("cannot load pack {name}: {error}")))?;
        bus.publish(loaded_event(&info));
    }
    Ok(())
}

/// The standard tools (bash sandboxed unless `bash_sandbox` is false) plus
/// `delegate`, whose sub-agent runs on the same provider under the calling
/// session's policy and merged chains.
pub(crate) fn session_tools(
    provider: &Arc<dyn Provider>,
    workspace: &Workspace,
    registry: &Arc<Registry>,
    max_steps: usize,
    bash_sandbox: bool,
) -> ToolSet {
    let mut tools = ToolSet::standard();
    let bash = BashTool::default().sandboxed(bash_sandbox);
    if bash_sandbox && !bash.sandbox_active() {
        tracing::warn!("{}", bash.sandbox_summary());
    }
    tools.insert(Arc::new(bash));
    let sub_agent = SessionSubAgent::new(Arc::clone(provider), workspace.clone(), tools.clone())
        .registry(Arc::clone(registry))
        .max_steps(max_steps);
    tools.insert(Arc::new(DelegateTool::new(Arc::new(sub_agent))));
    tools
}

fn workspace(dir: Option<&Path>) -> Result<Workspace, Failure> {
    let dir = dir.map_or_else(|| Path::new(".").to_owned(), Path::to_owned);
    Workspace::new(&dir)
        .map_err(|error| Failure::usage(format!("--workspace {}: {error}", dir.display())))
}

fn provider(args: &RunArgs) -> Result<Arc<dyn Provider>, Failure> {
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    if args.record_requests.is_some() && args.script.is_none() {
        return Err(Failure::usage("--record-requests works with --script only"));
    }
    match (&args.script, args.provider.as_deref()) {
        (Some(_), Some(provider)) if provider != "scripted" => Err(Failure::usage(format!(
            "--script and --provider {provider} cannot be used together"
        ))),
        (Some(script), _) => scripted(script, headers, args.record_requests.as_deref()),
        (None, Some("openai")) => {
            let base_url = setting(
                &args.base_url,
                "OPENAI_BASE_URL",
                "https://api.openai.com/v1",
            );
            let official = base_url.contains("api.openai.com");
            Ok(Arc::new(OpenAiProvider::new(OpenAiConfig {
                api_key: api_key(args, "OPENAI_API_KEY", official)?,
                model: model(args, "openai")?,
                base_url,
                headers: Headers(headers),
                http: HttpSettings::default(),
            })))
        }
        (None, Some("anthropic")) => {
            if !headers.is_empty() {
                return Err(Failure::usage(
                    "--header: the anthropic provider has no per-request header surface",
                ));
            }
            let base_url = setting(
                &args.base_url,
                "ANTHROPIC_BASE_URL",
                "https://api.anthropic.com",
            );
            let official = base_url.contains("api.anthropic.com");
            Ok(Arc::new(AnthropicProvider::new(AnthropicConfig {
                api_key: api_key(args, "ANTHROPIC_API_KEY", official)?,
                model: model(args, "anthropic")?,
                base_url,
                max_tokens: 4096,
                http: HttpSettings::default(),
            })))
        }
        (None, Some(other)) => Err(Failure::usage(format!(
            "unknown provider '{other}' (known: openai, anthropic; or --script FILE)"
        ))),
        (None, None) => Err(Failure::usage(
            "no model: give --script FILE, or --provider openai|anthropic --model M",
        )),
    }
}

fn scripted(
    script: &Path,
    headers: Vec<(String, String)>,
    record: Option<&Path>,
) -> Result<Arc<dyn Provider>, Failure> {
    let mut model = ScriptedModel::from_file(script).map_err(|e| Failure::usage(e.to_string()))?;
    if !headers.is_empty() {
        model = model.with_headers(Headers(headers));
    }
    if let Some(path) = record {
        model = model.record_to(path).map_err(|error| {
            Failure::usage(format!("--record-requests {}: {error}", path.display()))
        })?;
    }
    Ok(Arc::new(model))
}

/// The flag, else the environment variable, else the default.
fn setting(flag: &Option<String>, env: &str, default: &str) -> String {
    flag.clone()
        .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| default.to_owned())
}

fn model(args: &RunArgs, provider: &str) -> Result<String, Failure> {
    args.model
        .clone()
        .ok_or_else(|| Failure::usage(format!("--provider {provider} needs --model M")))
}

/// The key from `--api-key-env VAR` (which must then be set) or from the
/// provider's usual variable; required only by the official endpoints.
fn api_key(args: &RunArgs, default_env: &str, required: bool) -> Result<Option<String>, Failure> {
    let (name, explicit) = match &args.api_key_env {
        Some(name) => (name.as_str(), true),
        None => (default_env, false),
    };
    match std::env::var(name).ok().filter(|v| !v.is_empty()) {
        Some(key) => Ok(Some(key)),
        None if explicit => Err(Failure::usage(format!(
            "--api-key-env {name}: the variable is not set"
        ))),
        None if required => Err(Failure::usage(format!(
            "set {name} (or name another variable with --api-key-env VAR)"
        ))),
        None => Ok(None),
    }
}

pub(crate) fn run(args: RunArgs) -> Result<(), Failure> {
    if args.prompt.is_none() && !args.turns_from_stdin {
        return Err(Failure::usage(
            "nothing to do: give a PROMPT, or --turns-from-stdin",
        ));
    }
    let workspace = workspace(args.workspace.as_deref())?;
    let provider = provider(&args)?;
    let approver = approver(&args)?;
    let renderer = Arc::new(Renderer::new(args.json));
    let bus = EventBus::new();
    let printer = Arc::clone(&renderer);
    bus.subscribe(move |event| printer.render(event));

    let registry = Arc::new(Registry::new());
    let manager = Arc::new(PluginManager::with_search_path(
        Arc::clone(&registry),
        search_path(&args.search),
    ));
    configure_trust(&manager, &args.trust, &bus)?;
    load_packs(&manager, &args.packs, &bus)?;
    let _watcher = if args.watch {
        let events = bus.clone();
        let watcher = watch(
            Arc::clone(&manager),
            WatchOptions::default(),
            move |event| {
                if let Some(event) = reload_event(event) {
                    events.publish(event);
                }
            },
        )
        .map_err(|error| Failure::usage(error.to_string()))?;
        Some(watcher)
    } else {
        None
    };

    let mut rules = ToolRules::new(Permission::Allow);
    for tool in &args.ask {
        rules = rules.set(tool.clone(), Permission::Ask);
    }
    for tool in &args.deny {
        rules = rules.set(tool.clone(), Permission::Deny);
    }
    let tools = session_tools(
        &provider,
        &workspace,
        &registry,
        args.max_steps,
        !args.no_bash_sandbox,
    );
    let mut session = AgentSession::builder(provider, workspace)
        .system(
            args.system
                .clone()
                .unwrap_or_else(|| SYSTEM_PROMPT.to_owned()),
        )
        .tools(tools)
        .registry(registry)
        .permissions(Arc::new(rules))
        .approver(approver)
        .events(bus)
        .max_steps(args.max_steps)
        .stream(args.stream)
        .build();

    let mut last: Option<RunResult> = None;
    if let Some(prompt) = &args.prompt {
        last = Some(session.run_turn(prompt));
    }
    if args.turns_from_stdin {
        stdin_turns(&mut session, &mut last)?;
    }
    match last {
        Some(result) if !result.success => Err(Failure::run_failed(format!(
            "the run ended unsuccessfully ({}): {}",
            result.reason, result.output
        ))),
        _ => Ok(()),
    }
}
