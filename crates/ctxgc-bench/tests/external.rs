//! `external:COMMAND`: another compactor run as a process, scored like the built-ins; its
//! failures are per input, never a crash.

mod common;

use std::time::Duration;

use common::{bench_text, config, metrics};
use ctxgc_bench::run::BenchConfig;
use ctxgc_bench::strategy::external::External;

const TRACE: &str = r#"[
  {"id": "e1", "type": "set_var", "timestamp": 1, "key": "region", "value": "eu-west-3"},
  {"id": "e2", "type": "tool_call", "timestamp": 2, "tool_name": "deploy", "arguments": {"region": "eu-west-3"}},
  {"id": "e3", "type": "tool_result", "timestamp": 3, "call_id": "e2", "result": "deployed build_7781"},
  {"id": "e4", "type": "decision", "timestamp": 4, "content": "Verify build_7781 in eu-west-3"}
]"#;

fn with_external(command: &str, timeout: Duration) -> BenchConfig {
    let mut cfg = config(&["full"]);
    cfg.strategies.push(Box::new(
        External::new(command, timeout).expect("command given"),
    ));
    cfg
}

fn error_of(report: &ctxgc_bench::BenchReport, strategy: &str) -> String {
    report.conversations[0]
        .results
        .iter()
        .find(|r| r.strategy == strategy)
        .and_then(|r| r.error.clone())
        .unwrap_or_else(|| panic!("{strategy} did not fail"))
}

#[test]
fn an_identity_command_scores_exactly_like_full() {
    let report = bench_text(
        "t.json",
        TRACE,
        &with_external("cat", Duration::from_secs(30)),
    );
    let full = metrics(&report, 0, "full");
    let cat = metrics(&report, 0, "external:cat");
    assert_eq!(cat.tokens_after, full.tokens_after);
    assert_eq!(cat.replay.relative_to_full, Some(1.0));
    assert_eq!(cat.survival, full.survival);
    assert!(cat.deterministic);
}

#[test]
fn a_command_may_print_prompt_lines_instead_of_items() {
    let report = bench_text(
        "t.json",
        TRACE,
        &with_external(
            r#"printf '%s' '["[e1] region set\n"]'"#,
            Duration::from_secs(30),
        ),
    );
    let m = metrics(
        &report,
        0,
        r#"external:printf '%s' '["[e1] region set\n"]'"#,
    );
    assert!(m.tokens_after < m.tokens_before);
    // The deploy call needed eu-west-3, the decision build_7781 and eu-west-3: none of them
    // is in that one line.
    assert_eq!(m.survival.missed_values, 3);
}

#[test]
fn failures_timeouts_and_garbage_are_errors_for_that_input_only() {
    let cases = [
        ("exit 3", "exited with"),
        ("echo not json", "not JSON"),
        ("echo 42", "JSON list"),
        ("sleep 5", "timed out"),
        (
            r#"echo '[{"id": "x", "timestamp": 1}]'"#,
            "reading the output back",
        ),
    ];
    for (command, expected) in cases {
        let report = bench_text(
            "t.json",
            TRACE,
            // Long enough for a shell to start on a loaded machine; short of the `sleep 5`.
            &with_external(command, Duration::from_secs(2)),
        );
        let error = error_of(&report, &format!("external:{command}"));
        assert!(error.contains(expected), "{command}: {error}");
        // The other strategy is unaffected.
        assert_eq!(metrics(&report, 0, "full").survival.missed_values, 0);
    }
}

#[test]
fn an_empty_command_is_refused() {
    assert!(ctxgc_bench::parse_spec("external:  ", &Default::default()).is_err());
}
