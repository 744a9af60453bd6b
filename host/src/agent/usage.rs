//! What a session's provider calls cost: tokens per source, and dollars
//! from a price table.
//!
//! Every provider call has a *source*, the part of the host that made it:
//! `agent` (the loop's own calls), `gate_retry` (an `output` gate asked the
//! model again) or `compaction` (the summary call that shortens a long
//! history). The provider's reported tokens are charged to the call's
//! source, and priced by the model the call went to. Packs read the totals
//! in the session facts (`Session::usage`, `Session::cost_usd` in the SDK):
//! a budget gate compares them with its ceilings.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Who made a provider call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum CallSource {
    /// The loop's own call.
    #[default]
    Agent,
    /// A call an `output` gate asked for (a retry with feedback).
    GateRetry,
    /// The summary call of a compaction.
    Compaction,
}

impl CallSource {
    /// Every source, in the order of their names.
    pub(crate) const BY_NAME: [CallSource; 3] = [
        CallSource::Agent,
        CallSource::Compaction,
        CallSource::GateRetry,
    ];

    /// The name packs see (`agent`, `gate_retry`, `compaction`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CallSource::Agent => "agent",
            CallSource::GateRetry => "gate_retry",
            CallSource::Compaction => "compaction",
        }
    }
}

/// The price of one model: USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// USD per million input tokens.
    pub input: f64,
    /// USD per million output tokens.
    pub output: f64,
}

/// Prices per model id. A model with no entry costs nothing (its tokens
/// still count).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceTable(BTreeMap<String, Price>);

/// The largest price file read (a price table is a few kilobytes).
const MAX_PRICE_FILE: u64 = 1 << 20;

impl Default for PriceTable {
    /// List prices of common models at the time of writing (USD per
    /// million tokens). Override or extend them with `--prices FILE`.
    fn default() -> Self {
        let table = [
            ("claude-opus-4-7", 15.0, 75.0),
            ("claude-sonnet-4-6", 3.0, 15.0),
            ("claude-haiku-4-5-20251001", 1.0, 5.0),
            ("gpt-4o", 2.5, 10.0),
            ("gpt-4o-mini", 0.15, 0.6),
        ];
        PriceTable(
            table
                .into_iter()
                .map(|(model, input, output)| (model.to_owned(), Price { input, output }))
                .collect(),
        )
    }
}

impl PriceTable {
    /// No prices at all: every call costs nothing.
    #[must_use]
    pub fn empty() -> Self {
        PriceTable(BTreeMap::new())
    }

    /// Sets (or overrides) one model's price.
    #[must_use]
    pub fn with(mut self, model: impl Into<String>, price: Price) -> Self {
        self.0.insert(model.into(), price);
        self
    }

    /// The built-in table overlaid with `json`: `{"MODEL": {"input": USD,
    /// "output": USD}, ...}` per million tokens. Negative or non-finite
    /// prices are refused.
    ///
    /// # Errors
    ///
    /// `not a price table: …` when `json` is not an object of that shape;
    /// `MODEL: prices must be finite and not negative` for the first model
    /// priced otherwise.
    pub fn overlaid(json: &str) -> Result<Self, String> {
        let overrides: BTreeMap<String, Price> =
            serde_json::from_str(json).map_err(|e| format!("not a price table: {e}"))?;
        let mut table = PriceTable::default();
        for (model, price) in overrides {
            if !(price.input.is_finite() && price.output.is_finite())
                || price.input < 0.0
                || price.output < 0.0
            {
                return Err(format!("{model}: prices must be finite and not negative"));
            }
            table.0.insert(model, price);
        }
        Ok(table)
    }

    /// Reads [`PriceTable::overlaid`] from a regular file of at most 1 MiB
    /// (a FIFO, a directory or a larger file is refused).
    ///
    /// # Errors
    ///
    /// The reason the file cannot be used (unreadable, not a regular file, over
    /// 1 MiB, not UTF-8), or [`PriceTable::overlaid`]'s error for its text.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        PriceTable::overlaid(&crate::files::read_user_file(path, MAX_PRICE_FILE)?)
    }

    /// What `input` and `output` tokens cost on `model`.
    #[must_use]
    pub fn cost(&self, model: &str, input: u64, output: u64) -> f64 {
        self.0.get(model).map_or(0.0, |price| {
            #[allow(
                clippy::cast_precision_loss,
                reason = "token counts far below 2^52; a dollar figure"
            )]
            let (input, output) = (input as f64, output as f64);
            (input * price.input + output * price.output) / 1_000_000.0
        })
    }
}

