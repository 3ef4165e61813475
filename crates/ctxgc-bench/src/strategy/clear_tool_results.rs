//! `clear-tool-results`: what provider-side context editing does (tool-result clearing).
//!
//! The client sends the whole history every turn; the provider edits it before the model sees
//! it. When the request's input passes `trigger` tokens, every tool result but the `keep` most
//! recent ones has its content replaced by a placeholder; the calls themselves stay, so the
//! history stays valid. If clearing would remove fewer than `clear-at-least` tokens, nothing is
//! cleared on that request. Defaults: trigger 100,000 tokens, keep 3, clear-at-least 0,
//! placeholder `[tool result cleared]`.
//!
//! The rule is applied to each request on its own, as the provider does: once past the
//! trigger, each new tool result pushes one more old one out of the kept window, so the edit
//! point moves forward every turn and the cache after it is lost.

use crate::context::{Context, Segment, SegmentKind, is_tool_output, with_outputs_cleared};
use crate::strategy::{Params, Prefix, SpecError, Strategy, StrategyError};

/// The default placeholder.
pub const PLACEHOLDER: &str = "[tool result cleared]";

/// Replace old tool results by a placeholder past a token trigger.
#[derive(Debug, Clone)]
pub struct ClearToolResults {
    name: String,
    /// Input tokens above which clearing starts.
    pub trigger: usize,
    /// Most recent tool results left as they are.
    pub keep: usize,
    /// Fewest tokens a clearing must remove to happen.
    pub clear_at_least: usize,
    /// What a cleared result says.
    pub placeholder: String,
}

/// Builds `clear-tool-results` (parameters `trigger`, `keep`, `clear-at-least`, `placeholder`).
pub fn build(spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&["trigger", "keep", "clear-at-least", "placeholder"])?;
    Ok(Box::new(ClearToolResults {
        name: spec.to_owned(),
        trigger: params.number("trigger", params.defaults.clear_trigger)?,
        keep: params.number("keep", params.defaults.clear_keep)?,
        clear_at_least: params.number("clear-at-least", 0)?,
        placeholder: params.text("placeholder", PLACEHOLDER),
    }))
}

impl ClearToolResults {
    /// The strategy with these settings, reported under `name`.
    pub fn new(name: &str, trigger: usize, keep: usize) -> Self {
        ClearToolResults {
            name: name.to_owned(),
            trigger,
            keep,
            clear_at_least: 0,
            placeholder: PLACEHOLDER.to_owned(),
        }
    }
}

impl Strategy for ClearToolResults {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!(
            "above {} input tokens, all but the {} most recent tool results become {:?}{}",
            self.trigger,
            self.keep,
            self.placeholder,
            if self.clear_at_least > 0 {
                format!(
                    " (only when that clears at least {} tokens)",
                    self.clear_at_least
                )
            } else {
                String::new()
            }
        )
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let items = &input.conversation.items;
        let rendered: Vec<usize> = (0..prefix.len).filter(|&i| input.rendered(i)).collect();
        let mut segments: Vec<Segment> = rendered.iter().map(|&i| input.segment(i)).collect();
        let total: usize = rendered.iter().map(|&i| input.tokens[i]).sum();
        if total > self.trigger {
            let results: Vec<usize> = (0..rendered.len())
                .filter(|&n| is_tool_output(&items[rendered[n]]))
                .collect();
            let cut = results.len().saturating_sub(self.keep);
            let mut cleared = Vec::new();
            let mut saved = 0usize;
            for &n in &results[..cut] {
                let i = rendered[n];
                if let Some(copy) = with_outputs_cleared(&items[i], &self.placeholder) {
                    let text = crate::context::item_text(&copy);
                    let after = input.options.tokenizer.count(&text);
                    saved += input.tokens[i].saturating_sub(after);
                    cleared.push((n, text));
                }
            }
            if saved >= self.clear_at_least {
                for (n, text) in cleared {
                    segments[n] = Segment {
                        text,
                        kind: SegmentKind::ToolOutput,
                    };
                }
            }
        }
        Ok(Context {
            items_kept: segments.len(),
            segments,
            ..Context::default()
        })
    }
}
