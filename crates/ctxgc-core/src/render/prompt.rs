//! The prompt-text back-end for event traces: one line per kept event, receipt stubs for
//! retired ones.
//!
//! Stubs are grouped so that they cost less than what they replace: every retired item with
//! the same reason and the same justification shares one stub, placed where the first of them
//! was, and stubs with nothing kept between them share one line:
//! `[receipts e02 e04: superseded by e09; a01 a02: inside branch abandoned by ab01]`.
//! Every event starts a line with `[`; continuation lines of multi-line content are indented.
//!
//! In cache-stable mode grouping must never rewrite text already sent: a decision taken when
//! its item arrived gets a stub of its own, and a compaction step groups only what that step
//! changed, so between steps every output is a byte-identical prefix of the next.

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;

use crate::ir::{Item, Kind, plain_value};
use crate::plan::{Action, Reason};
use crate::session::{DecisionEpoch, ItemPlan, Session};

/// One line of a rendered event, without the receipt logic.
pub fn event_line(item: &Item) -> String {
    let mut line = format!("[{}] ", item.id);
    match &item.kind {
        Kind::SetVar { key, value } => {
            let _ = write!(line, "{key} = {}", plain_value(value));
        }
        Kind::ToolCall(call) => {
            let _ = write!(line, "call {}({})", call.name, call.arguments);
        }
        Kind::ToolResult(out) => {
            let _ = write!(
                line,
                "result of {}: {}",
                out.call_id,
                plain_value(&out.output)
            );
        }
        Kind::Abandon { targets } => {
            let _ = write!(line, "abandon {}", targets.join(" "));
        }
        Kind::Note { note, content, .. } => {
            let _ = write!(line, "{}: {content}", note.name());
        }
        Kind::FileRead { path } => {
            let _ = write!(line, "read {path}");
        }
        Kind::FileEdit { path, diff_hash } => {
            let _ = write!(line, "edit {path} ({diff_hash})");
        }
        Kind::Run(run) => {
            let prefix = match run.run {
                crate::ir::RunKind::Command => "$ ",
                crate::ir::RunKind::Verification => "verify: ",
                _ => "",
            };
            let _ = write!(line, "{prefix}{} → {}", run.subject, run.outcome);
        }
        Kind::GitDiff {
            diff_hash,
            files_changed,
        } => {
            let _ = write!(line, "git diff {} ({diff_hash})", files_changed.join(" "));
        }
        Kind::GitCommit {
            commit_hash,
            message,
        } => {
            let _ = write!(line, "commit {commit_hash}: {message}");
        }
        Kind::Error {
            message,
            related_to,
        } => {
            let _ = write!(line, "error: {message}");
            if let Some(cause) = related_to {
                let _ = write!(line, " (cause {cause})");
            }
        }
        Kind::Artifact {
            artifact_type,
            path,
        } => {
            let _ = write!(line, "artifact {artifact_type} {path}");
        }
        Kind::EdgeInjection { src, dst } => {
            let _ = write!(line, "edge {src} → {dst}");
        }
        Kind::Message(_) => line.push_str("message"),
        Kind::Opaque { type_name } => {
            let _ = write!(line, "{type_name}");
        }
    }
    if let Some(extra) = &item.extra {
        let _ = write!(line, " {extra}");
    }
    // Continuation lines of multi-line content are indented so each event stays one block.
    if line.contains('\n') {
        line = line.trim_end_matches('\n').replace('\n', "\n  ");
    }
    line.push('\n');
    line
}

/// The line of item `i` as sent: a rewritten tool result carries its new output.
pub fn sent_line(session: &Session, i: usize, plan: &ItemPlan) -> String {
    let item = &session.items()[i];
    let rewrite = plan
        .verdict
        .as_ref()
        .filter(|v| v.action == Action::Rewrite)
        .and_then(|v| v.rewrites.iter().find(|r| r.block == 0));
    match (&item.kind, rewrite) {
        (Kind::ToolResult(out), Some(rewrite)) => {
            let mut sent = item.clone();
            sent.kind = Kind::ToolResult(crate::ir::ToolOutput {
                output: serde_json::Value::String(rewrite.text.clone()),
                ..out.clone()
            });
            event_line(&sent)
        }
        _ => event_line(item),
    }
}

/// Words for a reason in a stub, given the ids that justify it.
fn reason_phrase(reason: Reason, by: &[String]) -> String {
    let by = by.join(" ");
    match reason {
        Reason::DeadBranch => format!("inside branch abandoned by {by}"),
        Reason::Cycle => "cycle collapsed".to_owned(),
        Reason::SupersededVar => format!("superseded by {by}"),
        Reason::DuplicateCall => format!("duplicate of {by}"),
        Reason::StaleRead => format!("stale after edit {by}"),
        Reason::RepeatedRun => format!("repeated by {by}"),
        Reason::ResolvedError => format!("resolved by {by}"),
        Reason::ReplacedNote => format!("replaced by {by}"),
        other if by.is_empty() => other.code().to_owned(),
        other => format!("{} ({by})", other.code()),
    }
}

/// The stub line of item `i` retired by `verdict` when it shares its stub with nothing: what a
/// decision taken on arrival costs in cache-stable mode.
pub fn lone_stub(session: &Session, i: usize, verdict: &crate::plan::Verdict) -> String {
    let items = session.items();
    let by: Vec<String> = verdict.by.iter().map(|&b| items[b].id.clone()).collect();
    format!(
        "[receipt {}: {}]\n",
        items[i].id,
        reason_phrase(verdict.reason, &by)
    )
}

