//! `mask-observations`: old tool outputs replaced by a recallable stub, in cache-aware steps.
//!
//! Observation masking (the JetBrains study of SWE-agent contexts: replace every tool output
//! older than the last few agent turns by a placeholder) halves the cost of long sessions
//! without a prompt cache. With one, every mask is an edit inside history: the request that
//! carries it writes everything after the edit to the cache again. So the masking here is done
//! in *steps*, priced with the cost model of `ctxgc compile --preset cache-stable`
//! ([`ctxgc_core::session::CacheModel`]): before each request, the outputs older than the last
//! `keep` agent turns that are not masked yet are the candidates, and they are masked together
//! only when
//!
//! `net = S × ((T − 1) × read + write) − F × (write − read) > 0` and `S ≥ min-reclaim`
//!
//! with `S` the tokens the masks remove, `F` the tokens, before the step, from the first masked
//! output to the end of what the previous request held (the cached suffix the step makes the
//! provider write again; what arrived since is written either way), and `T` the requests the
//! step is expected to serve (`max(4, agent turns so far / 2)`, as ctxgc prices its steps). `eager=1` masks on every request instead,
//! whatever it costs, for comparison.
//!
//! A masked output's stub names its item and the recall tool (`ctxgc_recall`), so the request
//! offers recall: a masked value the agent uses later is a recall (priced by the replay), not a
//! loss. The step schedule is a pure function of the conversation, computed once per
//! conversation; the request before turn `t` carries the steps taken up to it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::context::{
    Context, Segment, SegmentKind, is_tool_output, item_text, with_outputs_cleared,
};
use crate::prepare::Prepared;
use crate::strategy::ctxgc::RECALL_TOOL;
use crate::strategy::{Params, Prefix, SpecError, Strategy, StrategyError};

/// One masking step: taken on the request before the item at `at`, masking `items`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    at: usize,
    items: Vec<usize>,
}

/// A conversation's masking plan: the steps, and each masked item's stub text.
#[derive(Debug, Default)]
struct Schedule {
    steps: Vec<Step>,
    stubs: HashMap<usize, String>,
}

/// Mask tool outputs older than the last `keep` agent turns, in steps that pay.
pub struct MaskObservations {
    name: String,
    keep: usize,
    eager: bool,
    min_reclaim: usize,
    model: crate::replay::CacheModel,
    schedules: Mutex<HashMap<(String, String), Arc<Schedule>>>,
}

/// Builds `mask-observations` (parameters `keep` (default 3), `eager` (0 or 1, default 0),
/// `min-reclaim` (default 1,024 tokens)).
pub fn build(spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&["keep", "eager", "min-reclaim"])?;
    let eager = match params.number("eager", 0)? {
        0 => false,
        1 => true,
        other => {
            return Err(SpecError::Parameter {
                strategy: params.strategy.clone(),
                message: format!("eager={other}: expected 0 or 1"),
            });
        }
    };
    Ok(Box::new(MaskObservations {
        name: spec.to_owned(),
        keep: params.number("keep", 3)?,
        eager,
        min_reclaim: params.number("min-reclaim", 1024)?,
        model: crate::replay::CacheModel::default(),
        schedules: Mutex::new(HashMap::new()),
    }))
}

/// The stub a masked output of item `id` becomes.
fn stub_text(input: &Prepared, i: usize) -> String {
    let id = &input.conversation.items[i].id;
    let placeholder = format!(
        "[ctxgc: observation masked; call {RECALL_TOOL} with id \"{id}\" for the full output]"
    );
    match with_outputs_cleared(&input.conversation.items[i], &placeholder) {
        Some(item) => item_text(&item),
        None => format!("{placeholder}\n"),
    }
}

impl MaskObservations {
    /// The masking steps over the whole conversation. Each step depends only on the items
    /// before its request, so the plan for a prefix is this plan cut at the prefix.
    fn schedule(&self, input: &Prepared) -> Schedule {
        let tokenizer = input.options.tokenizer;
        let n = input.conversation.items.len();
        let mut cost: Vec<usize> = (0..n)
            .map(|i| {
                if input.rendered(i) {
                    input.tokens[i]
                } else {
                    0
                }
            })
            .collect();
        let mut masked = vec![false; n];
        let mut schedule = Schedule::default();
        let (read, write) = (self.model.cache_read, self.model.cache_write);
        for (j, &t) in input.turns.iter().enumerate() {
            if t == 0 || j < self.keep {
                continue;
            }
            let cutoff = input.turns[j - self.keep];
            let candidates: Vec<(usize, String, usize)> = (0..cutoff)
                .filter(|&i| {
                    !masked[i] && input.rendered(i) && is_tool_output(&input.conversation.items[i])
                })
                .filter_map(|i| {
                    let stub = stub_text(input, i);
                    let after = tokenizer.count(&stub);
                    (after < cost[i]).then_some((i, stub, after))
                })
                .collect();
            let Some(&(first, _, _)) = candidates.first() else {
                continue;
            };
            let saved: usize = candidates.iter().map(|(i, _, a)| cost[*i] - a).sum();
            // What the previous request held (the items before the previous agent turn) is
            // cached; the step makes the provider write it again from the first mask on, the
            // removed tokens included in the price of the read it replaces. Items that arrived
            // since are written either way.
            let held = if j == 0 {
                first
            } else {
                input.turns[j - 1].max(first)
            };
            let cached: usize = cost[first..held].iter().sum();
            // As ctxgc prices its steps (`session::cache`): a step must pay even when the
            // session ends sooner than it has lasted.
            let turns = (j as f64 / 2.0).max(4.0);
            let net =
                saved as f64 * ((turns - 1.0) * read + write) - cached as f64 * (write - read);
            let take = if self.eager {
                saved > 0
            } else {
                net > 0.0 && saved >= self.min_reclaim
            };
            if !take {
                continue;
            }
            let mut items = Vec::with_capacity(candidates.len());
            for (i, stub, after) in candidates {
                masked[i] = true;
                cost[i] = after;
                schedule.stubs.insert(i, stub);
                items.push(i);
            }
            schedule.steps.push(Step { at: t, items });
        }
        schedule
    }

