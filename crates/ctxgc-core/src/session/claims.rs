//! How the engine turns the passes' claims on one item into the item's verdict: per item, and
//! per block of a message.
//!
//! Every pass may claim any item, and one chat message can need several: an Anthropic user
//! message may carry three tool results, one a duplicate, one worth re-encoding, one with a
//! stray state block. The passes are asked in pipeline order:
//! - a retirement wins outright: the whole item goes, whatever was rewritten before it;
//! - otherwise each block takes the rewrite of the first pass that claims that block, and a
//!   later pass's rewrite of a block already taken is dropped (each rewrite is computed from
//!   the block's own text, so the first is complete on its own: two are never combined);
//! - the verdict carries the first rewriting pass's code, every pass's justifying items, and,
//!   when more than one pass rewrote a block, a note naming which pass took which block.
//!
//! An event is one block (block 0), so for an event trace this is "the first claim wins".

use crate::passes::{AnyPass, Cx, Pass};
use crate::plan::{Action, Verdict};

/// The verdict on one item from the passes' claims, given in pipeline order (`None`: keep).
/// Claims after a retirement are not asked for.
pub(crate) fn merge(claims: impl IntoIterator<Item = Verdict>) -> Option<Verdict> {
    let mut merged: Option<Verdict> = None;
    let mut parts: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for v in claims {
        if v.action == Action::Retire {
            return Some(v);
        }
        let merged = merged.get_or_insert_with(|| Verdict {
            action: Action::Rewrite,
            reason: v.reason,
            by: Vec::new(),
            rewrites: Vec::new(),
            note: None,
        });
        let mut took = Vec::new();
        let offered = v.rewrites.len();
        for rw in v.rewrites {
            if !merged.rewrites.iter().any(|m| m.block == rw.block) {
                took.push(rw.block);
                merged.rewrites.push(rw);
            }
        }
        if took.is_empty() {
            continue;
        }
        for b in v.by {
            if !merged.by.contains(&b) {
                merged.by.push(b);
            }
        }
        let blocks: Vec<String> = took.iter().map(|b| b.to_string()).collect();
        parts.push(format!("block {}: {}", blocks.join(", "), v.reason.code()));
        // A pass's note speaks of all its blocks; it is kept only when all were taken.
        if took.len() == offered
            && let Some(note) = v.note
        {
            notes.push(note);
        }
    }
    let mut merged = merged?;
    if merged.rewrites.is_empty() {
        return None;
    }
    merged.rewrites.sort_by_key(|r| r.block);
    if parts.len() > 1 {
        notes.insert(0, parts.join("; "));
    }
    if !notes.is_empty() {
        merged.note = Some(notes.join("; "));
    }
    Some(merged)
}

/// The verdict on item `i` from `passes`, in order.
pub(crate) fn verdict(passes: &[AnyPass], cx: &Cx<'_>, i: usize) -> Option<Verdict> {
    verdict_without(passes, cx, i, None)
}

/// [`verdict`], leaving out the claims made for reason `without` (a trim the risk budget
/// refused: the item gets what the other passes decide, a lossless re-encoding say).
pub(crate) fn verdict_without(
    passes: &[AnyPass],
    cx: &Cx<'_>,
    i: usize,
    without: Option<crate::plan::Reason>,
) -> Option<Verdict> {
    let mut claims = passes
        .iter()
        .filter_map(|p| p.verdict(cx, i))
        .filter(|v| Some(v.reason) != without);
    // Most items are kept or retired outright (every event a trace retires): no merge.
    let first = claims.next()?;
    if first.action == Action::Retire {
        return Some(first);
    }
    merge(std::iter::once(first).chain(claims))
}

/// Tokens a lossy rewrite of item `i` that a pass withholds would have saved: the first such
/// rewrite in pipeline order, unless a pass before it claims the item (a retired or stubbed
/// output would not have been sampled or folded either). 0 when none is withheld.
pub(crate) fn withheld(passes: &[AnyPass], cx: &Cx<'_>, i: usize) -> usize {
    let Some((k, saved)) = passes.iter().enumerate().find_map(|(k, p)| {
        let saved = p.withheld(cx, i);
        (saved > 0).then_some((k, saved))
    }) else {
        return 0;
    };
    // Asked only when something is withheld: most items have nothing to ask about.
    if passes[..k].iter().any(|p| p.verdict(cx, i).is_some()) {
        0
    } else {
        saved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BlockRewrite, Reason};

    fn rewrite(reason: Reason, blocks: &[usize], by: &[usize], note: Option<&str>) -> Verdict {
        Verdict {
            action: Action::Rewrite,
            reason,
            by: by.to_vec(),
            rewrites: blocks
                .iter()
                .map(|&block| BlockRewrite {
                    block,
                    text: format!("{} of {block}", reason.code()),
                })
                .collect(),
            note: note.map(str::to_owned),
        }
    }

    #[test]
    fn each_block_takes_the_first_rewrite_that_claims_it() {
        let v = merge([
            rewrite(Reason::DuplicateResult, &[1], &[4], None),
            rewrite(Reason::CompactJson, &[0, 1], &[], Some("compact")),
        ])
        .unwrap();
        assert_eq!(v.reason, Reason::DuplicateResult);
        assert_eq!(v.by, [4]);
        let texts: Vec<&str> = v.rewrites.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["compact-json of 0", "duplicate-result of 1"]);
        // compact-json lost block 1, so its note (about both blocks) is not kept.
        assert_eq!(
            v.note.as_deref(),
            Some("block 1: duplicate-result; block 0: compact-json")
        );
    }

    #[test]
    fn a_retirement_wins_over_earlier_rewrites() {
        let retire = Verdict::retire(Reason::SupersededFact, vec![9]);
        let v = merge([rewrite(Reason::StateBlock, &[0], &[], None), retire.clone()]);
        assert_eq!(v, Some(retire));
    }

    #[test]
    fn one_claim_is_the_verdict_and_none_is_keep() {
        let only = rewrite(Reason::Projection, &[0], &[], Some("hid 3 values"));
        assert_eq!(merge([only.clone()]), Some(only));
        assert_eq!(merge([]), None);
        // A rewrite of no block claims nothing.
        assert_eq!(merge([rewrite(Reason::CompactJson, &[], &[], None)]), None);
    }
}
