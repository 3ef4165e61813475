//! The passes: pure functions from the IR (plus what earlier passes decided) to verdicts.
//!
//! Each pass lives in its own module, which opens with what it retires or rewrites, why that is
//! safe, an example, and its reason code; `ctxgc explain --code CODE` prints that doc.
//!
//! Passes are incremental: [`Pass::update`] is told which items are new and which changed
//! survival since the last call, and keeps indexes so that [`Pass::verdict`] answers for any
//! item in constant or logarithmic time. Structural passes (dead branches, cycles) decide
//! which items survive; the others only look at survivors.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::plan::{Reason, Verdict};

mod pass;
pub(crate) use pass::side_by_side;
pub use pass::{Build, Cx, Pass, PassDoc, Pipeline};

pub mod chat;
pub mod compact_json;
pub mod cycles;
pub mod dead_branch;
pub mod duplicates;
pub mod fold_text;
pub mod lossy;
pub mod masked_outputs;
pub mod projection;
pub mod repeated_runs;
pub mod replaced_notes;
pub mod replaced_register;
pub mod resolved_errors;
pub mod sample_rows;
pub mod stale_reads;
pub mod state_blocks;
pub mod superseded_reads;
pub mod superseded_values;

/// The one place a pass is registered: its name in a stored pipeline (the variant, in
/// kebab-case), its module and its type, and its place in each pipeline that runs it
/// (`[Events 30, Chats 10]`: a rank, lower runs first; `[]` for a name only earlier versions
/// stored). From this list come [`AnyPass`], its [`Pass`] dispatch, [`pipeline`] and [`docs`].
/// The registry's order is not the pipelines' order, and a stored session names its passes
/// (and reason codes) rather than their positions (`ctxgc-store`'s codec tests hold this), so
/// a pass may be added anywhere; a name once stored stays, even with no place in a pipeline.
macro_rules! registry {
    ($($(#[$meta:meta])* $variant:ident => $module:ident :: $ty:ident
        [$($pipeline:ident $rank:literal),*],)*) => {
        /// The pipeline's passes, by name, so the order is data and the state can be stored.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum AnyPass {
            $(
                $(#[$meta])*
                #[doc = concat!("[`", stringify!($module), "::", stringify!($ty), "`]")]
                $variant($module::$ty),
            )*
        }

        impl Pass for AnyPass {
            fn doc(&self) -> &'static PassDoc {
                match self {
                    $(AnyPass::$variant(p) => p.doc(),)*
                }
            }
            fn structural(&self) -> bool {
                match self {
                    $(AnyPass::$variant(p) => p.structural(),)*
                }
            }
            fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
                match self {
                    $(AnyPass::$variant(p) => p.update(cx, new, changed),)*
                }
            }
            fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
                match self {
                    $(AnyPass::$variant(p) => p.verdict(cx, i),)*
                }
            }
            fn withheld(&self, cx: &Cx<'_>, i: usize) -> usize {
                match self {
                    $(AnyPass::$variant(p) => p.withheld(cx, i),)*
                }
            }
            fn build(_: &Build<'_>) -> Option<Self> {
                // A pipeline is a list of passes: [`pipeline`] builds each from its line.
                None
            }
        }

        /// The passes of `build.pipeline`, each configured by its [`Pass::build`], in the
        /// order of their ranks in the registry.
        pub fn pipeline(build: &Build<'_>) -> Vec<AnyPass> {
            let mut ranked: Vec<(u32, AnyPass)> = Vec::new();
            $($(
                if build.pipeline == Pipeline::$pipeline {
                    if let Some(pass) = <$module::$ty as Pass>::build(build) {
                        ranked.push(($rank, AnyPass::$variant(pass)));
                    }
                }
            )*)*
            ranked.sort_by_key(|(rank, _)| *rank);
            ranked.into_iter().map(|(_, pass)| pass).collect()
        }

        /// Each pipeline's ranks, as the registry gives them (for its tests).
        #[cfg(test)]
        fn ranks() -> Vec<(Pipeline, u32, &'static str)> {
            vec![$($((Pipeline::$pipeline, $rank, stringify!($variant)),)*)*]
        }

        /// Every pass's documentation, in registry order (once each: a pass stored under an
        /// earlier name is listed under its own).
        pub fn docs() -> Vec<&'static PassDoc> {
            let mut docs: Vec<&'static PassDoc> = Vec::new();
            for doc in [$(&$module::DOC,)*] {
                if !docs.iter().any(|d| std::ptr::eq(*d, doc)) {
                    docs.push(doc);
                }
            }
            docs
        }
    };
}

