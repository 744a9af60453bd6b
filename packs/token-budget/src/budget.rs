//! The gate: projected spending against each ceiling, before each call.

use crate::config::{Action, Ceiling, Config, Dimension, Window};
use crate::shared::{self, Held};
use crate::spent::Spent;
use chimera_plugin_api::prelude::*;
use chimera_plugin_api::sdk::{Billing, Price, SourceUsage, State, Usage};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// Conversations remembered (day baselines, warnings given) before the
/// memory is cleared.
const MAX_CONVERSATIONS: usize = 256;
/// Utilisation from which a bucket gets its one warning.
const WARN_AT: f64 = 0.8;
/// Calls holding a reservation remembered before the memory is cleared
/// (a host that never ends a call would otherwise grow it; what such a
/// call holds is then kept, as if its estimate were its cost).
const MAX_HELD: usize = 65_536;

/// What the gate remembers per conversation.
#[derive(Debug, Default)]
struct Memory {
    /// Per ceiling with a day window: the UTC day and what had been spent
    /// when it started.
    days: HashMap<(String, usize), (u64, Spent)>,
    /// (conversation, ceiling) pairs already warned at 80 %.
    warned: HashSet<(String, usize)>,
}

/// The loaded gate.
#[derive(Debug)]
pub struct TokenBudget {
    ceilings: Vec<Ceiling>,
    candidates: Vec<String>,
    estimate_factor: f64,
    pricing: BTreeMap<String, Price>,
    memory: Mutex<Memory>,
    /// What each call under way reserved in the store, by the host's call
    /// id, until the call ends.
    held: Mutex<HashMap<u64, Held>>,
}

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It goes (with a warning, maybe).
    Pass(Option<String>),
    /// It goes with this notice.
    Warn(String),
    /// It goes to this model instead.
    Downgrade(String),
    /// It is blocked: the reason and the notice.
    Block(String, String),
}

/// What a verdict reads of the call besides its spending: who it is for,
/// and the host's prices (the whole table as read, or one model's at a
/// time from the session: a call counted in the store reads no more).
#[derive(Clone, Copy)]
enum Call<'u> {
    Read(&'u Usage),
    Session(Session<'u>),
}

impl Call<'_> {
    fn source(&self) -> &str {
        match self {
            Call::Read(usage) => &usage.source,
            Call::Session(session) => session.source(),
        }
    }

    fn price(&self, model: &str) -> Option<Price> {
        match self {
            Call::Read(usage) => usage.prices.get(model).copied(),
            Call::Session(session) => session.price(model),
        }
    }
}

/// Which limit a projection exceeds or nears.
struct Limit {
    /// `input `, `output ` or nothing for totals; `None` for dollars.
    tokens: Option<&'static str>,
    spent: f64,
    max: f64,
}

impl Limit {
    fn reason(&self, dimension: Dimension) -> String {
        match self.tokens {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "token counts, integral and far below 2^52"
            )]
            Some(kind) => format!(
                "{} budget exceeded ({kind}{}/{} tokens)",
                dimension.as_str(),
                self.spent as u64,
                self.max as u64
            ),
            None => format!(
                "{} budget exceeded (${:.4} / ${:.4})",
                dimension.as_str(),
                self.spent,
                self.max
            ),
        }
    }
}

/// The request's `max_tokens` when it is a whole number (0 otherwise, or
/// when the arguments are not a JSON object): only that member is read,
/// the others skipped without a value built for them.
fn max_tokens(kwargs_json: &str) -> u64 {
    #[derive(serde::Deserialize)]
    struct Kwargs {
        max_tokens: Option<serde_json::Value>,
    }
    // A derived struct reads an array as its members in order: only an
    // object is the arguments.
    if !kwargs_json.trim_start().starts_with('{') {
        return 0;
    }
    serde_json::from_str::<Kwargs>(kwargs_json)
        .ok()
        .and_then(|kwargs| kwargs.max_tokens?.as_u64())
        .unwrap_or(0)
}

fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400)
}

