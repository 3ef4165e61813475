//! A batch of new items large enough (256 KiB or more) runs the passes of a phase side by
//! side, one thread each, and takes plans and rendered lines on every core. These tests
//! compile the same items as one such batch and in small pieces (where the passes run one
//! after another on the calling thread) and require the same plans, decisions and output.

use ctxgc_core::Session;
use ctxgc_core::chat::Preset;
use ctxgc_core::chat::compile::session_template;
use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::ir::Item;
use ctxgc_core::render::prompt::render;
use serde_json::Value;

mod common;

/// Comfortably above the size from which a batch runs its passes side by side.
const LARGE_BATCH_BYTES: usize = 300 * 1024;

/// Items small enough that no piece of this many runs its passes side by side.
const PIECE: usize = 16;

fn bytes(items: &[Item]) -> usize {
    items.iter().map(|item| item.raw.len()).sum()
}

/// `items` compiled as one batch, and piece by piece, from the same template.
fn both_ways(template: &Session, items: &[Item]) -> (Session, Session) {
    assert!(
        bytes(items) >= LARGE_BATCH_BYTES,
        "the batch must be large enough to run side by side: {} bytes",
        bytes(items)
    );
    let mut batch = template.clone();
    batch.extend(items.to_vec()).expect("extends");
    batch.compile();

    let mut pieces = template.clone();
    for piece in items.chunks(PIECE) {
        assert!(bytes(piece) < 256 * 1024, "a piece must stay on one thread");
        pieces.extend(piece.to_vec()).expect("extends");
        pieces.compile();
    }
    (batch, pieces)
}

/// Asserts that the batch and the pieces decided alike, and that the passes decided more than
/// `at_least` items (so the comparison is not between two empty plans).
fn assert_alike(batch: &Session, pieces: &Session, what: &str, at_least: usize) {
    let (a, b) = (batch.plans(), pieces.plans());
    assert_eq!(a.len(), b.len(), "{what}: items");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!(
            "{what}: item {i} planned {:?} in one batch, {:?} in pieces",
            a[i], b[i]
        );
    }
    let decisions = batch.decisions();
    assert_eq!(decisions, pieces.decisions(), "{what}: decisions");
    let decided = decisions.iter().filter(|d| d.reason.is_some()).count();
    assert!(
        decided > at_least,
        "{what}: the passes had work to do ({decided} decided)"
    );
}

#[test]
fn a_large_trace_decides_alike_in_one_batch_and_in_pieces() {
    for seed in [3, 11] {
        let events = ctxgc_core::synth::events(6000, seed);
        let items = lower_events(&Value::Array(events).to_string(), &Default::default())
            .expect("the trace lowers");
        let (batch, pieces) = both_ways(&Session::new(Default::default()), &items);
        let what = format!("seed {seed}");
        assert_alike(&batch, &pieces, &what, 100);
        assert_eq!(render(&batch).text, render(&pieces).text, "{what}: output");
    }
}

#[test]
fn a_large_chat_decides_alike_in_one_batch_and_in_pieces_under_every_preset() {
    let items = common::agent_chat_items(240);
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let template = session_template(&common::preset_options(preset));
        let (batch, pieces) = both_ways(&template, &items);
        assert_alike(&batch, &pieces, &format!("{preset:?}"), 50);
    }
}
