//! What a compile of an event trace reports, kept up to date between compiles of a live
//! session: the prompt, its exact counts, the decisions and receipts, each brought up to date
//! for the items whose plan may have changed ([`Session::take_changes`]) instead of being
//! worked out again for the whole trace.
//!
//! [`report_events`](crate::compile::report_events) decides every item's plan, renders every
//! line and counts both texts whole at each call, so a loop that compacts after every event
//! pays for the whole trace every time. A [`LiveReport`] keeps the plans, each item's
//! uncompacted and sent line with its token count, and each stub line's count; an update
//! recomputes the plans that moved, writes the lines that changed, lays the prompt out again
//! (one pass over the items, no formatting or counting for lines it has) and adds the counts.
//!
//! The counts are the exact counts of the whole texts. Every line of either text begins with
//! `[` and ends with a newline, and the tokenizers' pre-tokenisation never joins a newline
//! with the `[` that follows it, so a text's count is the sum of its lines' counts
//! (`tests/live_report.rs` checks both against whole-text counts, and the report against
//! [`report_events`](crate::compile::report_events), after every append on the corpus).
//!
//! ```
//! use ctxgc_core::frontend::events::{lower_events, EventOptions};
//! use ctxgc_core::live_report::LiveReport;
//! use ctxgc_core::{compile::report_events, Session, Tokenizer};
//! let lines = [
//!     r#"{"id":"a","type":"set_var","timestamp":1,"key":"x","value":1}"#,
//!     r#"{"id":"b","type":"set_var","timestamp":2,"key":"x","value":2}"#,
//! ];
//! let mut session = Session::new(Default::default());
//! let mut live = LiveReport::new(Tokenizer::O200kBase);
//! for line in lines {
//!     session.extend(lower_events(line, &EventOptions::default()).unwrap()).unwrap();
//!     session.compile();
//!     let changes = session.take_changes();
//!     live.update(&session, changes);
//! }
//! let whole = report_events(&session, Tokenizer::O200kBase);
//! assert_eq!(live.prompt(), whole.output);
//! assert_eq!((live.tokens_before(), live.tokens_after()), (whole.tokens_before, whole.tokens_after));
//! assert_eq!(live.decisions()[0].reason.unwrap().code(), "superseded-var");
//! ```

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::compile::{Compiled, Receipt};
use crate::formats::Format;
use crate::ir::Kind;
use crate::plan::{Action, Decision};
use crate::render::prompt::{self, Layout, Slot};
use crate::session::{ItemPlan, Session};
use crate::tokens::Tokenizer;

/// A stub line written for a layout: what decided its text, the text, its tokens.
#[derive(Debug, Clone)]
struct Stub {
    key: Vec<usize>,
    line: String,
    tokens: usize,
}

/// The report of a live event session, kept up to date by [`LiveReport::update`].
#[derive(Debug, Clone)]
pub struct LiveReport {
    tokenizer: Tokenizer,
    plans: Vec<ItemPlan>,
    decisions: Vec<Decision>,
    /// Tokens a withheld lossy rewrite of each item would save (0 for a retired item).
    withheld: Vec<usize>,
    /// Exact tokens of each item's uncompacted line (0 for an edge injection: not a line).
    before: Vec<usize>,
    /// Each sent item's line and its tokens, once written; `None` for a retired item, or one
    /// whose plan moved since.
    sent: Vec<Option<(String, usize)>>,
    /// BLAKE3 of each item's original text, once a receipt needed it (the text never changes).
    hashes: Vec<Option<String>>,
    /// The stub lines of the last layout, by their first member.
    stubs: HashMap<usize, Stub>,
    tokens_before: usize,
    tokens_after: usize,
    prompt: Arc<String>,
    /// Positions whose decision changed at the last update; `None`: every one may have.
    changed: Option<Vec<usize>>,
}

