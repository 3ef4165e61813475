//! Compiling an uploaded input: the report, every item's original, tokens per preset.

use std::collections::BTreeMap;

use ctxgc_core::chat::compile::record_item_id;
use ctxgc_core::compile::input_format;
use ctxgc_core::{Compiled, Counting, Options};

use crate::error::ApiError;
use crate::options::{PRESETS, apply_preset};
use crate::view::PresetTokens;

/// One input compiled for the page.
#[derive(Debug)]
pub struct Playground {
    /// The report under the chosen preset.
    pub compiled: Compiled,
    /// Every input item's exact original, by the id the report uses.
    pub originals: BTreeMap<String, String>,
    /// Tokens and replayed cost under every preset (chats only).
    pub presets: Vec<PresetTokens>,
}

/// Compiles `text` under `preset` (already checked), with the originals of every item and
/// the tokens every other preset would give.
pub fn compile(text: &str, options: &Options, preset: &str) -> Result<Playground, ApiError> {
    let compiled = ctxgc_core::compile(text, options)?;
    let format = compiled.format;
    let originals = originals(text, options)?;
    let mut presets = Vec::new();
    if format.wire().is_chat() {
        // A replay the bench cannot run does not hide the compile: each preset says why.
        let costs = crate::cost::replayed_costs(text, options);
        for (k, name) in PRESETS.into_iter().enumerate() {
            let (replayed, replay_error) = match &costs {
                Ok(costs) => (costs.get(k).cloned(), None),
                Err(error) => (None, Some(error.clone())),
            };
            let tokens_after = if name == preset {
                compiled.tokens_after
            } else {
                let mut other = options.clone();
                other.counting = Counting::Exact;
                apply_preset(&mut other, name);
                ctxgc_core::compile(text, &other)?.tokens_after
            };
            presets.push(PresetTokens {
                preset: name,
                tokens_before: compiled.tokens_before,
                tokens_after,
                replayed,
                replay_error,
            });
        }
    }
    Ok(Playground {
        compiled,
        originals,
        presets,
    })
}

/// Every item's original text by id (`<record id>#<item id>` for conversation records).
fn originals(text: &str, options: &Options) -> Result<BTreeMap<String, String>, ApiError> {
    let mut out = BTreeMap::new();
    for lowered in input_format(text, options)?.wire().lower(text, options)? {
        for item in lowered.doc.items {
            let id = match &lowered.record {
                Some((record, _)) => record_item_id(record, &item.id),
                None => item.id,
            };
            out.insert(id, item.raw);
        }
    }
    Ok(out)
}
