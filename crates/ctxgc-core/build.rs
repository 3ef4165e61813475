//! Lays out the BPE vocabularies as static tables (see `src/tokens/vocab_hash.rs`), so that the
//! tokenizer needs no construction at run time: the tables are part of the binary and only the
//! pages a count touches are ever read.

use std::fs;
use std::path::Path;

// Shared with the run-time lookup; the build script uses only the writing half.
#[path = "src/tokens/vocab_hash.rs"]
#[allow(dead_code)]
mod vocab_hash;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/tokens/vocab_hash.rs");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let out = Path::new(&out_dir);
    write_tables(
        out,
        "o200k_base",
        &tiktoken_rs::o200k_base().expect("o200k_base vocabulary loads"),
    );
    write_tables(
        out,
        "cl100k_base",
        &tiktoken_rs::cl100k_base().expect("cl100k_base vocabulary loads"),
    );
}

/// Writes `NAME.bytes` (every ordinary token's bytes, in rank order), `NAME.offsets` (rank ->
/// start in `.bytes`, one more entry than ranks) and `NAME.slots` (the hash table).
fn write_tables(out: &Path, name: &str, bpe: &tiktoken_rs::CoreBPE) {
    let special: Vec<u32> = bpe
        .special_tokens()
        .into_iter()
        .flat_map(|s| bpe.encode_with_special_tokens(s))
        .collect();
    // Ordinary ranks are dense from 0; the special tokens sit at or after their end.
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    for rank in 0u32.. {
        if special.contains(&rank) {
            break;
        }
        match bpe.decode_bytes(&[rank]) {
            Ok(bytes) => tokens.push(bytes),
            Err(_) => break,
        }
    }
    assert!(
        tokens.len() < (1 << vocab_hash::RANK_BITS) - 1,
        "{name}: too many tokens for the slot layout"
    );

    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity((tokens.len() + 1) * 4);
    for token in &tokens {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(token);
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());

    let n_slots = vocab_hash::slot_count(tokens.len());
    let mut slots = vec![0u32; n_slots];
    for (rank, token) in tokens.iter().enumerate() {
        let h = vocab_hash::hash_bytes(token);
        let mut i = (h as usize) & (n_slots - 1);
        while slots[i] != 0 {
            i = (i + 1) & (n_slots - 1);
        }
        slots[i] = (vocab_hash::tag(h) << vocab_hash::RANK_BITS) | (rank as u32 + 1);
    }
    let slots: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();

    fs::write(out.join(format!("{name}.bytes")), bytes).expect("write token bytes");
    fs::write(out.join(format!("{name}.offsets")), offsets).expect("write token offsets");
    fs::write(out.join(format!("{name}.slots")), slots).expect("write token slots");
}
