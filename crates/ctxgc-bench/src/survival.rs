//! Used-value survival: does a strategy keep what the agent went on to use?
//!
//! The bench walks the transcript turn by turn. For every agent turn (an assistant message, or
//! a `tool_call` / `decision` event) it takes the values the turn uses ([`crate::values`]):
//! strings and numbers of meaningful length in its tool-call arguments and its text that
//! appeared in an earlier item. Each must still be available in the context the strategy gave
//! for the history *before that turn* (the request the agent made to write it):
//! - *visible*: it occurs in a segment that is not a receipt stub; or
//! - *recalled*: a receipt stub in that context names an item whose original holds it, and the
//!   request offers the model a recall tool to redeem it ([`Context::recall_offered`]). Each
//!   distinct item the turn needs back is one recall: one more request, priced by the replay.
//!
//! Otherwise it is an unrecoverable miss (a stub the model cannot redeem counts for nothing), reported with the turn, the value and the latest earlier item that
//! held it. The agent did use these values, so a strategy that had dropped them would have left
//! the agent without something it needed (or it would have had to guess).

use std::collections::HashMap;

use serde::Serialize;

use crate::context::{Context, SegmentKind};
use crate::prepare::Prepared;

/// One value a strategy lost before the turn that used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Miss {
    /// The turn's position in the conversation.
    pub turn: usize,
    /// The turn's id.
    pub turn_id: String,
    /// The value.
    pub value: String,
    /// The id of the latest earlier item that held it.
    pub source_id: String,
    /// That item's position.
    pub source: usize,
}

/// The survival score of one strategy on one conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Survival {
    /// Turns checked (agent turns with at least one item before them).
    pub turns: usize,
    /// Values used, summed over turns.
    pub used_values: usize,
    /// Of which not available.
    pub missed_values: usize,
    /// Of which not visible but recalled through a receipt stub and the recall tool (not
    /// misses).
    pub recovered_values: usize,
    /// Recalls: distinct items whose originals a turn had to get back (one request each).
    pub recalls: usize,
    /// Tokens of the originals recalled, summed over recalls.
    pub recalled_tokens: usize,
    /// Turns with at least one miss.
    pub turns_with_miss: usize,
    /// Every miss (listed only on request).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub misses: Vec<Miss>,
}

/// Which values each distinct segment text holds, computed once per text.
#[derive(Debug, Default)]
pub struct SegmentValues {
    by_hash: HashMap<blake3::Hash, Vec<u32>>,
}

impl SegmentValues {
    /// The sorted value ids `text` holds.
    pub fn of(&mut self, input: &Prepared, text: &str) -> &[u32] {
        let hash = blake3::hash(text.as_bytes());
        self.by_hash
            .entry(hash)
            .or_insert_with(|| input.values.scan(text))
    }
}

/// Checks turn number `k` (an index into `input.turns`) against the context the strategy gave
/// for the history before it, adding to `score`. Returns the positions of the items the turn
/// recalls, in order (each one more request for the replay to price).
pub fn check_turn(
    input: &Prepared,
    k: usize,
    context: &Context,
    cache: &mut SegmentValues,
    score: &mut Survival,
    explain: bool,
) -> Vec<usize> {
    let used = input.used_values(k);
    score.turns += 1;
    let mut recalled: Vec<usize> = Vec::new();
    if used.is_empty() {
        return recalled;
    }
    // Copies of the cached sets: the cache may grow (and move) while segments are looked up.
    let sets: Vec<Vec<u32>> = context
        .segments
        .iter()
        .filter(|s| s.kind != SegmentKind::Stub)
        .map(|s| cache.of(input, &s.text).to_vec())
        .collect();
    let recoverable: Vec<usize> = if context.recall_offered {
        let mut r: Vec<usize> = context
            .recoverable
            .iter()
            .filter_map(|id| input.index_of.get(id).copied())
            .collect();
        // The latest original first: the one the model would ask for.
        r.sort_unstable_by(|a, b| b.cmp(a));
        r
    } else {
        Vec::new()
    };
    let t = input.turns[k];
    let mut missed_here = false;
    for (v, source) in used {
        score.used_values += 1;
        let visible = sets.iter().any(|set| set.binary_search(&v).is_ok());
        let recall_from = if visible {
            None
        } else {
            recalled
                .iter()
                .chain(recoverable.iter())
                .find(|&&i| input.item_values[i].binary_search(&v).is_ok())
                .copied()
        };
        let recovered = recall_from.is_some();
        if let Some(i) = recall_from
            && !recalled.contains(&i)
        {
            recalled.push(i);
            score.recalls += 1;
            score.recalled_tokens += input.tokens[i];
        }
        score.recovered_values += usize::from(recovered);
        if !visible && !recovered {
            score.missed_values += 1;
            missed_here = true;
            if explain {
                score.misses.push(Miss {
                    turn: t,
                    turn_id: input.conversation.items[t].id.clone(),
                    value: input.values.value(v).to_owned(),
                    source_id: input.conversation.items[source].id.clone(),
                    source,
                });
            }
        }
    }
    if missed_here {
        score.turns_with_miss += 1;
    }
    recalled
}
