//! `config show`: every effective setting, its value and where it came
//! from (the command line, the file's path, or the default), then the
//! search path; as text, or as one JSON object.

use super::keys;
use super::layer::{Layered, DEFAULT};
use chimera_host::config::{self, FILE_NAME};
use serde_json::{json, Value};
use std::path::Path;

/// One effective setting.
struct Shown {
    key: String,
    value: Value,
    origin: String,
}

/// Every setting of `layered`, in declaration order.
fn shown(layered: &Layered) -> Vec<Shown> {
    let values = serde_json::to_value(&layered.settings).unwrap_or(Value::Null);
    keys()
        .into_iter()
        .map(|key| {
            let pointer = format!("/{}", key.replace('.', "/"));
            Shown {
                value: values.pointer(&pointer).cloned().unwrap_or(Value::Null),
                origin: layered
                    .figment
                    .find_metadata(&key)
                    .map_or_else(|| DEFAULT.to_owned(), |m| m.name.to_string()),
                key,
            }
        })
        .collect()
}

/// Prints `layered` (read from `file`, if any) as `config show` does.
pub(super) fn print(layered: &Layered, file: Option<&Path>, as_json: bool) {
    let settings = shown(layered);
    let search: Vec<String> = config::search_path(&layered.settings.load.search.plugins_dirs)
        .iter()
        .map(|dir| dir.path.display().to_string())
        .collect();
    let file = file.map(|path| path.display().to_string());
    if as_json {
        let object: serde_json::Map<String, Value> = settings
            .into_iter()
            .map(|s| (s.key, json!({"value": s.value, "source": s.origin})))
            .collect();
        println!(
            "{}",
            json!({"file": file, "settings": object, "search_path": search})
        );
        return;
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
            setting.key, setting.value, setting.origin
        );
    }
    println!("search path (in order): {}", search.join(", "));
}
