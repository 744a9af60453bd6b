//! `chimera run`: an agent session on the command line.

use super::args::{RunArgs, TrustArgs};
use super::failure::Failure;
use super::provider::{provider, require_model};
use super::settings::groups::Answer;
use super::spec::parse_pack_spec;
use super::status;
use super::wiring::{load_packs, Host};
use chimera_host::agent::{
    AgentEvent, AgentSession, AnswersFile, ApproveAll, Approver, DenyAll, EndReason, EventBus,
    Permission, PriceTable, RunResult, Strategy, StrategyError, TerminalApprover, ToolRules,
};
use chimera_host::audit::AuditLog;
use chimera_host::interception::{HealthEvent, HealthPolicy, HealthSink};
use chimera_host::isolate::Isolation;
use chimera_host::plugins::trust::{Probe, TrustSettings};
use chimera_host::plugins::{watch, PluginManager, ReloadEvent, WatchOptions, Watcher};
use chimera_host::tools::Workspace;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Who answers `--ask`: `--yes`, an answers file, or the terminal, which
/// must then be there: a prompt nobody can answer is refused at start-up
/// rather than silently denied.
fn approver(args: &RunArgs) -> Result<Arc<dyn Approver>, Failure> {
    match args.approvals.answer {
        Some(Answer::Yes) => return Ok(Arc::new(ApproveAll)),
        Some(Answer::No) => return Ok(Arc::new(DenyAll)),
        None => {}
    }
    if let Some(path) = &args.approvals.answers_file {
        return AnswersFile::from_file(path)
            .map(|answers| Arc::new(answers) as Arc<dyn Approver>)
            .map_err(|e| Failure::usage(format!("--approvals {}: {e}", path.display())));
    }
    if !args.approvals.ask.is_empty() && !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "--ask needs a terminal to answer on, and stdin is not one: pass --yes to approve every ask, --no to reject every ask, or --approvals FILE to answer from a file",
        ));
    }
    Ok(status::announce_prompts(
        Arc::new(TerminalApprover),
        args.json,
    ))
}

/// What `--turns-from-stdin` shows on stderr before reading each line: a
/// prompt when someone types the turns (stdin is a terminal), nothing when
/// they come from a pipe or a file.
fn turn_prompt(stdin_is_terminal: bool) -> Option<&'static str> {
    stdin_is_terminal.then_some("> ")
}

/// Each line of standard input as a user turn. A line that is not UTF-8 is
/// skipped with one line on stderr; the session goes on. Stdin is locked
/// only while a line is read: an approval prompt reads it too.
fn stdin_turns(session: &mut AgentSession, last: &mut Option<RunResult>) -> Result<(), Failure> {
    let prompt = turn_prompt(std::io::stdin().is_terminal());
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if let Some(prompt) = prompt {
            eprint!("{prompt}");
            let _ = std::io::stderr().flush();
        }
        let read = std::io::stdin()
            .lock()
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
        if read == 0 {
            if prompt.is_some() {
                // End of input (Ctrl-D): the shell's prompt starts on a line of its own.
                eprintln!();
            }
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
        allow_insecure: args.allow_insecure_plugins_dir,
        probe_on_load: args.probe.then(|| probe.clone()),
        probe_on_reload: args.probe_on_reload.then_some(probe),
    });
    let policy = HealthPolicy {
        max_errors: args.quarantine_after.max(1),
        window: Duration::from_secs(args.quarantine_window),
        call_budget: (args.call_budget_ms > 0).then(|| Duration::from_millis(args.call_budget_ms)),
        per_mib: Duration::from_millis(args.call_budget_per_mib_ms),
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
        });
    });
    manager.set_health(policy, Some(sink));
    Ok(())
}

/// The most processes one isolated pack runs (`--isolate-processes`).
const MAX_ISOLATE_PROCESSES: usize = 64;

