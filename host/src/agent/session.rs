//! The assembled entry point: a conversation across turns.

use super::config::{SessionConfig, Strategy, StreamPolicy};
use super::events::AgentEvent;
use super::events::EventBus;
use super::hooks::Hooks;
use super::permission::{Approver, DenyAll, OperatorAnswer, PermissionPolicy};
use super::usage::{put_member, CallSource, Ledger, PriceTable};
use crate::interception::AuditRecord;
use crate::interception::{
    merge_interceptors, run_chain_spent, ChainContext, ChainOutcome, Interceptor, InterceptorEvent,
    Interceptors, Question, SeamSpec, SessionFacts,
};
use crate::plugins::Registry;
use crate::providers::Provider;
use crate::tools::{ToolSet, Workspace};
use crate::types::{Message, ToolList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An agent session: provider, tools, host chains, a registry handle, and the
/// durable conversation. The plugin chains are merged with the host's at the
/// start of every turn, so a pack loaded or unloaded between turns takes
/// effect on the next one.
pub struct AgentSession {
    pub(crate) facts: SessionFacts,
    pub(crate) history: Vec<Message>,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) tools: ToolSet,
    /// The schemas of `tools`, made once (their JSON rendering is cached too).
    pub(crate) tool_list: ToolList,
    pub(crate) workspace: Workspace,
    pub(crate) host: Option<Arc<Interceptors>>,
    pub(crate) registry: Option<Arc<Registry>>,
    pub(crate) permissions: Option<Arc<dyn PermissionPolicy>>,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) hooks: Hooks,
    pub(crate) bus: EventBus,
    /// The settings the builder chose.
    pub(crate) config: SessionConfig,
    pub(crate) turns: u64,
    /// Whether the current run streams (`config.stream`, unless downgraded).
    pub(crate) streaming: bool,
    /// The packs the session last said it turned streaming off (or left
    /// it on) for: said once, and again only when they change.
    pub(crate) stream_said: Option<Vec<String>>,
    /// Delegations above this session (0: a top-level session).
    pub(crate) depth: u32,
    /// Who the provider call being prepared is for.
    pub(crate) source: CallSource,
    /// Tokens and dollars charged so far, per source.
    pub(crate) ledger: Ledger,
    /// The price table the ledger charges by.
    pub(crate) prices: Arc<PriceTable>,
    /// `prices` as the JSON packs see (rendered once per table: the
    /// default table's rendering is shared by every session).
    pub(crate) prices_json: Arc<str>,
    /// The last provider call's charge, as packs see it (`last_call`):
    /// what a pack adds to a counter shared by other processes.
    pub(crate) last_call: Option<super::usage::LastCall>,
    /// The provider call being prepared, unique in the process (`call` in
    /// the facts): a request the host offers again after a pause or a
    /// compaction keeps it, so a pack counting calls in a shared store
    /// counts each once.
    pub(crate) call_id: u64,
    /// Whether the current turn's chains hold any interceptor (so anything
    /// reads the facts): set as each turn merges its chains; `true` until
    /// the first does.
    pub(crate) facts_read: bool,
    /// What a relayed exchange judges instead of this session's own
    /// request (see [`relay`](super::relay)): the client's history is
    /// hostile, so the session view says `"relayed":true`.
    pub(crate) relay: Option<RelaySurface>,
    /// The first judgement of the exchange that could not be made on a
    /// seam that fails closed (see [`AgentSession::unjudged`]).
    pub(crate) unjudged: std::sync::OnceLock<String>,
}

/// What a relayed request puts in the `provider_request` envelope where the
/// session's own provider would: the model the client asked for and the
/// headers that go upstream.
#[derive(Debug, Clone, Default)]
pub(crate) struct RelaySurface {
    pub(crate) model: String,
    pub(crate) headers: Option<crate::types::Headers>,
}

/// A builder setter: documented, `#[must_use]`, storing its one argument
/// where `body` says.
macro_rules! setter {
    ($(#[$doc:meta])* $name:ident($value:ident: $ty:ty) => |$session:ident| $body:expr) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, $value: $ty) -> Self {
            let $session = &mut self.session;
            $body;
            self
        }
    };
}

/// Builds an [`AgentSession`].
pub struct SessionBuilder {
    session: AgentSession,
}

