//! A pack named on a command line: `NAME[=JSON_CONFIG]`.

/// A pack to load: its entry-point name and its JSON configuration (empty:
/// the pack's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSpec {
    /// The entry-point name.
    pub name: String,
    /// The configuration, JSON text (checked to parse), or empty.
    pub config: String,
}

/// Splits `NAME[=JSON]`; the JSON must parse. The error is one line naming
/// the pack.
///
/// # Errors
///
/// One line when the name is empty, or when the text after `=` is not JSON.
pub fn parse_pack_spec(spec: &str) -> Result<PackSpec, String> {
    let (name, config) = match spec.split_once('=') {
        Some((name, config)) => (name.trim(), config.trim()),
        None => (spec.trim(), ""),
    };
    if name.is_empty() {
        return Err(format!("--pack '{spec}': the pack name is empty"));
    }
    if !config.is_empty() {
        serde_json::from_str::<serde_json::Value>(config)
            .map_err(|error| format!("--pack {name}: the config is not JSON: {error}"))?;
    }
    Ok(PackSpec {
        name: name.to_owned(),
        config: config.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_a_name_and_optional_json() {
        assert_eq!(
            parse_pack_spec("redactor").unwrap(),
            PackSpec {
                name: "redactor".to_owned(),
                config: String::new()
            }
        );
        assert_eq!(
            parse_pack_spec(" gate = {\"max\": 3} ").unwrap().config,
            "{\"max\": 3}"
        );
        assert!(parse_pack_spec("=x").unwrap_err().contains("name is empty"));
        assert!(parse_pack_spec("gate={")
            .unwrap_err()
            .starts_with("--pack gate: the config is not JSON"));
    }
}
