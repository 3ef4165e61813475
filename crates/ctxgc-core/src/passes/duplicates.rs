//! `duplicate-call` and `duplicate-result`: a call answered exactly as it was answered just
//! before says nothing new, so it points at the earlier answer instead of repeating it.
//!
//! **What.** A tool result *repeats* when the same call (the same tool name and arguments,
//! compared as canonical JSON) was answered before with an identical output (compared as
//! JSON values), and every answer to that call in between, if any, was identical too: the
//! repeats of one answer form a run, and each later member of the run points at its first.
//! What becomes of a repeat depends on where the IR holds it:
//! - a `tool_call` event and its `tool_result` event are items of their own: both are retired
//!   (`duplicate-call`), the receipt naming the first call and result of the run;
//! - a result block of a chat message must stay, answering its call: it is rewritten to
//!   `[ctxgc: same output as the identical call answered in m7]` (`duplicate-result`), when
//!   that stub costs fewer tokens than the output and the preset stubs duplicates.
//!
//! **Why it is safe.** The first answer of the run is still there, word for word, and nothing
//! after it said otherwise, which is why this pass runs in the lossless preset. Only
//! surviving answers count: if the first of a run is retired (say, inside an abandoned
//! branch), the next surviving member is the one kept. An answer that differs breaks the run,
//! even if a later one matches an answer before it: in `x`, `y`, `x` the last `x` is the
//! current state, and pointing it at the first would leave `y` looking current. Error
//! outputs repeat like any other (the stub names the identical error, never saying it was
//! resolved). Outputs of `--keep-tool` tools and of the recall tool are never touched, and
//! a stub or note an earlier compile wrote is never a twin and ends the run.
//!
//! **Example.**
//! ```text
//! events: [e06] call get_user({"id":7})  [e07] result of e06: {"name":"Ada"}
//!         [e11] call get_user({"id":7})  [e12] result of e11: {"name":"Ada"}
//!  after: ... [receipts e11 e12: duplicate of e06, e07]
//!
//!   chat: m5 tool (get_user {"id":7}) {"name":"Ada",...}   m9 tool (get_user {"id":7}) {"name":"Ada",...}
//!  after: m5 kept   m9 "[ctxgc: same output as the identical call answered in m5]"
//! ```
//!
//! **Codes.** `duplicate-call` (events), `duplicate-result` (chat messages).

use std::collections::BTreeSet;
use std::ops::Range;

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Deserializer, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::pairing::{OutputHash, ResultView, Slot};
use crate::ir::Kind;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::DuplicateCall, Reason::DuplicateResult],
    summary: "a result identical to the previous answer to the same call points at it: an event pair is retired, a chat result stubbed",
    doc: include_str!("duplicates.rs"),
};

/// One answer to a call.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    call: Slot,
    result: Slot,
    /// Hash of the output; `None` for a stub or note ctxgc wrote, which repeats nothing and
    /// ends the run.
    hash: Option<OutputHash>,
    /// The call and the result are items of their own (`tool_call` / `tool_result` events),
    /// retired together; otherwise the result is a block, stubbed.
    events: bool,
    /// The first answer of its run (an index into the group), when it is not its own first.
    repeats: Option<usize>,
    /// The stub of a chat result that repeats, when it costs fewer tokens than the output.
    stub: Option<String>,
}

/// Every answer to one call (tool name and canonical arguments), in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Group {
    answers: Vec<Answer>,
    /// The run a new answer may join: the hash and first answer of the last surviving one.
    tail: Option<(OutputHash, usize)>,
}

/// State: answers grouped by call, and for each item the answers it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Duplicates {
    config: ChatConfig,
    /// Group of each call signature.
    group_of: HashMap<String, usize>,
    groups: Vec<Group>,
    /// item → (group, answer) for each call or result it holds that belongs to a group.
    #[serde(with = "crate::chat::position_map")]
    member: HashMap<usize, Vec<(usize, usize)>>,
    /// Items taken into account: `0..seen`. A pass loaded from an earlier version's state
    /// starts at 0 and catches up on its next update.
    seen: usize,
}

