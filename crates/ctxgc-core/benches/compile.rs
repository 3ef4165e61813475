//! Compile-time benchmarks on generated traces (`ctxgc_core::synth`).
//!
//! - `single_shot/compile`: a lowered trace of N events → session → passes → rendered prompt.
//! - `single_shot/lower_and_compile`: the same from JSONL text (parsing and validation included).
//! - `incremental/append1_compile`: a live session of 100k events; append one event and bring
//!   the plan up to date (what an agent loop pays per step).
//! - `incremental/append1_compile_render`: the same, plus rendering the whole prompt.
//! - `incremental/append1_compile_cache_stable`: `append1_compile` on a cache-stable session
//!   (each event a check point that prices a compaction step).
//! - `incremental/append1_live_report/10000`: a live session of 10k events with its
//!   [`LiveReport`]: append one event, compile, bring the prompt, its exact counts and the
//!   decisions up to date (what Python's `TraceGC.add_event` + `compact()` pays per step).
//!
//! Run: `cargo bench -p ctxgc-core --bench compile`. Freeing the session is not measured
//! (a compile's output is used, then freed, by the caller).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use ctxgc_core::frontend::events::{EventOptions, lower_events};
use ctxgc_core::live_report::LiveReport;
use ctxgc_core::render::prompt;
use ctxgc_core::{Item, Session};

// The allocator the `ctxgc` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn lowered(n: usize) -> (String, Vec<Item>) {
    let text = ctxgc_core::synth::events_jsonl(n, 42);
    let items = lower_events(&text, &EventOptions::default()).expect("generated trace is valid");
    (text, items)
}

fn single_shot(c: &mut Criterion) {
    let mut group = c.benchmark_group("single_shot");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for n in [10_000usize, 100_000, 1_000_000] {
        let (text, items) = lowered(n);
        group.bench_with_input(BenchmarkId::new("compile", n), &items, |b, items| {
            b.iter_batched(
                || items.clone(),
                |items| {
                    let mut session = Session::new(Default::default());
                    session.extend(items).expect("valid");
                    session.compile();
                    let text = prompt::render(&session).text;
                    // Returned, so that freeing it happens outside the measurement.
                    (session, text)
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_with_input(
            BenchmarkId::new("lower_and_compile", n),
            &text,
            |b, text| {
                b.iter(|| {
                    let items = lower_events(text, &EventOptions::default()).expect("valid");
                    let mut session = Session::new(Default::default());
                    session.extend(items).expect("valid");
                    session.compile();
                    black_box(prompt::render(&session).text.len())
                })
            },
        );
    }
    group.finish();
}

fn next_event(n: usize, parent: &str) -> Item {
    let raw = format!(
        r#"{{"id":"x{n}","type":"set_var","timestamp":{},"parent_id":"{parent}","key":"var_{}","value":{n}}}"#,
        10_000_000 + n,
        n % 97
    );
    ctxgc_core::frontend::events::lower_event(
        0,
        &raw,
        serde_json::from_str(&raw).expect("json"),
        &EventOptions::default(),
    )
    .expect("valid")
}

/// What a measured step does after appending one event.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    /// Brings the plan up to date.
    Compile,
    /// Compiles and renders the whole prompt.
    Render,
    /// Compiles and brings the live report (prompt, counts, decisions) up to date.
    Report,
}

/// Times `iters` steps, each appending one event to `base` (and its report) and doing `step`.
/// The session is reset to `base` every `chunk` appends (outside the measurement), so every
/// measured append lands on a session of N..N+chunk events.
fn steps(
    base: &Session,
    report: Option<&LiveReport>,
    last: &str,
    iters: u64,
    chunk: u64,
    step: Step,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0u64;
    while done < iters {
        let mut session = base.clone();
        let mut report = report.cloned();
        let mut parent = last.to_owned();
        let n = chunk.min(iters - done);
        let start = std::time::Instant::now();
        for k in 0..n {
            let item = next_event(k as usize, &parent);
            parent = item.id.clone();
            session.append(item).expect("valid");
            session.compile();
            match (step, report.as_mut()) {
                (Step::Render, _) => black_box(prompt::render(&session).text.len()),
                (Step::Report, Some(report)) => {
                    let changes = session.take_changes();
                    report.update(&session, changes);
                    black_box(report.tokens_after())
                }
                _ => 0,
            };
        }
        total += start.elapsed();
        done += n;
        drop(session);
    }
    total
}

fn incremental(c: &mut Criterion) {
    let mut group = c.benchmark_group("incremental");
    group.sample_size(30);
    let (_, items) = lowered(100_000);
    let last = items.last().map(|i| i.id.clone()).unwrap_or_default();
    let mut base = Session::new(Default::default());
    let mut cache_stable = Session::new(Default::default());
    cache_stable.enable_cache_stable(Default::default());
    cache_stable.extend(items.clone()).expect("valid");
    cache_stable.compile();
    base.extend(items).expect("valid");
    base.compile();
    group.bench_function("append1_compile/100000", |b| {
        b.iter_custom(|iters| steps(&base, None, &last, iters, 1000, Step::Compile))
    });
    group.bench_function("append1_compile_render/100000", |b| {
        b.iter_custom(|iters| steps(&base, None, &last, iters, 5, Step::Render))
    });
    group.bench_function("append1_compile_cache_stable/100000", |b| {
        b.iter_custom(|iters| steps(&cache_stable, None, &last, iters, 1000, Step::Compile))
    });
    // A live report over 10k events.
    let (_, items) = lowered(10_000);
    let last = items.last().map(|i| i.id.clone()).unwrap_or_default();
    let mut live_base = Session::new(Default::default());
    live_base.extend(items).expect("valid");
    live_base.compile();
    let mut report_base = LiveReport::new(Default::default());
    let changes = live_base.take_changes();
    report_base.update(&live_base, changes);
    group.bench_function("append1_live_report/10000", |b| {
        b.iter_custom(|iters| {
            steps(
                &live_base,
                Some(&report_base),
                &last,
                iters,
                1000,
                Step::Report,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, single_shot, incremental);
criterion_main!(benches);
