//! Tool arguments, one type each: the schema offered to the model is
//! generated from the type ([`schema_of`]) and the call's JSON is parsed
//! into it ([`parse_args`]), so the two cannot disagree.
//!
//! The schema is a plain object schema as function calling takes it:
//! everything inlined (no `$ref` / `$defs`), no `$schema`, `title` or
//! `format` keys, optional arguments typed as their value (not also
//! `null`), every description on one line.
//!
//! Parsing is lenient where today's callers rely on it and strict
//! otherwise: arguments that are not JSON at all (which the agent hands
//! over as `null`) count as `{}`, and a top-level argument set to `null`
//! counts as absent; an unknown argument is refused, naming it. Every
//! failure is one line naming the argument and what it should be.

use super::ToolError;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::Value;
use serde_path_to_error::Segment;
use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// How many characters of a string argument an error message quotes.
const QUOTED_CHARS: usize = 40;

/// The JSON Schema of the arguments type `A`, as offered to the model: an
/// inlined object schema with `properties`, `required` and
/// `"additionalProperties": false` (see the module docs).
pub fn schema_of<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(RecursiveTransform(plain))
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(root) = &mut schema {
        // The Rust type's name and doc comment are not for the model.
        root.remove("title");
        root.remove("description");
        if root.get("type").and_then(Value::as_str) == Some("object") {
            root.entry("properties")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }
    schema
}

/// Trims one (sub)schema to what function calling needs.
fn plain(schema: &mut Schema) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    map.remove("format");
    // A documented unit-variant enum is generated as a `oneOf` of `const`s
    // (each with its variant's doc); offer a plain `enum` of the values.
    let consts = match map.get("oneOf") {
        Some(Value::Array(variants)) => variants
            .iter()
            .map(|variant| variant.get("const").cloned())
            .collect::<Option<Vec<Value>>>(),
        _ => None,
    };
    if let Some(values) = consts {
        map.remove("oneOf");
        if values.iter().all(Value::is_string) {
            map.insert("type".to_owned(), Value::from("string"));
        }
        map.insert("enum".to_owned(), Value::Array(values));
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    // `Option<T>` is generated as `[T, "null"]`; absent and `null` are
    // both accepted, so offer the value's type alone.
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::String(text)) = map.get_mut("description") {
        *text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    }
}

/// Parses a call's arguments into `A`. On failure, one line naming the
/// argument at fault and what it should be (see the module docs).
///
/// # Errors
///
/// `ToolError::InvalidArguments` when `arguments` is not a JSON object or does
/// not fit `A`, naming the argument at fault when there is one.
pub fn parse_args<A: DeserializeOwned + JsonSchema>(arguments: &Value) -> Result<A, ToolError> {
    let arguments = without_nulls(arguments);
    // Serde would also take a struct as an array of its fields, in order:
    // arguments are named, always.
    if !arguments.is_object() {
        return Err(ToolError::InvalidArguments {
            argument: None,
            message: format!("arguments must be a JSON object, got {}", kind(&arguments)),
        });
    }
    // Nested ones too: arguments holding an array anywhere are checked
    // against the schema first (the schema is only made when needed).
    if holds_array(&arguments) {
        objects_as_objects(&schema_of::<A>(), &arguments, &mut Vec::new())?;
    }
    serde_path_to_error::deserialize(arguments.as_ref())
        .map_err(|error| argument_error(&error, &arguments, &schema_of::<A>()))
}

/// Whether `value` is or holds an array.
fn holds_array(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(fields) => fields.values().any(holds_array),
        _ => false,
    }
}

/// Refuses an array wherever `schema` asks for an object (serde would take
/// it as the fields in order).
fn objects_as_objects<'v>(
    schema: &Value,
    value: &'v Value,
    steps: &mut Vec<Step<'v>>,
) -> Result<(), ToolError> {
    match value {
        Value::Array(_) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            let at = render(steps);
            Err(ToolError::invalid(
                at.clone(),
                format!("argument `{at}` must be an object, got {}", show(value)),
            ))
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => items.iter().enumerate().try_for_each(|(index, item)| {
                steps.push(Step::Index(index));
                objects_as_objects(item_schema, item, steps)?;
                steps.pop();
                Ok(())
            }),
            None => Ok(()),
        },
        Value::Object(fields) => fields.iter().try_for_each(|(name, field)| {
            match schema.get("properties").and_then(|p| p.get(name)) {
                Some(field_schema) => {
                    steps.push(Step::Field(name));
                    objects_as_objects(field_schema, field, steps)?;
                    steps.pop();
                    Ok(())
                }
                None => Ok(()),
            }
        }),
        _ => Ok(()),
    }
}

