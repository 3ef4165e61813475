//! Structured mutation of real inputs, driven by proptest: each mutation is data (a
//! [`Mutation`] with positions as fractions of the input), so a failing case shrinks to the
//! fewest, smallest mutations that still break and is printed in full.
//!
//! The same file is included by the proxy's and the gateway's fuzz tests (`#[path]`), so every
//! front door is attacked with the same mutations.
#![allow(dead_code)]

use proptest::prelude::*;

/// How many generated cases each property runs: `CTXGC_FUZZ_CASES` for long runs; the default
/// keeps CI on 2 cores in seconds.
pub fn cases(default: u32) -> u32 {
    std::env::var("CTXGC_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// One change to an input's bytes. Positions are per-mille of the input's length, so a
/// mutation means the same place in inputs of any size.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Cut the input here.
    Truncate(u16),
    /// XOR one byte with a mask.
    FlipByte(u16, u8),
    /// Insert bytes that are never valid UTF-8 (a lone continuation, a cut sequence, 0xff).
    InvalidUtf8(u16, u8),
    /// Repeat the first key of the object opened here (`{"a": 1}` -> `{"a": 0, "a": 1}`).
    DuplicateKey(u16),
    /// Replace the value after the next `": ` with a value of another type.
    WrongType(u16, u8),
    /// Insert `depth` unclosed or closed brackets.
    Nest(u16, u16, bool),
    /// Copy a slice of the input to another place.
    Splice(u16, u16, u16),
    /// Delete a slice.
    Delete(u16, u16),
    /// Insert a hostile token (huge numbers, escapes, surrogates, control characters).
    Token(u16, u8),
}

const WRONG: [&str; 12] = [
    "null",
    "[]",
    "{}",
    "true",
    "\"\"",
    "-0",
    "1e999999",
    "-1e-999999",
    "123456789012345678901234567890123456789012345678901234567890",
    "\"\\ud800\"",
    "[[[[[[[[]]]]]]]]",
    "{\"\": {\"\": null}}",
];

const TOKENS: [&str; 12] = [
    "\\u0000",
    "\"\\udc00\\ud800\"",
    "\u{0}",
    "\r\n",
    "\u{feff}",
    "<contextgc-state>",
    "</contextgc-state>",
    "[ctxgc: ",
    "99999999999999999999999999999999999999999",
    "-",
    "\\",
    "\"",
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0u16..=1000;
    prop_oneof![
        at.clone().prop_map(Mutation::Truncate),
        (at.clone(), 1u8..=255).prop_map(|(p, m)| Mutation::FlipByte(p, m)),
        (at.clone(), 0u8..4).prop_map(|(p, k)| Mutation::InvalidUtf8(p, k)),
        at.clone().prop_map(Mutation::DuplicateKey),
        (at.clone(), 0u8..WRONG.len() as u8).prop_map(|(p, k)| Mutation::WrongType(p, k)),
        (at.clone(), 1u16..400, any::<bool>()).prop_map(|(p, d, c)| Mutation::Nest(p, d, c)),
        (at.clone(), at.clone(), 0u16..200).prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
        (at.clone(), 0u16..100).prop_map(|(p, n)| Mutation::Delete(p, n)),
        (at, 0u8..TOKENS.len() as u8).prop_map(|(p, k)| Mutation::Token(p, k)),
    ]
}

pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..5)
}

fn pos(len: usize, at: u16) -> usize {
    len * usize::from(at.min(1000)) / 1000
}

/// Applies one mutation to bytes.
pub fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match *m {
        Mutation::Truncate(at) => bytes.truncate(pos(len, at)),
        Mutation::FlipByte(at, mask) => {
            if len > 0 {
                let i = pos(len - 1, at);
                bytes[i] ^= mask;
            }
        }
        Mutation::InvalidUtf8(at, kind) => {
            let bad: &[u8] = match kind {
                0 => &[0x80],
                1 => &[0xc3],
                2 => &[0xe2, 0x82],
                _ => &[0xff, 0xfe],
            };
            let i = pos(len, at);
            bytes.splice(i..i, bad.iter().copied());
        }
        Mutation::DuplicateKey(at) => {
            let start = pos(len, at);
            let Some(open) = bytes[start..].iter().position(|b| *b == b'{') else {
                return;
            };
            let open = start + open;
            // The first key: `"` .. `"` right after the brace (whitespace allowed).
            let rest = &bytes[open + 1..];
            let Some(q1) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
                return;
            };
            if rest[q1] != b'"' {
                return;
            }
            let Some(q2) = rest[q1 + 1..].iter().position(|b| *b == b'"') else {
                return;
            };
            let key = rest[q1..q1 + q2 + 2].to_vec();
            let mut insert = key;
            insert.extend_from_slice(b": 0, ");
            let i = open + 1;
            bytes.splice(i..i, insert);
        }
        Mutation::WrongType(at, kind) => {
            let start = pos(len, at);
            let Some(colon) = find(&bytes[start..], b"\": ") else {
                return;
            };
            let value_start = start + colon + 3;
            let value_end = value_end(bytes, value_start);
            bytes.splice(
                value_start..value_end,
                WRONG[usize::from(kind) % WRONG.len()].bytes(),
            );
        }
        Mutation::Nest(at, depth, closed) => {
            let i = pos(len, at);
            let depth = usize::from(depth);
            let mut insert = "[".repeat(depth).into_bytes();
            if closed {
                insert.extend("]".repeat(depth).bytes());
            }
            bytes.splice(i..i, insert);
        }
        Mutation::Splice(from, to, n) => {
            let a = pos(len, from);
            let b = (a + usize::from(n)).min(len);
            let piece = bytes[a..b].to_vec();
            let i = pos(len, to);
            bytes.splice(i..i, piece);
        }
        Mutation::Delete(at, n) => {
            let a = pos(len, at);
            let b = (a + usize::from(n)).min(len);
            bytes.drain(a..b);
        }
        Mutation::Token(at, kind) => {
            let i = pos(len, at);
            bytes.splice(i..i, TOKENS[usize::from(kind) % TOKENS.len()].bytes());
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where a JSON value starting at `i` ends, roughly: a string to its closing quote, a
/// container to its matching bracket, a scalar to the next `,` `}` `]`.
fn value_end(bytes: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (k, &b) in bytes.iter().enumerate().skip(i) {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    if depth == 0 {
                        return k + 1;
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return k,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            b',' if depth == 0 => return k,
            _ => {}
        }
    }
    bytes.len()
}

/// A seed with mutations applied, as bytes (may be invalid UTF-8).
pub fn mutated(seed: &str, ms: &[Mutation]) -> Vec<u8> {
    let mut bytes = seed.as_bytes().to_vec();
    for m in ms {
        apply(&mut bytes, m);
    }
    bytes
}

/// `depth` nested arrays around `inner`: `[[[inner]]]`.
pub fn nested_arrays(depth: usize, inner: &str) -> String {
    let mut s = String::with_capacity(depth * 2 + inner.len());
    s.push_str(&"[".repeat(depth));
    s.push_str(inner);
    s.push_str(&"]".repeat(depth));
    s
}

/// `depth` nested objects around `inner`: `{"a":{"a":inner}}`.
pub fn nested_objects(depth: usize, inner: &str) -> String {
    let mut s = String::with_capacity(depth * 6 + inner.len());
    s.push_str(&"{\"a\":".repeat(depth));
    s.push_str(inner);
    s.push_str(&"}".repeat(depth));
    s
}
