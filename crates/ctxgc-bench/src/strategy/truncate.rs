//! `truncate-events` and `truncate-tokens`: naive truncation, sized to match ctxgc.
//!
//! Both keep every system prompt, then the most recent items: `truncate-events` the last N
//! items, `truncate-tokens` as many of the most recent items as fit in N tokens (the system
//! prompts' tokens count against N; the latest item is always kept, even alone over N).
//!
//! N is set per input so that the comparison with ctxgc is at equal size: unless given as a
//! parameter (`truncate-events:n=20`), N is what ctxgc's default configuration produces on the
//! *whole* input — the number of items it keeps (kept or rewritten, system prompts not counted)
//! for `truncate-events`, the tokens of its output for `truncate-tokens`. The same N then
//! applies at every turn, as a fixed window an agent would use: short prefixes fit whole, and
//! once the history outgrows N the window slides.
//!
//! The window keeps tool calls and results valid together: a tool result whose call fell out
//! of the window is dropped with it (a provider rejects a result without its call).

use std::collections::BTreeSet;

use crate::context::{Context, calls_answered, calls_made, is_system};
use crate::strategy::{Params, Prefix, SpecError, Strategy, StrategyError};

/// What N counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Items.
    Items,
    /// Tokens.
    Tokens,
}

/// Keep the system prompt and the most recent N items or tokens.
#[derive(Debug, Clone)]
pub struct Truncate {
    name: String,
    unit: Unit,
    fixed: Option<usize>,
}

/// Builds `truncate-events` (parameter `n`).
pub fn build_events(spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    build(spec, params, Unit::Items)
}

/// Builds `truncate-tokens` (parameter `n`).
pub fn build_tokens(spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    build(spec, params, Unit::Tokens)
}

fn build(spec: &str, params: &Params, unit: Unit) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&["n"])?;
    let fixed = match params.pairs.iter().any(|(k, _)| k == "n") {
        true => Some(params.number("n", 0)?),
        false => None,
    };
    Ok(Box::new(Truncate {
        name: spec.to_owned(),
        unit,
        fixed,
    }))
}

impl Truncate {
    /// Truncation with a fixed N instead of ctxgc's size.
    pub fn fixed(name: &str, unit: Unit, n: usize) -> Self {
        Truncate {
            name: name.to_owned(),
            unit,
            fixed: Some(n),
        }
    }
}

impl Strategy for Truncate {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        let what = match self.unit {
            Unit::Items => "items",
            Unit::Tokens => "tokens",
        };
        match self.fixed {
            Some(n) => format!("the system prompt plus the most recent {n} {what}"),
            None => format!(
                "the system prompt plus the most recent N {what}, N = what ctxgc keeps on that input"
            ),
        }
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let budget = match self.fixed {
            Some(n) => n,
            None => {
                let calibration = input.calibration.as_ref().map_err(|e| {
                    StrategyError(format!("no size to match, ctxgc failed on this input: {e}"))
                })?;
                match self.unit {
                    Unit::Items => calibration.items,
                    Unit::Tokens => calibration.tokens,
                }
            }
        };
        let items = &input.conversation.items;
        let rendered: Vec<usize> = (0..prefix.len).filter(|&i| input.rendered(i)).collect();
        let system: Vec<usize> = rendered
            .iter()
            .copied()
            .filter(|&i| is_system(&items[i]))
            .collect();
        let mut spent: usize = match self.unit {
            Unit::Items => 0,
            Unit::Tokens => system.iter().map(|&i| input.tokens[i]).sum(),
        };
        let mut window: Vec<usize> = Vec::new();
        for &i in rendered.iter().rev().filter(|&&i| !is_system(&items[i])) {
            let cost = match self.unit {
                Unit::Items => 1,
                Unit::Tokens => input.tokens[i],
            };
            if !window.is_empty() && spent + cost > budget {
                break;
            }
            if window.is_empty() && self.unit == Unit::Items && budget == 0 {
                break;
            }
            spent += cost;
            window.push(i);
        }
        window.reverse();
        // A result whose call fell out of the window goes too.
        let made: BTreeSet<&str> = window.iter().flat_map(|&i| calls_made(&items[i])).collect();
        window.retain(|&i| calls_answered(&items[i]).iter().all(|c| made.contains(c)));
        let mut kept: Vec<usize> = system;
        kept.extend(window);
        kept.sort_unstable();
        Ok(Context {
            items_kept: kept.len(),
            segments: kept.iter().map(|&i| input.segment(i)).collect(),
            ..Context::default()
        })
    }
}
