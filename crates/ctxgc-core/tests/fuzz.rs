//! Fuzz-style properties for every parser of the core: the front-ends (event traces as JSON
//! and JSONL, OpenAI chat, Anthropic, Responses, JSONL of conversation records, tracetrim
//! traces), the `<contextgc-state>` block parser, the projection file parser, the Python
//! literal reader and the tool-output field parser.
//!
//! Inputs are real fixtures and corpus records, mutated structurally (truncated, bytes
//! flipped, invalid UTF-8 inserted, keys duplicated, values of the wrong type, brackets
//! nested, slices spliced), arbitrary bytes, and hand-made extremes: 10,000 and 100,000 levels
//! of nesting, multi-megabyte strings, numbers with 100,000 digits. The property is always the
//! same: an answer or a clear error (naming the item and field, or the line and column), never
//! a panic and never a stack overflow, on the default 2 MiB test thread.
//!
//! `CTXGC_FUZZ_CASES` sets the cases per property (default 48, seconds on 2 cores); a long run
//! is `CTXGC_FUZZ_CASES=20000 cargo test -p ctxgc-core --test fuzz --release`
//! (`scripts/fuzz.sh` runs every target that way).

#[path = "fuzz/mutate.rs"]
mod mutate;

use std::sync::OnceLock;

use ctxgc_core::chat::state::{find_blocks, parse_declarations, strip_blocks};
use ctxgc_core::chat::{ChatOptions, Preset};
use ctxgc_core::error::decode_utf8;
use ctxgc_core::frontend::records::lower_records;
use ctxgc_core::frontend::tracetrim::lower_tracetrim;
use ctxgc_core::projection::apply::expand_request;
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::fields::{leaves, parse_output};
use ctxgc_core::projection::learn::LearnOptions;
use ctxgc_core::projection::{Counts, Projection, Run, pylit};
use ctxgc_core::{Error, Format, Options, Tokenizer, compile};
use mutate::{cases, mutated, mutations, nested_arrays, nested_objects};
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{path}"))
        .unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// Real inputs of every front-end: fixtures, plus the first record of each corpus file when
/// `CTXGC_CORPUS` is set (capped so that a case stays quick).
fn seeds() -> &'static [String] {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut seeds = vec![
            read("tracegc/coding_agent_short.json"),
            read("tracegc/customer_support_short.json"),
            read("tracegc/research_agent_short.json"),
            std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../examples/coding-session.jsonl"
            ))
            .expect("bundled example"),
            read("chat/airline_cabin_change.json"),
            read("chat/anthropic_session.json"),
            read("chat/responses_session.json"),
            read("projection/billing-1.jsonl"),
            read("projection/billing-2.jsonl"),
        ];
        let records = read("chat/corpus_samples.jsonl");
        // Two records as JSONL of records, and the smallest one's messages alone.
        let mut lines: Vec<&str> = records.lines().collect();
        lines.sort_by_key(|l| l.len());
        seeds.push(lines.iter().take(2).copied().collect::<Vec<_>>().join("\n"));
        if let Some(messages) = lines
            .first()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .and_then(|v| v.get("messages").cloned())
        {
            seeds.push(serde_json::to_string_pretty(&messages).unwrap_or_default());
        }
        if let Some(dir) = std::env::var_os("CTXGC_CORPUS") {
            for name in ["toolbench-examples.jsonl", "swe-agent-trajectories.jsonl"] {
                let path = std::path::Path::new(&dir).join(name);
                if let Ok(text) = std::fs::read_to_string(&path)
                    && let Some(first) = text.lines().find(|l| l.len() < 60_000)
                {
                    seeds.push(first.to_owned());
                }
            }
        }
        seeds
    })
}

/// The options a case is compiled under: each forced format and each preset, with a recall
/// tool so that stubs name receipts.
fn option_sets() -> Vec<Options> {
    let mut sets = vec![Options::default()];
    for from in [
        Format::Events,
        Format::OpenaiChat,
        Format::Anthropic,
        Format::Responses,
    ] {
        sets.push(Options {
            from: Some(from),
            ..Options::default()
        });
    }
    for preset in [Preset::Lossless, Preset::Aggressive] {
        let mut options = Options {
            chat: ChatOptions {
                preset,
                expand_tool: Some("ctxgc_expand".into()),
                ..ChatOptions::default()
            },
            ..Options::default()
        };
        options.events.allow_unknown_types = true;
        sets.push(options);
    }
    sets
}

