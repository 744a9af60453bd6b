//! The layers: every setting's default (clap's), under `chimera.toml`,
//! under the flags the command line gave (clap's value sources, asked of
//! the `ArgMatches` clap produced), merged key by key by figment, which
//! remembers each value's layer for `config show`. A list is one value: a
//! list on the command line replaces the file's.

use super::file;
use super::Settings;
use chimera_host::config::{ConfigError, Loaded};
use clap::parser::ValueSource;
use clap::ArgMatches;
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider, Source};
use serde::Serialize;
use std::collections::BTreeSet;

/// The defaults' layer's name, as `config show` prints it.
pub(super) const DEFAULT: &str = "default";
/// The command line's layer's name, as `config show` prints it.
pub(super) const COMMAND_LINE: &str = "command line";

/// Keys chosen together: when the command line gives any of `chosen_by`,
/// the file's values of all of `keys` are left out (a key naming a table
/// leaves out the table).
struct Whole {
    chosen_by: &'static [&'static str],
    keys: &'static [&'static str],
}

/// The keys chosen together.
const TAKEN_WHOLE: &[Whole] = &[
    // `--pack` names the packs, and so leaves the file's entries' modes.
    Whole {
        chosen_by: &["packs"],
        keys: &["packs", "isolate", "monitor", "fail_open"],
    },
    // The model comes from one place: a provider or a script.
    Whole {
        chosen_by: &["provider.name", "provider.script"],
        keys: &["provider.name", "provider.script"],
    },
    // One way of answering approvals.
    Whole {
        chosen_by: &["approvals.answer", "approvals.answers_file"],
        keys: &["approvals.answer", "approvals.answers_file"],
    },
    // An upstream named by URL is taken whole: no file key or model is
    // mixed into it.
    Whole {
        chosen_by: &["serve.openai.base_url"],
        keys: &["serve.openai"],
    },
    Whole {
        chosen_by: &["serve.anthropic.base_url"],
        keys: &["serve.anthropic"],
    },
];

/// Settings set by flags of other names: (clap id, key, value).
const SET_BY_FLAG: &[(&str, &str, &str)] = &[
    ("yes", "approvals.answer", "yes"),
    ("no", "approvals.answer", "no"),
];

/// One layer: its name (and file), and its keys.
struct Layer {
    metadata: Metadata,
    dict: Dict,
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn data(&self) -> figment::Result<Map<Profile, Dict>> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// The settings layered, and the layers (which say where each came from).
pub(crate) struct Layered {
    /// The effective settings.
    pub(crate) settings: Settings,
    /// The merged layers.
    pub(crate) figment: Figment,
}

/// Every setting's key (`trust.probe`), in declaration order: the keys of
/// the defaults that are not tables of further settings.
pub(super) fn keys(defaults: &Dict) -> Vec<String> {
    fn walk(dict: &Dict, prefix: &str, keys: &mut Vec<String>) {
        for (name, value) in dict {
            let key = format!("{prefix}{name}");
            match value.as_dict() {
                Some(inner) if !inner.is_empty() => walk(inner, &format!("{key}."), keys),
                _ => keys.push(key),
            }
        }
    }
    let mut keys = Vec::new();
    walk(defaults, "", &mut keys);
    keys
}

/// The value at dotted `key` in `dict`.
pub(super) fn find<'a>(dict: &'a Dict, key: &str) -> Option<&'a Value> {
    let (head, rest) = key
        .split_once('.')
        .map_or((key, None), |(h, r)| (h, Some(r)));
    let value = dict.get(head)?;
    match rest {
        Some(rest) => find(value.as_dict()?, rest),
        None => Some(value),
    }
}

