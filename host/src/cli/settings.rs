//! How `chimera.toml` (found, read and trusted by `chimera_host::config`)
//! and the command line become one set of settings: flags override the
//! file, key by key; a list given on the command line (`--pack`,
//! `--plugins-dir`, `--ask`, …) replaces the file's; relative paths in the
//! file are relative to the file's directory. `config show` prints every
//! effective value and where it came from.
//!
//! Over 700 lines because of its tests (the last hundred): the merge code
//! itself is one idea, a flag over a file key, applied to `run`'s and
//! `serve`'s arguments.

use super::args::{
    Cli, ClientLimitArgs, McpArgs, RunArgs, SearchArgs, ServeArgs, StateArgs, StreamPolicyArg,
    TrustArgs,
};
use super::failure::Failure;
use chimera_host::config::{
    self, Answer, ApprovalsSection, ConfigError, FileConfig, Loaded, McpSection, PackEntry,
    ProviderSection, ServeSection, SessionSection, StateSection, StreamPolicyName, TrustSection,
    UpstreamSection, FILE_NAME,
};
use chimera_host::interception::PackMode;
use chimera_host::state::FailPolicy;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

impl From<StreamPolicyName> for StreamPolicyArg {
    fn from(name: StreamPolicyName) -> Self {
        match name {
            StreamPolicyName::Downgrade => StreamPolicyArg::Downgrade,
            StreamPolicyName::Allow => StreamPolicyArg::Allow,
        }
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Self {
        Failure::usage(error.to_string())
    }
}

/// The configuration file to use, loaded and checked.
fn load(named: Option<&Path>) -> Result<Option<Loaded>, Failure> {
    Ok(config::load(named)?)
}

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Flag,
    File(PathBuf),
    Default,
}

impl Origin {
    fn describe(&self) -> String {
        match self {
            Origin::Flag => "command line".to_owned(),
            Origin::File(path) => path.display().to_string(),
            Origin::Default => "default".to_owned(),
        }
    }
}

/// One effective setting, as `config show` prints it.
#[derive(Debug)]
struct Setting {
    key: &'static str,
    value: Value,
    origin: Origin,
}

/// A value `config show` can print.
trait Shown {
    fn shown(&self) -> Value;
}

macro_rules! shown_as_json {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> Value {
                json!(self)
            }
        }
    )*};
}
shown_as_json!(
    bool,
    u32,
    u64,
    usize,
    Option<String>,
    Option<PathBuf>,
    Vec<String>,
    Vec<PathBuf>,
    std::net::SocketAddr,
    Option<std::net::SocketAddr>,
    chimera_host::gateway::SessionScope,
    FailPolicy
);

impl Shown for StreamPolicyArg {
    fn shown(&self) -> Value {
        json!(match self {
            StreamPolicyArg::Downgrade => "downgrade",
            StreamPolicyArg::Allow => "allow",
        })
    }
}

/// Applies a file's values to the command line's, key by key, where no
/// flag set the key, and records where each value came from.
struct Merge<'a> {
    /// Whether the user gave this argument (by its clap id) on the command line.
    explicit: &'a dyn Fn(&str) -> bool,
    file: Option<&'a Path>,
    loaded: Option<&'a Loaded>,
    settings: Vec<Setting>,
}

impl Merge<'_> {
    /// A path the file gives, resolved against the file's directory.
    fn path(&self, path: Option<&PathBuf>) -> Option<PathBuf> {
        path.map(|p| self.loaded.map_or_else(|| p.clone(), |l| l.resolve(p)))
    }

    /// Paths the file gives, each resolved against the file's directory.
    fn paths(&self, paths: Option<&Vec<PathBuf>>) -> Option<Vec<PathBuf>> {
        paths.map(|ps| ps.iter().filter_map(|p| self.path(Some(p))).collect())
    }

    /// `slot` (clap id `id`, shown as `key`) takes `from_file` unless a flag set it.
    fn take<T: Shown>(&mut self, key: &'static str, id: &str, slot: &mut T, from_file: Option<T>) {
        let origin = if (self.explicit)(id) {
            Origin::Flag
        } else if let (Some(value), Some(file)) = (from_file, self.file) {
            *slot = value;
            Origin::File(file.to_owned())
        } else {
            Origin::Default
        };
        self.record(key, slot.shown(), origin);
    }

    /// Records a setting merged by hand.
    fn record(&mut self, key: &'static str, value: Value, origin: Origin) {
        self.settings.push(Setting { key, value, origin });
    }
}

