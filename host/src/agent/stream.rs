//! The streamed-reply path: provider deltas → assembly → gate → display.
//!
//! ```text
//!  provider.stream ─▶ delta ─▶ Assembler (text + tool calls split across deltas) ─▶ ModelResponse
//!                                 └─ text ─▶ StreamGate (stream_chunk seam: release / hold / block) ─▶ assistant_delta event
//! ```
//!
//! Text deltas go through `Assembler::push` (in `providers`), which returns the text of the
//! delta. With no `stream_chunk` interceptor it is published as it is (same
//! boundaries, no seam work). Otherwise a [`StreamGate`] offers it to the
//! chain: the interceptors see the turn's text so far, how much of it is
//! already released and the new delta, and answer release, hold (withhold a
//! suffix until the next delta), rewrite (a redaction of the unreleased
//! text, held or not) or block (nothing more is published; one retract
//! event). At the end of the stream held text gets one final check in which
//! holds are ignored. Released text is never rewritten, so what was shown
//! is always a prefix of the gate's text; when any interceptor rewrote the
//! stream, that text is the reply that enters the conversation.
//!
//! The gate keeps the turn's text in one growing string and hands the chain
//! a borrowed view of it, so the host's cost per delta is constant and a
//! stream's cost is linear in its length; what an interceptor scans is its
//! own business (the SDK documents scanning from the released boundary).

use crate::interception::health::coarse_now;
use crate::interception::{ChainOutcome, Interceptor, Notice, StreamChunkInterceptor, StreamFacts};
use std::ops::Range;
use std::time::Duration;

/// One reply's `stream_chunk` state: what the loop runs between a
/// provider's text deltas and their display. Public for hosts that drive a
/// stream themselves: offer each delta with the chain run as the judge,
/// publish what it releases, and offer once more with `last` at the end.
///
/// A gate may batch: with a *window* (the largest
/// [`stream_window`](crate::interception::Interceptor::stream_window) of
/// the chain), deltas that come in a burst — within [`WINDOW_LATENCY`] of
/// the last offer — gather unreleased and unjudged until the window is
/// full, the oldest of them has waited [`WINDOW_LATENCY`], or the stream
/// ends; then they are offered as one delta. A delta after a quiet spell
/// (the first one included) is offered at once, so a stream at reading
/// pace is judged delta by delta. Nothing is released unjudged either way.
#[derive(Default)]
pub struct StreamGate {
    /// The reply's text so far: released, then held.
    text: String,
    /// Bytes of `text` already released.
    released: usize,
    /// Bytes of `text` the chain has been offered.
    offered: usize,
    /// How many new bytes may gather before the chain is offered them.
    window: usize,
    /// When the oldest byte not yet offered arrived (budget clock).
    waiting_since: Option<Duration>,
    /// When the chain was last offered the stream (budget clock).
    last_offer: Option<Duration>,
    /// Why the stream was blocked, the notice that came with it, and who.
    blocked: Option<StreamBlock>,
    /// True once an interceptor rewrote the text.
    rewritten: bool,
    /// The hold beyond the trailing word under way: the gate holding, and
    /// the bytes it held at the last offer.
    holding: Option<(String, usize)>,
}

/// A `stream_chunk` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamBlock {
    /// The block's reason.
    pub reason: String,
    /// The notice that came with it, shown instead of the reason.
    pub notice: Option<String>,
    /// The blocking interceptor (`<pack>/<name>`).
    pub by: String,
}

/// An edge of a hold beyond the ordinary trailing-word lag: a gate started
/// holding text that spans a separator (a phrase that may become a match,
/// a number that may become a card), or such a hold ended. One edge each
/// way per hold, so a display can show "checking…" while it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldEdge {
    /// A gate started holding.
    Started {
        /// The holding interceptor (`<pack>/<name>`).
        gate: String,
        /// Bytes held.
        held: usize,
    },
    /// The hold ended.
    Ended {
        /// The interceptor that held (`<pack>/<name>`).
        gate: String,
        /// Bytes held when it ended.
        held: usize,
        /// How it ended: `released` (the gate let the text go), `blocked`
        /// (the stream was blocked) or `ended` (the stream ended while it
        /// was held; the final check judged it).
        outcome: &'static str,
    },
}

/// How a gated stream ended.
#[derive(Debug, Default)]
pub struct StreamEnd {
    /// The stream was blocked.
    pub blocked: Option<StreamBlock>,
    /// A hold still under way when the stream stopped without its final
    /// check (the provider failed mid-stream): its end, `ended`.
    pub hold_end: Option<HoldEdge>,
    /// The turn's text as the interceptors rewrote it (everything shown,
    /// then anything released by the final check), when any did.
    pub rewritten: Option<String>,
}

/// How long a byte waits in a gate's window at most before the chain is
/// offered it (checked as deltas arrive), so a stream at a human pace is
/// judged — and shown — delta by delta.
pub const WINDOW_LATENCY: Duration = Duration::from_millis(25);

