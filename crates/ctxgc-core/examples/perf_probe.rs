//! In-process timings behind `scripts/compare-anchors.sh` and the README's performance table.
//!
//! ```text
//! cargo run --release -p ctxgc-core --example perf_probe -- compile FILE [REPEATS]
//! cargo run --release -p ctxgc-core --example perf_probe -- count FILE [REPEATS]
//! cargo run --release -p ctxgc-core --example perf_probe -- first-count
//! cargo run --release -p ctxgc-core --example perf_probe -- append1 CHAT_FILE [STEPS]
//! cargo run --release -p ctxgc-core --example perf_probe -- live CHAT_FILE [STEPS]
//! cargo run --release -p ctxgc-core --example perf_probe -- cache-stable-append CHAT_FILE [STEPS]
//! cargo run --release -p ctxgc-core --example perf_probe -- gen-events N OUT
//! cargo run --release -p ctxgc-core --example perf_probe -- gen-chat N RECORDS_JSONL OUT
//! ```
//!
//! `compile` compiles FILE (any supported format) through `ctxgc_core::compile` and prints one
//! JSON line: the first compile (tokenizer start-up included) and the median of REPEATS more,
//! in milliseconds. `count` prints exact o200k_base counting throughput on FILE's text in MB/s
//! (median of REPEATS). `first-count` prints how long the first count in a fresh process takes,
//! for ctxgc's tokenizer and for tiktoken-rs building its own. `append1` replays the last
//! STEPS messages of a chat (a JSON array of messages) one at a time, compiling the whole chat
//! so far after each, as a stateless caller in front of a live session does, and prints the
//! median step in microseconds. `live` does the same through a
//! [`ctxgc_core::chat::live::LiveChat`] holding the chat (append one message, compile it, read
//! the register) and prints the median step, and apart from it the median time to render the
//! whole compiled document after a step. `cache-stable-append` holds the chat in a
//! cache-stable [`ctxgc_core::Session`] (as the gateway does), appends the last STEPS messages
//! one at a time and compiles after each, and prints the median step. `gen-events` writes the
//! generated trace of `ctxgc_core::synth::events_jsonl` (seed 42) as a JSON array;
//! `gen-chat` writes `ctxgc_core::synth::chat_json` of the records.

use std::time::Instant;

use ctxgc_core::{Options, Tokenizer, compile};