registry! {
    DeadBranch => dead_branch::DeadBranches [Events 10],
    Cycle => cycles::Cycles [Events 20],
    /// Stored by an earlier version, which had one pass per form; loaded as
    /// [`superseded_values`].
    #[serde(deserialize_with = "rebuilt_from_items")]
    SupersededVar => superseded_values::SupersededValues [],
    /// Stored by an earlier version, which had one pass per form; loaded as [`duplicates`].
    #[serde(deserialize_with = "rebuilt_from_items")]
    DuplicateCall => duplicates::Duplicates [],
    StaleRead => stale_reads::StaleReads [Events 60],
    RepeatedRun => repeated_runs::RepeatedRuns [Events 70],
    ResolvedError => resolved_errors::ResolvedErrors [Events 80],
    ReplacedNote => replaced_notes::ReplacedNotes [Events 90],
    /// A group of passes stored as one by an earlier version; opened into its passes on load.
    Chat => chat::ChatPasses [],
    /// Stored by an earlier version, which had one pass per form; loaded as
    /// [`superseded_values`].
    #[serde(deserialize_with = "superseded_values::from_superseded_fact")]
    SupersededFact => superseded_values::SupersededValues [],
    Register => replaced_register::ReplacedRegister [Chats 20],
    SupersededRead => superseded_reads::SupersededReads [Events 50, Chats 30],
    /// Stored by an earlier version, which had one pass per form; loaded as [`duplicates`].
    #[serde(deserialize_with = "duplicates::from_duplicate_result")]
    DuplicateResult => duplicates::Duplicates [],
    SampleRows => sample_rows::SampleRows [Chats 60],
    FoldText => fold_text::FoldText [Chats 70],
    CompactJson => compact_json::CompactJson [Chats 80],
    StateBlock => state_blocks::StateBlocks [Chats 90],
    // Last on traces (an output another pass retires is not trimmed); on chats right after
    // duplicates (a stubbed duplicate is not trimmed, a trimmed output not sampled, folded or
    // re-encoded again).
    Projection => projection::ProjectionPass [Events 1000, Chats 50],
    Duplicates => duplicates::Duplicates [Events 40, Chats 40],
    SupersededValue => superseded_values::SupersededValues [Events 30, Chats 10],
    // Before the rewrites of fresh outputs (duplicates, projection, sampling, folding,
    // re-encoding): once old, an output is masked whole, whatever was done to it on arrival.
    MaskedOutput => masked_outputs::MaskedOutputs [Chats 35],
}

/// The default pipeline for event traces, in order: structural passes first.
pub fn event_pipeline() -> Vec<AnyPass> {
    event_pipeline_with(None, &crate::chat::ChatConfig::default())
}

/// The event pipeline, with a projection trimming tool outputs last. `tools` configures the
/// passes that read tool calls and results in traces as in chats (`duplicates`,
/// `superseded-read`): the preset, `--keep-tool`, the recall tool.
pub fn event_pipeline_with(
    projection: Option<projection::ProjectionConfig>,
    tools: &crate::chat::ChatConfig,
) -> Vec<AnyPass> {
    pipeline(&Build {
        pipeline: Pipeline::Events,
        config: tools,
        projection: projection.as_ref(),
    })
}

/// The chat pipeline for a configuration (see [`crate::chat::Preset`]), in order:
/// superseded-value, register, superseded-read, masked-output, duplicates, sample-rows,
/// fold-text, compact-json and state-block. A message's blocks each take the first pass's rewrite that
/// claims them (see the engine's merge, `session/claims.rs`). Passes the preset turns off are
/// configured to claim nothing.
pub fn chat_pipeline(config: &crate::chat::ChatConfig) -> Vec<AnyPass> {
    chat_pipeline_with(config, None)
}

/// The chat pipeline, with a projection trimming tool outputs right after duplicates.
pub fn chat_pipeline_with(
    config: &crate::chat::ChatConfig,
    projection: Option<projection::ProjectionConfig>,
) -> Vec<AnyPass> {
    pipeline(&Build {
        pipeline: Pipeline::Chats,
        config,
        projection: projection.as_ref(),
    })
}

/// The passes of `pipeline` with every group opened in place, in order (the engine merges
/// claims across the whole pipeline itself), and every pass stored under an earlier name
/// under its own: the two forms of `duplicates` (`duplicate-call`, `duplicate-result`) and of
/// `superseded-value` (`superseded-var`, `superseded-fact`) were two passes each once.
pub fn flatten(pipeline: Vec<AnyPass>) -> Vec<AnyPass> {
    let mut flat = Vec::with_capacity(pipeline.len());
    for pass in pipeline {
        match pass {
            AnyPass::Chat(group) => flat.extend(flatten(group.into_passes())),
            AnyPass::DuplicateCall(p) | AnyPass::DuplicateResult(p) => {
                flat.push(AnyPass::Duplicates(p))
            }
            AnyPass::SupersededVar(p) | AnyPass::SupersededFact(p) => {
                flat.push(AnyPass::SupersededValue(p))
            }
            other => flat.push(other),
        }
    }
    flat
}

/// Reads the state an earlier version stored for a pass since merged into another, as that
/// pass as the event pipeline configures it: it starts empty and catches up with the items
/// at its next update (the state of the pass it was is not its own).
fn rebuilt_from_items<'de, D: serde::Deserializer<'de>, P: Default>(
    deserializer: D,
) -> Result<P, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer)?;
    Ok(P::default())
}

