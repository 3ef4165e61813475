//! Helpers shared by the bench's tests: hand-made conversations and a tiny strategy.

#![allow(dead_code)]

use std::collections::BTreeSet;

use ctxgc_bench::context::{Context, Segment, SegmentKind};
use ctxgc_bench::prepare::Prepared;
use ctxgc_bench::report::Summary;
use ctxgc_bench::run::{BenchConfig, InputFile, run, run_prepared};
use ctxgc_bench::strategy::{Prefix, Strategy, StrategyError};
use ctxgc_bench::{BenchReport, parse_spec};
use ctxgc_core::Format;
use ctxgc_core::Options;
use ctxgc_core::frontend::Conversation;
use ctxgc_core::ir::{Block, Call, Item, Kind, Message, Role, ToolOutput};
use serde_json::{Value, json};

/// The tracegc fixtures folder.
pub fn fixtures_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/anchor-fixtures/tracegc"
    ))
}

/// The corpus folder (`CTXGC_CORPUS` or the shared checkout).
pub fn corpus_dir() -> std::path::PathBuf {
    std::env::var_os("CTXGC_CORPUS").map_or_else(
        || {
            std::path::PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        },
        std::path::PathBuf::from,
    )
}

/// Bench config with the given strategy specs and no timing.
pub fn config(specs: &[&str]) -> BenchConfig {
    BenchConfig {
        strategies: specs
            .iter()
            .map(|s| parse_spec(s, &Default::default()).expect("test spec parses"))
            .collect(),
        timing: false,
        explain: true,
        ..BenchConfig::default()
    }
}

/// Runs the bench on one text input.
pub fn bench_text(name: &str, text: &str, config: &BenchConfig) -> BenchReport {
    run(
        &[InputFile {
            path: name.into(),
            text: Ok(text.into()),
        }],
        config,
        &mut |_| {},
    )
}

/// Runs the bench on hand-made conversations.
pub fn bench_conversations(conversations: Vec<Conversation>, config: &BenchConfig) -> BenchReport {
    let prepared = conversations
        .into_iter()
        .map(|c| Prepared::new("hand-made".into(), c, Options::default(), None))
        .collect();
    run_prepared(vec![("hand-made".into(), prepared)], config, &mut |_| {})
}

/// The metrics of `strategy` on conversation `n` of a report.
pub fn metrics<'a>(
    report: &'a BenchReport,
    n: usize,
    strategy: &str,
) -> &'a ctxgc_bench::report::Metrics {
    let result = report.conversations[n]
        .results
        .iter()
        .find(|r| r.strategy == strategy)
        .unwrap_or_else(|| panic!("no result for {strategy}"));
    result
        .metrics
        .as_ref()
        .unwrap_or_else(|| panic!("{strategy} failed: {:?}", result.error))
}

fn item(n: usize, role: Role, blocks: Vec<Block>, raw: Value) -> Item {
    Item {
        id: format!("m{n}"),
        raw: raw.to_string(),
        kind: Kind::Message(Message { role, blocks }),
        parent: None,
        timestamp: None,
        retention: Default::default(),
        extra: None,
    }
}

/// One message of a hand-made OpenAI-style transcript.
pub enum Msg<'a> {
    System(&'a str),
    User(&'a str),
    Assistant(&'a str),
    /// An assistant turn calling one tool: (call id, tool, arguments).
    Call(&'a str, &'a str, Value),
    /// A tool result: (call id, output).
    Result(&'a str, &'a str),
}

/// A conversation in the message-list model, items built directly (ids m0, m1, ...), with raw
/// bytes in OpenAI Chat Completions form.
pub fn transcript(messages: &[Msg<'_>]) -> Conversation {
    let items: Vec<Item> = messages
        .iter()
        .enumerate()
        .map(|(n, m)| match m {
            Msg::System(t) => item(
                n,
                Role::System,
                vec![Block::Text { text: (*t).into() }],
                json!({"role": "system", "content": t}),
            ),
            Msg::User(t) => item(
                n,
                Role::User,
                vec![Block::Text { text: (*t).into() }],
                json!({"role": "user", "content": t}),
            ),
            Msg::Assistant(t) => item(
                n,
                Role::Assistant,
                vec![Block::Text { text: (*t).into() }],
                json!({"role": "assistant", "content": t}),
            ),
            Msg::Call(id, name, args) => item(
                n,
                Role::Assistant,
                vec![Block::ToolCall(Call {
                    call_id: (*id).into(),
                    name: (*name).into(),
                    arguments: args.clone(),
                })],
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}
                ]}),
            ),
            Msg::Result(id, out) => item(
                n,
                Role::Tool,
                vec![Block::ToolResult(ToolOutput {
                    call_id: (*id).into(),
                    output: Value::String((*out).into()),
                    is_error: false,
                })],
                json!({"role": "tool", "tool_call_id": id, "content": out}),
            ),
        })
        .collect();
    Conversation {
        id: "hand-made".into(),
        format: Format::OpenaiChat,
        raw: String::new(),
        items,
    }
}

/// A strategy for tests: the full history with some items removed, optionally leaving a stub
/// that names them (and holding their originals).
pub struct DropItems {
    pub name: &'static str,
    pub ids: Vec<&'static str>,
    pub stub: bool,
}

impl Strategy for DropItems {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> String {
        format!("drops {:?}", self.ids)
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let mut segments = Vec::new();
        let mut recoverable = BTreeSet::new();
        for i in 0..prefix.len {
            let id = input.conversation.items[i].id.as_str();
            if self.ids.contains(&id) {
                if self.stub {
                    segments.push(Segment {
                        text: format!("[receipt {id}: dropped]\n"),
                        kind: SegmentKind::Stub,
                    });
                    recoverable.insert(id.to_owned());
                }
            } else if input.rendered(i) {
                segments.push(input.segment(i));
            }
        }
        Ok(Context {
            items_kept: segments.len(),
            segments,
            recoverable,
            // The test strategy offers a recall tool exactly when it leaves stubs.
            recall_offered: self.stub,
        })
    }
}

/// The totals of `strategy` over every conversation of a report.
pub fn totals<'a>(report: &'a BenchReport, strategy: &str) -> &'a Summary {
    report
        .totals
        .iter()
        .find(|s| s.strategy == strategy)
        .unwrap_or_else(|| panic!("no totals for {strategy}"))
}