impl LiveReport {
    /// An empty report; the first [`LiveReport::update`] fills it in for the whole session.
    pub fn new(tokenizer: Tokenizer) -> Self {
        LiveReport {
            tokenizer,
            plans: Vec::new(),
            decisions: Vec::new(),
            withheld: Vec::new(),
            before: Vec::new(),
            sent: Vec::new(),
            hashes: Vec::new(),
            stubs: HashMap::default(),
            tokens_before: 0,
            tokens_after: 0,
            prompt: Arc::default(),
            changed: None,
        }
    }

    /// Brings the report up to date with the compiled session (call after
    /// [`Session::compile`], with what [`Session::take_changes`] gives: `None` updates every
    /// item). It costs in proportion to the items whose plan may have moved, plus one pass over
    /// the prompt's lines to lay them out and join them.
    pub fn update(&mut self, session: &Session, changes: Option<Vec<usize>>) {
        let n = session.items().len();
        let all = changes.is_none() || n < self.plans.len();
        let changed: Vec<usize> = match changes {
            Some(list) if !all => {
                // Items appended but not yet compiled have no plan to report yet; compiling is
                // the caller's, so they are reported as they are now.
                let mut list: Vec<usize> = list.into_iter().filter(|&i| i < n).collect();
                list.extend(self.plans.len()..n);
                list.sort_unstable();
                list.dedup();
                list
            }
            _ => {
                self.plans.clear();
                self.decisions.clear();
                self.withheld.clear();
                self.before.clear();
                self.sent.clear();
                self.hashes.clear();
                self.tokens_before = 0;
                (0..n).collect()
            }
        };
        let fresh = self.plans.len();
        let items = session.items();
        for item in &items[fresh..n] {
            let tokens = match item.kind {
                Kind::EdgeInjection { .. } => 0,
                _ => self.tokenizer.count(&prompt::event_line(item)),
            };
            self.before.push(tokens);
            self.tokens_before += tokens;
        }
        self.plans.resize_with(n, ItemPlan::default);
        self.decisions.resize_with(n, || Decision {
            id: String::new(),
            action: Action::Keep,
            reason: None,
            by: Vec::new(),
            note: None,
        });
        self.withheld.resize(n, 0);
        self.sent.resize(n, None);
        self.hashes.resize(n, None);
        for &i in &changed {
            let plan = session.plan_of(i);
            self.decisions[i] = session.decision_of(i, &plan);
            self.withheld[i] = if plan.action() == Action::Retire {
                0
            } else {
                session.withheld_of(i)
            };
            self.plans[i] = plan;
            self.sent[i] = None;
        }
        // The common step of a loop: the new items are sent as they are and changed nothing
        // before them, so the prompt only grows by their lines.
        let appended_only = !all
            && fresh > 0
            && changed.first().is_none_or(|&i| i >= fresh)
            && (fresh..n).all(|i| {
                self.plans[i].action() == Action::Keep
                    || matches!(items[i].kind, Kind::EdgeInjection { .. })
            })
            && session.renders_last(fresh);
        self.changed = (!all).then_some(changed);
        if appended_only {
            let prompt = Arc::make_mut(&mut self.prompt);
            for (i, item) in items.iter().enumerate().take(n).skip(fresh) {
                if matches!(item.kind, Kind::EdgeInjection { .. }) {
                    continue;
                }
                let line = prompt::event_line(item);
                prompt.push_str(&line);
                self.tokens_after += self.before[i];
                self.sent[i] = Some((line, self.before[i]));
            }
        } else {
            self.lay_out(session);
        }
    }

