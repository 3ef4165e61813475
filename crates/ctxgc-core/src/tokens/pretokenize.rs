//! Splitting text into pre-tokens, exactly as the vocabularies' published patterns do.
//!
//! The published patterns end with `\s+(?!\S)`, a look-ahead that the `regex` crate (linear
//! time, no backtracking) does not support. Both patterns here replace that alternative and
//! what follows it with a plain `\s+`, and [`Pretokens`] restores the look-ahead's effect: a
//! whitespace-only match that no earlier alternative produced (it neither ends in a line break
//! nor reaches the end of the text) is followed by a non-space character, and the look-ahead
//! would have left that run's last character to start the next pre-token. Runs that reach the
//! final alternative never contain a line break (the `\s*[\r\n]` alternative comes first).
//! The cl100k pattern's possessive quantifiers are written greedy: in each position they
//! occupy, backtracking can never produce a different match.

use std::sync::OnceLock;

use regex::Regex;

const O200K_BASE: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

const CL100K_BASE: &str = concat!(
    r"'(?i:[sdmt]|ll|ve|re)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s+$",
    r"|\s*[\r\n]",
    r"|\s+",
);

/// Which pattern splits the text.
#[derive(Clone, Copy)]
pub(crate) enum Pattern {
    O200kBase,
    Cl100kBase,
}

impl Pattern {
    /// The compiled pattern: built on first use, once per process.
    fn regex(self) -> &'static Regex {
        static O200K: OnceLock<Regex> = OnceLock::new();
        static CL100K: OnceLock<Regex> = OnceLock::new();
        // The patterns are constants of this module; a failure to compile them is a defect
        // caught by every test that counts.
        let build = |p: &str| Regex::new(p).expect("pre-token pattern compiles");
        match self {
            Pattern::O200kBase => O200K.get_or_init(|| build(O200K_BASE)),
            Pattern::Cl100kBase => CL100K.get_or_init(|| build(CL100K_BASE)),
        }
    }

    /// The pre-tokens of `text`, in order; together they cover it exactly.
    pub(crate) fn split(self, text: &str) -> Pretokens<'_> {
        Pretokens {
            regex: self.regex(),
            text,
            at: 0,
        }
    }
}

/// Iterator over the pre-tokens of a text.
pub(crate) struct Pretokens<'t> {
    regex: &'static Regex,
    text: &'t str,
    at: usize,
}

impl<'t> Iterator for Pretokens<'t> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let m = self.regex.find_at(self.text, self.at)?;
        let (start, mut end) = (m.start(), m.end());
        let piece = m.as_str();
        if end < self.text.len()
            && !piece.ends_with(['\r', '\n'])
            && piece.chars().all(char::is_whitespace)
        {
            // The look-ahead case: give the run's last character back, unless it is the only one.
            if let Some((last, _)) = piece.char_indices().next_back()
                && last > 0
            {
                end = start + last;
            }
        }
        self.at = end;
        Some(&self.text[start..end])
    }
}
