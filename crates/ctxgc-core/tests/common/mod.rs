//! What the integration tests and benches over the corpus share.
#![allow(dead_code)] // each test file uses some of these

use std::path::PathBuf;

/// Where the public agent-transcript corpus is read from: `$CTXGC_CORPUS`, else
/// `shared/corpus` beside the checkout (it may be absent).
pub fn corpus_path() -> PathBuf {
    std::env::var_os("CTXGC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        })
}

/// The corpus directory, when it is there.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = corpus_path();
    dir.is_dir().then_some(dir)
}

/// The text of a corpus file, or `None` (with a note) when the corpus is absent.
pub fn corpus(name: &str) -> Option<String> {
    let dir = corpus_path();
    match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => Some(text),
        Err(_) => {
            eprintln!(
                "note: no corpus at {} (set CTXGC_CORPUS); skipped",
                dir.display()
            );
            None
        }
    }
}
