//! `chimera run`: an agent session on the command line.

use super::args::{LoadArgs, RunArgs};
use super::audit_log;
use super::containment::{configure_isolation, configure_monitoring, configure_trust, watcher};
use super::failure::Failure;
use super::provider::{provider, require_model};
use super::settings::groups::Answer;
use super::status;
use super::wiring::{load_packs, Host};
use chimera_host::agent::{
    AgentSession, AnswersFile, ApproveAll, Approver, DenyAll, EndReason, Permission, PriceTable,
    RunResult, Strategy, StrategyError, TerminalApprover, ToolRules,
};
use chimera_host::audit::AuditLog;
use chimera_host::tools::Workspace;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

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

/// `--audit FILE`: the log, recording every decision `host`'s bus carries,
/// with the file hash of each loaded pack.
fn open_audit(path: Option<&Path>, host: &Host) -> Result<Option<AuditLog>, Failure> {
    let Some(path) = path else {
        return Ok(None);
    };
    let log = audit_log::open(path, &host.manager)?;
    log.follow(&host.bus);
    Ok(Some(log))
}

/// `--strategy NAME [--strategy-config JSON]` (default: react).
fn strategy(args: &RunArgs) -> Result<Strategy, Failure> {
    let name = args.session.strategy.as_deref().unwrap_or("react");
    Strategy::parse(name, args.session.strategy_config.as_deref()).map_err(|error| {
        let flag = match error {
            StrategyError::BadConfig { .. } => "--strategy-config",
            _ => "--strategy",
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
    let LoadArgs {
        search,
        pack,
        trust,
    } = &args.load;
    let host = Host::new(search, args.json);
    let audit = open_audit(args.session.audit.as_deref(), &host)?;
    configure_trust(&host.manager, trust, &host.bus)?;
    let packs = &pack.packs;
    configure_isolation(&host.manager, packs, &pack.isolate, trust)?;
    configure_monitoring(&host.manager, packs, &pack.monitor)?;
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
    audit_log::finish(audit.as_ref(), args.session.audit.as_deref())?;
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