// The allocator the `ctxgc` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn usage() -> ! {
    eprintln!(
        "usage: perf_probe compile FILE [REPEATS] | count FILE [REPEATS] | first-count \
         | append1 CHAT [STEPS] | live CHAT [STEPS] | cache-stable-append CHAT [STEPS] \
         | gen-events N OUT | gen-chat N RECORDS_JSONL OUT"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repeats = |i: usize| -> usize {
        args.get(i)
            .map(|r| r.parse().unwrap_or_else(|_| usage()))
            .unwrap_or(5)
            .max(1)
    };
    let read = |i: usize| -> String {
        let path = args.get(i).unwrap_or_else(|| usage());
        std::fs::read_to_string(path).unwrap_or_else(|e| {
            eprintln!("perf_probe: {path}: {e}");
            std::process::exit(1)
        })
    };
    // The chat of `append1` and `live` (a JSON array of messages) and how many of its last
    // messages to append (STEPS, at least one, fewer than all where the chat allows).
    let read_chat = || -> (Vec<serde_json::Value>, usize) {
        let messages: Vec<serde_json::Value> = serde_json::from_str(&read(1)).unwrap_or_else(|e| {
            eprintln!("perf_probe: the chat is not a JSON array of messages: {e}");
            std::process::exit(1)
        });
        let steps = repeats(2).min(messages.len().saturating_sub(1)).max(1);
        (messages, steps)
    };
    match args.first().map(String::as_str) {
        Some("live-events") => {
            // A live event session of N generated events: append one, compile, bring the
            // report (prompt, exact counts, decisions) up to date; median step, and its parts.
            let n: usize = args
                .get(1)
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| usage());
            let steps = repeats(2).min(n - 1);
            let text = ctxgc_core::synth::events_jsonl(n, 42);
            let items = ctxgc_core::frontend::events::lower_events(&text, &Default::default())
                .expect("generated trace lowers");
            let (head, tail) = items.split_at(n - steps);
            let mut session = ctxgc_core::Session::new(Default::default());
            session.extend(head.to_vec()).expect("valid");
            session.compile();
            let mut live = ctxgc_core::live_report::LiveReport::new(Tokenizer::O200kBase);
            let changes = session.take_changes();
            live.update(&session, changes);
            let (mut total, mut compile_us) = (Vec::new(), Vec::new());
            for item in tail {
                let start = Instant::now();
                session.append(item.clone()).expect("valid");
                session.compile();
                let compiled = start.elapsed().as_secs_f64() * 1e6;
                let changes = session.take_changes();
                let moved = changes.as_ref().map_or(usize::MAX, Vec::len);
                live.update(&session, changes);
                total.push(start.elapsed().as_secs_f64() * 1e6);
                if std::env::var_os("PROBE_DEBUG").is_some() {
                    let t = Instant::now();
                    let layout = ctxgc_core::render::prompt::Layout::of(&session, live.plans());
                    eprintln!(
                        "moved {moved} layout {:.1}us slots {}",
                        t.elapsed().as_secs_f64() * 1e6,
                        layout.slots.len()
                    );
                }
                compile_us.push(compiled);
            }
            let mean = total.iter().sum::<f64>() / total.len() as f64;
            println!(
                "{{\"events\":{n},\"mean_step_us\":{mean:.1},\"step_us\":{:.1},\"compile_us\":{:.1},\"prompt_bytes\":{}}}",
                median(total),
                median(compile_us),
                live.prompt().len()
            );
        }
        Some("compile") => {
            let text = read(1);
            let options = Options::default();
            let run = || {
                let start = Instant::now();
                let out = compile(&text, &options).unwrap_or_else(|e| {
                    eprintln!("perf_probe: {e}");
                    std::process::exit(1)
                });
                std::hint::black_box(out.output.len());
                ms(start)
            };
            let first = run();
            let rest: Vec<f64> = (0..repeats(2)).map(|_| run()).collect();
            println!(
                "{{\"bytes\":{},\"first_ms\":{first:.3},\"median_ms\":{:.3}}}",
                text.len(),
                median(rest)
            );
        }
        Some("count") => {
            let text = read(1);
            Tokenizer::O200kBase.count("warm up");
            // Uncached: every repeat tokenizes the whole text. Cached: `count` after a first
            // count of the same text, which costs one content hash (a grown session recounted).
            let time = |count: &dyn Fn() -> usize| {
                let times: Vec<f64> = (0..repeats(2))
                    .map(|_| {
                        let start = Instant::now();
                        std::hint::black_box(count());
                        start.elapsed().as_secs_f64()
                    })
                    .collect();
                text.len() as f64 / 1e6 / median(times)
            };
            let uncached = time(&|| Tokenizer::O200kBase.count_uncached(&text));
            Tokenizer::O200kBase.count(&text);
            let cached = time(&|| Tokenizer::O200kBase.count(&text));
            println!(
                "{{\"bytes\":{},\"mb_per_s\":{uncached:.1},\"cached_mb_per_s\":{cached:.1}}}",
                text.len()
            );
        }
        Some("first-count") => {
            let start = Instant::now();
            let ours = Tokenizer::O200kBase.count("hello world");
            let ours_ms = ms(start);
            let start = Instant::now();
            let bpe = tiktoken_rs::o200k_base().expect("o200k_base loads");
            let theirs = bpe.encode_ordinary("hello world").len();
            let theirs_ms = ms(start);
            assert_eq!(ours, theirs);
            println!("{{\"ctxgc_ms\":{ours_ms:.3},\"tiktoken_rs_ms\":{theirs_ms:.3}}}");
        }
        Some("append1") => {
            let (messages, steps) = read_chat();
            let prefixes: Vec<String> = (messages.len() - steps..=messages.len())
                .map(|n| serde_json::to_string(&messages[..n]).expect("messages serialise"))
                .collect();
            let options = Options::default();
            let step = |prefix: &String| {
                let start = Instant::now();
                let out = compile(prefix, &options).unwrap_or_else(|e| {
                    eprintln!("perf_probe: {e}");
                    std::process::exit(1)
                });
                std::hint::black_box(out.tokens_after);
                start.elapsed().as_secs_f64() * 1e6
            };
            step(&prefixes[0]);
            let times: Vec<f64> = prefixes[1..].iter().map(step).collect();
            println!(
                "{{\"messages\":{},\"median_us\":{:.1}}}",
                messages.len(),
                median(times)
            );
        }
        Some("live") => {
            let (messages, steps) = read_chat();
            let held = messages.len() - steps;
            let start_text = serde_json::to_string(&messages[..held]).expect("messages serialise");
            let options = Options::default();
            let mut live = ctxgc_core::chat::live::LiveChat::new(&start_text, &options)
                .unwrap_or_else(|e| {
                    eprintln!("perf_probe: {e}");
                    std::process::exit(1)
                });
            let appended: Vec<String> = messages[held..].iter().map(|m| m.to_string()).collect();
            let mut steps_us = Vec::new();
            let mut renders_us = Vec::new();
            for message in &appended {
                let start = Instant::now();
                live.append(message).unwrap_or_else(|e| {
                    eprintln!("perf_probe: {e}");
                    std::process::exit(1)
                });
                std::hint::black_box(live.register());
                steps_us.push(start.elapsed().as_secs_f64() * 1e6);
                let start = Instant::now();
                let rendered = live.render().unwrap_or_else(|e| {
                    eprintln!("perf_probe: {e}");
                    std::process::exit(1)
                });
                std::hint::black_box(rendered.text.len());
                renders_us.push(start.elapsed().as_secs_f64() * 1e6);
            }
            println!(
                "{{\"messages\":{},\"median_us\":{:.1},\"render_median_us\":{:.1}}}",
                messages.len(),
                median(steps_us),
                median(renders_us)
            );
        }
        Some("cache-stable-append") => {
            let text = read(1);
            let fail = |e: ctxgc_core::Error| -> ! {
                eprintln!("perf_probe: {e}");
                std::process::exit(1)
            };
            let items = match ctxgc_core::chat::compile::lower_chat_input(&text, None) {
                Ok(ctxgc_core::chat::compile::ChatInput::Doc(doc)) => doc.items,
                Ok(_) => {
                    eprintln!("perf_probe: the chat is records, not one document");
                    std::process::exit(1)
                }
                Err(e) => fail(e),
            };
            let steps = repeats(2).min(items.len().saturating_sub(1)).max(1);
            let held = items.len() - steps;
            let mut options = Options::default();
            options.chat.cache = Some(Default::default());
            let mut session = ctxgc_core::chat::compile::session_template(&options);
            session
                .extend(items[..held].to_vec())
                .unwrap_or_else(|e| fail(e));
            session.compile();
            let times: Vec<f64> = items[held..]
                .iter()
                .map(|item| {
                    let start = Instant::now();
                    session.append(item.clone()).unwrap_or_else(|e| fail(e));
                    session.compile();
                    start.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            println!(
                "{{\"items\":{},\"steps\":{},\"median_us\":{:.1}}}",
                items.len(),
                session.compaction_steps().len(),
                median(times)
            );
        }
        Some("gen-events") => {
            let n: usize = args
                .get(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| usage());
            let events = ctxgc_core::synth::events(n, 42);
            write(
                args.get(2),
                &serde_json::to_string(&events).expect("events serialise"),
            );
        }
        Some("gen-chat") => {
            let n: usize = args
                .get(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| usage());
            let records = read(2);
            let chat = ctxgc_core::synth::chat_json(&records, n).unwrap_or_else(|e| {
                eprintln!("perf_probe: {e}");
                std::process::exit(1)
            });
            write(args.get(3), &chat);
        }
        _ => usage(),
    }
}

fn write(path: Option<&String>, text: &str) {
    let path = path.unwrap_or_else(|| usage());
    std::fs::write(path, text).unwrap_or_else(|e| {
        eprintln!("perf_probe: {path}: {e}");
        std::process::exit(1)
    });
}
