//! One conversation made ready for the bench: its items rendered and counted once, its agent
//! turns found, the values each turn uses indexed, its probes read, and the size the
//! truncation strategies match.

use std::collections::HashMap;

use ctxgc_core::frontend::Conversation;
use ctxgc_core::ir::{Block, Kind};
use ctxgc_core::{Options, Tokenizer};

use crate::context::{is_agent_turn, is_structure, is_system, item_text};
use crate::probes::Probes;
use crate::values::{Candidate, ValueIndex, argument_candidates, text_candidates};

/// The size of ctxgc's output on the whole conversation, which the truncation strategies match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// Items ctxgc keeps (as they are or rewritten), system prompts not counted.
    pub items: usize,
    /// Tokens of ctxgc's output, counted as the bench counts every context.
    pub tokens: usize,
}

/// A value a turn uses, resolved against the vocabulary: a whole argument (falling back to its
/// words when the whole never appeared earlier) or a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnValue {
    /// A whole string or number argument, and its value-like words.
    Whole {
        /// Vocabulary id of the whole value.
        value: u32,
        /// Vocabulary ids of its words.
        words: Vec<u32>,
    },
    /// A value-like word.
    Word(u32),
}

/// A conversation with everything the bench computes once.
#[derive(Debug)]
pub struct Prepared {
    /// The file it came from.
    pub source: String,
    /// The lowered conversation.
    pub conversation: Conversation,
    /// Options it was lowered with (strategies compile with the same).
    pub options: Options,
    /// Each item's uncompacted text ([`crate::context::item_text`]).
    pub texts: Vec<String>,
    /// Each item's exact token count.
    pub tokens: Vec<usize>,
    /// Position of each item id.
    pub index_of: HashMap<String, usize>,
    /// Positions of the agent's turns (a request is replayed before each one after the first item).
    pub turns: Vec<usize>,
    /// The values each turn uses (parallel to `turns`).
    pub turn_values: Vec<Vec<TurnValue>>,
    /// The vocabulary of every value any turn uses.
    pub values: ValueIndex,
    /// For each value id, the sorted positions of the items whose text holds it.
    pub postings: Vec<Vec<usize>>,
    /// For each item, the sorted ids of the values its text holds.
    pub item_values: Vec<Vec<u32>>,
    /// The tracegc probes the input defines, if any.
    pub probes: Option<Probes>,
    /// The size truncation matches, or why it is unknown.
    pub calibration: Result<Calibration, String>,
    /// A projection learned from the *other* conversations of the same input (leave-one-out),
    /// set by the runner when a strategy asks for it.
    pub projection: Option<ctxgc_core::projection::Projection>,
}