    /// Lays the prompt out from the plans, writing and counting only the lines it lacks.
    fn lay_out(&mut self, session: &Session) {
        let items = session.items();
        let layout = Layout::of(session, &self.plans);
        let mut stubs: HashMap<usize, Stub> = HashMap::default();
        let mut key = Vec::new();
        let mut bytes = 0;
        let mut tokens_after = 0;
        for slot in &layout.slots {
            match slot {
                Slot::Line(i) => {
                    let (line, tokens) = self.sent[*i].get_or_insert_with(|| {
                        let plan = &self.plans[*i];
                        let line = prompt::sent_line(session, *i, plan);
                        // Only a rewrite sends other text than the uncompacted line.
                        let tokens = if plan.action() == Action::Rewrite {
                            self.tokenizer.count(&line)
                        } else {
                            self.before[*i]
                        };
                        (line, tokens)
                    });
                    bytes += line.len();
                    tokens_after += *tokens;
                }
                Slot::Stub(_, groups) => {
                    // A stub line is known by its first member; it is written again only when
                    // what decides its text changed.
                    let anchor = layout.first_member(groups);
                    layout.stub_key(groups, &mut key);
                    let stub = match self.stubs.remove(&anchor) {
                        Some(stub) if stub.key == key => stub,
                        _ => {
                            let line = layout.stub_line(items, groups);
                            let tokens = self.tokenizer.count(&line);
                            Stub {
                                key: key.clone(),
                                line,
                                tokens,
                            }
                        }
                    };
                    bytes += stub.line.len();
                    tokens_after += stub.tokens;
                    stubs.insert(anchor, stub);
                }
            }
        }
        let mut prompt = String::with_capacity(bytes);
        for slot in &layout.slots {
            match slot {
                Slot::Line(i) => {
                    if let Some((line, _)) = &self.sent[*i] {
                        prompt.push_str(line);
                    }
                }
                Slot::Stub(_, groups) => {
                    if let Some(stub) = stubs.get(&layout.first_member(groups)) {
                        prompt.push_str(&stub.line);
                    }
                }
            }
        }
        self.prompt = Arc::new(prompt);
        self.tokens_after = tokens_after;
        self.stubs = stubs;
    }

    /// The compacted prompt, as [`prompt::render`] writes it.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// [`LiveReport::prompt`], shared: what a caller that hands the text on keeps without
    /// copying it.
    pub fn shared_prompt(&self) -> Arc<String> {
        Arc::clone(&self.prompt)
    }

    /// Exact tokens of the trace rendered without compaction.
    pub fn tokens_before(&self) -> usize {
        self.tokens_before
    }

    /// Exact tokens of [`LiveReport::prompt`].
    pub fn tokens_after(&self) -> usize {
        self.tokens_after
    }

    /// The tokenizer that counts.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// Every item's plan, in input order.
    pub fn plans(&self) -> &[ItemPlan] {
        &self.plans
    }

    /// Every item's decision, in input order.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// The positions whose decision may have changed at the last update, sorted (new items
    /// included); `None` when it was a first or full update.
    pub fn changed(&self) -> Option<&[usize]> {
        self.changed.as_deref()
    }

    /// Tokens that withheld lossy rewrites would have saved, over the items still sent.
    pub fn would_save_tokens(&self) -> usize {
        self.withheld.iter().sum()
    }

    /// The receipt of item `i`, when it was retired or rewritten.
    pub fn receipt(&mut self, session: &Session, i: usize) -> Option<Receipt> {
        let decision = self.decisions.get(i)?;
        if decision.action == Action::Keep {
            return None;
        }
        let reason = decision.reason?;
        let raw = &session.items().get(i)?.raw;
        let hash = self.hashes[i]
            .get_or_insert_with(|| blake3::hash(raw.as_bytes()).to_hex().to_string())
            .clone();
        Some(Receipt {
            id: decision.id.clone(),
            action: decision.action,
            reason,
            by: decision.by.clone(),
            hash,
            bytes: raw.len(),
        })
    }

    /// The whole report, as [`crate::compile::report_events`] gives it for the session.
    pub fn compiled(&mut self, session: &Session) -> Compiled {
        let receipts = (0..self.decisions.len())
            .filter_map(|i| self.receipt(session, i))
            .collect();
        Compiled {
            format: Format::Events,
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            would_save_tokens: self.would_save_tokens(),
            output: self.prompt.to_string(),
            tokenizer: self.tokenizer.name(),
            decisions: self.decisions.clone(),
            receipts,
            warnings: session.warnings().to_vec(),
            chat: None,
            records: Vec::new(),
        }
    }
}
