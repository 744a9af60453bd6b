//! The `chimera` command line. Exit status: 0 success, 1 the run
//! ended unsuccessfully, 2 usage or configuration error, 3 a pack could not
//! be loaded. Errors are one line on stderr.

mod args;
mod audit;
mod audit_log;
mod containment;
mod demo;
mod failure;
mod mcp;
mod mcp_servers;
mod pack_crate;
mod pack_new;
mod pack_test;
mod packs;
mod provider;
mod render;
mod run;
mod serve;
mod server;
mod settings;
#[cfg(test)]
mod settings_tests;
mod spec;
mod status;
mod tools;
mod version;
mod wiring;

use args::{
    AuditCommand, Cli, Command, ConfigCommand, McpCommand, PackCommand, PacksCommand, ToolsCommand,
};
use clap::error::ErrorKind;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use failure::Failure;
use std::process::ExitCode;

/// Log lines (warnings: a failed reload, a removed pack file) go to stderr;
/// `CHIMERA_LOG` (an env-filter, e.g. `debug`) changes the level.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CHIMERA_LOG")
        // The MCP client's own logs stay quiet: what matters of a server
        // (it failed, died, hung, sent garbage) is said in one line of ours.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour for a terminal only: a log file or a pipe gets plain lines.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .try_init();
}

/// clap's whole error as one line: the error, each tip (a did-you-mean
/// suggestion) and the usage, then which help to read. clap's own closing
/// "For more information, try '--help'." gives way to that pointer.
fn usage_line(text: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut help = "chimera --help".to_owned();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("For more information") {
            continue;
        }
        if let Some(usage) = line.strip_prefix("Usage: ") {
            let command: Vec<&str> = usage
                .split_whitespace()
                .take_while(|word| !word.starts_with(['[', '<', '-']))
                .collect();
            help = format!("{} --help", command.join(" "));
            parts.push(format!("usage: {usage}"));
            continue;
        }
        parts.push(line.trim_start_matches("error: ").to_owned());
    }
    if parts.is_empty() {
        parts.push("invalid arguments".to_owned());
    }
    format!("{} (see {help})", parts.join("; "))
}

/// `chimera pack-host`: the child side of an isolated pack.
fn pack_host(args: &args::PackHostArgs) -> Result<(), Failure> {
    let (name, config) = spec::parse_pack_spec(&args.pack)?;
    chimera_host::plugins::serve_pack_host(&name, &config, args.state_shared).map_err(Failure::pack)
}

/// The matches of the subcommand that runs (`packs list`'s, not `packs`').
fn innermost(matches: &ArgMatches) -> &ArgMatches {
    match matches.subcommand() {
        Some((_, inner)) => innermost(inner),
        None => matches,
    }
}

/// Runs the command line and returns its exit status.
pub(crate) fn main() -> ExitCode {
    init_logging();
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (matches, cli)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(error)
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // A bare `chimera` (or `chimera packs`): the help, on stderr, exit 2.
            let _ = error.print();
            return ExitCode::from(2);
        }
        Err(error) => return Failure::usage(usage_line(&error.to_string())).exit(),
    };
    let config = cli.config.as_deref();
    let given = innermost(&matches);
    let outcome = match cli.command {
        Command::Run(mut args) => {
            settings::apply(config, given, &mut args).and_then(|()| run::run(args))
        }
        Command::Demo(args) => demo::demo(args),
        Command::Serve(mut args) => {
            settings::apply(config, given, &mut args).and_then(|()| serve::serve(args))
        }
        Command::Packs(PacksCommand::List { mut search, json }) => {
            settings::apply(config, given, &mut search).and_then(|()| packs::list(&search, json))
        }
        Command::Packs(PacksCommand::Check {
            file,
            sealed_stdin: _,
            packs: specs,
            json,
            allow_insecure,
        }) => packs::check(file.as_deref(), &specs, json, allow_insecure),
        Command::Packs(PacksCommand::Lock { mut search, lock }) => {
            settings::apply(config, given, &mut search)
                .and_then(|()| packs::lock(&search, lock.as_deref()))
        }
        Command::Packs(PacksCommand::Verify { mut search, lock }) => {
            settings::apply(config, given, &mut search)
                .and_then(|()| packs::verify(&search, lock.as_deref()))
        }
        Command::Pack(PackCommand::New(args)) => pack_new::new(args),
        Command::Pack(PackCommand::Test(mut args)) => {
            settings::apply(config, given, &mut args.search).and_then(|()| pack_test::test(args))
        }
        Command::Config(ConfigCommand::Show { json }) => settings::show(config, json),
        Command::Config(ConfigCommand::Trust { file }) => settings::trust(file.as_deref()),
        Command::Audit(AuditCommand::Verify { file, expect_head }) => {
            audit::verify(&file, expect_head.as_deref())
        }
        Command::Audit(AuditCommand::Summarise {
            file,
            expect_head,
            json,
        }) => audit::summarise(&file, expect_head.as_deref(), json),
        Command::Tools(ToolsCommand::List(mut args)) => settings::apply(config, given, &mut args)
            .and_then(|()| tools::list(args.json, &args.mcp, args.workspace.as_deref())),
        Command::Mcp(McpCommand::Guard(mut args)) => {
            settings::apply(config, given, &mut *args).and_then(|()| mcp::guard(*args))
        }
        Command::Mcp(McpCommand::Pin(args)) => mcp::pin(args),
        Command::PackHost(args) => pack_host(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.exit(),
    }
}