impl Duplicates {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        Duplicates {
            config,
            ..Default::default()
        }
    }

    /// Takes the results of item `i` into account.
    /// Adds item `i`'s results; returns the call items (earlier ones) they made members too,
    /// whose plans move with them.
    fn add(&mut self, cx: &Cx<'_>, i: usize) -> Vec<usize> {
        let mut calls = Vec::new();
        for r in cx.results(i) {
            if self.config.tool_protected(&r.call.name) {
                continue;
            }
            let g = match self.group_of.get(&r.call.signature) {
                Some(&g) => g,
                None => {
                    self.groups.push(Group::default());
                    self.group_of
                        .insert(r.call.signature.clone(), self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            let events = matches!(cx.items[i].kind, Kind::ToolResult(_))
                && matches!(cx.items[r.call.slot.item].kind, Kind::ToolCall(_));
            // An event trace's outputs come from its tools, never from a compile.
            let written = !events && r.written_by_ctxgc();
            let hash = (!written).then(|| r.output_hash());
            let group = &mut self.groups[g];
            let k = group.answers.len();
            let mut answer = Answer {
                call: r.call.slot,
                result: r.slot,
                hash,
                events,
                repeats: None,
                stub: None,
            };
            if answer.survives(cx) {
                answer.repeats = group.join(k, answer.hash);
                if let Some(first) = answer.repeats.filter(|_| !events) {
                    answer.stub = stub_for(&self.config, cx, &r, group.answers[first].result);
                }
            }
            group.answers.push(answer);
            self.member.entry(i).or_default().push((g, k));
            if events {
                self.member
                    .entry(r.call.slot.item)
                    .or_default()
                    .push((g, k));
                calls.push(r.call.slot.item);
            }
        }
        calls
    }

    /// Recomputes the runs of group `g` over its surviving answers (survival moved); returns
    /// the items of the answers whose run changed.
    fn rerun(&mut self, cx: &Cx<'_>, g: usize) -> Vec<usize> {
        let group = &mut self.groups[g];
        group.tail = None;
        let mut moved = Vec::new();
        for k in 0..group.answers.len() {
            let answer = &group.answers[k];
            let repeats = if answer.survives(cx) {
                let hash = answer.hash;
                group.join(k, hash)
            } else {
                None
            };
            let answer = &group.answers[k];
            if repeats == answer.repeats {
                continue;
            }
            let stub = repeats.filter(|_| !answer.events).and_then(|first| {
                let first = group.answers[first].result;
                let result = answer.result;
                cx.results(result.item)
                    .into_iter()
                    .find(|r| r.slot == result)
                    .and_then(|r| stub_for(&self.config, cx, &r, first))
            });
            let answer = &mut group.answers[k];
            moved.push(answer.result.item);
            if answer.events {
                moved.push(answer.call.item);
            }
            answer.repeats = repeats;
            answer.stub = stub;
        }
        moved
    }
}

impl Answer {
    fn survives(&self, cx: &Cx<'_>) -> bool {
        cx.survives(self.call.item) && cx.survives(self.result.item)
    }
}

impl Group {
    /// Answer `k` (surviving, output `hash`) follows the current tail: the first answer of
    /// the run it joins, when that is not itself.
    fn join(&mut self, k: usize, hash: Option<OutputHash>) -> Option<usize> {
        let Some(hash) = hash else {
            self.tail = None;
            return None;
        };
        match &self.tail {
            Some((tail, first)) if *tail == hash => Some(*first),
            _ => {
                self.tail = Some((hash, k));
                None
            }
        }
    }
}

/// The stub of chat result `r` repeating the answer at `first`, when the preset stubs
/// repeats, the output is text and the stub is shorter.
fn stub_for(config: &ChatConfig, cx: &Cx<'_>, r: &ResultView<'_>, first: Slot) -> Option<String> {
    if !config.stub_duplicate_results || r.text().is_none() {
        return None;
    }
    let stub = format!(
        "[ctxgc: same output as the identical call answered in {}]",
        cx.items[first.item].id
    );
    (config.tokenizer.count(&stub) < r.tokens(config.tokenizer)).then_some(stub)
}

impl Pass for Duplicates {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        // A pass loaded from an earlier version's state has not seen the items before `new`.
        let taken = super::pass::catch_up(&mut self.seen, &new);
        let mut moved: Vec<usize> = Vec::new();
        for i in taken.clone() {
            let calls = self.add(cx, i);
            moved.extend(calls.into_iter().filter(|&c| c < new.start));
        }
        if taken.start < new.start {
            moved.extend(self.member.keys().copied().filter(|&i| i < new.start));
        }
        let dirty: BTreeSet<usize> = changed
            .iter()
            .filter_map(|i| self.member.get(i))
            .flatten()
            .map(|&(g, _)| g)
            .collect();
        for g in dirty {
            moved.extend(self.rerun(cx, g));
        }
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let mut rewrites = Vec::new();
        let mut by = Vec::new();
        for &(g, k) in self.member.get(&i)? {
            let group = &self.groups[g];
            let answer = &group.answers[k];
            let Some(first) = answer.repeats.map(|f| &group.answers[f]) else {
                continue;
            };
            if !answer.survives(cx) || !first.survives(cx) {
                continue;
            }
            if answer.events {
                return Some(Verdict::retire(
                    Reason::DuplicateCall,
                    vec![first.call.item, first.result.item],
                ));
            }
            if let Some(stub) = &answer.stub {
                rewrites.push(BlockRewrite {
                    block: answer.result.block,
                    text: stub.clone(),
                });
                by.push(first.result.item);
            }
        }
        if rewrites.is_empty() {
            return None;
        }
        by.dedup();
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::DuplicateResult,
            by,
            rewrites,
            note: None,
        })
    }
}

