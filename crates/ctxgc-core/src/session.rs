//! The incremental engine: items are appended, passes keep their indexes up to date, and the
//! plan for any item is answered on demand: every pass's claims on the item merged, per item
//! and per block of a message (`session/claims.rs`).
//!
//! Batch compilation is the same engine fed the whole trace at once, so appending events one
//! by one and compiling gives exactly what compiling the whole trace gives.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use serde::{Deserialize, Serialize};

use crate::chat::pairing::ToolIndex;
use crate::error::{Diagnostic, Error};
use crate::graph::Graph;
use crate::ir::{Item, Kind, RetainUntil};
use crate::passes::{AnyPass, Cx, Pass, event_pipeline};
use crate::plan::{Action, Decision, Reason, Verdict};

/// What deciding one item's plan costs, in the bytes-of-JSON units [`crate::parallel`] sizes
/// its threads by (a few hundred instructions: a lookup in each pass).
const PLAN_WORK_BYTES: usize = 16;

/// What protects items from every pass.
///
/// ```
/// use ctxgc_core::RetentionPolicy;
/// let policy = RetentionPolicy::default();
/// assert_eq!(policy.min_importance, 8.0);
/// assert!(policy.protected_tags.iter().any(|t| t == "keep"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// Items with `importance` at or above this are protected (0–10 scale; `high` is 8).
    pub min_importance: f64,
    /// Items carrying any of these tags are protected.
    pub protected_tags: Vec<String>,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            min_importance: 8.0,
            protected_tags: ["keep", "pinned", "critical", "protected"]
                .map(String::from)
                .to_vec(),
        }
    }
}

mod cache;
pub(crate) mod cache_model;
pub(crate) mod claims;

pub use cache::{CompactionStep, DecisionEpoch};
pub use cache_model::CacheModel;

/// The final decision on one item: the verdict in force, and any verdict retention overruled.
/// Verdicts are boxed: most items have none, and a plan is taken for every item of a session
/// (16 bytes a plan instead of 160).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemPlan {
    /// The verdict in force (`None`: keep).
    pub verdict: Option<Box<Verdict>>,
    /// A verdict that retention metadata overruled (the item is kept).
    pub protected_from: Option<Box<Verdict>>,
}

impl ItemPlan {
    /// keep, retire or rewrite.
    pub fn action(&self) -> Action {
        self.verdict.as_ref().map_or(Action::Keep, |v| v.action)
    }
}

/// A compilation session: append items, compile, read the plan.
///
/// ```
/// use ctxgc_core::{Session, frontend::events::lower_events};
/// let trace = r#"[
///   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
///   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20, "parent_id": "e1"}
/// ]"#;
/// let items = lower_events(trace, &Default::default()).unwrap();
/// let mut session = Session::new(Default::default());
/// session.extend(items).unwrap();
/// session.compile();
/// assert_eq!(session.plan_of(0).action(), ctxgc_core::Action::Retire);
/// assert_eq!(session.plan_of(1).action(), ctxgc_core::Action::Keep);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    policy: RetentionPolicy,
    items: Vec<Item>,
    index_of: HashMap<String, usize>,
    graph: Graph,
    protected: Vec<bool>,
    /// Items protected by `retain_until` a timestamp, by the ordered bits of that timestamp.
    pending_timestamps: BTreeMap<u64, Vec<usize>>,
    /// Items protected until an event id appears.
    pending_events: HashMap<String, Vec<usize>>,
    latest_timestamp: Option<f64>,
    dead: Vec<bool>,
    /// The pipeline, flat: a group of passes stored by an earlier version is opened on load.
    #[serde(deserialize_with = "crate::passes::deserialize_pipeline")]
    passes: Vec<AnyPass>,
    compiled: usize,
    protection_changed: Vec<usize>,
    warnings: Vec<Diagnostic>,
    /// Cache-stable mode's state, when enabled.
    #[serde(default)]
    cache: Option<cache::CacheState>,
    /// Calls and results paired once for every pass. Derived from the items, so not saved:
    /// a loaded session rebuilds it at its next compile.
    #[serde(skip)]
    tools: ToolIndex,
    /// Items whose plan may have moved since [`Session::take_changes`] last asked, for a
    /// caller that keeps what a compile reports. Not saved: a loaded session reports that
    /// everything may have changed.
    #[serde(skip)]
    changes: ChangeLog,
}