/// Subcommand `name`'s parsed arguments, to ask which the user gave.
fn matches_of(name: &str) -> Option<ArgMatches> {
    Cli::command()
        .try_get_matches_from(std::env::args_os())
        .ok()
        .and_then(|m| m.subcommand_matches(name).cloned())
}

/// "Did the user give argument `id` of subcommand `name`?", asked of the
/// process's command line.
fn given_on_command_line(name: &str) -> impl Fn(&str) -> bool {
    let matches = matches_of(name);
    move |id: &str| {
        matches
            .as_ref()
            .is_some_and(|m| m.value_source(id) == Some(ValueSource::CommandLine))
    }
}

/// The arguments every command that loads packs shares.
struct PackArgs<'a> {
    search: &'a mut SearchArgs,
    packs: &'a mut Vec<String>,
    isolate: &'a mut Vec<String>,
    monitor: &'a mut Vec<String>,
    /// A server's packs that fail open (`serve` only).
    fail_open: Option<&'a mut Vec<String>>,
    trust: &'a mut TrustArgs,
}

/// The [`PackArgs`] of a command's arguments (`run`'s; a server's, with
/// its `fail_open`).
macro_rules! pack_args {
    ($args:expr) => {
        pack_args!($args, None)
    };
    ($args:expr, $fail_open:expr) => {
        PackArgs {
            search: &mut $args.search,
            packs: &mut $args.packs,
            isolate: &mut $args.isolate,
            monitor: &mut $args.monitor,
            fail_open: $fail_open,
            trust: &mut $args.trust,
        }
    };
}

/// A merge of `loaded`'s file (if any) into arguments whose given ones
/// `explicit` names.
fn merger<'a>(loaded: Option<&'a Loaded>, explicit: &'a dyn Fn(&str) -> bool) -> Merge<'a> {
    Merge {
        explicit,
        file: loaded.map(|l| l.path.as_path()),
        loaded,
        settings: Vec::new(),
    }
}

/// A merge of `loaded` (or of no file) with the packs, the search path and
/// `[trust]` done, and the file's contents for the command's own sections.
fn begin<'a>(
    args: PackArgs<'_>,
    loaded: Option<&'a Loaded>,
    explicit: &'a dyn Fn(&str) -> bool,
) -> (Merge<'a>, &'a FileConfig) {
    static NO_FILE: std::sync::LazyLock<FileConfig> = std::sync::LazyLock::new(FileConfig::default);
    let config = loaded.map_or(&*NO_FILE, |l| &l.config);
    let mut m = merger(loaded, explicit);
    merge_packs(&mut m, args, config);
    (m, config)
}

/// Applies the configuration file to `args` (flags win) and returns where
/// each setting came from.
fn merge(
    args: &mut RunArgs,
    loaded: Option<&Loaded>,
    explicit: &dyn Fn(&str) -> bool,
) -> Vec<Setting> {
    let (mut m, config) = begin(pack_args!(args), loaded, explicit);
    merge_provider(&mut m, args, &config.provider);
    merge_approvals(&mut m, args, &config.approvals);
    merge_session(&mut m, args, &config.session);
    merge_mcp(&mut m, &mut args.mcp, &config.mcp);
    m.settings
}

