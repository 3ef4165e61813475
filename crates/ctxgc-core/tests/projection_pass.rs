//! `--projection` as a compiler pass, on the public corpus: a projection learned from some
//! conversations trims the tool outputs of others on arrival, in chats and in the same
//! conversations written as event traces; every trimmed output is a `projection` rewrite with
//! a receipt giving its exact original back; stubs name a way back only through a recall tool.

use ctxgc_core::frontend::lower_conversations;
use ctxgc_core::ir::{Block, Kind};
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::measure::MeasureOptions;
use ctxgc_core::projection::{Counts, Projection, Run};
use ctxgc_core::{Action, Options, Reason, compile, receipt};
use serde_json::{Value, json};

mod common;
use common::corpus;

/// A projection learned from the first `learn_from` records, and the next records as lines.
fn learned(text: &str, learn_from: usize, held_out: usize) -> (Projection, Vec<String>) {
    let conversations = lower_conversations(text, &Options::default()).expect("corpus lowers");
    let options = MeasureOptions::default();
    let observed: Vec<Counts> = conversations[..learn_from]
        .iter()
        .map(|c| {
            observe_run(
                &Run::from_items(c.id.clone(), &c.items),
                &options.usage,
                options.tokenizer,
            )
            .counts
        })
        .collect();
    let projection = Projection::learn(
        &Counts::sum(observed.iter()),
        &options.learn,
        options.tokenizer,
    );
    let lines = conversations[learn_from..learn_from + held_out]
        .iter()
        .map(|c| c.raw.clone())
        .collect();
    (projection, lines)
}

fn with_projection(projection: &Projection, recall: Option<&str>) -> Options {
    let mut options = Options {
        projection: Some(projection.clone()),
        ..Default::default()
    };
    options.chat.expand_tool = recall.map(str::to_owned);
    options
}

