//! `tree-of-thought`: several candidate replies per step, one chosen.
//!
//! ```text
//!  step: before-model middleware, then n × (context → provider_request
//!        {kwargs: {temperature: 0.7}} → the wire → model_response)
//!    a candidate with tool calls → the first such is the step's reply
//!    the text candidates all alike → the first is the answer
//!    else → one evaluator call (no seams) names the answer
//! ```
//!
//! Only the chosen reply enters the conversation (one assistant message,
//! one `assistant` event); the others are dropped. A substitute (a
//! candidate the `model_response` seam blocked) is chosen only when every
//! candidate is one, and then ends the turn like any substitute.

use super::Budget;
use crate::agent::outcome::{Judged, RunResult};
use crate::agent::session::AgentSession;
use crate::interception::Interceptors;
use crate::providers::{Provider, ProviderCall};
use crate::types::{Headers, Message, ToolList};
use std::fmt::Write as _;
use std::sync::Arc;

/// The candidate calls' temperature.
const TEMPERATURE: f64 = 0.7;

/// The evaluator call's system message.
const EVALUATOR_SYSTEM: &str = "You are an evaluator.";

/// How the step's candidate calls went out, for the evaluator to follow.
#[derive(Default)]
struct Sent {
    model: Option<String>,
    headers: Option<Headers>,
}

/// The evaluator call's user message: the candidates, numbered from 1.
fn evaluator_prompt(candidates: &[&str]) -> String {
    let mut prompt = String::from(
        "Several candidate answers were written for the same request. Reply with the number \
         of the best candidate, and nothing else.",
    );
    for (index, candidate) in candidates.iter().enumerate() {
        let _ = write!(prompt, "\n\nCandidate {}:\n{candidate}", index + 1);
    }
    prompt
}

/// The candidate an evaluator's answer names (its first number, from 1),
/// as an index; the first candidate when it names none of them.
fn chosen(answer: &str, count: usize) -> usize {
    let digits: String = answer
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=count).contains(n))
        .map_or(0, |n| n - 1)
}

impl AgentSession {
    /// One `tree-of-thought` turn (see the module docs).
    pub(super) async fn tree_of_thought(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        budget: &mut Budget,
        candidates: usize,
    ) -> Result<RunResult, RunResult> {
        let tools = self.tool_list.clone();
        let mut kwargs = serde_json::Map::new();
        kwargs.insert("temperature".to_owned(), TEMPERATURE.into());
        while budget.take() {
            self.before_model();
            let (replies, sent) = self
                .candidates(bundle, &tools, &kwargs, candidates.max(1))
                .await?;
            let reply = self.choose(replies, &sent).await;
            if let super::Stepped::Answered(answer) = self.act_on(bundle, reply).await {
                return Ok(self.answer(bundle, answer).await);
            }
        }
        Err(self.out_of_steps())
    }

    /// `count` conversation calls on the same history, not streamed (a
    /// candidate that is not chosen is never shown), each reply judged.
    async fn candidates(
        &mut self,
        bundle: Option<&Arc<Interceptors>>,
        tools: &ToolList,
        kwargs: &serde_json::Map<String, serde_json::Value>,
        count: usize,
    ) -> Result<(Vec<Judged>, Sent), RunResult> {
        let streaming = std::mem::replace(&mut self.streaming, false);
        let mut replies = Vec::with_capacity(count);
        let mut sent = Sent::default();
        let mut ended = None;
        for _ in 0..count {
            match self
                .call_provider_with(bundle.map(Arc::as_ref), tools, kwargs)
                .await
            {
                Ok(received) => {
                    sent = Sent {
                        model: received.model.clone(),
                        headers: received.headers.clone(),
                    };
                    replies.push(self.judge_reply(bundle.map(Arc::as_ref), received));
                }
                Err(end) => {
                    ended = Some(end);
                    break;
                }
            }
        }
        self.streaming = streaming;
        match ended {
            Some(end) => Err(end),
            None => Ok((replies, sent)),
        }
    }

    /// The step's reply: the first candidate with tool calls; else the
    /// first text candidate when they are all alike, or the one the
    /// evaluator names; a substitute only when every candidate is one.
    async fn choose(&mut self, mut replies: Vec<Judged>, sent: &Sent) -> Judged {
        if let Some(acting) = replies.iter().position(|r| !r.tool_calls.is_empty()) {
            return replies.swap_remove(acting);
        }
        let texts: Vec<usize> = (0..replies.len())
            .filter(|&i| !replies[i].vetoed())
            .collect();
        let Some(&first) = texts.first() else {
            return replies.swap_remove(0);
        };
        if texts
            .iter()
            .all(|&i| replies[i].content == replies[first].content)
        {
            return replies.swap_remove(first);
        }
        let listed: Vec<&str> = texts.iter().map(|&i| replies[i].content.as_str()).collect();
        let pick = self.evaluate(&listed, sent).await;
        replies.swap_remove(texts[pick])
    }

    /// The evaluator call (see [`Strategy::TreeOfThought`](super::Strategy::TreeOfThought)
    /// for why it passes no seam): the index of the candidate it names.
    /// Its tokens are charged like any call's; a failed call chooses the
    /// first candidate.
    async fn evaluate(&mut self, candidates: &[&str], sent: &Sent) -> usize {
        let messages = [
            Message::system(EVALUATOR_SYSTEM),
            Message::user(evaluator_prompt(candidates)),
        ];
        let call = ProviderCall {
            model: sent.model.as_deref(),
            messages: &messages,
            tools: &[],
            kwargs: &serde_json::Map::new(),
            headers: sent.headers.as_ref(),
        };
        let provider: Arc<dyn Provider> = Arc::clone(&self.provider);
        let outcome = provider.complete_async(&call).await;
        self.facts.provider_calls_this_turn += 1;
        match outcome {
            Ok(response) => {
                let model = sent
                    .model
                    .clone()
                    .unwrap_or_else(|| provider.model().to_owned());
                self.charge(&model, response.usage);
                chosen(&response.content, candidates.len())
            }
            Err(error) => {
                tracing::warn!(%error, "tree-of-thought evaluator call failed; the first candidate is chosen");
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{chosen, evaluator_prompt};

    #[test]
    fn the_evaluator_answer_names_a_candidate_or_the_first_is_chosen() {
        assert_eq!(chosen("2", 3), 1);
        assert_eq!(chosen("Candidate 3 is best.", 3), 2);
        assert_eq!(chosen("4", 3), 0);
        assert_eq!(chosen("0", 3), 0);
        assert_eq!(chosen("neither", 3), 0);
        assert_eq!(chosen("99999999999999999999999", 3), 0);
    }

    #[test]
    fn the_evaluator_prompt_lists_only_the_candidates() {
        assert_eq!(
            evaluator_prompt(&["A", "B"]),
            "Several candidate answers were written for the same request. Reply with the \
             number of the best candidate, and nothing else.\n\nCandidate 1:\nA\n\nCandidate 2:\nB"
        );
    }
}
