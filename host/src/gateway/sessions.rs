//! Conversations the gateway keeps between requests, so per-conversation
//! pack state (a token budget, a turn count) spans a conversation the
//! client sends one request at a time.
//!
//! A request belongs to a conversation by, in order:
//!
//! | the request carries | its conversation (the session id packs see) |
//! |---|---|
//! | `x-chimera-session: NAME` and an API key | `key-<hash>/NAME`: that key's conversation NAME |
//! | `x-chimera-session: NAME`, no API key | `session/NAME` |
//! | an API key only | `key-<hash>`: one conversation for everything sent with that key |
//! | neither | the request's own id: nothing carries over |
//!
//! `<hash>` is the first 16 hex digits of the key's SHA-256; the key
//! itself is never kept. A name is 1–128 letters, digits, `.`, `_`, `:`
//! or `-`. Per conversation the gateway keeps its turn count and its
//! charges (tokens and dollars by source): what `token-budget` and the
//! packs' own per-session state key on. Per key, with no session header,
//! that is the whole key's traffic. Each request resumes the conversation
//! as it stands and adds what it did when it ends, however it ends (a
//! client that leaves mid-stream is charged what the upstream reported
//! until then), so concurrent requests of one conversation run at once
//! and all count. Past the cap, the least recently used sixteenth of the
//! conversations is forgotten.
//!
//! A client names its conversations, so a per-conversation budget is only
//! as strong as its naming: with `session_scope = "key"` (`--session-scope
//! key`) the header is ignored and every request of a key is one
//! conversation, a budget no client steps out of by naming a new one.

use crate::agent::{AgentSession, CallEnd, Carried, Exchange};
use crate::audit::AuditLog;
use crate::config::SessionScope;
use crate::providers::Usage;
use axum::http::HeaderMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The header naming a conversation.
pub const SESSION_HEADER: &str = "x-chimera-session";

/// The most conversations kept by default.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// The conversation a request belongs to (see the module docs): `None`
/// for a request of its own.
///
/// # Errors
///
/// The one line to answer 400 with, when the header is not a name.
pub(super) fn conversation(
    headers: &HeaderMap,
    key_hash: Option<&str>,
    by: SessionScope,
) -> Result<Option<String>, String> {
    let scope = key_hash.map(|hash| ["key-", super::keys::key_tag(hash)].concat());
    let Some(name) = headers
        .get(SESSION_HEADER)
        .filter(|_| by == SessionScope::Header)
    else {
        return Ok(scope);
    };
    let name = name
        .to_str()
        .ok()
        .filter(|name| {
            (1..=128).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".:_-".contains(&b))
        })
        .ok_or_else(|| {
            format!(
                "{SESSION_HEADER}: a session name is 1-128 letters, digits, '.', '_', ':' or '-'"
            )
        })?;
    Ok(Some(match scope {
        Some(scope) => [scope.as_str(), "/", name].concat(),
        None => ["session/", name].concat(),
    }))
}

/// A conversation as kept: what it carries, and when it was last used.
struct Kept {
    carried: Carried,
    used: u64,
}

/// Every conversation kept, up to a cap.
pub(super) struct Conversations {
    kept: Mutex<(HashMap<String, Kept>, u64)>,
    cap: usize,
}

impl Conversations {
    /// Keeps at most `cap` conversations (at least one).
    pub(super) fn new(cap: usize) -> Self {
        Conversations {
            kept: Mutex::new((HashMap::new(), 0)),
            cap: cap.max(1),
        }
    }

    /// Conversation `id` as it stands (fresh the first time; the least
    /// recently used one is forgotten to make room past the cap).
    pub(super) fn start(&self, id: &str) -> Carried {
        let mut guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, clock) = &mut *guard;
        *clock += 1;
        let now = *clock;
        if let Some(entry) = kept.get_mut(id) {
            entry.used = now;
            return entry.carried.clone();
        }
        if kept.len() >= self.cap {
            // The oldest sixteenth goes at once, so a stream of new names
            // costs one scan per cap/16 conversations, not one per request.
            let mut ages: Vec<u64> = kept.values().map(|entry| entry.used).collect();
            let cut = (self.cap / 16).max(1).min(ages.len()) - 1;
            let (_, &mut oldest_kept, _) = ages.select_nth_unstable(cut);
            kept.retain(|_, entry| entry.used > oldest_kept);
        }
        kept.insert(
            id.to_owned(),
            Kept {
                carried: Carried::default(),
                used: now,
            },
        );
        Carried::default()
    }

    /// Adds to conversation `id` what a request that resumed it at
    /// `start` did until `end`.
    fn finish(&self, id: &str, start: &Carried, end: &Carried) {
        let mut guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = guard.0.get_mut(id) {
            entry.carried.absorb(start, end);
        }
    }

    /// How many conversations are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .len()
    }
}

/// A conversation a request resumed: where it is kept, its id, and how
/// it stood when the request began.
pub(super) struct Resumed {
    pub(super) conversations: Arc<Conversations>,
    pub(super) id: String,
    pub(super) start: Carried,
}

