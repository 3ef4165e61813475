//! Learned tool-output projections: learn from an agent's own runs which fields of each
//! tool's output it visibly uses, drop the others, and give them back on request.
//!
//! The pieces, in the order data flows through them:
//!
//! - [`trace`]: a [`Run`] — the tool calls with arguments and outputs, grouped by model
//!   turn, and the agent's messages (the last one its answer) — built from lowered items of
//!   any front-end ([`Run::from_items`]) or pushed call by call;
//! - [`fields`]: outputs as trees of fields with generalised paths (`flights[].price`);
//! - [`words`] and [`usage`]: which fields' values reappear later in what the agent wrote;
//! - [`counts`]: per tool and field, seen / used counts that add and subtract run by run;
//! - [`learn`]: the [`Projection`] — kept and dropped fields with the counts behind each
//!   decision, as a JSON file a person can review and edit;
//! - [`apply`]: [`Projection::apply`] trims an output, with a footer naming what was hidden
//!   and a receipt so that [`apply::expand`] gives the originals back exactly;
//! - [`mod@measure`]: leave-one-out tokens removed and misses;
//! - [`report`]: the telemetry report, as data (the `ctxgc-report` crate renders it as a page);
//! - [`auto`]: [`AutoTrim`], the automatic mode (observe, learn, trim, back off), for a
//!   proxy or an agent loop.
//!
//! ```
//! use ctxgc_core::projection::{Run, Projection, Counts, counts::observe_run, learn::LearnOptions};
//! use ctxgc_core::Tokenizer;
//! use serde_json::json;
//! let mut counts = Counts::default();
//! for i in 0..3 {
//!     let mut run = Run::new(format!("run{i}"));
//!     let out = format!(r#"{{"id": "R{i}X", "status": "shipped", "carrier_notes": "left at the depot gate {i}, rescheduled twice because the recipient was away, then handed to a neighbour", "eta": "2024-06-0{}"}}"#, i + 1);
//!     run.push_call("track", json!({"order": "A1"}), out, None);
//!     run.push_message(format!("It arrives on June {}, 2024.", i + 1), None);
//!     counts.add(&observe_run(&run, &Default::default(), Tokenizer::default()).counts);
//! }
//! let projection = Projection::learn(&counts, &LearnOptions { min_saving_tokens: 0, ..Default::default() }, Tokenizer::default());
//! let trimmed = projection.apply("track", r#"{"id": "R9X", "status": "late", "carrier_notes": "the van broke down on the ring road and the parcel waits at the depot for the next round", "eta": "2024-06-09"}"#);
//! assert!(trimmed.text.starts_with(r#"{"id":"R9X","eta":"2024-06-09"}"#));
//! assert!(trimmed.text.contains("[hidden: status, carrier_notes — expand ref"));
//! ```

pub mod apply;
pub mod auto;
pub mod counts;
pub mod echo;
pub mod fields;
pub mod learn;
pub mod measure;
pub mod pylit;
pub mod report;
pub mod trace;
pub mod usage;
pub mod words;

pub use apply::{
    ExpandError, MemoryReceipts, ReceiptStore, ReceiptStoreError, TrimReceipt, Trimmed, expand,
    expand_tool,
};
pub use auto::{AutoConfig, AutoTrim};
pub use counts::Counts;
pub use learn::{LearnOptions, Projection};
pub use measure::{Measurement, measure};
pub use report::Report;
pub use trace::Run;
pub use usage::UsageOptions;