/// Reads a stored pipeline and [`flatten`]s it: a session stored when the chat passes ran as
/// one group loads with each pass's state as it was, and one stored with a pass since
/// merged into another loads that pass, which rebuilds its state from the items.
pub(crate) fn deserialize_pipeline<'de, D>(deserializer: D) -> Result<Vec<AnyPass>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Vec::<AnyPass>::deserialize(deserializer).map(flatten)
}

/// The chat pipeline of a preset, with every other chat option at its default.
///
/// ```
/// use ctxgc_core::chat::Preset;
/// use ctxgc_core::passes::chat_preset_pipeline;
/// let session = ctxgc_core::Session::with_passes(Default::default(), chat_preset_pipeline(Preset::Lossless));
/// assert!(session.items().is_empty());
/// ```
pub fn chat_preset_pipeline(preset: crate::chat::Preset) -> Vec<AnyPass> {
    let options = crate::chat::ChatOptions {
        preset,
        ..Default::default()
    };
    chat_pipeline(&crate::chat::ChatConfig::resolve(
        &options,
        Default::default(),
    ))
}

/// The documentation of the pass that emits `reason`.
pub fn doc_for(reason: Reason) -> Option<&'static PassDoc> {
    docs().into_iter().find(|d| d.codes.contains(&reason))
}

/// Test support: compile a JSONL trace and read decisions by id.
#[cfg(test)]
pub(crate) mod testing {
    use crate::compile::{Options, compile};
    use crate::plan::{Action, Decision, Reason};

    /// A compiled trace's decisions and output.
    pub struct Outcome {
        pub decisions: Vec<Decision>,
        pub output: String,
    }

    impl Outcome {
        pub fn of(&self, id: &str) -> &Decision {
            self.decisions
                .iter()
                .find(|d| d.id == id)
                .unwrap_or_else(|| panic!("no decision for {id}"))
        }
        pub fn kept(&self, id: &str) -> bool {
            self.of(id).action == Action::Keep
        }
        pub fn retired(&self, id: &str, reason: Reason, by: &[&str]) -> bool {
            let d = self.of(id);
            d.action == Action::Retire && d.reason == Some(reason) && d.by == by
        }
    }

    /// Compiles events given one per line (timestamps default to the line number).
    pub fn run(lines: &[serde_json::Value]) -> Outcome {
        let text: String = lines
            .iter()
            .enumerate()
            .map(|(n, e)| {
                let mut e = e.clone();
                if e.get("timestamp").is_none() && e["type"] != "edge_injection" {
                    e["timestamp"] = serde_json::json!(n);
                }
                format!("{e}\n")
            })
            .collect();
        let out = compile(&text, &Options::default()).expect("test trace compiles");
        Outcome {
            decisions: out.decisions,
            output: out.output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ChatConfig;

    fn names(passes: &[AnyPass]) -> Vec<String> {
        passes
            .iter()
            .map(|p| match serde_json::to_value(p) {
                Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
                other => panic!("a pass serializes as a one-key map, not {other:?}"),
            })
            .collect()
    }

    #[test]
    fn the_registry_ranks_give_each_pipeline_its_order() {
        let config = ChatConfig::default();
        let counts = crate::projection::Counts::default();
        let projection = projection::ProjectionConfig {
            projection: crate::projection::Projection::learn(
                &counts,
                &Default::default(),
                crate::tokens::Tokenizer::default(),
            ),
            recall_tool: None,
            keep_tools: Vec::new(),
            withhold: false,
        };
        let events = event_pipeline_with(Some(projection.clone()), &config);
        assert_eq!(
            names(&events),
            [
                "dead-branch",
                "cycle",
                "superseded-value",
                "duplicates",
                "superseded-read",
                "stale-read",
                "repeated-run",
                "resolved-error",
                "replaced-note",
                "projection",
            ]
        );
        let chats = chat_pipeline_with(&config, Some(projection));
        assert_eq!(
            names(&chats),
            [
                "superseded-value",
                "register",
                "superseded-read",
                "masked-output",
                "duplicates",
                "projection",
                "sample-rows",
                "fold-text",
                "compact-json",
                "state-block",
            ]
        );
        // Without a projection, the projection pass is left out and nothing else moves.
        assert_eq!(names(&event_pipeline()).len(), events.len() - 1);
        assert_eq!(names(&chat_pipeline(&config)).len(), chats.len() - 1);
    }

    #[test]
    fn no_two_passes_share_a_rank_in_a_pipeline() {
        let ranks = ranks();
        for (pipeline, rank, name) in &ranks {
            let tied: Vec<_> = ranks
                .iter()
                .filter(|(p, r, _)| p == pipeline && r == rank)
                .map(|(_, _, n)| n)
                .collect();
            assert_eq!(tied, [name], "{pipeline:?} rank {rank}");
        }
    }
}
