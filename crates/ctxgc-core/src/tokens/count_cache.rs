//! Token counts remembered by content hash, process-wide.
//!
//! A session that grows by one message is recompiled and recounted whole by a stateless caller
//! (a gateway, the scoreboard, `ctxgc compile` on each prefix); with this cache only the new
//! message is tokenized. Keys are 128 bits of BLAKE3 over the vocabulary's name and the text,
//! so a wrong hit is as unlikely as a BLAKE3 collision. Memory is bounded: the cache keeps two
//! generations of at most [`GENERATION`] entries each; when the young one fills, the old one is
//! dropped and the young one becomes old (entries found in the old generation are moved back
//! into the young one), so what a live session keeps recounting stays cached.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::Tokenizer;

/// Entries per generation (about 24 bytes each, so at most ~12 MiB for both).
pub const GENERATION: usize = 1 << 18;

type Key = [u8; 16];

#[derive(Default)]
struct Generations {
    young: FxHashMap<Key, u32>,
    old: FxHashMap<Key, u32>,
}

static CACHE: Mutex<Option<Generations>> = Mutex::new(None);

fn key(tokenizer: Tokenizer, namespace: &str, text: &str) -> Key {
    let mut hasher = blake3::Hasher::new();
    hasher.update(tokenizer.name().as_bytes());
    hasher.update(&[0]);
    hasher.update(namespace.as_bytes());
    hasher.update(&[0]);
    hasher.update(text.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    key
}

fn with_cache<T>(f: impl FnOnce(&mut Generations) -> T) -> T {
    // A panic while holding the lock cannot leave a wrong count behind (entries are inserted
    // whole), so a poisoned lock is still usable.
    let mut guard = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    f(guard.get_or_insert_with(Generations::default))
}

/// The count of `text` from the cache, or `count()` (computed outside the lock) remembered.
/// `namespace` names what is counted: `""` for the tokens of the text itself, another name for
/// a count derived from the text by a fixed rule (such as a message's payload).
pub(crate) fn get_or_count(
    tokenizer: Tokenizer,
    namespace: &str,
    text: &str,
    count: impl FnOnce() -> usize,
) -> usize {
    let key = key(tokenizer, namespace, text);
    let found = with_cache(|c| match c.young.get(&key) {
        Some(&n) => Some(n),
        None => {
            let n = c.old.remove(&key)?;
            insert(c, key, n);
            Some(n)
        }
    });
    if let Some(n) = found {
        return n as usize;
    }
    let n = count();
    // Counts above u32::MAX (a 4-billion-token text) are simply not remembered.
    if let Ok(small) = u32::try_from(n) {
        with_cache(|c| insert(c, key, small));
    }
    n
}

fn insert(c: &mut Generations, key: Key, n: u32) {
    if c.young.len() >= GENERATION {
        c.old = std::mem::take(&mut c.young);
    }
    c.young.insert(key, n);
}

/// Number of counts remembered now (both generations).
///
/// ```
/// use ctxgc_core::Tokenizer;
/// let text = "a remembered text ".repeat(20);
/// Tokenizer::O200kBase.count(&text);
/// assert!(ctxgc_core::tokens::count_cache::len() >= 1);
/// ```
pub fn len() -> usize {
    with_cache(|c| c.young.len() + c.old.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_count_is_the_count_of_its_own_vocabulary() {
        // Text that the two vocabularies split differently.
        let text = "日本語のテキストと中文文本，还有한국어 텍스트. ".repeat(20);
        let o200k = Tokenizer::O200kBase.count_uncached(&text);
        let cl100k = Tokenizer::Cl100kBase.count_uncached(&text);
        assert_ne!(o200k, cl100k);
        for _ in 0..2 {
            assert_eq!(Tokenizer::O200kBase.count(&text), o200k);
            assert_eq!(Tokenizer::Cl100kBase.count(&text), cl100k);
        }
    }

    #[test]
    fn generations_bound_memory_and_keep_what_is_reused() {
        let mut c = Generations::default();
        let k = |i: usize| {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            key
        };
        insert(&mut c, k(0), 7);
        for i in 1..=GENERATION {
            insert(&mut c, k(i), 1);
        }
        // The young generation filled and became old; key 0 is still found there.
        assert_eq!(c.young.len(), 1);
        assert_eq!(c.old.get(&k(0)), Some(&7));
        assert!(c.young.len() + c.old.len() <= 2 * GENERATION);
    }
}
