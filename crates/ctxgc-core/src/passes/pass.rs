//! What a pass is: the [`Pass`] trait, what it sees ([`Cx`]), its documentation
//! ([`PassDoc`]) and what a pipeline builds it from ([`Build`]). Kept apart from the registry
//! in `mod.rs` so that a pass depends on this file alone, not on every other pass.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use crate::chat::pairing::{ResultView, ToolIndex};
use crate::graph::Graph;
use crate::ir::Item;
use crate::plan::{Reason, Verdict};

use super::projection;

/// New items holding at least this many bytes run the passes of a phase side by side (a
/// thread each; see [`crate::parallel::each_mut`]): below it, starting threads costs more
/// than the passes' own work. A whole trace or transcript is far above it; one appended
/// message far below.
const SIDE_BY_SIDE_BYTES: usize = 256 * 1024;

/// True when the items in `new` are worth running the passes on side by side.
pub(crate) fn side_by_side(items: &[Item], new: &Range<usize>) -> bool {
    let mut bytes = 0;
    items
        .get(new.clone())
        .unwrap_or_default()
        .iter()
        .any(|item| {
            bytes += item.raw.len();
            bytes >= SIDE_BY_SIDE_BYTES
        })
}

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
    /// Chat tool calls and results, paired once for every pass (every item up to the end
    /// of the range being compiled).
    pub tools: &'a ToolIndex,
}

impl<'a> Cx<'a> {
    /// The tool results in item `i`, each with its call.
    pub fn results(&self, i: usize) -> Vec<ResultView<'a>> {
        self.tools.results(i, &self.items[i])
    }
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

/// The items a pass that records how far it has read (`seen`) takes for an update of `new`:
/// `new`, and before it whatever it has not read (a pass loaded from state that did not hold
/// them, which rebuilds it from the items). Advances `seen` past `new`.
pub(crate) fn catch_up(seen: &mut usize, new: &Range<usize>) -> Range<usize> {
    let from = (*seen).min(new.start);
    *seen = (*seen).max(new.end);
    from..new.end
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
    /// survival or protection.
    ///
    /// Returns the earlier items (before `new.start`) whose verdict the new items may have
    /// changed; more is allowed, fewer is a bug. Cache-stable sessions recheck only those
    /// between compaction steps (and every item when survival changed), so a pass whose
    /// verdicts move without being reported makes a live session drift from a batch compile;
    /// debug builds check every item and panic on a miss. Structural passes return the items
    /// whose verdict changed for either reason.
    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize>;
    /// The pass's verdict on item `i`, if it claims it.
    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict>;
    /// Tokens a lossy rewrite of item `i` that this pass withholds (no recall tool) would
    /// have saved; 0 when it has none.
    fn withheld(&self, _cx: &Cx<'_>, _i: usize) -> usize {
        0
    }
    /// The pass as `build` configures it, for the pipelines its registry line places it in;
    /// `None` leaves it out of this one (a projection pass with no projection given).
    fn build(build: &Build<'_>) -> Option<Self>
    where
        Self: Sized;
}

/// Which pipeline is being built: the one for event traces or the one for chats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// Event traces (`set_var`, `tool_call`, `abandon`, ...).
    Events,
    /// Message lists of every chat format.
    Chats,
}

/// What a pipeline is built from: each pass's [`Pass::build`] reads what it needs.
#[derive(Debug, Clone, Copy)]
pub struct Build<'a> {
    /// The pipeline being built.
    pub pipeline: Pipeline,
    /// The preset and the options every pass shares (`--keep-tool`, the recall tool); in the
    /// event pipeline it configures the passes that read tool calls and results.
    pub config: &'a crate::chat::ChatConfig,
    /// A learned projection trimming tool outputs, if one was given.
    pub projection: Option<&'a projection::ProjectionConfig>,
}
