//! The filter, its configuration, and the pack around it.

use chimera_plugin_api::prelude::*;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

/// `{"include": [...]}` or `{"exclude": [...]}`; unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Tool-name patterns to keep (nothing else is offered).
    pub include: Vec<String>,
    /// Tool-name patterns to drop.
    pub exclude: Vec<String>,
}

/// Which tools a filter keeps.
#[derive(Debug)]
enum Keep {
    /// Every tool (no list given).
    All,
    /// Only the tools the set matches.
    Only(GlobSet),
    /// Every tool the set does not match.
    AllBut(GlobSet),
}

/// The tool-filter pack.
#[derive(Debug)]
pub struct ToolFilter {
    keep: Keep,
    /// The last tool list judged and what it became: a session offers the
    /// same list on every request, and comparing it with the last one is
    /// far cheaper than parsing it again.
    last: Mutex<Option<(String, Option<String>)>>,
}

/// The part of a tool schema the filter reads.
#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

impl ToolFilter {
    /// True when a tool called `name` is offered.
    #[must_use]
    pub fn keeps(&self, name: &str) -> bool {
        match &self.keep {
            Keep::All => true,
            Keep::Only(set) => set.is_match(name),
            Keep::AllBut(set) => !set.is_match(name),
        }
    }

    /// The tool schemas (a JSON array) with only the kept ones, each kept
    /// schema exactly as it was; `None` when every schema is kept (or there
    /// are none). A schema without a name is kept only when there is no
    /// include list.
    ///
    /// # Errors
    ///
    /// The [`serde_json::Error`] when `tools_json` is neither blank nor a JSON
    /// array; it is not read when every schema is kept.
    pub fn filtered(&self, tools_json: &str) -> Result<Option<String>, serde_json::Error> {
        if matches!(self.keep, Keep::All) || tools_json.trim().is_empty() {
            return Ok(None);
        }
        let schemas: Vec<&RawValue> = serde_json::from_str(tools_json)?;
        let mut kept = Vec::with_capacity(schemas.len());
        for schema in &schemas {
            let keep = match serde_json::from_str::<Named<'_>>(schema.get()) {
                Ok(named) => self.keeps(&named.name),
                Err(_) => matches!(self.keep, Keep::AllBut(_)),
            };
            if keep {
                kept.push(schema.get());
            }
        }
        if kept.len() == schemas.len() {
            return Ok(None);
        }
        Ok(Some(format!("[{}]", kept.join(","))))
    }
}

/// The glob set of `patterns`; an invalid pattern is one line.
fn glob_set(key: &str, patterns: &[String]) -> Result<GlobSet, PackError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|error| PackError::msg(format!("{key}: invalid pattern: {error}")))?;
        set.add(glob);
    }
    set.build()
        .map_err(|error| PackError::msg(format!("{key}: {error}")))
}

