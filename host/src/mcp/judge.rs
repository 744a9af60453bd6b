//! Judging an MCP message by the packs' chains, on the loop's seams: a
//! call by `tool_call` (then the permission policy), what a model reads of
//! an answer by `tool_result` (the call leading), and a tool listing (each
//! tool's name, descriptions and schema texts, and a server's
//! `instructions`) by `provider_request`, as the relayed request a model
//! would be sent with those tools.
//!
//! A verdict is edits on the message's own bytes: what was judged is what
//! is forwarded, and a change the guard cannot write back where the text
//! lives withholds the message.

use super::view::View;
use crate::agent::{EventBus, PermissionPolicy};
use crate::audit::{AuditLog, Exchange};
use crate::interception::{
    run_chain_spent, ChainContext, ChainOutcome, Interceptor, Interceptors, ProviderRequestSeam,
    SeamSpec, SessionFacts, ToolResultSeam,
};
use crate::jsondoc::{Kind, Node, Splice};
use crate::plugins::Registry;
use crate::types::{Message, ProviderRequest, ToolCall, ToolList, ToolResult, ToolSchema};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The session the chains run for, and the audit lines name: one per
/// guard.
pub(super) const SESSION: &str = "mcp-guard";

/// Where one exchange's decisions go: the audit log, as one exchange (its
/// lines name the JSON-RPC id), when the guard keeps one.
#[derive(Clone)]
pub(super) struct Audited(Option<(EventBus, AuditLog)>);

impl Audited {
    /// The exchange `id` in `audit`.
    pub(super) fn of(audit: Option<&AuditLog>, id: &str) -> Audited {
        Audited(audit.map(|audit| {
            let bus = EventBus::new();
            audit.attach_exchange(
                &bus,
                Exchange {
                    request: id.to_owned(),
                    session: SESSION.to_owned(),
                    turn: 0,
                },
            );
            (bus, audit.clone())
        }))
    }

    /// `chain` run over `value` for `facts`, every decision audited.
    pub(super) fn run<S: SeamSpec>(
        &self,
        chain: &[Interceptor<S>],
        lead: &S::Lead,
        value: &S::Value,
        facts: &SessionFacts,
    ) -> ChainOutcome<S::Value> {
        let cx = ChainContext {
            session: facts,
            events: None,
        };
        match &self.0 {
            Some((bus, _)) => {
                let sink = |record| bus.publish_audit(record);
                run_chain_spent(chain, lead, value, &cx, Some(&sink), &|_| false)
            }
            None => run_chain_spent(chain, lead, value, &cx, None, &|_| false),
        }
    }

    /// Records a decision the guard made itself (a drifted tool).
    pub(super) fn record(&self, record: crate::interception::AuditRecord) {
        if let Some((bus, _)) = &self.0 {
            bus.publish_audit(record);
        }
    }

    /// The exchange is over: its lines go to the log.
    pub(super) fn done(&self) {
        if let Some((_, audit)) = &self.0 {
            audit.write_out();
        }
    }
}

/// What the guard applies beside the packs: the permission policy (after
/// the `tool_call` chain, as in the loop; a call it does not allow is
/// refused, since there is no operator to ask), the server's pinned tools
/// and the audit log.
#[derive(Clone)]
pub struct Rules {
    /// Which calls may go to the server (`--deny TOOL`).
    pub policy: Arc<dyn PermissionPolicy>,
    /// The server's tools as `chimera mcp pin` recorded them, when it was
    /// pinned: a listed tool that is not so is withheld.
    pub pins: Option<super::pin::PinnedServer>,
    /// Where every decision is recorded (`--audit FILE`).
    pub audit: Option<AuditLog>,
}

/// A request the client sent and the server has not answered: its
/// method, the call its answer is judged as the result of (a synthetic
/// `mcp:METHOD` call for a method other than `tools/call`), and where its
/// decisions are audited.
pub(super) struct Pending {
    pub(super) method: String,
    /// The request is on the 2026-07-28 protocol: the guard's own results
    /// are tagged as that revision asks.
    pub(super) modern: bool,
    pub(super) call: ToolCall,
    pub(super) audited: Audited,
}

