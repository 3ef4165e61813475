//! What the integration tests and benches over the corpus share.
#![allow(dead_code)] // each test file uses some of these

use std::path::{Path, PathBuf};

use ctxgc_core::Options;
use ctxgc_core::chat::{ChatOptions, Preset};

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

/// The files in `dir` whose extension is `extension`, sorted.
pub fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
}

/// The text of the chat fixture `name` (in tests/fixtures/chat).
pub fn chat_fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chat")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The TraceGC fixtures bundled with the tests (MIT, see fixtures/tracegc/LICENSE), as
/// (file name, text), by name.
pub fn tracegc_fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracegc");
    files_with_extension(&dir, "json")
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("fixture reads"))
        })
        .collect()
}

/// The default options with the chat preset `preset`.
pub fn preset_options(preset: Preset) -> Options {
    Options {
        chat: ChatOptions {
            preset,
            ..Default::default()
        },
        ..Default::default()
    }
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