fn next_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    // The process id asked once: `std::process::id` is a system call, and
    // the gateway builds a session per request.
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    // Joined rather than formatted (a session a request: `format!` was
    // ~700 instructions of it).
    let mut pid = itoa::Buffer::new();
    let mut next = itoa::Buffer::new();
    [
        "session-",
        pid.format(*PID.get_or_init(std::process::id)),
        "-",
        next.format(NEXT.fetch_add(1, Ordering::Relaxed)),
    ]
    .concat()
}

impl SessionBuilder {
    /// The system prompt (the first, durable message).
    #[must_use]
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.session
            .history
            .retain(|m| m.role != crate::types::Role::System);
        self.session.history.insert(0, Message::system(text));
        self
    }

    setter!(
        /// The tools offered (default: none).
        tools(tools: ToolSet) => |session| session.tools = tools
    );
    setter!(
        /// Host chains, merged after the plugin chains every turn.
        interceptors(host: Arc<Interceptors>) => |session| session.host = Some(host)
    );
    setter!(
        /// The plugin registry to merge from at the start of every turn.
        registry(registry: Arc<Registry>) => |session| session.registry = Some(registry)
    );
    setter!(
        /// The permission policy (default: none, every call allowed).
        permissions(policy: Arc<dyn PermissionPolicy>) => |session| session.permissions = Some(policy)
    );
    setter!(
        /// Who answers `Ask` (default: deny).
        approver(approver: Arc<dyn Approver>) => |session| session.approver = approver
    );
    setter!(
        /// Lifecycle hooks.
        hooks(hooks: Hooks) => |session| session.hooks = hooks
    );
    setter!(
        /// The event bus to publish on.
        events(bus: EventBus) => |session| session.bus = bus
    );
    setter!(
        /// Prices provider calls by this table (default: [`PriceTable::default`]).
        prices(prices: Arc<PriceTable>) => |session| session.prices = prices
    );
    setter!(
        /// All the settings at once ([`SessionConfig`]; the setters below
        /// change one each).
        config(config: SessionConfig) => |session| session.config = config
    );
    setter!(
        /// Provider calls allowed per turn (default 25).
        max_steps(steps: usize) => |session| session.config.max_steps = steps
    );
    setter!(
        /// Successful tool output longer than this many bytes is truncated
        /// in the transcript (default 30 000).
        output_cap(bytes: usize) => |session| session.config.output_cap = bytes
    );
    setter!(
        /// Stream replies: text is published (`assistant_delta`) as it arrives.
        stream(on: bool) => |session| session.config.stream = on
    );
    setter!(
        /// What streaming does when a pack gates whole replies but not
        /// streamed text (default: [`StreamPolicy::Downgrade`]).
        stream_policy(policy: StreamPolicy) => |session| session.config.stream_policy = policy
    );
    setter!(
        /// Keeps the last `turns` turns whole when a context-window gate
        /// asks for a compaction (default
        /// [`DEFAULT_KEEP_TURNS`](super::DEFAULT_KEEP_TURNS); at least 1).
        compaction_keep_turns(turns: usize) => |session| session.config.compaction.keep_turns = turns.max(1)
    );
    setter!(
        /// The loop each turn runs (default: [`Strategy::React`]). Every
        /// strategy calls the model through the same seams, settles every
        /// tool call through the same gate, and passes its final answer
        /// through the `output` seam.
        strategy(strategy: Strategy) => |session| session.config.strategy = strategy
    );

    /// A sub-agent's session: `depth` delegations below the top level.
    pub(crate) fn depth(mut self, depth: u32) -> Self {
        self.session.depth = depth;
        self
    }

    /// The session id packs key their state by (default: unique in the process).
    #[must_use]
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session.facts.session_id = id.into();
        self
    }

    /// The session.
    #[must_use]
    pub fn build(mut self) -> AgentSession {
        let tool_list = ToolList::new(self.session.tools.schemas());
        // Rendered now, once per session, rather than inside the first turn
        // that runs a `provider_request` interceptor.
        let _ = tool_list.json();
        self.session.tool_list = tool_list;
        let (default_prices, default_json) = default_prices();
        self.session.prices_json = if Arc::ptr_eq(&self.session.prices, default_prices) {
            Arc::clone(default_json)
        } else {
            serde_json::to_string(&*self.session.prices)
                .unwrap_or_else(|_| "{}".to_owned())
                .into()
        };
        // The facts packs see are not rendered here: every chain runs in a
        // turn (or an exchange), which brings them up to date first when an
        // interceptor runs in it; rendered now, they were thrown away
        // unread on every gateway request.
        self.session
    }
}

