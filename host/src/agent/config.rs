//! A session's settings: the step cap, output truncation, streaming and
//! what a whole-reply gate does to it, compaction, and the strategy a turn
//! runs. A leaf: it imports nothing else of the agent, so the session, the
//! loop and the strategies all read it and none of them is read by it.

use std::fmt;

/// Turns kept whole by a compaction, by default.
pub const DEFAULT_KEEP_TURNS: usize = 2;

/// The settings of one session, as its builder set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Provider calls allowed per turn.
    pub max_steps: usize,
    /// Successful tool output longer than this many bytes is truncated in
    /// the transcript.
    pub output_cap: usize,
    /// Stream replies.
    pub stream: bool,
    /// What streaming does when a pack gates whole replies only.
    pub stream_policy: StreamPolicy,
    /// How a compaction a context-window gate asks for is done.
    pub compaction: Compaction,
    /// The loop each turn runs.
    pub strategy: Strategy,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            max_steps: 25,
            output_cap: 30_000,
            stream: false,
            stream_policy: StreamPolicy::Downgrade,
            compaction: Compaction::default(),
            strategy: Strategy::React,
        }
    }
}

/// Compaction settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Turns kept whole (at least 1); the rest is summarised.
    pub keep_turns: usize,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            keep_turns: DEFAULT_KEEP_TURNS,
        }
    }
}

/// What to do with streaming when a pack gates whole replies
/// (`model_response` or `output`) but not streamed text (`stream_chunk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamPolicy {
    /// Turn streaming off for the run, with one log line and one
    /// `streaming_downgraded` event naming the packs (the default).
    #[default]
    Downgrade,
    /// Keep streaming on (a whole-reply block cannot take back what streamed).
    Allow,
}

/// The tools of the plan phase: the ones that read or only record and
/// change nothing outside the conversation — `read_file` (reads the
/// workspace), `think` (a note to self) and `todo` (the session's task
/// list). Not `bash` (a shell can write), not `delegate` (its sub-agent
/// gets the write tools), not the writers.
pub const READ_ONLY_TOOLS: [&str; 3] = ["read_file", "think", "todo"];

/// The names `--strategy` accepts, in the order they are listed.
pub const STRATEGY_NAMES: [&str; 6] = [
    "react",
    "plan-and-execute",
    "reflexion",
    "tree-of-thought",
    "plan-act",
    "retry",
];

/// Tree-of-thought's candidates per step, unless configured.
pub const DEFAULT_CANDIDATES: usize = 3;
/// Reflexion's executed actions between reflections, unless configured.
pub const DEFAULT_REFLECT_EVERY: usize = 3;
/// Retry's attempts, the first included, unless configured.
pub const DEFAULT_ATTEMPTS: usize = 3;
/// Plan-and-execute's most plan steps carried out one by one, unless configured.
pub const DEFAULT_MAX_PLAN_STEPS: usize = 8;

/// The loop each turn of a session runs ([`SessionBuilder::strategy`](super::SessionBuilder::strategy)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// `react`: reason, act, observe — one model call per step, its tool
    /// calls settled, until a reply without tool calls (the default).
    #[default]
    React,
    /// `plan-and-execute`: one call (offered no tools) asks for a numbered
    /// plan; each plan step is then carried out in its own `ReAct` phase,
    /// prompted `Step i of n …`, ending at a reply without tool calls;
    /// a last phase asks for the final answer, which passes `output`.
    PlanAndExecute {
        /// Plan steps carried out one by one; the steps past it are carried
        /// out together, as the last one.
        max_plan_steps: usize,
    },
    /// `reflexion`: `ReAct`, plus a reflection prompt each time the
    /// actions that actually ran (not refused at the gate) reach another
    /// multiple of `reflect_every`. A step in which nothing ran never
    /// triggers one.
    Reflexion {
        /// Executed actions between reflections.
        reflect_every: usize,
    },
    /// `tree-of-thought`: each step makes `candidates` conversation calls
    /// on the same history, each with `temperature: 0.7` in its extra
    /// options (so the `provider_request` seam sees it), none streamed. If
    /// any candidate calls tools, the first such is the step's reply and
    /// its calls are settled; if the text candidates are all the same, the
    /// first is the answer; otherwise one evaluator call picks the answer.
    ///
    /// The evaluator call is not a conversation call and passes no seam:
    /// it sends only text that came back from this provider in this step
    /// and already passed `model_response` — a system message `You are an
    /// evaluator.` and one user message listing the candidates — with no
    /// tools and no extra options, to the model and with the headers the
    /// step's last candidate call went out with. Its answer (a number)
    /// only chooses; the user never sees it and it never enters the
    /// conversation. An answer that is not a candidate's number chooses
    /// the first.
    TreeOfThought {
        /// Candidate calls per step.
        candidates: usize,
    },
    /// `plan-act`: a plan phase offered only the read-only tools
    /// ([`READ_ONLY_TOOLS`]; a call to any other is an unknown tool there),
    /// ending at a reply without tool calls (the plan), then an act phase
    /// with every tool, ending at the final answer.
    PlanAct,
    /// `retry`: `ReAct`, and when the run fails (a block, an `output`
    /// block, running out of steps — not a provider error), again with a
    /// fresh context: this turn's messages are dropped and the model is
    /// sent the original request plus `Previous attempt (#n) scored 0%.
    /// Output was: …`. Every attempt runs under the session's whole
    /// configuration (the turn's chains, hooks, permissions, approver) and
    /// gets its own `max_steps`.
    Retry {
        /// Attempts, the first included.
        attempts: usize,
    },
}

