//! Cache-stable compilation: the earlier output stays a byte-stable prefix, and compaction of
//! history happens in deliberate, reported steps that pay for themselves.
//!
//! Provider prompt caches are prefix caches: a cached prefix costs a fraction of fresh input
//! (`read_multiplier`, 0.1 by default), and any edit inside the history makes everything after
//! it fresh input plus a cache write (`write_multiplier`, 1.25). So in this mode:
//!
//! - **Decisions that are stable on arrival are applied on arrival.** A decision about item
//!   `i` that depends only on items up to `i` (compacting a tool output as it comes in, a
//!   result identical to an earlier one) never changes an earlier prefix; it is taken the
//!   moment the item arrives. A state block is the exception: it moves into the register,
//!   which sits in the cached prefix, so it stays in its message until a step moves it (the
//!   register shows the state as of the last step, the messages after it say the rest).
//! - **Decisions about items already sent are deferred** (a value superseded later, a read made
//!   stale by a later edit) and applied together in one compaction step, only when the step
//!   pays for itself.
//! - **When to step is a pure function of the session so far.** A step is considered at every
//!   check point — after each item that is not an assistant turn (the moments a request can be
//!   sent) — with the effective plan `E` (frozen decisions before the last step, arrival
//!   decisions after it) against the eager plan `P` (everything decided now):
//!
//!   `S` = tokens saved (`E` − `P`), `F` = tokens of `E` from the first item whose decision
//!   changes up to the items the previous request held (the items before the latest agent
//!   turn that followed a check point: the cached suffix the step makes the provider write
//!   again), `T` = expected requests the step serves, this one included
//!   (`max(min_expected_turns, assistant turns so far / 2)`: a session seen at a random point
//!   of its life has as long again to go at the median, and a step must still pay when it
//!   ends sooner — the last steps of a session never see the requests the median promises,
//!   and with the full median a 273-message coding session replayed at 1.015 of `full`). Items that arrived since the previous request are written
//!   whatever is decided. Over the next `T` requests the step changes the input bill by
//!
//!   `net = S × ((T − 1) × read + write) − F × (write − read)`
//!
//!   (this request writes the cached suffix again, less the `S` tokens removed, instead of
//!   reading it; every later request reads `S` fewer tokens). A change to an item that arrived
//!   since the previous request saves at the write price on this request, and invalidates
//!   nothing of its own. The step is taken when `net > 0` and, if it changes an item the
//!   previous request held, `S ≥ min_reclaim_tokens` (like a provider's `clear_at_least`); a
//!   step among items not sent yet breaks no cached prefix and is taken for any saving.
//!
//! Because steps depend only on the items, a stateless caller that compiles each successive
//! prefix of a session gets exactly the outputs of a long-lived [`Session`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cache_model::CacheModel;
use super::{ItemPlan, Session};
use crate::ir::{Block, Kind, plain_value};
use crate::plan::{Action, Reason, Verdict};
use crate::tokens::Tokenizer;

/// One compaction step, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionStep {
    /// Items in the session when the step was taken.
    pub at: usize,
    /// Ids of the items whose decision the step changed.
    pub items: Vec<String>,
    /// Tokens the step removes from every later request.
    pub tokens_saved: usize,
    /// Tokens from the first changed item on: the prefix cache misses this step causes.
    pub prefix_tokens_invalidated: usize,
    /// Requests the step was assumed to serve.
    pub expected_turns: f64,
    /// Estimated change of the input bill over those requests, in fresh-token units (positive: saved).
    pub estimated_net: f64,
}

/// What cache-stable mode keeps between compiles.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct CacheState {
    model: CacheModel,
    /// Items before this use `frozen`; items from it on use `arrival`.
    boundary: usize,
    frozen: Vec<ItemPlan>,
    arrival: Vec<ItemPlan>,
    /// Token cost of each item as given.
    cost_kept: Vec<usize>,
    assistant_turns: usize,
    /// Items the previous request held (those before the latest agent turn that followed a
    /// check point): cached at a step, while the items after them are new. Absent from
    /// snapshots written before it (0: every item priced as new, the earlier estimate's
    /// optimism on the first request after loading).
    #[serde(default)]
    sent: usize,
    steps: Vec<CompactionStep>,
    /// For items before `boundary`: the step that last changed the item's plan (`None`: the
    /// plan is still the one decided on arrival). Absent from snapshots written before it.
    #[serde(default)]
    changed_at_step: Vec<Option<usize>>,
    /// The last item whose state block stayed in its message on arrival: a step that covers it
    /// moves the block into the register, which it rewrites at the head of the cached prefix.
    #[serde(default)]
    last_deferred_state: Option<usize>,
    /// The risk budget of lossy decisions taken on arrival (see [`RiskBudget`]).
    #[serde(default)]
    risk: RiskBudget,
    /// What pricing a step keeps between check points. Not stored: rebuilt at the first check
    /// point after loading.
    #[serde(skip)]
    tracker: Option<Tracker>,
}