impl TokenBudget {
    /// The estimate of `request`: (input tokens, output tokens).
    fn estimate(&self, request: RequestRef<'_>) -> (u64, u64) {
        let chars = gate_kit::text_chars(request.messages());
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an estimate: characters / 4 × a positive factor"
        )]
        let input = (chars as f64 / 4.0 * self.estimate_factor) as u64;
        (input, max_tokens(request.kwargs_json()))
    }

    fn price(&self, call: Call<'_>, model: &str) -> Option<Price> {
        self.pricing
            .get(model)
            .copied()
            .or_else(|| call.price(model))
    }

    /// What `ceiling` counts as spent so far in this conversation.
    fn spent(&self, session: &str, index: usize, ceiling: &Ceiling, usage: &Usage) -> Spent {
        let total = match ceiling.dimension {
            Dimension::Session => usage.usage.values().fold(Spent::default(), |sum, u| {
                Spent::new(
                    sum.input + u.input_tokens,
                    sum.output + u.output_tokens,
                    sum.usd + u.cost_usd,
                )
            }),
            Dimension::SourcePlugin => ceiling
                .matches
                .as_deref()
                .and_then(|source| usage.usage.get(source))
                .map(|u| Spent::new(u.input_tokens, u.output_tokens, u.cost_usd))
                .unwrap_or_default(),
        };
        if ceiling.window == Window::Session {
            return total;
        }
        let mut memory = self.memory();
        let day = today();
        let key = (session.to_owned(), index);
        let base = memory.days.entry(key).or_insert((day, total));
        if base.0 != day {
            *base = (day, total);
        }
        total.minus(base.1)
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if memory.days.len() + memory.warned.len() > MAX_CONVERSATIONS * 8 {
            *memory = Memory::default();
        }
        memory
    }

    /// The verdict on a call from `source` in conversation `session`, with
    /// the host's `usage` and the call's estimate.
    #[must_use]
    pub fn verdict(
        &self,
        session: &str,
        usage: &Usage,
        model: &str,
        estimate: (u64, u64),
    ) -> Verdict {
        let local = |index: usize, ceiling: &Ceiling| {
            Ok::<_, std::convert::Infallible>(self.spent(session, index, ceiling, usage))
        };
        let call = Call::Read(usage);
        let usd = self.estimate_usd(call, model, estimate);
        match self.verdict_on(session, call, model, (estimate, usd), &local) {
            Ok(verdict) => verdict,
            Err(never) => match never {},
        }
    }

    /// [`TokenBudget::verdict`] with what each ceiling counts as spent
    /// from `spent_of` (this process's figures, or the shared store's);
    /// `estimate`: the call's tokens (input, output) and what they cost.
    fn verdict_on<E>(
        &self,
        session: &str,
        call: Call<'_>,
        model: &str,
        estimate: ((u64, u64), f64),
        spent_of: &dyn Fn(usize, &Ceiling) -> Result<Spent, E>,
    ) -> Result<Verdict, E> {
        let (estimate, estimate_usd) = estimate;
        let mut warning = None;
        for (index, ceiling) in self.ceilings.iter().enumerate() {
            if ceiling.dimension == Dimension::SourcePlugin
                && ceiling.matches.as_deref() != Some(call.source())
            {
                continue;
            }
            let spent = spent_of(index, ceiling)?;
            #[allow(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
            let limits = [
                (
                    Some("input "),
                    spent.input + estimate.0,
                    ceiling.max_input_tokens,
                ),
                (
                    Some("output "),
                    spent.output + estimate.1,
                    ceiling.max_output_tokens,
                ),
                (
                    Some(""),
                    spent.total + estimate.0 + estimate.1,
                    ceiling.max_total_tokens,
                ),
            ]
            .into_iter()
            .filter_map(|(tokens, projected, max)| {
                max.map(|max| Limit {
                    tokens,
                    spent: projected as f64,
                    max: max as f64,
                })
            })
            .chain(ceiling.max_usd.map(|max| Limit {
                tokens: None,
                spent: spent.usd + estimate_usd,
                max,
            }));
            let mut nearest = 0.0_f64;
            for limit in limits {
                if limit.spent >= limit.max {
                    let reason = limit.reason(ceiling.dimension);
                    return Ok(match ceiling.action {
                        Action::Block => {
                            let notice = ceiling.message.clone().unwrap_or_else(|| reason.clone());
                            Verdict::Block(reason, notice)
                        }
                        Action::Warn => Verdict::Warn(ceiling.message.clone().unwrap_or(reason)),
                        Action::DowngradeModel => self
                            .cheapest_other_than(call, model)
                            .map_or(Verdict::Pass(warning), Verdict::Downgrade),
                    });
                }
                if limit.max > 0.0 {
                    nearest = nearest.max(limit.spent / limit.max);
                }
            }
            if nearest >= WARN_AT
                && warning.is_none()
                && self.memory().warned.insert((session.to_owned(), index))
            {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a percentage in 80..100"
                )]
                let pct = (nearest * 100.0) as u64;
                warning = Some(format!(
                    "Warning: {} budget at {pct}%",
                    ceiling.dimension.as_str()
                ));
            }
        }
        Ok(Verdict::Pass(warning))
    }

    /// What `estimate` costs at `model`'s price, in dollars.
    fn estimate_usd(&self, call: Call<'_>, model: &str, estimate: (u64, u64)) -> f64 {
        let price = self.price(call, model).unwrap_or_default();
        #[allow(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
        let usd =
            (estimate.0 as f64 * price.input + estimate.1 as f64 * price.output) / 1_000_000.0;
        usd
    }

    /// Whether `session`'s spending is counted in the host's store: when
    /// the store is shared with other processes, or the host relays a
    /// client's requests (a gateway: requests of one conversation may run
    /// at once, and each must see what the others hold). A session the
    /// host runs itself, one call at a time, reads the host's figures.
    fn counts_in_store(state: &State, session: Session<'_>) -> bool {
        state.is_shared() || (session.is_relayed() && state.is_offered())
    }

    /// The verdict on `request`: with the store (see
    /// [`TokenBudget::counts_in_store`]), on what was spent and is held
    /// there, the call's estimate reserved first; else on this process's
    /// figures. A store that refuses (down, and this pack fails closed)
    /// blocks with its line.
    fn judge(&self, state: &State, session: Session<'_>, request: RequestRef<'_>) -> Verdict {
        let estimate = self.estimate(request);
        if !Self::counts_in_store(state, session) {
            return self.verdict(session.id(), &session.usage(), request.model(), estimate);
        }
        // Counted in the store: of the facts, only who the call is for and
        // the prices it needs are read.
        let call_facts = Call::Session(session);
        let call = session.call_id();
        // A request offered again (after a pause) holds what it reserved
        // the first time: given back, then reserved anew.
        if let Some(earlier) = call.and_then(|call| self.held().remove(&call)) {
            let _ = shared::release(state, &earlier);
        }
        let reserved = SourceUsage {
            input_tokens: estimate.0,
            output_tokens: estimate.1,
            cost_usd: self.estimate_usd(call_facts, request.model(), estimate),
        };
        // Priced once: the reservation and the verdict read the same.
        let priced = (estimate, reserved.cost_usd);
        let held = match shared::reserve(
            state,
            session.id(),
            &self.ceilings,
            call_facts.source(),
            &reserved,
        ) {
            Ok(held) => held,
            Err(error) => return Self::unreadable(&error),
        };
        let besides = |_: usize, ceiling: &Ceiling| {
            Ok::<_, std::convert::Infallible>(shared::spent_besides(&held, ceiling))
        };
        let verdict =
            match self.verdict_on(session.id(), call_facts, request.model(), priced, &besides) {
                Ok(verdict) => verdict,
                Err(never) => match never {},
            };
        match (&verdict, call) {
            // It goes: what it holds is settled when it ends.
            (Verdict::Pass(_) | Verdict::Warn(_) | Verdict::Downgrade(_), Some(call)) => {
                let mut held_by = self.held();
                if held_by.len() >= MAX_HELD {
                    held_by.clear();
                }
                held_by.insert(call, held);
            }
            // Blocked, or a host that numbers no calls (so none could be
            // settled): given back now.
            _ => {
                if let Err(error) = shared::release(state, &held) {
                    return Self::unreadable(&error);
                }
            }
        }
        verdict
    }

    /// The block of a call whose spending the store could not count.
    fn unreadable(error: &chimera_plugin_api::sdk::StateError) -> Verdict {
        let reason = format!("token-budget: cannot read what was spent: {error}");
        Verdict::Block(reason.clone(), reason)
    }

    /// Settles what call `call` reserved, now that it ended: to what the
    /// provider reported, given back when nothing was billed, kept (the
    /// estimate is the charge) when what was billed is not known.
    fn settle(&self, state: &State, call: u64, session: Session<'_>) -> Result<(), InterceptError> {
        let Some(held) = self.held().remove(&call) else {
            return Ok(());
        };
        match session.last_call_billing() {
            Billing::Reported => match session.last_call() {
                Some((_, actual)) => shared::settle(state, &held, &actual)?,
                None => shared::release(state, &held)?,
            },
            Billing::Nothing => shared::release(state, &held)?,
            Billing::Unknown => {}
        }
        Ok(())
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cheapest candidate (input + output price per million) other
    /// than `model`; unpriced candidates come last, in their order.
    fn cheapest_other_than(&self, call: Call<'_>, model: &str) -> Option<String> {
        self.candidates
            .iter()
            .filter(|candidate| candidate.as_str() != model)
            .min_by(|a, b| {
                let cost = |m: &str| {
                    self.price(call, m)
                        .map_or(f64::INFINITY, |p| p.input + p.output)
                };
                cost(a).total_cmp(&cost(b))
            })
            .cloned()
    }
}