/// A `--strategy` name or its configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StrategyError {
    /// No strategy has this name.
    UnknownName(String),
    /// The configuration is not what the strategy takes.
    BadConfig {
        /// The strategy.
        strategy: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl fmt::Display for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrategyError::UnknownName(name) => write!(
                f,
                "unknown strategy {name:?}: the strategies are {}",
                STRATEGY_NAMES.join(", ")
            ),
            StrategyError::BadConfig { strategy, problem } => {
                let takes = match setting(strategy) {
                    Some((key, _, max)) => format!("it takes {{\"{key}\": 1 to {max}}}"),
                    None => "it takes no settings ({})".to_owned(),
                };
                write!(f, "{strategy} configuration: {problem}; {takes}")
            }
        }
    }
}

impl std::error::Error for StrategyError {}

/// The one setting a strategy takes: its key, default and largest value.
fn setting(strategy: &str) -> Option<(&'static str, usize, usize)> {
    match strategy {
        "plan-and-execute" => Some(("max_plan_steps", DEFAULT_MAX_PLAN_STEPS, 64)),
        "reflexion" => Some(("reflect_every", DEFAULT_REFLECT_EVERY, 1000)),
        // Each candidate is a provider call per step.
        "tree-of-thought" => Some(("candidates", DEFAULT_CANDIDATES, 16)),
        "retry" => Some(("attempts", DEFAULT_ATTEMPTS, 20)),
        _ => None,
    }
}

impl Strategy {
    /// The strategy's name, as `--strategy` takes it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::React => "react",
            Strategy::PlanAndExecute { .. } => "plan-and-execute",
            Strategy::Reflexion { .. } => "reflexion",
            Strategy::TreeOfThought { .. } => "tree-of-thought",
            Strategy::PlanAct => "plan-act",
            Strategy::Retry { .. } => "retry",
        }
    }

    /// The strategy named `name` (one of [`STRATEGY_NAMES`]), with its
    /// setting from `config`, a JSON object (`{"candidates": 2}`; absent or
    /// `{}`: the defaults).
    ///
    /// # Errors
    ///
    /// An unknown name, a configuration that is not a JSON object, an
    /// unknown key, or a value that is not a whole number in range.
    pub fn parse(name: &str, config: Option<&str>) -> Result<Strategy, StrategyError> {
        let Some(&strategy) = STRATEGY_NAMES.iter().find(|n| **n == name) else {
            return Err(StrategyError::UnknownName(name.to_owned()));
        };
        let bad = |problem: String| StrategyError::BadConfig { strategy, problem };
        let object = match config.map(serde_json::from_str::<serde_json::Value>) {
            None => serde_json::Map::new(),
            Some(Ok(serde_json::Value::Object(object))) => object,
            Some(Ok(other)) => return Err(bad(format!("{other} is not a JSON object"))),
            Some(Err(error)) => return Err(bad(format!("not JSON ({error})"))),
        };
        let mut value = setting(strategy).map(|(_, default, _)| default);
        for (key, given) in &object {
            let Some((expected, _, max)) = setting(strategy).filter(|(k, _, _)| k == key) else {
                return Err(bad(format!("unknown setting {key:?}")));
            };
            let number = given
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    bad(format!(
                        "{expected} is {given}, not a whole number from 1 to {max}"
                    ))
                })?;
            value = Some(number);
        }
        let value = value.unwrap_or_default();
        Ok(match strategy {
            "plan-and-execute" => Strategy::PlanAndExecute {
                max_plan_steps: value,
            },
            "reflexion" => Strategy::Reflexion {
                reflect_every: value,
            },
            "tree-of-thought" => Strategy::TreeOfThought { candidates: value },
            "plan-act" => Strategy::PlanAct,
            "retry" => Strategy::Retry { attempts: value },
            _ => Strategy::React,
        })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Strategy {
    type Err = StrategyError;

    /// The strategy with its default settings.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Strategy::parse(name, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_to_itself_with_its_default() {
        for name in STRATEGY_NAMES {
            let strategy = Strategy::parse(name, None).unwrap();
            assert_eq!(strategy.name(), name);
            assert_eq!(name.parse::<Strategy>().unwrap(), strategy);
        }
        assert_eq!(
            Strategy::parse("tree-of-thought", Some("{}")).unwrap(),
            Strategy::TreeOfThought {
                candidates: DEFAULT_CANDIDATES
            }
        );
        assert_eq!(
            Strategy::parse("retry", Some(r#"{"attempts": 5}"#)).unwrap(),
            Strategy::Retry { attempts: 5 }
        );
    }

    #[test]
    fn an_unknown_name_or_a_bad_setting_is_one_line_naming_what_is_valid() {
        let unknown = Strategy::parse("tree", None).unwrap_err().to_string();
        assert_eq!(
            unknown,
            "unknown strategy \"tree\": the strategies are react, plan-and-execute, \
             reflexion, tree-of-thought, plan-act, retry"
        );
        for (name, config, problem) in [
            ("tree-of-thought", "{\"candidates\": 0}", "candidates is 0"),
            (
                "tree-of-thought",
                "{\"candidates\": 2.5}",
                "candidates is 2.5",
            ),
            ("tree-of-thought", "{\"n\": 2}", "unknown setting \"n\""),
            ("reflexion", "[3]", "[3] is not a JSON object"),
            ("retry", "{", "not JSON"),
            ("react", "{\"attempts\": 2}", "unknown setting \"attempts\""),
        ] {
            let error = Strategy::parse(name, Some(config)).unwrap_err().to_string();
            assert!(error.contains(problem), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
        assert!(Strategy::parse("react", Some("{\"x\": 1}"))
            .unwrap_err()
            .to_string()
            .ends_with("it takes no settings ({})"));
        assert!(Strategy::parse("tree-of-thought", Some("{\"n\": 1}"))
            .unwrap_err()
            .to_string()
            .ends_with("it takes {\"candidates\": 1 to 16}"));
    }
}