/// Reads the state an earlier version stored for `duplicate-result` (chat): its
/// configuration is kept, the rest is rebuilt from the items at the next update.
pub(crate) fn from_duplicate_result<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duplicates, D::Error> {
    #[derive(Deserialize)]
    struct Stored {
        config: ChatConfig,
    }
    Stored::deserialize(deserializer).map(|stored| Duplicates::new(stored.config))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn identical_pair_retired_pointing_at_the_first() {
        let out = run(&[
            json!({"id": "c1", "type": "tool_call", "tool_name": "get", "arguments": {"a": 1, "b": 2}}),
            json!({"id": "r1", "type": "tool_result", "call_id": "c1", "result": {"v": "x"}}),
            json!({"id": "c2", "type": "tool_call", "tool_name": "get", "arguments": {"b": 2, "a": 1}}),
            json!({"id": "r2", "type": "tool_result", "call_id": "c2", "result": {"v": "x"}}),
        ]);
        assert!(out.retired("c2", Reason::DuplicateCall, &["c1", "r1"]));
        assert!(out.retired("r2", Reason::DuplicateCall, &["c1", "r1"]));
        assert!(out.kept("c1") && out.kept("r1"));
    }

    #[test]
    fn different_result_is_not_a_duplicate() {
        let out = run(&[
            json!({"id": "c1", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r1", "type": "tool_result", "call_id": "c1", "result": "old"}),
            json!({"id": "c2", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r2", "type": "tool_result", "call_id": "c2", "result": "new"}),
        ]);
        assert!(out.kept("c2") && out.kept("r2"));
    }

    #[test]
    fn an_answer_that_came_back_after_a_different_one_is_current_and_kept() {
        let out = run(&[
            json!({"id": "c1", "type": "tool_call", "tool_name": "status", "arguments": {}}),
            json!({"id": "r1", "type": "tool_result", "call_id": "c1", "result": "up"}),
            json!({"id": "c2", "type": "tool_call", "tool_name": "status", "arguments": {}}),
            json!({"id": "r2", "type": "tool_result", "call_id": "c2", "result": "down"}),
            json!({"id": "c3", "type": "tool_call", "tool_name": "status", "arguments": {}}),
            json!({"id": "r3", "type": "tool_result", "call_id": "c3", "result": "up"}),
            json!({"id": "c4", "type": "tool_call", "tool_name": "status", "arguments": {}}),
            json!({"id": "r4", "type": "tool_result", "call_id": "c4", "result": "up"}),
        ]);
        for id in ["c1", "r1", "c2", "r2", "c3", "r3"] {
            assert!(out.kept(id), "{id} is kept");
        }
        assert!(out.retired("r4", Reason::DuplicateCall, &["c3", "r3"]));
    }

    #[test]
    fn first_surviving_twin_is_kept_when_the_first_is_dead() {
        let out = run(&[
            json!({"id": "b", "type": "decision", "content": "branch"}),
            json!({"id": "c1", "type": "tool_call", "parent_id": "b", "tool_name": "get", "arguments": {}}),
            json!({"id": "r1", "type": "tool_result", "parent_id": "c1", "call_id": "c1", "result": "x"}),
            json!({"id": "ab", "type": "abandon", "parent_id": "r1", "ref_to": ["b"]}),
            json!({"id": "c2", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r2", "type": "tool_result", "call_id": "c2", "result": "x"}),
            json!({"id": "c3", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r3", "type": "tool_result", "call_id": "c3", "result": "x"}),
        ]);
        assert!(out.kept("c2") && out.kept("r2"));
        assert!(out.retired("r3", Reason::DuplicateCall, &["c2", "r2"]));
    }

    #[test]
    fn an_abandoned_answer_in_between_does_not_break_the_run() {
        let out = run(&[
            json!({"id": "c1", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r1", "type": "tool_result", "call_id": "c1", "result": "x"}),
            json!({"id": "b", "type": "decision", "content": "try another way"}),
            json!({"id": "c2", "type": "tool_call", "parent_id": "b", "tool_name": "get", "arguments": {}}),
            json!({"id": "r2", "type": "tool_result", "parent_id": "c2", "call_id": "c2", "result": "y"}),
            json!({"id": "ab", "type": "abandon", "parent_id": "r2", "ref_to": ["b"]}),
            json!({"id": "c3", "type": "tool_call", "tool_name": "get", "arguments": {}}),
            json!({"id": "r3", "type": "tool_result", "call_id": "c3", "result": "x"}),
        ]);
        assert!(out.kept("c1") && out.kept("r1"));
        assert!(out.retired("c3", Reason::DuplicateCall, &["c1", "r1"]));
    }
}
