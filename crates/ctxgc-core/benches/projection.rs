//! Learned-projection benchmarks.
//!
//! - `projection/observe`: usage detection and counts for every run of a corpus (once each);
//! - `projection/leave_one_out`: the whole leave-one-out measurement (observe, then one
//!   projection per held-out run by subtracting its counts, apply, exact token counts);
//! - `projection/apply`: trimming one search output with a learned projection.
//!
//! The runs are `tau2-bench-leaderboard.jsonl` from the shared corpus (`CTXGC_CORPUS`, else
//! `../../../shared/corpus`), or generated runs when it is absent.
//! Run: `cargo bench -p ctxgc-core --bench projection`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ctxgc_core::projection::measure::{MeasureOptions, measure, observe_all};
use ctxgc_core::projection::{Counts, Projection, Run};
use serde_json::json;

#[path = "../tests/common/mod.rs"]
mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn corpus_runs() -> Option<Vec<Run>> {
    let dir = common::corpus_path();
    let text = std::fs::read_to_string(dir.join("tau2-bench-leaderboard.jsonl")).ok()?;
    let conversations =
        ctxgc_core::frontend::lower_conversations(&text, &Default::default()).ok()?;
    Some(
        conversations
            .iter()
            .map(|c| Run::from_items(c.id.clone(), &c.items))
            .collect(),
    )
}

fn generated_runs(n: usize) -> Vec<Run> {
    (0..n)
        .map(|i| {
            let mut run = Run::new(format!("r{i}"));
            run.push_user(format!("Find flights for order ORD{i}."));
            let flights: Vec<_> = (0..6)
                .map(|k| {
                    json!({"flight_number": format!("HAT{i}{k:02}"), "price": 100 + 7 * k + i % 50,
                           "seats": {"economy": k, "business": 2}, "status": "available",
                           "departs": format!("{:02}:00:00", 6 + k)})
                })
                .collect();
            run.push_call(
                "search",
                json!({"order": i}),
                json!(flights).to_string(),
                None,
            );
            run.push_message(format!("Flight HAT{i}01 costs ${}.", 107 + i % 50), None);
            run
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let runs = corpus_runs().unwrap_or_else(|| generated_runs(400));
    let options = MeasureOptions::default();
    let mut group = c.benchmark_group("projection");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("observe", |b| {
        b.iter(|| black_box(observe_all(black_box(&runs), &options)))
    });
    group.bench_function("leave_one_out", |b| {
        b.iter(|| black_box(measure(black_box(&runs), &options)))
    });
    let counts = Counts::sum(observe_all(&runs, &options).iter().map(|o| &o.counts));
    let projection = Projection::learn(&counts, &options.learn, options.tokenizer);
    let (tool, output) = runs
        .iter()
        .flat_map(|r| &r.calls)
        .filter_map(|c| Some((c.tool.clone(), c.output.clone()?)))
        .max_by_key(|(_, o)| o.len())
        .unwrap_or_default();
    group.bench_function("apply", |b| {
        b.iter(|| black_box(projection.apply(&tool, black_box(&output))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