/// An error a person can act on: never empty, JSON errors with a line and column, validation
/// errors as a non-empty list whose every entry says what is wrong.
fn assert_clear(error: &Error) {
    let text = error.to_string();
    assert!(!text.trim().is_empty(), "an empty error: {error:?}");
    match error {
        Error::Json { context, line, .. } => {
            assert!(!context.is_empty(), "a JSON error without context: {text}");
            assert!(*line >= 1 || text.contains("EOF"), "{text}");
        }
        Error::Invalid(list) => {
            assert!(!list.is_empty(), "an empty list of problems");
            for d in list {
                assert!(
                    !d.message.trim().is_empty(),
                    "a problem without words: {d:?}"
                );
            }
        }
        Error::InvalidUtf8 { .. } | Error::UnknownFormat(_) | Error::Usage(_) => {}
    }
}

/// Every front door of the core, on one input. A success must be deterministic.
fn every_frontend(bytes: &[u8]) {
    frontends(bytes, &option_sets());
}

/// [`every_frontend`] under the given option sets only.
fn frontends(bytes: &[u8], option_sets: &[Options]) {
    let text = match decode_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            assert_clear(&e);
            // The lossy text still has to be handled (a caller that decoded it so).
            &String::from_utf8_lossy(bytes).into_owned()
        }
    };
    for options in option_sets {
        match compile(text, options) {
            Ok(out) => {
                let again = compile(text, options).expect("the same input compiles again");
                assert_eq!(out.output, again.output, "compile is not deterministic");
            }
            Err(e) => assert_clear(&e),
        }
    }
    if let Err(e) = lower_records(text, None) {
        assert_clear(&e);
    }
    match lower_tracetrim(text) {
        Ok(items) => {
            // The projection side reads the same items.
            let run = Run::from_items("fuzz", &items);
            let _ = observe_run(&run, &Default::default(), Tokenizer::default());
        }
        Err(e) => assert_clear(&e),
    }
    for block in find_blocks(text) {
        if let Err(message) = &block.parsed {
            assert!(!message.trim().is_empty());
        }
    }
    let _ = strip_blocks(text);
}

/// A projection learned from the billing fixtures, and its file.
fn projection() -> &'static (Projection, String) {
    static P: OnceLock<(Projection, String)> = OnceLock::new();
    P.get_or_init(|| {
        let mut counts = Counts::default();
        for n in 1..=5 {
            let items = lower_tracetrim(&read(&format!("projection/billing-{n}.jsonl")))
                .expect("billing fixture lowers");
            let run = Run::from_items(format!("billing-{n}"), &items);
            counts.add(&observe_run(&run, &Default::default(), Tokenizer::default()).counts);
        }
        let options = LearnOptions {
            min_saving_tokens: 0,
            ..Default::default()
        };
        let p = Projection::learn(&counts, &options, Tokenizer::default());
        let json = p.to_json();
        (p, json)
    })
}

/// Real tool outputs of the billing fixtures, as (tool, output).
fn outputs() -> &'static [(String, String)] {
    static O: OnceLock<Vec<(String, String)>> = OnceLock::new();
    O.get_or_init(|| {
        let text = read("projection/billing-1.jsonl");
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                Some((
                    v.get("tool")?.as_str()?.to_owned(),
                    v.get("output")?.as_str()?.to_owned(),
                ))
            })
            .collect()
    })
}

