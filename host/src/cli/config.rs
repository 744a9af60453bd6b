//! `chimera.toml`: the settings an operator would otherwise retype on every
//! run — plugins directories, the packs in load order with their configs,
//! trust and containment, the provider and model, approvals and the session.
//!
//! Where it is found: `--config FILE`; else `./chimera.toml` (the project
//! directory, never its parents); else the per-user file
//! (`$XDG_CONFIG_HOME/chimera/chimera.toml`, else
//! `~/.config/chimera/chimera.toml`). The first found is the one used; files
//! are not merged. Flags override the file, key by key; a list given on the
//! command line (`--pack`, `--plugins-dir`, `--ask`, …) replaces the file's.
//! Relative paths in the file are relative to the file's directory.
//!
//! A project file names code to load, so a cloned repository's
//! `chimera.toml` must not run anything just because `chimera` was started
//! inside it: it is used only once `chimera config trust` has pinned its
//! SHA-256 (in the per-user `trusted.json`), and again after every change.
//! `--config FILE` and the per-user file are the user's own choice and need
//! no trust step.
//!
//! Every file is read as hostile: a regular file (never a FIFO), at most
//! 1 MiB, UTF-8; unknown keys are errors naming the key and its line.

use super::args::{Cli, RunArgs, SearchArgs, StreamPolicyArg, TrustArgs};
use super::failure::Failure;
use super::search_path::{search_path, user_config_dir};
use chimera_host::agent::read_user_file;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file's name, in the project directory and the user config directory.
pub(crate) const FILE_NAME: &str = "chimera.toml";

/// Configuration files and the trust store are small; anything larger is
/// refused rather than read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The trust store's name in the user config directory.
const TRUST_STORE: &str = "trusted.json";

/// The file's contents. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    /// Directories to search for packs, before the environment's.
    plugins_dirs: Option<Vec<PathBuf>>,
    /// The packs, in load order.
    packs: Option<Vec<PackEntry>>,
    /// Trust and containment.
    #[serde(default)]
    trust: TrustSection,
    /// Which model the session talks to.
    #[serde(default)]
    provider: ProviderSection,
    /// Who may run which tool, and who answers.
    #[serde(default)]
    approvals: ApprovalsSection,
    /// The session itself.
    #[serde(default)]
    session: SessionSection,
}

/// `[[packs]]`: one pack, by entry-point name, with its config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PackEntry {
    name: String,
    /// The pack's config, written as a TOML table (handed over as JSON).
    config: Option<toml::Table>,
    /// Run it in a sandboxed child process of its own (`--isolate NAME`).
    isolate: Option<bool>,
}

/// `[trust]`, the trust and containment flags of `run`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustSection {
    locked: Option<bool>,
    lock: Option<PathBuf>,
    allow_insecure_plugins_dir: Option<bool>,
    probe: Option<bool>,
    probe_on_reload: Option<bool>,
    probe_timeout: Option<u64>,
    quarantine_after: Option<u32>,
    quarantine_window: Option<u64>,
    call_budget_ms: Option<u64>,
}

/// `[provider]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    /// `openai`, `anthropic` or `scripted` (with `script`).
    name: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    script: Option<PathBuf>,
    headers: Option<Vec<String>>,
    stream: Option<bool>,
    stream_policy: Option<StreamPolicyName>,
}

/// `[approvals]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalsSection {
    ask: Option<Vec<String>>,
    deny: Option<Vec<String>>,
    /// `yes` approves every ask, `no` rejects every ask.
    answer: Option<Answer>,
    /// Answers, one JSON object per line (as `--approvals FILE`).
    answers_file: Option<PathBuf>,
}

/// `[session]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionSection {
    system: Option<String>,
    max_steps: Option<usize>,
    workspace: Option<PathBuf>,
    prices: Option<PathBuf>,
    compact_keep_turns: Option<usize>,
    bash_sandbox: Option<bool>,
    /// `react`, `plan-and-execute`, `reflexion`, `tree-of-thought`,
    /// `plan-act` or `retry`.
    strategy: Option<String>,
    /// The strategy's settings, as a table (`{ candidates = 2 }`).
    strategy_config: Option<toml::Table>,
    /// The audit log every run appends to (as `--audit FILE`).
    audit: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Answer {
    Yes,
    No,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StreamPolicyName {
    Downgrade,
    Allow,
}

impl From<StreamPolicyName> for StreamPolicyArg {
    fn from(name: StreamPolicyName) -> Self {
        match name {
            StreamPolicyName::Downgrade => StreamPolicyArg::Downgrade,
            StreamPolicyName::Allow => StreamPolicyArg::Allow,
        }
    }
}

/// How a file was found, which decides whether it must be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// `--config FILE`.
    Named,
    /// `./chimera.toml`.
    Project,
    /// The per-user file.
    User,
}

