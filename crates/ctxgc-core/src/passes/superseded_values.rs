//! `superseded-var` and `superseded-fact`: a value that a later value of the same key
//! replaced is retired, with the item that wrote it, once that item says nothing else live.
//!
//! **What.** Items write values to keys: a `set_var` event writes one key of the trace's
//! state; an assistant turn declares facts in `<contextgc-state>` blocks (assert, pin, revoke,
//! unsure; see [`crate::chat::state`]), several keys at once. An item is retired when every
//! key it wrote has a later *surviving* confident write (anything but `unsure`; a revoke
//! counts) in another item; the receipt names those items.
//! - `superseded-var`: a `set_var` whose key was set again later. Keys are compared exactly:
//!   `port` and `db.port` are different keys, and no pass infers a key from prose.
//! - `superseded-fact`: an assistant turn all of whose declared facts were replaced or
//!   revoked (keys normalised as the state blocks define). Off in the lossless preset.
//!
//! **Why it is safe.** A key has one current value; older ones only compete with it.
//! Support-aware: an item superseded for one key but still the newest support of another
//! stays, so no live value is left without an item behind it (for chats, the orphan check in
//! the report proves it). "Surviving" matters: if the latest value was set inside an abandoned
//! branch, the value before it is live again. Only assistant turns are ever retired for their
//! facts — a user's own words are never retired because the assistant paraphrased them in a
//! declaration. A turn that makes tool calls, carries reasoning the provider needs back, or
//! follows an opaque item (a Responses `reasoning` item must keep its message) is kept, so
//! call/result pairing and provider rules hold. An unsure value never retires the turn of a
//! confident one.
//!
//! **Example.**
//! ```text
//! events: [e02] port = 8080   [e05] port = 9090
//!  after: [receipt e02: superseded by e05]   [e05] port = 9090
//!
//!   chat: m2 assistant "Confirming 0U4NPP." {assert active_reservation, cabin_class=economy}
//!         m4 assistant "Upgrading you now." {assert cabin_class=business}
//!         m6 assistant "Reverting to economy." {assert cabin_class=economy}
//!  after: m2 kept (only support of active_reservation), m4 retired: superseded by m6
//! ```
//!
//! **Codes.** `superseded-var` (events), `superseded-fact` (chat turns).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Deserializer, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::chat::state::Ledger;
use crate::chat::{ChatConfig, has_calls, has_thinking};
use crate::ir::{Kind, Role};
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SupersededVar, Reason::SupersededFact],
    summary: "retires an item whose every written value (set_var, declared fact) a later surviving write replaced (support-aware)",
    doc: include_str!("superseded_values.rs"),
};

/// The writes of one key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KeyHistory {
    /// Items with a confident write of the key, in order.
    confident: Vec<usize>,
    /// Every item that wrote the key, in order (their verdicts move with `live`).
    writers: Vec<usize>,
    /// The latest surviving confident write.
    live: Option<usize>,
}

/// State: every key's writes, what each item wrote, and the declared-state ledger of chats.
/// Keys are numbered in the order they first appear.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SupersededValues {
    /// Retire items at all (chats: the preset's `retire_superseded_facts`).
    enabled: bool,
    /// Reads and accepts the declarations of chat turns.
    ledger: Ledger,
    key_ids: HashMap<String, usize>,
    keys: Vec<KeyHistory>,
    /// The keys each item wrote, for the items that may be retired.
    #[serde(with = "crate::chat::position_btree")]
    eligible: BTreeMap<usize, Vec<usize>>,
    /// Items taken into account: `0..seen`. A pass loaded from an earlier version's state
    /// starts at 0 and catches up on its next update.
    seen: usize,
}

/// The event pipeline's: retiring.
impl Default for SupersededValues {
    fn default() -> Self {
        SupersededValues {
            enabled: true,
            ledger: Ledger::default(),
            key_ids: HashMap::default(),
            keys: Vec::new(),
            eligible: BTreeMap::new(),
            seen: 0,
        }
    }
}

impl SupersededValues {
    /// The pass of a chat configuration.
    pub fn new(config: &ChatConfig) -> Self {
        SupersededValues {
            enabled: config.retire_superseded_facts,
            ledger: Ledger::new(config.state.clone()),
            ..Default::default()
        }
    }

    /// The number of `key`, numbering it when it is new.
    fn key_id(&mut self, key: &str) -> usize {
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        self.keys.push(KeyHistory::default());
        self.key_ids.insert(key.to_owned(), self.keys.len() - 1);
        self.keys.len() - 1
    }

    /// Takes the writes of item `i` into account (a `set_var`, or a chat message's accepted
    /// declarations); adds the keys it wrote to `dirty`.
    fn add(&mut self, cx: &Cx<'_>, i: usize, dirty: &mut BTreeSet<usize>) {
        let item = &cx.items[i];
        let (writes, eligible): (Vec<(usize, bool)>, bool) = match &item.kind {
            Kind::SetVar { key, .. } => (vec![(self.key_id(key), true)], true),
            Kind::Message(message) => {
                self.ledger.apply(i, item);
                let after_opaque = i > 0 && matches!(cx.items[i - 1].kind, Kind::Opaque { .. });
                let eligible = message.role == Role::Assistant
                    && !has_calls(message)
                    && !has_thinking(message)
                    && !after_opaque;
                // A turn may write a key twice (`assert` then `unsure` in one block): its
                // write is confident when any of them was, as the ledger records it.
                let keys: Vec<(String, bool)> = self
                    .ledger
                    .writes_of(i)
                    .iter()
                    .map(|(key, _)| (key.clone(), self.ledger.last_confident(key) == Some(i)))
                    .collect();
                let writes = keys
                    .into_iter()
                    .map(|(key, confident)| (self.key_id(&key), confident))
                    .collect();
                (writes, eligible)
            }
            _ => return,
        };
        if writes.is_empty() {
            return;
        }
        for &(key, confident) in &writes {
            let history = &mut self.keys[key];
            history.writers.push(i);
            if confident {
                history.confident.push(i);
            }
            dirty.insert(key);
        }
        if eligible {
            self.eligible
                .insert(i, writes.into_iter().map(|(key, _)| key).collect());
        }
    }