fn tool_output(tool: &str, output: &str) {
    let (p, _) = projection();
    let trimmed = p.apply(tool, output);
    assert!(!trimmed.text.is_empty() || output.trim().is_empty());
    let parsed = parse_output(output);
    let _ = leaves(&parsed);
    let _ = pylit::parse(output);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Real inputs of every format, mutated.
    #[test]
    fn mutated_real_inputs(seed in 0usize..64, ms in mutations()) {
        let seeds = seeds();
        let bytes = mutated(&seeds[seed % seeds.len()], &ms);
        every_frontend(&bytes);
    }

    /// Arbitrary bytes, and arbitrary bytes after a valid prefix of each kind.
    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512), prefix in 0usize..5) {
        let head: &[u8] = [&b""[..], b"[", b"{\"events\": [", b"{\"messages\": [", b"{\"kind\": \"call\", "][prefix % 5];
        let mut input = head.to_vec();
        input.extend_from_slice(&bytes);
        every_frontend(&input);
    }

    /// The state-block parser on mutated declarations, inside assistant text.
    #[test]
    fn state_blocks(ms in mutations(), body in 0usize..4) {
        let bodies = [
            r#"{"assert": {"cabin_class": "business", "seats": [1, 2]}, "pin": {"pnr": "0U4NPP"}}"#,
            r#"{"revoke": ["cabin_class"], "unsure": {"meal": "veg"}}"#,
            r#"{"assert": {"a": {"b": {"c": [null, true, 1.5e300]}}}}"#,
            r#"{"pin": {"k": 1}, "assert": {"k": 2}, "revoke": ["k"]}"#,
        ];
        let text = format!("Done.\n<contextgc-state>{}</contextgc-state>\ntail", bodies[body]);
        let bytes = mutated(&text, &ms);
        let text = String::from_utf8_lossy(&bytes);
        for block in find_blocks(&text) {
            if let Err(message) = block.parsed {
                prop_assert!(!message.trim().is_empty());
            }
        }
        let _ = strip_blocks(&text);
        let body = String::from_utf8_lossy(&mutated(bodies[body], &ms)).into_owned();
        if let Err(message) = parse_declarations(&body) {
            prop_assert!(!message.trim().is_empty());
        }
    }

    /// The projection file parser on a real learned projection, mutated.
    #[test]
    fn projection_files(ms in mutations()) {
        let (_, json) = projection();
        let text = String::from_utf8_lossy(&mutated(json, &ms)).into_owned();
        match Projection::from_json(&text) {
            Ok(p) => {
                // A file that reads is usable.
                for (tool, output) in outputs() {
                    let _ = p.apply(tool, output);
                }
            }
            Err(e) => prop_assert!(!e.to_string().trim().is_empty()),
        }
    }

    /// Tool outputs (JSON, double-encoded JSON, Python literals) mutated, through the field
    /// parser and the projection.
    #[test]
    fn tool_outputs(pick in 0usize..64, ms in mutations(), python in any::<bool>()) {
        let all: &[(String, String)] = outputs();
        let (tool, output) = &all[pick % all.len()];
        let seed = if python {
            output.replace("\": ", "': ").replace("\"", "'").replace("true", "True").replace("null", "None")
        } else {
            output.clone()
        };
        let text = String::from_utf8_lossy(&mutated(&seed, &ms)).into_owned();
        tool_output(tool, &text);
        // The same output double-encoded, as some tools send it.
        tool_output(tool, &serde_json::Value::String(text.clone()).to_string());
    }

    /// `expand` arguments of any shape.
    #[test]
    fn expand_arguments(ms in mutations()) {
        let seed = r#"{"ref": "stripe_get_customer#1a2b", "fields": ["email", "metadata.*"]}"#;
        let text = String::from_utf8_lossy(&mutated(seed, &ms)).into_owned();
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
            && let Err(e) = expand_request(&value)
        {
            prop_assert!(!e.to_string().trim().is_empty());
        }
        if let Err(e) = expand_request(&serde_json::Value::String(text)) {
            prop_assert!(!e.to_string().trim().is_empty());
        }
    }
}

// ---- Extremes, each a plain test so that a stack overflow names its input. ----

const DEPTHS: [usize; 2] = [10_000, 100_000];

