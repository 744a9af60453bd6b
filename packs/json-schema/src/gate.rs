//! The configuration and the validation.

use crate::extract::extract;
use chimera_plugin_api::prelude::*;
use gate_kit::{render, PerTurn, HOST_MAX_RETRIES};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The retry prompt, by default.
pub const DEFAULT_RETRY_PROMPT: &str = "Your response must be valid JSON matching the required schema.\nSchema: {schema}\nYour previous response failed validation with this error: {error}\nPlease provide a corrected response that is ONLY the valid JSON, with no additional text.";

/// The configuration; unknown keys are refused.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The schema, or a string of its JSON text.
    pub schema: Option<Value>,
    /// A file holding the schema (wins over `schema`).
    pub schema_file: Option<String>,
    /// Retries per answer before it is blocked.
    pub max_retries: u32,
    /// What the model is told on a retry.
    pub retry_prompt: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            schema: None,
            schema_file: None,
            max_retries: 3,
            retry_prompt: DEFAULT_RETRY_PROMPT.to_owned(),
        }
    }
}

/// The loaded gate.
pub struct JsonSchema {
    validator: jsonschema::Validator,
    /// The schema as compact JSON, for `{schema}`.
    schema_text: String,
    max_retries: u32,
    retry_prompt: String,
    /// Retries asked for this turn, per conversation.
    retries: PerTurn<u32>,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSchema")
            .field("schema", &self.schema_text)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

/// Why an answer breaks the schema, worded twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// For the retry prompt's `{error}`: every violation as the validator
    /// words it, a `pattern`'s regular expression included (the model
    /// needs it to correct the answer, and is shown the schema anyway).
    pub for_model: String,
    /// For the block reason and the notice: a `pattern` (or a `not`
    /// schema, which may hold one) named by where it sits in the schema,
    /// never by its regular expression.
    pub for_user: String,
}

/// `error` for a user: as the validator words it, except a failed
/// `pattern` (`"abc" does not match the pattern at /properties/id/pattern`)
/// and a failed `not` (`... is not allowed by the schema at /not`), whose
/// wording would quote the schema's regular expression.
fn for_user(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as Kind;
    let at = error.schema_path().as_str();
    match error.kind() {
        Kind::Pattern { .. } => {
            format!("{} does not match the pattern at {at}", error.instance())
        }
        Kind::Not { .. } => {
            format!("{} is not allowed by the schema at {at}", error.instance())
        }
        Kind::PropertyNames { error } => for_user(error),
        _ => error.to_string(),
    }
}

/// The schema text as JSON, the key it came from naming a failure.
fn parse_schema(key: &str, text: &str) -> Result<Value, PackError> {
    serde_json::from_str(text).map_err(|e| PackError::msg(format!("{key}: invalid JSON: {e}")))
}

impl JsonSchema {
    /// The JSON text of `answer` when it is valid, else why not.
    ///
    /// # Errors
    ///
    /// [`Invalid`]: `invalid JSON: …` when the JSON text taken from
    /// `answer` does not parse; else every way it breaks the schema,
    /// joined by `; `.
    pub fn validate<'a>(&self, answer: &'a str) -> Result<&'a str, Invalid> {
        let text = extract(answer);
        let instance: Value = serde_json::from_str(text).map_err(|e| {
            let error = format!("invalid JSON: {e}");
            Invalid {
                for_model: error.clone(),
                for_user: error,
            }
        })?;
        let (for_model, for_user): (Vec<String>, Vec<String>) = self
            .validator
            .iter_errors(&instance)
            .map(|e| (e.to_string(), for_user(&e)))
            .unzip();
        if for_model.is_empty() {
            Ok(text)
        } else {
            Err(Invalid {
                for_model: for_model.join("; "),
                for_user: for_user.join("; "),
            })
        }
    }

    /// The retry feedback for `answer`, which failed with `error`.
    #[must_use]
    pub fn feedback(&self, answer: &str, error: &str) -> String {
        render(
            &self.retry_prompt,
            &[
                ("schema", &self.schema_text),
                ("error", error),
                ("content", answer),
            ],
        )
    }

    /// The block of an answer still invalid after `retries` retries: the
    /// reason and the notice.
    #[must_use]
    pub fn failure(error: &str, retries: u32) -> (String, String) {
        (
            format!("JSON schema validation failed: {error}"),
            format!("Response failed JSON schema validation after {retries} retries: {error}"),
        )
    }
}

