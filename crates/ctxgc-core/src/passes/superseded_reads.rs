//! `superseded-read`: an earlier read of a resource that was read again and came back
//! different is stubbed.
//!
//! **What.** A result reads a resource, and a later, different result of the same resource
//! supersedes it: the earlier result is rewritten to a short stub naming the message with the
//! newer one. The call stays, and so does its (stubbed) result, so pairing stays valid; the
//! earlier output is in the receipt. Two results are of the same resource when
//!
//! - the same call (tool name and canonical arguments) was made again; or
//! - both return *the same record*, whichever tools returned it: each is a JSON object whose
//!   top-level id field (`reservation_id`, `orderId`) holds the value its call asked for, with
//!   the same value in both; and the newer one has every top-level field of the earlier one,
//!   with the same values in every id field they share. So `cancel_reservation(ZFA04Y)`,
//!   returning the whole reservation with its new status, supersedes an earlier
//!   `get_reservation_details(ZFA04Y)`; two bookings of one user (equal `user_id`, different
//!   `reservation_id`) never supersede each other, nor does an order the newer result
//!   describes with fewer fields.
//!
//! **Why it is safe.** The newer result describes the resource as it is now; the older one only
//! competes with it. A record's earlier version still tells what changed (an agent prices a
//! refund from the old and new fares), so that stub is a lossy rewrite: it waits until the
//! agent has answered the newer result, and applies only where the agent can recall the
//! original (a recall tool, or the `aggressive` preset); in the `default` preset without one
//! it is withheld and what it would save is reported. Error results are never stubbed, and an error never supersedes a
//! success — the record of a failure or of a success is kept either way, and no stub ever says
//! that anything was resolved. Outputs of `--keep-tool` tools and of the recall tool are never
//! touched, and a stub is used only when it costs fewer tokens than the output. A stub or note
//! an earlier compile wrote is not a read: it never supersedes anything and is never stubbed
//! again. Off in the lossless preset.
//!
//! **Example.**
//! ```text
//! before: m3 tool (get_reservation {"id":"ZFA04Y"}) {"cabin":"economy",...}
//!         m9 tool (get_reservation {"id":"ZFA04Y"}) {"cabin":"business",...}
//! after:  m3 "[ctxgc: superseded: the same call was made again in m9 and returned a different result; ...]"
//!
//! before: m3 tool (get_reservation_details {"reservation_id":"ZFA04Y"}) {"reservation_id":"ZFA04Y","status":null,...}
//!         m9 tool (cancel_reservation {"reservation_id":"ZFA04Y"}) {"reservation_id":"ZFA04Y","status":"cancelled",...}
//! after:  m3 "[ctxgc: superseded: reservation_id \"ZFA04Y\" was returned again in m9, changed; ...]"
//! ```
//!
//! **Codes.** `superseded-read` (the same call); `superseded-record` (the same record, a
//! lossy rewrite).

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::lossy::LossyGate;
use super::pass::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::pairing::{OutputHash, ResultView, Slot};
use crate::ir::{Block, Kind, canonical_json};
use crate::plan::{Action, BlockRewrite, Reason, Verdict};
use crate::projection::learn::names_an_id;
use crate::projection::usage::scalar_texts;

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SupersededRead, Reason::SupersededRecord],
    summary: "stubs an earlier read of a resource (the same call, or the same record) that was read again later and came back different",
    doc: include_str!("superseded_reads.rs"),
};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Read {
    slot: Slot,
    hash: OutputHash,
    error: bool,
    /// Tokens of the output text, counted only once a newer, different result of the same
    /// call arrives (most reads are never superseded, and counting every output was a sixth
    /// of a chat compile); `None` before that, and always when it is not text.
    #[serde(default)]
    tokens: Option<usize>,
    /// Whether the output is text (only text is ever stubbed).
    #[serde(default = "yes")]
    text: bool,
    /// For a read of a record: its shape, which a newer read must cover to supersede it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    record: Option<Shape>,
}

/// The shape of a record: its top-level keys and its id fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shape {
    /// Top-level keys, sorted.
    keys: Vec<String>,
    /// Top-level id fields (by name) and their values as canonical JSON, sorted by key.
    ids: Vec<(String, String)>,
}

impl Shape {
    /// True when `newer` says at least what this says about the same record: every key of
    /// this one, and the same value in every id field.
    fn covered_by(&self, newer: &Shape) -> bool {
        self.keys
            .iter()
            .all(|k| newer.keys.binary_search(k).is_ok())
            && self.ids.iter().all(|id| newer.ids.contains(id))
    }
}