/// What the session has banked against sending everything, and what its lossy decisions may
/// still cost.
///
/// A projection hides fields on arrival, on the promise that the model can call the recall
/// tool for them. A recall is one more request: the context read from the cache and the
/// original written to it. In a short session that one request can cost more than the trim
/// saved, and the session then bills more than `full` would have. So a trim on arrival is
/// taken only while what the session has saved so far against `full` (priced request by
/// request, as the provider bills: the previous request's tokens read from the cache, the
/// rest written), plus what the trim saves on the request it is about to join, covers a
/// recall of every trim taken so far and of this one. A trim refused stays refused: its
/// item gets what the other passes decide (the lossless re-encoding, say), on arrival and in
/// every later step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RiskBudget {
    /// Fresh-token units saved against `full`, over the requests so far.
    banked: f64,
    /// The price of a recall of each lossy decision taken so far, summed.
    reserved: f64,
    /// Tokens of the previous request: as given (`full`) and as compiled.
    full_sent: usize,
    ours_sent: usize,
    /// Tokens of the items as given, summed.
    kept_total: usize,
    /// The first item a compaction step changed since the previous request (its suffix is
    /// written again).
    invalidated_from: Option<usize>,
    /// Items whose trim on arrival the budget refused.
    refused: std::collections::BTreeSet<usize>,
}

/// What a check point keeps so that it costs what moved since the previous one, not the
/// whole session (a check point follows nearly every item, so walking every earlier item
/// made a session quadratic: 9 s for a 10k-message chat).
#[derive(Debug, Clone, Default)]
struct Tracker {
    /// The eager plan of each item, as of the last check point.
    eager: Vec<ItemPlan>,
    /// Tokens of each item under its eager plan.
    eager_cost: PrefixSums,
    /// Tokens of each item under the plan in force.
    effective_cost: PrefixSums,
    /// The items whose eager plan differs from the plan in force, with the tokens the eager
    /// plan saves on each (negative: it costs more).
    differs: BTreeMap<usize, i64>,
    /// The sum of `differs`.
    saved: i64,
    /// Earlier items whose eager plan may have moved since the last check point.
    moved: Vec<usize>,
}

/// Integer values with their prefix sums, both updated in O(log n) (a Fenwick tree).
#[derive(Debug, Clone, Default)]
struct PrefixSums {
    values: Vec<i64>,
    tree: Vec<i64>,
}

impl PrefixSums {
    fn push(&mut self, value: i64) {
        let i = self.values.len();
        self.values.push(value);
        // Node `i` (1-based `i + 1`) holds the sum of the `lowbit(i + 1)` values ending at
        // `i`: O(log n) amortised.
        let low = (i + 1) & (i + 1).wrapping_neg();
        self.tree.push(self.values[i + 1 - low..].iter().sum());
    }

    fn get(&self, i: usize) -> i64 {
        self.values[i]
    }

    fn set(&mut self, i: usize, value: i64) {
        let delta = value - self.values[i];
        if delta == 0 {
            return;
        }
        self.values[i] = value;
        let mut n = i + 1;
        while n <= self.tree.len() {
            self.tree[n - 1] += delta;
            n += n & n.wrapping_neg();
        }
    }

    /// The sum of the values before `end`.
    fn sum_before(&self, end: usize) -> i64 {
        let mut n = end.min(self.tree.len());
        let mut sum = 0;
        while n > 0 {
            sum += self.tree[n - 1];
            n -= n & n.wrapping_neg();
        }
        sum
    }