/// What judges messages, whatever carries them: the packs, the rules,
/// and the tools the last listing withheld.
pub(super) struct Judging {
    pub(super) registry: Arc<Registry>,
    pub(super) rules: Rules,
    /// Tools the last listing withheld, by name, with why.
    pub(super) withheld: Mutex<HashMap<String, String>>,
}

impl Judging {
    /// Judging by `registry`'s chains and `rules`.
    pub(super) fn new(registry: &Arc<Registry>, rules: Rules) -> Judging {
        Judging {
            registry: Arc::clone(registry),
            rules,
            withheld: Mutex::default(),
        }
    }
}

/// `mutex` locked, whatever a panicking holder left.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What judging made of a message.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Forward it as it is.
    Pass,
    /// Forward it with these edits.
    Edited(Splice),
    /// Do not forward it: why.
    Withheld(String),
}

/// `view` of a message judged on `tool_result` with `call` leading (an
/// error answer's view as the call's error): its one text, and when the
/// packs change it, each text again where it lives.
pub(super) fn judge_view(
    audited: &Audited,
    chain: &[Interceptor<ToolResultSeam>],
    call: &ToolCall,
    view: &View,
    failed: bool,
) -> Verdict {
    if chain.is_empty() || view.is_empty() {
        return Verdict::Pass;
    }
    let facts = SessionFacts::new(SESSION);
    let judge = |text: &str| -> Result<Option<String>, String> {
        let seen = if failed {
            ToolResult::err(text)
        } else {
            ToolResult::ok(text)
        };
        let outcome = audited.run::<ToolResultSeam>(chain, call, &seen, &facts);
        match (outcome.blocked, outcome.replaced) {
            (Some(reason), _) => Err(format!("Blocked by interceptor: {reason}")),
            (None, Some(new)) => Ok(Some(if failed {
                new.error.unwrap_or(new.output)
            } else {
                new.output
            })),
            (None, None) => Ok(None),
        }
    };
    let whole = match judge(&view.text()) {
        Err(reason) => return Verdict::Withheld(reason),
        Ok(None) => return Verdict::Pass,
        Ok(Some(whole)) => whole,
    };
    // One text: the judged text is its new text, if the labels around it
    // stand.
    let texts = match view.single() {
        Some((_, before, after))
            if whole.len() >= before.len() + after.len()
                && whole.starts_with(&before)
                && whole.ends_with(&after) =>
        {
            vec![Some(
                whole[before.len()..whole.len() - after.len()].to_owned(),
            )]
        }
        _ => match rejudged(view, &whole, &judge) {
            Ok(texts) => texts,
            Err(reason) => return Verdict::Withheld(reason),
        },
    };
    let mut splice = Splice::new();
    match view.write(&texts, &mut splice) {
        Ok(()) => Verdict::Edited(splice),
        Err(reason) => Verdict::Withheld(reason),
    }
}

/// Each judged text of `view` judged alone, when the packs changed the
/// whole into `whole`: kept when the texts so changed, joined, are
/// `whole` (the packs' own verdict on the message) or pass the packs
/// unchanged (what is forwarded is what was judged).
fn rejudged(
    view: &View,
    whole: &str,
    judge: &dyn Fn(&str) -> Result<Option<String>, String>,
) -> Result<Vec<Option<String>>, String> {
    let mut texts = Vec::new();
    for text in view.judged_texts() {
        texts.push(judge(text)?);
    }
    let mut new = texts.iter();
    let joined: String = view
        .pieces
        .iter()
        .map(|piece| match piece {
            super::view::Piece::Literal(text) => text.clone(),
            piece => new
                .next()
                .cloned()
                .flatten()
                .unwrap_or_else(|| piece.text().to_owned()),
        })
        .collect();
    if joined == whole {
        return Ok(texts);
    }
    match judge(&joined)? {
        None => Ok(texts),
        Some(_) => Err(
            "Blocked by interceptor: the packs changed this message in a way the \
                        guard cannot write back into its items"
                .to_owned(),
        ),
    }
}