/// What one offer to the gate produced.
#[derive(Debug)]
pub struct Offered {
    /// The range of the gate's text to publish now.
    pub release: Option<Range<usize>>,
    /// Notices the interceptors attached.
    pub notices: Vec<Notice>,
    /// The stream was blocked by this offer: the released length and the reason.
    pub retract: Option<(usize, String)>,
    /// A hold beyond the trailing word started or ended with this offer.
    pub hold: Option<HoldEdge>,
}

impl StreamGate {
    /// A gate for `chain`: its window is the largest any of its enforced
    /// interceptors declared (0: every delta is offered). A monitored
    /// one's window is not taken: gathering would delay the text.
    #[must_use]
    pub fn for_chain(chain: &[StreamChunkInterceptor]) -> Self {
        StreamGate::with_window(
            chain
                .iter()
                .filter(|i| !i.is_monitored())
                .map(Interceptor::stream_window)
                .max()
                .unwrap_or(0),
        )
    }

    /// A gate that lets `window` bytes gather before offering them.
    #[must_use]
    pub fn with_window(window: usize) -> Self {
        StreamGate {
            window,
            ..StreamGate::default()
        }
    }

    /// True when the new bytes may wait in the window for more: the
    /// window is not full, and they came in a burst — within
    /// [`WINDOW_LATENCY`] of the last offer, and the oldest of them has not
    /// waited that long yet. A delta after a quiet spell is offered at
    /// once.
    fn gathering(&mut self, last: bool) -> bool {
        if last || self.window == 0 || self.text.len() - self.offered >= self.window {
            return false;
        }
        let now = coarse_now();
        let since = match self.waiting_since {
            Some(since) => since,
            None => match self.last_offer {
                Some(offer) if now.saturating_sub(offer) < WINDOW_LATENCY => {
                    self.waiting_since = Some(now);
                    now
                }
                _ => return false,
            },
        };
        now.saturating_sub(since) < WINDOW_LATENCY
    }

    /// Offers `delta` (or, with `last`, the held text once more, holds
    /// ignored) to `judge` — the chain run over the facts and the text.
    /// With a window, the delta may only gather (nothing is judged or
    /// released yet).
    pub fn offer(
        &mut self,
        delta: &str,
        last: bool,
        judge: impl FnOnce(&StreamFacts, &String) -> ChainOutcome<String>,
    ) -> Offered {
        let mut offered = Offered {
            release: None,
            notices: Vec::new(),
            retract: None,
            hold: None,
        };
        if self.blocked.is_some() {
            return offered;
        }
        self.text.push_str(delta);
        if self.text.len() == self.released || (delta.is_empty() && !last) || self.gathering(last) {
            return offered;
        }
        let facts = StreamFacts {
            released: self.released,
            delta: self.text.len() - self.offered,
            last,
        };
        self.offered = self.text.len();
        self.waiting_since = None;
        if self.window > 0 {
            self.last_offer = Some(coarse_now());
        }
        let outcome = judge(&facts, &self.text);
        offered.notices = outcome.notices;
        if let Some(reason) = outcome.blocked {
            let notice = offered.notices.last().map(|n| n.text.clone());
            offered.retract = Some((self.released, reason.clone()));
            offered.hold = self.end_hold("blocked");
            self.blocked = Some(StreamBlock {
                reason,
                notice,
                by: outcome.blocked_by.unwrap_or_default(),
            });
            return offered;
        }
        if let Some(text) = outcome.replaced {
            // The seam keeps the released text as it is (it rebuilds the
            // text from it); a host-built chain outcome is checked here.
            if text.get(..self.released) == self.text.get(..self.released) {
                self.text = text;
                self.offered = self.text.len();
                self.rewritten = true;
            }
        }
        let candidate = self.text.len() - self.released;
        let held = if last { 0 } else { outcome.held.min(candidate) };
        let mut end = self.text.len() - held;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        if end > self.released {
            offered.release = Some(self.released..end);
            self.released = end;
        }
        offered.hold = self.track_hold(last, outcome.held_by);
        offered
    }

