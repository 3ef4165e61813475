//! Replayed cost per preset: what an input costs to send through a provider's prompt cache,
//! turn by turn, under each preset, priced by the bench's own replay ([`ctxgc_bench::replay`]).
//!
//! The input is run through `ctxgc bench` with `full` and the four preset strategies
//! (`ctxgc-lossless`, `ctxgc`, `ctxgc-aggressive`, `ctxgc-cache`), timing off, so the figures
//! are exactly those `ctxgc bench` reports for the same input and are byte-reproducible.

use ctxgc_bench::report::Summary;
use ctxgc_bench::run::{BenchConfig, InputFile, run};
use ctxgc_bench::strategy::{StrategyDefaults, parse_spec};
use ctxgc_core::Options;
use serde::Serialize;

use crate::options::{PRESETS, apply_preset};

/// The bench strategy that compiles with a console preset (one of [`PRESETS`]).
pub fn bench_strategy(preset: &str) -> &'static str {
    match preset {
        "lossless" => "ctxgc-lossless",
        "aggressive" => "ctxgc-aggressive",
        "cache-stable" => "ctxgc-cache",
        // `default` and `eager`: the default passes, every decision at once.
        _ => "ctxgc",
    }
}

/// Replayed input cost of one preset, in units of one uncached input token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayedCost {
    /// Requests replayed: one before each agent turn that has history before it.
    pub requests: usize,
    /// Effective input cost: cached tokens at the cache-read price, the rest at the
    /// cache-write price.
    pub cost: f64,
    /// The same replay sending the whole history every turn (`full`).
    pub full_cost: f64,
    /// `cost / full_cost` (absent when `full` costs nothing: no request has history).
    pub relative_to_full: Option<f64>,
    /// Share of the input tokens read from the cache.
    pub cached_share: Option<f64>,
}

/// The replayed cost of `text` under every preset, in [`PRESETS`] order.
/// `options` are the options the input was read with (format, tokenizer); the preset in them
/// is ignored.
/// An input the bench cannot replay gives the bench's message.
pub fn replayed_costs(text: &str, options: &Options) -> Result<Vec<ReplayedCost>, String> {
    let mut base = options.clone();
    apply_preset(&mut base, "default");
    let defaults = StrategyDefaults::default();
    // `eager` and `default` replay through the same strategy today: run it once.
    let mut specs: Vec<&str> = std::iter::once("full")
        .chain(PRESETS.map(bench_strategy))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    specs.retain(|spec| seen.insert(*spec));
    let strategies = specs
        .into_iter()
        .map(|spec| parse_spec(spec, &defaults).map_err(|e| format!("bench strategy {spec}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let config = BenchConfig {
        strategies,
        timing: false,
        options: base,
        ..BenchConfig::default()
    };
    let input = InputFile {
        path: "input".to_owned(),
        text: Ok(text.to_owned()),
    };
    let report = run(&[input], &config, &mut |_| {});
    if let Some(error) = report.files.iter().find_map(|f| f.error.as_ref()) {
        return Err(format!("the input could not be replayed: {error}"));
    }
    PRESETS
        .iter()
        .map(|preset| {
            let strategy = bench_strategy(preset);
            let summary = report
                .totals
                .iter()
                .find(|s| s.strategy == strategy)
                .ok_or_else(|| format!("the bench gave no replay for {strategy}"))?;
            of_summary(preset, summary, &report.conversations)
        })
        .collect()
}

fn of_summary(
    preset: &str,
    summary: &Summary,
    conversations: &[ctxgc_bench::report::ConversationReport],
) -> Result<ReplayedCost, String> {
    let mut requests = 0;
    for conversation in conversations {
        let result = conversation
            .results
            .iter()
            .find(|r| r.strategy == summary.strategy);
        let Some(result) = result else { continue };
        if let Some(m) = &result.metrics {
            requests += m.replay.requests;
        } else if let Some(error) = &result.error {
            return Err(format!(
                "replaying conversation {:?} under preset {preset}: {error}",
                conversation.id
            ));
        }
    }
    Ok(ReplayedCost {
        requests,
        cost: summary.replay_cost,
        full_cost: summary.full_replay_cost,
        relative_to_full: summary.replay_relative,
        cached_share: summary.cached_share,
    })
}
