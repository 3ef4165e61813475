//! Added latency of the gateway on the incremental path, for conversations of about 10k and
//! 100k tokens (counted with the compiler's tokenizer at setup, never on the request path).
//!
//! Two measurements, each over a conversation that grows by two messages per request (an
//! agent loop):
//!
//! - **compile**: the gateway's own work on a request (parse, hash, match the stored prefix,
//!   lower and compile the new messages, store them, render), in process;
//! - **end to end**: the same requests over HTTP on loopback through the gateway, against
//!   direct calls to the same minimal provider; the difference is the added latency.
//!
//! Run: `cargo bench -p ctxgc-gateway --bench gateway_latency` (prints p50 / p99 / mean).

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use ctxgc_core::Format;
use ctxgc_gateway::request::{Parsed, parse};
use ctxgc_gateway::sessions::Sessions;
use ctxgc_gateway::upstream::{Upstream, Upstreams};
use ctxgc_gateway::{GatewayOptions, build, serve_gateway};
use serde_json::json;

const WARMUP: usize = 20;
const REQUESTS: usize = 300;

/// A system prompt, then rounds of user / tool call / tool output (JSON rows) / answer, until
/// the conversation holds about `tokens` tokens.
fn base_conversation(tokens: usize) -> Vec<String> {
    let tokenizer = ctxgc_core::Tokenizer::default();
    let mut messages = vec![
        json!({"role": "system", "content": "You are a support agent for an airline. Follow the policy; confirm before every change."})
            .to_string(),
    ];
    let mut count = tokenizer.count(&messages[0]);
    let mut round = 0;
    while count < tokens {
        let rows: Vec<_> = (0..12)
            .map(|i| json!({"flight": format!("HAT{:03}", round * 12 + i), "origin": "JFK", "destination": "SFO",
                "date": "2024-05-16", "price": 300 + i * 7, "seats_left": i % 5}))
            .collect();
        let round_messages = [
            json!({"role": "user", "content": format!("Which flights on day {round} have seats?")}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{round}"), "type": "function",
                "function": {"name": "search_flights", "arguments": format!("{{\"day\": {round}}}")}}]}),
            json!({"role": "tool", "tool_call_id": format!("call_{round}"), "content": serde_json::to_string_pretty(&rows).unwrap()}),
            json!({"role": "assistant", "content": format!("On day {round} there are 12 flights; the cheapest is HAT{:03}.", round * 12)}),
        ];
        for m in round_messages {
            let text = m.to_string();
            count += tokenizer.count(&text);
            messages.push(text);
        }
        round += 1;
    }
    messages
}

fn body_at(base: &[String], step: usize) -> String {
    let mut messages = base.to_vec();
    for i in 0..step {
        messages
            .push(json!({"role": "user", "content": format!("Next question {i}?")}).to_string());
        messages.push(json!({"role": "assistant", "content": format!("Answer {i}.")}).to_string());
    }
    messages.push(json!({"role": "user", "content": format!("Next question {step}?")}).to_string());
    format!(
        "{{\"model\":\"bench\",\"messages\":[{}]}}",
        messages.join(",")
    )
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    (at(0.5), at(0.99), mean)
}

fn show(label: &str, samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    let (p50, p99, mean) = percentiles(samples);
    println!("{label:<44} p50 {p50:>10.1?}  p99 {p99:>10.1?}  mean {mean:>10.1?}");
    (p50, p99, mean)
}

fn compile_path(tokens: usize) {
    let base = base_conversation(tokens);
    let dir = tempfile::tempdir().unwrap();
    let store =
        ctxgc_store::open(&ctxgc_store::Location::Sqlite(dir.path().join("bench.db"))).unwrap();
    let options =
        GatewayOptions::new(Upstreams::new(vec![Upstream::parse("openai").unwrap()]).unwrap());
    let sessions = Sessions::new(store, options.chat_options());
    let bodies: Vec<String> = (0..WARMUP + REQUESTS).map(|s| body_at(&base, s)).collect();
    println!("{} messages, {} bytes", base.len(), bodies[0].len());
    let mut samples = Vec::with_capacity(REQUESTS);
    for (n, body) in bodies.iter().enumerate() {
        let started = Instant::now();
        let Parsed::Conversation(conv) = parse(body.as_bytes(), Format::OpenaiChat).unwrap() else {
            panic!("a conversation")
        };
        let compiled = sessions.compile("bench", &conv).unwrap();
        let elapsed = started.elapsed();
        std::hint::black_box(&compiled.body);
        if n >= WARMUP {
            samples.push(elapsed);
        }
    }
    show(
        &format!("compile, incremental, ~{}k tokens", tokens / 1000),
        samples,
    );
}

async fn end_to_end(tokens: usize) {
    let answer = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
    let app = Router::new().fallback(move || async move {
        ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let location = ctxgc_store::Location::Sqlite(dir.path().join("bench.db"));
    let store = tokio::task::spawn_blocking(move || ctxgc_store::open(&location).unwrap())
        .await
        .unwrap();
    let mut options =
        GatewayOptions::new(Upstreams::new(vec![Upstream::parse(&upstream).unwrap()]).unwrap());
    options.quiet = true;
    let gateway = build(options, Some(store)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let through = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve_gateway(listener, gateway, std::future::pending()));

    let base = base_conversation(tokens);
    let client = reqwest::Client::new();
    let call = |url: String, body: String| {
        let client = client.clone();
        async move {
            let started = Instant::now();
            let r = client
                .post(url)
                .header("content-type", "application/json")
                .header("authorization", "Bearer sk-bench")
                .header("x-ctxgc-session", "bench")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.bytes().await.unwrap();
            started.elapsed()
        }
    };
    let (mut direct, mut gated) = (Vec::new(), Vec::new());
    for step in 0..WARMUP + REQUESTS {
        let body = body_at(&base, step);
        let d = call(format!("{upstream}/v1/chat/completions"), body.clone()).await;
        let g = call(format!("{through}/v1/chat/completions"), body).await;
        if step >= WARMUP {
            direct.push(d);
            gated.push(g);
        }
    }
    let label = format!("~{}k tokens", tokens / 1000);
    let (d50, d99, dmean) = show(&format!("direct call, {label}"), direct);
    let (g50, g99, gmean) = show(&format!("through the gateway, {label}"), gated);
    println!(
        "{:<44} p50 {:>10.1?}  p99 {:>10.1?}  mean {:>10.1?}",
        format!("added by the gateway, {label}"),
        g50.saturating_sub(d50),
        g99.saturating_sub(d99),
        gmean.saturating_sub(dmean)
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("gateway_latency: run with `cargo bench` to measure");
        return;
    }
    for tokens in [10_000, 100_000] {
        compile_path(tokens);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for tokens in [10_000, 100_000] {
        runtime.block_on(end_to_end(tokens));
    }
}
