//! `masked-output`: a tool output older than the last few agent turns becomes a stub naming
//! the recall tool.
//!
//! **What.** Once `mask_after_turns` agent turns (assistant messages) have followed a tool
//! output, the output is replaced by one line that names its id and the recall tool
//! (`[ctxgc: output masked; call ctxgc_recall with id "m12" for the full output]`). This is
//! observation masking, the measured way coding agents halve the cost of long sessions: an
//! agent works from what it just saw, and what it saw many turns ago it has either acted on
//! already or can ask for again.
//!
//! **When.** Only once the session's tool outputs hold [`MASK_FROM_OUTPUT_TOKENS`] tokens, as
//! a provider's context editing starts at an input size: a mask pays back over the requests
//! that would have read the output again, while its costs (the compaction step that rewrites
//! the cached suffix, a recall request that reads the whole context again) do not shrink with
//! the session. Measured on the corpus's short runs (a few thousand tokens of output each),
//! masking from the first output billed more than sending everything on some of them.
//!
//! **Why it is safe.** The output is one recall away, byte for byte (its receipt), and the
//! stub says so in place, so it never reads as the answer; the agent has answered it several
//! times over. It runs only where that holds and where it pays: with a recall tool
//! (`--expand-tool`), in cache-stable mode (`--preset cache-stable`, the gateway, Python's
//! `wrap`), where masking an output already sent is an edit of cached history, taken with the
//! other deferred decisions in a compaction step only when the step repays its cache misses
//! ([`crate::session`]'s cost model). Never in the lossless preset; outputs of `--keep-tool`
//! tools, of the recall tool and stubs ctxgc wrote are never masked; used only when the stub is
//! smaller. An earlier pass's rewrite of the same output (a superseded read's stub) wins; a
//! mask wins over the later ones (a sampled or trimmed output, once old, is masked whole).
//!
//! **Example.**
//! ```text
//! before: [tool read_file] 1,800 tokens of src/io.py, read 7 agent turns ago
//! after:  [ctxgc: output masked; call ctxgc_recall with id "m12" for the full output]
//! ```
//!
//! **Code.** `masked-output`.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Build, Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::MaskedOutput],
    summary: "masks a tool output older than the last few agent turns behind the recall tool (cache-stable, with a recall tool)",
    doc: include_str!("masked_outputs.rs"),
};

/// Tokens of tool output a session must have received before any output is masked.
pub const MASK_FROM_OUTPUT_TOKENS: usize = 16_384;

/// State: the agent turns and maskable outputs seen, and the masks decided.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MaskedOutputs {
    config: ChatConfig,
    /// Agent turns that must follow an output before it is masked.
    after_turns: usize,
    /// Positions of the agent turns, in order.
    turns: Vec<usize>,
    /// Outputs that may be masked, in order, each with its stub rewrites.
    candidates: Vec<(usize, Vec<BlockRewrite>)>,
    /// How many of `candidates` are masked (always a prefix: an output is masked once enough
    /// turns follow it, and turns only accumulate).
    masked: usize,
    /// Tokens of the tool outputs received so far (until they reach
    /// [`MASK_FROM_OUTPUT_TOKENS`]).
    #[serde(default)]
    output_tokens: usize,
    /// The masked items' rewrites, by position.
    #[serde(with = "crate::chat::position_map")]
    masks: crate::passes::lossy::Rewrites,
}

impl MaskedOutputs {
    /// The pass, masking after `after_turns` agent turns.
    pub fn new(config: ChatConfig, after_turns: usize) -> Self {
        MaskedOutputs {
            config,
            after_turns: after_turns.max(1),
            ..Default::default()
        }
    }

    /// The stub rewrites of item `i`'s outputs that may be masked (none: not a candidate).
    fn stubs(&mut self, cx: &Cx<'_>, i: usize) -> Vec<BlockRewrite> {
        let tok = self.config.tokenizer;
        let id = &cx.items[i].id;
        let results = cx.results(i);
        if self.output_tokens < MASK_FROM_OUTPUT_TOKENS {
            self.output_tokens += results.iter().map(|r| r.tokens(tok)).sum::<usize>();
        }
        results
            .into_iter()
            .filter(|r| !self.config.tool_protected(&r.call.name) && !r.written_by_ctxgc())
            .filter(|r| r.text().is_some())
            .filter_map(|r| {
                // Read on every later request: as short as a stub that says what it is and
                // how to get the output back can be (the call it answers names the tool).
                let stub = format!("[ctxgc: output masked; {}]", self.config.recovery_hint(id));
                (tok.count(&stub) < r.tokens(tok)).then_some(BlockRewrite {
                    block: r.slot.block,
                    text: stub,
                })
            })
            .collect()
    }
}

impl Pass for MaskedOutputs {
    fn build(build: &Build<'_>) -> Option<Self> {
        Some(Self::new(
            build.config.clone(),
            build.config.mask_after_turns.unwrap_or(0),
        ))
    }

    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        if self.config.mask_after_turns.is_none() {
            return Vec::new();
        }
        let start = new.start;
        for i in new {
            if cx.items[i].kind.is_agent_turn() {
                self.turns.push(i);
            }
            let stubs = self.stubs(cx, i);
            if !stubs.is_empty() {
                self.candidates.push((i, stubs));
            }
        }
        if self.output_tokens < MASK_FROM_OUTPUT_TOKENS {
            return Vec::new();
        }
        // Outputs before the `after_turns`-th latest agent turn have that many turns after them.
        let Some(&cutoff) = self
            .turns
            .len()
            .checked_sub(self.after_turns)
            .and_then(|k| self.turns.get(k))
        else {
            return Vec::new();
        };
        let mut moved = Vec::new();
        while let Some((i, stubs)) = self.candidates.get(self.masked) {
            if *i >= cutoff {
                break;
            }
            self.masks.insert(*i, (stubs.clone(), Vec::new()));
            if *i < start {
                moved.push(*i);
            }
            self.masked += 1;
        }
        moved
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (rewrites, _) = self.masks.get(&i)?;
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::MaskedOutput,
            by: Vec::new(),
            rewrites: rewrites.clone(),
            note: Some(format!(
                "answered output masked after {} agent turns",
                self.after_turns
            )),
        })
    }
}