/// `--isolate NAME` (each a pack `--pack` loads) and `CHIMERA_ISOLATE`
/// (`all`, or comma-separated names): which packs run in a child process.
pub(crate) fn configure_isolation(
    manager: &PluginManager,
    packs: &[String],
    isolate: &[String],
    trust: &TrustArgs,
) -> Result<(), Failure> {
    check_loaded("--isolate", packs, isolate)?;
    let from_env = std::env::var("CHIMERA_ISOLATE").unwrap_or_default();
    let all = from_env.trim() == "all";
    let mut names = isolate.to_vec();
    if !all {
        names.extend(
            from_env
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        );
    }
    if names.is_empty() && !all {
        return Ok(());
    }
    let mut isolation = Isolation::current_exe(names, all).map_err(|e| {
        Failure::usage(format!(
            "cannot locate the chimera executable for isolated packs: {e}"
        ))
    })?;
    isolation.start_timeout = Duration::from_secs(trust.probe_timeout.max(1));
    isolation.processes = trust.isolate_processes.clamp(1, MAX_ISOLATE_PROCESSES);
    manager.set_isolation(Some(isolation));
    Ok(())
}

/// `--monitor NAME` (each a pack `--pack` loads): which packs run in
/// monitor mode, their decisions recorded but never enforced.
pub(crate) fn configure_monitoring(
    manager: &PluginManager,
    packs: &[String],
    monitor: &[String],
) -> Result<(), Failure> {
    check_loaded("--monitor", packs, monitor)?;
    manager.set_monitored(monitor.iter().cloned());
    Ok(())
}

/// Refuses, naming `flag`, a name in `names` that no `--pack` spec of
/// `packs` loads.
pub(crate) fn check_loaded(flag: &str, packs: &[String], names: &[String]) -> Result<(), Failure> {
    let loaded: Vec<String> = packs
        .iter()
        .filter_map(|spec| parse_pack_spec(spec).ok().map(|(name, _)| name))
        .collect();
    match names.iter().find(|n| !loaded.contains(n)) {
        Some(name) => Err(Failure::usage(format!(
            "{flag} {name}: no pack of that name is loaded (add --pack {name})"
        ))),
        None => Ok(()),
    }
}

