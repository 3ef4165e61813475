//! 1,000 streaming requests at once, each its own conversation, through one gateway with its
//! store: every one answered 200 with its own stream, whole and in order.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};

const REQUESTS: usize = 1000;

/// The text a chat completion stream carries, from its events.
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
        Err(format!("stream ended without [DONE]: {body}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_streams_are_neither_lost_nor_mixed_up() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(REQUESTS)
        .build()
        .unwrap();
    let url = Arc::new(format!("{}/v1/chat/completions", gateway.base));
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|n| {
            let http = http.clone();
            let url = url.clone();
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
                Ok::<(usize, String), String>((n, streamed_text(&text)?))
            })
        })
        .collect();
    let mut errors = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok((n, text)) => {
                if text != format!("echo: conversation {n} says hello {n}") {
                    errors.push(format!("{n}: got {text:?}"));
                }
            }
            Err(e) => errors.push(e),
        }
    }
    assert!(
        errors.is_empty(),
        "{} failures, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(3)]
    );
    let total = gateway.gateway.metrics().total();
    assert_eq!(total.requests as usize, REQUESTS);
    assert_eq!(upstream.requests().len(), REQUESTS);
    gateway.stop().await;
}
