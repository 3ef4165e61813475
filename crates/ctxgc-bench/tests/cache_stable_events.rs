//! `ctxgc-cache` on event traces: stubs stay where they were placed, so the replayed cost
//! through a prompt cache is at or below sending the whole trace (`full`) on every bundled
//! TraceGC fixture, where the eager renderer, which regroups stubs on every compile, costs
//! about 3x.

mod common;

use common::{bench_text, config, metrics};

/// The TraceGC fixtures bundled with the core crate's tests (MIT, see their LICENSE).
fn fixtures() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ctxgc-core/tests/fixtures/tracegc");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("fixture reads"))
        })
        .collect()
}

#[test]
fn cache_stable_event_traces_cost_no_more_than_full_and_far_less_than_eager_regrouping() {
    let config = config(&["full", "ctxgc", "ctxgc-cache"]);
    let files = fixtures();
    assert_eq!(files.len(), 9, "the nine TraceGC fixtures");
    let (mut full, mut eager, mut stable) = (0.0, 0.0, 0.0);
    for (name, text) in &files {
        let report = bench_text(name, text, &config);
        let full_cost = metrics(&report, 0, "full").replay.cost;
        let default = metrics(&report, 0, "ctxgc");
        let cache = metrics(&report, 0, "ctxgc-cache");
        eprintln!(
            "{name}: full {full_cost:.1}, ctxgc {:.1}, ctxgc-cache {:.1}",
            default.replay.cost, cache.replay.cost
        );
        // Arrival decisions only ever append; a compaction step is taken only when it pays
        // (stub lines priced in). Never dearer than sending the whole trace.
        assert!(
            cache.replay.cost <= full_cost + 1e-9,
            "{name}: ctxgc-cache costs {} against full {full_cost}",
            cache.replay.cost
        );
        // Nothing the agent used is lost for it.
        assert!(
            cache.survival.missed_values <= default.survival.missed_values,
            "{name}: cache-stable misses more than the default"
        );
        full += full_cost;
        eager += default.replay.cost;
        stable += cache.replay.cost;
    }
    eprintln!(
        "replayed cost over the nine fixtures: full {full:.1}, ctxgc {eager:.1} ({:.2}x), \
         ctxgc-cache {stable:.1} ({:.2}x)",
        eager / full,
        stable / full
    );
    assert!(
        stable < 0.5 * eager,
        "cache-stable far below eager regrouping"
    );
}