    /// The sum of the values in `range`.
    fn sum(&self, range: std::ops::Range<usize>) -> i64 {
        if range.start >= range.end {
            return 0;
        }
        self.sum_before(range.end) - self.sum_before(range.start)
    }
}

/// When the decision in force for an item was taken, in cache-stable mode: what a renderer
/// may group by without rewriting text the provider has already cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionEpoch {
    /// Not in cache-stable mode: every decision is taken now, and may be grouped freely.
    Eager,
    /// Decided when item `.0` arrived: its text was final then, so it is grouped with nothing.
    Arrival(usize),
    /// Changed by compaction step `.0`: grouped only with what the same step changed.
    Step(usize),
}

impl CacheState {
    pub(super) fn new(model: CacheModel) -> Self {
        CacheState {
            model,
            boundary: 0,
            frozen: Vec::new(),
            arrival: Vec::new(),
            cost_kept: Vec::new(),
            assistant_turns: 0,
            sent: 0,
            steps: Vec::new(),
            changed_at_step: Vec::new(),
            last_deferred_state: None,
            risk: RiskBudget::default(),
            tracker: None,
        }
    }

    pub(super) fn effective(&self, i: usize) -> Option<&ItemPlan> {
        if i < self.boundary {
            self.frozen.get(i)
        } else {
            self.arrival.get(i)
        }
    }
}

/// The text of one block as the model reads it, with a rewrite substituted.
fn block_text(block: &Block) -> String {
    match block {
        Block::Text { text } => text.clone(),
        Block::ToolCall(call) => format!("{}{}", call.name, call.arguments),
        Block::ToolResult(out) => plain_value(&out.output),
        Block::Thinking | Block::Other => String::new(),
    }
}

impl Session {
    /// Switches this still empty session to cache-stable compilation. A session that already
    /// holds items keeps compiling as it did: its items were decided with the eager plan.
    pub fn enable_cache_stable(&mut self, model: CacheModel) {
        if self.items.is_empty() {
            self.cache = Some(CacheState::new(model));
        }
    }

    /// In cache-stable mode, the number of items covered by the last compaction step (the
    /// items whose decisions are frozen); `None` when the mode is off.
    pub fn cache_boundary(&self) -> Option<usize> {
        self.cache.as_ref().map(|c| c.boundary)
    }

    /// When the decision in force for item `i` was taken (see [`DecisionEpoch`]).
    pub fn decision_epoch(&self, i: usize) -> DecisionEpoch {
        match &self.cache {
            None => DecisionEpoch::Eager,
            Some(cache) => match cache.changed_at_step.get(i).copied().flatten() {
                Some(step) if i < cache.boundary => DecisionEpoch::Step(step),
                _ => DecisionEpoch::Arrival(i),
            },
        }
    }

