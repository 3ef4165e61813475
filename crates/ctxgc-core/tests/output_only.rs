//! `Detail::OutputOnly` (what `ctxgc compile` uses when it prints only the output) must send
//! exactly what a full compile sends, with the same warnings, on every kind of input: the
//! bundled event traces and chats, the curated corpus samples, and every corpus file when the
//! corpus is there. Every preset is checked, since the lossy ones take other paths.

mod common;

use ctxgc_core::chat::Preset;
use ctxgc_core::{Compiled, Detail, Options, compile};

fn fixture(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn options(preset: Preset, detail: Detail) -> Options {
    let mut options = Options {
        detail,
        ..Options::default()
    };
    options.chat.preset = preset;
    options
}

/// Compiles `text` both ways under every preset and compares what a caller would see.
fn check(name: &str, text: &str) -> usize {
    let mut compared = 0;
    for preset in [Preset::Lossless, Preset::Default, Preset::Aggressive] {
        let full: Compiled = compile(text, &options(preset, Detail::Full))
            .unwrap_or_else(|e| panic!("{name} ({preset:?}): {e}"));
        let lean = compile(text, &options(preset, Detail::OutputOnly))
            .unwrap_or_else(|e| panic!("{name} ({preset:?}), output only: {e}"));
        assert_eq!(
            lean.output, full.output,
            "{name} ({preset:?}): output differs"
        );
        assert_eq!(lean.format, full.format, "{name} ({preset:?})");
        let messages = |c: &Compiled| c.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(
            messages(&lean),
            messages(&full),
            "{name} ({preset:?}): warnings"
        );
        assert_eq!(
            lean.would_save_tokens, full.would_save_tokens,
            "{name} ({preset:?})"
        );
        // Nothing of the report was built.
        assert!(
            lean.decisions.is_empty() && lean.receipts.is_empty(),
            "{name}"
        );
        assert!(lean.chat.is_none() && lean.records.is_empty(), "{name}");
        assert_eq!((lean.tokens_before, lean.tokens_after), (0, 0), "{name}");
        // ...while the full compile did decide something on these inputs.
        compared += full.decisions.len();
    }
    compared
}

#[test]
fn bundled_examples_and_fixtures_send_the_same_output() {
    let mut decided = 0;
    for path in [
        "../../examples/coding-session.jsonl",
        "../../examples/support-session.json",
        "tests/fixtures/chat/airline_cabin_change.json",
        "tests/fixtures/chat/anthropic_session.json",
        "tests/fixtures/chat/responses_session.json",
        "tests/fixtures/chat/corpus_samples.jsonl",
        "tests/fixtures/tracegc/coding_agent_long.json",
        "tests/fixtures/tracegc/customer_support_medium.json",
        "tests/fixtures/tracegc/research_agent_short.json",
    ] {
        decided += check(path, &fixture(path));
    }
    assert!(decided > 100, "the fixtures hold {decided} decisions");
}

#[test]
fn every_corpus_file_sends_the_same_output() {
    let Some(dir) = common::corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); skipped");
        return;
    };
    let names = common::files_with_extension(&dir, "jsonl");
    assert!(!names.is_empty(), "no corpus files in {}", dir.display());
    for path in names {
        let text = std::fs::read_to_string(&path).expect("corpus file reads");
        check(&path.display().to_string(), &text);
    }
}
