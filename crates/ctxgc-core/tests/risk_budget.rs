//! The risk budget of trims on arrival (cache-stable mode): a projection hides fields on the
//! promise that the model can recall them, and a recall is one more request. A trim is taken
//! only while what the session has saved against sending everything covers a recall of every
//! trim taken so far; a refused trim stays refused, and the item gets what the other passes
//! decide. A one-shot (eager) compile trims every output the projection covers.

use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::learn::LearnOptions;
use ctxgc_core::projection::{Counts, Projection, Run};
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Options, Reason, Tokenizer, compile, receipt};
use serde_json::{Value, json};

/// Tracking output of order `t`: the agent uses its id and eta, never the carrier's notes.
fn tracking(t: usize) -> String {
    json!({
        "id": format!("R{t}X"),
        "status": "shipped",
        "carrier_notes": format!("left at the depot gate {t}, rescheduled twice because the recipient was away, then handed to a neighbour who signed for it at the door"),
        "eta": format!("2024-06-{:02}", t % 28 + 1),
    })
    .to_string()
}

/// A projection of `track` that hides `status` and `carrier_notes`, learned from three runs.
fn projection() -> Projection {
    let mut counts = Counts::default();
    for i in 0..3 {
        let mut run = Run::new(format!("run{i}"));
        run.push_call("track", json!({"order": "A1"}), tracking(i), None);
        run.push_message(format!("It arrives on 2024-06-{:02}.", i % 28 + 1), None);
        counts.add(&observe_run(&run, &Default::default(), Tokenizer::default()).counts);
    }
    let learn = LearnOptions {
        min_saving_tokens: 0,
        ..Default::default()
    };
    Projection::learn(&counts, &learn, Tokenizer::default())
}

/// A support chat of `turns` orders tracked and answered. The outputs are compact JSON, so
/// nothing but the projection saves anything: the first trims are paid for by what the
/// session banks on the requests before them (an output's trim saves on its own request too).
fn chat(turns: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": "You are a support agent."})];
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Where is order {t}?")}));
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": format!("c{t}"), "type": "function",
            "function": {"name": "track", "arguments": json!({"order": t}).to_string()}}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": tracking(t)}));
        messages.push(json!({"role": "assistant", "content": format!("Order R{t}X arrives on 2024-06-{:02}.", t % 28 + 1)}));
    }
    messages
}

fn options(cache: bool) -> Options {
    let mut options = Options {
        projection: Some(projection()),
        ..Options::default()
    };
    options.chat.expand_tool = Some("ctxgc_recall".into());
    options.chat.cache = cache.then(CacheModel::default);
    options
}

/// Positions of the tool outputs, and which of them the compile trimmed.
fn trimmed(messages: &[Value], cache: bool) -> (Vec<usize>, Vec<usize>) {
    let text = Value::Array(messages.to_vec()).to_string();
    let compiled = compile(&text, &options(cache)).expect("compiles");
    let tools: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i]["role"] == "tool")
        .collect();
    let trimmed = tools
        .iter()
        .copied()
        .filter(|&i| compiled.decisions[i].reason == Some(Reason::Projection))
        .collect();
    // Whatever was trimmed comes back byte for byte.
    for r in &compiled.receipts {
        let (original, decision) = receipt(&text, &options(cache), &r.id).expect("receipt");
        assert_eq!(decision.id, r.id);
        if decision.reason == Some(Reason::Projection) {
            assert!(original.contains("carrier_notes"), "{original}");
        }
    }
    (tools, trimmed)
}

#[test]
fn a_short_session_cannot_afford_a_trim_that_a_recall_would_outprice() {
    let messages = chat(1);
    let (tools, eager) = trimmed(&messages, false);
    assert_eq!(eager, tools, "a one-shot compile trims the output");
    let (_, cache_aware) = trimmed(&messages, true);
    assert!(
        cache_aware.is_empty(),
        "nothing is banked before the first request: {cache_aware:?}"
    );
}

#[test]
fn a_long_session_trims_once_its_savings_cover_the_recalls_and_a_refusal_stands() {
    let short = chat(3);
    let long = chat(60);
    let (tools, eager) = trimmed(&long, false);
    assert_eq!(eager, tools);
    let (_, early) = trimmed(&short, true);
    let (_, late) = trimmed(&long, true);
    assert!(!late.is_empty(), "a long session affords trims");
    assert!(late.len() < tools.len(), "but not from the first output on");
    // A decision on arrival never changes: what the short session refused, the long one
    // (the same messages and more) refused too, and the outputs it trimmed it trims.
    let refused_early: Vec<usize> = tools[..3]
        .iter()
        .copied()
        .filter(|i| !early.contains(i))
        .collect();
    assert!(!refused_early.is_empty());
    assert!(refused_early.iter().all(|i| !late.contains(i)));
    assert!(early.iter().all(|i| late.contains(i)));
}

/// The budget is part of what a session keeps: a session saved after any request and loaded
/// again (as the gateway and the store do) trims exactly the outputs a session that never
/// stopped trims.
#[test]
fn a_session_resumed_from_its_snapshot_spends_the_budget_alike() {
    use ctxgc_core::Session;
    use ctxgc_core::chat::ChatConfig;
    use ctxgc_core::compile::configured_session;
    use ctxgc_core::frontend::lower_conversations;
    use ctxgc_core::passes::chat_pipeline_with;

    let options = options(true);
    let text = Value::Array(chat(40)).to_string();
    let items = lower_conversations(&text, &options).expect("lowers")[0]
        .items
        .clone();
    let config = ChatConfig::resolve(&options.chat, options.tokenizer);
    let template = configured_session(
        chat_pipeline_with(&config, options.projection_config()),
        &options,
    );
    let mut whole = template.clone();
    whole.extend(items.clone()).expect("appends");
    whole.compile();
    let plans = |s: &Session| (0..items.len()).map(|i| s.plan_of(i)).collect::<Vec<_>>();
    let expected = plans(&whole);
    let projected = expected
        .iter()
        .filter(|p| {
            p.verdict
                .as_ref()
                .is_some_and(|v| v.reason == Reason::Projection)
        })
        .count();
    assert!(
        projected > 0 && projected < 40,
        "{projected} of 40 outputs trimmed"
    );
    // Split after every tool output: the request that answers it is the first thing the
    // resumed session sees.
    for split in (0..items.len()).filter(|&i| items[i].raw.contains("\"tool_call_id\"")) {
        let mut first = template.clone();
        first.extend(items[..=split].to_vec()).expect("appends");
        first.compile();
        let saved = serde_json::to_string(&first).expect("serialises");
        let mut resumed: Session = serde_json::from_str(&saved).expect("loads");
        resumed
            .extend(items[split + 1..].to_vec())
            .expect("appends");
        resumed.compile();
        assert_eq!(plans(&resumed), expected, "resumed after item {split}");
    }
}
