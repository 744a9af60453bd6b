//! Strategies: the loops a turn can run, each on the `ReAct` machinery.
//!
//! A strategy decides *which* calls a turn makes — a plan first, several
//! candidates, a reflection, a fresh attempt — never *how* it makes them.
//! Every strategy makes each conversation call through the one call site
//! the `ReAct` loop uses (before-model middleware → `context` →
//! `provider_request` → the wire, headers per call → `model_response`),
//! settles each tool call through the one gate (`tool_call` → `PreToolUse`
//! hooks → permission policy → execute → `tool_result`; an approval covers
//! exactly one call), and passes its final answer through the `output`
//! seam, gate retries included. So a policy that holds in `ReAct` holds in
//! every strategy. The one call that bypasses the seams, tree-of-thought's
//! evaluator, is described in [`Strategy::TreeOfThought`].
//!
//! Shared rules:
//!
//! * `max_steps` caps the steps of the whole turn, over every phase (a
//!   step is one model reply, or tree-of-thought's set of candidates);
//!   `retry` gives each attempt its own.
//! * The prompts a strategy adds (a plan request, a step, a reflection)
//!   are user messages in the durable history: the model reads them as
//!   instructions, and every seam sees them like any other message. A gate
//!   that re-arms on a new user message (plan-gate) re-arms on them too:
//!   no strategy opens a gate on the model's behalf.
//! * A reply the `model_response` seam blocked (a substitute) ends the
//!   turn in every strategy, as in `ReAct`.
//! * A turn blocked before any provider call leaves nothing in the
//!   conversation: its input and the prompts the strategy added go.

mod plan_act;
mod plan_and_execute;
mod reflexion;
mod retry;
mod tree_of_thought;

use super::react::{Judged, Stepped};
use super::session::{AgentSession, EndReason, RunResult};
use super::AgentEvent;
use crate::interception::Interceptors;
use crate::tools::ToolSet;
use crate::types::{Message, ToolList};
use std::fmt;
use std::sync::Arc;

pub use plan_act::READ_ONLY_TOOLS;

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

/// Steps a turn has left: `max_steps` caps the steps of the whole turn,
/// over all its phases.
pub(super) struct Budget(usize);

impl Budget {
    /// Takes one step; false when none is left.
    fn take(&mut self) -> bool {
        let left = self.0 > 0;
        self.0 = self.0.saturating_sub(1);
        left
    }
}

impl AgentSession {
    /// Runs this turn's strategy, the turn's user message (`input`) being
    /// the last message of the history.
    pub(crate) async fn run_strategy(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        input: &str,
    ) -> RunResult {
        let strategy = self.strategy.clone();
        if strategy == Strategy::React {
            return self.run_steps(bundle).await;
        }
        let start = self.history.len().saturating_sub(1);
        let mut budget = Budget(self.max_steps);
        let ended = match strategy {
            Strategy::PlanAndExecute { max_plan_steps } => {
                self.plan_and_execute(bundle, &mut budget, max_plan_steps)
                    .await
            }
            Strategy::Reflexion { reflect_every } => {
                self.reflexion(bundle, &mut budget, reflect_every).await
            }
            Strategy::TreeOfThought { candidates } => {
                self.tree_of_thought(bundle, &mut budget, candidates).await
            }
            Strategy::PlanAct => self.plan_act(bundle, &mut budget).await,
            Strategy::Retry { attempts } => Ok(self.retry(bundle, input, start, attempts).await),
            Strategy::React => Ok(self.run_steps(bundle).await),
        };
        let result = ended.unwrap_or_else(|end| end);
        // Blocked before the model saw anything: only the input is left,
        // for the turn to remove.
        if matches!(result.reason, EndReason::InterceptorBlocked { .. })
            && self.facts.provider_calls_this_turn == 0
        {
            self.history.truncate(start);
            self.history.push(Message::user(input));
        }
        result
    }

    /// `ReAct` steps offering `tools` until the model replies without tool
    /// calls: that reply, not yet recorded. After each step that called
    /// tools, `acted` is told how many of them ran. `Err` ends the turn (a
    /// block, a provider failure, or the budget used up).
    pub(super) async fn until_reply(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        tools: &ToolList,
        budget: &mut Budget,
        acted: &mut (dyn FnMut(&mut AgentSession, usize) + Send),
    ) -> Result<Judged, RunResult> {
        while budget.take() {
            match self.step(bundle, tools).await? {
                Stepped::Answered(judged) => return Ok(judged),
                Stepped::Acted { executed } => acted(self, executed),
            }
        }
        Err(self.out_of_steps())
    }

    /// A reply that ends a phase but not the turn (a plan, a step's
    /// report): recorded as one assistant message with one `assistant`
    /// event. It is not a final answer, so the `output` seam does not
    /// judge it. A substitute (the `model_response` seam blocked the
    /// reply) ends the turn instead, as the final answer.
    pub(super) async fn phase_reply(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        judged: Judged,
    ) -> Result<String, RunResult> {
        if judged.vetoed() {
            return Err(self.answer(bundle, judged).await);
        }
        let content = judged.content;
        self.history
            .push(Message::assistant(content.clone(), Vec::new()));
        self.bus.emit(|| AgentEvent::Assistant {
            content: content.clone(),
            tool_calls: Vec::new(),
            finish_reason: None,
        });
        Ok(content)
    }

    /// A prompt the strategy adds: a user message in the durable history.
    pub(super) fn prompt(&mut self, text: impl Into<String>) {
        self.history.push(Message::user(text));
    }

    /// A phase's [`until_reply`](Self::until_reply) with only the
    /// session's tools named in `names`: they are the tools offered and the
    /// only ones a call can run (any other is an unknown tool), every call
    /// still passing the whole gate. The session's tools are back afterwards.
    pub(super) async fn until_reply_with_only(
        &mut self,
        names: &[&str],
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
    ) -> Result<Judged, RunResult> {
        let mut only = ToolSet::new();
        for name in names {
            if let Some(tool) = self.tools.get(name) {
                only.insert(Arc::clone(tool));
            }
        }
        let offered = ToolList::new(only.schemas());
        let all = std::mem::replace(&mut self.tools, only);
        let result = self
            .until_reply(bundle, &offered, budget, &mut |_, _| {})
            .await;
        self.tools = all;
        result
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