    /// The hold edge this offer makes, if any: a hold beyond the trailing
    /// word is one whose held text contains a separator.
    fn track_hold(&mut self, last: bool, by: Option<String>) -> Option<HoldEdge> {
        let held = &self.text.as_bytes()[self.released..];
        let beyond = held
            .iter()
            .any(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        match (&mut self.holding, beyond && !last) {
            (Some((_, bytes)), true) => {
                *bytes = held.len();
                None
            }
            (None, true) => {
                let gate = by.unwrap_or_default();
                self.holding = Some((gate.clone(), held.len()));
                Some(HoldEdge::Started {
                    gate,
                    held: held.len(),
                })
            }
            (Some(_), false) => self.end_hold(if last { "ended" } else { "released" }),
            (None, false) => None,
        }
    }

    /// Ends the hold under way, if any, with `outcome`.
    fn end_hold(&mut self, outcome: &'static str) -> Option<HoldEdge> {
        self.holding.take().map(|(gate, held)| HoldEdge::Ended {
            gate,
            held,
            outcome,
        })
    }

    /// The gate's text (for publishing a released range).
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How the stream ended: blocked, or the rewritten text.
    #[must_use]
    pub fn finish(mut self) -> StreamEnd {
        StreamEnd {
            hold_end: self.end_hold("ended"),
            rewritten: (self.rewritten && self.blocked.is_none()).then_some(self.text),
            blocked: self.blocked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain outcome that holds `held` bytes (or blocks with `blocked`).
    fn judged(held: usize, blocked: Option<&str>) -> ChainOutcome<String> {
        ChainOutcome {
            blocked: blocked.map(str::to_owned),
            blocked_by: blocked.map(|_| "gate/stream".to_owned()),
            held,
            ..ChainOutcome::default()
        }
    }

    #[test]
    fn a_hold_never_splits_a_character_and_the_final_offer_releases_everything_held() {
        let mut gate = StreamGate::default();
        // "né" is 3 bytes; holding 1 byte would cut the é: the hold widens to 2.
        let first = gate.offer("né", false, |facts, text| {
            assert_eq!((facts.released, facts.delta, facts.last), (0, 3, false));
            assert_eq!(text, "né");
            judged(1, None)
        });
        assert_eq!(first.release, Some(0..1));
        let last = gate.offer("", true, |facts, text| {
            assert_eq!((facts.released, facts.last), (1, true));
            assert_eq!(&text[facts.released..], "é");
            judged(5, None) // a hold is ignored at the end
        });
        assert_eq!(last.release, Some(1..3));
        assert!(gate.finish().blocked.is_none());
    }

    #[test]
    fn a_window_gathers_deltas_unreleased_and_offers_them_as_one() {
        let mut gate = StreamGate::with_window(8);
        let mut offers = Vec::new();
        let mut shown = String::new();
        for delta in ["ab", "cd", "ef", "gh", "ij", "kl"] {
            let offered = gate.offer(delta, false, |facts, text| {
                offers.push((facts.released, facts.delta, text.len()));
                judged(0, None)
            });
            if let Some(range) = offered.release {
                shown.push_str(&gate.text()[range]);
            }
        }
        // The first delta is offered at once; the burst after it gathers
        // until 8 bytes wait, which go to the chain as one delta; the last
        // 2 wait. Nothing was shown before it was judged.
        assert_eq!(offers, vec![(0, 2, 2), (2, 8, 10)]);
        assert_eq!(shown, "abcdefghij");
        let end = gate.offer("", true, |facts, text| {
            offers.push((facts.released, facts.delta, text.len()));
            judged(0, None)
        });
        assert_eq!(offers[2], (10, 2, 12), "the end offers what gathered");
        assert_eq!(&gate.text()[end.release.unwrap()], "kl");
    }

    #[test]
    fn a_window_never_shows_what_a_block_in_it_would_have_stopped() {
        let mut gate = StreamGate::with_window(64);
        let first = gate.offer("fine ", false, |_, _| judged(0, None));
        assert_eq!(first.release, Some(0..5));
        let mut released = 0;
        for delta in ["then ", "BAD", " more"] {
            let offered = gate.offer(delta, false, |_, text| {
                judged(0, text.contains("BAD").then_some("no"))
            });
            released += offered.release.map_or(0, |r| r.len());
        }
        let end = gate.offer("", true, |_, text| {
            judged(0, text.contains("BAD").then_some("no"))
        });
        assert_eq!(released, 0);
        assert_eq!(end.retract, Some((5, "no".to_owned())));
    }

    #[test]
    fn a_window_offers_text_that_waited_past_the_latency_bound() {
        let mut gate = StreamGate::with_window(1 << 20);
        let first = gate.offer("a ", false, |_, _| judged(0, None));
        assert_eq!(first.release, Some(0..2));
        let burst = gate.offer("slow ", false, |_, _| panic!("gathers"));
        assert!(burst.release.is_none());
        // Well past the bound, whatever the budget clock's tick: the bytes
        // that waited are offered with the next delta, and a delta after
        // a quiet spell is offered at once.
        std::thread::sleep(3 * WINDOW_LATENCY);
        let late = gate.offer("stream", false, |facts, _| {
            assert_eq!(facts.delta, 11);
            judged(0, None)
        });
        assert_eq!(late.release, Some(2..13));
        std::thread::sleep(3 * WINDOW_LATENCY);
        let alone = gate.offer(" on", false, |facts, _| {
            assert_eq!(facts.delta, 3);
            judged(0, None)
        });
        assert_eq!(alone.release, Some(13..16));
    }

    #[test]
    fn after_a_block_nothing_is_offered_again() {
        let mut gate = StreamGate::default();
        let _ = gate.offer("safe ", false, |_, _| judged(0, None));
        let blocked = gate.offer("BAD", false, |_, _| judged(0, Some("no")));
        assert_eq!(blocked.retract, Some((5, "no".to_owned())));
        let later = gate.offer(" more", false, |_, _| panic!("never judged again"));
        assert!(later.release.is_none() && later.retract.is_none());
        let end = gate.offer("", true, |_, _| panic!("no final check after a block"));
        assert!(end.release.is_none());
        let end = gate.finish();
        assert_eq!(end.blocked.map(|b| b.reason).as_deref(), Some("no"));
    }
}
