//! The bench's report: what `--output json` prints (schema `ctxgc-bench/1`, documented in
//! `docs/bench.md`), and the sums the table and the HTML page show.
//!
//! Field names and nesting are stable within a schema version; a field is only ever added.
//! Everything in it is deterministic except the `wall_ms` timings (all zero with `--no-timing`).

use serde::Serialize;

use crate::probes::ProbeResult;
use crate::replay::{CacheModel, Replay};
use crate::survival::Survival;

/// The schema this report follows.
pub const SCHEMA: &str = "ctxgc-bench/1";

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The vocabulary that counted tokens.
    pub tokenizer: &'static str,
    /// The cache prices used for replayed cost.
    pub cache: CacheModel,
    /// False when timings were switched off (`--no-timing`).
    pub timing: bool,
    /// The strategies, in report order.
    pub strategies: Vec<StrategyEntry>,
    /// One entry per input file.
    pub files: Vec<FileReport>,
    /// One entry per conversation of every file.
    pub conversations: Vec<ConversationReport>,
    /// Per strategy, over every conversation of every file.
    pub totals: Vec<Summary>,
}

/// A strategy as it ran.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyEntry {
    /// Its name (spec).
    pub name: String,
    /// What it does.
    pub description: String,
}

/// One input file.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The path as given (or `sample:NAME`).
    pub path: String,
    /// The format it was read as.
    pub format: Option<String>,
    /// Conversations benched from it.
    pub conversations: usize,
    /// Why it could not be read at all (then it has no conversations).
    pub error: Option<String>,
    /// Per strategy, over its conversations.
    pub summaries: Vec<Summary>,
}

/// One conversation and every strategy's result on it.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationReport {
    /// The file it came from.
    pub file: String,
    /// Its id in that file.
    pub id: String,
    /// Its format.
    pub format: String,
    /// Items in it.
    pub items: usize,
    /// Agent turns in it.
    pub turns: usize,
    /// Per strategy, in report order.
    pub results: Vec<StrategyResult>,
}

/// One strategy on one conversation: its metrics, or why there are none.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyResult {
    /// The strategy's name.
    pub strategy: String,
    /// Why it failed on this conversation.
    pub error: Option<String>,
    /// Its metrics, when it did not fail.
    pub metrics: Option<Metrics>,
}

/// Every metric of one strategy on one conversation.
#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    /// Tokens of the whole conversation uncompacted (`full`).
    pub tokens_before: usize,
    /// Tokens of the strategy's context for the whole conversation.
    pub tokens_after: usize,
    /// `1 - tokens_after / tokens_before` (0 when the conversation is empty).
    pub reduction: f64,
    /// Tokens of tool outputs, uncompacted.
    pub tool_output_tokens_before: usize,
    /// Tokens of tool outputs in the strategy's context (placeholders included).
    pub tool_output_tokens_after: usize,
    /// Items the context carries.
    pub items_kept: usize,
    /// Used-value survival.
    pub survival: Survival,
    /// The fixture's probes, when it has any.
    pub probes: Option<Vec<ProbeResult>>,
    /// True when compacting the whole conversation twice gave identical contexts.
    pub deterministic: bool,
    /// Replayed cost through a prefix cache.
    pub replay: Replay,
    /// Wall-clock timings (reported, never compared).
    pub wall_ms: Wall,
}

/// Wall-clock timings in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Wall {
    /// Compacting the whole conversation once.
    pub final_compile: f64,
    /// Mean over the replayed requests.
    pub per_request_mean: f64,
}

/// A probe's score over many fixtures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeSummary {
    /// The probe's name.
    pub name: String,
    /// Fixtures where it passed.
    pub passed: usize,
    /// Fixtures where its `contains` and `recovered` parts held (excludes ignored).
    pub passed_without_excludes: usize,
    /// Fixtures that define it.
    pub total: usize,
}

