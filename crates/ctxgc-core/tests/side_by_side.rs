//! A batch of new items large enough (256 KiB or more) runs the passes of a phase side by
//! side, one thread each, and takes plans and rendered lines on every core. These tests
//! compile the same items as one such batch and in small pieces (where the passes run one
//! after another on the calling thread) and require the same plans, decisions and output.

use ctxgc_core::chat::Preset;
use ctxgc_core::chat::compile::{ChatInput, lower_chat_input, session_template};
use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::ir::Item;
use ctxgc_core::render::prompt::render;
use ctxgc_core::{Options, Session};
use serde_json::{Value, json};

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

fn assert_same_plans(batch: &Session, pieces: &Session, what: &str) {
    let (a, b) = (batch.plans(), pieces.plans());
    assert_eq!(a.len(), b.len(), "{what}: items");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!(
            "{what}: item {i} planned {:?} in one batch, {:?} in pieces",
            a[i], b[i]
        );
    }
    assert_eq!(batch.decisions(), pieces.decisions(), "{what}: decisions");
}

#[test]
fn a_large_trace_decides_alike_in_one_batch_and_in_pieces() {
    for seed in [3, 11] {
        let events = ctxgc_core::synth::events(6000, seed);
        let items = lower_events(&Value::Array(events).to_string(), &Default::default())
            .expect("the trace lowers");
        let (batch, pieces) = both_ways(&Session::new(Default::default()), &items);
        let what = format!("seed {seed}");
        assert_same_plans(&batch, &pieces, &what);
        let retired = batch
            .decisions()
            .iter()
            .filter(|d| d.reason.is_some())
            .count();
        assert!(
            retired > 100,
            "{what}: the passes had work to do ({retired} decided)"
        );
        assert_eq!(render(&batch).text, render(&pieces).text, "{what}: output");
    }
}

/// A long chat with work for every chat pass: repeated lookups with the same or a changed
/// result, bulky outputs to sample and fold, and declared facts that are superseded.
fn long_chat(turns: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": "You are a support agent."})];
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Request {t}")}));
        let tool = ["get_order", "list_flights", "read_log"][t % 3];
        let id = format!("call_{t}");
        let version = (t / 3) % 2;
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": tool, "arguments": json!({"id": t % 2}).to_string()}}]}));
        let output = match tool {
            "list_flights" => json!({"flights": (0..40).map(|r| json!({
                "flight": format!("HAT{r:03}"), "price": 100 + r * 7 + version, "seats": r % 9,
                "status": "available"})).collect::<Vec<_>>()})
            .to_string(),
            "read_log" => (0..200)
                .map(|l| format!("line {l}: ok v{version}\n"))
                .collect(),
            _ => {
                let status = ["pending", "shipped"][version];
                json!({"order": t % 2, "status": status}).to_string()
            }
        };
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        messages.push(json!({"role": "assistant", "content": format!(
            "Checked {t}.<contextgc-state>{{\"assert\": {{\"order\": \"{}\"}}}}</contextgc-state>",
            t % 4
        )}));
    }
    messages
}

#[test]
fn a_large_chat_decides_alike_in_one_batch_and_in_pieces_under_every_preset() {
    let text = Value::Array(long_chat(240)).to_string();
    let ChatInput::Doc(doc) = lower_chat_input(&text, None).expect("the chat lowers") else {
        panic!("one document");
    };
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let mut options = Options::default();
        options.chat.preset = preset;
        let (batch, pieces) = both_ways(&session_template(&options), &doc.items);
        let what = format!("{preset:?}");
        assert_same_plans(&batch, &pieces, &what);
        let changed = batch
            .decisions()
            .iter()
            .filter(|d| d.reason.is_some())
            .count();
        assert!(
            changed > 50,
            "{what}: the passes had work to do ({changed} decided)"
        );
    }
}
