//! One settings layer. Each setting is declared once, as a field of a flag
//! group ([`groups`], [`gateway`]): its flag, help and default (clap) and
//! its key in `chimera.toml` (serde: the group's section, the field's
//! name). Every command that takes settings reads the same layered result
//! ([`layer`]): the defaults, under the file ([`file`]: relative paths are
//! relative to its directory; a key that is no setting is refused with its
//! line), under the flags the command line gave (a list given there
//! replaces the file's). `config show` ([`show`]) prints every effective
//! value and where it came from.

mod file;
pub(crate) mod gateway;
pub(crate) mod groups;
mod layer;
mod show;
mod values;

use super::failure::Failure;
use chimera_host::config::{self, ConfigError, Loaded};
use clap::{ArgMatches, Args, FromArgMatches};
use figment::Figment;
use gateway::{GatewayArgs, StateArgs};
use groups::{ApprovalArgs, LoadArgs, McpArgs, ProviderArgs, SearchArgs, ServingArgs, SessionArgs};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub(crate) use layer::{check, layered, Layered};
pub(crate) use values::McpServer;

/// Every setting, in `chimera.toml`'s shape: the pack settings at the top,
/// then one section per group.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// `plugins_dirs`, `packs` (and the names `isolate` and `monitor`
    /// pick) and `[trust]`.
    #[serde(flatten)]
    pub(crate) load: LoadArgs,
    /// The packs that fail open in a server.
    #[serde(flatten)]
    pub(crate) serving: ServingArgs,
    /// `[provider]`.
    pub(crate) provider: ProviderArgs,
    /// `[approvals]`.
    pub(crate) approvals: ApprovalArgs,
    /// `[session]`.
    pub(crate) session: SessionArgs,
    /// `[mcp]`.
    pub(crate) mcp: McpArgs,
    /// `[serve]`.
    pub(crate) serve: GatewayArgs,
    /// `[state]`.
    pub(crate) state: StateArgs,
}

/// Group `G` at its defaults: what clap makes of a command line that
/// gives none of its flags.
fn defaults<G: Args + FromArgMatches>() -> G {
    let command = G::augment_args(clap::Command::new("defaults"));
    command
        .try_get_matches_from(["defaults"])
        .and_then(|matches| G::from_arg_matches(&matches))
        .expect("a settings group has no required flag")
}

/// Section `key` of `figment`.
fn section<'a, T: Deserialize<'a>>(figment: &Figment, key: &str) -> Result<T, Box<figment::Error>> {
    figment.focus(key).extract().map_err(|mut error| {
        error.path.insert(0, key.to_owned());
        Box::new(error)
    })
}

impl Settings {
    /// Every setting at its default.
    pub(crate) fn defaults() -> Settings {
        Settings {
            load: LoadArgs {
                search: defaults(),
                pack: defaults(),
                trust: defaults(),
            },
            serving: defaults(),
            provider: defaults(),
            approvals: defaults(),
            session: defaults(),
            mcp: defaults(),
            serve: defaults(),
            state: defaults(),
        }
    }

    /// The settings `figment` holds (the top-level groups read from its
    /// top, so that paths there know their file too).
    fn extract(figment: &Figment) -> Result<Settings, Box<figment::Error>> {
        Ok(Settings {
            load: LoadArgs {
                search: figment.extract()?,
                pack: figment.extract()?,
                trust: section(figment, "trust")?,
            },
            serving: figment.extract()?,
            provider: section(figment, "provider")?,
            approvals: section(figment, "approvals")?,
            session: section(figment, "session")?,
            mcp: section(figment, "mcp")?,
            serve: section(figment, "serve")?,
            state: section(figment, "state")?,
        })
    }
}

/// A command's arguments that take settings: serialized, they are its
/// groups in the file's shape (its own flags skipped); [`adopt`] takes
/// the layered groups back.
///
/// [`adopt`]: TakesSettings::adopt
pub(crate) trait TakesSettings: Serialize {
    /// Replaces the command's groups with the layered ones.
    fn adopt(&mut self, settings: Settings);
}

impl TakesSettings for SearchArgs {
    fn adopt(&mut self, settings: Settings) {
        *self = settings.load.search;
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Self {
        Failure::usage(error.to_string())
    }
}

/// The configuration file to use, loaded and checked.
fn load(named: Option<&Path>) -> Result<Option<Loaded>, Failure> {
    Ok(config::load(named, &check)?)
}

/// Layers the configuration file (`named`, or the one found) and the
/// flags `matches` (the command's own, from the parse that made `args`)
/// says the command line gave into `args`.
pub(crate) fn apply(
    named: Option<&Path>,
    matches: &ArgMatches,
    args: &mut impl TakesSettings,
) -> Result<(), Failure> {
    let loaded = load(named)?;
    layer_into(loaded.as_ref(), matches, args)?;
    Ok(())
}

/// `loaded` (if any) and the flags `matches` says the command line gave
/// layered into `args`; the layers, which say where each value came from.
///
/// # Errors
///
/// A setting of the file or the command line of the wrong type, naming
/// the file's line.
pub(crate) fn layer_into(
    loaded: Option<&Loaded>,
    matches: &ArgMatches,
    args: &mut impl TakesSettings,
) -> Result<Layered, ConfigError> {
    let given = layer::command_line(matches, args);
    let layered = layered(loaded, given)?;
    args.adopt(layered.settings.clone());
    Ok(layered)
}

/// Every setting's key (`trust.probe`), in declaration order.
pub(crate) fn keys() -> Vec<String> {
    layer::keys(&file::dict_of(&Settings::defaults()))
}

/// `config show`: every effective setting with no flags, and where it
/// came from; then the search path.
pub(crate) fn show(named: Option<&Path>, as_json: bool) -> Result<(), Failure> {
    let loaded = load(named)?;
    let layered = layered(loaded.as_ref(), figment::value::Dict::new())?;
    show::print(&layered, loaded.as_ref().map(|l| l.path.as_path()), as_json);
    Ok(())
}

/// `config trust [FILE]`: pins the project file (default `./chimera.toml`)
/// at its current contents, after checking it.
pub(crate) fn trust(named: Option<&Path>) -> Result<(), Failure> {
    let (path, store) = config::trust(named, &check)?;
    println!(
        "trusted {} at its current contents (recorded in {})",
        path.display(),
        store.display()
    );
    Ok(())
}