impl Prepared {
    /// Prepares a conversation (the calibration is set by the runner afterwards).
    pub fn new(
        source: String,
        conversation: Conversation,
        options: Options,
        probes: Option<Probes>,
    ) -> Self {
        let tokenizer: Tokenizer = options.tokenizer;
        let texts: Vec<String> = conversation.items.iter().map(item_text).collect();
        let tokens: Vec<usize> = texts.iter().map(|t| tokenizer.count(t)).collect();
        let index_of: HashMap<String, usize> = conversation
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| (item.id.clone(), i))
            .collect();
        let turns: Vec<usize> = conversation
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| is_agent_turn(item))
            .map(|(i, _)| i)
            .collect();

        // Candidates per turn, then one vocabulary for the whole conversation.
        let candidates: Vec<Vec<Candidate>> = turns
            .iter()
            .map(|&t| turn_candidates(&conversation.items[t].kind))
            .collect();
        let mut vocabulary: Vec<String> = Vec::new();
        let mut id_of: HashMap<String, u32> = HashMap::new();
        let mut intern = |v: &str| -> u32 {
            if let Some(&id) = id_of.get(v) {
                return id;
            }
            let id = vocabulary.len() as u32;
            vocabulary.push(v.to_owned());
            id_of.insert(v.to_owned(), id);
            id
        };
        let turn_values: Vec<Vec<TurnValue>> = candidates
            .iter()
            .map(|cs| {
                cs.iter()
                    .map(|c| match c {
                        Candidate::Whole { value, words } => TurnValue::Whole {
                            value: intern(value),
                            words: words.iter().map(|w| intern(w)).collect(),
                        },
                        Candidate::Word(w) => TurnValue::Word(intern(w)),
                    })
                    .collect()
            })
            .collect();
        let values = ValueIndex::new(vocabulary);
        let item_values: Vec<Vec<u32>> = texts.iter().map(|t| values.scan(t)).collect();
        let mut postings = vec![Vec::new(); values.len()];
        for (i, ids) in item_values.iter().enumerate() {
            for &v in ids {
                postings[v as usize].push(i);
            }
        }
        Prepared {
            source,
            conversation,
            options,
            texts,
            tokens,
            index_of,
            turns,
            turn_values,
            values,
            postings,
            item_values,
            probes,
            calibration: Err("not calibrated yet".into()),
            projection: None,
        }
    }

    /// The latest item before position `before` whose text holds value `v`.
    pub fn latest_source(&self, v: u32, before: usize) -> Option<usize> {
        let list = &self.postings[v as usize];
        let n = list.partition_point(|&i| i < before);
        n.checked_sub(1).map(|k| list[k])
    }

    /// The values turn number `k` (an index into `turns`) uses: those that appeared in an item
    /// before it. Each is given with the latest item that held it.
    pub fn used_values(&self, k: usize) -> Vec<(u32, usize)> {
        let t = self.turns[k];
        let mut used: Vec<(u32, usize)> = Vec::new();
        let push = |v: u32, used: &mut Vec<(u32, usize)>| -> bool {
            match self.latest_source(v, t) {
                Some(src) => {
                    if !used.iter().any(|(u, _)| *u == v) {
                        used.push((v, src));
                    }
                    true
                }
                None => false,
            }
        };
        for tv in &self.turn_values[k] {
            match tv {
                TurnValue::Whole { value, words } => {
                    if !push(*value, &mut used) {
                        for &w in words {
                            push(w, &mut used);
                        }
                    }
                }
                TurnValue::Word(w) => {
                    push(*w, &mut used);
                }
            }
        }
        used
    }

    /// Item `i` as an uncompacted segment (its text rendered once, in [`Prepared::texts`]).
    pub fn segment(&self, i: usize) -> crate::context::Segment {
        crate::context::Segment {
            text: self.texts[i].clone(),
            kind: if crate::context::is_tool_output(&self.conversation.items[i]) {
                crate::context::SegmentKind::ToolOutput
            } else {
                crate::context::SegmentKind::Content
            },
        }
    }

    /// Positions of system prompts.
    pub fn system_items(&self) -> usize {
        self.conversation
            .items
            .iter()
            .filter(|i| is_system(i))
            .count()
    }

    /// True when item `i` is rendered at all (structure items are not).
    pub fn rendered(&self, i: usize) -> bool {
        !is_structure(&self.conversation.items[i])
    }

    /// The prefix of the first `len` items as the input format's JSON list, each item's
    /// original bytes unchanged: what an agent's history is at that point. Two items are not
    /// list entries in their format, and are given as the request field they came from:
    /// an Anthropic system prompt (`{"system": ..., "messages": [...]}`) and a Responses
    /// input given as a bare string (`{"input": "..."}`).
    pub fn prefix_json(&self, len: usize) -> String {
        let items = &self.conversation.items[..len];
        let wire = self.conversation.format.wire();
        match (wire.system_key(), items.first()) {
            (Some(system_key), Some(first)) if is_system(first) => format!(
                "{{\"{system_key}\":{},\"{}\":{}}}",
                first.raw,
                wire.items_key(),
                json_list(&items[1..])
            ),
            (_, Some(first))
                if wire.items_may_be_string() && first.raw.trim_start().starts_with('"') =>
            {
                format!("{{\"{}\":{}}}", wire.items_key(), first.raw)
            }
            _ => json_list(items),
        }
    }
}

/// Items' original bytes as a JSON list.
fn json_list(items: &[ctxgc_core::Item]) -> String {
    let mut out = String::from("[");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push_str(",\n");
        }
        out.push_str(&item.raw);
    }
    out.push(']');
    out
}

/// Sets each conversation's [`Prepared::projection`] to the projection learned from all the
/// others of `group` (leave-one-out): usage is observed once per conversation and each one's
/// counts are subtracted from the total, so the cost is linear in the conversations.
///
/// The projection is learned with the recall-backed rules
/// ([`LearnOptions::recallable`](ctxgc_core::projection::LearnOptions::recallable)): every
/// strategy that applies a projection also offers the recall tool, so a hidden value is one
/// recall away, never lost.
pub fn learn_leave_one_out(group: &mut [Prepared]) {
    use ctxgc_core::projection::counts::observe_run;
    use ctxgc_core::projection::measure::MeasureOptions;
    use ctxgc_core::projection::{Counts, LearnOptions, Projection, Run};
    let Some(first) = group.first() else { return };
    let options = MeasureOptions {
        learn: LearnOptions::recallable(),
        tokenizer: first.options.tokenizer,
        ..MeasureOptions::default()
    };
    let observed: Vec<Counts> = group
        .iter()
        .map(|p| {
            let run = Run::from_items(p.conversation.id.clone(), &p.conversation.items);
            observe_run(&run, &options.usage, options.tokenizer).counts
        })
        .collect();
    let total = Counts::sum(observed.iter());
    for (p, own) in group.iter_mut().zip(&observed) {
        p.projection = Some(Projection::learn(
            &total.without(own),
            &options.learn,
            options.tokenizer,
        ));
    }
}

/// What a turn uses: a tool call's arguments, an assistant message's text and calls, a
/// decision's content.
fn turn_candidates(kind: &Kind) -> Vec<Candidate> {
    match kind {
        Kind::ToolCall(call) => argument_candidates(&call.arguments),
        Kind::Note { content, .. } => text_candidates(content),
        Kind::Message(m) => {
            let mut out = Vec::new();
            for block in &m.blocks {
                match block {
                    Block::Text { text } => out.extend(text_candidates(text)),
                    Block::ToolCall(call) => out.extend(argument_candidates(&call.arguments)),
                    _ => {}
                }
            }
            out
        }
        _ => Vec::new(),
    }
}
