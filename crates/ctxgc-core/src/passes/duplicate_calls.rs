//! `duplicate-call`: retires a tool call and result identical to an earlier surviving pair.
//!
//! **What.** A later `tool_call` + `tool_result` pair with the same tool name, the same
//! arguments and the same result as an earlier pair that survives is retired, both halves
//! together; its receipt points at the earlier call. Arguments and results are compared as
//! JSON values (key order and spacing do not matter).
//!
//! **Why it is safe.** The earlier pair says everything the later one says. If the earlier
//! pair is itself retired (say, inside an abandoned branch), the first surviving twin is the
//! one kept. A call whose result differs is not a duplicate: the world changed.
//!
//! **Example.**
//! ```text
//! before: [e06] call get_user({"id":7})  [e07] result of e06: {"name":"Ada"}
//!         [e11] call get_user({"id":7})  [e12] result of e11: {"name":"Ada"}
//! after:  ... [receipts e11 e12: duplicate of e06]
//! ```
//!
//! **Code.** `duplicate-call`.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::ir::canonical_json;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::DuplicateCall],
    summary: "retires a tool call + result pair identical to an earlier surviving pair",
    doc: include_str!("duplicate_calls.rs"),
};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Twins {
    /// `(call, result)` pairs, in order of the result.
    pairs: Vec<(usize, usize)>,
    /// Index into `pairs` of the first surviving pair.
    first: Option<usize>,
}

/// State: pairs grouped by signature (tool, arguments, result).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DuplicateCalls {
    groups: HashMap<String, Twins>,
    /// For each call or result in a group: its signature and position in the group.
    member: HashMap<usize, (String, usize)>,
}

impl Pass for DuplicateCalls {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let mut dirty: BTreeSet<String> = BTreeSet::new();
        for r in new {
            let Some(out) = cx.items[r].as_result() else {
                continue;
            };
            let Some(c) = cx.resolve(&out.call_id) else {
                continue;
            };
            let Some(call) = cx.items[c].as_call() else {
                continue;
            };
            if self.member.contains_key(&c) {
                continue; // a second result for one call: only the first pairs up
            }
            let mut hasher = blake3::Hasher::new();
            for part in [
                call.name.as_str(),
                &canonical_json(&call.arguments),
                &canonical_json(&out.output),
            ] {
                hasher.update(&(part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
            let sig = hasher.finalize().to_hex().to_string();
            let group = self.groups.entry(sig.clone()).or_default();
            let pos = group.pairs.len();
            group.pairs.push((c, r));
            self.member.insert(c, (sig.clone(), pos));
            self.member.insert(r, (sig.clone(), pos));
            dirty.insert(sig);
        }
        let mut moved = Vec::new();
        for i in changed {
            if let Some((sig, pos)) = self.member.get(i) {
                dirty.insert(sig.clone());
                // Both halves of a pair are retired only while both survive.
                if let Some(&(c, r)) = self.groups.get(sig).and_then(|g| g.pairs.get(*pos)) {
                    moved.extend([c, r]);
                }
            }
        }
        for sig in dirty {
            if let Some(group) = self.groups.get_mut(&sig) {
                let first = group
                    .pairs
                    .iter()
                    .position(|&(c, r)| cx.survives(c) && cx.survives(r));
                // Every later pair names the first surviving one.
                if first != group.first {
                    moved.extend(group.pairs.iter().flat_map(|&(c, r)| [c, r]));
                }
                group.first = first;
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (sig, pos) = self.member.get(&i)?;
        let group = self.groups.get(sig)?;
        let first = group.first?;
        let (c, r) = group.pairs[*pos];
        let (fc, fr) = group.pairs[first];
        (first < *pos && cx.survives(c) && cx.survives(r))
            .then(|| Verdict::retire(Reason::DuplicateCall, vec![fc, fr]))
    }
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
}