    /// In cache-stable mode, checks that the plans kept between check points are the ones the
    /// passes give now. Passes report every earlier item whose plan a new item moves, so that
    /// a check point costs what moved rather than the whole session; a plan that moved
    /// unreported would make a long-lived session decide otherwise than a batch compile.
    /// `Err` names the first such item. `Ok` outside cache-stable mode.
    ///
    /// ```
    /// use ctxgc_core::{Session, frontend::events::lower_events, session::CacheModel};
    /// let trace = r#"[
    ///   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
    ///   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20}
    /// ]"#;
    /// let mut session = Session::new(Default::default());
    /// session.enable_cache_stable(CacheModel::default());
    /// for item in lower_events(trace, &Default::default()).unwrap() {
    ///     session.append(item).unwrap();
    ///     session.compile();
    ///     assert_eq!(session.check_tracked_plans(), Ok(()));
    /// }
    /// ```
    pub fn check_tracked_plans(&self) -> Result<(), String> {
        match self.cache.as_ref().and_then(|c| c.tracker.as_ref()) {
            Some(tracker) => match self.untracked_move(tracker) {
                Some(i) => Err(format!(
                    "item {i} ({}): its plan changed and no pass reported it",
                    self.items[i].id
                )),
                None => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// The first item whose tracked plan differs from its plan now, other than those
    /// reported as moved since the last check point.
    fn untracked_move(&self, tracker: &Tracker) -> Option<usize> {
        let pending: std::collections::BTreeSet<usize> = tracker.moved.iter().copied().collect();
        (tracker.eager.iter().enumerate())
            .find(|&(i, plan)| !pending.contains(&i) && *plan != self.target_plan_of(i))
            .map(|(i, _)| i)
    }

    /// The compaction steps taken so far (cache-stable mode).
    pub fn compaction_steps(&self) -> &[CompactionStep] {
        self.cache.as_ref().map_or(&[], |c| c.steps.as_slice())
    }

    /// Tokens the model reads for item `i` under `plan`.
    fn cost_under(&self, i: usize, plan: &ItemPlan, kept: usize) -> usize {
        match plan.verdict.as_ref() {
            None => kept,
            // A retired event still names its id in a (shared) stub line.
            Some(v) if v.action == Action::Retire => match &self.items[i].kind {
                Kind::Message(_) => 0,
                _ => self.cache.as_ref().map_or(0, |c| {
                    c.model.tokenizer.count(&format!(" {}", self.items[i].id))
                }),
            },
            Some(v) => self.rewritten_cost(i, v),
        }
    }

    fn rewritten_cost(&self, i: usize, verdict: &Verdict) -> usize {
        let Some(cache) = &self.cache else { return 0 };
        let tok = cache.model.tokenizer;
        match &self.items[i].kind {
            Kind::Message(m) => m
                .blocks
                .iter()
                .enumerate()
                .map(
                    |(b, block)| match verdict.rewrites.iter().find(|r| r.block == b) {
                        Some(r) => tok.count(&r.text),
                        None => tok.count(&block_text(block)),
                    },
                )
                .sum(),
            _ => verdict.rewrites.iter().map(|r| tok.count(&r.text)).sum(),
        }
    }

    fn kept_cost(&self, i: usize, tok: Tokenizer) -> usize {
        match &self.items[i].kind {
            Kind::Message(m) => m.blocks.iter().map(|b| tok.count(&block_text(b))).sum(),
            _ => tok.count(&crate::render::prompt::event_line(&self.items[i])),
        }
    }

    /// Cache-stable compile: items are taken one at a time, so that what is decided on arrival
    /// and when steps happen does not depend on how the session was batched.
    pub(super) fn compile_cache_stable(&mut self) {
        let end = self.items.len();
        while self.compiled < end {
            let i = self.compiled;
            self.link_range(i, i + 1);
            let moved = self.compile_range(i, i + 1);
            if let Some(tracker) = self.cache.as_mut().and_then(|c| c.tracker.as_mut()) {
                tracker.moved.extend(moved);
            }
            let Some(tok) = self.cache.as_ref().map(|c| c.model.tokenizer) else {
                return;
            };
            let kept = self.kept_cost(i, tok);
            let is_assistant = self.items[i].kind.is_agent_turn();
            // An agent turn right after a check point is the answer to a request that held
            // every item before it.
            let answers_request = is_assistant && i > 0 && !self.items[i - 1].kind.is_agent_turn();
            if answers_request {
                self.bank_request(i);
            }
            let (mut arrival, defers_state) = self.arrival_plan(i, kept, tok);
            if arrival
                .verdict
                .as_ref()
                .is_some_and(|v| v.reason == Reason::Projection)
            {
                let after = self.cost_under(i, &arrival, kept);
                if !self.risk_allows(i, kept, after) {
                    arrival = self.eager_plan_without(i, Some(Reason::Projection));
                }
            }
            if let Some(cache) = self.cache.as_mut() {
                if answers_request {
                    cache.sent = i;
                }
                cache.risk.kept_total += kept;
                cache.arrival.push(arrival);
                if defers_state {
                    cache.last_deferred_state = Some(i);
                }
                cache.cost_kept.push(kept);
                if is_assistant {
                    cache.assistant_turns += 1;
                }
            }
            if !is_assistant {
                self.consider_step(i + 1);
            }
        }
    }

    /// The plan taken for item `i` on arrival: the eager one, except that an event retired on
    /// arrival keeps its line when a stub of its own would cost at least as much (arrival
    /// stubs are never grouped, so that text already sent never changes; a later step may
    /// still retire it in a shared stub), and a message keeps its state block (then `true`).
    fn arrival_plan(&self, i: usize, kept: usize, tok: Tokenizer) -> (ItemPlan, bool) {
        let eager = self.eager_plan_of(i);
        let keep = ItemPlan {
            verdict: None,
            protected_from: None,
        };
        match (&self.items[i].kind, eager.verdict.as_ref()) {
            // A state block leaves its message for the register, and the register sits in the
            // cached prefix: moving the block there on arrival would rewrite that prefix, and
            // leaving the register as of the last step would hide the declaration from the
            // model. So the block stays where the agent wrote it until a step moves it.
            (Kind::Message(_), Some(v)) if v.reason == crate::plan::Reason::StateBlock => {
                (keep, true)
            }
            (Kind::Message(_), _) => (eager, false),
            (_, Some(v))
                if v.action == Action::Retire
                    && tok.count(&crate::render::prompt::lone_stub(self, i, v)) >= kept =>
            {
                (keep, false)
            }
            _ => (eager, false),
        }
    }

    /// Brings the tracker up to the first `k` items: the plans that may have moved since the
    /// last check point, and the items that arrived, are decided again.
    fn track(&mut self, k: usize) -> Option<Tracker> {
        let cache = self.cache.as_mut()?;
        let mut tracker = cache.tracker.take().unwrap_or_default();
        let known = tracker.eager.len();
        let mut recheck = std::mem::take(&mut tracker.moved);
        recheck.retain(|&i| i < known);
        recheck.sort_unstable();
        recheck.dedup();
        let cache = self.cache.as_ref()?;
        for i in recheck {
            let eager = self.target_plan_of(i);
            // A retirement costs the same whatever supersedes the item (the usual move: a
            // later value names a newer superseder); only then is counting skipped.
            let both_retired = [&eager, &tracker.eager[i]]
                .iter()
                .all(|p| p.action() == Action::Retire);
            if !both_retired {
                let cost = self.cost_under(i, &eager, cache.cost_kept[i]);
                tracker.eager_cost.set(i, cost as i64);
            }
            tracker.eager[i] = eager;
            note_difference(cache, &mut tracker, i);
        }
        for i in known..k {
            let eager = self.target_plan_of(i);
            let kept = cache.cost_kept[i];
            tracker
                .eager_cost
                .push(self.cost_under(i, &eager, kept) as i64);
            let effective = cache
                .effective(i)
                .map_or(kept, |p| self.cost_under(i, p, kept));
            tracker.effective_cost.push(effective as i64);
            tracker.eager.push(eager);
            note_difference(cache, &mut tracker, i);
        }
        // Debug builds check that no pass moved a plan without saying so.
        #[cfg(debug_assertions)]
        if let Some(i) = self.untracked_move(&tracker) {
            panic!("item {i}: its plan changed and no pass reported it");
        }
        Some(tracker)
    }

    /// The plan the session works towards for item `i`: the eager one, but without the trim on
    /// arrival the risk budget refused (the other passes' decisions stand).
    fn target_plan_of(&self, i: usize) -> ItemPlan {
        let refused = self
            .cache
            .as_ref()
            .is_some_and(|c| c.risk.refused.contains(&i));
        self.eager_plan_without(i, refused.then_some(Reason::Projection))
    }

    /// Banks the request that held the items before `i` (see [`RiskBudget`]): what `full`
    /// pays for it less what the compiled session pays, the previous request's tokens read
    /// from the cache (up to the first item a step changed since) and the rest written.
    fn bank_request(&mut self, i: usize) {
        // A session loaded from a snapshot has no tracker yet (it is not stored): rebuild it
        // as the check point before this request did, or a resumed session would skip
        // banking this request and decide otherwise than one that never stopped.
        if self.cache.as_ref().is_some_and(|c| c.tracker.is_none()) {
            let tracker = self.track(i);
            if let Some(cache) = self.cache.as_mut() {
                cache.tracker = tracker;
            }
        }
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        let Some(tracker) = cache.tracker.as_ref() else {
            return;
        };
        let model = &cache.model;
        let risk = &mut cache.risk;
        let full_now = risk.kept_total;
        let ours_now = tracker.effective_cost.sum_before(i).max(0) as usize;
        let unchanged_until = risk.invalidated_from.unwrap_or(cache.sent).min(cache.sent);
        let ours_cached =
            (tracker.effective_cost.sum_before(unchanged_until).max(0) as usize).min(ours_now);
        let full_cached = risk.full_sent.min(full_now);
        let full_bill = full_cached as f64 * model.read_multiplier
            + (full_now - full_cached) as f64 * model.write_multiplier;
        let ours_bill = ours_cached as f64 * model.read_multiplier
            + (ours_now - ours_cached) as f64 * model.write_multiplier;
        risk.banked += full_bill - ours_bill;
        risk.full_sent = full_now;
        risk.ours_sent = ours_now;
        risk.invalidated_from = None;
    }

    /// Whether the risk budget allows a trim on arrival of item `i` (`kept` tokens as given,
    /// `after` trimmed), reserving the price of its recall if so and recording the refusal if
    /// not. The price: the context so far read from the cache, the original written to it.
    fn risk_allows(&mut self, i: usize, kept: usize, after: usize) -> bool {
        let Some(cache) = self.cache.as_mut() else {
            return true;
        };
        let model = &cache.model;
        let risk = &mut cache.risk;
        let context = risk.ours_sent + risk.kept_total.saturating_sub(risk.full_sent) + after;
        let price = context as f64 * model.read_multiplier + kept as f64 * model.write_multiplier;
        let saves_now = kept.saturating_sub(after) as f64 * model.write_multiplier;
        if risk.banked + saves_now >= risk.reserved + price {
            risk.reserved += price;
            true
        } else {
            risk.refused.insert(i);
            false
        }
    }

    fn consider_step(&mut self, k: usize) {
        let Some(mut tracker) = self.track(k) else {
            return;
        };
        let step = self.price_step(&tracker, k);
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        if let Some((mut step, first)) = step {
            cache.risk.invalidated_from =
                Some(cache.risk.invalidated_from.map_or(first, |f| f.min(first)));
            let changed_at: Vec<usize> = tracker.differs.keys().copied().collect();
            step.items = changed_at
                .iter()
                .map(|&i| self.items[i].id.clone())
                .collect();
            let number = cache.steps.len();
            cache.changed_at_step.resize(k, None);
            // The frozen plans become the eager ones. Only the changed items and those that
            // arrived since the last step differ from what is frozen: copying just those keeps
            // a step from costing the whole session.
            if cache.frozen.len() == cache.boundary {
                for &i in changed_at.iter().filter(|&&i| i < cache.boundary) {
                    cache.frozen[i] = tracker.eager[i].clone();
                }
                cache
                    .frozen
                    .extend_from_slice(&tracker.eager[cache.boundary..k]);
            } else {
                cache.frozen = tracker.eager.clone();
            }
            for i in changed_at {
                cache.changed_at_step[i] = Some(number);
            }
            cache.boundary = k;
            cache.steps.push(step);
            // Every plan in force is now the eager one (only the changed items' costs move).
            for &i in tracker.differs.keys() {
                tracker.effective_cost.set(i, tracker.eager_cost.get(i));
            }
            tracker.differs.clear();
            tracker.saved = 0;
        }
        cache.tracker = Some(tracker);
    }

    /// The compaction step worth taking at check point `k` (its items still to be named), if
    /// any.
    /// With the first item it changes (the cached suffix it makes the provider write again).
    fn price_step(&self, tracker: &Tracker, k: usize) -> Option<(CompactionStep, usize)> {
        let cache = self.cache.as_ref()?;
        let model = &cache.model;
        let (&first, _) = tracker.differs.first_key_value()?;
        // Moving a deferred state block into the register rewrites the register, which sits
        // before the first non-system message: the step changes the prompt from there.
        let moves_register = cache
            .last_deferred_state
            .is_some_and(|i| i >= cache.boundary);
        let first = if moves_register {
            first.min(crate::chat::register::register_position(&self.items, None))
        } else {
            first
        };
        let saved = tracker.saved;
        // A step that changes only items the previous request did not hold invalidates no
        // cached prefix: any saving is worth taking. One that reaches into the cached prefix
        // must also reclaim `min_reclaim_tokens`.
        let touches_cache = first < cache.sent;
        if saved <= 0 || (touches_cache && saved < model.min_reclaim_tokens as i64) {
            return None;
        }
        let invalidated = tracker.eager_cost.sum(first..k) as usize;
        // What the suffix from the first change costs this request without the step: what the
        // previous request held is read from the cache, what came since is written.
        let sent = cache.sent.clamp(first, k);
        let unchanged_cost = tracker.effective_cost.sum(first..sent) as f64 * model.read_multiplier
            + tracker.effective_cost.sum(sent..k) as f64 * model.write_multiplier;
        let turns = model
            .min_expected_turns
            .max(cache.assistant_turns as f64 / 2.0);
        let s = saved as f64;
        // This request writes the whole suffix under the new plans instead of paying
        // `unchanged_cost`; each later request reads `S` fewer cached tokens. Pricing this
        // request from the suffix after the step alone credits the removed tokens twice and
        // the items that arrived since the last request as if they had been cached; that took
        // steps that short sessions never repay.
        let net = unchanged_cost - invalidated as f64 * model.write_multiplier
            + (turns - 1.0) * s * model.read_multiplier;
        (net > 0.0).then(|| {
            let step = CompactionStep {
                at: k,
                items: Vec::new(),
                tokens_saved: saved as usize,
                prefix_tokens_invalidated: invalidated,
                expected_turns: turns,
                estimated_net: net,
            };
            (step, first)
        })
    }
}

/// Records whether item `i`'s eager plan differs from the plan in force, and what it saves.
fn note_difference(cache: &CacheState, tracker: &mut Tracker, i: usize) {
    let differs = cache.effective(i).is_some_and(|p| *p != tracker.eager[i]);
    let earlier = if differs {
        let gain = tracker.effective_cost.get(i) - tracker.eager_cost.get(i);
        tracker.saved += gain;
        tracker.differs.insert(i, gain)
    } else {
        tracker.differs.remove(&i)
    };
    tracker.saved -= earlier.unwrap_or(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::events::{EventOptions, lower_events};

    #[test]
    fn prefix_sums_agree_with_summing_every_range() {
        let mut sums = PrefixSums::default();
        let mut values: Vec<i64> = Vec::new();
        for n in 0..37i64 {
            let v = (n * 7919) % 23 - 11;
            sums.push(v);
            values.push(v);
            if n % 3 == 0 {
                let i = (n as usize * 5) % values.len();
                values[i] = -n;
                sums.set(i, -n);
            }
            for start in 0..=values.len() {
                for end in start..=values.len() {
                    assert_eq!(sums.sum(start..end), values[start..end].iter().sum::<i64>());
                }
            }
        }
        assert_eq!(sums.get(3), values[3]);
    }

    fn items(n: usize) -> Vec<crate::ir::Item> {
        let big = "v".repeat(400);
        let text: String = (0..n)
            .map(|i| {
                format!(
                    "{{\"id\":\"e{i}\",\"type\":\"set_var\",\"timestamp\":{i},\"key\":\"k{}\",\"value\":\"{big} {i}\"}}\n",
                    i % 3
                )
            })
            .collect();
        lower_events(&text, &EventOptions::default()).unwrap()
    }

    /// A session compiled cache-stable, stepping for 200 tokens or more.
    fn cache_stable_session() -> Session {
        let mut session = Session::new(Default::default());
        session.enable_cache_stable(CacheModel {
            min_reclaim_tokens: 200,
            ..CacheModel::default()
        });
        session
    }

    /// `items(n)` with the agent acting after every fifth: a request is sent there, so what
    /// came before it is cached.
    fn items_with_requests(n: usize) -> Vec<crate::ir::Item> {
        let text: String = items(n)
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let mut line = format!("{}\n", item.raw);
                if i % 5 == 4 {
                    line.push_str(&format!(
                        "{{\"id\":\"t{i}\",\"type\":\"tool_call\",\"timestamp\":{i},\"tool_name\":\"look\",\"arguments\":{{}}}}\n"
                    ));
                }
                line
            })
            .collect();
        lower_events(&text, &EventOptions::default()).unwrap()
    }

    #[test]
    fn a_trace_never_sent_compiles_as_eagerly_as_it_can() {
        // No agent turn: no request was sent, so no cached prefix stands in the way of any
        // saving, however small.
        let mut session = cache_stable_session();
        session.extend(items(40)).unwrap();
        session.compile();
        for i in 0..40 {
            assert_eq!(session.plan_of(i), session.eager_plan_of(i), "item {i}");
        }
    }

    #[test]
    fn plans_stay_frozen_between_steps_and_steps_pay() {
        let mut session = cache_stable_session();
        let mut previous: Vec<ItemPlan> = Vec::new();
        let mut steps_seen = 0;
        let items = items_with_requests(40);
        let n = items.len();
        for item in items {
            session.append(item).unwrap();
            session.compile();
            let now: Vec<ItemPlan> = (0..previous.len()).map(|i| session.plan_of(i)).collect();
            if session.compaction_steps().len() == steps_seen {
                assert_eq!(now, previous, "no step: earlier plans unchanged");
            } else {
                steps_seen = session.compaction_steps().len();
            }
            previous = (0..session.items().len())
                .map(|i| session.plan_of(i))
                .collect();
        }
        assert!(
            steps_seen > 0,
            "superseded 400-token values make steps worth it"
        );
        for step in session.compaction_steps() {
            assert!(step.estimated_net > 0.0 && step.tokens_saved > 0);
        }
        // Cache-stable compilation retires only what steps reclaimed: never more than eager
        // compilation would have.
        let eager_retired = (0..n)
            .filter(|&i| session.eager_plan_of(i).verdict.is_some())
            .count();
        let retired = (0..n)
            .filter(|&i| session.plan_of(i).verdict.is_some())
            .count();
        assert!(retired <= eager_retired && retired > 0);
    }

    /// A value superseded behind cached history: `e0` is set, `m` other values two thirds its
    /// size follow, the agent acts (so all of it was sent and cached), then `e0`'s key is set
    /// again.
    fn superseded_behind_cached_history(m: usize) -> Vec<crate::ir::Item> {
        let words = |tag: &str, n: usize| -> String {
            (0..n)
                .map(|j| format!("{tag}w{j}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut text = format!(
            "{{\"id\":\"e0\",\"type\":\"set_var\",\"timestamp\":0,\"key\":\"a\",\"value\":\"{}\"}}\n",
            words("a0", 120)
        );
        for i in 1..=m {
            text.push_str(&format!(
                "{{\"id\":\"e{i}\",\"type\":\"set_var\",\"timestamp\":{i},\"key\":\"k{i}\",\"value\":\"{}\"}}\n",
                words(&format!("k{i}"), 80)
            ));
        }
        let t = m + 1;
        text.push_str(&format!(
            "{{\"id\":\"e{t}\",\"type\":\"tool_call\",\"timestamp\":{t},\"tool_name\":\"query\",\"arguments\":{{}}}}\n"
        ));
        let u = m + 2;
        text.push_str(&format!(
            "{{\"id\":\"e{u}\",\"type\":\"set_var\",\"timestamp\":{u},\"key\":\"a\",\"value\":\"new\"}}\n"
        ));
        lower_events(&text, &EventOptions::default()).unwrap()
    }

    fn steps_for(items: Vec<crate::ir::Item>, min_expected_turns: f64) -> Vec<CompactionStep> {
        let mut session = Session::new(Default::default());
        session.enable_cache_stable(CacheModel {
            min_reclaim_tokens: 100,
            min_expected_turns,
            ..CacheModel::default()
        });
        session.extend(items).unwrap();
        session.compile();
        session.compaction_steps().to_vec()
    }

    #[test]
    fn a_step_is_not_taken_when_the_requests_left_cannot_repay_its_cache_writes() {
        // Retiring `e0` saves its tokens on every later request (at the cache-read price after
        // this one) but makes this request write the cached value after it again. Four
        // requests do not repay that. Priced from the suffix after the step, the removed
        // tokens counted twice and the step looked worth taking.
        assert_eq!(steps_for(superseded_behind_cached_history(1), 4.0), vec![]);
        // The same step pays when the session is expected to go on long enough ...
        let steps = steps_for(superseded_behind_cached_history(1), 40.0);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].items, vec!["e0".to_owned()]);
        assert!(steps[0].estimated_net > 0.0);
        // ... or when nothing cached sits behind the change.
        assert_eq!(steps_for(superseded_behind_cached_history(0), 4.0).len(), 1);
    }

    #[test]
    fn batching_does_not_change_the_outcome() {
        let mut one_by_one = cache_stable_session();
        for item in items(30) {
            one_by_one.append(item).unwrap();
            one_by_one.compile();
        }
        let mut batch = cache_stable_session();
        batch.extend(items(30)).unwrap();
        batch.compile();
        assert_eq!(one_by_one.compaction_steps(), batch.compaction_steps());
        assert_eq!(one_by_one.decisions(), batch.decisions());
    }
}
