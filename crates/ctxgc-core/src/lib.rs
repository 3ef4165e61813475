//! # ctxgc-core
//!
//! A deterministic context compiler for AI agents: front-ends lower traces and transcripts to
//! one Session IR, passes decide what is provably dead, the plan says keep / retire / rewrite
//! for every item, and back-ends render the result with a receipt for everything removed.
//! No I/O, no clocks, no randomness: the same input gives byte-identical output.
//!
//! ```
//! use ctxgc_core::{compile, Options};
//! let trace = r#"{"events": [
//!   {"id": "e1", "type": "decision", "timestamp": 1, "content": "Try memcached"},
//!   {"id": "e2", "type": "set_var", "timestamp": 2, "parent_id": "e1", "key": "cache", "value": "memcached"},
//!   {"id": "e3", "type": "abandon", "timestamp": 3, "parent_id": "e2", "ref_to": ["e1"]},
//!   {"id": "e4", "type": "set_var", "timestamp": 4, "key": "cache", "value": "redis"}
//! ]}"#;
//! let out = compile(trace, &Options::default()).unwrap();
//! assert_eq!(out.output, "[receipts e1 e2 e3: inside branch abandoned by e3]\n[e4] cache = redis\n");
//! assert!(out.tokens_after < out.tokens_before);
//! ```
#![warn(missing_docs)]

pub mod chat;
pub mod compile;
pub mod error;
pub mod formats;
pub mod frontend;
pub mod graph;
pub mod ir;
pub mod live_report;
pub mod parallel;
pub mod passes;
pub mod plan;
pub mod projection;
pub mod render;
pub mod session;
pub mod store;
pub mod synth;
pub mod tokens;
pub mod unique_keys;
pub mod validate;

pub use compile::{Compiled, Counting, Detail, Options, Receipt, compile, receipt};
pub use error::{Diagnostic, Error};
pub use formats::Format;
pub use ir::{Item, Kind};
pub use plan::{Action, Decision, Reason, Verdict};
pub use session::{RetentionPolicy, Session};
pub use tokens::Tokenizer;