/// `[mcp.servers]`, unless `--mcp` gave the servers (a list given on the
/// command line replaces the file's).
fn merge_mcp(m: &mut Merge<'_>, args: &mut McpArgs, section: &McpSection) {
    if !args.servers.is_empty() {
        m.record("mcp.servers", json!(args.servers), Origin::Flag);
        return;
    }
    match (&section.servers, m.file) {
        (Some(servers), Some(file)) => {
            args.from_file = servers.clone().into_iter().collect();
            let shown: serde_json::Map<String, Value> = servers
                .iter()
                .map(|(name, entry)| {
                    let reached = match (&entry.command, &entry.url) {
                        (Some(command), _) => {
                            let mut words = vec![command.clone()];
                            words.extend(entry.args.iter().flatten().cloned());
                            json!(words.join(" "))
                        }
                        (None, url) => json!(url),
                    };
                    (name.clone(), reached)
                })
                .collect();
            m.record(
                "mcp.servers",
                Value::Object(shown),
                Origin::File(file.to_owned()),
            );
        }
        _ => m.record("mcp.servers", json!({}), Origin::Default),
    }
}

/// `tools list`: the file's `[mcp.servers]`, unless `--mcp` was given.
pub(crate) fn apply_to_mcp(named: Option<&Path>, args: &mut McpArgs) -> Result<(), Failure> {
    let loaded = load(named)?;
    let config = loaded.as_ref().map(|l| &l.config);
    let mut m = merger(loaded.as_ref(), &|_| false);
    if let Some(config) = config {
        merge_mcp(&mut m, args, &config.mcp);
    }
    Ok(())
}

/// The search path, the packs (and which are isolated, which monitored)
/// and `[trust]`.
fn merge_packs(m: &mut Merge<'_>, args: PackArgs<'_>, config: &FileConfig) {
    let dirs = m.paths(config.plugins_dirs.as_ref());
    m.take(
        "plugins_dirs",
        "plugins_dirs",
        &mut args.search.plugins_dirs,
        dirs,
    );
    let packs = config.packs.as_ref().map(|packs| {
        packs
            .iter()
            .map(|pack| match &pack.config {
                Some(table) => format!("{}={}", pack.name, json!(table)),
                None => pack.name.clone(),
            })
            .collect::<Vec<_>>()
    });
    m.take("packs", "packs", args.packs, packs);
    // The names of the file's packs `keep` picks, when its packs are the
    // ones loaded.
    let named = |m: &Merge<'_>, keep: &dyn Fn(&PackEntry) -> bool| {
        config
            .packs
            .as_ref()
            .filter(|_| !(m.explicit)("packs"))
            .map(|packs| {
                packs
                    .iter()
                    .filter(|pack| keep(pack))
                    .map(|pack| pack.name.clone())
                    .collect::<Vec<_>>()
            })
    };
    let isolate = named(m, &|pack| pack.isolate == Some(true));
    m.take("isolate", "isolate", args.isolate, isolate);
    let monitor = named(m, &|pack| pack.mode == Some(PackMode::Monitor));
    m.take("monitor", "monitor", args.monitor, monitor);
    if let Some(fail_open) = args.fail_open {
        let open = named(m, &|pack| pack.on_unavailable == Some(FailPolicy::Open));
        m.take("fail_open", "fail_open", fail_open, open);
    }
    merge_trust(m, args.trust, &config.trust);
}

/// `[serve]`'s keys into the `serve` flags of the same names.
macro_rules! serve_keys {
    ($m:expr, $args:expr, $serve:expr; $($name:ident),* $(,)?) => {$(
        $m.take(
            concat!("serve.", stringify!($name)),
            stringify!($name),
            &mut $args.$name,
            $serve.$name,
        );
    )*};
}