/// Hot-swaps rebuilt pack files of `manager`'s packs into the live
/// sessions, publishing each reload (or failed reload) on `bus`.
pub(crate) fn watcher(manager: &Arc<PluginManager>, bus: &EventBus) -> Result<Watcher, Failure> {
    let events = bus.clone();
    watch(Arc::clone(manager), WatchOptions::default(), move |event| {
        if let Some(event) = reload_event(event) {
            events.publish(event);
        }
    })
    .map_err(|error| Failure::usage(error.to_string()))
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

/// `--audit FILE`: the log, recording every decision `host`'s bus carries,
/// with the file hash of each loaded pack.
fn audit_log(path: Option<&Path>, host: &Host) -> Result<Option<AuditLog>, Failure> {
    let Some(path) = path else {
        return Ok(None);
    };
    let log = AuditLog::open(path)
        .map_err(|e| Failure::usage(format!("--audit {}: {e}", path.display())))?;
    // Weak: the manager's health sink holds the bus, which holds this.
    let manager = Arc::downgrade(&host.manager);
    log.attach(&host.bus, move |pack| {
        manager.upgrade().and_then(|m| m.loaded_sha256(pack))
    });
    Ok(Some(log))
}

/// `--strategy NAME [--strategy-config JSON]` (default: react).
fn strategy(args: &RunArgs) -> Result<Strategy, Failure> {
    let name = args.session.strategy.as_deref().unwrap_or("react");
    Strategy::parse(name, args.session.strategy_config.as_deref()).map_err(|error| {
        let flag = match error {
            StrategyError::UnknownName(_) => "--strategy",
            StrategyError::BadConfig { .. } => "--strategy-config",
        };
        Failure::usage(format!("{flag}: {error}"))
    })
}

fn workspace(dir: Option<&Path>) -> Result<Workspace, Failure> {
    let dir = dir.map_or_else(|| Path::new(".").to_owned(), Path::to_owned);
    Workspace::new(&dir)
        .map_err(|error| Failure::usage(format!("--workspace {}: {error}", dir.display())))
}

pub(crate) fn run(args: RunArgs) -> Result<(), Failure> {
    require_model(&args)?;
    if args.prompt.is_none() && !args.turns_from_stdin {
        return Err(Failure::usage(
            "nothing to do: give a PROMPT, or --turns-from-stdin",
        ));
    }
    let strategy = strategy(&args)?;
    let workspace = workspace(args.session.workspace.as_deref())?;
    let provider = provider(&args)?;
    let approver = approver(&args)?;
    let prices = match &args.session.prices {
        Some(path) => PriceTable::from_file(path)
            .map_err(|e| Failure::usage(format!("--prices {}: {e}", path.display())))?,
        None => PriceTable::default(),
    };
    let host = Host::new(&args.search, args.json);
    let audit = audit_log(args.session.audit.as_deref(), &host)?;
    configure_trust(&host.manager, &args.trust, &host.bus)?;
    let packs = &args.pack.packs;
    configure_isolation(&host.manager, packs, &args.pack.isolate, &args.trust)?;
    configure_monitoring(&host.manager, packs, &args.pack.monitor)?;
    load_packs(&host.manager, packs, &host.bus)?;
    let _watcher = args
        .watch
        .then(|| watcher(&host.manager, &host.bus))
        .transpose()?;
    let (provider, approver) = super::pack_test::record_hook(&args, &host.bus, provider, approver)?;
    let approvals = &args.approvals;
    for rule in approvals.ask.iter().chain(&approvals.deny) {
        ToolRules::check(rule).map_err(Failure::usage)?;
    }
    let mut rules = ToolRules::new(Permission::Allow);
    for tool in &approvals.ask {
        rules = rules.set(tool.clone(), Permission::Ask);
    }
    for tool in &approvals.deny {
        rules = rules.set(tool.clone(), Permission::Deny);
    }
    // Stopped when the run ends (dropped last).
    let mut mcp = super::mcp_servers::start_servers(&args.mcp, workspace.root())?;
    mcp.judge_listings(&host.registry);
    let mut builder = host
        .session(
            provider,
            workspace,
            (args.session.max_steps, args.session.bash_sandbox),
            &mcp.tools(),
        )
        .permissions(Arc::new(rules))
        .approver(approver)
        .prices(Arc::new(prices))
        .compaction_keep_turns(args.session.compact_keep_turns)
        .stream(args.provider.stream)
        .stream_policy(args.provider.stream_policy.into())
        .strategy(strategy);
    if let Some(system) = &args.session.system {
        builder = builder.system(system.clone());
    }
    let mut session = builder.build();

    let mut last: Option<RunResult> = None;
    if let Some(prompt) = &args.prompt {
        last = Some(session.run_turn(prompt));
    }
    if args.turns_from_stdin {
        stdin_turns(&mut session, &mut last)?;
    }
    if let (Some(log), Some(path)) = (&audit, &args.session.audit) {
        log.finish()
            .map_err(|e| Failure::run_failed(format!("--audit {}: {e}", path.display())))?;
    }
    match last {
        Some(result) if !result.success => Err(Failure::run_failed(ended(&result))),
        _ => Ok(()),
    }
}

/// The one line for a run that ended unsuccessfully, with what to do about
/// it where the command line can say.
fn ended(result: &RunResult) -> String {
    let hint = match &result.reason {
        EndReason::MaxSteps { .. } => " (raise --max-steps)",
        EndReason::ProviderError(error) if error.retryable() => {
            " (the provider may recover: try again)"
        }
        _ => "",
    };
    // `interceptor_blocked: <reason>` says what the output says.
    let reason = result.reason.to_string();
    let kind = reason
        .split_once(": ")
        .map_or(reason.as_str(), |(kind, _)| kind);
    format!(
        "the run ended unsuccessfully ({kind}): {}{hint}",
        result.output
    )
}
