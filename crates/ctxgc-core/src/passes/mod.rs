//! The passes: pure functions from the IR (plus what earlier passes decided) to verdicts.
//!
//! Each pass lives in its own module, which opens with what it retires or rewrites, why that is
//! safe, an example, and its reason code; `ctxgc explain --code CODE` prints that doc.
//!
//! Passes are incremental: [`Pass::update`] is told which items are new and which changed
//! survival since the last call, and keeps indexes so that [`Pass::verdict`] answers for any
//! item in constant or logarithmic time. Structural passes (dead branches, cycles) decide
//! which items survive; the others only look at survivors.

use std::collections::HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::graph::Graph;
use crate::ir::Item;
use crate::plan::{Reason, Verdict};

pub mod cycles;
pub mod dead_branch;
pub mod duplicate_calls;
pub mod repeated_runs;
pub mod replaced_notes;
pub mod resolved_errors;
pub mod stale_reads;
pub mod superseded_vars;

/// What a pass sees.
pub struct Cx<'a> {
    /// Every item, in input order.
    pub items: &'a [Item],
    /// Sequence edges.
    pub graph: &'a Graph,
    /// `dead[i]`: item i is retired by a structural pass (and not protected). Semantic passes
    /// treat dead items as gone.
    pub dead: &'a [bool],
    /// Position of each id.
    pub index_of: &'a HashMap<String, usize>,
    /// Sequence edges `(parent, child)` added since the last update.
    pub fresh_edges: &'a [(usize, usize)],
}

impl Cx<'_> {
    /// True when item `i` is still part of the live history.
    pub fn survives(&self, i: usize) -> bool {
        !self.dead.get(i).copied().unwrap_or(false)
    }

    /// Position of the item with this id.
    pub fn resolve(&self, id: &str) -> Option<usize> {
        self.index_of.get(id).copied()
    }
}

/// The documentation every pass carries, printed by `ctxgc explain --code`.
#[derive(Debug, Clone, Copy)]
pub struct PassDoc {
    /// The reason code(s) it emits.
    pub codes: &'static [Reason],
    /// One line: what it does.
    pub summary: &'static str,
    /// What it retires or rewrites, why that is safe, an example before → after.
    pub doc: &'static str,
}

/// One pass: keeps its own indexes, answers for any item.
pub trait Pass {
    /// Its documentation.
    fn doc(&self) -> &'static PassDoc;
    /// True for passes that decide survival (their retirements hide items from later passes).
    fn structural(&self) -> bool {
        false
    }
    /// Brings the indexes up to date: items in `new` were appended, items in `changed` changed
    /// survival or protection. Structural passes return the items whose verdict changed.
    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize>;
    /// The pass's verdict on item `i`, if it claims it.
    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict>;
}

/// The pipeline's passes, by name, so the order is data and the state can be stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "pass", rename_all = "kebab-case")]
pub enum AnyPass {
    /// [`dead_branch::DeadBranches`]
    DeadBranch(dead_branch::DeadBranches),
    /// [`cycles::Cycles`]
    Cycle(cycles::Cycles),
    /// [`superseded_vars::SupersededVars`]
    SupersededVar(superseded_vars::SupersededVars),
    /// [`duplicate_calls::DuplicateCalls`]
    DuplicateCall(duplicate_calls::DuplicateCalls),
    /// [`stale_reads::StaleReads`]
    StaleRead(stale_reads::StaleReads),
    /// [`repeated_runs::RepeatedRuns`]
    RepeatedRun(repeated_runs::RepeatedRuns),
    /// [`resolved_errors::ResolvedErrors`]
    ResolvedError(resolved_errors::ResolvedErrors),
    /// [`replaced_notes::ReplacedNotes`]
    ReplacedNote(replaced_notes::ReplacedNotes),
}

macro_rules! dispatch {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPass::DeadBranch($p) => $e,
            AnyPass::Cycle($p) => $e,
            AnyPass::SupersededVar($p) => $e,
            AnyPass::DuplicateCall($p) => $e,
            AnyPass::StaleRead($p) => $e,
            AnyPass::RepeatedRun($p) => $e,
            AnyPass::ResolvedError($p) => $e,
            AnyPass::ReplacedNote($p) => $e,
        }
    };
}

impl Pass for AnyPass {
    fn doc(&self) -> &'static PassDoc {
        dispatch!(self, p => p.doc())
    }
    fn structural(&self) -> bool {
        dispatch!(self, p => p.structural())
    }
    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        dispatch!(self, p => p.update(cx, new, changed))
    }
    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        dispatch!(self, p => p.verdict(cx, i))
    }
}

/// The default pipeline for event traces, in order: structural passes first.
pub fn event_pipeline() -> Vec<AnyPass> {
    vec![
        AnyPass::DeadBranch(Default::default()),
        AnyPass::Cycle(Default::default()),
        AnyPass::SupersededVar(Default::default()),
        AnyPass::DuplicateCall(Default::default()),
        AnyPass::StaleRead(Default::default()),
        AnyPass::RepeatedRun(Default::default()),
        AnyPass::ResolvedError(Default::default()),
        AnyPass::ReplacedNote(Default::default()),
    ]
}

/// Every pass's documentation, in pipeline order.
pub fn docs() -> Vec<&'static PassDoc> {
    vec![
        &dead_branch::DOC,
        &cycles::DOC,
        &superseded_vars::DOC,
        &duplicate_calls::DOC,
        &stale_reads::DOC,
        &repeated_runs::DOC,
        &resolved_errors::DOC,
        &replaced_notes::DOC,
    ]
}

/// The documentation of the pass that emits `reason`.
pub fn doc_for(reason: Reason) -> Option<&'static PassDoc> {
    docs().into_iter().find(|d| d.codes.contains(&reason))
}
