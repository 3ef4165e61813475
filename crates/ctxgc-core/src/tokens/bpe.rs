//! Byte-pair merging of one pre-token, counting the tokens it becomes. The merge order is
//! tiktoken's: repeatedly merge the adjacent pair whose concatenation has the lowest rank,
//! leftmost first on ties. Short pieces (nearly all) use a flat scan over a stack array;
//! long ones a heap, so a megabyte-long run of punctuation stays O(n log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

/// Pieces shorter than this are merged with the flat scan.
const SHORT: usize = 128;
const NONE: u32 = u32::MAX;

/// Number of tokens `piece` (not itself a token) becomes.
pub(crate) fn count(vocab: &Vocab, piece: &[u8]) -> usize {
    match piece.len() {
        0 => 0,
        1 => 1,
        n if n < SHORT => count_short(vocab, piece),
        _ => count_long(vocab, piece),
    }
}

fn count_short(vocab: &Vocab, piece: &[u8]) -> usize {
    // starts[i]: where part i starts; ranks[i]: rank of part i merged with part i + 1.
    let n = piece.len();
    let mut starts = [0u32; SHORT + 1];
    let mut ranks = [NONE; SHORT + 1];
    for (i, s) in starts.iter_mut().enumerate().take(n + 1) {
        *s = i as u32;
    }
    for (i, r) in ranks.iter_mut().enumerate().take(n - 1) {
        *r = vocab.rank(&piece[i..i + 2]).unwrap_or(NONE);
    }
    // Live parts are 0..parts; starts[parts] == n.
    let mut parts = n;
    let pair_rank = |starts: &[u32], parts: usize, i: usize| -> u32 {
        if i + 2 <= parts {
            vocab
                .rank(&piece[starts[i] as usize..starts[i + 2] as usize])
                .unwrap_or(NONE)
        } else {
            NONE
        }
    };
    loop {
        let mut best = NONE;
        let mut at = 0;
        for (i, &r) in ranks[..parts.saturating_sub(1)].iter().enumerate() {
            if r < best {
                best = r;
                at = i;
            }
        }
        if best == NONE {
            return parts;
        }
        // Merge part `at` with part `at + 1`.
        starts.copy_within(at + 2..=parts, at + 1);
        ranks.copy_within(at + 2..parts, at + 1);
        parts -= 1;
        ranks[parts.saturating_sub(1)..=parts].fill(NONE);
        ranks[at] = pair_rank(&starts, parts, at);
        if at > 0 {
            ranks[at - 1] = pair_rank(&starts, parts, at - 1);
        }
    }
}

/// A linked list of parts over byte positions, with candidate merges in a min-heap keyed by
/// (rank, start); stale heap entries are skipped when popped.
fn count_long(vocab: &Vocab, piece: &[u8]) -> usize {
    let n = piece.len();
    // For the part starting at byte i (valid while alive): its end and its predecessor's start.
    let mut end: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    // next_rank[i]: rank of part i merged with its successor, NONE if not a token.
    let mut next_rank = vec![NONE; n];
    let mut heap = BinaryHeap::with_capacity(n);
    for i in 0..n - 1 {
        if let Some(r) = vocab.rank(&piece[i..i + 2]) {
            next_rank[i] = r;
            heap.push(Reverse((r, i)));
        }
    }
    let mut parts = n;
    while let Some(Reverse((rank, left))) = heap.pop() {
        if next_rank[left] != rank {
            continue;
        }
        let right = end[left];
        let right_end = end[right];
        end[left] = right_end;
        next_rank[right] = NONE;
        parts -= 1;
        if right_end < n {
            prev[right_end] = left;
        }
        let mut recompute = |start: usize| {
            let stop = end[start];
            next_rank[start] = NONE;
            if stop < n
                && let Some(r) = vocab.rank(&piece[start..end[stop]])
            {
                next_rank[start] = r;
                heap.push(Reverse((r, start)));
            }
        };
        recompute(left);
        if left > 0 {
            recompute(prev[left]);
        }
    }
    parts
}
