//! The stream release rule against an independent oracle (see
//! `oracle/mod.rs`), for any split and any span, driving the gate as a
//! host does ([`simulate`]); the same property runs through the `chimera`
//! binary in `tests/all/streamed_gates.rs`.

mod oracle;

use content_safety::stream::{simulate, Rules, Why};
use content_safety::Action;
use oracle::{check_block, check_redact, scanner, text_and_deltas, Outcome, LIMIT, NAME};
use proptest::prelude::*;

/// The gate run over `deltas` as a host runs it.
fn run(deltas: &[String], action: Action) -> Outcome {
    let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
    let rules = Rules {
        action,
        hold_back: 0,
        hold_limit: LIMIT,
    };
    let out = simulate(scanner(), &deltas, rules);
    Outcome {
        shown: out.shown(),
        per_offer: Some(out.released),
        blocked: out
            .blocked
            .map(|(checks, why)| why == Why::OverLimit(LIMIT) && checks == NAME),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn block_mode_never_shows_a_byte_of_a_match_or_of_a_live_beginning((text, deltas) in text_and_deltas(24)) {
        let out = run(&deltas, Action::Block);
        let checked = check_block(&text, &deltas, &out);
        prop_assert!(checked.is_ok(), "{}: {out:?}", checked.unwrap_err());
    }

    #[test]
    fn redact_mode_publishes_the_whole_text_redaction_or_stops_before_a_beginning_past_the_limit((text, deltas) in text_and_deltas(24)) {
        let out = run(&deltas, Action::Redact);
        let checked = check_redact(&text, &deltas, &out);
        prop_assert!(checked.is_ok(), "{}: {out:?}", checked.unwrap_err());
    }
}

#[test]
fn a_phrase_padded_past_four_kibibytes_is_held_whole_in_both_modes() {
    let spaces = " ".repeat(5000);
    let deltas = ["the launch", spaces.as_str(), "code ", "alpha is set"];
    let rules = |action| Rules {
        action,
        hold_back: 0,
        hold_limit: content_safety::DEFAULT_HOLD_LIMIT,
    };
    let block = simulate(scanner(), &deltas, rules(Action::Block));
    assert_eq!(block.shown(), "the ");
    assert_eq!(block.blocked, Some((NAME.to_owned(), Why::Matched)));
    let redact = simulate(scanner(), &deltas, rules(Action::Redact));
    assert_eq!(redact.shown(), "the [REDACTED] is set");
    assert_eq!(redact.blocked, None);
}