/// A parsed file and where it is.
#[derive(Debug)]
struct Loaded {
    path: PathBuf,
    config: FileConfig,
}

impl Loaded {
    /// `path` as the file means it: relative to the file's directory.
    fn resolve(&self, path: &Path) -> PathBuf {
        match self.path.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        }
    }
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
    Vec<PathBuf>
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

/// Reads the user-named file at `path` as configuration text.
fn read(path: &Path) -> Result<String, Failure> {
    read_user_file(path, MAX_FILE_BYTES)
        .map_err(|reason| Failure::usage(format!("{}: {reason}", path.display())))
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

/// Parses `text` (read from `path`); an error names the line and the problem.
fn parse(path: &Path, text: &str) -> Result<FileConfig, Failure> {
    toml::from_str(text).map_err(|error| {
        let line = error.span().map_or(String::new(), |span| {
            format!(" line {}", line_of(text, span.start))
        });
        Failure::usage(format!(
            "{}{line}: {}",
            path.display(),
            error.message().trim()
        ))
    })
}

/// The per-user configuration file's path.
fn user_file() -> Option<PathBuf> {
    user_config_dir().map(|dir| dir.join(FILE_NAME))
}

/// The file to use, if any, and how it was found.
fn locate(named: Option<&Path>) -> Option<(PathBuf, Found)> {
    if let Some(path) = named {
        return Some((path.to_owned(), Found::Named));
    }
    let project = Path::new(FILE_NAME);
    if project.exists() {
        let absolute = std::path::absolute(project).unwrap_or_else(|_| project.to_owned());
        return Some((absolute, Found::Project));
    }
    user_file()
        .filter(|path| path.exists())
        .map(|path| (path, Found::User))
}

/// The trust store: configuration file path → the SHA-256 it was trusted at.
fn trust_store() -> Result<(PathBuf, BTreeMap<String, String>), Failure> {
    let dir = user_config_dir().ok_or_else(|| {
        Failure::usage("cannot find the user config directory (set HOME or XDG_CONFIG_HOME)")
    })?;
    let path = dir.join(TRUST_STORE);
    if !path.exists() {
        return Ok((path, BTreeMap::new()));
    }
    let text = read(&path)?;
    let store = serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "{}: not a trust store ({e}); remove it and trust again",
            path.display()
        ))
    })?;
    Ok((path, store))
}