impl AgentSession {
    /// Starts building a session on `provider`, with tools confined to `workspace`.
    pub fn builder(provider: Arc<dyn Provider>, workspace: Workspace) -> SessionBuilder {
        SessionBuilder {
            session: AgentSession {
                facts: SessionFacts::new(next_session_id()),
                history: Vec::new(),
                provider,
                tools: ToolSet::new(),
                tool_list: ToolList::default(),
                workspace,
                host: None,
                registry: None,
                permissions: None,
                approver: Arc::new(DenyAll),
                hooks: Hooks::new(),
                bus: EventBus::new(),
                config: SessionConfig::default(),
                turns: 0,
                streaming: false,
                stream_said: None,
                depth: 0,
                source: CallSource::Agent,
                ledger: Ledger::default(),
                prices: Arc::clone(&default_prices().0),
                prices_json: Arc::from(""),
                last_call: None,
                call_id: 0,
                facts_read: true,
                relay: None,
                unjudged: std::sync::OnceLock::new(),
            },
        }
    }

    /// The durable conversation.
    #[must_use]
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The loop each turn runs.
    #[must_use]
    pub fn strategy(&self) -> &Strategy {
        &self.config.strategy
    }

    /// The event bus.
    #[must_use]
    pub fn events(&self) -> &EventBus {
        &self.bus
    }

    /// Tokens and dollars charged so far, per source.
    #[must_use]
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Brings what packs see in the session facts up to date: the source
    /// of the next provider call, the model it goes to by default, the
    /// session's charges and the price table.
    pub(crate) fn refresh_facts(&mut self) {
        if !self.facts_read {
            // No interceptor runs in this turn: nothing reads them (the
            // next turn with one refreshes them before its first chain).
            return;
        }
        self.facts.gate_retry = self.source == CallSource::GateRetry;
        let model = self
            .relay
            .as_ref()
            .map_or_else(|| self.provider.model(), |r| r.model.as_str());
        let facts = FactsView {
            call: self.call_id,
            cost_usd: self.ledger.cost_usd(),
            last_call: self.last_call.as_ref(),
            model,
            relayed: self.relay.is_some(),
            source: self.source.as_str(),
            usage: &self.ledger,
            prices: &self.prices_json,
        };
        // The price table as it is, and about as much again for the rest
        // (a call's number and cost, the last call, the charges).
        let room = self.prices_json.len() + 384;
        self.facts
            .write_extension(room, |out| write_facts(&facts, out));
    }

    /// The session facts packs see.
    #[must_use]
    pub fn facts(&self) -> &SessionFacts {
        &self.facts
    }

    /// The workspace.
    #[must_use]
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The provider.
    #[must_use]
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// Runs `chain` for this conversation, on a seam whose interceptors
    /// cannot ask the operator (every seam but `tool_call` and
    /// `provider_request`). Its events reach the bus only when someone
    /// listens; otherwise none is built.
    pub(crate) fn run_seam<S: SeamSpec>(
        &self,
        chain: &[Interceptor<S>],
        lead: &S::Lead,
        value: &S::Value,
    ) -> ChainOutcome<S::Value> {
        let outcome = self.run_chain(chain, lead, value, &|_| false);
        self.publish_notices::<S>(&outcome);
        outcome
    }

    /// Runs `chain` (or what is left of it) once, its events and audit
    /// records going to the bus when someone listens, answering the
    /// retries of the interceptors `spent` names by their exhaustion
    /// outcome. Its notices are the caller's to publish.
    pub(crate) fn run_chain<S: SeamSpec>(
        &self,
        chain: &[Interceptor<S>],
        lead: &S::Lead,
        value: &S::Value,
        spent: &dyn Fn(&str) -> bool,
    ) -> ChainOutcome<S::Value> {
        let sink = |event| self.bus.publish(AgentEvent::Interceptor(event));
        let cx = ChainContext {
            session: &self.facts,
            events: self
                .bus
                .is_listened()
                .then_some(&sink as &dyn Fn(InterceptorEvent)),
        };
        let audit_sink = |record| self.bus.publish_audit(record);
        let audit = self
            .bus
            .is_audited()
            .then_some(&audit_sink as &dyn Fn(AuditRecord));
        let outcome = run_chain_spent(chain, lead, value, &cx, audit, spent);
        if outcome.unjudged {
            if let Some(reason) = &outcome.blocked {
                let _ = self.unjudged.set(reason.clone());
            }
        }
        outcome
    }