/// Whether `newer` may supersede `read` in one list: a read of the same call always may; a
/// read of a record only by a read that covers its shape.
fn may_supersede(read: &Read, newer: &Read) -> bool {
    match (&read.record, &newer.record) {
        (None, _) => true,
        (Some(shape), Some(newer)) => shape.covered_by(newer),
        (Some(_), None) => false,
    }
}

/// Tokens of the text output at `slot` (`None` when it is not text): what a stub must beat.
fn text_tokens(cx: &Cx<'_>, slot: Slot, config: &ChatConfig) -> Option<usize> {
    cx.results(slot.item)
        .into_iter()
        .find(|e| e.slot.block == slot.block)
        .filter(|e| e.has_text())
        .map(|e| e.tokens(config.tokenizer))
}

/// Lists of reads of a record are keyed `\0record\0KEY\0VALUE`: a call signature starts with
/// the length of its tool's name, so the two never meet.
const RECORD: &str = "\0record\0";

/// The records result `r` returns: for each top-level id field of its JSON object that holds
/// a value the call was asked for, the key of that record's list; and the object's shape.
fn records_of(cx: &Cx<'_>, r: &ResultView<'_>) -> Option<(Vec<String>, Shape)> {
    // Records are followed in chats only, where the agent's answer to the newer read
    // releases the lossy stub of the earlier one.
    let call = r.call.slot;
    let Kind::Message(message) = &cx.items.get(call.item)?.kind else {
        return None;
    };
    let Some(Block::ToolCall(call)) = message.blocks.get(call.block) else {
        return None;
    };
    let Some(Value::Object(fields)) = r.json() else {
        return None;
    };
    let mut asked = Vec::new();
    scalar_texts(&call.arguments, &mut asked);
    if asked.is_empty() {
        return None;
    }
    let lists: Vec<String> = (fields.iter())
        .filter(|(k, _)| names_an_id(k))
        .filter_map(|(k, v)| {
            let asked_for = match v {
                Value::String(s) => !s.is_empty() && asked.contains(s),
                Value::Number(n) => asked.contains(&n.to_string()),
                _ => false,
            };
            asked_for.then(|| format!("{RECORD}{k}\0{}", canonical_json(v)))
        })
        .collect();
    if lists.is_empty() {
        return None;
    }
    let mut ids: Vec<(String, String)> = (fields.iter())
        .filter(|(k, _)| names_an_id(k))
        .map(|(k, v)| (k.clone(), canonical_json(v)))
        .collect();
    ids.sort_unstable();
    let mut keys: Vec<String> = fields.keys().cloned().collect();
    keys.sort_unstable();
    Some((lists, Shape { keys, ids }))
}

fn yes() -> bool {
    true
}

/// State: every result of each call signature and of each record, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SupersededReads {
    config: ChatConfig,
    reads: HashMap<String, Vec<Read>>,
    /// item → (block, list key, position in its list).
    #[serde(with = "crate::chat::position_map")]
    member: HashMap<usize, Vec<(usize, String, usize)>>,
    /// Which reads an assistant turn follows (the lossy passes' own notion of answered).
    #[serde(default)]
    answers: LossyGate,
    /// `(earlier, newer)` items of record reads superseded by a read the agent has not
    /// answered yet: the earlier one's verdict changes once it has.
    #[serde(default)]
    waiting: Vec<(usize, usize)>,
    /// For each record's list, the positions of the reads no newer read covers yet: the only
    /// ones a new read can supersede first. A record polled thousands of times (a job's
    /// status) is then compared with the few reads still open, not with every earlier one.
    #[serde(default)]
    open: HashMap<String, Vec<usize>>,
    /// For each list, where each run of equal results starts: a read's newer, different
    /// result is looked for from the next run on, not through every repeat of its own (a
    /// job polled unchanged thousands of times is one run). Rebuilt for a list stored
    /// without it.
    #[serde(default)]
    runs: HashMap<String, Vec<usize>>,
}

/// Where each run of equal results starts in `list`.
fn run_starts(list: &[Read]) -> Vec<usize> {
    (0..list.len())
        .filter(|&i| i == 0 || list[i].hash != list[i - 1].hash)
        .collect()
}

/// Notes, in `runs`, a result with `hash` about to be pushed at the end of `list` (`key`).
fn note_run(runs: &mut HashMap<String, Vec<usize>>, key: &str, list: &[Read], hash: OutputHash) {
    let starts_run = list.last().is_none_or(|last| last.hash != hash);
    match runs.get_mut(key) {
        Some(starts) => {
            if starts_run {
                starts.push(list.len());
            }
        }
        None => {
            let mut starts = run_starts(list);
            if starts_run {
                starts.push(list.len());
            }
            runs.insert(key.to_owned(), starts);
        }
    }
}