/// Applies the configuration file to `serve`'s `args` (flags win): the
/// packs and `[trust]` as for `run`, then `[serve]`.
fn merge_for_serve(
    args: &mut ServeArgs,
    loaded: Option<&Loaded>,
    explicit: &dyn Fn(&str) -> bool,
) -> Vec<Setting> {
    let (mut m, config) = begin(
        pack_args!(args, Some(&mut args.fail_open)),
        loaded,
        explicit,
    );
    let serve = &config.serve;
    serve_keys!(m, args, serve; listen, body_cap, header_cap, concurrency, max_sessions,
        session_scope, upstream_connect_timeout, upstream_timeout, upstream_retries, watch);
    let metrics_key = serve.metrics_key_sha256.clone().map(Some);
    m.take(
        "serve.metrics_key_sha256",
        "metrics_key_sha256",
        &mut args.metrics_key_sha256,
        metrics_key,
    );
    let metrics_listen = serve.metrics_listen.map(Some);
    m.take(
        "serve.metrics_listen",
        "metrics_listen",
        &mut args.metrics_listen,
        metrics_listen,
    );
    m.take(
        "serve.client_key_sha256",
        "client_key_hashes",
        &mut args.client_key_hashes,
        serve.client_key_sha256.clone(),
    );
    m.take(
        "serve.stream_policy",
        "stream_policy",
        &mut args.stream_policy,
        serve.stream_policy.map(Into::into),
    );
    let audit = m.path(serve.audit.as_ref()).map(Some);
    m.take("serve.audit", "audit", &mut args.audit, audit);
    merge_upstream(
        &mut m,
        [
            "serve.openai.base_url",
            "serve.openai.key_env",
            "serve.openai.models",
            "upstream",
        ],
        (
            &mut args.upstream,
            &mut args.upstream_key_env,
            &mut args.models,
        ),
        serve.openai.as_ref(),
    );
    merge_upstream(
        &mut m,
        [
            "serve.anthropic.base_url",
            "serve.anthropic.key_env",
            "serve.anthropic.models",
            "anthropic_upstream",
        ],
        (
            &mut args.anthropic_upstream,
            &mut args.anthropic_key_env,
            &mut args.anthropic_models,
        ),
        serve.anthropic.as_ref(),
    );
    merge_state(&mut m, &mut args.state, &config.state);
    merge_limits(&mut m, &mut args.limits, serve);
    m.settings
}

/// `[serve]`'s bounds on one client into their flags (each key named as
/// its flag).
fn merge_limits(m: &mut Merge<'_>, args: &mut ClientLimitArgs, serve: &ServeSection) {
    serve_keys!(m, args, serve; header_timeout, body_timeout, write_timeout, buffer_cap,
        key_buffer_cap, key_concurrency, rate_limit_hold);
}

/// `[state]` into the `--state-*` flags.
fn merge_state(m: &mut Merge<'_>, args: &mut StateArgs, state: &StateSection) {
    m.take(
        "state.redis",
        "redis",
        &mut args.redis,
        state.redis.clone().map(Some),
    );
    m.take(
        "state.timeout_ms",
        "timeout_ms",
        &mut args.timeout_ms,
        state.timeout_ms,
    );
    m.take(
        "state.on_unavailable",
        "on_unavailable",
        &mut args.on_unavailable,
        state.on_unavailable,
    );
    let policies = state.policies.as_ref().map(|policies| {
        policies
            .iter()
            .map(|(pack, policy)| format!("{pack}={}", policy.name()))
            .collect()
    });
    m.take("state.policies", "policies", &mut args.policies, policies);
}

