//! A [`LiveReport`] kept up to date after every append gives, at every step, exactly what
//! building the report from scratch gives: the prompt, both exact counts (checked also
//! against counting the whole texts at once), decisions, receipts and withheld savings. On
//! the bundled traces, the TraceGC fixtures (when present), generated traces with overwrites,
//! duplicate calls, stale reads and abandoned branches, in eager and cache-stable mode, and
//! with events arriving in batches.

use std::path::{Path, PathBuf};

use ctxgc_core::compile::{event_session_template, report_events, uncompacted_events};
use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::live_report::LiveReport;
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Item, Options, Tokenizer};

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The events of a trace file: JSONL, a JSON list, or `{"events": [...]}`.
fn events_of(path: &Path) -> Vec<Item> {
    let text = std::fs::read_to_string(path).expect("trace reads");
    lower_events(&text, &Default::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn traces() -> Vec<(String, Vec<Item>)> {
    let mut out = vec![(
        "examples/coding-session.jsonl".to_owned(),
        events_of(&repo().join("examples/coding-session.jsonl")),
    )];
    let mut dirs = vec![repo().join("examples/bench")];
    let anchors = std::env::var_os("CTXGC_ANCHORS").map_or_else(
        || repo().join("../shared/anchor-fixtures/tracegc"),
        PathBuf::from,
    );
    dirs.push(anchors);
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("note: no traces at {}", dir.display());
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            out.push((p.display().to_string(), events_of(&p)));
        }
    }
    for (n, seed) in [(400usize, 7u64), (900, 42)] {
        let text = ctxgc_core::synth::events_jsonl(n, seed);
        let items = lower_events(&text, &Default::default()).expect("generated trace lowers");
        out.push((format!("generated {n} (seed {seed})"), items));
    }
    out
}

/// Appends `items` in batches of `batch`, compiling and updating after each, and compares
/// the live report with a fresh one at every step.
fn check(name: &str, items: &[Item], options: &Options, batch: usize) {
    let tokenizer = options.tokenizer;
    let mut session = event_session_template(options);
    let mut live = LiveReport::new(tokenizer);
    for (step, chunk) in items.chunks(batch).enumerate() {
        session
            .extend(chunk.to_vec())
            .unwrap_or_else(|e| panic!("{name} step {step}: {e}"));
        session.compile();
        let changes = session.take_changes();
        live.update(&session, changes);
        let whole = report_events(&session, tokenizer);
        let got = live.compiled(&session);
        let at = format!("{name}, step {step} ({} items)", session.items().len());
        assert_eq!(got.output, whole.output, "{at}: prompt");
        assert_eq!(
            got.tokens_before, whole.tokens_before,
            "{at}: tokens before"
        );
        assert_eq!(got.tokens_after, whole.tokens_after, "{at}: tokens after");
        assert_eq!(
            got.tokens_before,
            tokenizer.count(&uncompacted_events(&session)),
            "{at}: the sum of line counts is the whole text's count"
        );
        assert_eq!(got.tokens_after, tokenizer.count(live.prompt()), "{at}");
        assert_eq!(got.decisions, whole.decisions, "{at}: decisions");
        assert_eq!(got.receipts, whole.receipts, "{at}: receipts");
        assert_eq!(got.would_save_tokens, whole.would_save_tokens, "{at}");
        assert_eq!(got.warnings, whole.warnings, "{at}");
        assert_eq!(live.plans(), session.plans().as_slice(), "{at}: plans");
    }
}

#[test]
fn one_event_at_a_time_matches_a_fresh_report_at_every_step() {
    for (name, items) in traces() {
        check(&name, &items, &Options::default(), 1);
    }
}

#[test]
fn batches_and_the_other_tokenizer_match_too() {
    let options = Options {
        tokenizer: Tokenizer::Cl100kBase,
        ..Options::default()
    };
    for (name, items) in traces() {
        check(&name, &items, &options, 7);
    }
}

#[test]
fn cache_stable_sessions_match_a_fresh_report_at_every_step() {
    let mut options = Options::default();
    options.chat.cache = Some(CacheModel::default());
    for (name, items) in traces() {
        check(&format!("{name} (cache-stable)"), &items, &options, 1);
    }
}

#[test]
fn an_update_reports_only_what_moved() {
    let text = ctxgc_core::synth::events_jsonl(300, 3);
    let items = lower_events(&text, &Default::default()).expect("generated trace lowers");
    let mut session = event_session_template(&Options::default());
    let mut live = LiveReport::new(Tokenizer::O200kBase);
    session.extend(items[..299].to_vec()).expect("valid");
    session.compile();
    let changes = session.take_changes();
    live.update(&session, changes);
    assert_eq!(live.changed(), None, "a first update is a full one");
    session.extend(items[299..].to_vec()).expect("valid");
    session.compile();
    let changes = session.take_changes();
    live.update(&session, changes);
    let changed = live.changed().expect("an incremental update");
    assert!(changed.contains(&299), "the new event is reported");
    assert!(
        changed.len() < 20,
        "one event moves a few plans, not the trace: {changed:?}"
    );
}