#[test]
fn a_learned_projection_trims_chat_tool_outputs_on_arrival_with_receipts() {
    let Some(text) = corpus("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    let (projection, held_out) = learned(&text, 60, 20);
    let mut trimmed = 0;
    for line in &held_out {
        let plain = compile(line, &Options::default()).expect("compiles");
        for recall in [None, Some("recall")] {
            let options = with_projection(&projection, recall);
            let out = compile(line, &options).expect("compiles with the projection");
            let report = out.records[0]
                .compiled
                .chat
                .as_ref()
                .expect("a chat report");
            assert!(
                report.validation.ok,
                "{:?}",
                report.validation.new_violations
            );
            assert!(out.tokens_after <= out.tokens_before);
            assert_eq!(plain.records.len(), out.records.len());
            for d in out
                .decisions
                .iter()
                .filter(|d| d.reason == Some(Reason::Projection))
            {
                assert_eq!(d.action, Action::Rewrite);
                trimmed += 1;
                // The receipt is the message exactly as it came.
                let r = out
                    .receipts
                    .iter()
                    .find(|r| r.id == d.id)
                    .expect("a receipt");
                let (original, decision) = receipt(line, &options, &d.id).expect("receipt");
                assert_eq!(decision.reason, Some(Reason::Projection));
                assert_eq!(
                    r.hash,
                    blake3::hash(original.as_bytes()).to_hex().to_string()
                );
                assert!(
                    line.contains(&original),
                    "the original is the input's own bytes"
                );
            }
            // Stubs: a reference only through the recall tool, never `expand ref`.
            assert!(
                !out.output.contains("expand ref"),
                "no marker nobody can redeem"
            );
            let stubs = out.output.matches("[hidden: ").count();
            let with_recall = out.output.matches("— call recall with id ").count();
            match recall {
                None => assert_eq!(with_recall, 0),
                Some(_) => assert_eq!(with_recall, stubs),
            }
        }
    }
    assert!(trimmed > 0, "the projection trims some held-out output");
}

/// A corpus conversation written as an event trace: each tool call and result as events.
fn as_event_trace(line: &str) -> String {
    let conversations = lower_conversations(line, &Options::default()).expect("lowers");
    let mut events = Vec::new();
    let mut ts = 0;
    // Provider call ids can repeat over a conversation: each result answers the latest call.
    let mut call_event = std::collections::BTreeMap::new();
    for item in &conversations[0].items {
        let Kind::Message(m) = &item.kind else {
            continue;
        };
        for block in &m.blocks {
            ts += 1;
            match block {
                Block::ToolCall(call) => {
                    call_event.insert(call.call_id.clone(), format!("c{ts}"));
                    events.push(json!({"id": format!("c{ts}"), "type": "tool_call", "timestamp": ts, "tool_name": call.name, "arguments": call.arguments}));
                }
                Block::ToolResult(out) => {
                    let Some(call) = call_event.get(&out.call_id) else { continue };
                    events.push(json!({"id": format!("r{ts}"), "type": "tool_result", "timestamp": ts, "call_id": call, "result": out.output}));
                }
                Block::Text { text } if !text.is_empty() => events.push(json!({"id": format!("n{ts}"), "type": "decision", "timestamp": ts, "content": text})),
                _ => {}
            }
        }
    }
    events.iter().map(|e| format!("{e}\n")).collect()
}

#[test]
fn the_same_projection_trims_event_traces_and_the_prompt_shows_the_trimmed_output() {
    let Some(text) = corpus("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    let (projection, held_out) = learned(&text, 60, 20);
    let mut trimmed = 0;
    let mut withheld = 0;
    for line in &held_out {
        let trace = as_event_trace(line);
        let plain = compile(&trace, &Options::default()).expect("the trace compiles");
        // The default preset without a recall tool withholds the projection: nobody could
        // get a hidden field back. It says what the projection would have saved.
        let without = compile(&trace, &with_projection(&projection, None)).expect("compiles");
        assert_eq!(without.output, plain.output);
        assert!(
            without
                .decisions
                .iter()
                .all(|d| d.reason != Some(Reason::Projection))
        );
        withheld += without.would_save_tokens;
        let options = with_projection(&projection, Some("recall"));
        let out = compile(&trace, &options).expect("compiles with the projection");
        assert!(out.tokens_after <= plain.tokens_after);
        for d in out
            .decisions
            .iter()
            .filter(|d| d.reason == Some(Reason::Projection))
        {
            trimmed += 1;
            assert_eq!(d.action, Action::Rewrite);
            let (original, _) = receipt(&trace, &options, &d.id).unwrap();
            let event: Value = serde_json::from_str(&original).unwrap();
            assert_eq!(event["id"], d.id.as_str());
            // The prompt line of the event carries the trimmed output and its footer.
            let line = out
                .output
                .lines()
                .position(|l| l.starts_with(&format!("[{}] result of ", d.id)))
                .expect("the trimmed result is sent");
            let rest: String = out
                .output
                .lines()
                .skip(line)
                .take(3)
                .collect::<Vec<_>>()
                .join("\n");
            assert!(rest.contains("[hidden: "), "{rest}");
        }
        assert_eq!(
            compile(&trace, &options).unwrap().output,
            out.output,
            "deterministic"
        );
    }
    assert!(trimmed > 0, "the projection trims some event output");
    assert!(withheld > 0, "what it withheld is reported");
}

/// A lossy rewrite is taken only when it beats the lossless one: with a projection, no
/// conversation is ever longer than without it (a projection hiding a few short values, plus
/// its footer, used to come out longer than the compact JSON the compact-json pass sends).
#[test]
fn a_projection_never_sends_more_than_the_lossless_rewrite() {
    for name in [
        "tau-bench-airline-gpt4o.jsonl",
        "tau2-bench-leaderboard.jsonl",
    ] {
        let Some(text) = corpus(name) else {
            return;
        };
        let (projection, held_out) = learned(&text, 40, 40);
        let mut lossless = Options::default();
        lossless.chat.expand_tool = Some("recall".to_owned());
        let projected = with_projection(&projection, Some("recall"));
        let mut taken = 0;
        for (k, line) in held_out.iter().enumerate() {
            let without = compile(line, &lossless).expect("compiles");
            let with = compile(line, &projected).expect("compiles");
            assert!(
                with.tokens_after <= without.tokens_after,
                "{name} held-out record {k}: {} tokens with the projection, {} without",
                with.tokens_after,
                without.tokens_after
            );
            taken += with
                .decisions
                .iter()
                .filter(|d| d.reason == Some(Reason::Projection))
                .count();
        }
        assert!(taken > 0, "{name}: the projection still trims some outputs");
    }
}

/// In a compile a trimmed list of records is encoded as header + rows, like the lossless
/// rewrite it has to beat, even when the projection was learned to keep the tool's shape:
/// otherwise the trimmed list repeats every key on every row, and on most lists loses to the
/// untrimmed table (so nothing is hidden).
#[test]
fn a_trimmed_list_is_sent_as_a_table_in_a_compile() {
    let projection = Projection::from_json(
        &json!({
            "ctxgc_projection": 1,
            "tokenizer": "o200k_base",
            "rules": {"tables": false},
            "tools": {"search_flights": {"trim": true, "calls": 40, "runs": 20,
                "keep": [{"field": "[].flight_number", "seen": 40, "used": 30, "tokens": 9, "reason": "identifying"},
                         {"field": "[].price", "seen": 40, "used": 25, "tokens": 5, "reason": "used"}],
                "drop": [{"field": "[].gate", "seen": 40, "used": 0, "tokens": 6, "reason": "never_used"},
                         {"field": "[].terminal", "seen": 40, "used": 0, "tokens": 6, "reason": "never_used"}]}}
        })
        .to_string(),
    )
    .expect("a projection");
    assert!(!projection.rules.tables);
    let rows: Vec<Value> = (0..12)
        .map(|i| {
            json!({"flight_number": format!("HAT{:03}", 100 + i), "price": 100 + 7 * i,
                "gate": format!("B{}", 10 + i), "terminal": format!("T{}", 1 + i % 4)})
        })
        .collect();
    let messages = json!([
        {"role": "user", "content": "Find me a flight."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "search_flights", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": Value::Array(rows).to_string()},
        {"role": "assistant", "content": "HAT100 is the cheapest."}
    ]);
    let compiled = compile(
        &messages.to_string(),
        &with_projection(&projection, Some("recall")),
    )
    .expect("compiles");
    let decision = compiled
        .decisions
        .iter()
        .find(|d| d.reason == Some(Reason::Projection))
        .expect("the list is trimmed");
    let output: Value = serde_json::from_str(&compiled.output).expect("JSON output");
    let sent = output[2]["content"].as_str().expect("tool content");
    assert!(sent.contains("{columns:["), "sent as a table: {sent}");
    assert!(!sent.contains("B10"), "gates hidden: {sent}");
    assert!(sent.contains("HAT111"), "{sent}");
    assert_eq!(decision.action, Action::Rewrite);
}

#[test]
fn a_recall_backed_projection_trims_only_when_the_model_can_recall() {
    let tracking: Vec<String> = (0..12).map(|k| format!("1Z{k}9AA1012345{k}78")).collect();
    let output = json!({"order_id": "A17Q", "tracking_number": tracking.join(" "), "price": 115});
    let chat = json!([
        {"role": "user", "content": "How much is my order A17Q?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_order", "arguments": "{\"order_id\": \"A17Q\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": output.to_string()},
        {"role": "assistant", "content": "It costs 115 dollars."},
    ])
    .to_string();
    let projection = |recallable: bool| {
        Projection::from_json(
            &json!({
                "ctxgc_projection": 1,
                "rules": {"recallable": recallable, "min_saving_tokens": 0},
                "tools": {"get_order": {"drop": [{"field": "tracking_number", "reason": "never_used"}]}},
            })
            .to_string(),
        )
        .expect("a projection")
    };
    let trims = |recallable: bool, recall: Option<&str>| {
        let mut options = with_projection(&projection(recallable), recall);
        options.chat.preset = ctxgc_core::chat::Preset::Aggressive;
        let out = compile(&chat, &options).expect("compiles");
        let trims = out
            .decisions
            .iter()
            .filter(|d| d.reason == Some(Reason::Projection))
            .count();
        (trims, out.output.contains(tracking[0].as_str()))
    };
    // Learned on the promise of a recall: without a recall tool nothing is hidden, whatever
    // the preset; with one, the field goes.
    assert_eq!(trims(true, None), (0, true));
    assert_eq!(trims(true, Some("recall")), (1, false));
    // A projection learned with the conservative rules trims as before.
    assert_eq!(trims(false, None), (1, false));
}

#[test]
fn a_recall_footer_lists_a_tools_hidden_fields_once() {
    let reservation = |id: &str, insurance: bool| {
        let mut r = json!({"reservation_id": id, "cabin": "economy",
            "passengers": [{"first_name": "Ava", "last_name": "Rossi", "dob": "1973-11-14"},
                           {"first_name": "Noah", "last_name": "Kim", "dob": "1980-02-01"}],
            "created_at": "2024-05-08T15:22:23", "total_baggages": 1, "nonfree_baggages": 0});
        if insurance {
            r["insurance"] = json!("no");
        }
        r.to_string()
    };
    let mut messages = vec![json!({"role": "user", "content": "Check my bookings, please."})];
    for (n, (id, insurance)) in [("ZFA04Y", true), ("MQHHT6", true), ("GV1N64", false)]
        .into_iter()
        .enumerate()
    {
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": format!("c{n}"), "type": "function",
            "function": {"name": "get_reservation_details", "arguments": format!("{{\"reservation_id\": \"{id}\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": reservation(id, insurance)}));
    }
    messages.push(json!({"role": "assistant", "content": "All three are in economy."}));
    let chat = Value::Array(messages).to_string();
    let projection = Projection::from_json(
        &json!({"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
            "tools": {"get_reservation_details": {"drop": [
                {"field": "passengers[].dob", "reason": "never_used"},
                {"field": "created_at", "reason": "never_used"},
                {"field": "total_baggages", "reason": "never_used"},
                {"field": "nonfree_baggages", "reason": "never_used"},
                {"field": "insurance", "reason": "never_used"}]}}})
        .to_string(),
    )
    .expect("a projection");
    let compiled = |recall: Option<&str>| {
        let mut options = with_projection(&projection, recall);
        if recall.is_none() {
            // `default` withholds trims nobody could recall; `aggressive` takes them.
            options.chat.preset = ctxgc_core::chat::Preset::Aggressive;
        }
        let out = compile(&chat, &options).expect("compiles");
        let trimmed: Vec<String> = out
            .decisions
            .iter()
            .filter(|d| d.reason == Some(Reason::Projection))
            .map(|d| d.id.clone())
            .collect();
        let sent: Value = serde_json::from_str(&out.output).expect("JSON out");
        let footers: Vec<String> = sent
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| m["content"].as_str()?.lines().last().map(str::to_owned))
            .collect();
        (trimmed, footers)
    };
    let (ids, footers) = compiled(Some("ctxgc_recall"));
    assert_eq!(ids.len(), 3, "{footers:?}");
    let list = "passengers[].dob, created_at, total_baggages, nonfree_baggages";
    assert_eq!(
        footers[0],
        format!(
            "[hidden: {list}, insurance — call ctxgc_recall with id \"{}\" for the full output]",
            ids[0]
        )
    );
    // The same fields again: named by the footer that listed them.
    assert_eq!(
        footers[1],
        format!(
            "[hidden: same fields as \"{}\" — call ctxgc_recall with id \"{}\" for the full output]",
            ids[0], ids[1]
        )
    );
    // Other fields (no insurance here): listed in full.
    assert_eq!(
        footers[2],
        format!(
            "[hidden: {list} — call ctxgc_recall with id \"{}\" for the full output]",
            ids[2]
        )
    );
    // Without a recall tool no footer has an id to point at: each lists its fields.
    let (_, footers) = compiled(None);
    assert_eq!(footers[1], format!("[hidden: {list}, insurance]"));
}
