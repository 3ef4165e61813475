//! Token counting and the compiles whose figures issue-level targets are stated for.
//!
//! - `tokens/count_uncached/{o200k_base,cl100k_base}`: exact counting throughput on real
//!   transcript text (every count tokenizes);
//! - `tokens/recount_1k_messages`: recounting the payloads of a 1k-message chat that was
//!   counted before (what a grown session's recount costs for what is not new);
//! - `chat/compile/{100,1000,10000}`: `ctxgc_core::compile` of a chat of N messages built from
//!   transcripts, with exact counts (warm count cache) and with `Counting::Skip`;
//! - `chat/append1_recompile/10000`: a stateless caller's step on a live session: the chat
//!   grown by one message, compiled whole;
//! - `chat/live_append1_sent/1000`: a [`LiveChat`](ctxgc_core::chat::live::LiveChat) of 1k
//!   messages: append one, compile it, take the messages as sent and their exact counts (what
//!   Python's `Chat.append` + `compiled()` pays per step, before building Python objects);
//! - `events/compile_tiny`: a 10-event trace, whole compile in-process.
//!
//! The transcripts are `tau-bench-airline-gpt4o.jsonl` from the shared corpus (`CTXGC_CORPUS`,
//! else `../../../shared/corpus`), or the bundled `examples/bench/corpus-sample.jsonl`.
//! Run: `cargo bench -p ctxgc-core --bench tokens`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ctxgc_core::{Counting, Format, Options, Tokenizer, compile};

#[path = "../tests/common/mod.rs"]
mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn records() -> String {
    let dir = common::corpus_path();
    std::fs::read_to_string(dir.join("tau-bench-airline-gpt4o.jsonl"))
        .unwrap_or_else(|_| include_str!("../../../examples/bench/corpus-sample.jsonl").to_owned())
}

fn chat(records: &str, messages: usize) -> String {
    ctxgc_core::synth::chat_json(records, messages).expect("transcripts build a chat")
}

fn counting(c: &mut Criterion) {
    let records = records();
    // About 1 MB of transcript text, cut on a character boundary.
    let mut end = records.len().min(1 << 20);
    while !records.is_char_boundary(end) {
        end -= 1;
    }
    let text = &records[..end];
    let mut group = c.benchmark_group("tokens");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(text.len() as u64));
    for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
        group.bench_function(BenchmarkId::new("count_uncached", tokenizer.name()), |b| {
            b.iter(|| tokenizer.count_uncached(black_box(text)))
        });
    }
    let messages: Vec<serde_json::Value> =
        serde_json::from_str(&chat(&records, 1000)).expect("chat parses");
    let payloads: Vec<String> = messages.iter().map(|m| m.to_string()).collect();
    group.throughput(Throughput::Elements(payloads.len() as u64));
    group.bench_function("recount_1k_messages", |b| {
        b.iter(|| {
            payloads
                .iter()
                .map(|p| {
                    ctxgc_core::chat::compile::payload_tokens(
                        Format::OpenaiChat,
                        p,
                        Tokenizer::O200kBase,
                    )
                })
                .sum::<usize>()
        })
    });
    group.finish();
}

fn chats(c: &mut Criterion) {
    let records = records();
    let mut group = c.benchmark_group("chat");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let exact = Options::default();
    let skip = Options {
        counting: Counting::Skip,
        ..Default::default()
    };
    for n in [100usize, 1000, 10_000] {
        let text = chat(&records, n);
        group.bench_with_input(BenchmarkId::new("compile", n), &text, |b, text| {
            b.iter(|| compile(text, &exact).expect("compiles").output.len())
        });
        group.bench_with_input(
            BenchmarkId::new("compile_skip_counts", n),
            &text,
            |b, text| b.iter(|| compile(text, &skip).expect("compiles").output.len()),
        );
    }
    // Every step compiles a different prefix, as a gateway in front of a live session does.
    let full: Vec<serde_json::Value> =
        serde_json::from_str(&chat(&records, 10_100)).expect("chat parses");
    let prefixes: Vec<String> = (10_000..10_100)
        .map(|n| serde_json::to_string(&full[..n]).expect("prefix serialises"))
        .collect();
    let mut step = 0;
    // A live chat of 1k messages, grown one message a step (reset every 200 steps).
    let values: Vec<serde_json::Value> =
        serde_json::from_str(&chat(&records, 1_250)).expect("chat parses");
    // The opening ends where no tool call is left waiting for its result.
    let at = (1000..values.len())
        .find(|&i| values[i - 1].get("tool_calls").is_none() && values[i]["role"] != "tool")
        .expect("a message boundary");
    let grown: Vec<String> = values.iter().map(|m| m.to_string()).collect();
    let opening = format!("[{}]", grown[..at].join(","));
    let live = ctxgc_core::chat::live::LiveChat::new(&opening, &exact).expect("compiles");
    group.bench_function(BenchmarkId::new("live_append1_sent", 1_000), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let mut chat = live.clone();
                let n = 200.min(iters - done);
                let start = std::time::Instant::now();
                for message in &grown[at..at + n as usize] {
                    chat.append(message).expect("appends");
                    let sent = chat.sent().expect("compiles").expect("a list");
                    black_box(sent.tokens_after);
                }
                total += start.elapsed();
                done += n;
            }
            total
        })
    });
    group.bench_function(BenchmarkId::new("append1_recompile", 10_000), |b| {
        b.iter(|| {
            step = (step + 1) % prefixes.len();
            compile(&prefixes[step], &exact)
                .expect("compiles")
                .output
                .len()
        })
    });
    group.finish();
}

fn tiny(c: &mut Criterion) {
    let text = ctxgc_core::synth::events_jsonl(10, 42);
    c.bench_function("events/compile_tiny", |b| {
        b.iter(|| {
            compile(&text, &Options::default())
                .expect("compiles")
                .output
                .len()
        })
    });
}

criterion_group!(benches, counting, chats, tiny);
criterion_main!(benches);