impl Pack for JsonSchema {
    const NAME: &'static str = "json-schema";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "makes the final answer JSON that matches a schema, asking the model to correct it";
    const SEAMS: &'static [SeamKind] = &[SeamKind::Output];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let schema = match (&config.schema_file, config.schema) {
            (Some(path), _) => parse_schema(
                "schema_file",
                &gate_kit::read_config_file("schema_file", path)?,
            )?,
            (None, Some(Value::String(text))) => parse_schema("schema", &text)?,
            (None, Some(schema)) => schema,
            (None, None) => {
                return Err(PackError::msg(
                    "no schema: set `schema` (the schema or its JSON text) or `schema_file`",
                ))
            }
        };
        let validator = jsonschema::validator_for(&schema).map_err(|e| {
            PackError::msg(format!(
                "invalid schema: {}",
                e.to_string().replace('\n', " ")
            ))
        })?;
        Ok(JsonSchema {
            validator,
            schema_text: schema.to_string(),
            max_retries: config.max_retries.min(HOST_MAX_RETRIES),
            retry_prompt: config.retry_prompt,
            retries: PerTurn::new(),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.output_gate("schema", move |session, answer| {
            let invalid = match self.validate(answer) {
                Ok(json) if json == answer => return Ok(OutputDecision::Allow),
                Ok(json) => return Ok(OutputDecision::Replace(json.to_owned())),
                Err(invalid) => invalid,
            };
            let used = self.retries.get(session);
            let (reason, notice) = Self::failure(&invalid.for_user, used);
            if used >= self.max_retries {
                session.notice(notice);
                return Ok(OutputDecision::Block(reason));
            }
            self.retries.update(session, |used| *used += 1);
            Ok(OutputDecision::Retry(Retry {
                feedback: self.feedback(answer, &invalid.for_model),
                max: self.max_retries,
                exhausted: Exhausted::Block(reason),
            }))
        });
        registrar.fail_closed("schema");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(config: Value) -> Result<JsonSchema, PackError> {
        JsonSchema::new(serde_json::from_value(config).map_err(PackError::from)?)
    }

    fn named() -> JsonSchema {
        gate(json!({"schema": {"type": "object", "required": ["name"]}})).unwrap()
    }

    #[test]
    fn valid_json_is_the_extracted_text() {
        let gate = named();
        assert_eq!(gate.validate("{\"name\":\"x\"}"), Ok("{\"name\":\"x\"}"));
        assert_eq!(
            gate.validate("Here:\n```json\n{\"name\":1}\n```"),
            Ok("{\"name\":1}")
        );
    }

    #[test]
    fn errors_say_why_in_one_line() {
        let gate = named();
        let error = gate.validate("not json").unwrap_err();
        assert!(
            error.for_user.starts_with("invalid JSON: expected "),
            "{error:?}"
        );
        assert_eq!(error.for_model, error.for_user);
        let strict = gate_of_two_rules();
        let error = strict.validate("{\"age\":\"old\"}").unwrap_err().for_user;
        assert_eq!(error.matches("; ").count(), 1, "{error}");
        assert!(error.contains("\"name\" is a required property"), "{error}");
    }

    #[test]
    fn a_failed_pattern_is_named_by_its_place_for_the_user_and_shown_to_the_model() {
        let gate = gate(json!({"schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
                "tag": {"not": {"pattern": "^tmp-"}}
            },
            "propertyNames": {"pattern": "^[a-z]+$"}
        }}))
        .unwrap();
        let pattern = gate.validate(r#"{"id": "abc"}"#).unwrap_err();
        assert_eq!(
            pattern.for_user,
            "\"abc\" does not match the pattern at /properties/id/pattern"
        );
        assert!(pattern.for_model.contains("^[A-Z]{3}-\\d+$"), "{pattern:?}");
        let not = gate.validate(r#"{"tag": "tmp-1"}"#).unwrap_err().for_user;
        assert_eq!(
            not,
            "\"tmp-1\" is not allowed by the schema at /properties/tag/not"
        );
        let names = gate.validate(r#"{"Bad": 1}"#).unwrap_err().for_user;
        assert!(
            names.starts_with("\"Bad\" does not match the pattern at /propertyNames"),
            "{names}"
        );
        for text in [pattern.for_user, not, names] {
            assert!(!text.contains('^') && !text.contains('['), "{text}");
        }
    }

    fn gate_of_two_rules() -> JsonSchema {
        gate(json!({"schema": r#"{"type":"object","required":["name"],"properties":{"age":{"type":"integer"}}}"#}))
            .unwrap()
    }

    #[test]
    fn the_retry_prompt_carries_schema_error_and_content() {
        let gate = gate(
            json!({"schema": {"type": "object"}, "retry_prompt": "{schema}|{error}|{content}"}),
        )
        .unwrap();
        assert_eq!(gate.feedback("x", "bad"), "{\"type\":\"object\"}|bad|x");
        assert!(named()
            .feedback("x", "bad")
            .contains("Schema: {\"required\":[\"name\"],\"type\":\"object\"}\n"));
    }

    #[test]
    fn a_missing_or_invalid_schema_refuses_the_load() {
        let none = gate(json!({})).unwrap_err().to_string();
        assert!(none.starts_with("no schema"), "{none}");
        let text = gate(json!({"schema": "{nope"})).unwrap_err().to_string();
        assert!(text.starts_with("schema: invalid JSON: "), "{text}");
        let bad = gate(json!({"schema": {"type": 12}}))
            .unwrap_err()
            .to_string();
        assert!(
            bad.starts_with("invalid schema: ") && !bad.contains('\n'),
            "{bad}"
        );
        let file = gate(json!({"schema_file": "/nonexistent/schema.json", "schema": {}}))
            .unwrap_err()
            .to_string();
        assert!(
            file.starts_with("schema_file: cannot read /nonexistent/schema.json: "),
            "{file}"
        );
    }
}