impl Pack for ToolFilter {
    const NAME: &'static str = "tool-filter";
    const VERSION: &'static str = "1.0.0";
    const DESCRIPTION: &'static str =
        "offers the model only the tools an include list names, or all but an exclude list's";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        let keep = match (config.include.is_empty(), config.exclude.is_empty()) {
            (true, true) => Keep::All,
            (false, true) => Keep::Only(glob_set("include", &config.include)?),
            (true, false) => Keep::AllBut(glob_set("exclude", &config.exclude)?),
            (false, false) => {
                return Err(PackError::msg(
                    "include and exclude are both given: give one (include keeps only the tools it names, exclude drops the tools it names)",
                ))
            }
        };
        Ok(ToolFilter {
            keep,
            last: Mutex::new(None),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.provider_request("filter", move |_, request| {
            let offered = request.tools_json();
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            let verdict = match last.as_ref() {
                Some((seen, verdict)) if seen == offered => verdict.clone(),
                _ => {
                    let verdict = self.filtered(offered)?;
                    *last = Some((offered.to_owned(), verdict.clone()));
                    verdict
                }
            };
            drop(last);
            let Some(tools_json) = verdict else {
                return Ok(Decision::Allow);
            };
            let mut owned = request.to_owned();
            owned.tools_json = tools_json;
            Ok(Decision::Replace(owned))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn filter(config: Value) -> Result<ToolFilter, PackError> {
        ToolFilter::new(serde_json::from_value(config).map_err(PackError::from)?)
    }

    fn tools(names: &[&str]) -> String {
        let schemas: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "description": format!("the {n} tool"), "parameters": {"type": "object"}}))
            .collect();
        Value::from(schemas).to_string()
    }

    fn names(tools_json: &str) -> Vec<String> {
        let schemas: Vec<Value> = serde_json::from_str(tools_json).unwrap();
        schemas
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn an_include_list_keeps_exactly_the_tools_it_names_with_their_schemas_intact() {
        let f = filter(json!({"include": ["bash", "read_file"]})).unwrap();
        let kept = f
            .filtered(&tools(&["bash", "read_file", "web_search"]))
            .unwrap()
            .unwrap();
        assert_eq!(names(&kept), ["bash", "read_file"]);
        let schemas: Vec<Value> = serde_json::from_str(&kept).unwrap();
        assert_eq!(schemas[0]["description"], "the bash tool");
        assert_eq!(schemas[0]["parameters"], json!({"type": "object"}));
    }

    #[test]
    fn an_exclude_list_drops_the_tools_it_names() {
        let f = filter(json!({"exclude": ["bash"]})).unwrap();
        let kept = f
            .filtered(&tools(&["bash", "read_file", "web_search"]))
            .unwrap()
            .unwrap();
        assert_eq!(names(&kept), ["read_file", "web_search"]);
    }

    #[test]
    fn no_tools_or_nothing_filtered_out_leaves_the_request_untouched() {
        let f = filter(json!({"include": ["bash"]})).unwrap();
        assert_eq!(f.filtered("[]").unwrap(), None);
        assert_eq!(f.filtered("").unwrap(), None);
        assert_eq!(f.filtered(&tools(&["bash"])).unwrap(), None);
        let all = filter(json!({})).unwrap();
        assert_eq!(all.filtered(&tools(&["bash", "x"])).unwrap(), None);
    }

    #[test]
    fn patterns_are_globs_and_a_plain_name_matches_only_itself() {
        let f = filter(json!({"include": ["mcp.*", "read_?ile", "bash"]})).unwrap();
        assert!(f.keeps("mcp.github.search"));
        assert!(f.keeps("read_file"));
        assert!(f.keeps("bash"));
        assert!(!f.keeps("bash2"));
        assert!(!f.keeps("xbash"));
        assert!(!f.keeps("write_file"));
        let escaped = filter(json!({"include": ["odd\\*"]})).unwrap();
        assert!(escaped.keeps("odd*"));
        assert!(!escaped.keeps("oddity"));
    }

    #[test]
    fn both_lists_or_a_bad_pattern_or_an_unknown_key_refuse_the_load_with_one_line() {
        for config in [
            json!({"include": ["bash"], "exclude": ["read_file"]}),
            json!({"include": ["[bash"]}),
            json!({"patterns": ["bash"]}),
        ] {
            let error = filter(config.clone()).unwrap_err().to_string();
            assert!(
                !error.is_empty() && !error.contains('\n'),
                "{config}: {error}"
            );
        }
        let both = filter(json!({"include": ["a"], "exclude": ["b"]}))
            .unwrap_err()
            .to_string();
        assert!(
            both.starts_with("include and exclude are both given"),
            "{both}"
        );
    }

    #[test]
    fn a_tool_list_that_is_not_json_is_an_error_not_a_panic() {
        let f = filter(json!({"exclude": ["bash"]})).unwrap();
        assert!(f.filtered("not json").is_err());
    }
}