/// One strategy over many conversations. Ratios are over the sums (token-weighted).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The strategy.
    pub strategy: String,
    /// Conversations with metrics.
    pub conversations: usize,
    /// Conversations where it failed.
    pub errors: usize,
    /// Sum of tokens before.
    pub tokens_before: u64,
    /// Sum of tokens after.
    pub tokens_after: u64,
    /// `1 - tokens_after / tokens_before`.
    pub reduction: Option<f64>,
    /// Mean of the conversations' own reductions.
    pub mean_reduction: Option<f64>,
    /// Sum of tool-output tokens before.
    pub tool_output_tokens_before: u64,
    /// Sum of tool-output tokens after.
    pub tool_output_tokens_after: u64,
    /// `1 - after / before` over tool outputs.
    pub tool_output_reduction: Option<f64>,
    /// Turns checked for survival.
    pub turns: usize,
    /// Values used.
    pub used_values: usize,
    /// Values missed: not visible and not recallable (unrecoverable).
    pub missed_values: usize,
    /// Values not visible but recalled through a receipt stub and the recall tool.
    pub recovered_values: usize,
    /// Recalls (one request each), apart from misses.
    pub recalls: usize,
    /// Requests replayed (agent turns with history), recalls not included.
    pub requests: usize,
    /// `recalls / requests`: the share of requests that needed a recall request after them.
    pub recall_share: Option<f64>,
    /// `missed_values / used_values`.
    pub miss_rate: Option<f64>,
    /// Turns with a miss.
    pub turns_with_miss: usize,
    /// Per probe, over the fixtures that define it.
    pub probes: Vec<ProbeSummary>,
    /// Conversations whose two compactions differed.
    pub nondeterministic: usize,
    /// Sum of replayed cost.
    pub replay_cost: f64,
    /// Sum of `full`'s replayed cost on the same conversations.
    pub full_replay_cost: f64,
    /// `replay_cost / full_replay_cost`.
    pub replay_relative: Option<f64>,
    /// Share of input tokens read from the cache.
    pub cached_share: Option<f64>,
    /// The highest `relative_to_full` of any one conversation: what the worst-served user
    /// paid against sending everything (absent when no conversation has a request).
    pub worst_replay_relative: Option<f64>,
    /// The conversation (`file`'s id) that paid `worst_replay_relative`; the first in report
    /// order on a tie.
    pub worst_replay_conversation: Option<String>,
    /// Sum of final-compile wall time.
    pub wall_ms_total: f64,
    /// Mean final-compile wall time.
    pub wall_ms_mean: Option<f64>,
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// Sums the results of `strategy` over `conversations`.
pub fn summarize<'a>(
    strategy: &str,
    conversations: impl IntoIterator<Item = &'a ConversationReport>,
) -> Summary {
    let mut s = Summary {
        strategy: strategy.to_owned(),
        conversations: 0,
        errors: 0,
        tokens_before: 0,
        tokens_after: 0,
        reduction: None,
        mean_reduction: None,
        tool_output_tokens_before: 0,
        tool_output_tokens_after: 0,
        tool_output_reduction: None,
        turns: 0,
        used_values: 0,
        missed_values: 0,
        recovered_values: 0,
        recalls: 0,
        requests: 0,
        recall_share: None,
        miss_rate: None,
        turns_with_miss: 0,
        probes: Vec::new(),
        nondeterministic: 0,
        replay_cost: 0.0,
        full_replay_cost: 0.0,
        replay_relative: None,
        cached_share: None,
        worst_replay_relative: None,
        worst_replay_conversation: None,
        wall_ms_total: 0.0,
        wall_ms_mean: None,
    };
    let mut reductions = 0.0;
    let mut input_tokens = 0u64;
    let mut cached_tokens = 0u64;
    for conversation in conversations {
        let Some(result) = conversation.results.iter().find(|r| r.strategy == strategy) else {
            continue;
        };
        let Some(m) = &result.metrics else {
            s.errors += 1;
            continue;
        };
        s.conversations += 1;
        s.tokens_before += m.tokens_before as u64;
        s.tokens_after += m.tokens_after as u64;
        reductions += m.reduction;
        s.tool_output_tokens_before += m.tool_output_tokens_before as u64;
        s.tool_output_tokens_after += m.tool_output_tokens_after as u64;
        s.turns += m.survival.turns;
        s.used_values += m.survival.used_values;
        s.missed_values += m.survival.missed_values;
        s.recovered_values += m.survival.recovered_values;
        s.recalls += m.survival.recalls;
        s.requests += m.replay.requests;
        s.turns_with_miss += m.survival.turns_with_miss;
        for p in m.probes.iter().flatten() {
            match s.probes.iter_mut().find(|q| q.name == p.name) {
                Some(q) => {
                    q.total += 1;
                    q.passed += usize::from(p.passed);
                    q.passed_without_excludes += usize::from(p.passed_without_excludes);
                }
                None => s.probes.push(ProbeSummary {
                    name: p.name.clone(),
                    passed: usize::from(p.passed),
                    passed_without_excludes: usize::from(p.passed_without_excludes),
                    total: 1,
                }),
            }
        }
        s.nondeterministic += usize::from(!m.deterministic);
        if let Some(r) = m.replay.relative_to_full
            && s.worst_replay_relative.is_none_or(|w| r > w)
        {
            s.worst_replay_relative = Some(r);
            s.worst_replay_conversation = Some(conversation.id.clone());
        }
        s.replay_cost += m.replay.cost;
        s.full_replay_cost += m.replay.full_cost;
        input_tokens += m.replay.input_tokens;
        cached_tokens += m.replay.cached_tokens;
        s.wall_ms_total += m.wall_ms.final_compile;
    }
    let n = s.conversations as f64;
    s.reduction = ratio(
        s.tokens_before as f64 - s.tokens_after as f64,
        s.tokens_before as f64,
    );
    s.mean_reduction = ratio(reductions, n);
    s.tool_output_reduction = ratio(
        s.tool_output_tokens_before as f64 - s.tool_output_tokens_after as f64,
        s.tool_output_tokens_before as f64,
    );
    s.miss_rate = ratio(s.missed_values as f64, s.used_values as f64);
    s.recall_share = ratio(s.recalls as f64, s.requests as f64);
    s.replay_relative = ratio(s.replay_cost, s.full_replay_cost);
    s.cached_share = ratio(cached_tokens as f64, input_tokens as f64);
    s.wall_ms_mean = ratio(s.wall_ms_total, n);
    s
}
