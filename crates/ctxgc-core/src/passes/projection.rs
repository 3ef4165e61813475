//! `projection`: trims tool outputs with a learned or reviewed projection, on arrival.
//!
//! **What.** A projection (the file `ctxgc learn` writes, reviewed or not) names, per tool,
//! fields of its outputs that the agent never uses. Each tool output — a `tool_result` event
//! answering a `tool_call`, or a tool result block of a chat message — whose tool the
//! projection trims is re-serialised without those fields, with one footer line saying what
//! was hidden: `[hidden: created_at, flights[].origin]`. When the model has a recall tool
//! (`--expand-tool`), the footer also says how to get the original back through it; without
//! one it names no reference, since nobody could redeem it. The original is the item's receipt.
//!
//! With a recall tool, a footer names its fields once: a later output of the same tool that
//! hides exactly the same fields says `[hidden: same fields as "m6" — call ...]`, pointing
//! at the footer that listed them (the one that reads `with id "m6"`). A reservation looked
//! up ten times costs its list of ten field names once, not ten times; when the listing
//! output is itself stubbed later, what the short footer still says is enough to recall.
//!
//! **Why it is safe.** The projection is the operator's statement of what the agent does not
//! need, learned from the agent's own runs and open to review; identifying fields (ids, names,
//! titles) are always kept, error outputs are never trimmed, and an output is only trimmed
//! when that saves at least the projection's `min_saving_tokens` (footer included) and costs
//! fewer tokens than the lossless re-encoding the `compact-json` pass would send. The
//! decision depends only on the output and its tool, so it is made once, on arrival, and never
//! changes. Outputs of `--keep-tool` tools and of the recall tool are never touched. A
//! projection learned with the recall-backed rules (`ctxgc learn --recallable`: identifying
//! fields and rarely used ones hidden, on the promise that the agent can recall them) is
//! applied only when the model has a recall tool; without one its trims are withheld, as in
//! the `default` preset, whatever the preset.
//!
//! **Example.**
//! ```text
//! before: [t2] result of t1: {"reservation_id": "ZFA04Y", "created_at": "2024-05-01T10:00:00", "flights": [...]}
//! after:  [t2] result of t1: {"reservation_id":"ZFA04Y","flights":[...]}
//!           [hidden: created_at, flights[].origin]
//! ```
//!
//! **Code.** `projection`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::plan::{Action, BlockRewrite, Reason, Verdict};
use crate::projection::Projection;
use crate::projection::apply::{Outcome, hidden_list};
use crate::tokens::Tokenizer;

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::Projection],
    summary: "trims tool outputs with a learned or reviewed projection, on arrival",
    doc: include_str!("projection.rs"),
};

/// The projection and how trimmed outputs point back to their originals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectionConfig {
    /// The projection.
    pub projection: Projection,
    /// The tool the model can call to get an original back by item id; stubs name a
    /// reference only when it is set.
    pub recall_tool: Option<String>,
    /// Tools whose outputs are never trimmed (names or globs with `*` and `?`).
    pub keep_tools: Vec<String>,
    /// Trims are computed but not applied (the `default` preset without a recall tool: a
    /// hidden field could be got back by nobody); what they would save is reported.
    #[serde(default)]
    pub withhold: bool,
}

impl ProjectionConfig {
    fn protected(&self, tool: &str) -> bool {
        self.recall_tool.as_deref() == Some(tool)
            || self
                .keep_tools
                .iter()
                .any(|pattern| crate::chat::glob_match(pattern, tool))
    }

    /// The footer of an output of item `id` that hid the fields `list` names
    /// ([`hidden_list`]); `listed_in`: the item whose footer already listed the same fields
    /// of the same tool, if any.
    fn footer(&self, id: &str, list: &str, listed_in: Option<&str>) -> String {
        match (&self.recall_tool, listed_in) {
            (Some(tool), Some(first)) => format!(
                "[hidden: same fields as \"{first}\" — call {tool} with id \"{id}\" for the full output]"
            ),
            (Some(tool), None) => {
                format!("[hidden: {list} — call {tool} with id \"{id}\" for the full output]")
            }
            (None, _) => format!("[hidden: {list}]"),
        }
    }
}

