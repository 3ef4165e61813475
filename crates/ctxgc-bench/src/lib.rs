//! # ctxgc-bench
//!
//! The scoreboard: every strategy a user could pick to manage an agent's context — full
//! history, truncation, provider-side tool-result clearing, ctxgc, or any other compactor run
//! as a command — measured on the same transcripts with the same metrics:
//!
//! - tokens after / before (exact BPE) and wall time per compile;
//! - used-value survival ([`survival`]): values the agent went on to use that the strategy had
//!   already dropped;
//! - the tracegc fixtures' own probes ([`probes`]);
//! - determinism: two runs byte-identical;
//! - replayed cost through a provider prefix cache ([`replay`]).
//!
//! Every strategy gives a [`context::Context`] for each prefix of a conversation (what the
//! agent would send at that turn); every metric is computed on those contexts alone, so all
//! strategies are scored the same way.
//!
//! ```
//! use ctxgc_bench::run::{run, BenchConfig, InputFile};
//! let trace = r#"[
//!   {"id": "e1", "type": "decision", "timestamp": 1, "content": "Try the staging cluster"},
//!   {"id": "e2", "type": "tool_call", "timestamp": 2, "parent_id": "e1", "tool_name": "deploy", "arguments": {"cluster": "stage-eu-7"}},
//!   {"id": "e3", "type": "tool_result", "timestamp": 3, "parent_id": "e2", "call_id": "e2", "result": "error: quota exceeded for project billing-eu-7 (limit 12 vCPU, requested 16 vCPU)"},
//!   {"id": "e4", "type": "abandon", "timestamp": 4, "parent_id": "e3", "ref_to": ["e1"]},
//!   {"id": "e5", "type": "decision", "timestamp": 5, "content": "Deploy to prod-eu-2 instead"}
//! ]"#;
//! let config = BenchConfig { timing: false, ..BenchConfig::default() };
//! let report = run(&[InputFile { path: "trace.json".into(), text: Ok(trace.into()) }], &config, &mut |_| {});
//! let names: Vec<&str> = report.totals.iter().map(|s| s.strategy.as_str()).collect();
//! assert_eq!(names, ["full", "truncate-events", "truncate-tokens", "clear-tool-results",
//!                    "ctxgc", "ctxgc-recall", "ctxgc-projection", "ctxgc-lossless",
//!                    "ctxgc-aggressive", "ctxgc-cache", "ctxgc-cache-projection"]);
//! let ctxgc = &report.totals[4];
//! assert_eq!(ctxgc.strategy, "ctxgc");
//! assert!(ctxgc.reduction.unwrap() > 0.0);
//! ```
#![warn(missing_docs)]

pub mod context;
pub mod html;
pub mod long;
pub mod prepare;
pub mod probes;
pub mod replay;
pub mod report;
pub mod run;
pub mod samples;
pub mod strategy;
pub mod survival;
pub mod table;
pub mod values;

pub use report::BenchReport;
pub use run::{BenchConfig, InputFile, Progress, run};
pub use strategy::{Strategy, parse_spec};