/// A stub one block of an item may take.
struct Stub {
    block: usize,
    text: String,
    /// The item with the newer read.
    newer: usize,
    /// Tokens it saves.
    saving: usize,
    /// It stands for a record's earlier version (a lossy rewrite).
    record: bool,
}

impl SupersededReads {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        SupersededReads {
            config,
            ..Default::default()
        }
    }

    /// Notes result `r`, a successful read of the record whose list is `key`, with `shape`:
    /// the open earlier reads of the record it covers and differs from are superseded (their
    /// tokens are counted now, and their stubs wait in `waiting` until the agent has
    /// answered `r`).
    fn read_record(
        &mut self,
        cx: &Cx<'_>,
        r: &ResultView<'_>,
        (key, shape): (String, &Shape),
        hash: OutputHash,
    ) {
        let read = Read {
            slot: r.slot,
            hash,
            error: false,
            tokens: None,
            text: r.has_text(),
            record: Some(shape.clone()),
        };
        let list = self.reads.entry(key.clone()).or_default();
        let open = self.open.entry(key.clone()).or_default();
        // A repeat of the latest read supersedes nothing that one did not (same output,
        // same shape): a record polled unchanged is not compared with every open read again.
        let repeat = list.last().is_some_and(|last| last.hash == hash);
        if !repeat {
            open.retain(|&pos| {
                let earlier = &mut list[pos];
                if earlier.hash == hash || !may_supersede(earlier, &read) {
                    return true;
                }
                // Superseded now: its stub waits for the agent's answer to this read.
                self.waiting.push((earlier.slot.item, r.slot.item));
                if earlier.text && earlier.tokens.is_none() {
                    earlier.tokens = text_tokens(cx, earlier.slot, &self.config);
                }
                false
            });
        }
        open.push(list.len());
        note_run(&mut self.runs, &key, list, hash);
        self.member
            .entry(r.slot.item)
            .or_default()
            .push((r.slot.block, key, list.len()));
        list.push(read);
    }
}

impl Pass for SupersededReads {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let start = new.start;
        let mut moved = Vec::new();
        // An earlier read names the first surviving newer one.
        for n in changed {
            for (_, signature, pos) in self.member.get(n).into_iter().flatten() {
                if let Some(list) = self.reads.get(signature) {
                    moved.extend(list[..*pos].iter().map(|e| e.slot.item));
                }
            }
        }
        for i in new {
            self.answers.observe(i, &cx.items[i]);
            for r in cx.results(i) {
                // A stub of an earlier compile is not a read: it neither supersedes nor is
                // superseded (its original is in that compile's receipt).
                if self.config.tool_protected(&r.call.name) || r.written_by_ctxgc() {
                    continue;
                }
                let hash = r.output_hash();
                let error = r.is_error();
                let list = self.reads.entry(r.call.signature.clone()).or_default();
                // The latest surviving result: when this one repeats it, no earlier read
                // changes (a job polled unchanged for hours is one long run of it).
                let repeats_latest = list
                    .iter()
                    .rev()
                    .find(|e| !e.error && cx.survives(e.slot.item))
                    .is_some_and(|e| e.hash == hash);
                if !error && !repeats_latest {
                    // The earlier reads that no surviving read has contradicted yet (the
                    // latest run of one result) now have this one as their newer read. Reads
                    // before that run already name a newer one.
                    let mut run_hash: Option<OutputHash> = None;
                    let run: Vec<usize> = list
                        .iter()
                        .rev()
                        .take_while(|e| {
                            if e.error || !cx.survives(e.slot.item) {
                                return true;
                            }
                            *run_hash.get_or_insert(e.hash) == e.hash
                        })
                        .map(|e| e.slot.item)
                        .collect();
                    if run_hash != Some(hash) {
                        moved.extend(run.into_iter().filter(|&m| m < start));
                    }
                }
                // After a successful read with the same result, every earlier read this one
                // differs from was counted then.
                let counted = list
                    .last()
                    .is_some_and(|last| !last.error && last.hash == hash);
                if !error && !counted {
                    // Every earlier text read this one differs from may now be stubbed: the
                    // verdict compares its tokens with the stub's, so count them now.
                    for earlier in list
                        .iter_mut()
                        .filter(|e| e.text && e.tokens.is_none() && e.hash != hash)
                    {
                        earlier.tokens = text_tokens(cx, earlier.slot, &self.config);
                    }
                }
                note_run(&mut self.runs, &r.call.signature, list, hash);
                self.member.entry(i).or_default().push((
                    r.slot.block,
                    r.call.signature.clone(),
                    list.len(),
                ));
                list.push(Read {
                    slot: r.slot,
                    hash,
                    error,
                    tokens: None,
                    text: r.has_text(),
                    record: None,
                });
                if !error && let Some((lists, shape)) = records_of(cx, &r) {
                    for key in lists {
                        self.read_record(cx, &r, (key, &shape), hash);
                    }
                }
            }
        }
        // Record reads whose newer version the agent has now answered may take their stub.
        let answers = &self.answers;
        self.waiting.retain(|&(earlier, newer)| {
            if !answers.answered(newer) {
                return true;
            }
            if earlier < start {
                moved.push(earlier);
            }
            false
        });
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let stubs = self.stubs(cx, i, !self.config.withhold_lossy);
        if stubs.is_empty() {
            return None;
        }
        let mut by = Vec::new();
        for s in &stubs {
            if !by.contains(&s.newer) {
                by.push(s.newer);
            }
        }
        // An item whose stubs are all of records is a lossy rewrite, and says so.
        let reason = if stubs.iter().all(|s| s.record) {
            Reason::SupersededRecord
        } else {
            Reason::SupersededRead
        };
        Some(Verdict {
            action: Action::Rewrite,
            reason,
            by,
            rewrites: (stubs.into_iter())
                .map(|s| BlockRewrite {
                    block: s.block,
                    text: s.text,
                })
                .collect(),
            note: None,
        })
    }

    fn withheld(&self, cx: &Cx<'_>, i: usize) -> usize {
        // Only record stubs are withheld: an item that read no record has none to report,
        // and its call stubs are not built a second time.
        let reads_a_record = (self.member.get(&i).into_iter().flatten())
            .any(|(_, list, _)| list.starts_with(RECORD));
        if !self.config.withhold_lossy || !reads_a_record {
            return 0;
        }
        (self.stubs(cx, i, true).iter())
            .filter(|s| s.record)
            .map(|s| s.saving)
            .sum()
    }
}