/// The arguments with top-level `null`s dropped; `{}` for `null` itself.
fn without_nulls(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::Null => Cow::Owned(Value::Object(serde_json::Map::new())),
        Value::Object(map) if map.values().any(Value::is_null) => Cow::Owned(Value::Object(
            map.iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        )),
        other => Cow::Borrowed(other),
    }
}

/// A step into the arguments: an object's field or an array's element.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

/// The one-line error for a failed parse of `arguments` against `schema`.
/// The kind of failure is read from the wording of serde's own
/// `de::Error` constructors (`unknown field`, `missing field`, `invalid
/// type`, ...); what was expected comes from the schema and what was given
/// from the arguments. Anything else is passed on after the argument's
/// name.
fn argument_error(
    error: &serde_path_to_error::Error<serde_json::Error>,
    arguments: &Value,
    schema: &Value,
) -> ToolError {
    let steps: Vec<Step<'_>> = error
        .path()
        .iter()
        .filter_map(|segment| match segment {
            Segment::Map { key } => Some(Step::Field(key)),
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect();
    let message = error.inner().to_string();

    if let Some((field, rest)) = backticked(&message, "unknown field `") {
        // The path ends at the unknown field itself.
        let parent = &steps[..steps.len().saturating_sub(1)];
        let expected = match rest.trim_start_matches(", ") {
            "there are no fields" if parent.is_empty() => "this tool takes no arguments",
            "there are no fields" => "it takes no fields",
            expected => expected,
        };
        let line = if parent.is_empty() {
            format!("unknown argument `{field}`; {expected}")
        } else {
            format!(
                "unknown field `{field}` in `{}`; {expected}",
                render(parent)
            )
        };
        return ToolError::invalid(render(&steps), line);
    }

    if let Some((field, _)) = backticked(&message, "missing field `") {
        let what = schema_at(schema, &steps)
            .and_then(|node| node.get("properties")?.get(field))
            .and_then(describe)
            .map(|what| format!(" ({what})"))
            .unwrap_or_default();
        let mut argument = steps.clone();
        argument.push(Step::Field(field));
        let line = if steps.is_empty() {
            format!("missing required argument `{field}`{what}")
        } else {
            format!(
                "missing required field `{field}` in `{}`{what}",
                render(&steps)
            )
        };
        return ToolError::invalid(render(&argument), line);
    }

    let given = value_at(arguments, &steps);
    let mismatch = ["invalid type: ", "invalid value: ", "unknown variant `"]
        .iter()
        .any(|prefix| message.starts_with(prefix));
    if steps.is_empty() {
        return ToolError::InvalidArguments {
            argument: None,
            message: format!("invalid arguments: {message}"),
        };
    }
    let at = render(&steps);
    let expected = schema_at(schema, &steps).and_then(describe).or_else(|| {
        message
            .split_once(", expected ")
            .map(|(_, expected)| expected.to_owned())
    });
    let line = match (mismatch, expected, given) {
        (true, Some(expected), Some(given)) => {
            format!("argument `{at}` must be {expected}, got {}", show(given))
        }
        (true, Some(expected), None) => format!("argument `{at}` must be {expected}"),
        _ => format!("argument `{at}`: {message}"),
    };
    ToolError::invalid(at, line)
}

/// For a `message` of the form ``<prefix>name`rest``: `(name, rest)`.
fn backticked<'m>(message: &'m str, prefix: &str) -> Option<(&'m str, &'m str)> {
    message.strip_prefix(prefix)?.split_once('`')
}

/// `todos[0].status`.
fn render(steps: &[Step<'_>]) -> String {
    let mut text = String::new();
    for step in steps {
        match step {
            Step::Field(name) if text.is_empty() => text.push_str(name),
            Step::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Step::Index(index) => {
                let _ = write!(text, "[{index}]");
            }
        }
    }
    text
}

/// The subschema for the value at `steps`.
fn schema_at<'s>(schema: &'s Value, steps: &[Step<'_>]) -> Option<&'s Value> {
    steps.iter().try_fold(schema, |node, step| match step {
        Step::Field(name) => node.get("properties")?.get(*name),
        Step::Index(_) => node.get("items"),
    })
}

/// The value at `steps`.
fn value_at<'v>(value: &'v Value, steps: &[Step<'_>]) -> Option<&'v Value> {
    steps.iter().try_fold(value, |node, step| match step {
        Step::Field(name) => node.get(*name),
        Step::Index(index) => node.get(*index),
    })
}

/// What a subschema asks for, for messages: ``a string``, ``one of `a`, `b` ``.
fn describe(schema: &Value) -> Option<String> {
    if let Some(Value::Array(options)) = schema.get("enum") {
        let options: Vec<String> = options
            .iter()
            .map(|option| match option {
                Value::String(text) => format!("`{text}`"),
                other => format!("`{other}`"),
            })
            .collect();
        return Some(format!("one of {}", options.join(", ")));
    }
    let kind = match schema.get("type")? {
        Value::String(kind) => kind.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")?,
        _ => return None,
    };
    let non_negative = schema
        .get("minimum")
        .and_then(Value::as_f64)
        .is_some_and(|minimum| minimum >= 0.0);
    let what = match kind {
        "string" => "a string",
        "boolean" => "a boolean",
        "array" => "an array",
        "object" => "an object",
        "number" => "a number",
        "integer" if non_negative => "a non-negative integer",
        "integer" => "an integer",
        _ => return None,
    };
    Some(what.to_owned())
}

/// A JSON value's type name, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value as an error message quotes it: scalars as JSON (a long string
/// cut), arrays and objects by their type.
fn show(value: &Value) -> String {
    match value {
        Value::String(text) if text.chars().count() > QUOTED_CHARS => {
            let head: String = text.chars().take(QUOTED_CHARS).collect();
            format!("{}…", Value::String(head))
        }
        Value::Array(_) | Value::Object(_) => kind(value).to_owned(),
        scalar => scalar.to_string(),
    }
}

/// `#[serde(deserialize_with)]` for an optional non-negative integer that
/// also takes an integral float such as `2.0` (some models write counts
/// that way).
pub(crate) fn optional_whole<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    Option::<Whole>::deserialize(deserializer).map(|number| number.map(|Whole(n)| n))
}

/// A non-negative integer, given as an integer or an integral float.
struct Whole(u64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(WholeVisitor)
    }
}

struct WholeVisitor;

impl Visitor<'_> for WholeVisitor {
    type Value = Whole;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a non-negative integer")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Whole, E> {
        Ok(Whole(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Whole, E> {
        u64::try_from(value)
            .map(Whole)
            .map_err(|_| E::invalid_value(Unexpected::Signed(value), &self))
    }

    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "checked: integral, non-negative and at most u64::MAX"
    )]
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Whole, E> {
        if value.fract() == 0.0 && value >= 0.0 && value <= u64::MAX as f64 {
            // Integral and in range: the conversion is exact (saturating
            // at the very top).
            Ok(Whole(value as u64))
        } else {
            Err(E::invalid_value(Unexpected::Float(value), &self))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Arguments shaped like the built-in tools' ones.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        /// A path.
        path: String,
        /// A count,
        /// on two lines.
        #[serde(default, deserialize_with = "optional_whole")]
        #[schemars(range(min = 1))]
        offset: Option<u64>,
        /// A flag.
        flag: Option<bool>,
        /// Items.
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Item {
        /// Its state.
        state: State,
    }

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum State {
        /// Not started.
        Open,
        /// Waiting for a look.
        InReview,
    }

    fn error(arguments: Value) -> String {
        parse_args::<Sample>(&arguments)
            .expect_err("should be refused")
            .to_string()
    }

    #[test]
    fn the_generated_schema_is_a_plain_inlined_object_schema() {
        let schema = schema_of::<Sample>();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A path."},
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "A count, on two lines."
                    },
                    "flag": {"type": "boolean", "description": "A flag."},
                    "items": {
                        "type": "array",
                        "description": "Items.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "state": {
                                    "type": "string",
                                    "enum": ["open", "in_review"],
                                    "description": "Its state."
                                }
                            },
                            "required": ["state"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn well_formed_arguments_parse_with_nulls_as_absent_and_integral_floats_as_integers() {
        let parsed: Sample = parse_args(&json!({
            "path": "a", "offset": 2.0, "flag": null, "items": [{"state": "in_review"}]
        }))
        .unwrap();
        assert_eq!(parsed.path, "a");
        assert_eq!(parsed.offset, Some(2));
        assert_eq!(parsed.flag, None);
        assert_eq!(parsed.items.unwrap()[0].state, State::InReview);
        let parsed: Sample = parse_args(&json!({"path": "a", "offset": 7})).unwrap();
        assert_eq!(parsed.offset, Some(7));
    }

    #[test]
    fn an_unknown_argument_is_refused_naming_it_and_the_known_ones() {
        assert_eq!(
            error(json!({"pathh": "a"})),
            "unknown argument `pathh`; expected one of `path`, `offset`, `flag`, `items`"
        );
        assert_eq!(
            error(json!({"path": "a", "items": [{"state": "open", "x": 1}]})),
            "unknown field `x` in `items[0]`; expected `state`"
        );
    }

    #[test]
    fn a_wrong_type_names_the_argument_the_type_and_what_was_given() {
        assert_eq!(
            error(json!({"path": "x", "offset": "a"})),
            "argument `offset` must be a non-negative integer, got \"a\""
        );
        assert_eq!(
            error(json!({"path": "x", "offset": -1})),
            "argument `offset` must be a non-negative integer, got -1"
        );
        assert_eq!(
            error(json!({"path": "x", "offset": 1.5})),
            "argument `offset` must be a non-negative integer, got 1.5"
        );
        assert_eq!(
            error(json!({"path": 3})),
            "argument `path` must be a string, got 3"
        );
        assert_eq!(
            error(json!({"path": "x", "flag": "yes"})),
            "argument `flag` must be a boolean, got \"yes\""
        );
        assert_eq!(
            error(json!({"path": "x", "items": "many"})),
            "argument `items` must be an array, got \"many\""
        );
        assert_eq!(
            error(json!({"path": "x", "items": [{"state": "closed"}]})),
            "argument `items[0].state` must be one of `open`, `in_review`, got \"closed\""
        );
        assert_eq!(
            error(json!({"path": "x", "items": [7]})),
            "argument `items[0]` must be an object, got 7"
        );
        assert_eq!(
            error(json!({"path": "x", "items": [["open"]]})),
            "argument `items[0]` must be an object, got an array"
        );
        let long = "y".repeat(100);
        assert_eq!(
            error(json!({"path": "x", "flag": long})),
            format!(
                "argument `flag` must be a boolean, got \"{}\"…",
                "y".repeat(40)
            )
        );
    }

    #[test]
    fn a_missing_argument_is_named_with_its_type() {
        assert_eq!(
            error(json!({})),
            "missing required argument `path` (a string)"
        );
        assert_eq!(
            error(json!({"path": null})),
            "missing required argument `path` (a string)"
        );
        assert_eq!(
            error(Value::Null),
            "missing required argument `path` (a string)"
        );
        assert_eq!(
            error(json!({"path": "x", "items": [{}]})),
            "missing required field `state` in `items[0]` (one of `open`, `in_review`)"
        );
    }

    #[test]
    fn arguments_that_are_not_an_object_are_refused_as_a_whole() {
        assert_eq!(
            error(json!("nope")),
            "arguments must be a JSON object, got a string"
        );
        assert_eq!(
            error(json!([1])),
            "arguments must be a JSON object, got an array"
        );
        let refused = parse_args::<Sample>(&json!(1)).unwrap_err();
        assert!(matches!(
            refused,
            ToolError::InvalidArguments { argument: None, .. }
        ));
    }

    #[test]
    fn the_refusal_records_which_argument_was_at_fault() {
        let refused = parse_args::<Sample>(&json!({"path": "x", "items": [{"state": 1}]}));
        match refused {
            Err(ToolError::InvalidArguments { argument, .. }) => {
                assert_eq!(argument.as_deref(), Some("items[0].state"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Nothing {}

    #[test]
    fn a_tool_without_arguments_says_so_when_given_one() {
        assert_eq!(
            parse_args::<Nothing>(&json!({"a": 1}))
                .unwrap_err()
                .to_string(),
            "unknown argument `a`; this tool takes no arguments"
        );
        assert_eq!(
            schema_of::<Nothing>(),
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }
}
