//! Replayed cost: what the session costs to send through a provider's prefix cache.
//!
//! The session is replayed as an agent runs it: before each agent turn, the agent sends the
//! strategy's context for the history so far. A provider's prompt cache is a prefix cache, so
//! the part of a request that repeats the start of the previous request is read from the cache
//! (`cache_read` times the input price, 0.1 by default) and the rest is written to it
//! (`cache_write`, 1.25 by default). The total, in input-price units, is compared with `full`.
//! A strategy that edits early history pays for every token after the edit again.
//!
//! The shared prefix is measured on segment boundaries: the leading segments of the request
//! that are byte-identical to the previous request's, counted in exact tokens. A change inside
//! a segment makes that whole segment and all after it uncached — as with caches keyed on
//! message boundaries, and a slight overestimate of cost for caches that match inside a
//! message. Token counts are cached by the segment's content hash, so each distinct text is
//! counted once.

use std::collections::HashMap;

use ctxgc_core::Tokenizer;
use serde::Serialize;

use crate::context::Context;

/// Price multipliers of the cache, relative to uncached input.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheModel {
    /// A cached token costs this (0.1).
    pub cache_read: f64,
    /// A token written to the cache costs this (1.25).
    pub cache_write: f64,
}

impl Default for CacheModel {
    fn default() -> Self {
        CacheModel {
            cache_read: 0.1,
            cache_write: 1.25,
        }
    }
}

/// Exact token counts, each distinct text counted once.
#[derive(Debug)]
pub struct TokenCache {
    tokenizer: Tokenizer,
    counts: HashMap<blake3::Hash, usize>,
}

impl TokenCache {
    /// A cache for this tokenizer.
    pub fn new(tokenizer: Tokenizer) -> Self {
        TokenCache {
            tokenizer,
            counts: HashMap::new(),
        }
    }

    /// The hash and token count of `text`.
    pub fn count(&mut self, text: &str) -> (blake3::Hash, usize) {
        let hash = blake3::hash(text.as_bytes());
        let tokenizer = self.tokenizer;
        let n = *self
            .counts
            .entry(hash)
            .or_insert_with(|| tokenizer.count(text));
        (hash, n)
    }

    /// Tokens of a whole context (the sum over its segments).
    pub fn context_tokens(&mut self, context: &Context) -> usize {
        context.segments.iter().map(|s| self.count(&s.text).1).sum()
    }
}

/// The bill of one replayed session.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Replay {
    /// Requests sent (agent turns with some history before them).
    pub requests: usize,
    /// Input tokens sent, summed over requests.
    pub input_tokens: u64,
    /// Of which read from the cache.
    pub cached_tokens: u64,
    /// Recall requests: after a request, one more for each original the model had to get back
    /// through the recall tool (counted apart from `requests`).
    pub recall_requests: usize,
    /// Tokens of the originals recalled.
    pub recalled_tokens: u64,
    /// Effective input cost, in uncached-token units (recall requests included).
    pub cost: f64,
    /// `full`'s cost on the same conversation.
    pub full_cost: f64,
    /// `cost` divided by `full`'s cost on the same conversation (absent when `full` costs 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_to_full: Option<f64>,
}

/// Replays requests one after the other.
#[derive(Debug, Default)]
pub struct Replayer {
    previous: Vec<(blake3::Hash, usize)>,
    /// Tokens recalled since the last request (they sit after it in the recall request).
    recalled_so_far: usize,
    /// The bill so far.
    pub bill: Replay,
}

impl Replayer {
    /// Sends one request through the cache.
    ///
    /// ```
    /// use ctxgc_bench::context::{Context, Segment, SegmentKind};
    /// use ctxgc_bench::replay::{CacheModel, Replayer, TokenCache};
    /// let seg = |t: &str| Segment { text: t.into(), kind: SegmentKind::Content };
    /// let mut tokens = TokenCache::new(Default::default());
    /// let mut replay = Replayer::default();
    /// let model = CacheModel::default();
    /// let first = Context { segments: vec![seg("hello world\n")], ..Default::default() };
    /// let second = Context { segments: vec![seg("hello world\n"), seg("again\n")], ..Default::default() };
    /// replay.send(&first, &mut tokens, model);
    /// replay.send(&second, &mut tokens, model);
    /// assert_eq!(replay.bill.cached_tokens, 3);
    /// ```
    pub fn send(&mut self, context: &Context, tokens: &mut TokenCache, model: CacheModel) {
        let current: Vec<(blake3::Hash, usize)> = context
            .segments
            .iter()
            .map(|s| tokens.count(&s.text))
            .collect();
        let total: usize = current.iter().map(|(_, n)| n).sum();
        let cached: usize = current
            .iter()
            .zip(&self.previous)
            .take_while(|(a, b)| a.0 == b.0)
            .map(|(a, _)| a.1)
            .sum();
        self.bill.requests += 1;
        self.bill.input_tokens += total as u64;
        self.bill.cached_tokens += cached as u64;
        self.bill.cost +=
            model.cache_read * cached as f64 + model.cache_write * (total - cached) as f64;
        self.previous = current;
        self.recalled_so_far = 0;
    }

    /// Prices one recall after the last request: the model calls the recall tool and sends the
    /// request again with the original appended. The request's own tokens (and earlier recalls
    /// of the same turn) are read from the cache; the recalled original is written to it. The
    /// next request is compared with the last one sent by [`Replayer::send`].
    ///
    /// ```
    /// use ctxgc_bench::context::{Context, Segment, SegmentKind};
    /// use ctxgc_bench::replay::{CacheModel, Replayer, TokenCache};
    /// let mut tokens = TokenCache::new(Default::default());
    /// let mut replay = Replayer::default();
    /// let ctx = Context { segments: vec![Segment { text: "hello world\n".into(), kind: SegmentKind::Content }], ..Default::default() };
    /// replay.send(&ctx, &mut tokens, CacheModel::default());
    /// let before = replay.bill.cost;
    /// replay.recall(100, CacheModel::default());
    /// assert_eq!(replay.bill.recall_requests, 1);
    /// assert!((replay.bill.cost - before - (0.1 * 3.0 + 1.25 * 100.0)).abs() < 1e-9);
    /// ```
    pub fn recall(&mut self, recalled_tokens: usize, model: CacheModel) {
        let prefix: usize =
            self.previous.iter().map(|(_, n)| n).sum::<usize>() + self.recalled_so_far;
        self.bill.recall_requests += 1;
        self.bill.recalled_tokens += recalled_tokens as u64;
        self.bill.input_tokens += (prefix + recalled_tokens) as u64;
        self.bill.cached_tokens += prefix as u64;
        self.bill.cost +=
            model.cache_read * prefix as f64 + model.cache_write * recalled_tokens as f64;
        self.recalled_so_far += recalled_tokens;
    }
}
