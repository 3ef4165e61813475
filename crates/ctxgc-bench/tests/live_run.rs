//! A ctxgc strategy keeps each chat in a live session between requests and feeds it only what
//! was appended. That is a speed-up and nothing else: the whole report (every context sent,
//! every miss, recall and replayed cost) equals the one made by compiling each prefix on its
//! own, for every ctxgc strategy, on the bundled chats and on the corpus.

mod common;

use common::{bench_text, config, corpus_dir};
use ctxgc_bench::context::Context;
use ctxgc_bench::parse_spec;
use ctxgc_bench::run::BenchConfig;
use ctxgc_bench::strategy::{Prefix, Strategy, StrategyError};

/// Every built-in strategy that compiles with ctxgc.
const CTXGC: [&str; 8] = [
    "ctxgc",
    "ctxgc-recall",
    "ctxgc-projection",
    "ctxgc-lossless",
    "ctxgc-aggressive",
    "ctxgc-cache",
    "ctxgc-cache-projection",
    "full",
];

/// A strategy run the default way: each prefix compacted on its own.
struct EachPrefix(Box<dyn Strategy>);

impl Strategy for EachPrefix {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> String {
        self.0.description()
    }
    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        self.0.compact(prefix)
    }
    fn wants_projection(&self) -> bool {
        self.0.wants_projection()
    }
}

fn each_prefix(specs: &[&str]) -> BenchConfig {
    BenchConfig {
        strategies: specs
            .iter()
            .map(|s| {
                Box::new(EachPrefix(
                    parse_spec(s, &Default::default()).expect("spec"),
                )) as _
            })
            .collect(),
        ..config(&[])
    }
}

fn same_report(name: &str, text: &str, limit: Option<usize>) {
    let live = BenchConfig {
        limit,
        ..config(&CTXGC)
    };
    let whole = BenchConfig {
        limit,
        ..each_prefix(&CTXGC)
    };
    let (live, whole) = (
        bench_text(name, text, &live),
        bench_text(name, text, &whole),
    );
    assert!(
        live.files[0].error.is_none(),
        "{name}: {:?}",
        live.files[0].error
    );
    assert!(!live.conversations.is_empty(), "{name}: nothing benched");
    for (a, b) in live.conversations.iter().zip(&whole.conversations) {
        for (x, y) in a.results.iter().zip(&b.results) {
            assert!(
                x.error.is_none(),
                "{name} {}: {}: {:?}",
                a.id,
                x.strategy,
                x.error
            );
            assert_eq!(
                serde_json::to_value(x).expect("serialises"),
                serde_json::to_value(y).expect("serialises"),
                "{name} {}: {}",
                a.id,
                x.strategy
            );
        }
    }
    assert_eq!(
        serde_json::to_value(&live).expect("serialises"),
        serde_json::to_value(&whole).expect("serialises"),
        "{name}"
    );
}

#[test]
fn a_live_run_reports_what_compiling_each_prefix_reports_on_the_bundled_chats() {
    for name in [
        "anthropic_session.json",
        "responses_session.json",
        "airline_cabin_change.json",
        "corpus_samples.jsonl",
    ] {
        let path = format!(
            "{}/../ctxgc-core/tests/fixtures/chat/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        same_report(name, &text, None);
    }
}

#[test]
fn a_live_run_reports_what_compiling_each_prefix_reports_on_the_corpus() {
    let Ok(entries) = std::fs::read_dir(corpus_dir()) else {
        assert!(
            std::env::var_os("CTXGC_CORPUS").is_none(),
            "CTXGC_CORPUS is set but cannot be read"
        );
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("corpus file reads");
        // The first conversations of each file: every format and shape the corpus has, at a
        // cost a test run can afford (the bench itself was checked on every file).
        same_report(&path.display().to_string(), &text, Some(12));
    }
}