impl SupersededReads {
    /// The stubs item `i` may take, at most one per block (a block read both as a call and
    /// as a record takes the first that applies, the call's); those of records only when
    /// `records`.
    fn stubs(&self, cx: &Cx<'_>, i: usize, records: bool) -> Vec<Stub> {
        let mut stubs: Vec<Stub> = Vec::new();
        if !self.config.stub_superseded_reads || !cx.survives(i) {
            return stubs;
        }
        for (block, list_key, pos) in self.member.get(&i).into_iter().flatten() {
            if stubs.iter().any(|s| s.block == *block) {
                continue;
            }
            let Some(list) = self.reads.get(list_key) else {
                continue;
            };
            let read = &list[*pos];
            let Some(tokens) = read.tokens else { continue };
            if read.error {
                continue;
            }
            let record = read.record.is_some();
            if record && !records {
                continue;
            }
            // Reads up to the next run repeat this one's result: none of them is newer.
            let next_run = self.runs.get(list_key).map_or(pos + 1, |starts| {
                let run = starts.partition_point(|&start| start <= *pos);
                starts.get(run).copied().unwrap_or(list.len())
            });
            let Some(newer) = list[next_run..].iter().find(|n| {
                !n.error
                    && n.hash != read.hash
                    && may_supersede(read, n)
                    && cx.survives(n.slot.item)
                    && (!record || self.answers.answered(n.slot.item))
            }) else {
                continue;
            };
            let (newer_id, hint) = (
                &cx.items[newer.slot.item].id,
                self.config.recovery_hint(&cx.items[i].id),
            );
            let text = match list_key
                .strip_prefix(RECORD)
                .and_then(|k| k.split_once('\0'))
            {
                Some((key, value)) => format!(
                    "[ctxgc: superseded: {key} {value} was returned again in {newer_id}, changed; {hint}]"
                ),
                None => format!(
                    "[ctxgc: superseded: the same call was made again in {newer_id} and returned a different result; {hint}]"
                ),
            };
            let stub_tokens = self.config.tokenizer.count(&text);
            if stub_tokens < tokens {
                stubs.push(Stub {
                    block: *block,
                    text,
                    newer: newer.slot.item,
                    saving: tokens - stub_tokens,
                    record,
                });
            }
        }
        stubs
    }
}
