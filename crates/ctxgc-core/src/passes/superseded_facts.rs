//! `superseded-fact`: retires an assistant turn whose every declared fact is dead.
//!
//! **What.** Assistant turns declare state in `<contextgc-state>` blocks (see
//! [`crate::chat::state`]). A turn is retired when everything it declared (assert, pin or
//! unsure) has been replaced by a later confident write (assert or pin) in another turn, or
//! revoked, and it supports no live fact; the receipt names the turns that replaced its facts.
//!
//! **Why it is safe.** Support-aware: a turn superseded for one key but still the newest
//! support of another stays, so no live value is left without a turn behind it (the orphan
//! check in the report proves it). Only assistant turns are ever retired — a user's own words
//! are never retired because the assistant paraphrased them in a declaration. A turn that
//! makes tool calls, carries reasoning the provider needs back, or follows an opaque item
//! (a Responses `reasoning` item must keep its message) is kept, so call/result pairing and
//! provider rules hold. An unsure value never retires the turn of a confident one. Off in the
//! lossless preset.
//!
//! **Example.**
//! ```text
//! before: m2 assistant "Confirming 0U4NPP." {assert active_reservation, cabin_class=economy}
//!         m4 assistant "Upgrading you now." {assert cabin_class=business}
//!         m6 assistant "Reverting to economy." {assert cabin_class=economy}
//! after:  m2 kept (only support of active_reservation), m4 retired: superseded by m6
//! ```
//!
//! **Code.** `superseded-fact`.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::chat::state::Ledger;
use crate::chat::{ChatConfig, has_calls, has_thinking, message_of};
use crate::ir::{Kind, Role};
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SupersededFact],
    summary: "retires an assistant turn whose declared facts are all superseded or revoked (support-aware)",
    doc: include_str!("superseded_facts.rs"),
};

/// State: the ledger of declared facts, and which turns may be retired at all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SupersededFacts {
    enabled: bool,
    ledger: Ledger,
    eligible: BTreeSet<usize>,
}

impl SupersededFacts {
    /// The pass, configured.
    pub fn new(config: &ChatConfig) -> Self {
        SupersededFacts {
            enabled: config.retire_superseded_facts,
            ledger: Ledger::new(config.state.clone()),
            eligible: BTreeSet::new(),
        }
    }

    /// The ledger as of the last update.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

impl Pass for SupersededFacts {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        let start = new.start;
        let moves = self.ledger.confident_moves();
        for i in new {
            let item = &cx.items[i];
            self.ledger.apply(i, item);
            let after_opaque = i > 0 && matches!(cx.items[i - 1].kind, Kind::Opaque { .. });
            if let Some(m) = message_of(item)
                && m.role == Role::Assistant
                && !has_calls(m)
                && !has_thinking(m)
                && !after_opaque
            {
                self.eligible.insert(i);
            }
        }
        // A write that moved a key's latest confident value may kill the facts of any turn
        // that wrote that key.
        if self.ledger.confident_moves() == moves {
            return Vec::new();
        }
        self.ledger.written_turns().filter(|&t| t < start).collect()
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        if !self.enabled || !self.eligible.contains(&i) || !cx.survives(i) {
            return None;
        }
        let by = self.ledger.superseding(i)?;
        let keys: Vec<String> = self
            .ledger
            .writes_of(i)
            .iter()
            .map(|(k, _)| k.clone())
            .collect();
        Some(Verdict {
            note: Some(format!(
                "declared {}; all superseded or revoked",
                keys.join(", ")
            )),
            ..Verdict::retire(Reason::SupersededFact, by)
        })
    }
}
