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

mod ascii;

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
    /// The compiled pattern: built on first use, once per process (only text with a
    /// character beyond ASCII needs it; see [`ascii`]).
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
            pattern: self,
            text,
            at: 0,
            non_ascii: first_non_ascii(text.as_bytes(), 0),
        }
    }

    /// The end of the match at `at` when the ASCII text around it decides it, else `None`.
    fn ascii_end(self, text: &[u8], at: usize, non_ascii: usize) -> Option<usize> {
        if at >= non_ascii {
            return None;
        }
        let mut window = ascii::Window::new(&text[..non_ascii], non_ascii == text.len());
        match self {
            Pattern::O200kBase => ascii::o200k_end(&mut window, at),
            Pattern::Cl100kBase => ascii::cl100k_end(&mut window, at),
        }
    }
}

/// The position of the first non-ASCII byte from `from` on, or the text's length.
fn first_non_ascii(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|b| !b.is_ascii())
        .map_or(bytes.len(), |k| from + k)
}

/// Iterator over the pre-tokens of a text.
pub(crate) struct Pretokens<'t> {
    pattern: Pattern,
    text: &'t str,
    at: usize,
    /// The first non-ASCII byte at or after `at` (or the text's length), once looked for.
    non_ascii: usize,
}

impl<'t> Iterator for Pretokens<'t> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let bytes = self.text.as_bytes();
        if self.at >= bytes.len() {
            return None;
        }
        if self.non_ascii < self.at {
            self.non_ascii = first_non_ascii(bytes, self.at);
        }
        let (start, mut end) = match self.pattern.ascii_end(bytes, self.at, self.non_ascii) {
            Some(end) => (self.at, end),
            None => {
                let m = self.pattern.regex().find_at(self.text, self.at)?;
                (m.start(), m.end())
            }
        };
        let piece = &self.text[start..end];
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pre-tokens as the regex alone gives them (what `split` did before the ASCII path).
    fn regex_split(pattern: Pattern, text: &str) -> Vec<&str> {
        let regex = pattern.regex();
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(m) = regex.find_at(text, at) {
            let (start, mut end) = (m.start(), m.end());
            let piece = m.as_str();
            if end < text.len()
                && !piece.ends_with(['\r', '\n'])
                && piece.chars().all(char::is_whitespace)
                && let Some((last, _)) = piece.char_indices().next_back()
                && last > 0
            {
                end = start + last;
            }
            out.push(&text[start..end]);
            at = end;
        }
        out
    }

    fn same(text: &str) {
        for pattern in [Pattern::O200kBase, Pattern::Cl100kBase] {
            assert_eq!(
                pattern.split(text).collect::<Vec<_>>(),
                regex_split(pattern, text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn ascii_path_splits_as_the_regex_on_edge_cases() {
        for text in [
            "",
            " ",
            "  ",
            "a",
            "A",
            "'",
            "''",
            "'s",
            "'S",
            "'ll",
            "'LL",
            "'lL",
            "'re",
            "'ve",
            "'d",
            "'m",
            "'t",
            "'x",
            "don't",
            "DON'T",
            "I'm",
            "we'll",
            "They'RE",
            "abc'",
            "abc'l",
            "abc're",
            "HTTPServer",
            "iPhone",
            "camelCase",
            "ABC",
            " ABC",
            " abc",
            "\tabc",
            "\nabc",
            "\rabc",
            "1",
            "12",
            "123",
            "1234",
            "12345",
            " 1",
            " 12",
            "-1",
            "a1",
            "1a",
            "x/y",
            "//",
            "a//\n/b",
            "!!!\n\n/",
            " !",
            "  !",
            " \n",
            "\n ",
            "a \n b",
            "a  \n\n  b",
            "a   ",
            "a   b",
            "a\t\tb",
            "a \x0b\x0c b",
            "a\r\n\r\nb",
            "\r\n",
            "  \n  \n  x",
            "x  ",
            "{\"key\": \"value\", \"n\": 12345}",
            "\x01\x02 x",
            "\x7f",
            "a \u{a0} b",
            "é",
            "aé",
            "a é",
            "  é",
            "\n\u{a0}\n",
            "\n   \u{a0}\nx",
            "x\u{301}y",
            "ſ's",
            "'ſ",
            "中文 abc",
            "abc\u{85}def",
            " \u{2003}x",
            "A\u{1c5}b",
        ] {
            same(text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        #[test]
        fn ascii_path_splits_as_the_regex(text in proptest::collection::vec(
            prop::sample::select(vec![
                "a", "b", "s", "t", "e", "r", "v", "m", "l", "d", "A", "S", "L", "E", "Z", "0",
                "7", "'", " ", "  ", "\t", "\n", "\r", "\x0b", "\x0c", "/", "!", "{", "\"", ":",
                ",", "-", "_", "\x01", "é", "\u{a0}", "\u{85}", "ſ", "中", "\u{301}", "\u{1c5}",
                "\u{2003}", "😀",
            ]),
            0..40,
        )) {
            same(&text.concat());
        }
    }
}
