//! The cost model of a provider prompt cache: what cache-stable compilation prices its
//! compaction steps with ([`super::cache`]). A leaf, so the options that carry it need not
//! depend on the session.

use serde::{Deserialize, Serialize};

use crate::tokens::Tokenizer;

/// The cost model of a provider prompt cache, and when a compaction step is worth it.
///
/// ```
/// let m = ctxgc_core::session::CacheModel::default();
/// assert_eq!((m.read_multiplier, m.write_multiplier), (0.1, 1.25));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheModel {
    /// Price of a cached input token relative to a fresh one.
    pub read_multiplier: f64,
    /// Price of a token written to the cache relative to a fresh one.
    pub write_multiplier: f64,
    /// The fewest remaining requests a step is assumed to serve.
    pub min_expected_turns: f64,
    /// The fewest tokens a step must reclaim.
    pub min_reclaim_tokens: usize,
    /// The tokenizer that counts.
    pub tokenizer: Tokenizer,
}

impl Default for CacheModel {
    fn default() -> Self {
        CacheModel {
            read_multiplier: 0.1,
            write_multiplier: 1.25,
            min_expected_turns: 4.0,
            min_reclaim_tokens: 1024,
            tokenizer: Tokenizer::default(),
        }
    }
}
