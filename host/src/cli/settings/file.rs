//! `chimera.toml` as a layer: its `[[packs]]` entries turned into the
//! settings the pack flags set (`packs`, and the names each entry's
//! `isolate`, `mode` and `on_unavailable` pick), every key checked to be a
//! setting, and a refusal naming the file and the key's line.

use super::Settings;
use chimera_host::config::{line_of_key, ConfigError, Loaded, PackEntry};
use chimera_host::interception::PackMode;
use chimera_host::state::FailPolicy;
use figment::value::{Dict, Value};
use serde::Serialize;
use serde_json::json;

/// Settings of the pack flags that the file sets per `[[packs]]` entry
/// only, never as keys of their own.
const PER_PACK_ENTRY: &[&str] = &["isolate", "monitor", "fail_open"];

/// A refusal of `loaded`'s key at `path`.
fn refusal(loaded: &Loaded, path: &[String], message: String) -> ConfigError {
    ConfigError::Parse {
        path: loaded.path.clone(),
        line: line_of_key(&loaded.text, path),
        message,
    }
}

/// `error` (a setting of the wrong type) as a refusal of `loaded`.
pub(super) fn refused(loaded: &Loaded, error: &figment::Error) -> ConfigError {
    let key = error.path.join(".");
    // figment quotes serde's expectation, which quotes its own names:
    // "expected ``a` or `b``" reads "expected `a` or `b`".
    let kind = error.kind.to_string().replace("``", "`");
    refusal(loaded, &error.path, format!("{key}: {kind}"))
}

/// The `[[packs]]` entries as the pack flags' settings.
fn pack_settings(entries: &[PackEntry]) -> Dict {
    let names = |keep: &dyn Fn(&PackEntry) -> bool| -> Value {
        let picked: Vec<&str> = entries
            .iter()
            .filter(|entry| keep(entry))
            .map(|entry| entry.name.as_str())
            .collect();
        Value::serialize(picked).unwrap_or_else(|_| Value::from(Vec::<Value>::new()))
    };
    let specs: Vec<String> = entries
        .iter()
        .map(|entry| match &entry.config {
            Some(table) => format!("{}={}", entry.name, json!(table)),
            None => entry.name.clone(),
        })
        .collect();
    let mut dict = Dict::new();
    dict.insert("packs".to_owned(), Value::from(specs));
    dict.insert(
        "isolate".to_owned(),
        names(&|entry| entry.isolate == Some(true)),
    );
    dict.insert(
        "monitor".to_owned(),
        names(&|entry| entry.mode == Some(PackMode::Monitor)),
    );
    dict.insert(
        "fail_open".to_owned(),
        names(&|entry| entry.on_unavailable == Some(FailPolicy::Open)),
    );
    dict
}

/// Refuses the first key of `dict` (at `prefix`) that `known` (the
/// defaults, at the same place) does not have.
fn check_keys(
    loaded: &Loaded,
    dict: &Dict,
    known: &Dict,
    prefix: &[String],
) -> Result<(), ConfigError> {
    for (name, value) in dict {
        let mut path = prefix.to_vec();
        path.push(name.clone());
        let Some(expected) = known.get(name) else {
            let names: Vec<String> = known.keys().map(|k| format!("`{k}`")).collect();
            return Err(refusal(
                loaded,
                &path,
                format!(
                    "unknown field `{name}`, expected one of {}",
                    names.join(", ")
                ),
            ));
        };
        if let (Some(inner), Some(expected)) = (value.as_dict(), expected.as_dict()) {
            if !expected.is_empty() {
                check_keys(loaded, inner, expected, &path)?;
            }
        }
    }
    Ok(())
}

/// `loaded`'s keys in the settings' shape, each checked to be a setting.
///
/// # Errors
///
/// A key that is no setting, or a `[[packs]]` entry that is not one,
/// naming the line.
pub(super) fn dict(loaded: &Loaded) -> Result<Dict, ConfigError> {
    let mut table = loaded.table.clone();
    let entries = table.remove("packs");
    let mut dict = dict_of(&table);
    let mut known = dict_of(&Settings::defaults());
    for key in PER_PACK_ENTRY {
        known.remove(*key);
    }
    check_keys(loaded, &dict, &known, &[])?;
    if let Some(entries) = entries {
        let entries: Vec<PackEntry> = entries.try_into().map_err(|error: toml::de::Error| {
            refusal(
                loaded,
                &["packs".to_owned()],
                // serde names the Rust type; the file names a table.
                format!(
                    "packs: {}",
                    error
                        .message()
                        .trim()
                        .replace("struct PackEntry", "a [[packs]] table with a name")
                ),
            )
        })?;
        dict.extend(pack_settings(&entries));
    }
    Ok(dict)
}

/// `value`, serialized, as a table.
pub(super) fn dict_of(value: &impl Serialize) -> Dict {
    Value::serialize(value)
        .ok()
        .and_then(Value::into_dict)
        .unwrap_or_default()
}