/// The facts a listing is judged with: a relayed call for the agent (a
/// content gate reads every message and every tool of it as new input).
fn listing_facts() -> SessionFacts {
    let mut facts = SessionFacts::new(SESSION);
    facts.set_extension_members(r#""source":"agent","relayed":true"#);
    facts
}

/// The texts of a tool a model reads, each with the span it is written
/// back at (`None`: a schema's property name, read but not rewritten):
/// its description and title, then every string of its schemas but their
/// keywords' values, and their properties' names.
fn listing_texts(src: &[u8], tool: &Node) -> Vec<(Option<std::ops::Range<usize>>, String)> {
    let mut texts = Vec::new();
    for name in ["description", "title"] {
        if let Some(node) = tool.get(src, name) {
            if let Some(text) = node.text(src) {
                texts.push((Some(node.span.clone()), text.into_owned()));
            }
        }
    }
    if let Some(title) = tool
        .get(src, "annotations")
        .and_then(|a| a.get(src, "title"))
    {
        if let Some(text) = title.text(src) {
            texts.push((Some(title.span.clone()), text.into_owned()));
        }
    }
    for schema in ["inputSchema", "outputSchema"] {
        if let Some(node) = tool.get(src, schema) {
            schema_texts(src, node, false, &mut texts);
        }
    }
    texts
}

/// A schema's keyword values that are no text: names of types, formats,
/// references, patterns.
const SCHEMA_KEYWORDS: &[&str] = &[
    "type",
    "$schema",
    "$ref",
    "$id",
    "$anchor",
    "format",
    "pattern",
    "required",
    "contentEncoding",
    "contentMediaType",
];

fn schema_texts(
    src: &[u8],
    node: &Node,
    names: bool,
    into: &mut Vec<(Option<std::ops::Range<usize>>, String)>,
) {
    match &node.kind {
        Kind::String { .. } => {
            if let Some(text) = node.text(src) {
                into.push((Some(node.span.clone()), text.into_owned()));
            }
        }
        Kind::Array(items) => items.iter().for_each(|n| schema_texts(src, n, false, into)),
        Kind::Object(members) => {
            for (key, value) in members {
                if names {
                    into.push((None, key.text(src).into_owned()));
                }
                if SCHEMA_KEYWORDS.iter().any(|k| key.is(src, k)) {
                    continue;
                }
                let properties = key.is(src, "properties") || key.is(src, "patternProperties");
                schema_texts(src, value, properties, into);
            }
        }
        _ => {}
    }
}

/// One listed tool (a member of a `tools/list` answer) judged on
/// `provider_request` as the relayed request offering it, its texts as
/// the request's messages: a block, or a question whose default is not
/// allow, withholds it; a change to its texts is written where they live.
pub(super) fn judge_listed_tool(
    audited: &Audited,
    chains: &Interceptors,
    src: &[u8],
    tool: &Node,
) -> Verdict {
    let name = tool
        .get(src, "name")
        .and_then(|n| n.text(src))
        .unwrap_or_default()
        .into_owned();
    let texts = listing_texts(src, tool);
    let description = tool
        .get(src, "description")
        .and_then(|d| d.text(src))
        .unwrap_or_default()
        .into_owned();
    let parameters = tool
        .get(src, "inputSchema")
        .map_or(serde_json::Value::Null, |s| s.to_value(src));
    let schema = ToolSchema {
        name: name.clone(),
        description,
        parameters,
    };
    judge_listing(audited, chains, &texts, vec![schema])
}

/// A server's `instructions` judged as the listing of no tool.
pub(super) fn judge_instructions(
    audited: &Audited,
    chains: &Interceptors,
    src: &[u8],
    instructions: &Node,
) -> Verdict {
    let Some(text) = instructions.text(src) else {
        return Verdict::Pass;
    };
    let texts = vec![(Some(instructions.span.clone()), text.into_owned())];
    judge_listing(audited, chains, &texts, Vec::new())
}

fn judge_listing(
    audited: &Audited,
    chains: &Interceptors,
    texts: &[(Option<std::ops::Range<usize>>, String)],
    tools: Vec<ToolSchema>,
) -> Verdict {
    if chains.provider_request.is_empty() || (texts.is_empty() && tools.is_empty()) {
        return Verdict::Pass;
    }
    let request = ProviderRequest {
        model: String::new(),
        messages: texts
            .iter()
            .map(|(_, t)| Message::system(t.clone()))
            .collect(),
        tools: ToolList::new(tools),
        kwargs: serde_json::Map::new(),
        headers: None,
    };
    let outcome = audited.run::<ProviderRequestSeam>(
        &chains.provider_request,
        &(),
        &request,
        &listing_facts(),
    );
    if let Some(reason) = outcome.blocked {
        return Verdict::Withheld(format!("Blocked by interceptor: {reason}"));
    }
    if let Some(ask) = outcome.ask {
        let (_, by, question) = *ask;
        if question.default != "allow" {
            return Verdict::Withheld(format!(
                "{by} asks an operator ({}), and the guard has none",
                question.prompt
            ));
        }
    }
    let Some(judged) = outcome.replaced else {
        return Verdict::Pass;
    };
    let same_tools = judged.tools.json() == request.tools.json();
    if !same_tools || judged.messages.len() != request.messages.len() {
        return Verdict::Withheld(
            "the packs changed the tool itself, which the guard cannot write back".to_owned(),
        );
    }
    let mut splice = Splice::new();
    for ((span, old), new) in texts.iter().zip(&judged.messages) {
        if new.content == *old {
            continue;
        }
        let Some(span) = span else {
            return Verdict::Withheld("the packs changed a property name of its schema".to_owned());
        };
        splice.replace(span.clone(), crate::jsondoc::string_literal(&new.content));
    }
    if splice.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Edited(splice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interception::{InterceptDecision, Interceptor};
    use crate::jsondoc::{parse, Limits};

    /// `result` judged by a host `tool_result` interceptor `f` over each
    /// text it is shown: the verdict, and the message as forwarded.
    fn judged(
        result: &str,
        f: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> (Verdict, Option<String>) {
        let chain = vec![Interceptor::tool_result(
            "t",
            move |_, seen: &ToolResult| {
                Ok(match f(&seen.output) {
                    Some(output) => InterceptDecision::Replace(ToolResult::ok(output)),
                    None => InterceptDecision::Allow,
                })
            },
        )];
        let src = result.as_bytes();
        let root = parse(src, &Limits::default()).unwrap();
        let view = View::tool_result(src, &root);
        let call = ToolCall::new("1", "read", serde_json::json!({}));
        let verdict = judge_view(&Audited(None), &chain, &call, &view, false);
        let forwarded = match &verdict {
            Verdict::Edited(splice) => {
                Some(String::from_utf8(splice.render(src).unwrap()).unwrap())
            }
            _ => None,
        };
        (verdict, forwarded)
    }

    #[test]
    fn a_change_to_one_of_several_texts_is_written_where_each_lives() {
        let result = r#"{"content":[{"type":"text","text":"key sk-1"}],"structuredContent":{"k":"key sk-1"}}"#;
        let (_, forwarded) = judged(result, |text| {
            text.contains("sk-1").then(|| text.replace("sk-1", "[x]"))
        });
        assert_eq!(
            forwarded.as_deref(),
            Some(
                r#"{"content":[{"type":"text","text":"key [x]"}],"structuredContent":{"k":"key [x]"}}"#
            )
        );
    }

    #[test]
    fn a_change_that_cannot_be_written_back_withholds_the_message() {
        // Whatever it is shown becomes one word: the pieces so changed,
        // joined, are neither the packs' verdict on the whole nor passed
        // unchanged by them.
        let result = r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#;
        let (verdict, _) = judged(result, |text| (text != "gone").then(|| "gone".to_owned()));
        assert!(matches!(verdict, Verdict::Withheld(_)), "{verdict:?}");
        // One text is written back directly.
        let (_, forwarded) = judged(r#"{"content":[{"type":"text","text":"a"}]}"#, |text| {
            (text != "gone").then(|| "gone".to_owned())
        });
        assert_eq!(
            forwarded.as_deref(),
            Some(r#"{"content":[{"type":"text","text":"gone"}]}"#)
        );
    }
}