/// Tokens and dollars charged to one source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SourceUsage {
    /// Input tokens the provider reported.
    pub input_tokens: u64,
    /// Output tokens the provider reported.
    pub output_tokens: u64,
    /// Their price.
    pub cost_usd: f64,
}

/// A session's charges, per source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    by_source: BTreeMap<CallSource, SourceUsage>,
}

impl Ledger {
    /// Charges one call's reported tokens, priced on `model`.
    pub fn charge(
        &mut self,
        source: CallSource,
        model: &str,
        input: u64,
        output: u64,
        prices: &PriceTable,
    ) {
        let entry = self.by_source.entry(source).or_default();
        entry.input_tokens += input;
        entry.output_tokens += output;
        entry.cost_usd += prices.cost(model, input, output);
    }

    /// Adds the charges `after` holds beyond `before` (a later state of
    /// the same ledger), source by source.
    pub fn add_since(&mut self, after: &Ledger, before: &Ledger) {
        for (source, now) in &after.by_source {
            let then = before.of(*source);
            let entry = self.by_source.entry(*source).or_default();
            entry.input_tokens += now.input_tokens.saturating_sub(then.input_tokens);
            entry.output_tokens += now.output_tokens.saturating_sub(then.output_tokens);
            entry.cost_usd += (now.cost_usd - then.cost_usd).max(0.0);
        }
    }

    /// The whole session's dollars.
    #[must_use]
    pub fn cost_usd(&self) -> f64 {
        self.by_source.values().map(|u| u.cost_usd).sum()
    }

    /// The charges of every source together.
    #[must_use]
    pub fn total(&self) -> SourceUsage {
        self.by_source
            .values()
            .fold(SourceUsage::default(), |sum, usage| SourceUsage {
                input_tokens: sum.input_tokens + usage.input_tokens,
                output_tokens: sum.output_tokens + usage.output_tokens,
                cost_usd: sum.cost_usd + usage.cost_usd,
            })
    }

    /// The charges of one source.
    #[must_use]
    pub fn of(&self, source: CallSource) -> SourceUsage {
        self.by_source.get(&source).copied().unwrap_or_default()
    }