/// Sets dotted `key` in `dict`, making the tables on the way.
fn insert(dict: &mut Dict, key: &str, value: Value) {
    match key.split_once('.') {
        Some((head, rest)) => {
            let entry = dict
                .entry(head.to_owned())
                .or_insert_with(|| Value::from(Dict::new()));
            if let Value::Dict(_, inner) = entry {
                insert(inner, rest, value);
            }
        }
        None => {
            dict.insert(key.to_owned(), value);
        }
    }
}

/// Removes dotted `key` from `dict`.
fn remove(dict: &mut Dict, key: &str) {
    match key.split_once('.') {
        Some((head, rest)) => {
            if let Some(Value::Dict(_, inner)) = dict.get_mut(head) {
                remove(inner, rest);
            }
        }
        None => {
            dict.remove(key);
        }
    }
}

/// The settings `args` (a command's parsed arguments, in the file's shape)
/// hold that the command line gave, by `matches` (the same parse): a
/// setting's clap id is its key's last part, or the whole key where one
/// command has two settings of that name (the upstreams').
pub(super) fn command_line(matches: &ArgMatches, args: &impl Serialize) -> Dict {
    let given: BTreeSet<&str> = matches
        .ids()
        .map(clap::Id::as_str)
        .filter(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
        .collect();
    let parsed = file::dict_of(args);
    let mut dict = Dict::new();
    for key in keys(&file::dict_of(&Settings::defaults())) {
        let last = key.rsplit('.').next().unwrap_or(&key);
        if let (true, Some(value)) = (
            given.contains(key.as_str()) || given.contains(last),
            find(&parsed, &key),
        ) {
            insert(&mut dict, &key, value.clone());
        }
    }
    for (id, key, value) in SET_BY_FLAG {
        if given.contains(id) {
            insert(&mut dict, key, Value::from(*value));
        }
    }
    dict
}

/// The defaults, under `loaded`'s file (if any), under `given` (the
/// command line's settings, from [`command_line`]).
///
/// # Errors
///
/// The file's keys that are not settings, or of the wrong type, naming
/// the file and the line.
pub(crate) fn layered(loaded: Option<&Loaded>, given: Dict) -> Result<Layered, ConfigError> {
    let defaults = Layer {
        metadata: Metadata::named(DEFAULT),
        dict: file::dict_of(&Settings::defaults()),
    };
    let mut figment = Figment::from(defaults);
    if let Some(loaded) = loaded {
        let mut dict = file::dict(loaded)?;
        for whole in TAKEN_WHOLE {
            if whole
                .chosen_by
                .iter()
                .any(|key| find(&given, key).is_some())
            {
                for key in whole.keys {
                    remove(&mut dict, key);
                }
            }
        }
        figment = figment.merge(Layer {
            metadata: Metadata::from(
                loaded.path.display().to_string(),
                Source::File(loaded.path.clone()),
            ),
            dict,
        });
    }
    figment = figment.merge(Layer {
        metadata: Metadata::named(COMMAND_LINE),
        dict: given,
    });
    let settings = Settings::extract(&figment).map_err(|error| match loaded {
        Some(loaded) => file::refused(loaded, &error),
        None => ConfigError::Invalid {
            path: std::path::PathBuf::from(COMMAND_LINE),
            problem: error.to_string(),
        },
    })?;
    Ok(Layered { settings, figment })
}

/// What [`chimera_host::config::load`] and `config trust` check of a
/// file: that its keys are settings of the right types, and that it
/// answers approvals one way.
///
/// # Errors
///
/// As [`dict`], a setting of the wrong type, or `[approvals]` with both
/// `answer` and `answers_file`.
pub(crate) fn check(loaded: &Loaded) -> Result<(), ConfigError> {
    let layered = layered(Some(loaded), Dict::new())?;
    let approvals = &layered.settings.approvals;
    if approvals.answer.is_some() && approvals.answers_file.is_some() {
        return Err(ConfigError::Invalid {
            path: loaded.path.clone(),
            problem: "[approvals] sets both answer and answers_file; keep one".to_owned(),
        });
    }
    Ok(())
}