/// State: the rewrites decided on arrival, what they save, and which footers listed which
/// fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProjectionPass {
    config: ProjectionConfig,
    #[serde(with = "crate::chat::position_map")]
    rewrites: HashMap<usize, (Vec<BlockRewrite>, Vec<String>)>,
    /// Tokens each trimmed item's trims save.
    #[serde(default, with = "crate::chat::position_map")]
    saved: HashMap<usize, usize>,
    /// Per tool and list of hidden fields (`tool\0list`), the item whose footer listed them
    /// first.
    #[serde(default)]
    listed: std::collections::BTreeMap<String, String>,
}

impl ProjectionPass {
    /// The pass, configured.
    pub fn new(mut config: ProjectionConfig) -> Self {
        // A trim is taken only when it beats the lossless rewrite, and that rewrite turns
        // lists of records into header + rows. Kept in the tool's own shape, a trimmed list
        // loses to the untrimmed table on most lists, so the fields the projection hides would
        // stay. The tool's shape matters where nothing else re-encodes the output (`ctxgc
        // trim`, the MCP proxy), not in a compile: here the trimmed value is encoded the same
        // lossless way, whatever the projection was learned with.
        config.projection.rules.tables = true;
        // Recall-backed rules hide what only a recall gives back: with nobody to recall
        // it, the trims are reported, never applied.
        if config.projection.rules.recallable && config.recall_tool.is_none() {
            config.withhold = true;
        }
        ProjectionPass {
            config,
            rewrites: HashMap::default(),
            saved: HashMap::default(),
            listed: Default::default(),
        }
    }

    /// Trims one output of `tool` in item `id`: the text, the note and the tokens saved
    /// against the lossless rewrite (`lossless_tokens` counts it); `None` when nothing is
    /// hidden or hiding does not beat the lossless rewrite.
    fn trim(
        &mut self,
        id: &str,
        tool: &str,
        text: &str,
        is_error: bool,
        lossless_tokens: impl FnOnce(Tokenizer) -> usize,
    ) -> Option<(String, String, usize)> {
        if self.config.protected(tool) {
            return None;
        }
        // What keys `listed`: the tool and its footer's list of fields.
        let listing = |list: &str| format!("{tool}\0{list}");
        let footer = |_: &str, hidden: &[String]| {
            let list = hidden_list(hidden);
            let listed_in = self.listed.get(&listing(&list)).map(String::as_str);
            self.config.footer(id, &list, listed_in)
        };
        let trimmed = self
            .config
            .projection
            .apply_with_footer(tool, text, is_error, &footer);
        if trimmed.outcome != Outcome::Trimmed {
            return None;
        }
        // A lossy rewrite is taken only when it beats the lossless one: the re-encoding the
        // compact-json pass would send instead. A projection that hides a
        // few short values can be longer than that once its footer is added.
        let tok = self.config.projection.tokenizer;
        let after = tok.count(&trimmed.text);
        let lossless = lossless_tokens(tok);
        if after >= lossless {
            return None;
        }
        let list = hidden_list(&trimmed.hidden);
        if self.config.recall_tool.is_some() {
            self.listed
                .entry(listing(&list))
                .or_insert_with(|| id.to_owned());
        }
        let note = format!(
            "{tool}: hid {} value{} ({list})",
            trimmed.hidden_values,
            if trimmed.hidden_values == 1 { "" } else { "s" },
        );
        Some((trimmed.text, note, lossless - after))
    }
}

impl Pass for ProjectionPass {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        build.projection.map(|config| Self::new(config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        for i in new {
            let id = &cx.items[i].id;
            let mut claims = (Vec::new(), Vec::new());
            let mut saved_here = 0;
            for r in cx.results(i) {
                let Some(text) = r.text() else { continue };
                if let Some((text, note, saved)) =
                    self.trim(id, &r.call.name, text, r.is_error(), |tok| {
                        r.lossless_tokens(tok)
                    })
                {
                    claims.0.push(BlockRewrite {
                        block: r.slot.block,
                        text,
                    });
                    claims.1.push(note);
                    saved_here += saved;
                }
            }
            if !claims.0.is_empty() {
                self.rewrites.insert(i, claims);
                self.saved.insert(i, saved_here);
            }
        }
        Vec::new()
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        if self.config.withhold {
            return None;
        }
        let (rewrites, notes) = self.rewrites.get(&i)?;
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::Projection,
            by: Vec::new(),
            rewrites: rewrites.clone(),
            note: Some(notes.join("; ")),
        })
    }

    fn withheld(&self, _cx: &Cx<'_>, i: usize) -> usize {
        if self.config.withhold {
            self.saved.get(&i).copied().unwrap_or(0)
        } else {
            0
        }
    }
}