/// Where deep nesting goes: the whole input, an event's value, a message's content, tool-call
/// arguments (a JSON string that ctxgc parses), a tool result's text.
fn deep_inputs(depth: usize) -> Vec<(String, String)> {
    let arrays = nested_arrays(depth, "1");
    let objects = nested_objects(depth, "1");
    let as_string = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut inputs = vec![
        ("bare arrays".to_owned(), arrays.clone()),
        ("bare objects".to_owned(), objects.clone()),
        ("unclosed".to_owned(), "[".repeat(depth)),
        (
            "event value".to_owned(),
            format!(
                r#"[{{"id": "e1", "type": "set_var", "timestamp": 1, "key": "k", "value": {arrays}}}]"#
            ),
        ),
        (
            "message content".to_owned(),
            format!(r#"[{{"role": "user", "content": {objects}}}]"#),
        ),
    ];
    for (name, inner) in [("arrays", &arrays), ("objects", &objects)] {
        let s = as_string(inner);
        inputs.push((
            format!("tool arguments as a string of {name}"),
            format!(
                r#"[{{"role": "user", "content": "go"}}, {{"role": "assistant", "content": null, "tool_calls": [{{"id": "c1", "type": "function", "function": {{"name": "f", "arguments": {s}}}}}]}}, {{"role": "tool", "tool_call_id": "c1", "content": {s}}}]"#
            ),
        ));
        inputs.push((
            format!("anthropic tool result of {name}"),
            format!(
                r#"{{"system": "s", "messages": [{{"role": "user", "content": "go"}}, {{"role": "assistant", "content": [{{"type": "tool_use", "id": "t1", "name": "f", "input": {{}}}}]}}, {{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "t1", "content": {s}}}]}}]}}"#
            ),
        ));
        inputs.push((
            format!("tracetrim output of {name}"),
            format!(
                r#"{{"kind": "call", "tool": "f", "arguments": {{}}, "output": {s}, "turn": 0}}"#
            ),
        ));
        inputs.push((
            format!("state block of {name}"),
            format!(
                r#"[{{"role": "assistant", "content": {}}}]"#,
                as_string(&format!(
                    "<contextgc-state>{{\"assert\": {{\"k\": {inner}}}}}</contextgc-state>"
                ))
            ),
        ));
    }
    inputs
}

#[test]
fn deep_nesting_is_an_error_or_an_answer_never_a_stack_overflow() {
    for depth in DEPTHS {
        for (name, input) in deep_inputs(depth) {
            eprintln!("depth {depth}: {name}");
            every_frontend(input.as_bytes());
        }
        let python = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(
            pylit::parse(&python),
            None,
            "python literal of depth {depth}"
        );
        tool_output("stripe_get_customer", &nested_objects(depth, "1"));
        let _ = Projection::from_json(&nested_objects(depth, "1"));
        let _ = parse_declarations(&nested_arrays(depth, "1"));
    }
}

/// Nesting just under serde_json's limit at every level a tool output may embed a document
/// (a JSON string holding JSON holding a string of JSON...): the deepest tree ctxgc builds.
#[test]
fn documents_embedded_in_strings_at_the_parser_limit() {
    let mut doc = "1".to_owned();
    for _ in 0..4 {
        let inner = serde_json::Value::String(doc).to_string();
        doc = nested_arrays(120, &format!("{{\"v\": {inner}}}"));
    }
    tool_output("stripe_get_customer", &doc);
    let chat = format!(
        r#"[{{"role": "user", "content": "go"}}, {{"role": "assistant", "content": null, "tool_calls": [{{"id": "c1", "type": "function", "function": {{"name": "f", "arguments": "{{}}"}}}}]}}, {{"role": "tool", "tool_call_id": "c1", "content": {}}}]"#,
        serde_json::Value::String(doc.clone())
    );
    every_frontend(chat.as_bytes());
    let trace = format!(
        r#"{{"kind": "call", "tool": "f", "arguments": {{}}, "output": {}, "turn": 0}}"#,
        serde_json::Value::String(doc)
    );
    every_frontend(trace.as_bytes());
}

#[test]
fn huge_strings_and_numbers_are_handled() {
    let big = "x".repeat(1 << 20);
    let digits = "9".repeat(100_000);
    let inputs = [
        format!(
            r#"[{{"id": "e1", "type": "set_var", "timestamp": 1, "key": "k", "value": "{big}"}}]"#
        ),
        format!(
            r#"[{{"id": "e1", "type": "set_var", "timestamp": {digits}, "key": "k", "value": 1}}]"#
        ),
        format!(
            r#"[{{"id": "e1", "type": "command_run", "timestamp": 1, "command": "ls", "exit_code": {digits}}}]"#
        ),
        r#"[{"id": "e1", "type": "set_var", "timestamp": 1e999999999, "key": "k", "value": -1e-999999999}]"#.to_owned(),
        format!(
            r#"[{{"id": "e1", "type": "decision", "timestamp": 1, "content": "a", "importance": {digits}}}]"#
        ),
        format!(r#"[{{"role": "user", "content": "{big}"}}]"#),
        format!(
            r#"[{{"role": "user", "content": "go"}}, {{"role": "assistant", "content": "<contextgc-state>{{\"assert\": {{\"n\": {digits}}}}}</contextgc-state>"}}]"#
        ),
        format!(
            r#"{{"kind": "call", "tool": "f", "arguments": {{}}, "output": "[{digits}]", "turn": {digits}}}"#
        ),
        format!(
            r#"{{"kind": "call", "tool": "f", "arguments": {{}}, "output": "1", "turn": -{digits}}}"#
        ),
    ];
    for input in inputs {
        frontends(input.as_bytes(), &[Options::default()]);
    }
    tool_output(
        "stripe_get_customer",
        &format!("{{\"id\": {digits}, \"email\": \"{big}\"}}"),
    );
    assert_eq!(
        pylit::parse(&format!("[{digits}, 1e99999, -.5e-99999]")).map(|v| v.is_array()),
        Some(true)
    );
}

/// Strings that sit on the edges of plain notation's quoting rules.
const EDGE_STRINGS: &[&str] = &[
    "",
    " ",
    "true",
    "false",
    "null",
    "42",
    "-1.5e3",
    "01",
    "+5",
    "1e400",
    "-",
    "NaN",
    " x",
    "x ",
    "\u{a0}x",
    "a:b",
    "a,b",
    "[x]",
    "{x}",
    "\"q\"",
    "back\\slash",
    "tab\tin",
    "é",
    "columns",
    "rows",
    "every_row",
    "row_groups",
];

fn plain_strings() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,10}",
        prop::sample::select(EDGE_STRINGS).prop_map(str::to_owned),
    ]
}

