//! Exact token counts with a real BPE tokenizer (offline): o200k_base by default, cl100k_base
//! on request. No characters/4 estimates anywhere.
//!
//! Start-up is nearly free: the vocabularies are static tables laid out when the crate is built
//! (`build.rs`), so nothing is decoded or hashed at run time; the pre-token pattern is compiled
//! on the first count. Counts are identical to tiktoken's (`tests/tokenizer_equivalence.rs`).

mod bpe;
pub mod count_cache;
mod piece_cache;
mod pretokenize;
mod vocab;
mod vocab_hash;

use serde::{Deserialize, Serialize};

use pretokenize::Pattern;
use vocab::Vocab;

/// Which BPE vocabulary counts tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// GPT-4o and later models' vocabulary.
    #[default]
    O200kBase,
    /// GPT-4 and GPT-3.5's vocabulary.
    Cl100kBase,
}

impl Tokenizer {
    /// The vocabulary's name.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }

    /// Parses [`Tokenizer::name`].
    pub fn from_name(name: &str) -> Option<Tokenizer> {
        match name {
            "o200k_base" | "o200k" => Some(Tokenizer::O200kBase),
            "cl100k_base" | "cl100k" => Some(Tokenizer::Cl100kBase),
            _ => None,
        }
    }

    fn tables(self) -> (&'static Vocab, Pattern) {
        match self {
            Tokenizer::O200kBase => (&vocab::O200K_BASE, Pattern::O200kBase),
            Tokenizer::Cl100kBase => (&vocab::CL100K_BASE, Pattern::Cl100kBase),
        }
    }

    /// Exact number of tokens in `text` (special-token text counts as ordinary text).
    ///
    /// Texts of [`CACHE_MIN_BYTES`] or more are remembered by content hash for the life of the
    /// process (see [`count_cache`]), so recounting a grown session only counts what is new.
    ///
    /// ```
    /// use ctxgc_core::Tokenizer;
    /// assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
    /// ```
    pub fn count(self, text: &str) -> usize {
        if text.len() < CACHE_MIN_BYTES {
            return self.count_uncached(text);
        }
        count_cache::get_or_count(self, "", text, || self.count_uncached(text))
    }

    /// [`Tokenizer::count`] through the count cache whatever the text's length: for short
    /// texts counted again and again (the messages of a conversation resent on every
    /// request), where hashing costs less than tokenizing.
    ///
    /// ```
    /// use ctxgc_core::Tokenizer;
    /// assert_eq!(Tokenizer::O200kBase.count_cached("hello world"), 2);
    /// ```
    pub fn count_cached(self, text: &str) -> usize {
        count_cache::get_or_count(self, "", text, || self.count_uncached(text))
    }

    /// `count(text)` for a count that is a fixed function of `text` (such as the tokens of a
    /// message's payload, which needs parsing), remembered by content hash under `namespace`
    /// like [`Tokenizer::count`]'s.
    pub(crate) fn count_derived(
        self,
        namespace: &str,
        text: &str,
        count: impl FnOnce() -> usize,
    ) -> usize {
        if text.len() < CACHE_MIN_BYTES {
            return count();
        }
        count_cache::get_or_count(self, namespace, text, count)
    }

    /// [`Tokenizer::count`] without the cache: always tokenizes.
    ///
    /// ```
    /// use ctxgc_core::Tokenizer;
    /// let text = "The quick brown fox. ".repeat(100);
    /// assert_eq!(Tokenizer::Cl100kBase.count_uncached(&text), Tokenizer::Cl100kBase.count(&text));
    /// ```
    pub fn count_uncached(self, text: &str) -> usize {
        let (vocab, pattern) = self.tables();
        let count_piece = |piece: &str| match vocab.rank(piece.as_bytes()) {
            Some(_) => 1,
            None => bpe::count(vocab, piece.as_bytes()),
        };
        piece_cache::with(self, |cache| {
            pattern
                .split(text)
                .map(|piece| cache.get_or_count(piece.as_bytes(), || count_piece(piece)))
                .sum()
        })
    }
}

/// Texts shorter than this are counted directly: hashing and a cache lookup would cost about as
/// much as counting them.
pub const CACHE_MIN_BYTES: usize = 256;