/// One `[serve.*]` upstream (its three keys and the clap id of its URL
/// flag): a URL on the command line chooses the upstream whole, so the
/// file's key variable and models are not mixed into it.
fn merge_upstream(
    m: &mut Merge<'_>,
    [url_key, key_env_key, models_key, id]: [&'static str; 4],
    (url, key_env, models): (&mut Option<String>, &mut Option<String>, &mut Vec<String>),
    section: Option<&UpstreamSection>,
) {
    let flag = (m.explicit)(id);
    let section = section.filter(|_| !flag);
    m.take(
        url_key,
        id,
        url,
        section.and_then(|s| s.base_url.clone()).map(Some),
    );
    let origin = match (flag, section, m.file) {
        (true, _, _) => Origin::Flag,
        (false, Some(_), Some(file)) => Origin::File(file.to_owned()),
        _ => Origin::Default,
    };
    if let Some(section) = section {
        if key_env.is_none() {
            key_env.clone_from(&section.key_env);
        }
        if models.is_empty() {
            models.clone_from(section.models.as_ref().unwrap_or(&Vec::new()));
        }
    }
    m.record(key_env_key, key_env.shown(), origin.clone());
    m.record(models_key, models.shown(), origin);
}

/// `[trust]`.
fn merge_trust(m: &mut Merge<'_>, t: &mut TrustArgs, trust: &TrustSection) {
    m.take("trust.locked", "locked", &mut t.locked, trust.locked);
    m.take(
        "trust.lock",
        "lock",
        &mut t.lock,
        m.path(trust.lock.as_ref()).map(Some),
    );
    m.take(
        "trust.allow_insecure_plugins_dir",
        "allow_insecure",
        &mut t.allow_insecure,
        trust.allow_insecure_plugins_dir,
    );
    m.take("trust.probe", "probe", &mut t.probe, trust.probe);
    let mut probe_on_reload = !t.no_probe_on_reload;
    m.take(
        "trust.probe_on_reload",
        "no_probe_on_reload",
        &mut probe_on_reload,
        trust.probe_on_reload,
    );
    t.no_probe_on_reload = !probe_on_reload;
    m.take(
        "trust.probe_timeout",
        "probe_timeout",
        &mut t.probe_timeout,
        trust.probe_timeout,
    );
    m.take(
        "trust.quarantine_after",
        "quarantine_after",
        &mut t.quarantine_after,
        trust.quarantine_after,
    );
    m.take(
        "trust.quarantine_window",
        "quarantine_window",
        &mut t.quarantine_window,
        trust.quarantine_window,
    );
    m.take(
        "trust.call_budget_ms",
        "call_budget_ms",
        &mut t.call_budget_ms,
        trust.call_budget_ms,
    );
    m.take(
        "trust.call_budget_per_mib_ms",
        "call_budget_per_mib_ms",
        &mut t.call_budget_per_mib_ms,
        trust.call_budget_per_mib_ms,
    );
    m.take(
        "trust.isolate_processes",
        "isolate_processes",
        &mut t.isolate_processes,
        trust.isolate_processes,
    );
}

/// `[provider]`: the command line's choice of model source wins whole.
fn merge_provider(m: &mut Merge<'_>, args: &mut RunArgs, provider: &ProviderSection) {
    // A file naming a provider and a command line naming a script (or the
    // other way round) mean the command line's choice: the model comes
    // from one place.
    let model_chosen = (m.explicit)("provider") || (m.explicit)("script");
    let from_file = |value: Option<String>| if model_chosen { None } else { value };
    let name = provider.name.clone().filter(|n| n != "scripted");
    m.take(
        "provider.name",
        "provider",
        &mut args.provider,
        from_file(name).map(Some),
    );
    m.take(
        "provider.script",
        "script",
        &mut args.script,
        if model_chosen {
            None
        } else {
            m.path(provider.script.as_ref()).map(Some)
        },
    );
    m.take(
        "provider.model",
        "model",
        &mut args.model,
        provider.model.clone().map(Some),
    );
    m.take(
        "provider.base_url",
        "base_url",
        &mut args.base_url,
        provider.base_url.clone().map(Some),
    );
    m.take(
        "provider.api_key_env",
        "api_key_env",
        &mut args.api_key_env,
        provider.api_key_env.clone().map(Some),
    );
    m.take(
        "provider.headers",
        "headers",
        &mut args.headers,
        provider.headers.clone(),
    );
    m.take(
        "provider.stream",
        "stream",
        &mut args.stream,
        provider.stream,
    );
    m.take(
        "provider.stream_policy",
        "stream_policy",
        &mut args.stream_policy,
        provider.stream_policy.map(Into::into),
    );
}

/// `[approvals]`.
fn merge_approvals(m: &mut Merge<'_>, args: &mut RunArgs, approvals: &ApprovalsSection) {
    m.take("approvals.ask", "ask", &mut args.ask, approvals.ask.clone());
    m.take(
        "approvals.deny",
        "deny",
        &mut args.deny,
        approvals.deny.clone(),
    );
    let answered = (m.explicit)("yes") || (m.explicit)("no") || (m.explicit)("approvals");
    let origin = match approvals.answer {
        _ if answered => Origin::Flag,
        Some(answer) => {
            args.yes = matches!(answer, Answer::Yes);
            args.no = matches!(answer, Answer::No);
            Origin::File(m.file.map(Path::to_owned).unwrap_or_default())
        }
        None => Origin::Default,
    };
    let shown = match (args.yes, args.no) {
        (true, _) => json!("yes"),
        (_, true) => json!("no"),
        _ => Value::Null,
    };
    m.record("approvals.answer", shown, origin);
    m.take(
        "approvals.answers_file",
        "approvals",
        &mut args.approvals,
        if answered {
            None
        } else {
            m.path(approvals.answers_file.as_ref()).map(Some)
        },
    );
}

/// `[session]`.
fn merge_session(m: &mut Merge<'_>, args: &mut RunArgs, session: &SessionSection) {
    let audit = m.path(session.audit.as_ref()).map(Some);
    m.take("session.audit", "audit", &mut args.audit, audit);
    m.take(
        "session.strategy",
        "strategy",
        &mut args.strategy,
        session.strategy.clone().map(Some),
    );
    m.take(
        "session.strategy_config",
        "strategy_config",
        &mut args.strategy_config,
        session
            .strategy_config
            .as_ref()
            .map(|table| Some(json!(table).to_string())),
    );
    m.take(
        "session.system",
        "system",
        &mut args.system,
        session.system.clone().map(Some),
    );
    m.take(
        "session.max_steps",
        "max_steps",
        &mut args.max_steps,
        session.max_steps,
    );
    m.take(
        "session.workspace",
        "workspace",
        &mut args.workspace,
        m.path(session.workspace.as_ref()).map(Some),
    );
    m.take(
        "session.prices",
        "prices",
        &mut args.prices,
        m.path(session.prices.as_ref()).map(Some),
    );
    m.take(
        "session.compact_keep_turns",
        "compact_keep_turns",
        &mut args.compact_keep_turns,
        session.compact_keep_turns,
    );
    let mut bash_sandbox = !args.no_bash_sandbox;
    m.take(
        "session.bash_sandbox",
        "no_bash_sandbox",
        &mut bash_sandbox,
        session.bash_sandbox,
    );
    args.no_bash_sandbox = !bash_sandbox;
}

/// `run`: the command line's arguments with the configuration file applied.
pub(crate) fn apply_to_run(named: Option<&Path>, args: &mut RunArgs) -> Result<(), Failure> {
    let loaded = load(named)?;
    merge(args, loaded.as_ref(), &given_on_command_line("run"));
    Ok(())
}

/// `serve`: the command line's arguments with the configuration file
/// applied.
pub(crate) fn apply_to_serve(named: Option<&Path>, args: &mut ServeArgs) -> Result<(), Failure> {
    let loaded = load(named)?;
    merge_for_serve(args, loaded.as_ref(), &given_on_command_line("serve"));
    Ok(())
}

/// `packs list | lock | verify`: the file's plugins directories, unless
/// `--plugins-dir` was given.
pub(crate) fn apply_to_search(
    named: Option<&Path>,
    search: &mut SearchArgs,
) -> Result<(), Failure> {
    if !search.plugins_dirs.is_empty() {
        return Ok(());
    }
    if let Some(loaded) = load(named)? {
        if let Some(dirs) = &loaded.config.plugins_dirs {
            search.plugins_dirs = dirs.iter().map(|d| loaded.resolve(d)).collect();
        }
    }
    Ok(())
}

/// `config show`: every effective setting of a `chimera run` (and then
/// of a `chimera serve`) with no flags, and where it came from; then the
/// search path.
pub(crate) fn show(named: Option<&Path>, as_json: bool) -> Result<(), Failure> {
    let loaded = load(named)?;
    let Ok(Cli {
        command: super::args::Command::Run(mut args),
        ..
    }) = Cli::try_parse_from(["chimera", "run"])
    else {
        return Err(Failure::usage("cannot build the default run settings"));
    };
    let mut settings = merge(&mut args, loaded.as_ref(), &|_| false);
    if let Ok(Cli {
        command: super::args::Command::Serve(mut serve),
        ..
    }) = Cli::try_parse_from(["chimera", "serve"])
    {
        // The packs and [trust] are shown once, above; then `serve`'s own.
        let served = merge_for_serve(&mut serve, loaded.as_ref(), &|_| false);
        settings.extend(served.into_iter().filter(|s| s.key.starts_with("serve.")));
    }
    let search: Vec<String> = config::search_path(&args.search.plugins_dirs)
        .iter()
        .map(|dir| dir.path.display().to_string())
        .collect();
    let file = loaded.as_ref().map(|l| l.path.display().to_string());
    if as_json {
        let mut object = serde_json::Map::new();
        for setting in &settings {
            object.insert(
                setting.key.to_owned(),
                json!({"value": setting.value, "source": setting.origin.describe()}),
            );
        }
        println!(
            "{}",
            json!({"file": file, "settings": object, "search_path": search})
        );
        return Ok(());
    }
    match &file {
        Some(file) => println!("configuration file: {file}"),
        None => println!(
            "configuration file: none (looked for ./{FILE_NAME} and {})",
            config::user_file().map_or_else(
                || "the user config directory".to_owned(),
                |p| p.display().to_string()
            )
        ),
    }
    let width = settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
    for setting in &settings {
        println!(
            "{:<width$}  {}  ({})",
            setting.key,
            setting.value,
            setting.origin.describe()
        );
    }
    println!("search path (in order): {}", search.join(", "));
    Ok(())
}

/// `config trust [FILE]`: pins the project file (default `./chimera.toml`)
/// at its current contents, after checking that it parses.
pub(crate) fn trust(file: Option<&Path>) -> Result<(), Failure> {
    let (path, store) = config::trust(file)?;
    println!(
        "trusted {} at its current contents (recorded in {})",
        path.display(),
        store.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<FileConfig, String> {
        config::parse(Path::new("chimera.toml"), text).map_err(|e| e.to_string())
    }

    use super::super::args::Command;

    fn run_args() -> RunArgs {
        match Cli::try_parse_from(["chimera", "run"]).unwrap().command {
            Command::Run(args) => args,
            _ => unreachable!(),
        }
    }

    /// `config` as read from `/project/chimera.toml`.
    fn project_file(config: FileConfig) -> Loaded {
        Loaded {
            path: PathBuf::from("/project/chimera.toml"),
            config,
        }
    }

    #[test]
    fn the_file_fills_what_no_flag_set_and_flags_win() {
        let config = parsed(
            "plugins_dirs = [\"plugins\"]\n[[packs]]\nname = \"redactor\"\n[[packs]]\nname = \"plan-gate\"\nconfig = { max = 3 }\n[trust]\nquarantine_after = 5\n[session]\nmax_steps = 7\nstrategy = \"tree-of-thought\"\nstrategy_config = { candidates = 2 }\naudit = \"audit.jsonl\"\n",
        )
        .unwrap();
        let loaded = project_file(config);
        let mut args = run_args();
        args.max_steps = 9;
        let settings = merge(&mut args, Some(&loaded), &|id| id == "max_steps");
        assert_eq!(
            args.search.plugins_dirs,
            [PathBuf::from("/project/plugins")]
        );
        assert_eq!(args.packs, ["redactor", "plan-gate={\"max\":3}"]);
        assert_eq!(args.trust.quarantine_after, 5);
        assert_eq!(args.max_steps, 9, "the flag wins");
        assert_eq!(args.strategy.as_deref(), Some("tree-of-thought"));
        assert_eq!(args.audit, Some(PathBuf::from("/project/audit.jsonl")));
        assert_eq!(args.strategy_config.as_deref(), Some("{\"candidates\":2}"));
        let origin = |key: &str| {
            settings
                .iter()
                .find(|s| s.key == key)
                .map(|s| s.origin.clone())
                .unwrap()
        };
        assert_eq!(origin("session.max_steps"), Origin::Flag);
        assert_eq!(
            origin("trust.quarantine_after"),
            Origin::File(PathBuf::from("/project/chimera.toml"))
        );
        assert_eq!(origin("trust.call_budget_ms"), Origin::Default);
    }

    fn serve_args(extra: &[&str]) -> ServeArgs {
        let args = ["chimera", "serve"].iter().chain(extra).copied();
        match Cli::try_parse_from(args).unwrap().command {
            Command::Serve(args) => args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_serve_section_fills_what_no_flag_set_and_a_flag_upstream_is_taken_whole() {
        let config = parsed(
            "[[packs]]\nname = \"redactor\"\n[serve]\nlisten = \"127.0.0.1:9000\"\nconcurrency = 8\naudit = \"a.jsonl\"\n[serve.openai]\nbase_url = \"http://file/v1\"\nkey_env = \"FILE_KEY\"\nmodels = [\"gpt-file\"]\n[serve.anthropic]\nbase_url = \"http://file-a\"\nmodels = [\"claude-file\"]\n",
        )
        .unwrap();
        let loaded = project_file(config);
        let mut args = serve_args(&[
            "--concurrency",
            "2",
            "--upstream",
            "http://flag/v1",
            "--model",
            "gpt-flag",
        ]);
        let explicit = |id: &str| ["concurrency", "upstream", "models"].contains(&id);
        merge_for_serve(&mut args, Some(&loaded), &explicit);
        assert_eq!(args.packs, ["redactor"]);
        assert_eq!(args.listen.to_string(), "127.0.0.1:9000");
        assert_eq!(args.concurrency, 2, "the flag wins");
        assert_eq!(args.audit, Some(PathBuf::from("/project/a.jsonl")));
        assert_eq!(args.upstream.as_deref(), Some("http://flag/v1"));
        assert_eq!(args.models, ["gpt-flag"]);
        assert_eq!(
            args.upstream_key_env, None,
            "not mixed in from the file's upstream"
        );
        assert_eq!(args.anthropic_upstream.as_deref(), Some("http://file-a"));
        assert_eq!(args.anthropic_models, ["claude-file"]);
    }

    #[test]
    fn a_packs_on_unavailable_fail_open_is_serves_fail_open_and_the_flag_wins() {
        let config = parsed(
            "[[packs]]\nname = \"redactor\"\non_unavailable = \"fail_open\"\n[[packs]]\nname = \"stop-words\"\non_unavailable = \"fail_closed\"\n",
        )
        .unwrap();
        let loaded = project_file(config);
        let mut args = serve_args(&[]);
        merge_for_serve(&mut args, Some(&loaded), &|_| false);
        assert_eq!(args.fail_open, ["redactor"]);
        let mut args = serve_args(&["--fail-open", "stop-words"]);
        merge_for_serve(&mut args, Some(&loaded), &|id| id == "fail_open");
        assert_eq!(args.fail_open, ["stop-words"], "the flag wins");
        let error = parsed("[[packs]]\nname = \"a\"\non_unavailable = \"open\"\n").unwrap_err();
        assert!(error.contains("open"), "{error}");
    }

    #[test]
    fn the_state_section_names_the_store_and_each_packs_policy_and_a_flag_wins() {
        let config = parsed(
            "[state]\nredis = \"redis://127.0.0.1:6379\"\ntimeout_ms = 50\non_unavailable = \"fail_open\"\n[state.policies]\ntoken-budget = \"fail_closed\"\n",
        )
        .unwrap();
        let loaded = project_file(config);
        let mut args = serve_args(&["--state-timeout-ms", "20"]);
        let explicit = |id: &str| id == "timeout_ms";
        let settings = merge_for_serve(&mut args, Some(&loaded), &explicit);
        assert_eq!(args.state.redis.as_deref(), Some("redis://127.0.0.1:6379"));
        assert_eq!(args.state.timeout_ms, 20, "the flag wins");
        assert_eq!(args.state.on_unavailable, FailPolicy::Open);
        assert_eq!(args.state.policies, ["token-budget=fail_closed"]);
        let shown = settings
            .iter()
            .find(|s| s.key == "state.on_unavailable")
            .expect("config show lists it");
        assert_eq!(shown.value, json!("fail_open"));
        // A policy that is neither is the file's error, naming it.
        let error = parsed("[state]\non_unavailable = \"maybe\"\n").unwrap_err();
        assert!(error.contains("maybe"), "{error}");
    }
}