/// The rendered prompt and the lines it is made of.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The whole text.
    pub text: String,
    /// Its blocks (one per kept event or stub line, each ending in a newline).
    pub lines: Vec<String>,
}

/// One line of the prompt: a kept (or rewritten) item's, or a stub line for retired ones.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// Item `.0`, sent.
    Line(usize),
    /// Stub groups of one epoch sharing a line (indexes into [`Layout::groups`]).
    Stub(DecisionEpoch, Vec<usize>),
}

/// The key stubs are grouped by: one stub per reason and justification (the positions of the
/// items that justify it; ids are unique, so positions group as ids would), within one epoch.
type GroupKey<'p> = (Reason, &'p [usize], DecisionEpoch);

/// One stub group: its reason, the positions of the items that justify it and the positions
/// of its members.
type Group = (Reason, Vec<usize>, Vec<usize>);

/// The prompt's lines and stub groups, before any text is written: what [`render_planned`]
/// writes, and what a live session that keeps its lines between compiles lays out again.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// The lines, in prompt order.
    pub slots: Vec<Slot>,
    groups: Vec<Group>,
}

impl Layout {
    /// Lays out the compiled session from its plans ([`Session::plans`]).
    pub fn of(session: &Session, plans: &[ItemPlan]) -> Layout {
        let items = session.items();
        let order = session.render_order();
        let mut slots: Vec<Slot> = Vec::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of: HashMap<GroupKey<'_>, usize> = HashMap::default();
        for &i in &order {
            if matches!(items[i].kind, Kind::EdgeInjection { .. }) {
                continue; // structure, not content
            }
            let Some(verdict) = plans[i]
                .verdict
                .as_ref()
                .filter(|v| v.action == Action::Retire)
            else {
                slots.push(Slot::Line(i));
                continue;
            };
            let epoch = session.decision_epoch(i);
            let key = (verdict.reason, verdict.by.as_slice(), epoch);
            if let Some(&g) = group_of.get(&key) {
                groups[g].2.push(i);
                continue;
            }
            let g = groups.len();
            group_of.insert(key, g);
            groups.push((verdict.reason, verdict.by.clone(), vec![i]));
            let shares_line = |last: &DecisionEpoch| {
                *last == epoch && !matches!(epoch, DecisionEpoch::Arrival(_))
            };
            match slots.last_mut() {
                Some(Slot::Stub(last, gs)) if shares_line(last) => gs.push(g),
                _ => slots.push(Slot::Stub(epoch, vec![g])),
            }
        }
        Layout { slots, groups }
    }

    /// The first member of a stub line's first group: its place in the prompt.
    pub fn first_member(&self, gs: &[usize]) -> usize {
        gs.first()
            .and_then(|&g| self.groups[g].2.first())
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// What decides a stub line's text, as numbers (reason, justification and members of each
    /// of its groups), written into `key`: two lines with equal keys have equal texts.
    pub fn stub_key(&self, gs: &[usize], key: &mut Vec<usize>) {
        key.clear();
        for &g in gs {
            let (reason, by, members) = &self.groups[g];
            key.push(*reason as usize);
            key.push(by.len());
            key.extend_from_slice(by);
            key.push(members.len());
            key.extend_from_slice(members);
        }
    }

    /// The text of a stub line (its groups, `gs`), newline included.
    pub fn stub_line(&self, items: &[Item], gs: &[usize]) -> String {
        let count: usize = gs.iter().map(|&g| self.groups[g].2.len()).sum();
        let parts: Vec<String> = gs
            .iter()
            .map(|&g| {
                let (reason, by, members) = &self.groups[g];
                let mut part = String::new();
                for (n, &m) in members.iter().enumerate() {
                    if n > 0 {
                        part.push(' ');
                    }
                    part.push_str(&items[m].id);
                }
                let by: Vec<String> = by.iter().map(|&b| items[b].id.clone()).collect();
                let _ = write!(part, ": {}", reason_phrase(*reason, &by));
                part
            })
            .collect();
        let word = if count == 1 { "receipt" } else { "receipts" };
        format!("[{word} {}]\n", parts.join("; "))
    }
}

/// Renders the compiled session: kept events as lines, retired ones as grouped stubs.
pub fn render(session: &Session) -> Rendered {
    render_planned(session, &session.plans())
}

/// What writing one line costs, in the bytes-of-JSON units [`crate::parallel`] sizes its
/// threads by (an event line is formatted field by field).
const LINE_WORK_BYTES: usize = 64;

/// [`render`] with the plans already taken ([`Session::plans`]), for a caller that also
/// reports them.
pub fn render_planned(session: &Session, plans: &[ItemPlan]) -> Rendered {
    let layout = Layout::of(session, plans);
    // Each line is written on its own, so a long trace writes its lines on every core.
    let work = layout.slots.len() * LINE_WORK_BYTES;
    let lines = crate::parallel::map_in_order(&layout.slots, work, |_, slot| match slot {
        Slot::Line(i) => sent_line(session, *i, &plans[*i]),
        Slot::Stub(_, gs) => layout.stub_line(session.items(), gs),
    });
    let text = lines.concat();
    Rendered { text, lines }
}