    /// Why a judgement of this exchange could not be made, when one could
    /// not on a seam that fails closed (an interceptor's error, a pack
    /// unavailable or quarantined): what it guarded was held back, and a
    /// server answers the request as unavailable rather than as refused by
    /// policy. Cleared when the next exchange begins.
    #[must_use]
    pub fn unjudged(&self) -> Option<&str> {
        self.unjudged.get().map(String::as_str)
    }

    /// One `notice` event per notice of `outcome`.
    pub(crate) fn publish_notices<S: SeamSpec>(&self, outcome: &ChainOutcome<S::Value>) {
        for notice in &outcome.notices {
            self.bus.emit(|| AgentEvent::Notice {
                seam: S::NAME,
                interceptor: notice.interceptor.clone(),
                text: notice.text.clone(),
            });
        }
    }

    /// [`run_seam`](Self::run_seam) on a seam whose interceptors may ask
    /// the operator (`tool_call`, `provider_request`): each question is put
    /// to the approver (waited for asynchronously), then the chain resumes
    /// after the asking interceptor with the value the answer leaves.
    pub(crate) async fn run_asking_seam<S: SeamSpec>(
        &self,
        chain: &[Interceptor<S>],
        lead: &S::Lead,
        value: &S::Value,
    ) -> ChainOutcome<S::Value> {
        let spent = |_: &str| false;
        let mut outcome = self.run_chain(chain, lead, value, &spent);
        let mut start = 0;
        while let Some(asked) = outcome.ask.take() {
            let (index, interceptor, question) = *asked;
            let current = outcome.replaced.take();
            let at = start + index;
            let answer = self
                .ask_operator::<S>(
                    &interceptor,
                    lead,
                    current.as_ref().unwrap_or(value),
                    &question,
                )
                .await;
            let resumed = match answer {
                Err(reason) => {
                    outcome.replaced = current;
                    outcome.blocked = Some(reason);
                    break;
                }
                Ok(None) => current,
                Ok(Some(edited)) => Some(edited),
            };
            start = at + 1;
            let rest = &chain[start..];
            let mut next = self.run_chain(rest, lead, resumed.as_ref().unwrap_or(value), &spent);
            if next.replaced.is_none() {
                next.replaced = resumed;
            }
            let mut notices = std::mem::take(&mut outcome.notices);
            notices.append(&mut next.notices);
            next.notices = notices;
            // The shortest deadline of the whole chain, before the ask or after.
            if let Some(earlier) = outcome.deadline.take() {
                if next
                    .deadline
                    .as_ref()
                    .is_none_or(|later| earlier.1 <= later.1)
                {
                    next.deadline = Some(earlier);
                }
            }
            outcome = next;
        }
        self.publish_notices::<S>(&outcome);
        outcome
    }

    /// Puts `question` to the operator. `Ok(None)`: allowed as it is;
    /// `Ok(Some(v))`: edited into `v`; `Err(reason)`: rejected.
    async fn ask_operator<S: SeamSpec>(
        &self,
        interceptor: &str,
        lead: &S::Lead,
        value: &S::Value,
        question: &Question,
    ) -> Result<Option<S::Value>, String> {
        let (tool, _) = S::tool_ids(lead, value);
        let subject = if tool.is_empty() {
            "provider request".to_owned()
        } else {
            tool.to_owned()
        };
        self.bus.emit(|| AgentEvent::ApprovalRequested {
            seam: S::NAME,
            interceptor: interceptor.to_owned(),
            subject: subject.clone(),
            prompt: question.prompt.clone(),
            choices: question.choices.clone(),
        });
        let answer = self.approver.answer_async(&subject, question).await;
        self.bus.emit(|| AgentEvent::ApprovalAnswered {
            seam: S::NAME,
            interceptor: interceptor.to_owned(),
            answer: answer.as_str(),
            subject,
            source: self.approver.source().to_owned(),
        });
        match answer {
            OperatorAnswer::Allow => Ok(None),
            OperatorAnswer::Reject => Err(format!(
                "{interceptor}: the operator rejected it ({})",
                question.prompt
            )),
            OperatorAnswer::Edit(payload) => S::edited(value, &payload)
                .map(Some)
                .map_err(|error| format!("{interceptor}: {error}")),
        }
    }