    fn schedule_of(&self, input: &Prepared) -> Arc<Schedule> {
        let key = (input.source.clone(), input.conversation.id.clone());
        if let Ok(cache) = self.schedules.lock()
            && let Some(s) = cache.get(&key)
        {
            return Arc::clone(s);
        }
        let schedule = Arc::new(self.schedule(input));
        if let Ok(mut cache) = self.schedules.lock() {
            cache.insert(key, Arc::clone(&schedule));
        }
        schedule
    }
}

impl Strategy for MaskObservations {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!(
            "tool outputs older than the last {} agent turns become a stub naming {RECALL_TOOL}, {}",
            self.keep,
            if self.eager {
                "masked on every request".to_owned()
            } else {
                format!(
                    "in steps taken only when they pay under the prompt cache (at least {} tokens)",
                    self.min_reclaim
                )
            }
        )
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let schedule = self.schedule_of(input);
        let mut masked = vec![false; prefix.len];
        for step in schedule.steps.iter().filter(|s| s.at <= prefix.len) {
            for &i in &step.items {
                if i < prefix.len {
                    masked[i] = true;
                }
            }
        }
        let mut context = Context {
            recall_offered: true,
            ..Context::default()
        };
        for i in (0..prefix.len).filter(|&i| input.rendered(i)) {
            match schedule.stubs.get(&i).filter(|_| masked[i]) {
                Some(stub) => {
                    context.segments.push(Segment {
                        text: stub.clone(),
                        kind: SegmentKind::Stub,
                    });
                    context
                        .recoverable
                        .insert(input.conversation.items[i].id.clone());
                }
                None => context.segments.push(input.segment(i)),
            }
        }
        context.items_kept = context.segments.len();
        Ok(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three calls, each answered, then a closing answer: items 0 user, 1/3/5 calls, 2/4/6
    /// results, 7 the answer; agent turns at 1, 3, 5, 7.
    fn three_reads() -> Prepared {
        let mut messages = vec![serde_json::json!({"role": "user", "content": "read them"})];
        for k in 0..3 {
            let id = format!("c{k}");
            messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"n\": {k}}}")}}
            ]}));
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": format!("file {k}")}));
        }
        messages.push(serde_json::json!({"role": "assistant", "content": "done"}));
        let text = serde_json::Value::Array(messages).to_string();
        let options = ctxgc_core::Options::default();
        let conversation = ctxgc_core::frontend::lower_conversations(&text, &options)
            .expect("the chat lowers")
            .remove(0);
        Prepared::new("hand-made".into(), conversation, options, None)
    }

    fn keeping(keep: usize) -> MaskObservations {
        MaskObservations {
            name: format!("mask-observations:keep={keep}"),
            keep,
            eager: false,
            min_reclaim: 1024,
            model: crate::replay::CacheModel::default(),
            schedules: Mutex::new(HashMap::new()),
        }
    }

    #[test]
    fn a_large_output_that_arrived_since_the_last_request_does_not_count_against_a_step() {
        let mut input = three_reads();
        assert_eq!(input.turns, vec![1, 3, 5, 7]);
        // Before turn 5 the first result (item 2) is older than the last agent turn. The
        // previous request (before turn 3) held items 0..3; item 4, a huge result, arrived
        // since and is written to the cache whatever is decided.
        input.tokens[2] = 5_000;
        input.tokens[4] = 50_000;
        let schedule = keeping(1).schedule(&input);
        let first = schedule.steps.first().expect("a step is taken");
        assert_eq!((first.at, first.items.as_slice()), (5, &[2][..]));
        // The step pays: 5,000 tokens read at 0.1 on each later request and not written
        // again on this one, against the 5,000 cached tokens from item 2 on written again.
        // Charging the new 50,000 as a miss would have refused it.
    }

    #[test]
    fn a_step_that_rewrites_more_cached_history_than_it_repays_is_not_taken() {
        let mut input = three_reads();
        // Keeping two agent turns, before turn 7 only the first result (item 2) is old
        // enough; the previous request (before turn 5) held items 0..5.
        input.tokens[2] = 1_500;
        input.tokens[4] = 100;
        let taken = keeping(2).schedule(&input);
        assert_eq!(
            taken
                .steps
                .iter()
                .map(|s| (s.at, s.items.clone()))
                .collect::<Vec<_>>(),
            vec![(7, vec![2])],
            "a small cached suffix behind it: the step pays"
        );
        // The same step with a large cached result behind it would make the provider write
        // that result again, which the requests left do not repay.
        input.tokens[4] = 20_000;
        assert!(keeping(2).schedule(&input).steps.is_empty());
    }
}
