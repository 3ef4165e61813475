//! The patterns' match at a position, hand-written for ASCII text.
//!
//! Most of what is counted (JSON, code, English) is ASCII, and on ASCII every character class
//! of the patterns is a byte test: letters `A-Z` and `a-z` (no titlecase, modifier, other or
//! mark letter exists below U+0080), digits `0-9`, whitespace `\t \n \v \f \r` and space.
//! [`o200k_end`] and [`cl100k_end`] give the match the `regex` crate gives at the same position
//! (leftmost-first alternation, greedy quantifiers, backtracking where it changes the result),
//! so counting ASCII text never compiles the Unicode pattern. Every ASCII character starts a
//! match of both patterns, so the match always starts where it is asked for.
//!
//! They read the text through a [`Window`] over its ASCII part; a match that looked at the
//! window's end when more text follows is refused, and the caller asks the regex instead.

/// The ASCII part of a text, remembering whether a reader looked past it.
pub(crate) struct Window<'t> {
    bytes: &'t [u8],
    /// True when the window ends where the text ends.
    whole: bool,
    looked_past: bool,
}

impl<'t> Window<'t> {
    /// A window over `bytes` (all ASCII); `whole` when no text follows them.
    pub(crate) fn new(bytes: &'t [u8], whole: bool) -> Self {
        Window {
            bytes,
            whole,
            looked_past: false,
        }
    }

    #[inline]
    fn get(&mut self, i: usize) -> Option<u8> {
        let b = self.bytes.get(i).copied();
        if b.is_none() {
            self.looked_past = true;
        }
        b
    }

    /// Where the run of bytes in `class` starting at `i` ends.
    #[inline]
    fn run(&mut self, mut i: usize, class: impl Fn(u8) -> bool) -> usize {
        while self.get(i).is_some_and(&class) {
            i += 1;
        }
        i
    }

    /// True when `i` is the end of the text (not only of the window).
    #[inline]
    fn at_text_end(&mut self, i: usize) -> bool {
        self.get(i).is_none() && self.whole
    }

    /// `end`, unless the match looked past a window that is not the whole text.
    #[inline]
    fn decided(&self, end: usize) -> Option<usize> {
        (self.whole || !self.looked_past).then_some(end)
    }
}

#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

#[inline]
fn is_newline(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}

/// `[^\r\n\p{L}\p{N}]`
#[inline]
fn is_prefix(b: u8) -> bool {
    !is_newline(b) && !b.is_ascii_alphanumeric()
}

/// `[^\s\p{L}\p{N}]`
#[inline]
fn is_symbol(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

/// `\p{N}{1,3}` at `at` (a digit).
fn digits(w: &mut Window<'_>, at: usize) -> usize {
    let mut end = at + 1;
    while end < at + 3 && w.get(end).is_some_and(|b| b.is_ascii_digit()) {
        end += 1;
    }
    end
}

/// The whitespace alternatives at `at` (whitespace): `\s*[\r\n]+` (o200k_base), or `\s+$`
/// then `\s*[\r\n]` (cl100k_base); then `\s+`. `\s*` backtracks to the run's last line break.
fn whitespace(w: &mut Window<'_>, at: usize, cl100k: bool) -> usize {
    let end = w.run(at, is_space);
    if cl100k && w.at_text_end(end) {
        return end;
    }
    match w.bytes[at..end].iter().rposition(|&b| is_newline(b)) {
        Some(last) => at + last + 1,
        None => end,
    }
}

/// Where the o200k_base pattern's match at `at` ends (`at` inside the window), if the window
/// decides it.
pub(crate) fn o200k_end(w: &mut Window<'_>, at: usize) -> Option<usize> {
    let end = o200k(w, at);
    w.decided(end)
}

fn o200k(w: &mut Window<'_>, at: usize) -> usize {
    let c = w.bytes[at];
    // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
    // or, failing that, the same with [\p{Lu}...]+[\p{Ll}...]*: on ASCII the two classes are
    // disjoint, so both read an uppercase run then a lowercase run.
    let start = if is_prefix(c) { at + 1 } else { at };
    let upper = w.run(start, |b| b.is_ascii_uppercase());
    let lower = w.run(upper, |b| b.is_ascii_lowercase());
    if lower > start {
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)?
        if w.get(lower) != Some(b'\'') {
            return lower;
        }
        let next = w.get(lower + 1).map(|b| b.to_ascii_lowercase());
        let after = w.get(lower + 2).map(|b| b.to_ascii_lowercase());
        return match (next, after) {
            (Some(b's' | b't' | b'm' | b'd'), _) => lower + 2,
            (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => lower + 3,
            _ => lower,
        };
    }
    if c.is_ascii_digit() {
        return digits(w, at);
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n/]*
    let start = if c == b' ' { at + 1 } else { at };
    if w.get(start).is_some_and(is_symbol) {
        let end = w.run(start, is_symbol);
        return w.run(end, |b| matches!(b, b'\r' | b'\n' | b'/'));
    }
    whitespace(w, at, false)
}

/// Where the cl100k_base pattern's match at `at` ends (`at` inside the window), if the window
/// decides it.
pub(crate) fn cl100k_end(w: &mut Window<'_>, at: usize) -> Option<usize> {
    let end = cl100k(w, at);
    w.decided(end)
}

fn cl100k(w: &mut Window<'_>, at: usize) -> usize {
    let c = w.bytes[at];
    // '(?i:[sdmt]|ll|ve|re)
    if c == b'\'' {
        let next = w.get(at + 1).map(|b| b.to_ascii_lowercase());
        match next {
            Some(b's' | b'd' | b'm' | b't') => return at + 2,
            Some(b'l' | b'v' | b'r') => {
                let after = w.get(at + 2).map(|b| b.to_ascii_lowercase());
                if matches!(
                    (next, after),
                    (Some(b'l'), Some(b'l')) | (Some(b'v' | b'r'), Some(b'e'))
                ) {
                    return at + 3;
                }
            }
            _ => {}
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    let start = if is_prefix(c) { at + 1 } else { at };
    let end = w.run(start, |b| b.is_ascii_alphabetic());
    if end > start {
        return end;
    }
    if c.is_ascii_digit() {
        return digits(w, at);
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    let start = if c == b' ' { at + 1 } else { at };
    if w.get(start).is_some_and(is_symbol) {
        let end = w.run(start, is_symbol);
        return w.run(end, is_newline);
    }
    whitespace(w, at, true)
}