    /// `{"agent": {...}, "gate_retry": {...}}`: the sources charged so far
    /// (a value tree, as [`Ledger::write_json`] writes it).
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> serde_json::Value {
        self.by_source
            .iter()
            .map(|(source, usage)| {
                (
                    source.as_str().to_owned(),
                    serde_json::to_value(usage).unwrap_or_default(),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Appends the sources charged so far to `out` as JSON, written
    /// directly (no value tree): the sources and each one's members in
    /// the order of their names, as a JSON object's keys are ordered.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        let charged = CallSource::BY_NAME
            .iter()
            .filter_map(|source| Some((source, self.by_source.get(source)?)));
        for (index, (source, usage)) in charged.enumerate() {
            if index > 0 {
                out.push(b',');
            }
            put_json(out, source.as_str());
            out.extend_from_slice(b":{");
            put_member(out, true, "cost_usd", &usage.cost_usd);
            put_member(out, false, "input_tokens", &usage.input_tokens);
            put_member(out, false, "output_tokens", &usage.output_tokens);
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// The last provider call's charge, as packs read it in the session's
/// `last_call`: written as the JSON object it always was (its members in
/// name order), with no value tree built for it per call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LastCall {
    /// How the call was billed (`reported`, `unknown`, `none`), once the
    /// exchange it was part of ended; absent while it is under way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub billed: Option<&'static str>,
    /// The source it was charged to (`charged_to`, never `source`: packs
    /// find a call's own source by the facts' first `"source":"`).
    #[serde(serialize_with = "source_name")]
    pub charged_to: CallSource,
    /// What it cost, never below zero.
    pub cost_usd: f64,
    /// Its input tokens.
    pub input_tokens: u64,
    /// Its output tokens.
    pub output_tokens: u64,
}

impl LastCall {
    /// A call that charged nothing, to `Agent`.
    pub const NOTHING: LastCall = LastCall {
        billed: None,
        charged_to: CallSource::Agent,
        cost_usd: 0.0,
        input_tokens: 0,
        output_tokens: 0,
    };
}

/// A source by its name.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `serialize_with` hands the field by reference"
)]
fn source_name<S: serde::Serializer>(source: &CallSource, to: S) -> Result<S::Ok, S::Error> {
    to.serialize_str(source.as_str())
}

/// Appends `value` to `out` as `serde_json` writes it (a float that is
/// not finite as `null`), straight into the bytes: no formatter, no value
/// tree.
fn put_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing into a `Vec` cannot fail, and none of the values written
    // here (numbers, strings, a JSON value) refuses to serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Appends the member `"name":value` to `out`, after a comma unless it
/// is the `first` of its object. `name` is written as it is: a plain name
/// of the host's own, nothing to escape.
pub(super) fn put_member<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    first: bool,
    name: &str,
    value: &T,
) {
    if !first {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    put_json(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_charged_to_their_source_and_priced_by_the_model_called() {
        let prices = PriceTable::empty().with(
            "big",
            Price {
                input: 10.0,
                output: 30.0,
            },
        );
        let mut ledger = Ledger::default();
        ledger.charge(CallSource::Agent, "big", 1_000_000, 100_000, &prices);
        ledger.charge(CallSource::GateRetry, "unpriced", 500, 500, &prices);
        assert_eq!(ledger.of(CallSource::Agent).input_tokens, 1_000_000);
        assert!((ledger.of(CallSource::Agent).cost_usd - 13.0).abs() < 1e-9);
        assert_eq!(ledger.of(CallSource::GateRetry).output_tokens, 500);
        assert!((ledger.cost_usd() - 13.0).abs() < 1e-9);
        assert_eq!(ledger.total().input_tokens, 1_000_500);
        assert_eq!(ledger.total().output_tokens, 100_500);
        assert_eq!(ledger.of(CallSource::Compaction), SourceUsage::default());
        let json = ledger.to_json();
        assert_eq!(json["gate_retry"]["input_tokens"], 500);
        assert!(json.get("compaction").is_none());
    }

    #[test]
    fn a_last_call_reads_as_the_object_packs_always_saw() {
        for (billed, cost) in [(None, 0.0), (Some("reported"), 0.1 + 0.2), (None, f64::NAN)] {
            let last = LastCall {
                billed,
                charged_to: CallSource::GateRetry,
                cost_usd: cost,
                input_tokens: 1234,
                output_tokens: 56,
            };
            let mut tree = serde_json::json!({
                "charged_to": "gate_retry",
                "input_tokens": 1234,
                "output_tokens": 56,
                "cost_usd": cost,
            });
            if let Some(billed) = billed {
                tree["billed"] = serde_json::Value::from(billed);
            }
            let mut written = Vec::new();
            put_json(&mut written, &last);
            assert_eq!(String::from_utf8(written).unwrap(), tree.to_string());
        }
    }

    #[test]
    fn the_ledger_is_written_as_its_value_tree_renders() {
        let prices = PriceTable::default();
        let mut ledger = Ledger::default();
        let mut written = Vec::new();
        ledger.write_json(&mut written);
        assert_eq!(written, b"{}");
        for (source, model) in [
            (CallSource::GateRetry, "gpt-4o"),
            (CallSource::Compaction, "unpriced"),
            (CallSource::Agent, "gpt-4o-mini"),
        ] {
            ledger.charge(source, model, 1234, 56, &prices);
            let mut written = Vec::new();
            ledger.write_json(&mut written);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                ledger.to_json().to_string()
            );
        }
        let mut names: Vec<&str> = CallSource::BY_NAME.iter().map(|s| s.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, CallSource::BY_NAME.map(CallSource::as_str));
    }

    #[test]
    fn a_price_file_overrides_the_built_in_table_and_refuses_nonsense() {
        let table = PriceTable::overlaid(r#"{"gpt-4o": {"input": 1, "output": 2}}"#).unwrap();
        assert!((table.cost("gpt-4o", 1_000_000, 0) - 1.0).abs() < 1e-9);
        assert!(table.cost("claude-sonnet-4-6", 1_000_000, 0) > 0.0);
        assert!(PriceTable::overlaid(r#"{"m": {"input": -1, "output": 2}}"#)
            .unwrap_err()
            .contains("not negative"));
        assert!(PriceTable::overlaid(r#"{"m": {"input": 1}}"#)
            .unwrap_err()
            .starts_with("not a price table"));
        assert!(PriceTable::overlaid(r#"{"m": {"input": 1, "output": 1, "cached": 1}}"#).is_err());
    }
}
