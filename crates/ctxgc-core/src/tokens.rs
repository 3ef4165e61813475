//! Exact token counts with a real BPE tokenizer (offline): o200k_base by default, cl100k_base
//! on request. No characters/4 estimates anywhere.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

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

    fn bpe(self) -> &'static CoreBPE {
        static O200K: OnceLock<CoreBPE> = OnceLock::new();
        static CL100K: OnceLock<CoreBPE> = OnceLock::new();
        // The vocabularies are compiled into the binary; failing to load them is a build
        // defect, not an input problem.
        match self {
            Tokenizer::O200kBase => O200K.get_or_init(|| {
                tiktoken_rs::o200k_base().expect("embedded o200k_base vocabulary loads")
            }),
            Tokenizer::Cl100kBase => CL100K.get_or_init(|| {
                tiktoken_rs::cl100k_base().expect("embedded cl100k_base vocabulary loads")
            }),
        }
    }

    /// Exact number of tokens in `text` (special-token text counts as ordinary text).
    ///
    /// ```
    /// use ctxgc_core::Tokenizer;
    /// assert_eq!(Tokenizer::O200kBase.count("hello world"), 2);
    /// ```
    pub fn count(self, text: &str) -> usize {
        self.bpe().encode_ordinary(text).len()
    }
}