/// A request's session, resumed from its conversation. When this is
/// dropped (its relay done, or the client gone), the exchange's upstream
/// call ends for the packs that count what calls cost (see
/// [`AgentSession::end_call`]), whatever the request did is added back to
/// the conversation, and its audit lines are written out.
pub(super) struct Lease {
    session: AgentSession,
    resumed: Option<Resumed>,
    audit: Option<AuditLog>,
    /// The exchange under way, once begun.
    exchange: Option<Exchange>,
    /// Its upstream call's number, once its request was judged.
    call: Option<u64>,
    /// How that call stands: what it is charged when the lease ends.
    end: CallEnd,
    /// What the upstream reported it cost (`last_call` as charged).
    charge: Option<crate::agent::LastCall>,
}

impl Lease {
    /// `session`, resuming `resumed` (none: a request of its own), whose
    /// decisions `audit` records.
    pub(super) fn new(
        mut session: AgentSession,
        resumed: Option<Resumed>,
        audit: Option<AuditLog>,
    ) -> Self {
        if let Some(resumed) = &resumed {
            session.resume(&resumed.start);
        }
        Lease {
            session,
            resumed,
            audit,
            exchange: None,
            call: None,
            end: CallEnd::NotSent,
            charge: None,
        }
    }

    /// The session.
    pub(super) fn session(&mut self) -> &mut AgentSession {
        &mut self.session
    }

    /// Begins the session's exchange (kept, to end its call with).
    pub(super) fn begin_exchange(&mut self) -> Exchange {
        let exchange = self.session.begin_exchange();
        self.exchange = Some(exchange.clone());
        exchange
    }

    /// The exchange's request was judged: its call's number is the one
    /// the session gave it.
    pub(super) fn judged(&mut self) {
        self.call = Some(self.session.call_id);
    }

    /// The request went upstream: until the reply says otherwise, what it
    /// was billed is not known.
    pub(super) fn sent(&mut self) {
        self.end = CallEnd::Unknown;
    }

    /// The upstream billed nothing for it: it refused it, or was never
    /// reached.
    pub(super) fn not_billed(&mut self) {
        self.end = CallEnd::Refused;
    }

    /// Charges the call what the upstream reported, `usage` at `model`;
    /// `complete`: the reply was read to its end. A usage of no tokens at
    /// all is none reported (a stream that does not report its usage), so
    /// is an incomplete reply: what it cost is then not known.
    pub(super) fn charge(&mut self, model: &str, usage: Usage, complete: bool) {
        let reported = usage.input_tokens > 0 || usage.output_tokens > 0;
        self.session.charge_upstream(model, usage);
        if complete && reported {
            self.end = CallEnd::Billed;
            self.charge = self.session.last_call;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(exchange) = self.exchange.take() {
            let call = self.call.unwrap_or(self.session.call_id);
            self.session
                .end_call(&exchange, call, self.charge.take(), self.end);
        }
        if let Some(resumed) = &self.resumed {
            resumed
                .conversations
                .finish(&resumed.id, &resumed.start, &self.session.carried());
        }
        if let Some(audit) = &self.audit {
            audit.write_out();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::key_hash;
    use super::*;
    use axum::http::HeaderValue;

    fn headers(session: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(name) = session {
            headers.insert(SESSION_HEADER, HeaderValue::from_str(name).unwrap());
        }
        headers
    }

    #[test]
    fn a_conversation_is_the_header_within_the_key_then_the_key_then_none() {
        let key = key_hash("sk-a");
        let hash = &key[..16];
        let key = Some(key.as_str());
        assert_eq!(
            conversation(&headers(Some("chat-1")), key, SessionScope::Header).unwrap(),
            Some(format!("key-{hash}/chat-1"))
        );
        assert_eq!(
            conversation(&headers(Some("chat-1")), None, SessionScope::Header).unwrap(),
            Some("session/chat-1".to_owned())
        );
        assert_eq!(
            conversation(&headers(None), key, SessionScope::Header).unwrap(),
            Some(format!("key-{hash}"))
        );
        assert_eq!(
            conversation(&headers(None), None, SessionScope::Header).unwrap(),
            None
        );
        assert_eq!(
            conversation(&headers(Some("chat-1")), key, SessionScope::Key).unwrap(),
            Some(format!("key-{hash}")),
            "scoped by key, the header names nothing"
        );
        // What a request presents goes in as its hash: the key itself is
        // never part of a conversation's name.
        let mut with_key = headers(None);
        with_key.insert("x-api-key", HeaderValue::from_static("sk-secret"));
        let presented = super::super::presented_key_hash(&with_key);
        assert_eq!(presented.as_deref(), Some(key_hash("sk-secret").as_str()));
        let id = conversation(&with_key, presented.as_deref(), SessionScope::Header)
            .unwrap()
            .unwrap();
        assert!(!id.contains("secret"), "{id}");
    }

    #[test]
    fn a_session_name_that_is_not_a_plain_name_is_refused_in_one_line() {
        for bad in ["", "a/b", "a b", &"x".repeat(129)] {
            let error = conversation(&headers(Some(bad)), None, SessionScope::Header).unwrap_err();
            assert!(error.starts_with(SESSION_HEADER), "{error}");
            assert!(!error.contains('\n'));
        }
    }

    #[test]
    fn past_the_cap_the_least_recently_used_conversation_is_forgotten() {
        let conversations = Conversations::new(2);
        conversations.start("a");
        conversations.start("b");
        conversations.start("a");
        conversations.start("c");
        assert_eq!(conversations.len(), 2);
        let kept = conversations.kept.lock().unwrap();
        assert!(kept.0.contains_key("a") && kept.0.contains_key("c"));
    }
}