fn digest(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// Loads the configuration file `--config` names or the search finds; a
/// project file must have been trusted at its current contents.
fn load(named: Option<&Path>) -> Result<Option<Loaded>, Failure> {
    let Some((path, found)) = locate(named) else {
        return Ok(None);
    };
    let text = read(&path)?;
    if found == Found::Project {
        let (_, store) = trust_store()?;
        let key = path.display().to_string();
        match store.get(&key) {
            Some(hash) if *hash == digest(&text) => {}
            Some(_) => {
                return Err(Failure::usage(format!(
                    "{key} changed since it was trusted: review it, then run `chimera config trust` (or pass --config {FILE_NAME})"
                )))
            }
            None => {
                return Err(Failure::usage(format!(
                    "{key} is not trusted yet (it names code to load): review it, then run `chimera config trust` (or pass --config {FILE_NAME})"
                )))
            }
        }
    }
    let config = parse(&path, &text)?;
    Ok(Some(Loaded { path, config }))
}

/// The `run` subcommand's parsed arguments, to ask which the user gave.
fn run_matches() -> Option<ArgMatches> {
    Cli::command()
        .try_get_matches_from(std::env::args_os())
        .ok()
        .and_then(|m| m.subcommand_matches("run").cloned())
}

/// Applies the configuration file to `args` (flags win) and returns where
/// each setting came from.
fn merge(
    args: &mut RunArgs,
    loaded: Option<&Loaded>,
    explicit: &dyn Fn(&str) -> bool,
) -> Vec<Setting> {
    let empty = FileConfig::default();
    let config = loaded.map_or(&empty, |l| &l.config);
    let mut m = Merge {
        explicit,
        file: loaded.map(|l| l.path.as_path()),
        loaded,
        settings: Vec::new(),
    };
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
    m.take("packs", "packs", &mut args.packs, packs);
    // The file's isolated packs, when its packs are the ones loaded.
    let isolate = config
        .packs
        .as_ref()
        .filter(|_| !(m.explicit)("packs"))
        .map(|packs| {
            packs
                .iter()
                .filter(|pack| pack.isolate == Some(true))
                .map(|pack| pack.name.clone())
                .collect::<Vec<_>>()
        });
    m.take("isolate", "isolate", &mut args.isolate, isolate);
    merge_trust(&mut m, &mut args.trust, &config.trust);
    merge_provider(&mut m, args, &config.provider);
    merge_approvals(&mut m, args, &config.approvals);
    merge_session(&mut m, args, &config.session);
    m.settings
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

/// Refuses a file that sets both ways of answering approvals.
fn check(loaded: &Loaded) -> Result<(), Failure> {
    let approvals = &loaded.config.approvals;
    if approvals.answer.is_some() && approvals.answers_file.is_some() {
        return Err(Failure::usage(format!(
            "{}: [approvals] sets both answer and answers_file; keep one",
            loaded.path.display()
        )));
    }
    Ok(())
}

/// `run`: the command line's arguments with the configuration file applied.
pub(crate) fn apply_to_run(named: Option<&Path>, args: &mut RunArgs) -> Result<(), Failure> {
    let loaded = load(named)?;
    if let Some(loaded) = &loaded {
        check(loaded)?;
    }
    let matches = run_matches();
    let explicit = |id: &str| {
        matches
            .as_ref()
            .is_some_and(|m| m.value_source(id) == Some(ValueSource::CommandLine))
    };
    merge(args, loaded.as_ref(), &explicit);
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

/// `config show`: every effective setting of a `chimera run` with no flags,
/// and where it came from; then the search path.
pub(crate) fn show(named: Option<&Path>, as_json: bool) -> Result<(), Failure> {
    let loaded = load(named)?;
    if let Some(loaded) = &loaded {
        check(loaded)?;
    }
    let Ok(Cli {
        command: super::args::Command::Run(mut args),
        ..
    }) = Cli::try_parse_from(["chimera", "run"])
    else {
        return Err(Failure::usage("cannot build the default run settings"));
    };
    let settings = merge(&mut args, loaded.as_ref(), &|_| false);
    let search: Vec<String> = search_path(&args.search)
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
            user_file().map_or_else(
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
    let file = file.unwrap_or(Path::new(FILE_NAME));
    let path = std::path::absolute(file)
        .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    let text = read(&path)?;
    parse(&path, &text)?;
    let (store_path, mut store) = trust_store()?;
    store.insert(path.display().to_string(), digest(&text));
    let body = serde_json::to_string_pretty(&store)
        .map_err(|e| Failure::usage(format!("cannot write the trust store: {e}")))?;
    if let Some(dir) = store_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::usage(format!("cannot create {}: {e}", dir.display())))?;
    }
    super::packs::write_atomically(&store_path, &body)?;
    println!(
        "trusted {} at its current contents (recorded in {})",
        path.display(),
        store_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<FileConfig, String> {
        parse(Path::new("chimera.toml"), text).map_err(|f| f.message)
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line() {
        let error = parsed("packs = []\n\n[trust]\nprobe = true\nprobbe = true\n").unwrap_err();
        assert!(error.starts_with("chimera.toml line 5: "), "{error}");
        assert!(error.contains("probbe"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    #[test]
    fn a_wrong_type_is_refused_with_its_line() {
        let error = parsed("[session]\nmax_steps = \"many\"\n").unwrap_err();
        assert!(error.starts_with("chimera.toml line 2: "), "{error}");
    }

    fn run_args() -> RunArgs {
        match Cli::try_parse_from(["chimera", "run"]).unwrap().command {
            super::super::args::Command::Run(args) => args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_file_fills_what_no_flag_set_and_flags_win() {
        let config = parsed(
            "plugins_dirs = [\"plugins\"]\n[[packs]]\nname = \"redactor\"\n[[packs]]\nname = \"plan-gate\"\nconfig = { max = 3 }\n[trust]\nquarantine_after = 5\n[session]\nmax_steps = 7\nstrategy = \"tree-of-thought\"\nstrategy_config = { candidates = 2 }\naudit = \"audit.jsonl\"\n",
        )
        .unwrap();
        let loaded = Loaded {
            path: PathBuf::from("/project/chimera.toml"),
            config,
        };
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
}