/// What [`Session::take_changes`] has to say: nothing asked yet (no log kept, so sessions
/// nobody asks never grow one), everything, or the items compiled or moved since.
#[derive(Debug, Clone, Default)]
enum ChangeLog {
    #[default]
    Off,
    All,
    Since(Vec<usize>),
}

/// Maps an f64 to a u64 whose order is the float's total order.
fn ordered_bits(value: f64) -> u64 {
    let bits = value.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

impl Session {
    /// An empty session with the event pipeline.
    pub fn new(policy: RetentionPolicy) -> Self {
        Self::with_passes(policy, event_pipeline())
    }

    /// An empty session with the given passes, in order (structural passes first).
    pub fn with_passes(policy: RetentionPolicy, passes: Vec<AnyPass>) -> Self {
        Session {
            policy,
            items: Vec::new(),
            index_of: HashMap::default(),
            graph: Graph::default(),
            protected: Vec::new(),
            pending_timestamps: BTreeMap::new(),
            pending_events: HashMap::default(),
            latest_timestamp: None,
            dead: Vec::new(),
            passes: crate::passes::flatten(passes),
            compiled: 0,
            protection_changed: Vec::new(),
            warnings: Vec::new(),
            cache: None,
            tools: ToolIndex::default(),
            changes: ChangeLog::Off,
        }
    }

    /// The items, in input order.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// Position of the item with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index_of.get(id).copied()
    }

    /// Warnings found while appending (self-edges ignored, ...).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Appends one item.
    pub fn append(&mut self, item: Item) -> Result<(), Error> {
        self.extend(vec![item])
    }

    /// Appends items as one batch: references may point forward within the batch. Either the
    /// whole batch is appended or, if any item is invalid, none is and every problem is listed.
    pub fn extend(&mut self, items: Vec<Item>) -> Result<(), Error> {
        let start = self.items.len();
        let mut problems = self.register_ids(&items);
        problems.extend(self.check_references(&items));
        if !problems.is_empty() {
            problems.sort_by_key(|p| p.index);
            for item in &items {
                if self.index_of.get(&item.id).is_some_and(|&i| i >= start) {
                    self.index_of.remove(&item.id);
                }
            }
            return Err(Error::Invalid(problems));
        }
        if self.items.is_empty() {
            // The first batch is taken as it is: copying a large trace's items into a fresh
            // vector costs as much as lowering them.
            self.items = items;
        } else {
            self.items.extend(items);
        }
        let end = self.items.len();
        self.graph.grow(end);
        // In cache-stable mode an item is linked into the graph and the retention clock when it
        // is compiled, one at a time (see `compile_cache_stable`): a batch then decides exactly
        // as the same items appended one by one, and no decision sees an edge or a timestamp
        // from an item after it.
        if self.cache.is_none() {
            self.link_range(start, end);
        }
        self.dead.resize(end, false);
        Ok(())
    }

    /// Enters the batch's ids in the index (the caller undoes it if the batch is refused) and
    /// lists empty and duplicate ids.
    fn register_ids(&mut self, batch: &[Item]) -> Vec<Diagnostic> {
        let start = self.items.len();
        let mut problems = Vec::new();
        self.index_of.reserve(batch.len());
        for (offset, item) in batch.iter().enumerate() {
            let index = start + offset;
            if item.id.is_empty() {
                problems.push(Diagnostic::new(
                    index,
                    None,
                    Some("id"),
                    "must be a non-empty string",
                ));
            } else if self.index_of.contains_key(&item.id) {
                problems.push(Diagnostic::new(
                    index,
                    Some(item.id.clone()),
                    Some("id"),
                    format!("duplicate id {:?}", item.id),
                ));
            } else {
                self.index_of.insert(item.id.clone(), index);
            }
        }
        problems
    }

    /// Checks every reference of the batch against the index (which holds the batch's ids).
    fn check_references(&self, batch: &[Item]) -> Vec<Diagnostic> {
        let start = self.items.len();
        let kind_of = |i: usize| -> &Kind {
            if i < start {
                &self.items[i].kind
            } else {
                &batch[i - start].kind
            }
        };
        let mut problems = Vec::new();
        for (offset, item) in batch.iter().enumerate() {
            let index = start + offset;
            item.for_each_reference(|field, target| {
                let problem = match self.index_of.get(target).copied() {
                    None => Some(format!("names no event: {target:?}")),
                    Some(t) => match field {
                        "call_id" if !matches!(kind_of(t), Kind::ToolCall(_)) => {
                            Some(format!("{target:?} is not a tool_call event"))
                        }
                        "supersedes" if !matches!(kind_of(t), Kind::Note { .. }) => Some(format!(
                            "{target:?} is not a decision, requirement or constraint"
                        )),
                        "supersedes" if t >= index => {
                            Some(format!("{target:?} does not come before this event"))
                        }
                        _ => None,
                    },
                };
                if let Some(message) = problem {
                    problems.push(Diagnostic::new(
                        index,
                        Some(item.id.clone()),
                        Some(field),
                        message,
                    ));
                }
            });
        }
        problems
    }

    /// Links items `start..end` into the sequence graph and the retention clock.
    fn link_range(&mut self, start: usize, end: usize) {
        self.protected.reserve(end - start);
        for i in start..end {
            self.link(i);
            self.register_protection(i);
        }
    }

    fn link(&mut self, i: usize) {
        let item = &self.items[i];
        // At most two edges per item: kept on the stack, as every item of a trace passes here.
        let parent_edge = item
            .parent
            .as_ref()
            .and_then(|parent| self.index_of.get(parent))
            .map(|&p| (p, i, "parent_id"));
        let injected_edge = match &item.kind {
            Kind::EdgeInjection { src, dst } => self
                .index_of
                .get(src)
                .zip(self.index_of.get(dst))
                .map(|(&s, &d)| (s, d, "src")),
            _ => None,
        };
        for (from, to, field) in parent_edge.into_iter().chain(injected_edge) {
            if !self.graph.add_edge(from, to) {
                self.warnings.push(Diagnostic::new(
                    i,
                    Some(self.items[i].id.clone()),
                    Some(field),
                    format!(
                        "edge from {:?} to itself ignored; the event is kept",
                        self.items[to].id
                    ),
                ));
            }
        }
    }

    fn base_protection(&self, item: &Item) -> bool {
        matches!(item.kind, Kind::Opaque { .. })
            || item
                .retention
                .importance
                .is_some_and(|v| v >= self.policy.min_importance)
            || item
                .retention
                .tags
                .iter()
                .any(|t| self.policy.protected_tags.contains(t))
    }

    fn retain_until_active(&self, item: &Item) -> bool {
        match &item.retention.retain_until {
            None => false,
            Some(RetainUntil::Timestamp(t)) => self.latest_timestamp.is_none_or(|now| now <= *t),
            Some(RetainUntil::Event(e)) => !self.index_of.contains_key(e),
        }
    }

    fn register_protection(&mut self, i: usize) {
        // The trace's clock moves first: this item's own timestamp counts.
        if let Some(ts) = self.items[i].timestamp
            && self.latest_timestamp.is_none_or(|now| ts > now)
        {
            self.latest_timestamp = Some(ts);
            let expired: Vec<u64> = self
                .pending_timestamps
                .range(..ordered_bits(ts))
                .map(|(k, _)| *k)
                .collect();
            for key in expired {
                if let Some(list) = self.pending_timestamps.remove(&key) {
                    self.protection_changed.extend(list);
                }
            }
        }
        if let Some(list) = self.pending_events.remove(&self.items[i].id) {
            self.protection_changed.extend(list);
        }
        let item = &self.items[i];
        if item.retention.is_empty() && !matches!(item.kind, Kind::Opaque { .. }) {
            self.protected.push(false);
            return;
        }
        let until = self.retain_until_active(item);
        let protected = self.base_protection(item) || until;
        if until {
            match &item.retention.retain_until {
                Some(RetainUntil::Timestamp(t)) => self
                    .pending_timestamps
                    .entry(ordered_bits(*t))
                    .or_default()
                    .push(i),
                Some(RetainUntil::Event(e)) => {
                    self.pending_events.entry(e.clone()).or_default().push(i)
                }
                None => {}
            }
        }
        self.protected.push(protected);
    }

    /// Brings every pass up to date with what was appended since the last call. Costs in
    /// proportion to what was appended (and to what it changed), not to the whole session.
    pub fn compile(&mut self) {
        if self.cache.is_some() {
            let (start, steps) = (self.compiled, self.compaction_steps().len());
            self.compile_cache_stable();
            // Between steps an earlier item keeps the plan it was given (frozen at the last
            // step, or on arrival), so only the new items changed; a step can move any
            // earlier plan.
            let stepped = self.compaction_steps().len() > steps;
            match &mut self.changes {
                ChangeLog::Since(_) if stepped => self.changes = ChangeLog::All,
                ChangeLog::Since(log) => log.extend(start..self.items.len()),
                ChangeLog::Off | ChangeLog::All => {}
            }
        } else {
            let (start, end) = (self.compiled, self.items.len());
            self.compile_range(start, end);
        }
    }

    /// Brings the passes up to date with items `start..end` (the items before `start` were
    /// compiled already; those from `end` on are left for later). Returns the earlier items
    /// whose plan may have moved (more is allowed).
    fn compile_range(&mut self, start: usize, end: usize) -> Vec<usize> {
        // Each pass reads the items and changes only itself, so the passes of one phase can
        // run side by side; it pays only for a large batch (a whole trace, not one append).
        let spread = crate::passes::side_by_side(&self.items, &(start..end));
        self.graph.refresh(end);
        self.tools.extend_to(&self.items, end);
        let fresh = self.graph.take_fresh_edges();

        // Expired protections.
        let mut protection_changed = std::mem::take(&mut self.protection_changed);
        protection_changed.sort_unstable();
        protection_changed.dedup();
        for &i in &protection_changed {
            self.protected[i] =
                self.base_protection(&self.items[i]) || self.retain_until_active(&self.items[i]);
        }

        // Structural passes decide survival.
        let mut claims_changed = Vec::new();
        {
            let cx = Cx {
                items: &self.items,
                graph: &self.graph,
                dead: &self.dead,
                index_of: &self.index_of,
                fresh_edges: &fresh,
                tools: &self.tools,
            };
            let passes = self.passes.iter_mut().filter(|p| p.structural()).collect();
            let reports = crate::parallel::each_mut(passes, spread, |pass| {
                pass.update(&cx, start..end, &protection_changed)
            });
            claims_changed.extend(reports.into_iter().flatten());
        }
        let mut candidates: Vec<usize> = claims_changed.clone();
        candidates.extend(protection_changed.iter().copied());
        candidates.extend(start..end);
        candidates.sort_unstable();
        candidates.dedup();
        let mut survival_changed = Vec::new();
        for i in candidates {
            let dead = !self.protected[i] && self.structural_claim(i).is_some();
            if dead != self.dead[i] {
                self.dead[i] = dead;
                if i < start {
                    survival_changed.push(i);
                }
            }
        }
        survival_changed.extend(protection_changed.iter().copied().filter(|&i| i < start));
        survival_changed.sort_unstable();
        survival_changed.dedup();

        let cx = Cx {
            items: &self.items,
            graph: &self.graph,
            dead: &self.dead,
            index_of: &self.index_of,
            fresh_edges: &fresh,
            tools: &self.tools,
        };
        // A plan moves with the item's own survival or protection, with a structural claim,
        // and wherever a pass says so.
        let mut moved = claims_changed;
        moved.extend(survival_changed.iter().copied());
        let passes = self.passes.iter_mut().filter(|p| !p.structural()).collect();
        let reports = crate::parallel::each_mut(passes, spread, |pass| {
            pass.update(&cx, start..end, &survival_changed)
        });
        moved.extend(reports.into_iter().flatten());
        self.compiled = end;
        if let ChangeLog::Since(log) = &mut self.changes {
            log.extend(moved.iter().copied());
            log.extend(start..end);
        }
        moved
    }

    /// The items whose plan may have changed (been compiled, or moved) since the last call,
    /// sorted, each once; `None` the first time, and after a load: every item may have. A
    /// caller that keeps plans, counts or rendered lines between compiles updates only these
    /// (the list may hold more than what changed, never less).
    ///
    /// ```
    /// use ctxgc_core::frontend::events::{lower_events, EventOptions};
    /// use ctxgc_core::Session;
    /// let trace = "{\"id\":\"a\",\"type\":\"set_var\",\"timestamp\":1,\"key\":\"x\",\"value\":1}";
    /// let mut session = Session::new(Default::default());
    /// session.extend(lower_events(trace, &EventOptions::default()).unwrap()).unwrap();
    /// session.compile();
    /// assert_eq!(session.take_changes(), None); // first call: everything
    /// let next = "{\"id\":\"b\",\"type\":\"set_var\",\"timestamp\":2,\"key\":\"x\",\"value\":2}";
    /// session.extend(lower_events(next, &EventOptions::default()).unwrap()).unwrap();
    /// session.compile();
    /// // `b` arrived and `a` is now superseded by it.
    /// assert_eq!(session.take_changes(), Some(vec![0, 1]));
    /// ```
    pub fn take_changes(&mut self) -> Option<Vec<usize>> {
        match std::mem::replace(&mut self.changes, ChangeLog::Since(Vec::new())) {
            ChangeLog::Off | ChangeLog::All => None,
            ChangeLog::Since(mut log) => {
                log.sort_unstable();
                log.dedup();
                Some(log)
            }
        }
    }

    fn cx<'a>(&'a self) -> Cx<'a> {
        Cx {
            items: &self.items,
            graph: &self.graph,
            dead: &self.dead,
            index_of: &self.index_of,
            fresh_edges: &[],
            tools: &self.tools,
        }
    }

    fn structural_claim(&self, i: usize) -> Option<Verdict> {
        let cx = self.cx();
        self.passes
            .iter()
            .filter(|p| p.structural())
            .find_map(|p| p.verdict(&cx, i))
    }

    /// True when item `i` is protected by retention metadata right now.
    pub fn is_protected(&self, i: usize) -> bool {
        self.protected.get(i).copied().unwrap_or(false)
    }

    /// The plan for item `i`, as of the last [`Session::compile`]. In cache-stable mode this is
    /// the plan in force: frozen at the last compaction step for earlier items, as decided on
    /// arrival for later ones.
    pub fn plan_of(&self, i: usize) -> ItemPlan {
        if let Some(plan) = self.cache.as_ref().and_then(|c| c.effective(i)) {
            return plan.clone();
        }
        self.eager_plan_of(i)
    }

    /// The plan for item `i` with everything decided now, ignoring cache stability.
    pub fn eager_plan_of(&self, i: usize) -> ItemPlan {
        self.eager_plan_without(i, None)
    }

    /// [`Session::eager_plan_of`], leaving out the claims made for reason `without`.
    pub(crate) fn eager_plan_without(
        &self,
        i: usize,
        without: Option<crate::plan::Reason>,
    ) -> ItemPlan {
        let claim = claims::verdict_without(&self.passes, &self.cx(), i, without).map(Box::new);
        if self.is_protected(i) {
            ItemPlan {
                verdict: None,
                protected_from: claim,
            }
        } else {
            ItemPlan {
                verdict: claim,
                protected_from: None,
            }
        }
    }

    /// Item positions in render order: topological along sequence edges, ties in input order
    /// (plain input order when no edge points backwards).
    pub fn render_order(&self) -> Vec<usize> {
        match self.graph.order() {
            Some(order) if order.len() == self.items.len() => order.to_vec(),
            _ => (0..self.items.len()).collect(),
        }
    }

    /// Whether items `from..` (the last ones) come last in render order, in input order: then
    /// the prompt of the items before them is a prefix of the whole one's lines.
    pub fn renders_last(&self, from: usize) -> bool {
        match self.graph.order() {
            Some(order) if order.len() == self.items.len() => order
                .get(from..)
                .is_some_and(|tail| tail.iter().copied().eq(from..self.items.len())),
            _ => true,
        }
    }

    /// Every item's plan, [`Session::plan_of`] for each in input order. A caller that both
    /// renders and reports takes them once here (verdicts are computed on demand, so asking
    /// per item twice computes them twice).
    pub fn plans(&self) -> Vec<ItemPlan> {
        let work = self.items.len() * PLAN_WORK_BYTES;
        crate::parallel::map_in_order(&self.items, work, |i, _| self.plan_of(i))
    }

    /// Every item's decision, as reported (ids, codes), in input order.
    pub fn decisions(&self) -> Vec<Decision> {
        self.decisions_of(&self.plans())
    }

    /// Every item's decision, from the plans [`Session::plans`] gave.
    pub fn decisions_of(&self, plans: &[ItemPlan]) -> Vec<Decision> {
        plans
            .iter()
            .enumerate()
            .map(|(i, plan)| self.decision_of(i, plan))
            .collect()
    }

    /// One item's decision, as reported.
    pub fn decision(&self, i: usize) -> Decision {
        self.decision_of(i, &self.plan_of(i))
    }

    /// Item `i`'s decision under `plan` (one of [`Session::plans`]), as reported.
    pub fn decision_of(&self, i: usize, plan: &ItemPlan) -> Decision {
        match (&plan.verdict, &plan.protected_from) {
            (Some(v), _) => Decision {
                id: self.items[i].id.clone(),
                action: v.action,
                reason: Some(v.reason),
                // A cycle's members justify each other; the item itself is not its own cause.
                by: v
                    .by
                    .iter()
                    .filter(|&&b| v.reason != Reason::Cycle || b != i)
                    .map(|&b| self.items[b].id.clone())
                    .collect(),
                note: v.note.clone(),
            },
            (None, Some(v)) => Decision {
                id: self.items[i].id.clone(),
                action: Action::Keep,
                reason: None,
                by: Vec::new(),
                note: Some(format!("protected by retention from {}", v.reason.code())),
            },
            (None, None) => Decision {
                id: self.items[i].id.clone(),
                action: Action::Keep,
                reason: None,
                by: Vec::new(),
                note: None,
            },
        }
    }

    /// Tokens that withheld lossy rewrites (no recall tool) would have saved, over the items
    /// still sent: see [`crate::passes::lossy`].
    pub fn would_save_tokens(&self) -> usize {
        self.would_save_tokens_of(&self.plans())
    }

    /// [`Session::would_save_tokens`] from the plans [`Session::plans`] gave, for a caller
    /// that has them already (deciding every item's plan again costs as much as the first time).
    pub fn would_save_tokens_of(&self, plans: &[ItemPlan]) -> usize {
        plans
            .iter()
            .enumerate()
            .filter(|(_, plan)| plan.action() != Action::Retire)
            .map(|(i, _)| self.withheld_of(i))
            .sum()
    }

    /// Tokens a withheld lossy rewrite of item `i` would have saved (0: none withheld).
    pub fn withheld_of(&self, i: usize) -> usize {
        claims::withheld(&self.passes, &self.cx(), i)
    }

    /// Reasons in force, for counting.
    pub fn reason_of(&self, i: usize) -> Option<Reason> {
        self.plan_of(i).verdict.map(|v| v.reason)
    }
}
