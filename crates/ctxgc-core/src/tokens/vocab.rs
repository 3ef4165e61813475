//! A BPE vocabulary as static tables laid out by the build script: rank lookup by bytes with no
//! construction at run time.

use super::vocab_hash::{RANK_BITS, RANK_MASK, hash_bytes, tag};

/// One vocabulary's tables (see `vocab_hash.rs` for the layout).
pub(crate) struct Vocab {
    bytes: &'static [u8],
    offsets: &'static [u8],
    slots: &'static [u8],
}

macro_rules! vocab {
    ($name:literal) => {
        Vocab {
            bytes: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bytes")),
            offsets: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".offsets")),
            slots: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".slots")),
        }
    };
}

pub(crate) static O200K_BASE: Vocab = vocab!("o200k_base");
pub(crate) static CL100K_BASE: Vocab = vocab!("cl100k_base");

#[inline(always)]
fn read_u32(table: &[u8], i: usize) -> u32 {
    let at = i * 4;
    u32::from_le_bytes([table[at], table[at + 1], table[at + 2], table[at + 3]])
}

impl Vocab {
    /// The bytes of the token with `rank`.
    #[inline]
    fn token(&self, rank: u32) -> &'static [u8] {
        let r = rank as usize;
        &self.bytes[read_u32(self.offsets, r) as usize..read_u32(self.offsets, r + 1) as usize]
    }

    /// The rank of the token whose bytes are `piece`, if the vocabulary has one.
    #[inline]
    pub(crate) fn rank(&self, piece: &[u8]) -> Option<u32> {
        let h = hash_bytes(piece);
        let want = tag(h);
        let mask = self.slots.len() / 4 - 1;
        let mut i = (h as usize) & mask;
        loop {
            let slot = read_u32(self.slots, i);
            if slot == 0 {
                return None;
            }
            if slot >> RANK_BITS == want {
                let rank = (slot & RANK_MASK) - 1;
                if self.token(rank) == piece {
                    return Some(rank);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Number of ordinary tokens.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }
}

#[cfg(test)]
mod tests {
    use super::super::vocab_hash::slot_count;
    use super::*;

    #[test]
    fn every_token_is_found_at_its_own_rank() {
        for vocab in [&O200K_BASE, &CL100K_BASE] {
            assert!(vocab.len() > 100_000);
            assert_eq!(vocab.slots.len() / 4, slot_count(vocab.len()));
            for rank in 0..vocab.len() as u32 {
                assert_eq!(vocab.rank(vocab.token(rank)), Some(rank));
            }
        }
    }

    #[test]
    fn every_single_byte_is_a_token() {
        for vocab in [&O200K_BASE, &CL100K_BASE] {
            for b in 0..=255u8 {
                assert!(vocab.rank(&[b]).is_some(), "byte {b}");
            }
        }
    }
}
