//! Properties over generated inputs: the parser never panics, and incremental compilation in
//! any chunking equals compiling the whole trace.

use ctxgc_core::frontend::events::{EVENT_TYPES, EventOptions, lower_events};
use ctxgc_core::{Options, Session, compile};
use proptest::prelude::*;

fn event_strategy() -> impl Strategy<Value = serde_json::Value> {
    // Every known event type, and one the front-end does not know.
    let ty = prop::sample::select([&EVENT_TYPES[..], &["mystery"]].concat());
    let id = 0u8..12;
    let field_value = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        (-3i64..3).prop_map(serde_json::Value::from),
        "[a-c ]{0,3}".prop_map(serde_json::Value::from),
        (0u8..12).prop_map(|n| serde_json::json!([format!("e{n}")])),
    ];
    let fields = prop::collection::btree_map(
        prop::sample::select(vec![
            "key",
            "value",
            "tool_name",
            "arguments",
            "call_id",
            "result",
            "ref_to",
            "content",
            "path",
            "diff_hash",
            "command",
            "exit_code",
            "test_names",
            "passed_count",
            "failed_count",
            "message",
            "related_to",
            "parent_id",
            "src",
            "dst",
            "passed",
            "importance",
            "tags",
            "retain_until",
            "supersedes",
        ]),
        field_value,
        0..6,
    );
    (ty, id, 0i64..50, fields).prop_map(|(ty, id, ts, fields)| {
        let mut map = serde_json::Map::new();
        map.insert("id".into(), format!("e{id}").into());
        map.insert("type".into(), ty.into());
        map.insert("timestamp".into(), ts.into());
        for (k, v) in fields {
            map.insert(k.to_owned(), v);
        }
        serde_json::Value::Object(map)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes: an error or a result, never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = compile(&text, &Options::default());
    }

    /// Structurally plausible but often invalid events: an error or a result, never a panic;
    /// errors always name an item.
    #[test]
    fn plausible_events_never_panic(events in prop::collection::vec(event_strategy(), 0..15)) {
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        let mut options = Options::default();
        options.events.allow_unknown_types = true;
        if let Err(ctxgc_core::Error::Invalid(problems)) = compile(&text, &options) {
            prop_assert!(!problems.is_empty());
        }
    }

    /// Appending a generated trace in random chunks, compiling after each, gives the same
    /// decisions and output as one batch.
    #[test]
    fn incremental_equals_batch(seed in 0u64..1000, len in 1usize..400, cuts in prop::collection::vec(1usize..40, 1..20)) {
        let text = ctxgc_core::synth::events_jsonl(len, seed);
        let items = lower_events(&text, &EventOptions::default()).unwrap();
        let whole = ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
        let mut session = Session::new(Default::default());
        let mut rest = items;
        let mut cut = cuts.iter().cycle();
        while !rest.is_empty() {
            let n = (*cut.next().unwrap()).min(rest.len());
            let tail = rest.split_off(n);
            session.extend(rest).unwrap();
            session.compile();
            rest = tail;
        }
        prop_assert_eq!(session.decisions(), whole.decisions());
        prop_assert_eq!(
            ctxgc_core::render::prompt::render(&session).text,
            ctxgc_core::render::prompt::render(&whole).text
        );
    }
}
