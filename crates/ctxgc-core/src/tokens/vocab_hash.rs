//! The layout of the precomputed vocabulary tables, shared by the build script (which writes
//! them) and the tokenizer (which reads them). Both sides include this one file, so the hash
//! that places a token at build time is the hash that finds it at run time.
//!
//! A table is an open-addressing hash set of the vocabulary's tokens, probed linearly. Each
//! slot is a little-endian `u32`: 0 when empty, otherwise a [`TAG_BITS`]-bit tag taken from the
//! token's hash above its `rank + 1` in the low [`RANK_BITS`] bits. The tag lets a probe skip
//! most non-matching slots without comparing bytes.

/// Bits of a slot that hold `rank + 1`.
pub const RANK_BITS: u32 = 20;
/// Bits of a slot that hold the hash tag.
pub const TAG_BITS: u32 = 32 - RANK_BITS;
/// Mask of the rank part of a slot.
pub const RANK_MASK: u32 = (1 << RANK_BITS) - 1;

const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xD6E8_FEB8_6659_FD93;

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline(always)]
fn word(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(buf)
}

/// A 64-bit hash of a byte string (tokens are short: one multiply per 8 bytes).
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = K0 ^ (bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        h = fold_mul(h ^ word(chunk), K1);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h = fold_mul(h ^ word(rest), K1);
    }
    fold_mul(h, K0)
}

/// The tag stored with a token whose hash is `hash`.
#[inline(always)]
pub fn tag(hash: u64) -> u32 {
    (hash >> (64 - TAG_BITS)) as u32
}

/// Number of slots for a vocabulary of `tokens` tokens: a power of two, at most ~40% full.
/// (The run-time side reads the size from the table itself.)
#[cfg_attr(not(test), allow(dead_code))]
pub fn slot_count(tokens: usize) -> usize {
    (tokens * 5 / 2).next_power_of_two()
}
