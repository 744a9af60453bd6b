//! What one bucket has spent, in tokens and dollars: what the gate
//! counts in process and what it reads back from shared state.

/// Spending in one bucket: tokens and dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Spent {
    /// Input tokens.
    pub(crate) input: u64,
    /// Output tokens.
    pub(crate) output: u64,
    /// Input and output tokens.
    pub(crate) total: u64,
    /// Dollars.
    pub(crate) usd: f64,
}

impl Spent {
    pub(crate) fn new(input: u64, output: u64, usd: f64) -> Spent {
        Spent {
            input,
            output,
            total: input + output,
            usd,
        }
    }

    pub(crate) fn minus(self, base: Spent) -> Spent {
        Spent {
            input: self.input.saturating_sub(base.input),
            output: self.output.saturating_sub(base.output),
            total: self.total.saturating_sub(base.total),
            usd: (self.usd - base.usd).max(0.0),
        }
    }
}
