//! A small per-thread memo of pre-token counts.
//!
//! Agent context repeats the same short pre-tokens over and over (JSON keys, quotes and
//! colons, common words, ids), and each costs a probe of a multi-megabyte vocabulary table
//! (three cache misses: slot, offset, bytes), or a whole byte-pair merge when it is not itself
//! a token. This direct-mapped table of 4,096 recent pieces, 128 KiB per vocabulary, answers a
//! repeated piece from one cache line. Entries hold the piece's bytes and are compared in
//! full, so a hit is exact: the count is never a guess from a hash.

use std::cell::RefCell;

use super::Tokenizer;
use super::vocab_hash::hash_bytes;

/// Pieces longer than this are counted without the memo (they are rare, and seldom repeat).
const MAX_PIECE: usize = 22;
const SLOTS: usize = 4096;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Entry {
    bytes: [u8; MAX_PIECE],
    /// The piece's length; 0 marks an empty slot (pre-tokens are never empty).
    len: u8,
    count: u8,
    _pad: [u8; 8],
}

const EMPTY: Entry = Entry {
    bytes: [0; MAX_PIECE],
    len: 0,
    count: 0,
    _pad: [0; 8],
};

pub(crate) struct PieceCache {
    entries: Box<[Entry]>,
}

impl PieceCache {
    fn new() -> PieceCache {
        PieceCache {
            entries: vec![EMPTY; SLOTS].into_boxed_slice(),
        }
    }

    /// The number of tokens `piece` becomes: remembered, or computed by `count` and remembered.
    #[inline]
    pub(crate) fn get_or_count(&mut self, piece: &[u8], count: impl FnOnce() -> usize) -> usize {
        if piece.len() > MAX_PIECE {
            return count();
        }
        let slot = &mut self.entries[(hash_bytes(piece) as usize) & (SLOTS - 1)];
        if usize::from(slot.len) == piece.len() && &slot.bytes[..piece.len()] == piece {
            return usize::from(slot.count);
        }
        let n = count();
        // A piece of at most MAX_PIECE bytes becomes at most MAX_PIECE tokens.
        if let Ok(small) = u8::try_from(n) {
            slot.bytes[..piece.len()].copy_from_slice(piece);
            slot.len = piece.len() as u8;
            slot.count = small;
        }
        n
    }
}

/// Runs `f` with this thread's memo for `tokenizer` (each vocabulary has its own).
pub(crate) fn with<R>(tokenizer: Tokenizer, f: impl FnOnce(&mut PieceCache) -> R) -> R {
    thread_local! {
        static CACHES: RefCell<[Option<PieceCache>; 2]> = const { RefCell::new([None, None]) };
    }
    let which = match tokenizer {
        Tokenizer::O200kBase => 0,
        Tokenizer::Cl100kBase => 1,
    };
    CACHES.with(|caches| match caches.try_borrow_mut() {
        Ok(mut caches) => f(caches[which].get_or_insert_with(PieceCache::new)),
        // Only reached if counting ever re-entered itself; a fresh memo keeps it correct.
        Err(_) => f(&mut PieceCache::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_piece_is_answered_without_counting_and_a_colliding_one_is_not() {
        let mut cache = PieceCache::new();
        assert_eq!(cache.get_or_count(b"hello", || 1), 1);
        assert_eq!(cache.get_or_count(b"hello", || unreachable!()), 1);
        // Find another piece in the same slot: it must be counted, not given "hello"'s count.
        let slot = hash_bytes(b"hello") as usize & (SLOTS - 1);
        let other = (0u32..)
            .map(|n| format!("p{n}"))
            .find(|p| hash_bytes(p.as_bytes()) as usize & (SLOTS - 1) == slot)
            .expect("some piece shares the slot");
        assert_eq!(cache.get_or_count(other.as_bytes(), || 7), 7);
        assert_eq!(cache.get_or_count(other.as_bytes(), || unreachable!()), 7);
        assert_eq!(cache.get_or_count(b"hello", || 1), 1);
    }

    #[test]
    fn long_pieces_are_always_counted() {
        let mut cache = PieceCache::new();
        let long = [b'x'; MAX_PIECE + 1];
        assert_eq!(cache.get_or_count(&long, || 3), 3);
        assert_eq!(cache.get_or_count(&long, || 4), 4);
    }

    #[test]
    fn counts_through_the_memo_equal_direct_counts() {
        let text = "{\"id\": \"r-1\", \"status\": \"ok\"} naïve café 12345 ".repeat(50);
        for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            let (vocab, pattern) = tokenizer.tables();
            let direct: usize = pattern
                .split(&text)
                .map(|p| match vocab.rank(p.as_bytes()) {
                    Some(_) => 1,
                    None => super::super::bpe::count(vocab, p.as_bytes()),
                })
                .sum();
            assert_eq!(tokenizer.count_uncached(&text), direct);
            assert_eq!(tokenizer.count_uncached(&text), direct);
        }
    }
}
