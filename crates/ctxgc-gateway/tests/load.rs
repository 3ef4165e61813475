//! Load, run by `scripts/load-test.sh` (ignored in the normal suite): rounds of 1,000
//! concurrent streaming requests, each its own conversation, through one gateway with its
//! SQLite store, for `CTXGC_LOAD_SECONDS` (default 20). Every answer must be its own
//! conversation's, whole; the process's resident memory is sampled after every round and
//! printed, and must not keep growing (the last sample within twice the second round's).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn streamed_text(body: &str) -> Result<String, String> {
    let mut text = String::new();
    let mut done = false;
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let event: Value = serde_json::from_str(data).map_err(|e| format!("{e}: {data}"))?;
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
    }
    if done {
        Ok(text)
    } else {
        Err("stream ended without [DONE]".to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "load: run by scripts/load-test.sh"]
async fn gateway_under_sustained_concurrent_streams() {
    let streams = env_number("CTXGC_LOAD_STREAMS", 1000) as usize;
    let seconds = env_number("CTXGC_LOAD_SECONDS", 20);
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(streams)
        .build()
        .unwrap();
    let url = Arc::new(format!("{}/v1/chat/completions", gateway.base));
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut total = 0usize;
    let mut errors: Vec<String> = Vec::new();
    let mut round = 0usize;
    while round < 2 || started.elapsed() < Duration::from_secs(seconds) {
        let round_started = Instant::now();
        let tasks: Vec<_> = (0..streams)
            .map(|n| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    let body = json!({"model": "fake-model", "stream": true, "messages": [
                        {"role": "system", "content": "You answer in echoes."},
                        {"role": "user", "content": format!("conversation {n} says hello {n}")}
                    ]});
                    let r = http
                        .post(url.as_str())
                        .json(&body)
                        .send()
                        .await
                        .map_err(|e| format!("{n}: {e}"))?;
                    if r.status() != 200 {
                        return Err(format!("{n}: status {}", r.status()));
                    }
                    let text = r.text().await.map_err(|e| format!("{n}: {e}"))?;
                    let text = streamed_text(&text).map_err(|e| format!("{n}: {e}"))?;
                    if text != format!("echo: conversation {n} says hello {n}") {
                        return Err(format!("{n}: mixed up: {text:?}"));
                    }
                    Ok(())
                })
            })
            .collect();
        for task in tasks {
            if let Err(e) = task.await.expect("the task ran") {
                errors.push(e);
            }
        }
        total += streams;
        // The fake provider's own record of requests is not the gateway's memory.
        upstream.state.requests.lock().unwrap().clear();
        let rss = rss_kib();
        samples.push(rss);
        println!(
            "gateway round {round}: {streams} concurrent streams in {} ms, RSS {} MiB",
            round_started.elapsed().as_millis(),
            rss / 1024
        );
        round += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "gateway load: {total} streams in {elapsed:.0} s ({:.0}/s), {} errors, RSS after round 1 {} MiB, max {} MiB, last {} MiB",
        total as f64 / elapsed,
        errors.len(),
        samples[1] / 1024,
        samples.iter().max().unwrap() / 1024,
        samples.last().unwrap() / 1024
    );
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(3)]
    );
    assert_eq!(gateway.gateway.metrics().total().requests as usize, total);
    assert!(
        *samples.last().unwrap() <= samples[1] * 2,
        "memory grew: {samples:?}"
    );
    gateway.stop().await;
}
