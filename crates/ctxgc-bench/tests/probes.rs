//! The tracegc fixtures' probes, scored on every strategy.

mod common;

use common::{DropItems, bench_text, config, fixtures_dir, metrics};
use ctxgc_bench::probes::ProbeResult;
use ctxgc_bench::run::BenchConfig;

const FIXTURES: [&str; 9] = [
    "coding_agent_short",
    "coding_agent_medium",
    "coding_agent_long",
    "customer_support_short",
    "customer_support_medium",
    "customer_support_long",
    "research_agent_short",
    "research_agent_medium",
    "research_agent_long",
];

fn fixture(name: &str) -> Option<String> {
    let path = fixtures_dir().join(format!("{name}.json"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(_) => {
            eprintln!("note: {} not found; skipping", path.display());
            None
        }
    }
}

fn probes<'a>(report: &'a ctxgc_bench::BenchReport, strategy: &str) -> &'a [ProbeResult] {
    metrics(report, 0, strategy)
        .probes
        .as_deref()
        .expect("fixtures define probes")
}

fn probe<'a>(results: &'a [ProbeResult], name: &str) -> &'a ProbeResult {
    results
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no probe {name}"))
}

#[test]
fn ctxgc_passes_recall_artifact_and_continuation_on_every_fixture() {
    for name in FIXTURES {
        let Some(text) = fixture(name) else { return };
        let report = bench_text(name, &text, &config(&["ctxgc"]));
        let results = probes(&report, "ctxgc");
        assert_eq!(results.len(), 4, "{name}");
        for p in ["recall", "artifact", "continuation"] {
            let r = probe(results, p);
            assert!(r.passed, "{name}: {p} failed: {r:?}");
        }
        assert_eq!(probe(results, "artifact").recovered, Some(true), "{name}");
    }
}

#[test]
fn the_decision_probe_fails_where_a_live_call_shares_the_dead_calls_tool_name() {
    // coding_agent_short excludes "test_cache": the abandoned attempt called it, and so does
    // the live call e06 (`test_cache({"db": "cachedb"})`), which ctxgc keeps and renders with
    // its tool name. Every other fixture's decision probe passes.
    for name in FIXTURES {
        let Some(text) = fixture(name) else { return };
        let report = bench_text(name, &text, &config(&["ctxgc"]));
        let decision = probe(probes(&report, "ctxgc"), "decision");
        if name == "coding_agent_short" {
            assert!(!decision.passed);
            assert_eq!(decision.present, vec!["test_cache".to_owned()]);
            assert!(decision.missing.is_empty());
            assert!(decision.passed_without_excludes);
        } else {
            assert!(decision.passed, "{name}: {decision:?}");
        }
    }
}

#[test]
fn full_history_keeps_everything_so_it_passes_contains_and_fails_excludes() {
    let Some(text) = fixture("coding_agent_short") else {
        return;
    };
    let report = bench_text("coding_agent_short", &text, &config(&["full"]));
    let results = probes(&report, "full");
    assert!(results.iter().all(|p| p.passed_without_excludes));
    let artifact = probe(results, "artifact");
    assert_eq!(artifact.present, vec!["a03".to_owned(), "a04".to_owned()]);
    assert_eq!(
        probe(results, "continuation").present,
        vec!["cache_type = memcached".to_owned()]
    );
}

#[test]
fn recovered_needs_the_node_visible_or_named_by_a_stub() {
    let Some(text) = fixture("coding_agent_short") else {
        return;
    };
    // artifact.recovered is e07's result `cache_ok_conn_99`.
    let run = |stub: bool| {
        let cfg = BenchConfig {
            strategies: vec![Box::new(DropItems {
                name: "drop-e07",
                ids: vec!["e07"],
                stub,
            })],
            timing: false,
            ..BenchConfig::default()
        };
        bench_text("coding_agent_short", &text, &cfg)
    };
    let dropped = run(false);
    let artifact = probe(probes(&dropped, "drop-e07"), "artifact");
    assert_eq!(artifact.recovered, Some(false));
    assert_eq!(artifact.missing, vec!["cache_ok_conn_99".to_owned()]);
    // A stub naming e07 makes it recoverable, and its own text counts for nothing: the
    // value is still not *visible*.
    let stubbed = run(true);
    let artifact = probe(probes(&stubbed, "drop-e07"), "artifact");
    assert_eq!(artifact.recovered, Some(true));
    assert_eq!(artifact.missing, vec!["cache_ok_conn_99".to_owned()]);
}

#[test]
fn text_inside_receipt_stubs_does_not_violate_excludes() {
    let Some(text) = fixture("coding_agent_short") else {
        return;
    };
    // ctxgc's stub lists a03 and a04 as removed; artifact.excludes names them.
    let report = bench_text("coding_agent_short", &text, &config(&["ctxgc"]));
    let artifact = probe(probes(&report, "ctxgc"), "artifact");
    assert!(artifact.present.is_empty(), "{artifact:?}");
}

#[test]
fn probes_are_scored_the_same_on_the_bundled_copies() {
    for (name, text) in ctxgc_bench::samples::SAMPLES {
        if !name.ends_with(".json") {
            continue;
        }
        let Some(original) = fixture(name.trim_end_matches(".json")) else {
            return;
        };
        assert_eq!(
            *text, original,
            "examples/bench/{name} is a byte-for-byte copy"
        );
    }
}