    /// The bundle a turn starting now would run with: the plugin chains (load
    /// order) merged before the host chains. `None` when there are none —
    /// the loop then behaves exactly as a host without interception.
    #[must_use]
    pub fn effective_interceptors(&self) -> Option<Arc<Interceptors>> {
        // The registry's chains as they stand, built once per change of
        // the packs and shared (not a bundle of its own built and dropped
        // on every turn; a gateway starts a turn on every request). A
        // bundle is never changed once built: a pack loaded or swapped
        // during the turn shows in the next one, as before.
        let plugins = self.registry.as_ref().map(|r| r.current());
        merge_interceptors(&[plugins.as_ref(), self.host.as_ref()])
    }
}

/// The default price table and its JSON, made once for the process: a
/// session that keeps the default (every gateway session) shares them.
fn default_prices() -> &'static (Arc<PriceTable>, Arc<str>) {
    static DEFAULT: std::sync::OnceLock<(Arc<PriceTable>, Arc<str>)> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| {
        let table = PriceTable::default();
        let json = serde_json::to_string(&table).unwrap_or_else(|_| "{}".to_owned());
        (Arc::new(table), json.into())
    })
}

/// What the session's extension members say (see [`render_facts`]).
struct FactsView<'a> {
    call: u64,
    cost_usd: f64,
    last_call: Option<&'a super::usage::LastCall>,
    model: &'a str,
    relayed: bool,
    source: &'a str,
    usage: &'a Ledger,
    prices: &'a str,
}

/// Appends the session's extension members, `{…}` without its braces, to
/// `out`: written directly in the order packs have always seen them (a
/// JSON object's keys sorted, then the prices), with no value tree and no
/// formatter.
fn write_facts(facts: &FactsView<'_>, out: &mut Vec<u8>) {
    put_member(out, true, "call", &facts.call);
    put_member(out, false, "cost_usd", &facts.cost_usd);
    put_member(out, false, "last_call", &facts.last_call);
    put_member(out, false, "model", facts.model);
    if facts.relayed {
        put_member(out, false, "relayed", &true);
    }
    put_member(out, false, "source", facts.source);
    out.extend_from_slice(b",\"usage\":");
    facts.usage.write_json(out);
    out.extend_from_slice(b",\"prices\":");
    out.extend_from_slice(facts.prices.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::{next_session_id, write_facts, FactsView};
    use crate::agent::usage::{CallSource, Ledger, PriceTable};
    use serde_json::json;

    #[test]
    fn a_session_id_names_the_process_and_counts_up() {
        let (first, second) = (next_session_id(), next_session_id());
        let pid = std::process::id();
        let count = |id: &str| -> u64 {
            let rest = id.strip_prefix(&format!("session-{pid}-")).unwrap();
            rest.parse().unwrap()
        };
        assert!(count(&second) > count(&first), "{first} {second}");
    }

    #[test]
    fn the_facts_read_as_the_value_tree_they_replace_rendered() {
        let mut ledger = Ledger::default();
        ledger.charge(CallSource::Agent, "gpt-4o", 3, 4, &PriceTable::default());
        ledger.charge(
            CallSource::GateRetry,
            "gpt-4o",
            5,
            6,
            &PriceTable::default(),
        );
        let usage = ledger.to_json();
        let last = super::super::usage::LastCall {
            billed: Some("reported"),
            charged_to: CallSource::GateRetry,
            cost_usd: 0.25,
            input_tokens: 3,
            output_tokens: 4,
        };
        for (relayed, last_call, cost) in [
            (false, None, 0.0),
            (true, Some(&last), 0.1 + 0.2),
            (true, None, 1e-7),
        ] {
            let facts = FactsView {
                call: 7,
                cost_usd: cost,
                last_call,
                model: "gpt-\"quoted\"\u{e9}",
                relayed,
                source: "agent",
                usage: &ledger,
                prices: r#"{"m":{"input":1.0,"output":2.0}}"#,
            };
            let mut old = json!({
                "source": facts.source, "model": facts.model, "cost_usd": cost,
                "usage": usage, "last_call": last_call.map(|last| json!({
                    "billed": last.billed, "charged_to": last.charged_to.as_str(),
                    "cost_usd": last.cost_usd, "input_tokens": last.input_tokens,
                    "output_tokens": last.output_tokens,
                })), "call": 7,
            });
            if relayed {
                old["relayed"] = json!(true);
            }
            let old = old.to_string();
            let expected = format!("{},\"prices\":{}", &old[1..old.len() - 1], facts.prices);
            let mut written = Vec::new();
            write_facts(&facts, &mut written);
            assert_eq!(String::from_utf8(written).unwrap(), expected);
        }
    }
}