impl Pack for TokenBudget {
    const NAME: &'static str = "token-budget";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "caps a session's tokens and dollars: block, warn or downgrade the model";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ProviderRequest, SeamKind::ModelResponse];
    type Config = Config;

    fn new(config: Config) -> Result<Self, PackError> {
        Ok(TokenBudget {
            ceilings: config.ceilings()?,
            candidates: config.downgrade_candidates,
            estimate_factor: config.estimate_factor,
            pricing: config.pricing,
            memory: Mutex::new(Memory::default()),
            held: Mutex::new(HashMap::new()),
        })
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        let state = registrar.state();
        let recorder = Arc::clone(&self);
        let store = state.clone();
        registrar.provider_request("budget", move |session, request| {
            match self.judge(&state, session, request) {
                Verdict::Pass(warning) => {
                    if let Some(warning) = warning {
                        session.notice(warning);
                    }
                    Ok(Decision::Allow)
                }
                Verdict::Warn(notice) => {
                    session.notice(notice);
                    Ok(Decision::Allow)
                }
                Verdict::Downgrade(model) => {
                    let mut downgraded = request.to_owned();
                    downgraded.model = model;
                    Ok(Decision::Replace(downgraded))
                }
                Verdict::Block(reason, notice) => {
                    session.notice(notice);
                    Ok(Decision::Block(reason))
                }
            }
        });
        registrar.fail_closed("budget");
        // When a call ends (its reply came; behind a gateway, however its
        // exchange ended), what it reserved is settled to what it cost, so
        // the next call of the conversation — on whichever replica — sees it.
        registrar.observe_model_response("spent", move |session, _reply| match session.call_id() {
            Some(call) if TokenBudget::counts_in_store(&store, session) => {
                recorder.settle(&store, call, session)
            }
            _ => Ok(()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chimera_plugin_api::sdk::SourceUsage;
    use serde_json::json;

    fn gate(config: serde_json::Value) -> Result<TokenBudget, PackError> {
        TokenBudget::new(serde_json::from_value(config).map_err(PackError::from)?)
    }

    fn usage(source: &str, spent: &[(&str, u64, f64)]) -> Usage {
        Usage {
            source: source.to_owned(),
            usage: spent
                .iter()
                .map(|(source, tokens, usd)| {
                    (
                        (*source).to_owned(),
                        SourceUsage {
                            input_tokens: tokens / 2,
                            output_tokens: tokens - tokens / 2,
                            cost_usd: *usd,
                        },
                    )
                })
                .collect(),
            ..Usage::default()
        }
    }

    #[test]
    fn max_tokens_reads_as_the_value_tree_did() {
        let tree = |kwargs: &str| {
            serde_json::from_str::<serde_json::Value>(kwargs)
                .ok()
                .and_then(|kwargs| kwargs.get("max_tokens").and_then(serde_json::Value::as_u64))
                .unwrap_or(0)
        };
        for kwargs in [
            r#"{"max_tokens":512,"temperature":0.5,"stop":["a"],"x":{"y":[1,2]}}"#,
            r#"{"temperature":0.5}"#,
            r#"{"max_tokens":-1}"#,
            r#"{"max_tokens":1.5}"#,
            r#"{"max_tokens":"512"}"#,
            r#"{"max_tokens":null}"#,
            r#"{"max_tokens":18446744073709551615}"#,
            "[512]",
            "",
            "not json",
        ] {
            assert_eq!(max_tokens(kwargs), tree(kwargs), "{kwargs}");
        }
    }

    #[test]
    fn reaching_a_token_cap_counts_as_exceeding_it() {
        let gate = gate(json!({"ceilings": [{"max_total_tokens": 100}]})).unwrap();
        let at_cap = usage("agent", &[("agent", 100, 0.0)]);
        assert_eq!(
            gate.verdict("s", &at_cap, "m", (0, 0)),
            Verdict::Block(
                "session budget exceeded (100/100 tokens)".into(),
                "session budget exceeded (100/100 tokens)".into()
            )
        );
        let half = usage("agent", &[("agent", 50, 0.0)]);
        assert_eq!(gate.verdict("s", &half, "m", (0, 0)), Verdict::Pass(None));
    }

    #[test]
    fn a_source_ceiling_counts_and_checks_only_its_source() {
        let gate = gate(json!({"ceilings": [
            {"dimension": "source_plugin", "match": "gate_retry", "max_total_tokens": 50}
        ]}))
        .unwrap();
        let spent = [("gate_retry", 50, 0.0), ("agent", 9999, 0.0)];
        assert!(matches!(
            gate.verdict("s", &usage("gate_retry", &spent), "m", (0, 0)),
            Verdict::Block(reason, _) if reason == "source_plugin budget exceeded (50/50 tokens)"
        ));
        assert_eq!(
            gate.verdict("s", &usage("agent", &spent), "m", (0, 0)),
            Verdict::Pass(None)
        );
    }

    #[test]
    fn dollars_warnings_and_the_legacy_ceiling_have_their_own_texts() {
        let dollars = gate(json!({"ceilings": [{"max_usd": 0.05}]})).unwrap();
        assert!(matches!(
            dollars.verdict("s", &usage("agent", &[("agent", 10, 0.06)]), "m", (0, 0)),
            Verdict::Block(reason, _) if reason == "session budget exceeded ($0.0600 / $0.0500)"
        ));
        let warn =
            gate(json!({"on_exceed": "warn", "ceilings": [{"max_total_tokens": 10}]})).unwrap();
        assert_eq!(
            warn.verdict("s", &usage("agent", &[("agent", 10, 0.0)]), "m", (0, 0)),
            Verdict::Warn("session budget exceeded (10/10 tokens)".into())
        );
        let legacy = gate(json!({"max_tokens": 10})).unwrap();
        assert!(matches!(
            legacy.verdict("s", &usage("agent", &[("agent", 12, 0.0)]), "m", (0, 0)),
            Verdict::Block(_, notice) if notice == "Token budget exhausted for this session."
        ));
        let near = gate(json!({"ceilings": [{"max_total_tokens": 100}]})).unwrap();
        let at_85 = usage("agent", &[("agent", 85, 0.0)]);
        assert_eq!(
            near.verdict("s", &at_85, "m", (0, 0)),
            Verdict::Pass(Some("Warning: session budget at 85%".into()))
        );
        assert_eq!(
            near.verdict("s", &at_85, "m", (0, 0)),
            Verdict::Pass(None),
            "once"
        );
    }

    #[test]
    fn the_estimate_counts_towards_the_projection() {
        let gate = gate(json!({"ceilings": [{"max_input_tokens": 100}]})).unwrap();
        let spent = usage("agent", &[("agent", 100, 0.0)]); // 50 input
        assert_eq!(
            gate.verdict("s", &spent, "m", (49, 0)),
            Verdict::Pass(Some("Warning: session budget at 99%".into()))
        );
        assert!(matches!(
            gate.verdict("s", &spent, "m", (50, 0)),
            Verdict::Block(reason, _) if reason == "session budget exceeded (input 100/100 tokens)"
        ));
    }

    #[test]
    fn a_downgrade_goes_to_the_cheapest_other_candidate_or_nowhere() {
        let config = json!({
            "on_exceed": "downgrade-model",
            "downgrade_candidates": ["claude-opus-4-7", "claude-haiku-4-5-20251001", "claude-sonnet-4-6"],
            "pricing": {
                "claude-opus-4-7": {"input": 15, "output": 75},
                "claude-haiku-4-5-20251001": {"input": 1, "output": 5},
                "claude-sonnet-4-6": {"input": 3, "output": 15}
            },
            "ceilings": [{"max_total_tokens": 10}]
        });
        let gate = gate(config).unwrap();
        let over = usage("agent", &[("agent", 20, 0.0)]);
        assert_eq!(
            gate.verdict("s", &over, "claude-opus-4-7", (0, 0)),
            Verdict::Downgrade("claude-haiku-4-5-20251001".into())
        );
        let none = self::gate(
            json!({"on_exceed": "downgrade-model", "ceilings": [{"max_total_tokens": 10}]}),
        )
        .unwrap();
        assert_eq!(none.verdict("s", &over, "x", (0, 0)), Verdict::Pass(None));
    }

    #[test]
    fn a_configuration_that_cannot_work_is_refused_in_one_line() {
        let refused = |config: serde_json::Value| gate(config).unwrap_err().to_string();
        assert!(refused(json!({"warning_threshold": 0.5})).contains("unknown field"));
        assert!(
            refused(json!({"ceilings": [{"dimension": "tenant", "max_usd": 1}]}))
                .contains("no tenants")
        );
        assert!(
            refused(json!({"ceilings": [{"window": "session"}]})).contains("at least one limit")
        );
        assert!(
            refused(json!({"ceilings": [{"on_exceed": "explode", "max_usd": 1}]}))
                .contains("unknown variant")
        );
        assert!(
            refused(json!({"ceilings": [{"dimension": "source_plugin", "max_usd": 1}]}))
                .contains("needs `match`")
        );
        assert!(refused(json!({"estimate_factor": 0})).contains("estimate_factor"));
    }
}