/// JSON values built from awkward strings, numbers and nesting, and lists of records that
/// share their keys (so tables, spread columns and `every_row` are taken).
fn plain_values() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        plain_strings().prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        prop::sample::select(&["a", "b"][..]).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 96, 8, |inner| {
        let record = prop::collection::vec(inner.clone(), 3).prop_map(|cells| {
            let keys = ["id", "status", "price"];
            Value::Object(keys.iter().map(|k| k.to_string()).zip(cells).collect())
        });
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(plain_strings(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            prop::collection::vec(record, 2..6).prop_map(Value::Array),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Plain notation reads back every value it writes, and the compact-json re-encoding of a
    /// JSON text (plain notation, tables) decodes to the same value.
    #[test]
    fn plain_notation_round_trips(value in plain_values()) {
        use ctxgc_core::chat::compact::{compact_json, decode_tables};
        use ctxgc_core::chat::plain::{from_plain, to_plain};
        let written = to_plain(&value);
        let read = from_plain(&written);
        prop_assert_eq!(read, Ok(value.clone()), "{}", written);
        if let Some(c) = compact_json(&value.to_string(), Tokenizer::O200kBase) {
            let read = from_plain(&c.text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let read = if c.tables { decode_tables(&read) } else { read };
            prop_assert_eq!(read, value, "{}", c.text);
        }
    }

    /// The plain-notation reader answers or errs on any text, mutated real output included.
    #[test]
    fn plain_reader_never_panics(text in any::<String>(), ms in mutations()) {
        let _ = ctxgc_core::chat::plain::from_plain(&text);
        let real = "{flights:{columns:[flight_number,departs],every_row:{origin:JFK},rows:[[HAT069,06:00:00],[HAT083,\"01\"]]}}";
        let bytes = mutated(real, &ms);
        let _ = ctxgc_core::chat::plain::from_plain(&String::from_utf8_lossy(&bytes));
    }
}