    /// Recomputes the latest surviving confident write of key `key`; returns its writers
    /// before `start` when it moved.
    fn relive(&mut self, cx: &Cx<'_>, key: usize, start: usize) -> Vec<usize> {
        let history = &mut self.keys[key];
        let live = history
            .confident
            .iter()
            .rev()
            .copied()
            .find(|&w| cx.survives(w));
        if live == history.live {
            return Vec::new();
        }
        history.live = live;
        history
            .writers
            .iter()
            .copied()
            .filter(|&w| w < start)
            .collect()
    }
}

impl Pass for SupersededValues {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        // On traces a `set_var` always writes its key; the chat options (which facts a turn
        // declares, whether superseded ones retire) are the chat pipeline's.
        Some(match build.pipeline {
            super::pass::Pipeline::Events => Self::default(),
            super::pass::Pipeline::Chats => Self::new(build.config),
        })
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        // A pass loaded from an earlier version's state has not seen the items before `new`;
        // it replays them, and every verdict it gives may have moved.
        let mut dirty: BTreeSet<usize> = BTreeSet::new();
        for i in super::pass::catch_up(&mut self.seen, &new) {
            self.add(cx, i, &mut dirty);
        }
        for &i in changed {
            match &cx.items[i].kind {
                Kind::SetVar { key, .. } => dirty.extend(self.key_ids.get(key.as_str())),
                Kind::Message(_) => {
                    for (key, _) in self.ledger.writes_of(i) {
                        dirty.extend(self.key_ids.get(key.as_str()));
                    }
                }
                _ => {}
            }
        }
        let mut moved = Vec::new();
        for key in dirty {
            moved.extend(self.relive(cx, key, new.start));
        }
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let set_var = match cx.items[i].kind {
            Kind::SetVar { .. } => true,
            Kind::Message(_) => false,
            _ => return None,
        };
        if !self.enabled || !cx.survives(i) {
            return None;
        }
        let keys = self.eligible.get(&i)?;
        let mut by = Vec::with_capacity(keys.len());
        for &key in keys {
            match self.keys[key].live {
                Some(live) if live > i => by.push(live),
                _ => return None,
            }
        }
        by.sort_unstable();
        by.dedup();
        if set_var {
            return Some(Verdict::retire(Reason::SupersededVar, by));
        }
        // A turn that only revoked declared nothing to supersede.
        if !self
            .ledger
            .writes_of(i)
            .iter()
            .any(|(_, verb)| *verb != crate::chat::state::Verb::Revoke)
        {
            return None;
        }
        let names: Vec<&str> = self
            .ledger
            .writes_of(i)
            .iter()
            .map(|(key, _)| key.as_str())
            .collect();
        Some(Verdict {
            note: Some(format!(
                "declared {}; all superseded or revoked",
                names.join(", ")
            )),
            ..Verdict::retire(Reason::SupersededFact, by)
        })
    }
}

/// Reads the state an earlier version stored for `superseded-fact` (chats): whether it
/// retires and the declared-state rules are kept, the rest is rebuilt from the items at the
/// next update.
pub(crate) fn from_superseded_fact<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<SupersededValues, D::Error> {
    #[derive(Deserialize)]
    struct Stored {
        enabled: bool,
        ledger: Ledger,
    }
    Stored::deserialize(deserializer).map(|stored| SupersededValues {
        enabled: stored.enabled,
        ledger: Ledger::new(stored.ledger.config().clone()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn latest_value_wins() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "x", "value": 10}),
            json!({"id": "e2", "type": "set_var", "key": "y", "value": {"nested": [1, 2]}}),
            json!({"id": "e3", "type": "set_var", "key": "x", "value": 20}),
            json!({"id": "e4", "type": "set_var", "key": "x", "value": 30}),
        ]);
        assert!(out.retired("e1", Reason::SupersededVar, &["e4"]));
        assert!(out.retired("e3", Reason::SupersededVar, &["e4"]));
        assert!(out.kept("e2") && out.kept("e4"));
        assert!(
            out.output
                .starts_with("[receipts e1 e3: superseded by e4]\n")
        );
    }

    #[test]
    fn a_value_set_in_an_abandoned_branch_does_not_supersede() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "cache", "value": "redis"}),
            json!({"id": "b1", "type": "decision", "content": "try memcached"}),
            json!({"id": "b2", "type": "set_var", "parent_id": "b1", "key": "cache", "value": "memcached"}),
            json!({"id": "ab", "type": "abandon", "parent_id": "b2", "ref_to": ["b1"]}),
        ]);
        assert!(out.kept("e1"), "redis is live again");
        assert!(out.retired("b2", Reason::DeadBranch, &["ab"]));
    }

    #[test]
    fn keys_are_exact() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "port", "value": 1}),
            json!({"id": "e2", "type": "set_var", "key": "db.port", "value": 2}),
            json!({"id": "e3", "type": "set_var", "key": "Port", "value": 3}),
        ]);
        assert!(out.kept("e1") && out.kept("e2") && out.kept("e3"));
    }
}
