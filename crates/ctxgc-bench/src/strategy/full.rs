//! `full`: no compaction. Every item as it is, every turn: the baseline every other strategy
//! is measured against (tokens before, replayed cost 1.0).

use crate::context::Context;
use crate::strategy::{Params, Prefix, SpecError, Strategy, StrategyError};

/// The whole history, unchanged.
#[derive(Debug, Clone, Default)]
pub struct Full;

/// Builds `full` (no parameters).
pub fn build(_spec: &str, params: &Params) -> Result<Box<dyn Strategy>, SpecError> {
    params.only(&[])?;
    Ok(Box::new(Full))
}

impl Strategy for Full {
    fn name(&self) -> &str {
        "full"
    }

    fn description(&self) -> String {
        "no compaction: the whole history every turn".into()
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let segments: Vec<_> = (0..prefix.len)
            .filter(|&i| prefix.input.rendered(i))
            .map(|i| prefix.input.segment(i))
            .collect();
        Ok(Context {
            items_kept: segments.len(),
            segments,
            ..Context::default()
        })
    }
}
